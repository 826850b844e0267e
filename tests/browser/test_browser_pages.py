"""Real-browser checks of what only a browser shows: upload through the page, the drawn timeline with all
its lanes, a finding's zoom, the compare page, and names that try to inject HTML."""

from __future__ import annotations

from typing import Any

import pytest

pytestmark = pytest.mark.browser

FIRST_PAINT = "window.ssTimeline && window.ssTimeline.stats.firstPaintMs !== null"


def test_upload_timeline_finding_zoom_and_compare(page, server, traces, shot) -> None:
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(server + "/upload")
    page.set_input_files("#file-input", [str(traces["good"]), str(traces["broken"])])
    page.wait_for_selector(".upload-list li.done")
    page.wait_for_selector(".upload-list li.failed")
    failed = page.inner_text(".upload-list li.failed .msg")
    assert "broken.json" in failed and "\n" not in failed.strip()
    shot(page, "01-upload")

    page.click(".upload-list li.done a")
    page.wait_for_function(FIRST_PAINT)
    lanes = page.evaluate("ssTimeline.data.lanes.map(l => [l.kind, l.s.length + l.bs.length])")
    assert [k for k, _ in lanes] == ["cpu_thread", "compute_stream", "transfer_stream"]
    assert all(n > 0 for _, n in lanes), lanes  # every lane drew boxes
    assert page.evaluate("ssTimeline.lanes.filter(r => !r.header && !r.extra).length") == 3  # plus queue rows
    page.wait_for_selector("#step-chart .main-svg")  # Plotly, served by the app, drew the step chart
    box = page.locator("#timeline canvas").bounding_box()
    row_y = page.evaluate(
        "(() => { const r = ssTimeline.lanes.find(l => l.kind === 'compute_stream'); return r.y + r.h / 2; })()"
    )
    page.mouse.move(box["x"] + box["width"] * 0.5, box["y"] + row_y)
    page.wait_for_selector(".tooltip:not([hidden])")
    tip = page.inner_text(".tooltip")
    assert "compute" in tip and ("intervals merged" in tip or "kernel" in tip), tip
    # a wheel zoom under the still mouse: the tooltip follows the boxes now under it, not the old ones
    seq = int(page.get_attribute("#timeline", "data-seq") or 0)
    whole = page.evaluate("ssTimeline.view[1] - ssTimeline.view[0]")
    page.mouse.wheel(0, -900)
    x, y = box["x"] + box["width"] * 0.5, box["y"] + row_y
    page.wait_for_function(
        f"""Number(document.getElementById('timeline').dataset.seq) > {seq} && (() => {{
            const r = ssTimeline.canvas.getBoundingClientRect();
            const now = ssTimeline.find({x} - r.left, {y} - r.top);
            const tip = document.querySelector('.tooltip');
            return now ? !tip.hidden && tip.textContent === now : tip.hidden;
        }})()"""
    )
    page.evaluate("ssTimeline.reset()")
    page.wait_for_function(f"Math.abs(ssTimeline.view[1] - ssTimeline.view[0] - {whole}) < 1")
    shot(page, "02-run")

    full = page.evaluate("ssTimeline.view[1] - ssTimeline.view[0]")
    seq = int(page.get_attribute("#timeline", "data-seq") or 0)
    page.click("#findings li >> nth=0")
    page.wait_for_function(f"Number(document.getElementById('timeline').dataset.seq) > {seq}")
    zoomed = page.evaluate("ssTimeline.view[1] - ssTimeline.view[0]")
    assert zoomed < full / 3
    assert page.evaluate("ssTimeline.highlight !== null")
    assert page.locator("#findings li.active").count() == 1
    shot(page, "03-finding-zoom")

    page.keyboard.press("0")  # reset with the keyboard
    page.wait_for_function(f"Math.abs(ssTimeline.view[1] - ssTimeline.view[0] - {full}) < 1")

    page.goto(server + "/")
    page.locator(".pick-run").nth(0).check()
    page.locator(".pick-run").nth(1).check()
    page.click("#compare-btn")
    page.wait_for_function("window.ssCompare && ssCompare.a.data && ssCompare.b.data")
    assert page.locator("#metric-deltas tbody tr").count() > 5
    assert page.locator(".better, .worse").count() > 0
    shot(page, "04-compare")
    assert errors == []


