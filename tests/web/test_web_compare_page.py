"""The served compare page: the verdict line, findings below the listing threshold, changes within noise, and
run totals of runs of different step counts."""

from __future__ import annotations

import html
import re

import pytest
from compare_traces import MINOR_COPY_NS, copy_run

from webapp import PACKAGE_ROOT
from webapp.cli import main
from webapp.formatting import fmt_ns
from webapp.ingest import add_trace, display_name, ingest_file
from webapp.pipeline import analyze_dict
from webapp.store import Store

SAMPLES = PACKAGE_ROOT / "sample_traces"


def _rows(page: str) -> dict[str, tuple[str, str, str]]:
    """Metric key -> (label, class of the change cell, change shown), over both metric tables."""
    found = re.findall(
        r'<td class="wrap" title="([^"]+)">([^<]*)</td>(?:<td class="num">[^<]*</td>){2}\s*'
        r'<td class="num ?([^"]*)"[^>]*>([^<]*)</td>',
        page,
    )
    return {key: (html.unescape(label), cls.strip(), html.unescape(change)) for key, label, cls, change in found}


def _verdict(page: str) -> str:
    found = re.search(r'<p class="verdict[^"]*" id="verdict"><strong>([^<]*)</strong></p>', page)
    assert found, "no verdict line"
    return html.unescape(found[1])


@pytest.mark.skipif(not (SAMPLES / "naive.json.gz").is_file(), reason="sample traces not present")
def test_the_compare_page_opens_with_the_verdict_the_cli_prints(client, store: Store, capsys) -> None:
    a_path, b_path = SAMPLES / "naive.json.gz", SAMPLES / "overlap.json.gz"
    a = ingest_file(store, a_path, display_name(a_path.name))
    b = ingest_file(store, b_path, display_name(b_path.name))
    page = client.get(f"/compare?a={a.id}&b={b.id}").get_data(as_text=True)
    assert main(["compare", str(a_path), str(b_path)]) == 0
    cli_verdict = capsys.readouterr().out.strip().splitlines()[-1]
    assert cli_verdict.startswith("B's median step takes ") and "x faster)" in cli_verdict
    assert _verdict(page) == cli_verdict
    assert page.index('id="verdict"') < page.index('id="cmp-roles"') < page.index('class="layout"')  # on top
    swapped = client.get(f"/compare?a={b.id}&b={a.id}").get_data(as_text=True)
    assert "more time than A" in _verdict(swapped) and "x slower)" in _verdict(swapped)


def test_a_finding_below_the_threshold_in_b_reads_as_still_there_with_its_cost(client, store: Store) -> None:
    a = add_trace(store, copy_run(), "12 ms copies")
    b = add_trace(store, copy_run(MINOR_COPY_NS), "8 ms copies")
    minor = {f["rule"]: f for f in store.analysis(b.id)["minor_findings"]}
    assert "pageable-copy" in minor and not store.analysis(b.id)["findings"]
    page = client.get(f"/compare?a={a.id}&b={b.id}").get_data(as_text=True)
    fixed = re.search(r'<strong class="better">Fixed in B</strong>(.*?)</div>', page, re.S)
    assert fixed and "pageable-copy" not in fixed[1] and ">none<" in fixed[1]
    below = re.search(
        r'<div class="fdiff" id="fdiff-minor"><strong>Below threshold now</strong>(.*?)</div>', page, re.S
    )
    assert below, "no 'below threshold now' line"
    tags = dict(re.findall(r'<span class="tag">([\w-]+) · ([^<]*)/step</span>', below[1]))
    assert tags["pageable-copy"] == fmt_ns(minor["pageable-copy"]["cost_per_step_ns"])
    body = client.get(f"/api/compare?a={a.id}&b={b.id}").get_json()
    assert body["findings"]["fixed"] == [] and "pageable-copy" in body["findings"]["minor"]
    assert body["finding_costs"]["pageable-copy"] == minor["pageable-copy"]["cost_per_step_ns"]


def test_a_change_that_shows_as_zero_reads_same_on_the_page(client, store: Store) -> None:
    trace = copy_run()
    analysis = analyze_dict(trace)  # this version's: served as stored
    m = analysis["metrics"]
    nudged = {
        **m,
        "gpu_busy_frac": m["gpu_busy_frac"] + 0.0003,  # +0.03 pts: shows as +0.0 pts
        "step_time_median_ns": m["step_time_median_ns"] * 1.0003,  # +0.03%: shows as +0.0%
        "step_time_p90_ns": m["step_time_p90_ns"] * 1.02,  # +2.0%: a change
    }
    a = add_trace(store, trace, "before", analysis=analysis)
    b = add_trace(store, trace, "after", analysis={**analysis, "metrics": nudged})
    rows = _rows(client.get(f"/compare?a={a.id}&b={b.id}").get_data(as_text=True))
    assert rows["gpu_busy_frac"][1:] == ("same", "+0.0 pts")
    assert rows["step_time_median_ns"][1:] == ("same", "+0.0%")
    assert rows["step_time_p90_ns"][1:] == ("worse", "+2.0%")
    page = client.get(f"/compare?a={b.id}&b={a.id}").get_data(as_text=True)
    assert _rows(page)["gpu_busy_frac"][1:] == ("same", "+0.0 pts")  # a tiny drop: +0.0, not -0.0, and same
    assert _verdict(page) == "B's median step takes as long as A's"


def test_run_totals_of_runs_of_different_step_counts_are_compared_per_step(client, store: Store) -> None:
    a = add_trace(store, copy_run(n_steps=4), "four steps")
    b = add_trace(store, copy_run(n_steps=2), "two steps")  # the same steps: half the totals
    page = client.get(f"/compare?a={a.id}&b={b.id}").get_data(as_text=True)
    rows = _rows(page)
    assert rows["sync_wait_count"] == ("Sync waits, mean per step", "same", "+0.0%")
    assert rows["sync_wait_ns"] == ("Sync wait, mean per step", "same", "+0.0%")
    assert rows["step_time_ns"] == ("Step time, mean per step", "same", "+0.0%")
    assert rows["pageable_copy_bytes"][0] == "Pageable copy bytes, mean per step"
    assert rows["step_time_median_ns"] == ("Median step", "same", "+0.0%")
    notes = re.search(r'<ul class="muted notes" id="cmp-notes">(.*?)</ul>', page)
    assert notes and "<li>A has 4 steps and B 2: run totals are compared per step" in html.unescape(notes[1])
    metrics = {r["metric"]: r for r in client.get(f"/api/compare?a={a.id}&b={b.id}").get_json()["metrics"]}
    assert metrics["sync_wait_count"]["a"] == metrics["sync_wait_count"]["b"] == 1.0
    # the same step counts: totals, named as such
    c = add_trace(store, copy_run(n_steps=4), "four steps again")
    rows = _rows(client.get(f"/compare?a={a.id}&b={c.id}").get_data(as_text=True))
    assert rows["sync_wait_ns"][0] == "Sync wait, total over the steps"
