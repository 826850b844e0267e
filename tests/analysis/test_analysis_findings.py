"""Each finding fires on the run that has its problem and stays quiet on a clean run."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from analysis_traces import COMPUTE, CPU, MS, US, clean_run, iv, pageable_run, steps, trace

from collector.model import Trace
from collector.synthetic import synthetic_trace
from webapp.analysis import analyze
from webapp.analysis.causal.fixes import GRAPH_BUBBLE_NS
from webapp.analysis.findings import CRITICAL_FRAC


def _by_rule(result: Any) -> dict[str, Any]:
    return {f.rule: f for f in result.findings}


def _all_by_rule(result: Any) -> dict[str, Any]:
    """Listed and minor findings by rule."""
    return {f.rule: f for f in (*result.findings, *result.minor_findings)}


def test_clean_run_has_no_findings() -> None:
    result = analyze(clean_run(3))
    assert result.findings == ()
    assert result.metrics["copy_compute_overlap_frac"] == 1.0


PINNED_NS = (64 << 20) / 53.7  # 64 MiB at the probed 53.7 GB/s


def test_pageable_copy_cost_uses_the_bandwidth_probe() -> None:
    f = _by_rule(analyze(pageable_run()))
    page = f["pageable-copy"]
    # replayed: the copy takes PINNED_NS, the host no longer waits for it, and the kernel that waited 20 us
    # for its launch now queues right behind the copy (1 us bubble)
    assert page.cost_per_step_ns == round(12 * MS + 20 * US - np.ceil(PINNED_NS) - 1 * US)
    assert page.severity == "critical" and page.cost_per_step_ns / (28 * MS) >= CRITICAL_FRAC
    assert page.sources == ("train.py:10",)
    assert "pin_memory=True" in page.fix and "non_blocking=True" in page.fix
    assert "at 53.7 GB/s (the bandwidth probe)" in page.detail
    ev = page.evidence[0]
    assert (ev.rank, ev.start_ns, ev.end_ns, ev.interval_ids) == (0, 0, 12 * MS, (1, 0))


def test_pageable_copy_without_probe_uses_a_modest_fallback() -> None:
    t = pageable_run().with_meta(bandwidth_probe={})
    page = _by_rule(analyze(t))["pageable-copy"]
    assert page.cost_per_step_ns == 6 * MS + 20 * US - 1 * US  # FALLBACK_PINNED_SPEEDUP = 2


def test_pageable_copy_without_probe_names_the_runs_own_pinned_rate() -> None:
    """No probe, but pinned copies in the run: their rate is the one replayed, and the text says whose."""
    rows = []
    for k, memory in enumerate(("pageable", "pageable", "pinned")):
        t = k * 20 * MS
        rows += [
            iv(CPU, "sync_wait", t, t + 12 * MS, "aten::to", cause="blocking_copy", source="a.py:3", id=10 * k, step=k),
            iv(
                COMPUTE,
                "memcpy_h2d",
                t,
                t + 12 * MS,
                "copy",
                bytes=64 << 20,
                memory_kind=memory,
                launch_id=10 * k,
                id=10 * k + 1,
                step=k,
            ),
            iv(CPU, "launch", t + 12 * MS, t + 12 * MS + 5 * US, id=10 * k + 2, step=k),
            iv(
                COMPUTE,
                "kernel",
                t + 12 * MS + 10 * US,
                t + 20 * MS,
                "gemm",
                launch_id=10 * k + 2,
                id=10 * k + 3,
                step=k,
            ),
        ]
    run = trace(rows, steps(*[(k * 20 * MS, (k + 1) * 20 * MS) for k in range(3)]), probe=False)
    page = _all_by_rule(analyze(run))["pageable-copy"]
    assert "(this run's own pinned copies)" in page.detail and "bandwidth probe" not in page.detail
    # its pinned copies ran at the pageable ones' rate: the saving is the waits, and the text says so
    assert "Pinned copies run no faster here (5.6 against 5.6 GB/s)" in page.detail


def _pinned_blocking_run(n_steps: int = 4) -> Trace:
    """Per 10 ms step: the host copies a pinned 64 MiB batch (1.25 ms) without non_blocking and waits for
    it, then 1 ms of host work, then launches an 8 ms kernel; the GPU idles while the host waits."""
    rows: list[Any] = []
    for k in range(n_steps):
        t = k * 10_265 * US
        rows += [
            iv(
                CPU,
                "sync_wait",
                t,
                t + 1_255 * US,
                "cudaMemcpyAsync",
                cause="blocking_copy",
                source="b.py:4",
                id=10 * k,
                step=k,
            ),
            iv(
                COMPUTE,
                "memcpy_h2d",
                t + 5 * US,
                t + 1_255 * US,
                "copy",
                bytes=64 << 20,
                memory_kind="pinned",
                launch_id=10 * k,
                id=10 * k + 1,
                step=k,
            ),
            iv(CPU, "launch", t + 2_255 * US, t + 2_260 * US, id=10 * k + 2, step=k),
            iv(COMPUTE, "kernel", t + 2_265 * US, t + 10_265 * US, "gemm", launch_id=10 * k + 2, id=10 * k + 3, step=k),
        ]
    return trace(rows, steps(*[(k * 10_265 * US, (k + 1) * 10_265 * US) for k in range(n_steps)]))


def test_blocking_copy_of_pinned_memory_costs_the_host_wait_it_causes() -> None:
    f = _by_rule(analyze(_pinned_blocking_run()))
    block = f["blocking-copy"]
    assert block.sources == ("b.py:4",) and "non_blocking=True" in block.fix
    # non-blocking: the host goes on after the 10 us call, so the kernel's launch comes 1.245 ms sooner, but
    # the kernel still queues behind the copy: the step shrinks by the host work that overlapped the copy
    assert 0 < block.cost_per_step_ns <= 1_250 * US


def test_a_pageable_copy_is_not_a_blocking_copy_finding() -> None:
    """non_blocking alone does not help a pageable copy: pinning is its fix (pageable-copy)."""
    result = analyze(pageable_run())
    assert "blocking-copy" not in {f.rule for f in (*result.findings, *result.minor_findings)}


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
    result = analyze(_sync_run((0, 1, 2, 3)))
    f = _by_rule(result)["sync-in-loop"]
    # without the wait the host launches each kernel 6 ms + 1.995 ms of host work after the last, and the
    # 7.99 ms kernel is done by then: a step takes 7.995 ms instead of 10 (a run this short keeps no read)
    assert result.per_step["cost_sync_in_loop_ns"].tolist() == [2_005 * US] * 4
    assert f.severity == "critical"  # a fifth of each step
    assert f.sources == ("loop.py:7",)
    assert ".item()" in f.fix
    assert len(f.evidence) == 4


def _item_loop(n: int, read_back: Callable[[int], tuple[str, str] | None]) -> list[Any]:
    """Per 10 ms step: a 7 ms kernel and ``.item()`` on it (loop.py:7); in the steps where ``read_back(k)`` gives
    (cause, source), a 2 ms kernel launched after it and its result read back at once (a 2 ms wait)."""
    rows: list[Any] = []
    for k in range(n):
        t = k * 10 * MS
        rows += [
            iv(CPU, "launch", t, t + 5 * US, id=10 * k, step=k),
            iv(COMPUTE, "kernel", t + 10 * US, t + 7 * MS, "k", launch_id=10 * k, id=10 * k + 1, step=k),
            iv(
                CPU,
                "sync_wait",
                t + 6 * MS,
                t + 7 * MS + 5 * US,
                "item",
                cause="item",
                source="loop.py:7",
                id=10 * k + 2,
                step=k,
            ),
        ]
        read = read_back(k)
        if read:
            rows += [
                iv(CPU, "launch", t + 7 * MS + 10 * US, t + 7 * MS + 15 * US, id=10 * k + 4, step=k),
                iv(
                    COMPUTE,
                    "kernel",
                    t + 7 * MS + 20 * US,
                    t + 9 * MS,
                    "k2",
                    launch_id=10 * k + 4,
                    id=10 * k + 5,
                    step=k,
                ),
                iv(
                    CPU,
                    "sync_wait",
                    t + 7 * MS + 20 * US,
                    t + 9 * MS + 5 * US,
                    read[0],
                    cause=read[0],
                    source=read[1],
                    id=10 * k + 6,
                    step=k,
                ),
            ]
    return rows


def test_sync_in_loop_names_recurring_syncs_that_cost_but_not_one_offs() -> None:
    """item() every step; every 4th step a copy read back (.cpu() of a 2 ms kernel's output: named, 'less
    often'), in others a print() of a value already there (waits 10 us for nothing: not named); one
    synchronize() (left out)."""
    rows = _item_loop(12, lambda k: ("cpu", "loop.py:11") if k % 4 == 2 else None)
    extra = {
        0: ("print", "loop.py:9"),
        4: ("print", "loop.py:9"),
        8: ("print", "loop.py:9"),
        5: ("synchronize", "loop.py:20"),
    }
    for k, (cause, source) in extra.items():
        t = k * 10 * MS
        rows.append(
            iv(
                CPU,
                "sync_wait",
                t + 7 * MS + 10 * US,
                t + 7 * MS + 20 * US,
                cause,
                cause=cause,
                source=source,
                id=10 * k + 3,
                step=k,
            )
        )
    f = _by_rule(analyze(trace(rows, steps(*[(k * 10 * MS, (k + 1) * 10 * MS) for k in range(12)]))))["sync-in-loop"]
    assert f.sources == ("loop.py:7", "loop.py:11")
    assert "Also in the loop, less often: cpu at loop.py:11 (in 3 of 12 steps)" in f.detail
    assert "loop.py:9" not in f.detail and "loop.py:20" not in f.detail


def test_sync_seen_once_is_not_in_the_loop() -> None:
    assert "sync-in-loop" not in _by_rule(analyze(_sync_run((2,))))


@pytest.mark.parametrize(
    ("device", "bubble_ns"),
    [("", GRAPH_BUBBLE_NS), ("NVIDIA H100 80GB HBM3", 30), ("NVIDIA H200", 200), ("NVIDIA A100-SXM4-80GB", 200)],
)
def test_host_bound_fires_when_kernels_wait_for_launches(device: str, bubble_ns: int) -> None:
    rows = []
    for i in range(200):  # 10 us launches, 2 us kernels started right after each launch
        t = i * 12 * US
        rows += [
            iv(CPU, "launch", t, t + 10 * US, id=2 * i, step=i // 100),
            iv(COMPUTE, "kernel", t + 10 * US, t + 12 * US, "tiny", launch_id=2 * i, id=2 * i + 1, step=i // 100),
        ]
    run = trace(rows, steps((0, 100 * 12 * US), (100 * 12 * US, 200 * 12 * US)))
    result = analyze(dataclasses.replace(run, meta=dataclasses.replace(run.meta, device_name=device)))
    f = _by_rule(result)["host-bound"]
    assert f.severity == "critical"
    assert "100 launches per step" in f.detail and "torch.compile" in f.fix
    # one graph launch per step: the 100 kernels of 2 us run closely packed, as far apart as on this GPU model
    assert f.cost_per_step_ns == pytest.approx(100 * 12 * US - 100 * (2 * US + bubble_ns), abs=10 * US)
    said = f"as tiny kernels ran on an {device.split()[1]}" if bubble_ns == 30 or "H200" in device else "the wider"
    assert f"replayed {bubble_ns / 1000:g} us apart, {said}" in f.detail
    assert result.metrics["cp_host_step_median_ns"] > result.metrics["cp_compute_step_median_ns"]


def test_host_bound_reads_its_average_savings_against_the_average_step() -> None:
    """Three steps of 100 launches and one with 6 ms of host work ahead of them: the median step is 1.2 ms and
    the average 2.7 ms. The savings are averages over the steps, so the bound is said against the average step
    (a bound above the median step would read as a saving larger than a step), the host's time by medians."""
    from webapp.analysis.rules.base import ms

    rows, bounds, t = [], [], 0
    for k in range(4):
        start = t
        t += 6 * MS if k == 3 else 0
        for i in range(100):
            n = 100 * k + i
            rows += [
                iv(CPU, "launch", t, t + 10 * US, id=2 * n, step=k),
                iv(COMPUTE, "kernel", t + 10 * US, t + 12 * US, "tiny", launch_id=2 * n, id=2 * n + 1, step=k),
            ]
            t += 12 * US
        bounds.append((start, t))
    result = analyze(trace(rows, steps(*bounds)))
    f = _by_rule(result)["host-bound"]
    mean_ns = sum(b - a for a, b in bounds) / 4
    assert mean_ns == 2.7 * MS
    assert f"took {ms(1.2 * MS - 2 * US)} per step (medians)" in f.detail, f.detail
    assert f" of the {ms(mean_ns)} a step takes" in f.detail, f.detail
    bound = dict(f.options)["a host with no time of its own (bound)"]
    assert 1.2 * MS < bound < mean_ns


def test_unlinked_gpu_gaps_are_not_blamed_on_anything() -> None:
    """Without launches the replay keeps GPU work where it ran: the gap is 'other' on the critical path."""
    rows = [iv(COMPUTE, "kernel", 0, 4 * MS, id=0), iv(COMPUTE, "kernel", 7 * MS, 10 * MS, id=1)]
    result = analyze(trace(rows, steps((0, 10 * MS))))
    assert result.findings == ()
    # the second kernel could not start before the first ended (one stream, in order); what held it 3 ms more
    # the trace does not say: that gap is other, both kernels are on the path
    assert result.per_step.loc[0, "cp_compute_ns"] == 7 * MS and result.per_step.loc[0, "cp_other_ns"] == 3 * MS


@pytest.mark.parametrize(
    "pattern, rule, severity",
    [
        ("naive", "pageable-copy", "critical"),
        ("pinned", "no-copy-overlap", "warning"),
        ("sync-trap", "sync-in-loop", "warning"),
        ("launch-bound", "host-bound", "critical"),
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


def test_host_work_after_a_sync_overlaps_the_gpu_once_the_sync_is_gone() -> None:
    """After the sync the host launches ten 100 us kernels 50 us apart and then works 3.5 ms: without the
    sync all of it runs while the 5 ms kernel does, so the first step shrinks to the GPU's own 6 ms."""
    result = analyze(_refill_run(launch_us=50))
    f = {x.rule: x for x in (*result.findings, *result.minor_findings)}
    assert "host-bound" not in f or f["host-bound"].cost_per_step_ns == 0
    fixed = result.per_step["step_time_fixed_ns"].iloc[0]
    assert 6 * MS <= fixed <= 6 * MS + 20 * US  # 5 ms + ten 100 us kernels, with their bubbles


def test_host_slower_than_gpu_is_host_bound_after_a_sync_too() -> None:
    # launches of 600 us for 100 us kernels: the host needs longer to issue a step than the GPU to run it
    f = _by_rule(analyze(_refill_run(launch_us=600)))
    assert "host-bound" in f and "sync-in-loop" in f
    assert "CUDA graphs" in f["host-bound"].detail
    # what the graph step's replay assumes, where it is only good to about 15%
    assert "0.2 us apart, the wider of the gaps measured (an H100 0.03 us, an H200 0.2 us)" in f["host-bound"].detail


def _gpu_bound_with_item(n: int, tag: bool) -> Trace:
    """Per step: ten 5 us launches of 1 ms kernels queued back to back, then the host waits for the last one
    (``.item()``) and starts the next step 21 us after the wait ends. ``tag=False``: only the step markers say
    which step anything is in, as in a converted trace."""
    rows, bounds, t, i = [], [], 0, 0
    for k in range(n):
        step = k if tag else -1
        end = t + 10 * US
        for j in range(10):
            rows.append(iv(CPU, "launch", t + j * 10 * US, t + j * 10 * US + 5 * US, id=i, step=step))
            start = end if j == 0 else end + 1 * US
            end = start + 1 * MS
            rows.append(iv(COMPUTE, "kernel", start, end, f"k{j}", launch_id=i, id=i + 1, step=step))
            i += 2
        rows.append(iv(CPU, "sync_wait", t + 100 * US, end + 10 * US, cause="item", source="train.py:42", id=i))
        i += 1
        bounds.append((t, end + 31 * US))
        t = end + 31 * US
    return trace(rows, steps(*bounds))


def test_a_sync_on_a_gpu_bound_loop_costs_its_gap_whether_or_not_the_work_is_tagged() -> None:
    """The GPU runs 10 ms per step and the host 0.1 ms: without the .item() the host runs ahead and the GPU
    keeps its pace, so the sync costs the 40 us gap it leaves per step. Steps read from markers alone are
    placed on the GPU's work all the same (its launches say which step it is in), never at the host's pace."""
    from collector.steps import find_steps

    for tag in (True, False):
        result = analyze(find_steps(_gpu_bound_with_item(8, tag)))
        sync = {f.rule: f for f in result.minor_findings}["sync-in-loop"]  # under 0.5% of the step: not a problem
        assert sync.cost_per_step_ns == pytest.approx(40 * US, abs=6 * US)
        assert result.what_if["speedup"] == pytest.approx(1.0, abs=0.01)


def test_a_finding_costs_its_saving_over_the_run_not_its_best_windows() -> None:
    """A fix that saves 3 ms in two windows and moves 3 ms of backlog into the third saves 1 ms per step:
    the window it made slower counts too."""
    from webapp.analysis.causal import causal_model
    from webapp.analysis.context import prepare
    from webapp.analysis.findings import find_all
    from webapp.analysis.rules.base import Detection, RuleContext

    class Planted:
        name, title, fix = "planted", "A planted fix", "Fix it."

        def detect(self, ctx: RuleContext) -> Detection:
            return Detection("Planted.", lambda graph: graph, saving=np.array([3 * MS, 3 * MS, -3 * MS]))

    rd = prepare(pageable_run(3))
    cm = causal_model(rd)
    ctx = RuleContext(rd, cm.graph, cm.steps, cm.base_steps, {}, float("nan"), cm.replayed)
    found, minor, costs, _ = find_all(ctx, rules=[Planted()])
    (finding,) = (*found, *minor)
    assert finding.cost_per_step_ns == 1 * MS and finding.cost_total_ns == 3 * MS
    assert costs["planted"].tolist() == [3 * MS, 3 * MS, -3 * MS]


def test_copy_fixes_say_only_what_the_copies_lack() -> None:
    """Pinned copies are not told to pin; non-blocking pageable uploads are told they lack pinned memory, not
    non_blocking."""
    assert "Needs pinned host memory" not in _all_by_rule(analyze(_pinned_blocking_run()))["no-copy-overlap"].fix
    page = _by_rule(analyze(pageable_run(3)))
    assert "Needs pinned host memory" in page["no-copy-overlap"].fix
    assert "already pass non_blocking" not in page["pageable-copy"].fix  # these uploads held the host
    # the same uploads with non_blocking=True: their call returns at once, and the host waits for nothing
    run = pageable_run(3)
    rows = run.intervals.copy()
    held = (rows["kind"] == "sync_wait").to_numpy()
    rows.loc[held, "kind"] = "launch"
    rows.loc[held, "cause"] = ""
    rows.loc[held, "end_ns"] = rows.loc[held, "start_ns"] + 10 * US
    rows.loc[held, "dur_ns"] = 10 * US
    quiet = _all_by_rule(analyze(dataclasses.replace(run, intervals=rows)))
    assert "already pass non_blocking=True" in quiet["pageable-copy"].fix


def test_a_sync_already_read_every_ten_steps_is_left_as_it_is() -> None:
    """item() every step; a print() of a value the GPU computes, every 10th step from step 3 on (as
    `if i % 10 == 0` does when the recording starts mid-loop): the fix keeps the print as it is, so it is
    neither named nor dropped."""
    rows = _item_loop(30, lambda k: ("print", "loop.py:9") if k % 10 == 3 else None)
    result = analyze(trace(rows, steps(*[(k * 10 * MS, (k + 1) * 10 * MS) for k in range(30)])))
    f = _by_rule(result)["sync-in-loop"]
    assert f.sources == ("loop.py:7",) and "loop.py:9" not in f.detail
    table = result.sync_sources.set_index("source")
    assert table.loc["loop.py:9", "saving_ns"] == 0
