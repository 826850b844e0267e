"""The verdict of a comparison and its Markdown summary (for a pull-request comment or a CI job summary).

Pure: a :class:`~webapp.analysis.compare.Comparison` in, text out. Names from traces are escaped for
Markdown tables and HTML (GitHub renders HTML in comments). The verdict itself (:class:`Verdict`,
:func:`verdict_of`) lives with the comparison, so the served compare page says the same sentence.
"""

from __future__ import annotations

import html
import math
from typing import Any

from webapp.analysis import catalog
from webapp.analysis.compare import Comparison, Verdict, verdict_of
from webapp.figures import compare_rows
from webapp.formatting import fmt_change, fmt_ns

__all__ = ["Verdict", "markdown_summary", "md", "verdict_of"]


def md(text: Any) -> str:
    """Text safe in a Markdown table cell: HTML-escaped, pipes and newlines neutralised, backticks escaped."""
    out = html.escape(str(text), quote=False).replace("|", "\\|").replace("`", "\\`")
    return " ".join(out.split())


def markdown_summary(result: Comparison, name_a: str, name_b: str, verdict: Verdict, report: str | None = None) -> str:
    """A short Markdown summary: the verdict, the headline metrics that both runs have (each change marked
    better, worse or same), findings fixed, new, below or above the listing threshold now and still there
    (with B's cost per step), and the report file's name when one was written."""
    mark = "❌" if verdict.failed else "✅" if verdict.bound is not None else "ℹ️"
    lines = [
        f"### Streamscope: {md(name_b)} (B) vs {md(name_a)} (A)",
        "",
        f"{mark} **{md(verdict.text)}**",
        "",
        "| Metric | A | B | Change |",
        "|---|---:|---:|---:|",
    ]
    rows = {r["metric"]: r for r in compare_rows(result.to_dict()["metrics"])}
    for m in catalog.headline():
        r = rows.get(m.key)
        if r is None or (r["a"] == "—" and r["b"] == "—"):
            continue
        change = fmt_change(r)
        sign = f" ({r['cls']})" if r["cls"] in ("better", "worse", "same") else ""
        lines.append(f"| {md(r['label'])} | {md(r['a'])} | {md(r['b'])} | {md(change)}{sign} |")
    f = result.findings
    costs_b = result.finding_costs

    def rules(names: list[str], costs: bool) -> str:
        if not names:
            return "none"
        parts = []
        for rule in names:
            cost = costs_b.get(rule, math.nan) if costs else math.nan
            parts.append(f"`{rule}`" + (f" ({fmt_ns(cost)}/step)" if cost == cost else ""))
        return ", ".join(parts)

    lines += [
        "",
        f"**Findings fixed in B:** {rules(f['fixed'], False)}  ",
        f"**New in B:** {rules(f['new'], True)}  ",
    ]
    for key, title in (
        ("minor", "Below the threshold now (minor, still there)"),
        ("grown", "Above the threshold now (minor in A)"),
    ):
        if f.get(key):
            lines.append(f"**{title}:** {rules(f[key], True)}  ")
    lines.append(f"**Still there:** {rules(f['unchanged'], True)}")
    if f.get("unseen"):
        lines.append(f"**Not compared (the other run cannot show them):** {rules(f['unseen'], False)}")
    if report:
        lines += ["", f"Full report: {md(report)} (one HTML file; open it in any browser, offline)."]
    return "\n".join(lines) + "\n"
