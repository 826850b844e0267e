"""Many ranks in real Chromium: a merged 4-rank run opened with its ranks collapsed shows one summary lane
per rank (busy and comm drawn), a click on a rank's name expands it (only its lanes are fetched) and collapses
it back, and a click on a cell of the rank x step heatmap moves the timeline to that rank's step."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from timeline_page import LANE_RANKS

pytestmark = pytest.mark.browser

FIRST_PAINT = "window.ssTimeline && window.ssTimeline.stats.firstPaintMs !== null"
SUMMARY_ROWS = "ssTimeline.lanes.filter(r => r.extra === 'ranksum').map(r => r.rank)"


@pytest.fixture(scope="module")
def four_ranks(server: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A merged 4-rank synthetic job (rank 2 a planted straggler) uploaded to the server; its catalog row."""
    from ranks.ranks_traces import MS, job

    from collector.ranks.merge import merge_traces
    from collector.traceformat.write import write_trace

    merged = merge_traces(job(4, slow_rank=2, delay_ns=8 * MS, offsets=[0, 2 * MS, -MS, 5 * MS], hosts="abcd"))
    path = Path(tmp_path_factory.mktemp("ranks4")) / "four-ranks.json.gz"
    write_trace(merged, str(path))
    req = urllib.request.Request(server + "/api/runs?name=four-ranks.json.gz", data=path.read_bytes(), method="POST")
    with urllib.request.urlopen(req, timeout=60) as resp:
        run: dict[str, Any] = json.loads(resp.read())["run"]
    assert run["ranks"] == 4
    return run


def _wait_fetch(page, seq: int) -> None:
    page.wait_for_function(f"Number(document.getElementById('timeline').dataset.seq) > {seq}")


def _seq(page) -> int:
    return int(page.get_attribute("#timeline", "data-seq") or 0)


def _row_colours(page, rank: int) -> dict[str, int]:
    """Pixels of rank ``rank``'s summary row drawn in the comm (the collective boxes') and busy colours."""
    return page.evaluate(
        """(rank) => {
          const tl = ssTimeline, row = tl.lanes.find(r => r.extra === 'ranksum' && r.rank === rank);
          const dpr = window.devicePixelRatio || 1, x0 = tl.opts.gutter + 2, w = tl.plotW - 4;
          const px = tl.ctx.getImageData(x0 * dpr, (row.y + 2) * dpr, w * dpr, (row.h - 4) * dpr).data;
          let comm = 0, busy = 0;
          for (let i = 0; i < px.length; i += 4) {
            if (px[i] === 0xee && px[i + 1] === 0xca && px[i + 2] === 0x3b) comm++;
            if (px[i] === 0x4c && px[i + 1] === 0x78 && px[i + 2] === 0xa8) busy++;
          }
          return { comm, busy };
        }""",
        rank,
    )


def _click_row(page, where: str) -> None:
    y = page.evaluate(f"ssTimeline.lanes.find(r => {where}).y")
    box = page.locator("#timeline canvas").bounding_box()
    assert box is not None
    page.mouse.click(box["x"] + 40, box["y"] + y + 9)


def test_collapsed_ranks_show_summary_lanes_and_expand_on_click(page, server, four_ranks, shot) -> None:
    page.goto(f"{server}/runs/{four_ranks['id']}?ranks=collapsed")
    page.wait_for_function(FIRST_PAINT)
    page.wait_for_function("ssTimeline.rankSummary !== null")
    assert page.evaluate(SUMMARY_ROWS) == [0, 1, 2, 3] and page.evaluate(LANE_RANKS) == []
    labels = page.evaluate("ssTimeline.lanes.filter(r => r.extra === 'ranksum').map(r => r.label)")
    assert all(label.startswith("busy ") and " · comm " in label for label in labels)
    for rank in range(4):
        drawn = _row_colours(page, rank)
        assert drawn["comm"] > 0 and drawn["busy"] > 0, (rank, drawn)
    # the other ranks wait for rank 2 in the all_reduce: more comm drawn on rank 0 than on rank 2
    assert _row_colours(page, 0)["comm"] > 2 * _row_colours(page, 2)["comm"]
    assert page.locator("#tl-fold").inner_text() == "Expand ranks"
    shot(page, "40-ranks-collapsed")

    seq = _seq(page)
    _click_row(page, "r.extra === 'ranksum' && r.rank === 1")
    _wait_fetch(page, seq)
    assert page.evaluate(SUMMARY_ROWS) == [0, 2, 3] and page.evaluate(LANE_RANKS) == [1]
    drawn = page.evaluate("ssTimeline.data.lanes.filter(l => l.s.length + l.bs.length).map(l => l.rank)")
    assert drawn and set(drawn) == {1}  # the server was asked for rank 1's lanes only
    shot(page, "41-rank-1-expanded")

    seq = _seq(page)
    _click_row(page, "r.header && r.rank === 1")
    _wait_fetch(page, seq)
    assert page.evaluate(SUMMARY_ROWS) == [0, 1, 2, 3] and page.evaluate(LANE_RANKS) == []

    seq = _seq(page)
    page.locator("#tl-step").fill("3")
    page.click("#tl-go")  # the step of rank 0 (the rank the step box counts): its lanes open
    _wait_fetch(page, seq)
    assert page.evaluate(SUMMARY_ROWS) == [1, 2, 3] and page.evaluate(LANE_RANKS) == [0]

    page.locator("#tl-fold").click()
    page.wait_for_function(f"{LANE_RANKS}.length === 4")
    assert page.evaluate(SUMMARY_ROWS) == [] and page.locator("#tl-fold").inner_text() == "Collapse ranks"


