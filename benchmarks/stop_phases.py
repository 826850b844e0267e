"""The CPU side of stopping a CUPTI recording, without a GPU: a synthetic capture of N kernels and their
launches (as the recorder's own CUPTI client reads them) tabulated, imported, joined with host facts
(steps) and written, in seconds per million intervals. The GPU part (flushing CUPTI's buffers) is measured
by overhead.py on the device.

    python3 benchmarks/stop_phases.py --kernels 500000
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernels", type=int, default=500_000)
    args = parser.parse_args()
    n = args.kernels
    records = capture(n)
    t_first = int(records.columns[cc.RUNTIME]["start"][0])
    ops = [
        (
            77,
            "aten::mul" if i % 2 == 0 else "aten::add",
            t_first + i * LAUNCH_EVERY_NS - 100,
            t_first + i * LAUNCH_EVERY_NS + 1_100,
        )
        for i in range(400)
    ]
    steps = n * LAUNCH_EVERY_NS // STEP_NS
    facts = HostFacts(
        markers=[("step", f"step {i}", t_first + i * STEP_NS, t_first + (i + 1) * STEP_NS, i) for i in range(steps)],
        threads={4242: "main thread"},
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
    m = len(trace.intervals) / 1e6
    print(
        f"{len(trace.intervals):,} intervals; seconds per million: tabulate {(t1 - t0) / m:.2f}, "
        f"importer {(t2 - t1) / m:.2f}, join {(t3 - t2) / m:.2f}, write {(t4 - t3) / m:.2f}, "
        f"total {(t4 - t0) / m:.2f}"
    )


if __name__ == "__main__":
    main()
