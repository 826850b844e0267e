"""What the pages, reports and CLI show of an analysis: GPU figures only with GPU work, and a what-if that lists
exactly the findings it applies, by title."""

from __future__ import annotations

from ranks.ranks_traces import job

from collector.ranks.merge import merge_traces
from webapp.analysis import analyze, catalog
from webapp.analysis.report import analysis_text, what_if_rows, what_if_sum_note
from webapp.figures import all_metric_rows, metric_cards, step_time_figure

MS = 1_000_000


def test_what_if_rows_are_the_findings_it_applies_in_their_order_by_title() -> None:
    findings = [
        {"rule": "straggler", "title": "Rank 1 is the straggler", "cost_per_step_ns": 40 * MS},
        {"rule": "sync-in-loop", "title": "Host syncs inside the loop", "cost_per_step_ns": 2 * MS},
        {"rule": "pageable-copy", "title": "Copies through pageable memory", "cost_per_step_ns": MS},
    ]
    what_if = {
        "step_time_now_ns": 50 * MS,
        "step_time_fixed_ns": 8 * MS,
        "speedup": 6.25,
        "saving_straggler_ns": 40 * MS,
        "saving_sync_in_loop_ns": 2 * MS,
        "saving_idle_gaps_ns": 5 * MS,  # no such finding: not shown
    }
    assert what_if_rows(what_if, findings) == [
        {"rule": "straggler", "title": "Rank 1 is the straggler", "saving_ns": 40 * MS},
        {"rule": "sync-in-loop", "title": "Host syncs inside the loop", "saving_ns": 2 * MS},
    ]


def test_the_what_if_says_why_its_lines_do_not_add_up_to_its_headline() -> None:
    rows = [{"saving_ns": 8 * MS}, {"saving_ns": 7 * MS}]
    assert what_if_sum_note({"saving_applied_ns": 14.5 * MS}, rows) == ""  # within 10%: they add up
    note = what_if_sum_note({"saving_applied_ns": 9.7 * MS}, rows)
    assert "drops by 9.700 ms, not 15.000 ms" in note and "fixes interact" in note
    one = what_if_sum_note({"saving_applied_ns": 0.18 * MS}, rows[:1])
    assert "drops by 180 µs, not 8.000 ms" in one and "some steps" in one
    assert what_if_sum_note({"saving_applied_ns": 0.0}, []) == ""


def test_a_run_on_cpu_ranks_shows_host_and_collective_figures_and_no_gpu_ones() -> None:
    result = analyze(merge_traces(job(2, slow_rank=1, delay_ns=8 * MS)))
    m = result.metrics
    assert not catalog.gpu_work(m) and m["gpu_busy_ns"] == 0  # gloo runs its collectives on host threads
    shown = [c["key"] for c in metric_cards(m)] + [r["key"] for r in all_metric_rows(m)]
    assert not any(catalog.get(k) and catalog.get(k).gpu for k in shown)  # type: ignore[union-attr]
    assert {"host_busy_step_median_ns", "collective_step_median_ns"} <= set(shown)
    text = analysis_text(result)
    assert "GPU" not in text.split("\n\n")[1]  # the metrics block and the per-rank table
    assert "Host busy / step" in text and "Collectives / step" in text
    few = result.per_step.head(2).to_dict(orient="records")
    bars, breakdown = step_time_figure(few, gpu=False), step_time_figure(few, gpu=True)
    assert bars is not None and bars["data"][0]["name"] == "rank 0"  # bars of step time, no GPU breakdown
    assert breakdown is not None and breakdown["layout"]["barmode"] == "stack"  # the breakdown, with GPU work


def test_the_cli_what_if_names_findings_by_title() -> None:
    result = analyze(merge_traces(job(2, slow_rank=1, delay_ns=8 * MS)))
    text = analysis_text(result)
    rows = what_if_rows(result.what_if, result.findings)
    for row in rows:
        assert f"{row['title']}: -" in text
    assert ("What if the findings were fixed" in text) == bool(rows)


def test_launches_without_gpu_work_say_the_gpu_side_was_not_recorded() -> None:
    """A torch.profiler trace taken without the CUDA activity: launches on the host, nothing on the GPU."""
    from analysis_traces import CPU, US, iv, steps, trace

    from webapp.analysis import analyze

    rows = [iv(CPU, "launch", k * 100 * US, k * 100 * US + 5 * US, "cudaLaunchKernel", id=k) for k in range(6)]
    notes = analyze(trace(rows, steps(*[(k * 100 * US, (k + 1) * 100 * US) for k in range(6)]))).notes
    assert any(n.startswith("The trace has 6 CUDA launches but no GPU work") for n in notes)
    assert not any("CPU ranks" in n for n in notes)
