"""Real-browser checks of the timeline's tools on a sample run: the launch link under the mouse, the queue
track, click and range selection, keys, search, a permalink reloaded, and the PNG export."""

from __future__ import annotations

import struct

import pytest
from timeline_page import select_range, set_view, step_row, step_window

pytestmark = pytest.mark.browser

FIRST_PAINT = "window.ssTimeline && window.ssTimeline.stats.firstPaintMs !== null"


def _open_run(page, server: str) -> str:
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(server + "/")
    url = server + page.locator(".run-name").first.get_attribute("href")
    page.goto(url)
    page.wait_for_function(FIRST_PAINT)
    page.errors = errors
    return url


KERNEL_POINT = """(() => {
  const tl = ssTimeline, d = tl.data;
  for (const lane of d.lanes) {
    const row = tl.rowByLane[lane.lane];
    if (!row || row.kind === 'cpu_thread') continue;
    for (let i = 0; i < lane.s.length; i++) {
      const x0 = tl.x(lane.s[i]), x1 = tl.x(lane.s[i] + lane.d[i]);
      if (d.kinds[lane.k[i]] === 'kernel' && x1 - x0 > 6 && x0 > tl.opts.gutter + 5 && x1 < tl.cssW - 20)
        return {x: (x0 + x1) / 2, y: row.y + row.h / 2, id: lane.id[i]};
    }
  }
  return null;
})()"""


def test_hover_shows_the_launch_link_and_click_selects(page, server, shot) -> None:
    _open_run(page, server)
    step = step_window(page)
    length = step["e"] - step["s"]
    set_view(page, step["s"] + length * 0.6, step["s"] + length * 0.8)  # past the step's copy, among kernels
    point = page.evaluate(KERNEL_POINT)
    assert point is not None
    box = page.locator("#timeline canvas").bounding_box()
    page.mouse.move(box["x"] + point["x"], box["y"] + point["y"])
    page.wait_for_function(f"(() => {{ const v = ssTimeline.links.get({point['id']}); return v && v.links; }})()")
    page.wait_for_function("document.querySelector('.tooltip').textContent.includes('queueing delay')")
    tip = page.inner_text(".tooltip")
    assert "queued by" in tip and "kernel" in tip, tip
    link = page.evaluate(f"ssTimeline.links.get({point['id']}).links[0]")
    assert link["relation"] == "launch" and link["dst"]["id"] == point["id"] and link["src"]["kind"] == "launch"
    assert page.evaluate("ssTimeline.hovered.id") == point["id"]  # the arrow is drawn for the hovered box
    shot(page, "10-hover-link")

    page.mouse.click(box["x"] + point["x"], box["y"] + point["y"])
    page.wait_for_function(f"ssTimeline.selected && ssTimeline.selected.id === {point['id']}")
    page.wait_for_selector("#tl-details table.kv >> nth=1")
    details = page.inner_text("#tl-details")
    assert "Selected interval" in details and "queueing delay" in details and "stream" in details
    assert not page.errors


def test_queue_track_is_drawn_under_each_gpu_stream(page, server) -> None:
    _open_run(page, server)
    page.wait_for_function("ssTimeline.queue !== null")
    rows = page.evaluate("ssTimeline.lanes.filter(r => r.extra === 'queue').map(r => r.index)")
    gpu = page.evaluate(
        "ssTimeline.lanes.filter(r => !r.header && !r.extra && r.kind !== 'cpu_thread').map(r => r.index)"
    )
    assert rows == gpu and rows
    depths = page.evaluate("ssTimeline.queue.lanes.map(l => [l.lane, Math.max(...l.depth)])")
    busy = page.evaluate("ssTimeline.data.lanes.filter(l => l.s.length + l.bs.length).map(l => l.lane)")
    assert [lane for lane, _ in depths] == [lane for lane in gpu if lane in busy]  # every stream with work
    assert depths and all(d > 0 for _, d in depths)


