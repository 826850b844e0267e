"""The run page in real Chromium: a 200-character run name keeps the Compare button on screen, and a run of
several ranks gets a rank picker (the lanes of one rank or of all) kept in the URL."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.browser

FIRST_PAINT = "window.ssTimeline && window.ssTimeline.stats.firstPaintMs !== null"


def _api(base: str, path: str, method: str = "GET", body: bytes | None = None, json_body: Any = None) -> Any:
    data = json.dumps(json_body).encode() if json_body is not None else body
    req = urllib.request.Request(base + path, data=data, method=method)
    if json_body is not None:
        req.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(req, timeout=60) as resp:
        return json.loads(resp.read())


@pytest.fixture(scope="module")
def two_ranks(server: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A 2-rank run uploaded to the server; returns its catalog row."""
    from collector.synthetic import synthetic_trace
    from collector.traceformat.write import write_trace

    path = Path(tmp_path_factory.mktemp("ranks")) / "two-ranks.json.gz"
    write_trace(synthetic_trace(4000, ranks=2, pattern="overlap", steps=4), str(path))
    run: dict[str, Any] = _api(server, "/api/runs?name=two-ranks.json.gz", "POST", path.read_bytes())["run"]
    assert run["ranks"] == 2
    return run


@pytest.mark.parametrize("width", [1440, 1024, 700])
def test_a_200_character_name_keeps_compare_on_screen(page, server, two_ranks, width, shot) -> None:
    runs = _api(server, "/api/runs")["runs"]
    long_names = ["x" * 200, ("a long run name " * 13)[:200]]  # one with no place to break, one with spaces
    for run, name in zip(runs, long_names, strict=False):
        _api(server, f"/api/runs/{run['id']}", "PATCH", json_body={"name": name})
    page.set_viewport_size({"width": width, "height": 900})
    for run in runs:
        page.goto(f"{server}/runs/{run['id']}")
        button = page.get_by_role("button", name="Compare")
        button.wait_for()
        box = button.bounding_box()
        assert box is not None and box["width"] > 0
        assert box["x"] >= 0 and box["x"] + box["width"] <= width, (width, box)
        assert box["y"] >= 0 and box["y"] + box["height"] <= 900, (width, box)
        head = page.evaluate(
            "[...document.querySelectorAll('.run-head, .run-head *')].map(e => e.getBoundingClientRect().right)"
        )
        assert max(head) <= width  # the name wraps: nothing in the run's header is pushed off to the side
        assert page.evaluate("document.documentElement.scrollWidth") <= width  # nor anything below it
    shot(page, f"30-long-name-{width}")


def _lane_ranks(page) -> list[int]:
    return sorted(set(page.evaluate("ssTimeline.lanes.filter(r => !r.header && !r.extra).map(r => r.rank)")))


def test_rank_picker_shows_one_rank_or_all_and_is_kept_in_the_url(page, server, two_ranks) -> None:
    url = f"{server}/runs/{two_ranks['id']}"
    page.goto(url)
    page.wait_for_function(FIRST_PAINT)
    picker = page.locator("#tl-rank")
    assert picker.is_visible() and _lane_ranks(page) == [0, 1]
    assert picker.locator("option").all_inner_texts() == ["all 2 ranks", "rank 0", "rank 1"]

    seq = int(page.get_attribute("#timeline", "data-seq") or 0)
    picker.select_option("1")
    page.wait_for_function(f"Number(document.getElementById('timeline').dataset.seq) > {seq}")
    assert _lane_ranks(page) == [1]
    drawn = page.evaluate("ssTimeline.data.lanes.filter(l => l.s.length + l.bs.length).map(l => l.rank)")
    assert drawn and set(drawn) == {1}  # the server was asked for rank 1's lanes only
    page.wait_for_function("location.hash.includes('rank=1')")

    page.reload()  # the link opens rank 1 again, picker included
    page.wait_for_function(FIRST_PAINT)
    assert picker.input_value() == "1" and _lane_ranks(page) == [1]

    picker.select_option("")
    page.wait_for_function("!location.hash.includes('rank=')")
    assert _lane_ranks(page) == [0, 1]


