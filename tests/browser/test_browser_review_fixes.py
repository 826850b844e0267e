"""Real-browser checks of review fixes: the timeline keys after a click on a checkbox or the lane slider, "Go to
step" on a one-rank trace whose rank is not 0, the legend of collapsed ranks, a zip of rank files through the
upload page, and the compare pick page's baseline."""

from __future__ import annotations

import io
import json
import urllib.request
import zipfile
from pathlib import Path
from typing import Any

import pytest
from timeline_page import TL_LABELS

pytestmark = pytest.mark.browser

FIRST_PAINT = "window.ssTimeline && window.ssTimeline.stats.firstPaintMs !== null"
LEGEND = "[...document.querySelectorAll('#tl-legend span')].map(e => e.textContent)"
SUMMARY_LEGEND = ["busy", "in collectives"]


def _trace_bytes(trace: Any, tmp: Path, name: str) -> bytes:
    from collector.traceformat.write import write_trace

    path = tmp / name
    write_trace(trace, str(path))
    return path.read_bytes()


def _post_run(server: str, data: bytes, name: str) -> dict[str, Any]:
    """POST one trace to the server; its catalog row."""
    req = urllib.request.Request(f"{server}/api/runs?name={name}", data=data, method="POST")
    with urllib.request.urlopen(req, timeout=60) as resp:
        run: dict[str, Any] = json.loads(resp.read())["run"]
    return run


def _get_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=60) as resp:
        return json.loads(resp.read())


def _view(page) -> list[float]:
    return list(page.evaluate("ssTimeline.view.slice()"))


def _width(view: list[float]) -> float:
    return view[1] - view[0]


# ---- 1. the timeline keys after a click on a checkbox or a slider ------------------------------------------


def test_timeline_keys_work_after_clicking_a_checkbox_or_the_lane_slider(page, server) -> None:
    page.goto(server + "/")
    page.goto(server + page.locator(".run-name").first.get_attribute("href"))
    page.wait_for_function(FIRST_PAINT)

    page.click("#tl-critical")  # the "critical path" checkbox keeps the focus
    before = _view(page)
    page.keyboard.press("w")
    assert _width(_view(page)) < 0.7 * _width(before), "W zooms in after a click on a checkbox"

    page.click("#tl-search input[type=checkbox]")  # "regex"
    before = _view(page)
    page.keyboard.press("d")
    after = _view(page)
    assert after[0] > before[0] and _width(after) == pytest.approx(_width(before)), "D pans right"

    page.click("#tl-lane-h")  # the "Lane height" slider
    before = _view(page)
    page.keyboard.press("s")
    assert _width(_view(page)) > 1.5 * _width(before), "S zooms out after a click on the slider"
    slider = page.input_value("#tl-lane-h")
    page.keyboard.press("ArrowRight")  # the slider's own key stays the slider's
    assert int(page.input_value("#tl-lane-h")) > int(slider)

    page.click("#tl-search input[type=search]")  # a text field keeps its keys
    before = _view(page)
    page.keyboard.type("wasd")
    assert _view(page) == before


# ---- 2. "Go to step" on a one-rank trace of rank 3 -----------------------------------------------------------


