"""Run metadata taken once at start: device name and properties, versions, H2D bandwidth probe."""

from __future__ import annotations

import functools
import mmap
import os
import time
from collections.abc import Callable
from typing import Any

PROBE_BYTES = 32 * 1024**2
"""Bytes per probe copy: on an H100 a 32 MiB pinned copy reads the bandwidth of a 64 MiB one (52.8 against
51.5-53.6 GB/s) in half the probe's time (41 against 43-81 ms), and 16 MiB reads 10% low."""


def device_info(device: int) -> dict[str, Any]:
    """``device_name``, ``device_properties``, ``torch_version``, ``cuda_version`` for RunMeta."""
    import torch

    p = torch.cuda.get_device_properties(device)
    props: dict[str, Any] = {"index": device}
    for key in ("total_memory", "multi_processor_count", "major", "minor", "L2_cache_size", "uuid"):
        value = getattr(p, key, None)
        if value is not None:
            props[key] = value if isinstance(value, (int, float)) else str(value)
    return {
        "device_name": str(p.name),
        "device_properties": props,
        "torch_version": str(torch.__version__),
        "cuda_version": str(torch.version.cuda or ""),
    }


SHM_PROBE_BYTES = 4 * 1024**2
"""Bytes of shared memory :func:`probe_shared_pages` reads fresh: 1,024 pages; the probe (two reads of them) takes a
few ms."""


def probe_shared_pages(nbytes: int = SHM_PROBE_BYTES, reps: int = 2) -> dict[str, float]:
    """What this process's first read of shared memory costs per 4 KiB page, ns: the pages a DataLoader worker
    wrote a batch into reach this process as a fresh mapping, and a pageable upload of that batch faults each in
    as the driver stages it. Pages written through one mapping of a memory file are read through another, twice;
    the first read's time over the second's, per page, the least of ``reps``. Key ``shm_fault_ns_per_4kib``;
    none where the host has no memory files (``os.memfd_create``, Linux)."""
    if not hasattr(os, "memfd_create"):
        return {}
    chunk, pages, best = bytes(1 << 20), nbytes // 4096, float("inf")
    for _ in range(reps):
        try:
            fd = os.memfd_create("streamscope-probe")
        except OSError:
            return {}
        try:
            for offset in range(0, nbytes, len(chunk)):
                os.pwrite(fd, chunk, offset)
            with mmap.mmap(fd, nbytes) as fresh:
                t0 = time.perf_counter_ns()
                fresh[::4096]  # one byte a page: each page's first read faults it in
                t1 = time.perf_counter_ns()
                fresh[::4096]
                t2 = time.perf_counter_ns()
            best = min(best, max((t1 - t0) - (t2 - t1), 0) / pages)
        except OSError:
            return {}
        finally:
            os.close(fd)
    return {"shm_fault_ns_per_4kib": round(best, 1)}


def probe_bandwidth(nbytes: int = PROBE_BYTES, reps: int = 3) -> dict[str, float]:
    """H2D copy bandwidth in GB/s (1e9 bytes/s) from pinned and pageable host memory: the best of ``reps``; and
    what a pageable upload of a batch in shared memory pays per page on this host (:func:`probe_shared_pages`).

    Keys ``h2d_pinned_gbps``, ``h2d_pageable_gbps`` and ``shm_fault_ns_per_4kib``. Timed with CUDA events on a
    private stream.
    """
    import torch

    n = nbytes // 4
    dst = torch.empty(n, dtype=torch.float32, device="cuda")
    out: dict[str, float] = {}
    stream = torch.cuda.Stream()
    for key, pinned in (("h2d_pinned_gbps", True), ("h2d_pageable_gbps", False)):
        src = torch.ones(n, dtype=torch.float32, pin_memory=pinned)
        best = 0.0
        with torch.cuda.stream(stream):
            for _ in range(reps + 1):  # the first is a warm-up
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record(stream)
                dst.copy_(src, non_blocking=pinned)
                end.record(stream)
                end.synchronize()
                ms = start.elapsed_time(end)
                if ms > 0:
                    best = max(best, nbytes / (ms * 1e-3) / 1e9)
        out[key] = round(best, 2)
        del src
    del dst
    return {**out, **probe_shared_pages()}


def event_overhead_ms(reps: int = 20) -> float:
    """Extra time (ms) that bracketing one kernel with two timing events adds to the kernel's duration.

    On a busy stream, ``reps`` kernels are timed once as a group and once each between their own events;
    the difference per kernel is what events add (their own processing between kernel and timestamp).
    The recorder subtracts it from each GPU interval (never more than half the interval).
    """
    import statistics

    import torch

    stream = torch.cuda.current_stream()
    record = torch._C._CudaEventBase.record
    x = torch.ones(1 << 24, device="cuda")
    busy = torch.randn(4096, 4096, device="cuda")
    for _ in range(3):
        x.mul_(1.0)

    def event() -> Any:
        return torch.cuda.Event(enable_timing=True)

    torch.cuda.synchronize()
    busy @ busy  # keeps the GPU busy while the rest is queued behind it
    g0, g1 = event(), event()
    record(g0, stream)
    for _ in range(reps):
        x.mul_(1.0)
    record(g1, stream)
    pairs = [(event(), event()) for _ in range(reps)]
    for start, end in pairs:
        record(start, stream)
        x.mul_(1.0)
        record(end, stream)
    torch.cuda.synchronize()
    plain = g0.elapsed_time(g1) / reps
    each = statistics.median(s.elapsed_time(e) for s, e in pairs)
    del x, busy
    return max(0.0, float(each - plain))


def tiny_op_ns(ops: int = 64, reps: int = 5, warm: int = 20) -> float:
    """Host time of one tiny CUDA op (``x.fill_(1.0)``, one kernel launch) in ns, by :func:`op_ns`. Measured
    before and while recording, the difference is the recorder's own host cost per launch. The whole takes
    about 340 launches. The fill kernel is the one ``torch.zeros`` and ``torch.ones`` launch, so a program that
    made a tensor with them has loaded it (another kernel's first launch loads its module: 11 ms of the
    recording's start on an H100)."""
    import torch

    x = torch.zeros(1, device="cuda")
    return op_ns(functools.partial(x.fill_, 1.0), ops, reps, warm)


def op_ns(op: Callable[[], Any], ops: int = 64, reps: int = 5, warm: int = 20) -> float:
    """Host time of one call of ``op`` (CUDA work) in ns: the quickest of ``reps`` timed runs of ``ops`` calls,
    after ``warm`` calls, the GPU synchronized after each run (the quickest is the op's own cost; slower runs
    were interrupted). Short runs, as many as an interruption is unlikely to reach them all."""
    import torch

    for _ in range(warm):
        op()
    torch.cuda.synchronize()
    runs = []
    for _ in range(reps):
        t0 = time.perf_counter_ns()
        for _ in range(ops):
            op()
        runs.append((time.perf_counter_ns() - t0) / ops)
        torch.cuda.synchronize()
    return float(min(runs))