def test_range_selection_reads_the_step_busy_time(page, server, shot) -> None:
    _open_run(page, server)
    step = step_window(page)
    pad = (step["e"] - step["s"]) * 0.05
    set_view(page, step["s"] - pad, step["e"] + pad)
    got = select_range(page, step["s"], step["e"])
    row = step_row(page, step["step"])
    assert got["gpu_busy_ns"] == pytest.approx(row["gpu_busy_ns"], rel=0.01)
    assert "GPU busy" in page.inner_text("#tl-range") and "Top ops" in page.inner_text("#tl-range")
    shot(page, "11-range")


def test_keys_zoom_pan_and_list_themselves(page, server) -> None:
    _open_run(page, server)
    page.focus("#timeline")
    before = page.evaluate("ssTimeline.view.slice()")
    page.keyboard.press("w")
    after = page.evaluate("ssTimeline.view.slice()")
    assert after[1] - after[0] < (before[1] - before[0]) * 0.7
    page.keyboard.press("d")
    panned = page.evaluate("ssTimeline.view.slice()")
    assert panned[0] > after[0]
    page.keyboard.press("s")
    assert page.evaluate("ssTimeline.view[1] - ssTimeline.view[0]") > panned[1] - panned[0]
    page.keyboard.press("?")
    page.wait_for_selector("#tl-help[open]")
    assert "zoom in" in page.inner_text("#tl-help") and "W" in page.inner_text("#tl-help")


def test_search_finds_ops_and_steps_through_them(page, server) -> None:
    _open_run(page, server)
    page.fill("#tl-search input[type=search]", "gemm")
    page.wait_for_function("ssTimeline.search.total > 0")
    page.click("#tl-search .next")
    page.wait_for_function("ssTimeline.search.current !== null")
    first = page.evaluate("ssTimeline.search.current")
    assert "gemm" in first["name"].lower()
    view = page.evaluate("ssTimeline.view.slice()")
    assert view[0] <= first["s"] <= view[1]
    page.click("#tl-search .next")
    page.wait_for_function(f"ssTimeline.search.current.cursor !== '{first['cursor']}'")
    second = page.evaluate("ssTimeline.search.current")
    assert (second["s"], second["row"]) > (first["s"], first["row"])
    page.click("#tl-search .prev")
    page.wait_for_function(f"ssTimeline.search.current.cursor === '{first['cursor']}'")
    assert page.evaluate("ssTimeline.selected.id") == first["id"]
    page.check("#tl-search input[type=checkbox]")
    page.fill("#tl-search input[type=search]", "(")
    page.wait_for_function("document.querySelector('#tl-search .count').classList.contains('error')")


def test_a_reloaded_permalink_opens_the_same_view(page, server) -> None:
    url = _open_run(page, server)
    step = step_window(page)
    set_view(page, step["s"] + (step["e"] - step["s"]) * 0.6, step["e"])
    point = page.evaluate(KERNEL_POINT)
    box = page.locator("#timeline canvas").bounding_box()
    page.mouse.click(box["x"] + point["x"], box["y"] + point["y"])
    page.wait_for_function(f"ssTimeline.selected && ssTimeline.selected.id === {point['id']}")
    page.evaluate("ssTimeline.writeViewHash()")
    view = page.evaluate("ssTimeline.view.slice()")
    link = page.evaluate("location.href")
    assert link.startswith(url + "#start=") and f"sel={point['id']}" in link
    page.goto(server + "/")
    page.goto(link)
    page.wait_for_function(FIRST_PAINT)
    page.wait_for_function(f"ssTimeline.selected && ssTimeline.selected.id === {point['id']}")
    again = page.evaluate("ssTimeline.view.slice()")
    span = view[1] - view[0]
    assert abs(again[0] - view[0]) <= 0.01 * span and abs(again[1] - view[1]) <= 0.01 * span


def test_save_image_writes_a_png(page, server, tmp_path) -> None:
    _open_run(page, server)
    with page.expect_download() as info:
        page.click("#tl-png")
    path = tmp_path / "timeline.png"
    info.value.save_as(path)
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
    width, height = struct.unpack(">II", data[16:24])
    css = page.evaluate("[ssTimeline.cssW, ssTimeline.height, window.devicePixelRatio]")
    assert (width, height) == (round(css[0] * css[2]), round(css[1] * css[2]))
