"""A CUDA graph replay loop as CUPTI records it, for tests: an event table like the recorder's capture.

Set-up: ``warmup`` eager iterations of the graph's kernels (one ``cudaLaunchKernel`` each), a capture (host
calls only: captured work does not run), then ``replays`` iterations of one ``cudaGraphLaunch`` whose kernels
carry its correlation id, and, with ``eager``, that many eager kernels launched after each replay (an
optimizer step outside the graph). The host waits for the GPU after each iteration when ``sync`` is set
(``loss.item()``), else runs ahead. Times in ns on one clock; kernels 10 us each, back to back.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from collector.traceformat.events import EventTable

PID, TID, STREAM = 4000, 4001, 7
KERNEL_NS = 10_000
GRAPH_KERNELS = ("sm90_xmma_gemm_bf16", "vectorized_elementwise_kernel<add>", "reduce_kernel<sum>")
EAGER_KERNEL = "multi_tensor_apply_kernel<adam>"


class _Rows:
    def __init__(self) -> None:
        self.rows: list[tuple[str, str, int, int, int, int, int]] = []  # cat, name, pid, tid, start, end, corr
        self.corr = 0

    def host(self, name: str, t: int, dur: int = 4_000) -> int:
        self.corr += 1
        self.rows.append(("cuda_runtime", name, PID, TID, t, t + dur, self.corr))
        return self.corr

    def kernel(self, name: str, t: int, corr: int) -> int:
        self.rows.append(("kernel", name, 0, STREAM, t, t + KERNEL_NS, corr))
        return t + KERNEL_NS


def replay_loop(replays: int = 40, kernels: int = 3, warmup: int = 3, eager: int = 0, sync: bool = True) -> EventTable:
    """The event table of the loop described in the module docstring (``kernels`` kernels in the graph)."""
    r = _Rows()
    names = [GRAPH_KERNELS[i % len(GRAPH_KERNELS)] + f"_{i}" for i in range(kernels)]
    t, gpu = 1_000_000, 0
    for _ in range(warmup):  # eager iterations before the capture
        for name in names:
            corr = r.host("cudaLaunchKernel", t)
            gpu = r.kernel(name, max(gpu, t + 5_000), corr)
            t += 6_000
        t = max(t, gpu) + 20_000
    for call in ("cudaStreamBeginCapture", "cudaStreamEndCapture", "cudaGraphInstantiate"):
        r.host(call, t, 50_000)
        t += 60_000
    for _ in range(replays):
        corr = r.host("cudaGraphLaunch", t, 8_000)
        gpu = max(gpu, t + 6_000)
        for name in names:
            gpu = r.kernel(name, gpu, corr)
        t += 10_000
        for _ in range(eager):
            corr = r.host("cudaLaunchKernel", t)
            gpu = r.kernel(EAGER_KERNEL, max(gpu, t + 5_000), corr)
            t += 6_000
        if sync:
            r.host("cudaStreamSynchronize", t, max(gpu - t, 1_000))
            t = max(t, gpu) + 30_000
        else:
            t += 2_000
    return _table(r.rows)


def _table(rows: list[tuple[str, str, int, int, int, int, int]]) -> EventTable:
    from collector.recording.kineto_capture import columns_table

    cat, name, pid, tid, start, end, corr = (list(c) for c in zip(*rows, strict=True))
    order = np.argsort(np.asarray(start), kind="stable")
    gpu = np.asarray(cat)[order] == "kernel"

    def col(values: list[Any]) -> np.ndarray:
        return np.asarray(values)[order]

    cols = {
        "ph": pd.Categorical(["X"] * len(rows)),
        "cat": pd.Categorical(col(cat)),
        "name": pd.Categorical(col(name)),
        "pid": col(pid).astype(np.int64),
        "tid": col(tid).astype(np.int64),
        "ts_ns": col(start).astype(np.int64),
        "dur_ns": (col(end) - col(start)).astype(np.int64),
        "arg_stream": np.where(gpu, STREAM, -1).astype(np.int64),
        "arg_device": np.where(gpu, 0, -1).astype(np.int64),
        "arg_correlation": col(corr).astype(np.int64),
        "arg_bytes": np.zeros(len(rows), np.int64),
    }
    return columns_table(cols, len(rows))
