"""Offline reports in a real Chromium, with the network cut: each sample run's report, a comparison, the
notebook repr and names that try to inject HTML. Any request other than the file itself fails the test."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from timeline_page import legend_and_drawn

from collector.load import load_trace
from webapp import PACKAGE_ROOT
from webapp.report import PreparedRun, compare_report, prepare_run, run_report

pytestmark = pytest.mark.browser

SAMPLES = sorted((PACKAGE_ROOT / "sample_traces").glob("*.json.gz"))
FIRST_PAINT = "window.ssTimeline && window.ssTimeline.stats.firstPaintMs !== null"
BOTH_DRAWN = "window.ssCompare && ssCompare.a.data && ssCompare.b.data"
FULL_DETAIL = "drawn from every interval of the run, embedded one by one (full detail)"


@pytest.fixture(scope="module")
def runs() -> dict[str, PreparedRun]:
    return {p.name.split(".")[0]: prepare_run(load_trace(p), p.name.split(".")[0]) for p in SAMPLES}


@pytest.fixture
def offline(page) -> Callable[[Path], list[str]]:
    """offline(path): open the file with the network off; returns the list of URLs the page asked for."""
    page.context.set_offline(True)
    seen: list[str] = []
    page.on("request", lambda r: seen.append(r.url))
    page.route("**/*", lambda route: route.continue_() if route.request.url.startswith("file:") else route.abort())

    def open_file(path: Path) -> list[str]:
        page.goto(path.as_uri())
        return seen

    return open_file


def drawn_lanes(page: Any, hook: str = "ssTimeline") -> list[tuple[str, int]]:
    return [tuple(x) for x in page.evaluate(f"{hook}.data.lanes.map(l => [l.kind, l.s.length + l.bs.length])")]


@pytest.mark.parametrize("name", [p.name.split(".")[0] for p in SAMPLES])
def test_each_sample_report_opens_offline(name: str, runs, page, offline, tmp_path: Path, shot) -> None:
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    run = runs[name]
    path = tmp_path / f"{name}.html"
    path.write_text(run_report(run), encoding="utf-8")
    seen = offline(path)
    page.wait_for_function(FIRST_PAINT)
    lanes = drawn_lanes(page)
    assert any(n > 0 for kind, n in lanes if kind != "cpu_thread"), lanes  # GPU work drawn in the first view
    findings = run.analysis.findings
    items = page.locator("#findings li[data-finding]")
    assert items.count() == len(findings)
    if findings:
        assert findings[0].title in page.inner_text("#findings")
        assert "Fix:" in page.inner_text("#findings li >> nth=0")
    if len(run.analysis.per_step):
        page.wait_for_selector("#step-chart .main-svg")  # Plotly, unpacked from the file, drew the chart
        assert page.locator("#steps-table tbody tr").count() > 0
        assert page.inner_text("#tl-source") == FULL_DETAIL  # every sample fits the budget whole
    if findings and findings[0].evidence:
        seq = int(page.get_attribute("#timeline", "data-seq") or 0)
        page.click("#findings li >> nth=0")
        page.wait_for_function(f"Number(document.getElementById('timeline').dataset.seq) > {seq}")
        assert page.evaluate("ssTimeline.highlight !== null")
    shot(page, f"report-{name}")
    assert errors == []
    assert seen == [path.as_uri()], seen


def test_comparison_report_opens_offline(runs, page, offline, tmp_path: Path, shot) -> None:
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    path = tmp_path / "diff.html"
    path.write_text(compare_report(runs["naive"], runs["overlap"], 0.05)[2], encoding="utf-8")
    seen = offline(path)
    page.wait_for_function(BOTH_DRAWN)
    for side in ("a", "b"):
        assert any(n > 0 for kind, n in drawn_lanes(page, f"ssCompare.{side}") if kind != "cpu_thread")
    assert page.locator("#metric-deltas tbody tr").count() > 5
    assert page.inner_text("#verdict").startswith("OK: B's median step takes ")
    assert "% less time than A's (" in page.inner_text("#verdict")
    assert "pageable-copy" in page.inner_text(".fdiff >> nth=0")  # fixed in B
    page.wait_for_selector("#step-chart .main-svg")
    assert page.locator("#ops-table tbody tr").count() > 0
    if page.locator("#cmp-focus option").count() > 1:  # align on the worst steps instead
        page.select_option("#cmp-focus", index=1)
        page.wait_for_function(BOTH_DRAWN)
    shot(page, "report-compare")
    assert errors == []
    assert seen == [path.as_uri()], seen


def test_notebook_repr_draws_in_its_frame(page, offline, tmp_path: Path) -> None:
    import streamscope

    run = streamscope.load(PACKAGE_ROOT / "sample_traces" / "sync-trap.json.gz")
    path = tmp_path / "notebook.html"
    path.write_text(f"<!doctype html><html><body><h1>notebook</h1>{run._repr_html_()}</body></html>", encoding="utf-8")
    seen = offline(path)
    frame = page.frame_locator("iframe")
    frame.locator("#findings li").first.wait_for()
    inner = next(f for f in page.frames if f != page.main_frame)
    inner.wait_for_function(FIRST_PAINT)
    assert inner.evaluate("ssTimeline.data.lanes.length") > 0
    assert frame.locator("#findings li[data-finding]").count() == len(run.findings)
    assert all(u == path.as_uri() or u.startswith("about:") for u in seen), seen


def test_names_in_a_report_render_as_text(page, offline, traces, tmp_path: Path) -> None:
    evil = "</script><img src=x onerror=alert(1)>"
    dialogs: list[str] = []

    def dismiss(dialog: Any) -> None:
        dialogs.append(dialog.message)
        dialog.dismiss()

    page.on("dialog", dismiss)
    run = prepare_run(load_trace(traces["evil"]), evil)
    path = tmp_path / "evil.html"
    path.write_text(run_report(run), encoding="utf-8")
    offline(path)
    page.wait_for_function(FIRST_PAINT)
    assert page.inner_text("#run-name") == evil
    page.click("[data-tab=tab-kernels]")
    assert evil in page.inner_text("#kernels-table")
    assert page.locator("img[src=x]").count() == 0 and dialogs == []


def test_zooming_a_large_run_draws_finer_embedded_views(page, offline, tmp_path: Path) -> None:
    from collector.synthetic import synthetic_trace

    run = prepare_run(synthetic_trace(200_000, pattern="sync-trap", steps=20), "large")
    path = tmp_path / "large.html"
    path.write_text(run_report(run, budget_bytes=1_000_000), encoding="utf-8")
    offline(path)
    page.wait_for_function(FIRST_PAINT)
    first = page.inner_text("#tl-source")
    assert first.startswith("drawn from the worst step")
    level0 = page.evaluate("ssTimeline.opts.embedded.lastPicked.level")
    seq = int(page.get_attribute("#timeline", "data-seq") or 0)
    page.evaluate("ssTimeline.zoom(0.2)")
    page.wait_for_function(f"Number(document.getElementById('timeline').dataset.seq) > {seq}")
    assert page.evaluate("ssTimeline.opts.embedded.lastPicked.level") > level0
    assert page.inner_text("#tl-source") != first  # a finer view, fewer ns per pixel
    assert "over the data budget" in (page.text_content("#left-out") or "")


def test_the_report_says_what_the_run_page_says_and_draws_every_step_in_detail(
    runs, page, offline, tmp_path: Path
) -> None:
    """The offline run report's cards, metrics, what-if and legend are the analysis', as on the web page; a
    step that is neither the worst nor the typical one is drawn in full detail (the run fits the budget whole;
    a larger run's steps: test_browser_report_detail.py); keys are page-wide."""
    from webapp.analysis.report import what_if_rows
    from webapp.figures import all_metric_rows, metric_cards
    from webapp.formatting import fmt_ns

    run = runs["naive"]
    d = run.analysis_dict
    path = tmp_path / "naive.html"
    path.write_text(run_report(run), encoding="utf-8")
    offline(path)
    page.wait_for_function(FIRST_PAINT)
    cards = page.eval_on_selector_all(
        ".metrics .metric", "els => els.map(e => [e.dataset.key, e.querySelector('.v').textContent])"
    )
    assert cards == [[c["key"], c["value"]] for c in metric_cards(d["metrics"])]
    table = page.eval_on_selector_all("#all-metrics tr", "els => els.map(e => e.children[1].textContent)")
    assert table == [r["value"] for r in all_metric_rows(d["metrics"])]
    rows = page.eval_on_selector_all(
        "#whatif .whatif-row", "els => els.map(e => [...e.children].map(c => c.textContent))"
    )
    want = what_if_rows(d["what_if"], d["findings"])
    assert rows == [[r["title"], f"−{fmt_ns(r['saving_ns'])} / step"] for r in want] and rows
    legend, drawn = legend_and_drawn(page)
    assert legend == drawn
    # a step other than the focus ones: its own view, and the page says so
    focus = {int(v["step"]) for v in page.evaluate("STREAMSCOPE.timeline.focus")}
    other = next(int(s) for s in run.analysis.per_step["step"] if int(s) not in focus)
    seq = int(page.get_attribute("#timeline", "data-seq") or 0)
    page.click(f"#steps-table tbody tr:nth-child({other + 1})")
    page.wait_for_function(f"Number(document.getElementById('timeline').dataset.seq) > {seq}")
    assert page.inner_text("#tl-source") == FULL_DETAIL
    # keys work page-wide: no click on the timeline first
    span = page.evaluate("ssTimeline.view[1] - ssTimeline.view[0]")
    page.keyboard.press("w")
    assert page.evaluate("ssTimeline.view[1] - ssTimeline.view[0]") < span