def test_names_from_traces_render_as_text(page, server, traces, shot) -> None:
    dialogs: list[str] = []

    def dismiss(dialog: Any) -> None:
        dialogs.append(dialog.message)
        dialog.dismiss()

    page.on("dialog", dismiss)
    page.goto(server + "/upload")
    page.set_input_files("#file-input", str(traces["evil"]))
    page.wait_for_selector(".upload-list li.done")
    page.click(".upload-list li.done a")
    page.wait_for_function(FIRST_PAINT)
    page.wait_for_selector("#steps-table td")  # the full analysis has arrived
    page.click("text=Kernels and ops")
    page.wait_for_selector("#kernels-table td")
    assert page.locator("#kernels-table td", has_text="</script><img src=x onerror=alert(1)>").count() == 1
    assert page.locator("img[src=x]").count() == 0
    page.goto(server + "/")
    assert page.locator("img[src=x]").count() == 0
    shot(page, "05-escaped-names")
    assert dialogs == []


def test_drag_and_drop_uploads_a_trace(page, server, traces) -> None:
    """A file dropped on the drop zone goes through the same upload as the file picker."""
    page.goto(server + "/upload")
    good = traces["good"]
    drop = page.evaluate_handle(
        """([name, bytes]) => {
            const dt = new DataTransfer();
            dt.items.add(new File([new Uint8Array(bytes)], name));
            return dt;
        }""",
        [good.name, list(good.read_bytes())],
    )
    page.dispatch_event("#drop-zone", "dragover", {"dataTransfer": drop})
    assert "over" in (page.get_attribute("#drop-zone", "class") or "")
    page.dispatch_event("#drop-zone", "drop", {"dataTransfer": drop})
    page.wait_for_selector(".upload-list li.done")
    assert good.name in page.inner_text(".upload-list li.done .fname")
    assert "open the timeline" in page.inner_text(".upload-list li.done a")
    assert "over" not in (page.get_attribute("#drop-zone", "class") or "")


def test_compare_step_changes_leave_one_live_pair(page, server, traces, shot) -> None:
    """Changing the aligned step replaces both timelines: afterwards one zoom key, one resize and the tooltips
    behave as for a single pair (old observers, listeners and tooltips are gone)."""
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    good = traces["good"]
    stored = page.request.post(
        server + "/api/runs?name=" + good.name,
        data=good.read_bytes(),
        headers={"Content-Type": "application/octet-stream", "Accept": "application/json"},
    )
    assert stored.status == 201, stored.text()
    page.goto(server + "/")
    page.locator(".pick-run").nth(0).check()
    page.locator(".pick-run").nth(1).check()
    page.click("#compare-btn")
    page.wait_for_function("window.ssCompare && ssCompare.a.data && ssCompare.b.data")
    static_js = page.evaluate(
        "fetch(document.querySelector('script[type=module]').src).then(r => r.headers.get('content-type'))"
    )
    assert "javascript" in static_js
    steps = page.eval_on_selector_all("#cmp-step option", "os => os.map(o => o.value)")
    assert len(steps) >= 2
    for i in range(4):
        page.select_option("#cmp-step", steps[i % len(steps)] if i % 2 else steps[-1 - i % len(steps)])
        page.wait_for_function("ssCompare.a.data && ssCompare.b.data")
    page.wait_for_timeout(300)  # let every debounced fetch of the last build land

    sent: list[str] = []
    page.on("request", lambda r: sent.append(r.url) if "/timeline?" in r.url else None)
    page.focus("#timeline-a")
    page.keyboard.press("+")
    page.wait_for_timeout(600)
    assert len(sent) == 2, sent  # one zoomed view for A, the same view for B

    sent.clear()  # the step list has the focus: its arrows stay its own, W zooms
    page.focus("#cmp-step")
    step = page.input_value("#cmp-step")
    page.keyboard.press("w")
    page.wait_for_timeout(600)
    assert len(sent) == 2 and page.input_value("#cmp-step") == step, sent

    sent.clear()
    page.set_viewport_size({"width": 1200, "height": 960})
    page.wait_for_timeout(600)
    assert 1 <= len(sent) <= 2, sent
    assert page.locator("body > .tooltip").count() == 2
    assert page.locator("#timeline-a canvas").count() == 1 and page.locator("#timeline-b canvas").count() == 1
    shot(page, "06-compare-after-step-changes")
    assert errors == []


