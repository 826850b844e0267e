"""The report as data and text: bounded embedded timeline, focus steps, the script bundle, escaping."""

from __future__ import annotations

import base64
import gzip
import json
import re
from pathlib import Path

import pandas as pd
import pytest
from report_runs import EVIL

from collector.synthetic import synthetic_trace
from webapp.report import PreparedRun, compare_report, prepare_run, run_report
from webapp.report.assets import STATIC, BundleError, bundle
from webapp.report.build import focus_pairs, run_context
from webapp.report.embed import Focus, embed_timeline, finding_window, focus_steps


def unpack(blob: str) -> object:
    return json.loads(gzip.decompress(base64.b64decode(blob)))


def page_data(html: str) -> dict:
    """window.STREAMSCOPE of a report, read back as JSON (tojson's escapes are valid JSON escapes)."""
    m = re.search(r"<script>window\.STREAMSCOPE = (.*?);</script>", html, re.S)
    assert m, "no page data"
    return json.loads(m.group(1))


def test_focus_steps_are_the_worst_and_the_typical_step() -> None:
    per_step = pd.DataFrame(
        {
            "rank": [0, 0, 0, 0, 0],
            "step": [0, 1, 2, 3, 4],
            "start_ns": [0, 10, 20, 30, 40],
            "end_ns": [10, 20, 30, 40, 90],
            "step_time_ns": [10, 11, 9, 10, 50],
        }
    )
    worst, typical = focus_steps(per_step)
    assert (worst.label, worst.step, worst.step_time_ns) == ("worst step", 4, 50)
    assert typical.label == "typical step" and typical.step_time_ns in (10, 11)
    assert focus_steps(per_step.iloc[:1]) == (Focus("typical step", 0, 0, 0, 10, 10),)
    assert focus_steps(pd.DataFrame()) == ()


def test_embedded_views_stay_within_the_budget_and_say_what_was_left_out() -> None:
    run = prepare_run(synthetic_trace(200_000, pattern="sync-trap", steps=40), "big")
    focus = focus_steps(run.analysis.per_step)
    assert len(focus) == 2
    small = embed_timeline(run.index, focus, budget_bytes=300_000)
    assert small.size_bytes <= 300_000
    assert small.views[0].focus == -1 and small.views[0].level == 0  # the whole-run overview always
    assert any("over the data budget" in n for n in small.left_out), small.left_out
    big = embed_timeline(run.index, focus, budget_bytes=1_500_000)
    assert big.size_bytes <= 1_500_000
    assert max(v.level for v in big.views) > max(v.level for v in small.views)
    # every view is a timeline payload of its window; level L tiles are 1/2**L of the padded step wide
    for v in big.views[:12]:
        payload = unpack(v.blob)
        assert isinstance(payload, dict)
        assert (payload["start_ns"], payload["end_ns"]) == (v.start_ns, max(v.end_ns, v.start_ns + 1))
    deepest = max((v for v in big.views if v.focus >= 0), key=lambda v: v.level)
    f = focus[deepest.focus]
    padded = (f.end_ns - f.start_ns) * 1.1
    assert (deepest.end_ns - deepest.start_ns) == pytest.approx(padded / 2**deepest.level, rel=0.01)
    assert embed_timeline(run.index, focus, budget_bytes=20_000_000).full  # the whole run fits: every interval


def test_a_findings_window_is_embedded_as_the_page_will_ask_for_it() -> None:
    run = prepare_run(synthetic_trace(200_000, pattern="sync-trap", steps=40), "big")
    ev = run.analysis.findings[0].evidence[0]
    a, b = finding_window(ev.start_ns, ev.end_ns)
    pad = max((ev.end_ns - ev.start_ns) * 0.15, 2000)
    assert a < ev.start_ns - pad and b > ev.end_ns + pad  # what Timeline.focus asks for lies inside
    emb = embed_timeline(run.index, (), budget_bytes=1_000_000, finding_windows=[(a, b)])
    (view,) = [v for v in emb.views if v.focus == -2]
    assert (view.start_ns, view.end_ns) == (a - run.index.origin_ns, b - run.index.origin_ns)
    tiny = embed_timeline(run.index, (), budget_bytes=len(emb.views[0].blob) + 200, finding_windows=[(a, b)])
    assert [v.focus for v in tiny.views] == [-1] and any("findings' windows" in n for n in tiny.left_out)


def test_focus_pairs_align_typical_with_typical_and_worst_with_worst() -> None:
    fa = (Focus("worst step", 0, 7, 0, 9), Focus("typical step", 0, 3, 0, 5))
    fb = (Focus("typical step", 0, 4, 0, 5),)
    pairs = focus_pairs(fa, fb)
    assert [(p["a"]["step"], p["b"]["step"]) for p in pairs] == [(3, 4), (7, 4)]
    assert focus_pairs((), fb)[0]["a"] is None


