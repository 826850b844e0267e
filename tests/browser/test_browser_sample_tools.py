"""The timeline's tools in real Chromium on the recorded demo runs (sample_traces/naive.json.gz and
overlap.json.gz, imported by the server at its first start): a kernel's link to its launch, the queue
track, a one-step range selection against the analysis, and search.

Names, steps and ids are read from each run's own data (its analysis, its trace file), never hard-coded, so
the tests hold for any real recording of these demos.
"""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator
from typing import Any

import pandas as pd
import pytest
from serving import REPO, running_server
from timeline_page import select_range, set_view, step_row, step_window

pytestmark = pytest.mark.browser

SAMPLES = REPO / "sample_traces"
DEMOS = ("naive.json.gz", "overlap.json.gz")
FIRST_PAINT = "window.ssTimeline && window.ssTimeline.stats.firstPaintMs !== null"


@pytest.fixture(scope="module")
def sample_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``streamscope serve`` on the repository's sample folder, as a new user first starts it."""
    missing = [name for name in DEMOS if not (SAMPLES / name).is_file()]
    if missing:
        pytest.skip(f"sample runs missing: {', '.join(missing)}")
    data = tmp_path_factory.mktemp("sample-data")
    with running_server(SAMPLES, data, cwd=data) as (base, _proc):
        yield base


@pytest.fixture(scope="module")
def trace_frames() -> dict[str, pd.DataFrame]:
    """Each demo's intervals, read from its trace file (the ground truth for ids and launches)."""
    from collector.load import load_trace

    return {name: load_trace(str(SAMPLES / name)).intervals for name in DEMOS}


def _open_sample(page, base: str, sample: str) -> dict[str, Any]:
    """Open the run imported from ``sample``; return its catalog row."""
    with urllib.request.urlopen(base + "/api/runs", timeout=30) as resp:
        runs = json.loads(resp.read())["runs"]
    run = next(r for r in runs if r["origin"] == f"sample:{sample}")
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(f"{base}/runs/{run['id']}")
    page.wait_for_function(FIRST_PAINT)
    page.errors = errors
    return dict(run)


WIDEST_KERNEL = """(() => {
  const tl = ssTimeline, d = tl.data;
  let best = null;
  for (const lane of d.lanes) {
    const row = tl.rowByLane[lane.lane];
    if (!row || row.kind === 'cpu_thread') continue;
    for (let i = 0; i < lane.s.length; i++)
      if (d.kinds[lane.k[i]] === 'kernel' && (!best || lane.d[i] > best.d))
        best = {s: tl.rel(lane.s[i]), d: lane.d[i], id: lane.id[i], lane: lane.lane};
  }
  return best;
})()"""

POINT_OF = """(id) => {
  const tl = ssTimeline;
  for (const lane of tl.data.lanes) {
    const i = lane.id.indexOf(id);
    if (i < 0) continue;
    const row = tl.rowByLane[lane.lane];
    const x0 = Math.max(tl.opts.gutter, tl.x(tl.rel(lane.s[i])));
    const x1 = Math.min(tl.cssW - 8, tl.x(tl.rel(lane.s[i] + lane.d[i])));
    return {x: (x0 + x1) / 2, y: row.y + row.h / 2};
  }
  return null;
}"""


@pytest.mark.parametrize("sample", DEMOS)
def test_a_kernel_links_to_the_launch_that_queued_it(page, sample_server, trace_frames, sample, shot) -> None:
    _open_sample(page, sample_server, sample)
    step = step_window(page)
    set_view(page, step["s"], step["e"])
    kernel = page.evaluate(WIDEST_KERNEL)
    assert kernel is not None, "no kernel drawn in the step"
    set_view(page, kernel["s"] - kernel["d"], kernel["s"] + 2 * kernel["d"])  # the kernel fills a third
    point = page.evaluate(POINT_OF, kernel["id"])
    box = page.locator("#timeline canvas").bounding_box()
    page.mouse.move(box["x"] + point["x"], box["y"] + point["y"])
    page.wait_for_function(f"(() => {{ const v = ssTimeline.links.get({kernel['id']}); return v && v.links; }})()")
    page.wait_for_function("document.querySelector('.tooltip').textContent.includes('queueing delay')")
    assert page.evaluate("ssTimeline.hovered.id") == kernel["id"]  # its arrow is drawn

    frame = trace_frames[sample]
    row = frame[frame["id"] == kernel["id"]].iloc[0]
    launch = frame[frame["id"] == row["launch_id"]].iloc[0]  # the recording's own launch of this kernel
    link = next(lk for lk in page.evaluate(f"ssTimeline.links.get({kernel['id']}).links") if lk["relation"] == "launch")
    assert link["src"]["id"] == launch["id"] and link["dst"]["id"] == kernel["id"]
    assert link["src"]["lane"] != kernel["lane"] and link["src"]["name"] == str(launch["name"])
    assert link["delay_ns"] == row["start_ns"] - launch["end_ns"]
    tip = page.inner_text(".tooltip")
    assert "queued by" in tip and str(launch["name"]) in tip, tip
    shot(page, f"20-sample-link-{sample.split('.')[0]}")

    page.mouse.click(box["x"] + point["x"], box["y"] + point["y"])
    page.wait_for_function(f"ssTimeline.selected && ssTimeline.selected.id === {kernel['id']}")
    page.wait_for_selector("#tl-details table.kv >> nth=1")
    assert "queueing delay" in page.inner_text("#tl-details")
    assert not page.errors