def test_step_table_follows_the_metrics_catalog(page, server) -> None:
    """The per-step table shows the catalogue's step columns under its labels; a label changed and an entry
    flagged in the page's metrics_catalog show up there, non-metric columns keep their own labels."""
    from webapp.analysis import catalog

    page.goto(server + "/")
    run_url = page.locator(".run-name").first.get_attribute("href")
    page.goto(server + run_url)
    page.wait_for_selector("#steps-table th")
    heads = page.eval_on_selector_all("#steps-table th", "ths => ths.map(t => t.textContent)")
    assert heads == ["Rank", "Step"] + [m.label for m in catalog.CATALOG if m.step_column]

    patch = (
        "<script>(() => { const cat = window.STREAMSCOPE.metrics_catalog;"
        " cat.find((m) => m.key === 'step_time_ns').label = 'Wall time of the step';"
        " cat.find((m) => m.key === 'pageable_copy_ns').step_column = true; })();</script>"
    )

    def patch_catalog(route) -> None:
        response = route.fetch()
        body = response.text().replace('<script type="module"', patch + '<script type="module"', 1)
        route.fulfill(response=response, body=body)

    page.route("**" + run_url, patch_catalog)
    page.goto(server + run_url)
    page.wait_for_selector("#steps-table th")
    heads = page.eval_on_selector_all("#steps-table th", "ths => ths.map(t => t.textContent)")
    assert "Wall time of the step" in heads and "Step time" not in heads
    assert heads[-1] == catalog.label("pageable_copy_ns")
    assert heads[:2] == ["Rank", "Step"] and "GPU busy" in heads


COPY_POINT = """(() => {
  const tl = ssTimeline, d = tl.data;
  for (const lane of d.lanes) {
    const row = tl.rowByLane[lane.lane];
    if (!row || row.kind === 'cpu_thread') continue;
    for (let i = 0; i < lane.s.length; i++) {
      const x0 = Math.max(tl.x(lane.s[i]), tl.opts.gutter + 2);
      const x1 = Math.min(tl.x(lane.s[i] + lane.d[i]), tl.cssW - 10);
      if (d.kinds[lane.k[i]].startsWith('memcpy') && lane.b[i] > 0 && x1 - x0 > 6)
        return {x: (x0 + x1) / 2, y: row.y + row.h / 2, bytes: lane.b[i], d: lane.d[i]};
    }
  }
  return null;
})()"""


