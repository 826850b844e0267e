"""Offline reports in Chromium with the network cut: how much timeline they carry and the run page's tabs.

A run whose intervals fit the budget is drawn from every interval at any zoom and says nothing is coarse; a
larger run draws any step from views of its own, finer as it zooms, and says how fine; the Host time and
Collectives tabs are the run page's, filled from the file."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from ranks.ranks_traces import job, nccl_job
from timeline_page import set_view

from collector.load import load_trace
from collector.ranks.merge import merge_traces
from collector.synthetic import synthetic_trace
from collector.synthetic.ranks import rank_job
from webapp import PACKAGE_ROOT
from webapp.report import PreparedRun, prepare_run, run_report

pytestmark = pytest.mark.browser

FIRST_PAINT = "window.ssTimeline && window.ssTimeline.stats.firstPaintMs !== null"
FULL_DETAIL = "drawn from every interval of the run, embedded one by one (full detail)"


@pytest.fixture
def open_report(page, tmp_path: Path) -> Callable[[PreparedRun, int | None], None]:
    """open_report(run, budget): write the run's report and open it offline, drawn; fails on a request other
    than the file or on a script error."""
    page.context.set_offline(True)
    seen: list[str] = []
    errors: list[str] = []
    page.on("request", lambda r: seen.append(r.url))
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.route("**/*", lambda route: route.continue_() if route.request.url.startswith("file:") else route.abort())

    def open_it(run: PreparedRun, budget: int | None = None) -> None:
        path = tmp_path / f"{run.name}.html"
        path.write_text(run_report(run) if budget is None else run_report(run, budget), encoding="utf-8")
        page.goto(path.as_uri())
        page.wait_for_function(FIRST_PAINT)
        assert seen == [path.as_uri()] and errors == [], (seen, errors)

    return open_it


def drawn_in(page: Any, a: int, b: int) -> tuple[int, int]:
    """(intervals drawn one by one, merged boxes) of the timeline's data overlapping [a, b) (ns from the start)."""
    return tuple(
        page.evaluate(
            f"""(() => {{ let n = 0, m = 0;
            for (const l of ssTimeline.data.lanes) {{
              for (let i = 0; i < l.s.length; i++) if (l.s[i] < {b} && l.s[i] + l.d[i] > {a}) n++;
              for (let i = 0; i < l.bs.length; i++) if (l.bs[i] < {b} && l.bs[i] + l.bd[i] > {a}) m++;
            }} return [n, m]; }})()"""
        )
    )


