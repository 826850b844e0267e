"""A step's row in the per-step table, in real Chromium, on a merged 2-rank gloo-style job: on the run page a row
of a rank the lane picker does not show brings that rank's lanes and zooms to its step; the run page and the
offline report zoom one rank's step to the same window (one padding rule, common.js stepWindow)."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from timeline_page import LANE_RANKS

pytestmark = pytest.mark.browser

FIRST_PAINT = "window.ssTimeline && window.ssTimeline.stats.firstPaintMs !== null"
DRAWN_RANKS = "[...new Set(ssTimeline.data.lanes.filter(l => l.s.length + l.bs.length).map(l => l.rank))]"


@pytest.fixture(scope="module")
def two_ranks(server: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A merged 2-rank job (gloo collectives on CPU) written to a file and uploaded; its catalog row, its file and
    a step whose window on rank 1 is not rank 0's (so zooming to the wrong rank's step shows)."""
    from ranks.ranks_traces import job

    from collector.ranks.merge import merge_traces
    from collector.traceformat.write import write_trace

    path = Path(tmp_path_factory.mktemp("ranks2")) / "two-ranks.json.gz"
    write_trace(merge_traces(job(2, steps=8)), str(path))
    req = urllib.request.Request(server + "/api/runs?name=two-ranks.json.gz", data=path.read_bytes(), method="POST")
    with urllib.request.urlopen(req, timeout=60) as resp:
        run: dict[str, Any] = json.loads(resp.read())["run"]
    assert run["ranks"] == 2
    return {"run": run, "path": path}


def _steps(page: Any) -> dict[tuple[int, int], tuple[int, int]]:
    """(rank, step) -> (start, end), ns from the run start, from the page's own step windows."""
    rows = page.evaluate(
        "(() => { const P = window.STREAMSCOPE, t0 = P.run.start_ns;"
        " return P.analysis.steps.map(s => [s.rank, s.step, s.start_ns - t0, s.end_ns - t0]); })()"
    )
    return {(r, k): (a, b) for r, k, a, b in rows}


def _far_apart_step(steps: dict[tuple[int, int], tuple[int, int]]) -> int:
    """A step in the middle of the run whose start on rank 1 is at least 10 µs from rank 0's."""
    middle = sorted(k for r, k in steps if r == 1)[1:-1]
    return next(k for k in middle if abs(steps[(1, k)][0] - steps[(0, k)][0]) > 10_000)


def _expected(window: tuple[int, int]) -> tuple[float, float]:
    a, b = window
    pad = max((b - a) * 0.03, 1000)
    return a - pad, b + pad


def _click_step_row(page: Any, rank: int, step: int) -> None:
    """Click the per-step table's row of ``rank``'s ``step`` (its cells carry their raw values in data-v)."""
    page.wait_for_selector("#steps-table tbody tr")
    index = page.evaluate(
        f"""[...document.querySelectorAll('#steps-table tbody tr')].findIndex(tr =>
              Number(tr.cells[0].dataset.v) === {rank} && Number(tr.cells[1].dataset.v) === {step})"""
    )
    assert index >= 0, (rank, step)
    page.locator("#steps-table tbody tr").nth(index).click()


def _seq(page: Any) -> int:
    return int(page.get_attribute("#timeline", "data-seq") or 0)


def test_a_step_row_of_a_rank_the_picker_hides_shows_that_ranks_lanes(page, server, two_ranks, shot) -> None:
    page.goto(f"{server}/runs/{two_ranks['run']['id']}")
    page.wait_for_function(FIRST_PAINT)
    page.locator("#tl-rank").select_option("0")  # the lanes of rank 0 only
    assert page.evaluate(LANE_RANKS) == [0]
    steps = _steps(page)
    step = _far_apart_step(steps)

    seq = _seq(page)
    _click_step_row(page, 1, step)
    page.wait_for_function(f"Number(document.getElementById('timeline').dataset.seq) > {seq}")
    assert 1 in page.evaluate(LANE_RANKS)
    page.wait_for_function(f"ssTimeline.data && {DRAWN_RANKS}.includes(1)")  # rank 1's intervals are drawn
    view = page.evaluate("ssTimeline.view.slice()")
    assert view == pytest.approx(_expected(steps[(1, step)]), abs=1), "zoomed to rank 1's step"
    assert page.evaluate("ssTimeline.highlight && ssTimeline.highlight.label") == "rank 1"
    shot(page, "step-row-other-rank")


def test_the_run_page_and_the_report_zoom_a_step_row_to_the_same_window(page, server, two_ranks) -> None:
    from collector.load import load_trace
    from webapp.report import prepare_run, run_report

    page.goto(f"{server}/runs/{two_ranks['run']['id']}")
    page.wait_for_function(FIRST_PAINT)
    steps = _steps(page)
    step = _far_apart_step(steps)
    _click_step_row(page, 1, step)
    on_run_page = page.evaluate("ssTimeline.view.slice()")

    report = two_ranks["path"].with_suffix(".html")
    report.write_text(run_report(prepare_run(load_trace(two_ranks["path"]), "two-ranks")), encoding="utf-8")
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.context.set_offline(True)
    page.goto(report.as_uri())
    page.wait_for_function(FIRST_PAINT)
    assert _steps(page) == steps  # one run, one clock: the report's step windows are the run page's
    _click_step_row(page, 1, step)
    in_report = page.evaluate("ssTimeline.view.slice()")
    assert errors == []

    assert on_run_page == pytest.approx(_expected(steps[(1, step)]), abs=1)
    assert in_report == pytest.approx(on_run_page, abs=1)
