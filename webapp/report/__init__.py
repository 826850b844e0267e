"""Offline reports: one self-contained HTML file per run or per comparison, and a Markdown summary.

``run_report(trace, name)`` and ``compare_report(a, b, ...)`` return the HTML text; the file holds Plotly
and the page scripts inline, the timeline's data within a byte budget (webapp.report.embed), and opens
in a browser with no server and no network.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from webapp.report.build import PreparedRun, compare_context, prepare_run, run_context
from webapp.report.embed import DEFAULT_BUDGET_BYTES
from webapp.report.render import render
from webapp.report.summary import Verdict, markdown_summary, verdict_of

if TYPE_CHECKING:
    from webapp.analysis.compare import Comparison

__all__ = [
    "DEFAULT_BUDGET_BYTES",
    "PreparedRun",
    "Verdict",
    "compare_report",
    "markdown_summary",
    "prepare_run",
    "run_report",
    "verdict_of",
]


def run_report(run: PreparedRun, budget_bytes: int | None = None) -> str:
    """The run report of a prepared run (:func:`prepare_run`); ``budget_bytes`` for its timeline data (None:
    the default, fitted so that the file stays within webapp.report.build.FILE_BOUND_BYTES)."""
    return render("run.html", run_context(run, budget_bytes))


def compare_report(
    a: PreparedRun, b: PreparedRun, bound: float | None = None, budget_bytes: int | None = None
) -> tuple[Comparison, Verdict, str]:
    """The comparison of A (baseline) and B, its verdict against ``bound`` (allowed slow-down, 0.05 = 5%;
    None: no gate) and the comparison report."""
    from webapp.analysis.compare import compare_analyses

    result = compare_analyses(a.analysis, b.analysis, a.trace, b.trace)
    verdict = verdict_of(result, bound)
    _, context = compare_context(a, b, verdict.to_dict(), budget_bytes, result)
    return result, verdict, render("compare.html", context)
