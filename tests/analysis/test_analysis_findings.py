"""Each finding fires on the run that has its problem and stays quiet on a clean run."""

from __future__ import annotations

from typing import Any

import pytest
from analysis_traces import COMPUTE, CPU, MS, US, clean_run, iv, pageable_run, steps, trace

from collector.model import Trace
from collector.synthetic import synthetic_trace
from webapp.analysis import analyze
from webapp.analysis.findings import CRITICAL_FRAC


def _by_rule(result: Any) -> dict[str, Any]:
    return {f.rule: f for f in result.findings}


def test_clean_run_has_no_findings() -> None:
    result = analyze(clean_run(3))
    assert result.findings == ()
    assert result.metrics["copy_compute_overlap_frac"] == 1.0


def test_pageable_copy_cost_uses_the_bandwidth_probe() -> None:
    f = _by_rule(analyze(pageable_run()))
    page = f["pageable-copy"]
    pinned_ns = (64 << 20) / 53.7  # 64 MiB at the probed 53.7 GB/s
    assert page.cost_per_step_ns == pytest.approx(12 * MS - pinned_ns, abs=1)
    assert page.severity == "critical" and page.cost_per_step_ns / (28 * MS) >= CRITICAL_FRAC
    assert page.sources == ("train.py:10",)
    assert "pin_memory=True" in page.fix and "non_blocking=True" in page.fix
    ev = page.evidence[0]
    assert (ev.rank, ev.start_ns, ev.end_ns, ev.interval_ids) == (0, 0, 12 * MS, (1, 0))


def test_pageable_copy_without_probe_uses_a_modest_fallback() -> None:
    t = pageable_run().with_meta(bandwidth_probe={})
    page = _by_rule(analyze(t))["pageable-copy"]
    assert page.cost_per_step_ns == 6 * MS  # FALLBACK_PINNED_SPEEDUP = 2


def test_copy_overlap_and_blocking_copy_findings() -> None:
    f = _by_rule(analyze(pageable_run()))
    # after pinning, the copy would still take 1.25 ms with no kernel running: 4.5% of 28 ms -> info
    assert f["no-copy-overlap"].cost_per_step_ns == pytest.approx((64 << 20) / 53.7, abs=1)
    assert f["no-copy-overlap"].severity == "info"
    # the GPU waited 20 us after the blocking copy before the next kernel arrived: 0.07% of the step, so
    # the finding is minor (kept in the JSON, not listed)
    result = analyze(pageable_run())
    minor = {m.rule: m for m in result.minor_findings}
    assert "blocking-copy" not in f and minor["blocking-copy"].cost_per_step_ns == 20 * US
    assert "non_blocking=True" in minor["blocking-copy"].fix
    assert result.to_dict()["minor_findings"][0]["rule"] == "blocking-copy"


def _sync_run(with_sync_in: tuple[int, ...]) -> Trace:
    """Four 10 ms steps of one 8 ms kernel; in the listed steps an item() sync, then 2 ms of host work."""
    rows, markers = [], []
    for k in range(4):
        t = k * 10 * MS
        rows += [
            iv(CPU, "launch", t, t + 5 * US, id=10 * k),
            iv(COMPUTE, "kernel", t + 10 * US, t + 8 * MS, "k", launch_id=10 * k, id=10 * k + 1),
        ]
        if k in with_sync_in:
            rows += [
                iv(
                    CPU,
                    "sync_wait",
                    t + 6 * MS,
                    t + 8 * MS + 5 * US,
                    "cudaStreamSynchronize",
                    cause="item",
                    source="loop.py:7",
                    id=10 * k + 2,
                ),
                iv(CPU, "cpu_op", t + 8 * MS + 5 * US, t + 10 * MS, "log", id=10 * k + 3),
            ]
        markers.append((t, t + 10 * MS))
    return trace(rows, steps(*markers))


def test_sync_in_loop_fires_with_cost_and_lines() -> None:
    f = _by_rule(analyze(_sync_run((0, 1, 2, 3))))["sync-in-loop"]
    # gap [8 ms, 10 ms + 10 us) of each step overlaps the sync; the last step's gap ends at its window
    assert f.severity == "critical"
    assert f.sources == ("loop.py:7",)
    assert ".item()" in f.fix
    assert len(f.evidence) == 4


def test_sync_in_loop_names_recurring_syncs_but_not_one_offs() -> None:
    """item() every step; print() every 4th step (named, 'less often'); one synchronize() (left out)."""
    rows, markers = [], []
    for k in range(12):
        t = k * 10 * MS
        rows += [
            iv(CPU, "launch", t, t + 5 * US, id=10 * k),
            iv(COMPUTE, "kernel", t + 10 * US, t + 7 * MS, "k", launch_id=10 * k, id=10 * k + 1),
            iv(
                CPU,
                "sync_wait",
                t + 6 * MS,
                t + 7 * MS + 5 * US,
                "item",
                cause="item",
                source="loop.py:7",
                id=10 * k + 2,
            ),
        ]
        extra = {
            0: ("print", "loop.py:9"),
            4: ("print", "loop.py:9"),
            8: ("print", "loop.py:9"),
            5: ("synchronize", "loop.py:20"),
        }.get(k)
        if extra:
            rows.append(
                iv(
                    CPU,
                    "sync_wait",
                    t + 7 * MS + 10 * US,
                    t + 7 * MS + 20 * US,
                    extra[0],
                    cause=extra[0],
                    source=extra[1],
                    id=10 * k + 3,
                )
            )
        markers.append((t, t + 10 * MS))
    f = _by_rule(analyze(trace(rows, steps(*markers))))["sync-in-loop"]
    assert f.sources == ("loop.py:7", "loop.py:9")
    assert "Also in the loop, less often: print at loop.py:9 (every ~4 steps)" in f.detail
    assert "loop.py:20" not in f.detail
    assert "print(t)" in f.fix