def test_four_ranks_open_expanded_by_default(page, server, four_ranks) -> None:
    page.goto(f"{server}/runs/{four_ranks['id']}")
    page.wait_for_function(FIRST_PAINT)
    assert page.evaluate(SUMMARY_ROWS) == [] and page.evaluate(LANE_RANKS) == [0, 1, 2, 3]
    page.select_option("#tl-rank", "2")  # one rank's lanes: nothing to fold, no fold button
    assert page.locator("#tl-fold").is_hidden()
    page.select_option("#tl-rank", "")
    assert page.locator("#tl-fold").is_visible()


def test_heatmap_cell_click_moves_the_timeline_to_that_ranks_step(page, server, four_ranks, shot) -> None:
    page.goto(f"{server}/runs/{four_ranks['id']}?ranks=collapsed")
    page.wait_for_function(FIRST_PAINT)
    page.wait_for_selector("#rank-heatmap .heatmaplayer", state="attached")
    assert page.locator("#rank-grid").is_visible()
    grid = page.evaluate("fetch(window.STREAMSCOPE.analysis_url).then(r => r.json()).then(a => a.ranks.grid)")
    i, j = grid["ranks"].index(3), grid["steps"].index(5)
    start, end = grid["start_ns"][i][j], grid["end_ns"][i][j]
    run_start = four_ranks["start_ns"]
    x, y = page.evaluate(
        """() => { const L = document.getElementById('rank-heatmap')._fullLayout;
                   return [L.xaxis._offset + L.xaxis.l2p(5), L.yaxis._offset + L.yaxis.l2p(3)]; }"""
    )
    box = page.locator("#rank-heatmap").bounding_box()
    assert box is not None
    seq = _seq(page)
    page.mouse.click(box["x"] + x, box["y"] + y)
    _wait_fetch(page, seq)
    view = page.evaluate("ssTimeline.view")
    assert view[0] <= start - run_start < end - run_start <= view[1]
    assert view[1] - view[0] < 1.2 * (end - start)  # zoomed to the step, a small margin around it
    assert 3 in page.evaluate(LANE_RANKS) and 3 not in page.evaluate(SUMMARY_ROWS)
    shot(page, "42-heatmap-click")

    title = "document.querySelector('#rank-heatmap .gtitle').textContent"
    assert page.evaluate(title).startswith("Step time")
    page.locator("#rank-grid-metric").select_option("wait_ns")
    page.wait_for_function(f"{title}.startsWith('Wait in collectives')")


def test_compare_of_two_multi_rank_runs_aligns_on_a_picked_rank(page, server, four_ranks, shot, tmp_path) -> None:
    from ranks.ranks_traces import job

    from collector.ranks.merge import merge_traces
    from collector.traceformat.write import write_trace

    path = tmp_path / "fixed.json.gz"
    write_trace(merge_traces(job(4, seed=1)), str(path))
    req = urllib.request.Request(server + "/api/runs?name=fixed.json.gz", data=path.read_bytes(), method="POST")
    with urllib.request.urlopen(req, timeout=60) as resp:
        other: dict[str, Any] = json.loads(resp.read())["run"]
    page.goto(f"{server}/compare?a={four_ranks['id']}&b={other['id']}")
    page.wait_for_function("window.ssCompare && ssCompare.a.stats.firstPaintMs !== null")
    assert page.locator("#cmp-ranks-card").is_visible()
    rows = page.locator("#ranks-table tbody tr")
    assert rows.count() == 4 and rows.nth(2).locator("td").first.inner_text() == "2"
    assert "Straggler A: rank 2" in page.locator("#cmp-notes").inner_text()
    picker = page.locator("#cmp-rank")
    assert picker.is_visible() and picker.locator("option").all_inner_texts() == [f"rank {r}" for r in range(4)]

    steps = page.evaluate("window.STREAMSCOPE.a.steps")
    step = int(page.locator("#cmp-step").input_value())
    run_start = four_ranks["start_ns"]
    for rank in (0, 3):
        picker.select_option(str(rank))
        page.wait_for_function("ssCompare.a.stats.firstPaintMs !== null")
        want = next(s for s in steps if s["rank"] == rank and s["step"] == step)["start_ns"] - run_start
        assert page.evaluate("ssCompare.a.offset") == want
    shot(page, "43-compare-ranks")


def test_the_collectives_tab_lists_each_collective_with_group_bytes_and_last_rank(page, server, four_ranks) -> None:
    page.goto(f"{server}/runs/{four_ranks['id']}")
    page.wait_for_function(FIRST_PAINT)
    button = page.locator("#tab-colls-button")
    button.wait_for(state="visible")
    button.click()
    page.wait_for_selector("#colls-table tbody tr")
    heads = page.locator("#colls-table thead th").all_inner_texts()
    assert heads[:5] == ["#", "Name", "Process group", "Bytes", "Ranks"]
    row = page.locator("#colls-table tbody tr").nth(1).locator("td").all_inner_texts()
    assert row[1:5] == ["all_reduce", "default_pg (pg 0)", "4 MiB", "4"]
    assert row[-1] == "2"  # the planted straggler arrives last
