"""The comparison report and the Markdown summary: findings below the listing threshold, changes within noise,
run totals of runs of different step counts, and the verdict."""

from __future__ import annotations

import html
import re

from compare_traces import MINOR_COPY_NS, copy_run

from webapp.formatting import fmt_ns
from webapp.report import compare_report, markdown_summary, prepare_run, verdict_of


def test_a_finding_below_the_threshold_in_b_is_still_there_in_the_report_and_the_summary() -> None:
    a, b = prepare_run(copy_run(), "big"), prepare_run(copy_run(MINOR_COPY_NS), "small")
    result, verdict, page = compare_report(a, b)
    cost = {f.rule: f.cost_per_step_ns for f in b.analysis.minor_findings}["pageable-copy"]
    fixed = re.search(r'<strong class="better">Fixed in B</strong>(.*?)</div>', page, re.S)
    assert fixed and "pageable-copy" not in fixed[1]
    below = re.search(r'id="fdiff-minor"><strong>Below threshold now</strong>(.*?)</div>', page, re.S)
    assert below and f"pageable-copy · {fmt_ns(cost)}/step" in html.unescape(below[1])
    text = markdown_summary(result, "big", "small", verdict)
    assert "**Findings fixed in B:** none" in text
    line = next(x for x in text.splitlines() if x.startswith("**Below the threshold now"))
    assert f"`pageable-copy` ({fmt_ns(cost)}/step)" in line and "`no-copy-overlap`" in line
    swapped = compare_report(b, a)[0]
    back = markdown_summary(swapped, "small", "big", verdict_of(swapped))
    assert "**New in B:** none" in back and "**Above the threshold now (minor in A):** `" in back


def test_runs_of_different_step_counts_compare_per_step_in_the_report_and_the_summary() -> None:
    a, b = prepare_run(copy_run(n_steps=4), "four"), prepare_run(copy_run(n_steps=2), "two")
    result, verdict, page = compare_report(a, b)
    assert verdict.text == "B's median step takes as long as A's"
    assert html.unescape(page).count(verdict.text) == 1
    assert '<td class="wrap" title="sync_wait_ns">Sync wait, mean per step</td>' in page
    assert "A has 4 steps and B 2: run totals are compared per step" in html.unescape(page)
    text = markdown_summary(result, "four", "two", verdict)
    row = next(x for x in text.splitlines() if x.startswith("| Sync waits"))
    assert row == "| Sync waits, mean per step | 1 | 1 | +0.0% (same) |"
    assert "| Median step | 2 s | 2 s | +0.0% (same) |" in text
