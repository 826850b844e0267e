"""benchmarks/call_cost.py's arithmetic: CUDA calls and GPU ops per op read off a recording's trace, and what
the calibration takes out of an op against what the recorder added to it."""

from __future__ import annotations

import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import call_cost as cc  # noqa: E402

from collector.importers.kineto import trace_from_kineto  # noqa: E402
from collector.synthetic.cupti import EventRows  # noqa: E402


def test_calls_and_gpu_ops_per_op_come_from_the_trace() -> None:
    rows = EventRows()
    t = 1_000_000
    for _ in range(4):  # 4 calls of an op that launches two kernels and a copy, and a wait that is not a launch
        for name in ("cudaLaunchKernel", "cudaLaunchKernel"):
            corr = rows.call(7, name, t)
            rows.gpu("kernel", "k", 3, t + 5_000, 1_000, corr)
            t += 10_000
        corr = rows.call(7, "cudaMemcpyAsync", t)
        rows.gpu("gpu_memcpy", "Memcpy HtoD (Pinned -> Device)", 3, t + 5_000, 1_000, corr, 4096)
        rows.call(7, "cudaStreamSynchronize", t + 10_000, dur=20_000)
        t += 40_000
    trace = trace_from_kineto(rows.table(), by_start=True)
    assert cc.per_call(trace, 4) == (3.0, 3.0)
    assert cc.per_call(trace, 2) == (6.0, 6.0)


def test_an_op_costing_more_than_its_calls_calibrated_reads_above_one() -> None:
    rounds = [(10_000.0, 16_000.0, 2.0, 2.0, 2_000.0), (11_000.0, 15_000.0, 2.0, 2.0, 1_000.0)]
    rounds.append((10_500.0, 18_500.0, 2.0, 2.0, 3_000.0))
    cost = cc.median_cost("mm", rounds)
    assert (cost.plain_ns, cost.recorded_ns, cost.call_ns) == (10_500.0, 16_000.0, 2_000.0)
    assert cost.added_ns == 5_500.0
    assert cost.taken_out_ns == 4_000.0
    assert cost.left_in == 1.375
    line = cc.table([cost])[2]
    assert line == "| mm | 10.50 | 16.00 | 5.50 | 2.00 | 2.00 | 2.00 | 4.00 | 1.38 |"


def test_an_uncalibrated_recording_leaves_the_ratio_undefined() -> None:
    cost = cc.OpCost("fill", 4_000.0, 6_000.0, 1.0, 1.0, 0.0)
    assert math.isnan(cost.left_in)
