"""The verdict of a comparison and its Markdown summary (for a pull-request comment or a CI job summary).

Pure: a :class:`~webapp.analysis.compare.Comparison` in, text out. Names from traces are escaped for
Markdown tables and HTML (GitHub renders HTML in comments).
"""

from __future__ import annotations

import html
import math
from dataclasses import dataclass
from typing import Any

from webapp.analysis import catalog
from webapp.analysis.compare import Comparison
from webapp.figures import compare_rows
from webapp.formatting import fmt_change, fmt_ns


@dataclass(frozen=True)
class Verdict:
    """B against A on the median step time: ``change`` (B - A) / A (NaN when unknown), ``bound`` the
    allowed slow-down (None: no gate), ``failed`` when change > bound. The text says how much more or less
    time B's median step takes, and the ratio of the two ("52.7% less time than A's (2.11x faster)")."""

    change: float
    bound: float | None

    @property
    def failed(self) -> bool:
        return self.bound is not None and self.change == self.change and self.change > self.bound

    @property
    def text(self) -> str:
        if self.change != self.change:
            head = "no median step time to compare"
        elif self.change == 0:
            head = "B's median step takes as long as A's"
        else:
            more = self.change > 0
            ratio = 1 + self.change if more else 1 / (1 + self.change) if self.change > -1 else math.inf
            times = f" ({ratio:.2f}x {'slower' if more else 'faster'})" if math.isfinite(ratio) else ""
            amount = f"{abs(self.change) * 100:.1f}% {'more' if more else 'less'}"
            head = f"B's median step takes {amount} time than A's{times}"
        if self.bound is None:
            return head
        return f"{'FAIL' if self.failed else 'OK'}: {head}; the bound is {self.bound * 100:.1f}% more"

    def to_dict(self) -> dict[str, Any]:
        """For templates: text and a CSS class (``fail``, ``ok`` or empty without a gate)."""
        cls = "" if self.bound is None else ("fail" if self.failed else "ok")
        return {"text": self.text, "cls": cls}


def verdict_of(result: Comparison, bound: float | None) -> Verdict:
    return Verdict(result.step_time_change, bound)


def md(text: Any) -> str:
    """Text safe in a Markdown table cell: HTML-escaped, pipes and newlines neutralised, backticks escaped."""
    out = html.escape(str(text), quote=False).replace("|", "\\|").replace("`", "\\`")
    return " ".join(out.split())


def markdown_summary(result: Comparison, name_a: str, name_b: str, verdict: Verdict, report: str | None = None) -> str:
    """A short Markdown summary: the verdict, the headline metrics that both runs have, findings fixed,
    new and still there (with B's cost per step), and the report file's name when one was written."""
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
        sign = " (better)" if r["cls"] == "better" else " (worse)" if r["cls"] == "worse" else ""
        lines.append(f"| {md(r['label'])} | {md(r['a'])} | {md(r['b'])} | {md(change)}{sign} |")
    f = result.findings
    by_rule = {x.rule: x for x in result.analysis_b.findings}

    def rules(names: list[str], costs: bool) -> str:
        if not names:
            return "none"
        parts = []
        for rule in names:
            x = by_rule.get(rule)
            cost = x.cost_per_step_ns if costs and x is not None else math.nan
            parts.append(f"`{rule}`" + (f" ({fmt_ns(cost)}/step)" if cost == cost else ""))
        return ", ".join(parts)

    lines += [
        "",
        f"**Findings fixed in B:** {rules(f['fixed'], False)}  ",
        f"**New in B:** {rules(f['new'], True)}  ",
        f"**Still there:** {rules(f['unchanged'], True)}",
    ]
    if report:
        lines += ["", f"Full report: {md(report)} (one HTML file; open it in any browser, offline)."]
    return "\n".join(lines) + "\n"
