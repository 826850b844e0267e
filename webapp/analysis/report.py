"""Plain-text reports of an analysis or a comparison (what ``streamscope analyze/compare`` print)."""

from __future__ import annotations

import math
import textwrap

from webapp.analysis.compare import Comparison
from webapp.analysis.records import RunAnalysis

# (label, metric key, how to show it): "ms" ns -> ms, "pct" fraction -> %, "gbps", "count", "mib" bytes
KEY_METRICS: tuple[tuple[str, str, str], ...] = (
    ("step time, median", "step_time_median_ns", "ms"),
    ("step time, p90", "step_time_p90_ns", "ms"),
    ("GPU busy", "gpu_busy_frac", "pct"),
    ("compute busy / step", "compute_busy_step_median_ns", "ms"),
    ("transfer busy / step", "transfer_busy_step_median_ns", "ms"),
    ("copy/compute overlap", "copy_compute_overlap_frac", "pct"),
    ("exposed copy / step", "exposed_copy_step_median_ns", "ms"),
    ("GPU idle / step", "gpu_idle_step_median_ns", "ms"),
    ("  sync stall", "idle_sync_stall_step_median_ns", "ms"),
    ("  launch-bound", "idle_launch_bound_step_median_ns", "ms"),
    ("  other", "idle_other_step_median_ns", "ms"),
    ("sync waits (total)", "sync_wait_count", "count"),
    ("sync wait / step", "sync_wait_step_median_ns", "ms"),
    ("pageable copies (total)", "pageable_copy_bytes", "mib"),
    ("pageable copy time (total)", "pageable_copy_ns", "ms"),
    ("H2D pinned achieved", "h2d_pinned_achieved_gbps", "gbps"),
    ("H2D pinned probe", "h2d_pinned_probe_gbps", "gbps"),
    ("H2D pageable achieved", "h2d_pageable_achieved_gbps", "gbps"),
    ("set-up (before the steps)", "setup_ns", "ms"),
    ("tail (after the steps)", "tail_ns", "ms"),
)


def fmt(value: float | None, how: str) -> str:
    """One metric value for a table (``-`` when missing)."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "-"
    if how == "ms":
        return f"{value / 1e6:.3f} ms"
    if how == "pct":
        return f"{value * 100:.1f} %"
    if how == "gbps":
        return f"{value:.1f} GB/s"
    if how == "mib":
        return f"{value / 2**20:.1f} MiB"
    return f"{value:,.0f}"


def _wrap(text: str, indent: str) -> list[str]:
    return textwrap.wrap(text, width=100, initial_indent=indent, subsequent_indent=indent) or [indent]


def analysis_text(result: RunAnalysis, title: str = "") -> str:
    """Metrics, findings (cost, sources, fix) and the what-if, as a readable report."""
    m = result.metrics
    lines = [title] if title else []
    lines.append(
        f"{int(m.get('ranks', 0))} rank(s), {int(m.get('steps', 0))} step(s), {int(m.get('intervals', 0)):,} intervals"
    )
    lines.append("")
    lines.append("Metrics")
    for label, key, how in KEY_METRICS:
        lines.append(f"  {label:<28} {fmt(m.get(key), how):>16}")
    if len(result.per_rank) > 1:
        lines.append("")
        lines.append(f"  {'rank':<6} {'steps':>6} {'step median':>14} {'step p90':>14} {'GPU busy':>9}")
        for rec in result.per_rank.to_dict(orient="records"):
            lines.append(
                f"  {int(rec['rank']):<6} {int(rec['steps']):>6} "
                f"{fmt(float(rec['step_time_median_ns']), 'ms'):>14} "
                f"{fmt(float(rec['step_time_p90_ns']), 'ms'):>14} {fmt(float(rec['gpu_busy_frac']), 'pct'):>9}"
            )
    for note in result.notes:
        lines.extend(_wrap(note, "  "))
    lines.append("")
    if result.findings:
        lines.append(f"Findings ({len(result.findings)})")
        for f in result.findings:
            lines.append(
                f"  [{f.severity.upper()}] {f.rule}: {f.title} - costs {fmt(f.cost_per_step_ns, 'ms')} per step"
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
    lines.append("What if the copy and sync findings were fixed")
    speedup = w.get("speedup", math.nan)
    lines.append(
        f"  step time now {fmt(now, 'ms')}, estimated {fmt(fixed, 'ms')}"
        + (f" ({speedup:.2f}x)" if math.isfinite(speedup) else "")
    )
    savings = [
        (k[len("saving_") : -3].replace("_", "-"), v)
        for k, v in w.items()
        if k.startswith("saving_") and k != "saving_applied_ns" and v > 0
    ]
    for rule, v in sorted(savings, key=lambda kv: -kv[1]):
        lines.append(f"  {rule:<20} {fmt(v, 'ms'):>12} per step")
    return "\n".join(lines)


def comparison_text(c: Comparison, ops_limit: int = 10) -> str:
    """Key metrics side by side, the biggest per-op changes and the findings fixed/new/unchanged."""
    ma, mb = c.analysis_a.metrics, c.analysis_b.metrics
    table = c.metrics.set_index("metric")
    lines = [f"{'metric':<28} {'A':>16} {'B':>16} {'change':>9}"]
    for label, key, how in KEY_METRICS:
        rel = table["rel_change"].get(key, math.nan)
        better = table["better"].get(key)
        mark = "" if better is None else (" better" if better else " worse")
        change = f"{rel * 100:+.1f}%" if rel == rel and math.isfinite(rel) else "-"
        lines.append(f"{label:<28} {fmt(ma.get(key), how):>16} {fmt(mb.get(key), how):>16} {change:>9}{mark}")
    lines.append("")
    ops = c.ops[c.ops["status"] != "same"].head(ops_limit)
    if len(ops):
        lines.append("Biggest op changes (time per step, B - A)")
        for row in ops.itertuples(index=False):
            name = row.name if len(row.name) <= 60 else row.name[:57] + "..."
            lines.append(f"  {row.status:<8} {row.kind:<11} {name:<60} {row.delta_step_ns / 1e6:+10.3f} ms/step")
        lines.append("")
    for key in ("fixed", "new", "unchanged"):
        lines.append(f"findings {key}: {', '.join(c.findings[key]) or '-'}")
    return "\n".join(lines)