def test_sync_seen_once_is_not_in_the_loop() -> None:
    assert "sync-in-loop" not in _by_rule(analyze(_sync_run((2,))))


def test_launch_bound_fires_when_kernels_wait_for_launches() -> None:
    rows = []
    for i in range(200):  # 10 us launches, 2 us kernels started right after each launch
        t = i * 12 * US
        rows += [
            iv(CPU, "launch", t, t + 10 * US, id=2 * i),
            iv(COMPUTE, "kernel", t + 10 * US, t + 12 * US, "tiny", launch_id=2 * i, id=2 * i + 1),
        ]
    result = analyze(trace(rows, steps((0, 200 * 12 * US))))
    f = _by_rule(result)["launch-bound"]
    assert f.severity == "critical" and f.cost_per_step_ns == 200 * 10 * US
    assert "torch.compile" in f.fix or "CUDA" in f.fix
    assert result.metrics["idle_launch_bound_ns"] == 200 * 10 * US


def test_idle_gaps_fire_on_long_unexplained_gaps() -> None:
    rows = [iv(COMPUTE, "kernel", 0, 4 * MS, id=0), iv(COMPUTE, "kernel", 7 * MS, 10 * MS, id=1)]
    f = _by_rule(analyze(trace(rows, steps((0, 10 * MS)))))["idle-gaps"]
    assert f.cost_per_step_ns == 3 * MS and f.severity == "critical"
    assert (f.evidence[0].start_ns, f.evidence[0].end_ns) == (4 * MS, 7 * MS)
    assert "idle or in unrecorded code 100%" in f.detail


@pytest.mark.parametrize(
    "pattern, rule, severity",
    [
        ("naive", "pageable-copy", "critical"),
        ("pinned", "no-copy-overlap", "warning"),
        ("sync-trap", "sync-in-loop", "warning"),
        ("launch-bound", "launch-bound", "critical"),
    ],
)
def test_synthetic_patterns_get_their_finding(pattern: str, rule: str, severity: str) -> None:
    f = _by_rule(analyze(synthetic_trace(4000, pattern=pattern, steps=4)))
    assert f[rule].severity == severity


def test_synthetic_clean_run_has_no_warnings() -> None:
    result = analyze(synthetic_trace(4000, pattern="overlap", steps=4, ranks=2))
    assert [f for f in result.findings if f.severity != "info"] == []
    assert result.summary()["findings"] == 0


def test_finding_to_dict_is_json_ready() -> None:
    d = analyze(pageable_run()).findings[0].to_dict()
    assert d["rule"] == "pageable-copy" and isinstance(d["evidence"][0]["interval_ids"], list)


def _refill_run(launch_us: int) -> Trace:
    """Two 10 ms steps: a 5 ms kernel, an item() sync ending 30 us *before* it (host/GPU clock skew), then
    ten kernels of 100 us each launched just in time by ``launch_us`` long launches."""
    rows, markers, i = [], [], 0
    for k in range(2):
        t = k * 10 * MS
        rows += [
            iv(CPU, "launch", t, t + 5 * US, id=i, step=k),
            iv(COMPUTE, "kernel", t + 10 * US, t + 5 * MS, "big", launch_id=i, id=i + 1, step=k),
            iv(
                CPU,
                "sync_wait",
                t + 20 * US,
                t + 5 * MS - 30 * US,
                "sync",
                cause="item",
                source="a.py:1",
                id=i + 2,
                step=k,
            ),
        ]
        i += 3
        h = t + 5 * MS
        for _ in range(10):
            rows += [
                iv(CPU, "launch", h, h + launch_us * US, id=i, step=k),
                iv(
                    COMPUTE,
                    "kernel",
                    h + launch_us * US,
                    h + (launch_us + 100) * US,
                    "small",
                    launch_id=i,
                    id=i + 1,
                    step=k,
                ),
            ]
            h += (launch_us + 100) * US
            i += 2
        markers.append((t, t + 10 * MS))
    return trace(rows, steps(*markers))


def test_refill_after_a_sync_is_blamed_on_the_sync() -> None:
    result = analyze(_refill_run(launch_us=50))
    f = _by_rule(result)
    assert "sync-in-loop" in f and "launch-bound" not in f
    ps = result.per_step.iloc[0]
    # the 50 us launch gap before each of the ten small kernels drains into the sync's cost
    assert ps["cost_sync_in_loop_ns"] >= 10 * 50 * US
    assert ps["idle_launch_bound_ns"] == 0


def test_host_slower_than_gpu_is_launch_bound_even_after_a_sync() -> None:
    # launches of 600 us for 100 us kernels: the host needs longer to issue a step than the GPU to run it
    f = _by_rule(analyze(_refill_run(launch_us=600)))
    assert "launch-bound" in f