@pytest.fixture(scope="module")
def rank3_run(server: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Rank 3's own trace of a 4-rank job, its steps numbered from 1009, uploaded alone; its catalog row."""
    from ranks.ranks_traces import job

    from collector.model import Trace

    t = job(4, steps=6)[3]
    iv, marks = t.intervals.copy(), t.markers.copy()
    iv.loc[iv["step"] >= 0, "step"] += 1009
    marks["step"] += 1009
    trace = Trace(t.meta, t.lanes, iv, marks)
    data = _trace_bytes(trace, tmp_path_factory.mktemp("rank3"), "rank3.json.gz")
    run = _post_run(server, data, "rank3.json.gz")
    assert run["ranks"] == 1
    return run


STEP_IN_VIEW = """() => {
  const P = window.STREAMSCOPE, v = ssTimeline.view;
  const s = P.analysis.steps.find(s => {
    const a = s.start_ns - P.run.start_ns, b = s.end_ns - P.run.start_ns, pad = (b - a) * 0.03;
    return Math.abs(v[0] - (a - pad)) < 1 && Math.abs(v[1] - (b + pad)) < 1;
  });
  return s ? [s.rank, s.step] : null;
}"""


def test_go_to_step_on_a_one_rank_trace_whose_rank_is_not_0(page, server, rank3_run) -> None:
    page.goto(f"{server}/runs/{rank3_run['id']}")
    page.wait_for_function(FIRST_PAINT)
    box = page.locator("#tl-step")
    assert (box.get_attribute("min"), box.get_attribute("max"), box.input_value()) == ("1009", "1014", "1009")

    box.fill("1012")
    page.click("#tl-go")
    assert page.evaluate(STEP_IN_VIEW) == [3, 1012]

    page.evaluate("ssTimeline.reset()")
    row = page.locator("#steps-table tbody tr").nth(4)
    row.wait_for()
    row.click()  # a step's row in the "Per step" table
    rank, step = (int(c.replace(",", "")) for c in row.locator("td").all_inner_texts()[:2])
    assert page.evaluate(STEP_IN_VIEW) == [rank, step] and rank == 3


# ---- 3. the legend of collapsed ranks ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def four_ranks(server: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A merged 4-rank synthetic job uploaded to the server; its catalog row."""
    from ranks.ranks_traces import MS, job

    from collector.ranks.merge import merge_traces

    merged = merge_traces(job(4, slow_rank=2, delay_ns=8 * MS, offsets=[0, 2 * MS, -MS, 5 * MS], hosts="abcd"))
    data = _trace_bytes(merged, tmp_path_factory.mktemp("ranks4"), "four-ranks.json.gz")
    return _post_run(server, data, "four-ranks.json.gz")


def _drawn_kinds(page) -> list[str]:
    """The labels of the kinds on the lanes the timeline shows (not those of collapsed ranks)."""
    kinds = page.evaluate(
        """[...new Set(ssTimeline.data.lanes.filter(l => ssTimeline.rowByLane[l.lane])
             .flatMap(l => [...l.k, ...l.bk].map(k => ssTimeline.data.kinds[k])))]"""
    )
    return sorted(TL_LABELS[k] for k in kinds)


def _legend_kinds(page) -> list[str]:
    return sorted(t for t in page.evaluate(LEGEND) if t in TL_LABELS.values())


def test_the_legend_lists_what_collapsed_and_expanded_ranks_draw(page, server, four_ranks) -> None:
    page.goto(f"{server}/runs/{four_ranks['id']}?ranks=collapsed")
    page.wait_for_function(FIRST_PAINT)
    page.wait_for_function(f"JSON.stringify({LEGEND}) === JSON.stringify({json.dumps(SUMMARY_LEGEND)})")

    # the summary lanes' colours are the legend's, and "in collectives" is not the copy H2D colour
    swatches = page.evaluate(
        "[...document.querySelectorAll('#tl-legend span i')].map(e => getComputedStyle(e).backgroundColor)"
    )
    assert swatches == ["rgb(76, 120, 168)", "rgb(238, 202, 59)"]
    assert "rgb(245, 133, 24)" not in swatches

    page.click("#tl-fold")  # "Expand ranks"
    page.wait_for_function("ssTimeline.lanes.every(r => r.extra !== 'ranksum') && ssTimeline.data")
    page.wait_for_function(f"!{LEGEND}.includes('in collectives')")
    assert _legend_kinds(page) == _drawn_kinds(page) and _legend_kinds(page)

    page.click("#tl-fold")  # "Collapse ranks": the legend is the summary's again, not blank
    page.wait_for_function(f"JSON.stringify({LEGEND}) === JSON.stringify({json.dumps(SUMMARY_LEGEND)})")


# ---- 4. a zip of rank files through the upload page ----------------------------------------------------------


def test_the_upload_page_takes_a_zip_of_rank_files_and_shows_the_servers_error(page, server, tmp_path) -> None:
    from ranks.ranks_traces import MS, job

    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for t in job(2, slow_rank=1, delay_ns=6 * MS, offsets=[0, 9 * MS], hosts=["a", "b"]):
            zf.writestr(f"ranks/run.rank{t.ranks[0]}.json", _trace_bytes(t, tmp_path, "t.json"))
    archive = tmp_path / "job-ranks.zip"
    archive.write_bytes(buf.getvalue())
    notes = tmp_path / "notes.txt"
    notes.write_text("not a trace")

    page.goto(server + "/upload")
    assert ".zip" in (page.get_attribute("#file-input", "accept") or "")
    page.set_input_files("#file-input", [str(archive), str(notes)])
    page.wait_for_selector(".upload-list li.done")
    page.wait_for_selector(".upload-list li.failed")
    assert "(2 ranks)" in page.inner_text(".upload-list li.done .msg")
    failed = page.inner_text(".upload-list li.failed .msg").strip()
    assert failed.startswith("notes.txt: not a trace file") and "\n" not in failed  # the server's one line


# ---- 5. the compare pick page's baseline, and /api/compare's runs ----------------------------------------------


def test_compare_pick_defaults_the_baseline_to_the_older_run_and_says_so(page, server, traces) -> None:
    _post_run(server, Path(traces["good"]).read_bytes(), "newest.json.gz")
    runs = _get_json(server + "/api/runs")["runs"]  # newest first
    page.goto(server + "/compare")
    assert page.input_value("select[name=a]") == runs[1]["id"]
    assert page.input_value("select[name=b]") == runs[0]["id"]
    labels = page.locator(".pick-form label").all_inner_texts()
    assert labels[0].startswith("A: baseline") and labels[1].startswith("B: compared with it")

    page.click(".pick-form button[type=submit]")
    page.wait_for_url(f"**/compare?a={runs[1]['id']}&b={runs[0]['id']}")
    body = _get_json(f"{server}/api/compare?a={runs[1]['id']}&b={runs[0]['id']}")
    for side, run in (("a", runs[1]), ("b", runs[0])):
        assert body[side]["id"] == run["id"] and body[side]["name"] == run["name"]
        assert {"summary", "what_if", "findings"} <= body[side].keys()
