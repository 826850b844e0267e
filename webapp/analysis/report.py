"""Plain-text reports of an analysis or a comparison (what ``streamscope analyze/compare`` print)."""

from __future__ import annotations

import math
import textwrap
from collections.abc import Iterable, Mapping
from typing import Any

from webapp.analysis import catalog
from webapp.analysis.catalog import Unit
from webapp.analysis.compare import Comparison, change_text, compared_label
from webapp.analysis.records import RunAnalysis, rule_key
from webapp.analysis.units import size_text, table_time_text


def fmt(value: float | None, unit: Unit) -> str:
    """One value for a table, by its unit: ns as ms (under 1 ms as the pages write it), fractions as %, bytes
    in binary units (``-`` when missing)."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "-"
    if unit is Unit.NS:
        return table_time_text(float(value))
    if unit is Unit.FRAC:
        return f"{value * 100:.1f} %"
    if unit is Unit.GBPS:
        return f"{value:.1f} GB/s"
    if unit is Unit.BYTES:
        return size_text(float(value))
    return f"{value:,.0f}"


def what_if_sum_note(what_if: Mapping[str, Any], rows: Iterable[Mapping[str, Any]]) -> str:
    """A sentence when the what-if's lines (:func:`what_if_rows`) do not add up to its headline drop within
    10%: each line is one fix replayed alone and averaged over the steps, the headline the median step with
    every fix replayed together. '' when they add up."""
    drop = what_if.get("saving_applied_ns")
    savings = [float(r["saving_ns"]) for r in rows]
    total = sum(savings)
    if not total or not isinstance(drop, (int, float)) or not math.isfinite(drop):
        return ""
    if abs(total - drop) <= max(0.1 * max(total, abs(drop)), 1_000):
        return ""
    if len(savings) == 1:
        return (
            f"The saving is averaged over the steps; the median step drops by {fmt(drop, Unit.NS)}, not "
            f"{fmt(total, Unit.NS)}: the fix saves more in some steps than in the typical one."
        )
    return (
        f"Each line is that fix alone, averaged over the steps; replayed together, the median step drops by "
        f"{fmt(drop, Unit.NS)}, not {fmt(total, Unit.NS)} (fixes interact, and a median is not a mean)."
    )


def _wrap(text: str, indent: str) -> list[str]:
    return textwrap.wrap(text, width=100, initial_indent=indent, subsequent_indent=indent) or [indent]


def what_if_rows(what_if: Mapping[str, Any], findings: Iterable[Any]) -> list[dict[str, Any]]:
    """The what-if's lines, as every page and report shows them: one per listed finding whose fix the estimate
    applies (its ``saving_<rule>_ns``, the rule with '-' as '_'), in the findings' order, labelled with the
    finding's title: ``[{"rule", "title", "saving_ns"}]``. A saving for a rule that is no finding of the run
    is not shown. ``findings``: Finding records or their dicts."""
    rows = []
    for f in findings:
        rule, title = (f.get("rule"), f.get("title")) if isinstance(f, Mapping) else (f.rule, f.title)
        value = what_if.get(rule_key("saving", str(rule)))
        if isinstance(value, (int, float)) and math.isfinite(value):
            rows.append({"rule": str(rule), "title": str(title), "saving_ns": float(value)})
    return rows


def analysis_text(result: RunAnalysis, title: str = "") -> str:
    """Metrics, findings (cost, sources, fix) and the what-if, as a readable report."""
    m = result.metrics
    lines = [title] if title else []
    lines.append(
        f"{int(m.get('ranks', 0))} rank(s), {int(m.get('steps', 0))} step(s), {int(m.get('intervals', 0)):,} intervals"
    )
    lines.append("")
    lines.append("Metrics")
    gpu = catalog.gpu_work(m)
    hints: dict[str, str] = {}  # each distinct hint once, below the metrics, marked * (then **, ...)
    for metric in catalog.headline(gpu):
        value = m.get(metric.key)
        if isinstance(value, (int, float)) and math.isfinite(value):  # a figure the run does not have is left out
            mark = hints.setdefault(metric.hint, "*" * (len(hints) + 1)) if metric.hint else ""
            lines.append(f"  {metric.label:<28} {fmt(value, metric.unit):>16}{' ' + mark if mark else ''}")
    for hint, mark in hints.items():
        lines.extend(_wrap(f"{mark} {hint[0].upper()}{hint[1:]}.", "  "))
    if len(result.per_rank) > 1:
        lines.append("")
        lines.append(f"  {'rank':<6} {'steps':>6} {'step median':>14} {'step p90':>14}" + (" GPU busy" if gpu else ""))
        for rec in result.per_rank.to_dict(orient="records"):
            busy = f" {fmt(float(rec['gpu_busy_frac']), Unit.FRAC):>8}" if gpu else ""
            lines.append(
                f"  {int(rec['rank']):<6} {int(rec['steps']):>6} "
                f"{fmt(float(rec['step_time_median_ns']), Unit.NS):>14} "
                f"{fmt(float(rec['step_time_p90_ns']), Unit.NS):>14}{busy}"
            )
    for note in result.notes:
        lines.extend(_wrap(note, "  "))
    lines.append("")
    if result.findings:
        lines.append(f"Findings ({len(result.findings)})")
        for f in result.findings:
            lines.append(
                f"  [{f.severity.upper()}] {f.rule}: {f.title} - costs {fmt(f.cost_per_step_ns, Unit.NS)} per step"
            )
            lines.extend(_wrap(f.detail, "      "))
            if f.sources:
                lines.append(f"      where: {', '.join(f.sources)}")
            lines.extend(_wrap("fix: " + f.fix, "      "))
    else:
        lines.append("Findings: none")
    lines.append("")
    w = result.what_if
    now, fixed = w.get("step_time_now_ns"), w.get("step_time_fixed_ns")
    rows = what_if_rows(w, result.findings)
    lines.append("What if the findings were fixed" if rows else "What if: no finding to fix")
    speedup = w.get("speedup", math.nan)
    lines.append(
        f"  median step now {fmt(now, Unit.NS)}, estimated {fmt(fixed, Unit.NS)}"
        + (f" ({speedup:.2f}x)" if math.isfinite(speedup) else "")
    )
    for row in rows:
        lines.extend(_wrap(f"{row['title']}: -{fmt(row['saving_ns'], Unit.NS)} per step", "  "))
    note = what_if_sum_note(w, rows)
    lines.extend(_wrap(note, "  ") if note else [])
    return "\n".join(lines)


def comparison_text(c: Comparison, ops_limit: int = 10) -> str:
    """Key metrics side by side (each change as shown, marked better, worse or same: the metrics table's
    ``change`` and ``status``), the biggest per-op changes, what became of the findings, and the notes."""
    ma, mb = c.analysis_a.metrics, c.analysis_b.metrics
    table = c.metrics.set_index("metric")
    basis = table["basis"].to_dict()
    headline = [(m, compared_label(m.key, basis.get(m.key, ""))) for m in catalog.compared_headline(ma, mb)]
    width = max([28, *(len(label) for _, label in headline)])
    lines = [f"{'metric':<{width}} {'A':>16} {'B':>16} {'change':>10}"]
    for metric, label in headline:
        key, unit = metric.key, metric.unit
        shown = table["change"].get(key, math.nan)
        status = table["status"].get(key, "")
        mark = f" {status}" if status in ("better", "worse", "same") else ""
        change = change_text(shown, unit is Unit.FRAC, missing="-")  # a fraction changes by points
        a, b = (table[side].get(key) for side in ("a", "b"))  # NaN: the run has no such figure
        per_step_count = basis.get(key) == "per_step" and unit is Unit.COUNT
        a, b = (f"{v:,.2f}" if per_step_count and v == v else fmt(v, unit) for v in (a, b))
        lines.append(f"{label:<{width}} {a:>16} {b:>16} {change:>10}{mark}")
    lines.append("")
    ops = c.ops[c.ops["status"] != "same"].head(ops_limit)
    if len(ops):
        lines.append("Biggest op changes (time per step, B - A)")
        for row in ops.itertuples(index=False):
            name = row.name if len(row.name) <= 60 else row.name[:57] + "..."
            lines.append(f"  {row.status:<8} {row.kind:<11} {name:<60} {row.delta_step_ns / 1e6:+10.3f} ms/step")
        lines.append("")
    for key in ("fixed", "new"):
        lines.append(f"findings {key}: {', '.join(c.findings[key]) or '-'}")
    a_costs = {f.rule: f.cost_per_step_ns for f in c.analysis_a.findings}
    both = (
        f"{r} ({fmt(a_costs.get(r), Unit.NS)} -> {fmt(c.finding_costs.get(r), Unit.NS)}/step)"
        for r in c.findings["unchanged"]
    )
    lines.append(f"findings in both: {', '.join(both) or '-'}")
    if c.findings.get("unseen"):
        lines.append(f"findings not compared (the other run cannot show them): {', '.join(c.findings['unseen'])}")
    costs = c.finding_costs
    for key, say in (("minor", "below the threshold now (minor in B)"), ("grown", "above the threshold now")):
        if c.findings.get(key):
            rules = (f"{r} ({fmt(costs.get(r), Unit.NS)}/step)" for r in c.findings[key])
            lines.append(f"findings {say}: {', '.join(rules)}")
    for note in c.notes:
        lines.extend(_wrap(note, ""))
    return "\n".join(lines)