def test_a_run_that_fits_is_drawn_from_every_interval_at_any_zoom(page, open_report) -> None:
    run = prepare_run(merge_traces(rank_job(2, 1300, steps=9)), "two-ranks")
    open_report(run)
    assert page.inner_text("#tl-source") == FULL_DETAIL  # the worst step, first
    assert page.inner_text("#tl-detail").endswith("every interval of the run (2,612), one by one; nothing is coarse.")
    assert page.locator("#left-out").count() == 0
    iv, o = run.trace.intervals, run.index.origin_ns
    for width in (5_000_000, 50_000, 2_000):  # ns: a step, a few ops, one op
        mid = int(iv["start_ns"].iloc[len(iv) // 2]) - o
        set_view(page, mid - width // 2, mid + width // 2)
        a, b = page.evaluate("[ssTimeline.view[0], ssTimeline.view[1]]")
        want = int(((iv["start_ns"] - o < b) & (iv["end_ns"] - o > a)).sum())
        assert drawn_in(page, a, b) == (want, 0), width
        assert page.inner_text("#tl-source") == FULL_DETAIL


def test_the_report_has_the_run_pages_host_time_and_collectives_tabs(page, open_report) -> None:
    run = prepare_run(merge_traces(job(2)), "two-ranks-colls")
    open_report(run)
    button = page.locator("#tab-colls-button")
    assert button.is_visible()
    button.click()
    rows = page.locator("#colls-table tbody tr")
    assert rows.count() == len(run.analysis.ranks["collectives"]) > 1
    heads = page.locator("#colls-table thead th").all_inner_texts()
    assert heads[:5] == ["#", "Name", "Process group", "Bytes", "Ranks"]  # as the run page's tab
    assert rows.nth(1).locator("td").all_inner_texts()[1:5] == ["all_reduce", "default_pg (pg 0)", "4 MiB", "2"]
    page.click("[data-tab=tab-host]")
    assert page.inner_text("#host-note") == run.analysis.host_frames_missing != ""
    assert page.inner_text("#host-table") == "nothing to show"


def test_the_collectives_tab_of_one_rank_lists_each_collectives_duration(page, open_report) -> None:
    run = prepare_run(nccl_job(world=1)[0], "one-rank-nccl")
    open_report(run)
    page.click("#tab-colls-button")
    rows = page.locator("#colls-table tbody tr")
    assert rows.count() == 10
    heads = page.locator("#colls-table thead th").all_inner_texts()
    assert heads == ["#", "Name", "Process group", "Bytes", "Duration"]  # no other rank: no skew, wait, last
    assert rows.nth(0).locator("td").all_inner_texts()[1:] == ["all_reduce", "default_pg (pg 0)", "4 MiB", "300 µs"]


def test_the_host_time_tab_lists_the_frames_of_a_traced_run(page, open_report) -> None:
    path = PACKAGE_ROOT / "sample_traces" / "torch-profiler-overlap.pt.trace.json.gz"
    run = prepare_run(load_trace(path), "profiler")
    open_report(run)
    assert not page.locator("#tab-colls-button").is_visible()  # one rank
    page.click("[data-tab=tab-host]")
    note = page.inner_text("#host-note")
    assert note.startswith("Host time over the steps by Python frame (torch.profiler's Python calls, exact)")
    assert page.locator("#host-table tbody tr").count() == len(run.analysis.host_frames) > 0


def test_a_larger_run_draws_any_step_from_views_of_its_own(page, open_report) -> None:
    run = prepare_run(synthetic_trace(200_000, pattern="sync-trap", steps=10), "large")
    open_report(run, 1_500_000)  # the whole run needs about 2.4 MB
    focus = {int(f["step"]) for f in page.evaluate("STREAMSCOPE.timeline.focus")}
    other = next(int(s) for s in run.analysis.per_step["step"] if int(s) not in focus)
    seq = int(page.get_attribute("#timeline", "data-seq") or 0)
    page.click(f"#steps-table tbody tr:nth-child({other + 1})")
    page.wait_for_function(f"Number(document.getElementById('timeline').dataset.seq) > {seq}")
    first = page.inner_text("#tl-source")
    assert first.startswith(f"drawn from the view of step {other} at ")
    a, b = page.evaluate("[ssTimeline.view[0], ssTimeline.view[1]]")
    set_view(page, a + (b - a) * 0.4, a + (b - a) * 0.6)  # a fifth of the step: a finer level of the same step
    assert page.evaluate("ssTimeline.opts.embedded.lastPicked.level") >= 1
    assert page.inner_text("#tl-source").startswith(f"drawn from the view of step {other} at ")
    assert page.inner_text("#tl-source") != first
    left = page.text_content("#left-out") or ""
    assert "each step is embedded down to " in left and "for every view" in left and "step -" not in left


def test_a_tiny_budget_still_draws_and_says_what_is_coarse(page, open_report) -> None:
    run = prepare_run(load_trace(PACKAGE_ROOT / "sample_traces" / "naive.json.gz"), "naive-tiny")
    open_report(run, int(0.05 * 2**20))
    left = page.text_content("#left-out") or ""
    assert "over the data budget" in left and "step -" not in left and " 1 views" not in left
    assert page.inner_text("#tl-detail").startswith("Timeline data: ")