def test_bundle_joins_the_modules_in_order_and_cannot_close_its_script(tmp_path: Path) -> None:
    js = bundle("report.js")
    order = [m.group(1) for m in re.finditer(r"^__ss\['([\w.]+)'\] = ", js, re.M)]
    assert order[-1] == "report.js" and order.index("common.js") < order.index("timeline.js")
    assert {"common.js", "tables.js", "timeline.js", "report_data.js"} <= set(order)
    assert not re.search(r"^\s*(import|export)\b", js, re.M)
    assert "</" not in js
    (tmp_path / "a.js").write_text('import { b } from "./b.js";\nexport const a = b + "</script>";\n')
    (tmp_path / "b.js").write_text("export const b = 1;\n")
    out = bundle("a.js", tmp_path)
    assert "const { b } = __ss['b.js'];" in out and "<\\/script>" in out and "return { a: a };" in out
    (tmp_path / "d.js").write_text('import { b } from "./b.js";\nconst d = 2;\nexport { b, d as e };\n')
    assert "return { b: b, e: d };" in bundle("d.js", tmp_path)
    (tmp_path / "c.js").write_text("export default function () {}\n")
    with pytest.raises(BundleError, match="c.js"):
        bundle("c.js", tmp_path)
    assert STATIC.joinpath("report.js").is_file()


def test_run_report_holds_the_run_page_content(prepared_samples: dict[str, PreparedRun]) -> None:
    run = prepared_samples["naive"]
    html = run_report(run)
    data = page_data(html)
    assert data["mode"] == "run" and data["run"]["name"] == "naive"
    assert [f["rule"] for f in data["analysis"]["findings"]] == [f.rule for f in run.analysis.findings]
    for f in run.analysis.findings:
        assert f.title in html and f.fix.split("(")[0][:40] in html.replace("&#39;", "'").replace("&quot;", '"')
    assert "collector/demos/loops.py:" in html  # source lines of the findings
    assert 'id="whatif"' in html and "× faster" in html
    assert data["step_figure"]["data"] and data["tables"]["per_step"]
    assert len(data["timeline"]["views"]) >= 2  # overview plus the focus steps
    assert 'http-equiv="Content-Security-Policy"' in html
    assert not re.search(r"""(src|href)=["'](https?:)?//""", html)  # nothing from the network
    ctx = run_context(run)
    assert {c["key"] for c in ctx["cards"]} >= {"step_time_median_ns", "gpu_busy_frac"}


def test_all_metrics_name_the_run_totals(prepared_samples: dict[str, PreparedRun]) -> None:
    """A metric that sums a per-step column over the steps says so; medians, fractions and rates do not."""
    from webapp.formatting import fmt_ns

    run = prepared_samples["naive"]
    html = run_report(run)
    rows = dict(re.findall(r'<td class="wrap" title="([^"]+)">([^<]*)</td>', html.split('id="all-metrics"')[1]))
    total = run.analysis.per_step["step_time_ns"].sum()
    assert run.analysis.metrics["step_time_ns"] == pytest.approx(total)
    assert rows["step_time_ns"] == "Step time, total over the steps"
    cell = re.search(r'title="step_time_ns">[^<]*</td><td class="num">([^<]*)</td>', html)
    assert cell and cell[1] == fmt_ns(total)
    assert rows["pageable_copy_count"] == "Pageable copies, total over the steps"
    assert rows["step_time_median_ns"] == "Median step" and rows["gpu_busy_frac"] == "GPU busy"
    assert rows["h2d_pageable_achieved_gbps"] == "H2D pageable achieved" and rows["steps"] == "Steps"
    assert "total over the steps" not in json.dumps(page_data(html)["metrics_catalog"])  # the step table's labels


def test_names_from_traces_stay_text(evil_run: PreparedRun, prepared_samples: dict[str, PreparedRun]) -> None:
    for html in (run_report(evil_run), compare_report(prepared_samples["overlap"], evil_run)[2]):
        assert EVIL not in html and "<img src=x" not in html
        assert html.count("<script") == html.count("</script>") == 3
        assert "&lt;/script&gt;&lt;img src=x onerror=alert(1)&gt;" in html  # the header, autoescaped
        assert "\\u003c/script\\u003e\\u003cimg" in html  # the page data, through tojson
    data = page_data(run_report(evil_run))
    assert data["run"]["workload"] == EVIL  # and it reads back as the same text


