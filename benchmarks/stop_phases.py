"""The CPU side of stopping a CUPTI recording, without a GPU: a synthetic capture of N kernels and their
launches (as the recorder's own CUPTI client reads them) tabulated, imported, joined with host facts
(steps, a blocking call's span and a stack sample every 20 launches) and written, in seconds per million
intervals, and in ms for a short script's few hundred kernels (the fixed cost; the first stop in a process
and the best of the rest). The GPU part (flushing CUPTI's buffers) is measured by overhead.py on the device.

    python3 benchmarks/stop_phases.py --kernels 500000
    python3 benchmarks/stop_phases.py --kernels 200 --repeats 5
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from collector.importers.kineto import trace_from_kineto  # noqa: E402
from collector.model import RunMeta  # noqa: E402
from collector.recording import cupti_client as cc  # noqa: E402
from collector.recording.client_capture import event_table  # noqa: E402
from collector.recording.enrich import HostFacts, enrich  # noqa: E402
from collector.recording.heap import steady_heap  # noqa: E402
from collector.traceformat.write import write_trace  # noqa: E402

LAUNCH_EVERY_NS = 5_000
STEP_NS = 2_000_000
SPAN_EVERY = 20
"""A blocking call's span and a stack sample every this many launches."""


def capture(n: int) -> cc.Records:
    """n kernels on one stream, each launched by a cudaLaunchKernel 3 us before it starts."""
    t = np.arange(n, dtype=np.int64) * LAUNCH_EVERY_NS + 10**12
    records = cc.Records()
    records.columns[cc.CONCURRENT_KERNEL] = {
        "start": t + 3_000,
        "end": t + 4_000,
        "device": np.zeros(n, np.int64),
        "stream": np.full(n, 7, np.int64),
        "correlation": np.arange(n, dtype=np.int64),
        "name": np.arange(n, dtype=np.int64) % 2,
    }
    records.names[cc.CONCURRENT_KERNEL] = {0: "void mul_kernel<float>(float*)", 1: "void add_kernel<float>(float*)"}
    records.columns[cc.RUNTIME] = {
        "cbid": np.full(n, 211, np.int64),
        "start": t,
        "end": t + 1_000,
        "thread": np.full(n, 77, np.int64),
        "correlation": np.arange(n, dtype=np.int64),
    }
    records.names[cc.RUNTIME] = {211: "cudaLaunchKernel"}
    return records


def stop(n: int) -> tuple[int, list[float]]:
    """Intervals of the trace and seconds per phase (tabulate, importer, join, write) of one stop."""
    records = capture(n)
    t_first = int(records.columns[cc.RUNTIME]["start"][0])
    ops = [
        (
            77,
            "aten::mul" if i % 2 == 0 else "aten::add",
            t_first + i * LAUNCH_EVERY_NS - 100,
            t_first + i * LAUNCH_EVERY_NS + 1_100,
        )
        for i in range(min(400, n))
    ]
    steps = n * LAUNCH_EVERY_NS // STEP_NS
    every = range(0, n, SPAN_EVERY)
    facts = HostFacts(
        spans=[
            (4242, "item", t_first + i * LAUNCH_EVERY_NS, t_first + i * LAUNCH_EVERY_NS + 2_000, "t.py:3", 0)
            for i in every
        ],
        markers=[("step", f"step {i}", t_first + i * STEP_NS, t_first + (i + 1) * STEP_NS, i) for i in range(steps)],
        threads={4242: "main thread"},
        samples=[
            (t_first + i * LAUNCH_EVERY_NS, t_first + (i + 1) * LAUNCH_EVERY_NS, "t.py:<module>:3") for i in every
        ],
        sampled_thread=4242,
    )
    with steady_heap():  # as the recorder's stop runs
        t0 = time.perf_counter()
        table = event_table(records, ops, {77: 4242}, lambda ns: ns, lambda ns: ns)
        t1 = time.perf_counter()
        raw = trace_from_kineto(table, by_start=True)  # as the recorder imports
        t2 = time.perf_counter()
        trace = enrich(raw, facts, RunMeta.new(clock="unix_ns", notes={"timing": "cupti"}))
        t3 = time.perf_counter()
        with tempfile.TemporaryDirectory() as folder:
            write_trace(trace, Path(folder) / "stop.json.gz")
        t4 = time.perf_counter()
    return len(trace.intervals), [t1 - t0, t2 - t1, t3 - t2, t4 - t3]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernels", type=int, default=500_000)
    parser.add_argument("--repeats", type=int, default=1, help="stops in this process (the first pays first calls)")
    args = parser.parse_args()
    runs = [stop(args.kernels) for _ in range(max(args.repeats, 1))]
    n = runs[0][0]
    for label, (_, t) in [
        ("first", runs[0]),
        *([("best of the rest", min(runs[1:], key=lambda r: sum(r[1])))] if len(runs) > 1 else []),
    ]:
        m = n / 1e6
        print(
            f"{n:,} intervals, {label}: seconds per million: tabulate {t[0] / m:.2f}, importer {t[1] / m:.2f}, "
            f"join {t[2] / m:.2f}, write {t[3] / m:.2f}, total {sum(t) / m:.2f} ({sum(t) * 1e3:.1f} ms)"
        )


if __name__ == "__main__":
    main()