def test_sizes_read_in_binary_units_in_the_page_scripts(page, server) -> None:
    """common.js writes a size as webapp/formatting.py does (KiB/MiB/GiB), and the details panel shows a
    copy's bytes that way beside its bandwidth in decimal GB/s."""
    from webapp.formatting import fmt_bytes

    page.goto(server + "/upload")
    limit = page.evaluate("window.STREAMSCOPE.limit")
    assert f"up to {fmt_bytes(limit)} each" in page.inner_text("#drop-zone")
    values = [0, 512, 32 * 1024, 64 * 2**20, 67.1e6, 6403.1 * 2**20, 2 * 1024**3, 1000 * 2**20, 999.9 * 2**20, 5e12]
    shown = page.evaluate(
        """async (values) => {
          const src = document.querySelector('script[type=module][src*="upload.js"]').src;
          const { SS } = await import(new URL("common.js", src));
          return values.map((v) => SS.bytes(v));
        }""",
        values,
    )
    assert shown == [fmt_bytes(v) for v in values]
    assert shown[3:5] == ["64 MiB", "64 MiB"] and shown[6] == "2 GiB"

    run = page.evaluate("fetch('/api/runs').then((r) => r.json()).then((b) => b.runs[0].id)")
    page.goto(f"{server}/runs/{run}")
    page.wait_for_function(FIRST_PAINT)
    point = page.evaluate(COPY_POINT)
    assert point is not None
    box = page.locator("#timeline canvas").bounding_box()
    page.mouse.click(box["x"] + point["x"], box["y"] + point["y"])
    page.wait_for_selector("#tl-details table.kv")
    rows = dict(
        page.eval_on_selector_all(
            "#tl-details table.kv tr",
            "els => els.map((e) => [e.cells[0] ? e.children[0].textContent : '', e.children[1].textContent])",
        )
    )
    assert rows["bytes"].split(" · ")[0] == fmt_bytes(point["bytes"]) and "iB" in rows["bytes"]
    assert rows["bandwidth"] == f"{point['bytes'] / point['d']:.2f} GB/s"


def test_runs_table_fits_1024_px_with_its_actions_in_view(page, server) -> None:
    page.set_viewport_size({"width": 1024, "height": 800})
    page.goto(server + "/")
    page.wait_for_selector("#runs-table tbody tr")
    assert page.evaluate("document.documentElement.scrollWidth") <= 1024  # no sideways scroll
    table = page.locator("#runs-table").bounding_box()
    assert table is not None and table["x"] >= 0 and table["x"] + table["width"] <= 1024
    buttons = page.locator("#runs-table td.actions button")
    assert buttons.count() >= 2
    for i in range(buttons.count()):
        button = buttons.nth(i)
        assert button.is_visible()
        box = button.bounding_box()
        assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= 1024, (button.inner_text(), box)
    # and the rename it offers answers a click there
    asked: list[str] = []

    def answer(dialog: Any) -> None:
        asked.append(dialog.message)
        dialog.dismiss()

    page.once("dialog", answer)
    page.locator("#runs-table td.actions button.rename").first.click()
    assert asked == ["New name for this run:"]


def test_per_step_table_scrolls_with_rank_step_and_step_time_in_view(page, server) -> None:
    page.set_viewport_size({"width": 1400, "height": 900})
    page.goto(server + "/")
    page.click(".run-name >> nth=0")
    page.wait_for_selector("#steps-table tbody td")
    heads = page.locator("#steps-table thead th").all_inner_texts()
    assert heads[:3] == ["Rank", "Step", "Step time"]
    scroller = "document.querySelector('#steps-table').closest('.table-scroll')"
    assert page.evaluate(f"{scroller}.scrollWidth > {scroller}.clientWidth")  # wider than its box at 1400 px
    lefts = "[...document.querySelector('#steps-table tbody tr').cells].map((c) => c.getBoundingClientRect().left)"
    before = page.evaluate(lefts)
    page.evaluate(f"{scroller}.scrollLeft = {scroller}.scrollWidth")
    page.wait_for_function(f"{scroller}.scrollLeft > 0")
    after = page.evaluate(lefts)
    assert after[:3] == pytest.approx(before[:3], abs=1)  # rank, step and step time stay where they were
    assert after[3] < before[3]  # the other columns scrolled
    # the columns that scroll pass under the sticky ones, never over them
    top = page.evaluate(
        """(() => { const cell = () => document.querySelector('#steps-table tbody tr').cells[2].getBoundingClientRect();
              window.scrollBy(0, cell().top - window.innerHeight / 2);  // the row in the viewport
              const c = cell();
              return document.elementFromPoint(c.left + c.width / 2, c.top + c.height / 2).cellIndex; })()"""
    )
    assert top == 2