def test_compare_report_holds_the_compare_page(prepared_samples: dict[str, PreparedRun]) -> None:
    a, b = prepared_samples["naive"], prepared_samples["overlap"]
    result, verdict, html = compare_report(a, b, 0.05)
    data = page_data(html)
    assert data["mode"] == "compare" and data["pairs"] and data["a"]["timeline"]["views"]
    assert not verdict.failed and verdict.text.startswith("OK: B's median step takes ") and "x faster)" in verdict.text
    assert html.count(verdict.text.replace("'", "&#39;")) == 1
    assert "Fixed in B" in html and all(r in html for r in result.findings["fixed"])
    assert re.search(r"Timeline data: [\d.]+ [KM]iB of a [\d.]+ MiB budget", html)  # the fitted default's size
    _, slower, _ = compare_report(b, a, 0.05)
    assert slower.failed and slower.text.startswith("FAIL")


def test_every_step_gets_detail_and_the_budget_goes_to_it() -> None:
    """Not only the worst and typical steps: every step has a view of its own, finer than the overview, and
    the finer levels of the steps spend the budget until it is gone or nothing more would be drawn."""
    from webapp.report.build import run_context
    from webapp.report.embed import STEP_VIEW

    run = prepare_run(synthetic_trace(200_000, pattern="sync-trap", steps=40), "big")
    ctx = run_context(run, 1_000_000)  # the whole run does not fit: 2.4 MB
    views = ctx["page"]["timeline"]["views"]
    overview_px = (views[0]["end_ns"] - views[0]["start_ns"]) / views[0]["width_px"]
    o = run.index.origin_ns
    for r in run.analysis.per_step[run.analysis.per_step["rank"] == 0].itertuples():
        mine = [
            v
            for v in views
            if v["focus"] in (STEP_VIEW, 0, 1) and v["start_ns"] <= r.start_ns - o and v["end_ns"] >= r.end_ns - o
        ]
        assert mine and mine[0]["label"] == f"step {r.step}"
        assert (mine[0]["end_ns"] - mine[0]["start_ns"]) / mine[0]["width_px"] < overview_px / 10
    assert ctx["data_size"] > 0.9 * ctx["data_budget"]  # spent on detail, not left over
    assert any(n.startswith("each step is embedded down to ") for n in ctx["left_out"])


def test_many_steps_share_views_at_the_finest_grouping_that_fits() -> None:
    from webapp.report.embed import STEP_VIEW

    run = prepare_run(synthetic_trace(100_000, pattern="sync-trap", steps=400), "many")
    per_step = run.analysis.per_step
    steps = [(int(s), int(a), int(b)) for s, a, b in per_step[["step", "start_ns", "end_ns"]].itertuples(index=False)]
    emb = embed_timeline(run.index, focus_steps(per_step), budget_bytes=300_000, steps=steps)
    grouped = [v for v in emb.views if v.focus == STEP_VIEW]
    assert grouped and all(v.label.startswith("steps ") for v in grouped)
    size = int(next(n for n in emb.left_out if n.startswith("the steps, ")).split()[2])  # "the steps, 4 a view,"
    assert size > 1 and len(grouped) * size >= len(steps) and emb.size_bytes <= 300_000


def test_the_report_has_every_tab_of_the_run_page(prepared_samples: dict[str, PreparedRun]) -> None:
    """One macro (_parts.html run_tabs) makes the tabs of both pages; the report fills Host time (or says why
    it is empty) and, on a multi-rank run, Collectives from its own data."""
    from ranks.ranks_traces import job

    from collector.ranks.merge import merge_traces
    from webapp.report.render import TEMPLATES

    for page in ("run.html", "report/run.html"):
        text = (TEMPLATES / page).read_text()
        assert "run_tabs(" in text and "data-tab=" not in text, page
    tabs = re.compile(r'<button[^>]* data-tab="([\w-]+)"[^>]*>')
    naive = prepared_samples["naive"]
    html = run_report(naive)
    assert tabs.findall(html) == ["tab-steps", "tab-kernels", "tab-syncs", "tab-host", "tab-colls"]
    assert re.search(r'id="tab-colls-button" hidden>', html)  # one rank: no collectives
    tables = page_data(html)["tables"]
    frames = naive.analysis.host_frames
    shown = [r["frame"] for r in tables["host_frames"]]
    assert len(frames) and shown == list(frames["frame"])[: len(shown)]
    assert tables["host_frames_missing"] == naive.analysis.host_frames_missing == ""
    two = prepare_run(merge_traces(job(2)), "two-ranks")  # synthetic ranks: no Python stacks
    html = run_report(two)
    assert re.search(r'id="tab-colls-button">Collectives<', html)
    tables = page_data(html)["tables"]
    assert tables["ranks"]["collectives"] == two.analysis_dict["ranks"]["collectives"]
    assert tables["host_frames"] == []
    assert tables["host_frames_missing"].startswith("This recording has no Python stacks")