def test_the_queue_track_is_drawn_and_filled_on_the_naive_demo(page, sample_server) -> None:
    _open_sample(page, sample_server, "naive.json.gz")
    page.wait_for_function("ssTimeline.queue !== null")
    streams = page.evaluate(
        "ssTimeline.lanes.filter(r => !r.header && !r.extra && r.kind !== 'cpu_thread').map(r => r.index)"
    )
    tracks = page.evaluate("ssTimeline.lanes.filter(r => r.extra === 'queue').map(r => r.index)")
    assert streams and tracks == streams  # one track right under each GPU stream
    queued = page.evaluate("ssTimeline.queue.lanes.map(l => [l.lane, Math.max(...l.depth), Math.max(...l.lead_ns)])")
    assert queued and {lane for lane, _, _ in queued} <= set(streams)
    assert max(depth for _, depth, _ in queued) >= 1 and max(lead for _, _, lead in queued) > 0
    # a step's view still has its queue: the track follows the zoom
    step = step_window(page)
    seq = page.evaluate("ssTimeline.queue.start_ns")
    set_view(page, step["s"], step["e"])
    page.wait_for_function(f"ssTimeline.queue.start_ns !== {seq}")
    assert max(max(ln["depth"]) for ln in page.evaluate("ssTimeline.queue.lanes")) >= 1


@pytest.mark.parametrize("sample", DEMOS)
def test_one_step_range_reads_the_analysis_busy_time(page, sample_server, sample, shot) -> None:
    _open_sample(page, sample_server, sample)
    step = step_window(page, 2)
    pad = (step["e"] - step["s"]) * 0.05
    set_view(page, step["s"] - pad, step["e"] + pad)
    got = select_range(page, step["s"], step["e"])
    row = step_row(page, step["step"])
    assert row["gpu_busy_ns"] > 0
    assert got["gpu_busy_ns"] == pytest.approx(row["gpu_busy_ns"], rel=0.01)
    assert got["transfer_busy_ns"] == pytest.approx(row["transfer_busy_ns"], rel=0.01, abs=1000)
    assert "GPU busy" in page.inner_text("#tl-range") and "Top ops" in page.inner_text("#tl-range")
    shot(page, f"21-sample-range-{sample.split('.')[0]}")


def test_search_finds_the_matmul_op_and_jumps_to_it(page, sample_server, trace_frames) -> None:
    _open_sample(page, sample_server, "naive.json.gz")
    frame = trace_frames["naive.json.gz"]
    names = frame["name"].astype(str)
    op = "aten::mm" if (names == "aten::mm").any() else "aten::addmm"
    assert (names == op).any(), "the naive demo has neither aten::mm nor aten::addmm"
    page.fill("#tl-search input[type=search]", op)
    page.wait_for_function("ssTimeline.search.total > 0")
    assert page.evaluate("ssTimeline.search.total") == int(names.str.lower().str.contains(op, regex=False).sum())
    page.click("#tl-search .next")
    page.wait_for_function("ssTimeline.search.current !== null")
    first = page.evaluate("ssTimeline.search.current")
    assert op in first["name"]
    view = page.evaluate("ssTimeline.view.slice()")
    assert view[0] <= first["s"] <= view[1]  # the view jumped to it
    assert page.evaluate("ssTimeline.selected.id") == first["id"]
    page.click("#tl-search .next")
    page.wait_for_function(f"ssTimeline.search.current.cursor !== '{first['cursor']}'")
    second = page.evaluate("ssTimeline.search.current")
    assert op in second["name"] and (second["s"], second["row"]) > (first["s"], first["row"])
    view = page.evaluate("ssTimeline.view.slice()")
    assert view[0] <= second["s"] <= view[1]
