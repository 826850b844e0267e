"""Synthetic traces for tests and benchmarks: ``synthetic_trace(n, pattern=...)``; Kineto-shaped files in kineto_json.

The run is built with numpy (no Python loop over intervals; one loop iteration per step and rank), so
ten million intervals take a few seconds. Each rank has a CPU thread lane (copy issues, kernel launches,
sync waits with their source lines), a compute stream (kernels) and a transfer stream (prefetch copies),
and one ``step`` marker per step. Timings follow a training loop measured on an H200: a batch copy
costs about 7.7% of the step's compute when pinned and 10x that when pageable.

Patterns:

- ``overlap``: pinned ``non_blocking`` copies on a second stream, overlapped with compute; no per-step
  sync, so the host runs ahead of the GPU. The clean run.
- ``pinned``: pinned ``non_blocking`` copies on the compute stream (serialised with compute), no sync.
- ``naive``: pageable blocking copies on the compute stream and a ``loss.item()`` sync each step.
- ``sync-trap``: like ``overlap`` plus several data-dependent syncs (``nonzero``) inside each step, each
  followed by host work while the GPU drains, and a ``torch.cuda.synchronize()`` at the step's end.
- ``launch-bound``: many tiny kernels whose launches take longer than the kernels run (synchronized per
  step).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from collector.model import (
    INTERVAL_KIND_DTYPE,
    KIND_CODE,
    LANE_KIND_CODE,
    LANE_KIND_DTYPE,
    MEMORY_CODE,
    MEMORY_KIND_DTYPE,
    Lane,
    LaneKind,
    RunMeta,
    Trace,
    conform_intervals,
    conform_markers,
)

PATTERNS = ("overlap", "pinned", "naive", "sync-trap", "launch-bound")

PINNED_GBPS = 53.7  # H2D pinned bandwidth measured on the H200, bytes per ns
PAGEABLE_GBPS = 5.6  # H2D pageable bandwidth measured there
COPY_FRACTION = 0.077  # pinned batch copy time / compute time per step (1.3 ms / 16.3 ms on an H200)

KERNEL_NAMES = (
    "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x256x64",
    "void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl>",
    "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::MeanOps>>",
    "void cutlass::Kernel2<cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_32x32_128x2_tn_align8>",
    "void at::native::elementwise_kernel<128, 2, at::native::AddFunctor<float>>",
    "void at::native::(anonymous namespace)::fused_dropout_kernel_vec<float, float, 4>",
)
CAUSES = ("", "blocking_copy", "item", "synchronize", "nonzero")
SOURCES = ("", "train.py:31", "train.py:48", "train.py:61", "model.py:112")
NAMES = (
    *KERNEL_NAMES,
    "cudaLaunchKernel",
    "aten::to",
    "aten::item",
    "aten::nonzero",
    "cudaStreamSynchronize",
    "cudaDeviceSynchronize",
    "cudaMemcpyAsync",
    "Memcpy HtoD (Pinned -> Device)",
    "Memcpy HtoD (Pageable -> Device)",
    "Memcpy DtoH (Device -> Pageable)",
    "python",
)
_NAME = {n: i for i, n in enumerate(NAMES)}


@dataclass(frozen=True)
class _Timing:
    kernel_ns: float  # mean kernel duration
    launch_ns: float  # host time per launch call
    py_ns: float  # host time between launches (Python, dispatcher)
    latency_ns: int = 4_000  # launch end -> earliest kernel start
    bubble_ns: int = 1_500  # device gap between queued kernels on one stream


_TIMINGS = {
    "launch-bound": _Timing(kernel_ns=3_000, launch_ns=5_000, py_ns=3_000),
}
_DEFAULT_TIMING = _Timing(kernel_ns=60_000, launch_ns=5_000, py_ns=2_000)


class _Columns:
    """Column chunks appended per (rank, step), concatenated once at the end."""

    def __init__(self) -> None:
        self.chunks: dict[str, list[np.ndarray]] = {
            c: []
            for c in (
                "lane",
                "kind",
                "name",
                "start_ns",
                "end_ns",
                "bytes",
                "memory_kind",
                "non_blocking",
                "step",
                "source",
                "cause",
                "launch_id",
                "id",
            )
        }
        self.next_id = 0

    def add(
        self,
        lane: int,
        kind: str,
        name: np.ndarray | str,
        start: np.ndarray | int,
        end: np.ndarray | int,
        step: int,
        *,
        nbytes: int = 0,
        memory: str = "",
        non_blocking: bool = False,
        source: str = "",
        cause: str = "",
        launch_id: np.ndarray | int = -1,
    ) -> np.ndarray:
        start_a = np.atleast_1d(np.asarray(start, dtype=np.int64))
        n = len(start_a)
        ids = np.arange(self.next_id, self.next_id + n, dtype=np.int64)
        self.next_id += n
        name_codes = np.full(n, _NAME[name], np.int16) if isinstance(name, str) else name.astype(np.int16)
        c = self.chunks
        c["lane"].append(np.full(n, lane, np.int32))
        c["kind"].append(np.full(n, KIND_CODE[kind], np.int8))
        c["name"].append(name_codes)
        c["start_ns"].append(start_a)
        c["end_ns"].append(np.broadcast_to(np.asarray(end, dtype=np.int64), (n,)))
        c["bytes"].append(np.full(n, nbytes, np.int64))
        c["memory_kind"].append(np.full(n, MEMORY_CODE[memory], np.int8))
        c["non_blocking"].append(np.full(n, non_blocking, bool))
        c["step"].append(np.full(n, step, np.int32))
        c["source"].append(np.full(n, SOURCES.index(source), np.int8))
        c["cause"].append(np.full(n, CAUSES.index(cause), np.int8))
        c["launch_id"].append(np.broadcast_to(np.asarray(launch_id, dtype=np.int64), (n,)))
        c["id"].append(ids)
        return ids

    def frame(self, lanes: tuple[Lane, ...]) -> pd.DataFrame:
        col = {k: np.concatenate(v) if v else np.zeros(0) for k, v in self.chunks.items()}
        lane = col["lane"].astype(np.int32)
        lane_rank = np.array([ln.rank for ln in lanes], np.int32)
        lane_kind = np.array([LANE_KIND_CODE[ln.kind] for ln in lanes], np.int8)
        labels = sorted({ln.label for ln in lanes})
        lane_label = np.array([labels.index(ln.label) for ln in lanes], np.int16)
        lane_ident = np.array([ln.ident for ln in lanes], np.int64)
        return pd.DataFrame(
            {
                "id": col["id"],
                "rank": lane_rank[lane],
                "lane": lane,
                "lane_kind": _cat(lane_kind[lane], LANE_KIND_DTYPE),
                "stream": lane_ident[lane],
                "lane_label": _cat(lane_label[lane], pd.CategoricalDtype(labels)),
                "kind": _cat(col["kind"], INTERVAL_KIND_DTYPE),
                "name": _cat(col["name"], pd.CategoricalDtype(list(NAMES))),
                "start_ns": col["start_ns"],
                "end_ns": col["end_ns"],
                "bytes": col["bytes"],
                "memory_kind": _cat(col["memory_kind"], MEMORY_KIND_DTYPE),
                "non_blocking": col["non_blocking"].astype(bool),
                "step": col["step"],
                "source": _cat(col["source"], pd.CategoricalDtype(list(SOURCES))),
                "cause": _cat(col["cause"], pd.CategoricalDtype(list(CAUSES))),
                "launch_id": col["launch_id"],
            }
        )


def _cat(codes: Any, dtype: Any) -> pd.Categorical:
    return pd.Categorical.from_codes(codes, dtype=dtype)


def _launch_kernels(
    cols: _Columns,
    rng: np.random.Generator,
    tm: _Timing,
    k: int,
    t: int,
    gpu_free: int,
    cpu: int,
    stream: int,
    step: int,
) -> tuple[int, int]:
    """Launch ``k`` kernels from host time ``t``; returns (host time after, compute stream free time)."""
    launch_dur = rng.normal(tm.launch_ns, tm.launch_ns * 0.1, k).clip(1_000).astype(np.int64)
    py = rng.exponential(tm.py_ns, k).astype(np.int64)
    l_start = t + np.concatenate(([0], np.cumsum(launch_dur + py)[:-1]))
    l_end = l_start + launch_dur
    lids = cols.add(cpu, "launch", "cudaLaunchKernel", l_start, l_end, step)
    kdur = rng.gamma(2.0, tm.kernel_ns / 2.0, k).clip(1_000).astype(np.int64)
    # start_i = max(launch_end_i + latency, end_{i-1} + bubble), solved with a running maximum
    p = np.concatenate(([0], np.cumsum(kdur + tm.bubble_ns)[:-1]))
    k_start = p + np.maximum(gpu_free, np.maximum.accumulate(l_end + tm.latency_ns - p))
    k_end = k_start + kdur
    names = rng.integers(0, len(KERNEL_NAMES), k).astype(np.int16)
    cols.add(stream, "kernel", names, k_start, k_end, step, launch_id=lids)
    return int(l_end[-1] + py[-1]), int(k_end[-1])


def _sync(cols: _Columns, t: int, until: int, cpu: int, step: int, name: str, cause: str, source: str) -> int:
    """A host sync wait from ``t`` until the GPU work it waits for ends (plus return latency)."""
    end = max(t + 2_000, until + 3_000)
    cols.add(cpu, "sync_wait", name, t, end, step, cause=cause, source=source)
    return end


def synthetic_trace(
    n_intervals: int, *, ranks: int = 1, steps: int = 20, seed: int = 0, pattern: str = "overlap"
) -> Trace:
    """A synthetic run of about ``n_intervals`` intervals over ``ranks`` ranks and ``steps`` steps.

    Raises ValueError for an unknown pattern or non-positive sizes.
    """
    if pattern not in PATTERNS:
        raise ValueError(f"unknown synthetic pattern {pattern!r}; choose one of {', '.join(PATTERNS)}")
    if n_intervals < 1 or ranks < 1 or steps < 1:
        raise ValueError("n_intervals, ranks and steps must be positive")
    tm = _TIMINGS.get(pattern, _DEFAULT_TIMING)
    rng = np.random.default_rng(seed)
    per_step = max(1, n_intervals // (ranks * steps))
    k = max(1, (per_step - 6) // 2)
    lanes: list[Lane] = []
    for r in range(ranks):
        lanes += [
            Lane(r, LaneKind.CPU_THREAD, 4000 + r, f"rank {r} main thread"),
            Lane(r, LaneKind.COMPUTE_STREAM, 7, f"rank {r} stream 7 (compute)"),
            Lane(r, LaneKind.TRANSFER_STREAM, 13, f"rank {r} stream 13 (transfer)"),
        ]
    cols = _Columns()
    markers: list[dict[str, object]] = []
    compute_ns = k * (tm.kernel_ns + tm.bubble_ns)
    nbytes = int(compute_ns * COPY_FRACTION * PINNED_GBPS)
    pinned_ns = int(nbytes / PINNED_GBPS)
    pageable_ns = int(nbytes / PAGEABLE_GBPS)
    for r in range(ranks):
        cpu, comp, xfer = 3 * r, 3 * r + 1, 3 * r + 2
        t = 1_000_000 + int(rng.integers(0, 50_000))
        gpu_free = xfer_free = t
        for s in range(steps):
            step_start = t
            if pattern == "naive":
                c0 = max(t + 8_000, gpu_free)
                c1 = c0 + pageable_ns
                lid = cols.add(cpu, "cpu_op", "aten::to", t, c1 + 5_000, s, source="train.py:31")
                _sync(cols, t + 6_000, c1, cpu, s, "cudaMemcpyAsync", "blocking_copy", "train.py:31")
                cols.add(
                    comp,
                    "memcpy_h2d",
                    "Memcpy HtoD (Pageable -> Device)",
                    c0,
                    c1,
                    s,
                    nbytes=nbytes,
                    memory="pageable",
                    launch_id=lid,
                )
                t, gpu_free = c1 + 5_000, c1
            else:
                lid = cols.add(cpu, "cpu_op", "aten::to", t, t + 10_000, s, non_blocking=True, source="train.py:31")
                on_comp = pattern == "pinned"
                c0 = max(t + 8_000, gpu_free if on_comp else xfer_free)
                c1 = c0 + pinned_ns
                cols.add(
                    comp if on_comp else xfer,
                    "memcpy_h2d",
                    "Memcpy HtoD (Pinned -> Device)",
                    c0,
                    c1,
                    s,
                    nbytes=nbytes,
                    memory="pinned",
                    non_blocking=True,
                    launch_id=lid,
                )
                t += 10_000
                if on_comp:
                    gpu_free = c1
                else:
                    xfer_free = c1
            if pattern == "sync-trap":
                parts = np.array_split(np.arange(k), 4)
                for part in parts:
                    if len(part):
                        t, gpu_free = _launch_kernels(cols, rng, tm, len(part), t, gpu_free, cpu, comp, s)
                    t = _sync(cols, t, gpu_free, cpu, s, "aten::nonzero", "nonzero", "model.py:112")
                    host_ns = int(compute_ns * 0.03)  # Python work after each sync while the GPU idles
                    cols.add(cpu, "cpu_op", "python", t, t + host_ns, s)
                    t += host_ns
            else:
                t, gpu_free = _launch_kernels(cols, rng, tm, k, t, gpu_free, cpu, comp, s)
            if pattern == "naive":
                d0 = max(t + 6_000, gpu_free)
                d1 = d0 + 2_500
                lid = cols.add(cpu, "cpu_op", "aten::item", t, d1 + 8_000, s, source="train.py:48")
                cols.add(
                    comp,
                    "memcpy_d2h",
                    "Memcpy DtoH (Device -> Pageable)",
                    d0,
                    d1,
                    s,
                    nbytes=4,
                    memory="pageable",
                    launch_id=lid,
                )
                _sync(cols, t + 4_000, d1, cpu, s, "cudaStreamSynchronize", "item", "train.py:48")
                t, gpu_free = d1 + 8_000, d1
            elif pattern in ("sync-trap", "launch-bound"):
                t = _sync(
                    cols, t, max(gpu_free, xfer_free), cpu, s, "cudaDeviceSynchronize", "synchronize", "train.py:61"
                )
            t += 20_000  # Python between steps
            markers.append(
                {"rank": r, "kind": "step", "name": f"step {s}", "step": s, "start_ns": step_start, "end_ns": t}
            )
    lanes_t = tuple(lanes)
    meta = RunMeta.new(
        source="synthetic",
        workload=f"synthetic:{pattern}",
        world_size=ranks,
        device_name="synthetic",
        bandwidth_probe={"h2d_pinned_gbps": PINNED_GBPS, "h2d_pageable_gbps": PAGEABLE_GBPS},
    )
    frame = conform_intervals(cols.frame(lanes_t))
    return Trace(meta, lanes_t, frame, conform_markers(pd.DataFrame(markers)))