def test_one_rank_runs_have_no_rank_picker(page, server, two_ranks) -> None:
    one = next(r for r in _api(server, "/api/runs")["runs"] if r["ranks"] == 1)
    page.goto(f"{server}/runs/{one['id']}")
    page.wait_for_function(FIRST_PAINT)
    assert not page.locator("#tl-rank").is_visible()


def test_a_run_whose_set_up_outlasts_its_steps_opens_on_its_steps(page, server, tmp_path: Path) -> None:
    """Loading a model for seconds, then a few ms of steps: the first view shows the steps; Reset the whole run."""
    import pandas as pd

    from collector.model import Trace, conform_intervals
    from collector.synthetic import synthetic_trace
    from collector.traceformat.write import write_trace

    trace = synthetic_trace(2000, pattern="overlap", steps=6)
    iv = trace.intervals
    first = int(iv["start_ns"].min())
    load = iv.iloc[[0]].assign(id=int(iv["id"].max()) + 1, start_ns=first - 3_000_000_000, name="load_model")
    load = load.assign(end_ns=first - 2_900_000_000, dur_ns=100_000_000, step=-1)
    frame = conform_intervals(pd.concat([iv, load], ignore_index=True))
    path = tmp_path / "slow-set-up.json.gz"
    write_trace(Trace(trace.meta, trace.lanes, frame, trace.markers), str(path))
    run = _api(server, "/api/runs?name=slow-set-up.json.gz", "POST", path.read_bytes())["run"]
    page.goto(f"{server}/runs/{run['id']}")
    page.wait_for_function(FIRST_PAINT)
    steps = page.evaluate("ssTimeline.opts.steps.map(s => [s.s, s.e])")
    lo, hi = min(s for s, _ in steps), max(e for _, e in steps)
    view = page.evaluate("ssTimeline.view")
    assert view[0] <= lo < hi <= view[1] and view[1] - view[0] < 1.2 * (hi - lo)
    page.click("#tl-reset")
    view = page.evaluate("ssTimeline.view")
    span = run["end_ns"] - run["start_ns"]
    assert view[0] <= 0 and view[1] >= span  # the whole run, its 3 s of set-up too


def test_the_host_time_tab_shows_each_ranks_frames(page, server, tmp_path: Path) -> None:
    """Rank 0 waits on its DataLoader, rank 1 logs: the tab lists both ranks' frames, and each rank's own."""
    from analysis.analysis_traces import LOOP, loader_bound

    from collector.ranks.merge import merge_traces
    from collector.traceformat.write import write_trace

    path = tmp_path / "two-ranks-sampled.json.gz"
    logging = f"{LOOP};log_metrics (train.py:55)"
    write_trace(merge_traces([loader_bound(), loader_bound(loading=logging, rank=1)]), str(path))
    run = _api(server, "/api/runs?name=two-ranks-sampled.json.gz", "POST", path.read_bytes())["run"]
    page.goto(f"{server}/runs/{run['id']}")
    page.wait_for_function(FIRST_PAINT)
    page.click(".tabs button[data-tab='tab-host']")
    page.wait_for_selector("#host-rank-pick:not([hidden])")
    frames = "[...document.querySelectorAll('#host-table tbody tr td:first-child')].map(td => td.textContent)"
    both = page.evaluate(frames)
    assert "log_metrics (train.py:55)" in both and "_next_data (torch/utils/data/dataloader.py:757)" in both
    page.select_option("#host-rank", "1")
    one = page.evaluate(frames)
    assert "log_metrics (train.py:55)" in one and "_next_data (torch/utils/data/dataloader.py:757)" not in one
    page.select_option("#host-rank", "")
    assert page.evaluate(frames) == both
