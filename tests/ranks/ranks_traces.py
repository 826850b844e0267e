"""Synthetic data-parallel jobs: one Trace per rank, each on its own clock, with a planted straggler.

Every step, each rank loads data (a DataLoader range), computes (``aten::mm``), then enters an
all_reduce; all ranks leave it together, ``latency`` after the last one entered (plus a little jitter
on each rank's end), then run the optimizer. A barrier comes first. Rank ``r``'s times are the true
times plus ``offsets[r]``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from collector.model import Interval, IntervalKind, Lane, LaneKind, Marker, MarkerKind, RunMeta, Trace

MS = 1_000_000
DATA = "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"
GROUP = "default_pg (pg 0)"
LOAD_STACK = "main (train.py:10);load_batch (train.py:22)"
FORWARD_STACK = "main (train.py:10);forward (model.py:5)"
"""The sampled stacks of ``job(stacks=True)``: loading data, then computing."""


def job(
    world: int = 2,
    steps: int = 12,
    *,
    slow_rank: int = -1,
    delay_ns: int = 0,
    cause: str = "data",
    offsets: Sequence[int] = (),
    hosts: Sequence[str] = (),
    data_ns: int = 1 * MS,
    compute_ns: int = 6 * MS,
    latency_ns: int = 500_000,
    end_jitter_ns: int = 20_000,
    seed: int = 0,
    stacks: bool = False,
) -> list[Trace]:
    """With ``stacks``, each rank's main thread is sampled: ``load_batch`` while it loads data, ``forward`` while it
    computes (a lane of Python stacks, as the recorder keeps them)."""
    rng = np.random.default_rng(seed)
    offsets = list(offsets) or [0] * world
    hosts = list(hosts) or ["host-a"] * world
    rows: list[list[Interval]] = [[] for _ in range(world)]
    marks: list[list[Marker]] = [[] for _ in range(world)]
    t = 1_000 * MS
    enter = t + rng.integers(0, 200_000, world)
    leave = int(enter.max()) + latency_ns
    for r in range(world):
        end = leave + int(rng.integers(0, end_jitter_ns))
        rows[r].append(Interval(1, IntervalKind.COLLECTIVE, "gloo:barrier", int(enter[r]), end, group=GROUP))
    t = leave + MS
    for k in range(steps):
        starts = t + rng.integers(0, 100_000, world)
        enter = np.zeros(world, dtype=np.int64)
        for r in range(world):
            slow = r == slow_rank
            d = data_ns + (delay_ns if slow and cause == "data" else 0) + int(rng.integers(0, 100_000))
            c = compute_ns + (delay_ns if slow and cause == "compute" else 0) + int(rng.integers(0, 100_000))
            s = int(starts[r])
            rows[r].append(Interval(0, IntervalKind.ANNOTATION, DATA, s, s + d, step=k))
            rows[r].append(Interval(0, IntervalKind.CPU_OP, "aten::mm", s + d, s + d + c, step=k))
            if stacks:
                rows[r].append(Interval(2, IntervalKind.SAMPLE, LOAD_STACK, s, s + d, step=k))
                rows[r].append(Interval(2, IntervalKind.SAMPLE, FORWARD_STACK, s + d, s + d + c, step=k))
            enter[r] = s + d + c
        leave = int(enter.max()) + latency_ns
        for r in range(world):
            end = leave + int(rng.integers(0, end_jitter_ns))
            rows[r].append(
                Interval(
                    1, IntervalKind.COLLECTIVE, "gloo:all_reduce", int(enter[r]), end, 4 << 20, step=k, group=GROUP
                )
            )
            rows[r].append(Interval(0, IntervalKind.CPU_OP, "aten::add_", end, end + MS, step=k))
            marks[r].append(Marker(r, MarkerKind.STEP, f"step {k}", int(starts[r]), end + MS, k))
        t = leave + MS + 50_000
    traces = []
    for r in range(world):
        lanes = [Lane(r, LaneKind.CPU_THREAD, 100 + r, "main thread"), Lane(r, LaneKind.COMM_STREAM, 200 + r, "gloo")]
        if stacks:
            lanes.append(Lane(r, LaneKind.CPU_THREAD, -100 - r, "main thread: Python stack (sampled)"))
        shifted = [_shift(i, offsets[r]) for i in rows[r]]
        mk = [Marker(m.rank, m.kind, m.name, m.start_ns + offsets[r], m.end_ns + offsets[r], m.step) for m in marks[r]]
        meta = RunMeta.new(host=hosts[r], world_size=world, device_name="cpu", source="synthetic")
        traces.append(Trace.build(meta, lanes, shifted, mk))
    return traces


def _shift(i: Interval, by: int) -> Interval:
    return replace(i, start_ns=i.start_ns + by, end_ns=i.end_ns + by)


def nccl_job(
    world: int = 2,
    steps: int = 10,
    *,
    slow_rank: int = 1,
    delay_ns: int = 6 * MS,
    gpu_ns: int = 5 * MS,
    host_ns: int = 1 * MS,
    slow_host_ns: int = 0,
    sync: bool = True,
    latency_ns: int = 300_000,
) -> list[Trace]:
    """A data-parallel job on GPU ranks sharing one host clock, NCCL-style: per step the main thread launches
    the backward kernel (``gpu_ns``; ``delay_ns`` longer on ``slow_rank``), the all_reduce kernel on a comm
    stream (it starts when the backward ends and ends ``latency_ns`` after the last rank's started), the
    optimizer kernel (it waits for the all_reduce), then does ``host_ns`` of its own work (``slow_host_ns``
    more on ``slow_rank``) and, with ``sync``, waits for the optimizer (``cudaStreamSynchronize``) before the
    next step."""
    traces = []
    bwd_end = np.zeros((steps, world), dtype=np.int64)
    host_t = [1_000 * MS] * world
    plan: list[list[tuple[int, ...]]] = [[] for _ in range(world)]
    gpu_free = [0] * world
    for k in range(steps):
        for r in range(world):
            t = host_t[r]
            start = max(t + 5_000, gpu_free[r])
            bwd_end[k, r] = start + gpu_ns + (delay_ns if r == slow_rank else 0)
            plan[r].append((t, start))
        leave = int(bwd_end[k].max()) + latency_ns
        for r in range(world):
            t, start = plan[r][-1]
            opt_end = leave + 2_000 + 200_000
            gpu_free[r] = opt_end
            host_done = t + 30_000 + host_ns + (slow_host_ns if r == slow_rank else 0)
            host_t[r] = max(host_done, opt_end + 5_000) if sync else host_done
            plan[r][-1] = (t, start, int(bwd_end[k, r]), leave, opt_end, host_done, host_t[r])
    for r in range(world):
        rows: list[Interval] = []
        marks: list[Marker] = []
        ident = 1
        for k, (t, start, b_end, leave, opt_end, host_done, nxt) in enumerate(plan[r]):
            calls = [(t, "bwd"), (t + 10_000, "all_reduce"), (t + 20_000, "opt")]
            ids = {}
            for at, what in calls:
                rows.append(Interval(0, IntervalKind.LAUNCH, "cudaLaunchKernel", at, at + 4_000, step=k, id=ident))
                ids[what] = ident
                ident += 1
            gpu = [
                (1, IntervalKind.KERNEL, "backward", start, b_end, "bwd"),
                (2, IntervalKind.COLLECTIVE, "nccl:all_reduce", b_end, leave, "all_reduce"),
                (1, IntervalKind.KERNEL, "optimizer", leave + 2_000, opt_end, "opt"),
            ]
            for lane, kind, name, s, e, what in gpu:
                group = GROUP if kind is IntervalKind.COLLECTIVE else ""
                rows.append(
                    Interval(
                        lane,
                        kind,
                        name,
                        s,
                        e,
                        4 << 20 if group else 0,
                        step=k,
                        launch_id=ids[what],
                        group=group,
                        id=ident,
                    )
                )
                ident += 1
            if sync:
                rows.append(
                    Interval(
                        0,
                        IntervalKind.SYNC_WAIT,
                        "cudaStreamSynchronize",
                        host_done,
                        nxt - 5_000,
                        step=k,
                        cause="synchronize",
                        id=ident,
                    )
                )
                ident += 1
            marks.append(Marker(r, MarkerKind.STEP, f"step {k}", t, nxt, k))
        lanes = [
            Lane(r, LaneKind.CPU_THREAD, 100, "main thread"),
            Lane(r, LaneKind.COMPUTE_STREAM, 7, "stream 7 (compute)"),
            Lane(r, LaneKind.COMM_STREAM, 13, "stream 13 (nccl)"),
        ]
        meta = RunMeta.new(world_size=world, device_name="synthetic GPU", source="synthetic")
        traces.append(Trace.build(meta, lanes, rows, marks))
    return traces
