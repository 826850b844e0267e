"""Pure presentation helpers: analysis data in, plain structures or Plotly figure JSON out.

No I/O and no Flask. Figures are returned as Plotly JSON dicts (``{"data": [...], "layout": {...}}``)
with numeric values only, so the page hands them straight to ``Plotly.newPlot``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from webapp.analysis import catalog
from webapp.analysis.catalog import Unit
from webapp.analysis.compare import change_text, compared_label
from webapp.formatting import fmt_bytes, fmt_ns, fmt_num, fmt_pct, total_labels

RANK_COLORS = ("#4c78a8", "#f58518", "#54a24b", "#b279a2", "#e45756", "#72b7b2", "#9d755d", "#eeca3b")

_FORMATS: dict[Unit, Callable[[Any], str]] = {
    Unit.NS: fmt_ns,
    Unit.FRAC: fmt_pct,
    Unit.BYTES: fmt_bytes,
    Unit.GBPS: lambda v: f"{float(v):.3g} GB/s",
    Unit.COUNT: fmt_num,
}


RANKS_APART = 1.25
"""A card of several ranks names its lowest and highest rank where their figures differ by more than this."""


def metric_cards(metrics: Mapping[str, Any], per_rank: Sequence[Mapping[str, Any]] = ()) -> list[dict[str, str]]:
    """The run page's number cards (the catalogue's ``card`` entries for a run with or without GPU work):
    [{key, label, value, ranks, hint}] for those the run has a figure of (present in ``metrics``, not NaN). A
    run's figure is over every rank's steps; where ``per_rank`` (RunAnalysis.per_rank records) holds the ranks'
    own figures of the same key and they stand apart, ``ranks`` names the lowest and the highest ('' otherwise);
    ``hint`` is the catalogue's (a tooltip, '' for most)."""
    return [
        {
            "key": m.key,
            "label": m.label,
            "value": format_value(m.key, metrics[m.key]),
            "ranks": _ranks_apart(m.key, per_rank),
            "hint": m.hint,
        }
        for m in catalog.cards(catalog.gpu_work(metrics))
        if metrics.get(m.key) is not None and not _missing(metrics[m.key])
    ]


def _ranks_apart(key: str, per_rank: Sequence[Mapping[str, Any]]) -> str:
    # stored records hold None where the analysis had NaN (a rank without that figure)
    values = [
        (float(r[key]), int(r["rank"])) for r in per_rank if r.get(key) is not None and not _missing(float(r[key]))
    ]
    if len(values) < 2:
        return ""
    (lo, lo_rank), (hi, hi_rank) = min(values), max(values)
    low, high = format_value(key, lo), format_value(key, hi)
    if hi <= RANKS_APART * lo or hi <= 0 or low == high:  # apart only in digits the card does not show
        return ""
    return f"rank {lo_rank} {low}, rank {hi_rank} {high}"


def _missing(value: Any) -> bool:
    return isinstance(value, float) and math.isnan(value)


def all_metric_rows(metrics: Mapping[str, Any]) -> list[dict[str, str]]:
    """Every metric the run shows (no GPU metric for a run without GPU work), in catalogue order:
    [{key, label, value}]."""
    gpu = catalog.gpu_work(metrics)
    return [
        {"key": k, "label": catalog.label(k), "value": format_value(k, metrics[k])}
        for k in catalog.ordered(metrics)
        if catalog.shown(k, gpu)
    ]


def format_value(key: str, value: Any) -> str:
    """Format a metric value by its catalogue unit ("—" when missing)."""
    if value is None:
        return "—"
    return _FORMATS[catalog.unit_of(key)](value)


FEW_STEPS = 3
"""With this many steps or fewer, each step is drawn as a stacked bar of where its time went."""

BREAKDOWN: tuple[tuple[str, str, str], ...] = (
    ("cp_compute_ns", "GPU compute", "#4c78a8"),
    ("cp_copy_ns", "copies", "#e45756"),
    ("cp_comm_ns", "communication", "#b279a2"),
    ("cp_host_ns", "host work", "#f58518"),
    ("cp_launch_ns", "launch latency", "#eeca3b"),
    ("cp_sync_ns", "sync waits", "#9d755d"),
    ("cp_other_ns", "other", "#bab0ac"),
)
"""Per-step critical-path columns (ns) that add up to the step time, drawn as the stacked breakdown of
few-step runs."""


def step_breakdown_figure(per_step: Sequence[Mapping[str, Any]], title: str = "Step time") -> dict[str, Any]:
    """One stacked bar (ms) per (rank, step): its critical path by part; labels on x."""
    labels = [f"rank {int(r.get('rank', 0))} step {int(r['step'])}" for r in per_step]
    if len({int(r.get("rank", 0)) for r in per_step}) == 1:
        labels = [f"step {int(r['step'])}" for r in per_step]
    data = [
        {
            "type": "bar",
            "name": label,
            "x": labels,
            "y": [float(r.get(key) or 0) / 1e6 for r in per_step],
            "marker": {"color": color},
            "hovertemplate": "%{x}: " + label + " %{y:.3f} ms<extra></extra>",
        }
        for key, label, color in BREAKDOWN
        if any(float(r.get(key) or 0) > 0 for r in per_step)
    ]
    layout = _layout(title, "", "ms", True)
    layout["barmode"] = "stack"
    layout["xaxis"] = {"type": "category"}
    return {"data": data, "layout": layout}


def step_time_figure(
    per_step: Sequence[Mapping[str, Any]], title: str = "Step time", gpu: bool = True
) -> dict[str, Any] | None:
    """Bars of step time (ms) per step, one trace per rank (at most 8); with FEW_STEPS or fewer per rank
    and GPU work (``gpu``), the stacked breakdown of each step instead (:func:`step_breakdown_figure`);
    None without steps."""
    if not per_step or "step_time_ns" not in per_step[0]:
        return None
    per_rank = max(
        sum(1 for r in per_step if int(r.get("rank", 0)) == rank) for rank in {int(r.get("rank", 0)) for r in per_step}
    )
    few = per_rank <= FEW_STEPS and len(per_step) <= 8 * FEW_STEPS
    if gpu and few and all(key in per_step[0] for key, _, _ in BREAKDOWN):
        return step_breakdown_figure(per_step, title)
    by_rank: dict[int, tuple[list[int], list[float]]] = {}
    for row in per_step:
        steps, values = by_rank.setdefault(int(row.get("rank", 0)), ([], []))
        steps.append(int(row["step"]))
        values.append(float(row["step_time_ns"] or 0) / 1e6)
    data = [
        {
            "type": "bar",
            "name": f"rank {rank}",
            "x": steps,
            "y": values,
            "marker": {"color": RANK_COLORS[i % len(RANK_COLORS)]},
            "hovertemplate": "step %{x}: %{y:.3f} ms<extra>rank " + str(rank) + "</extra>",
        }
        for i, (rank, (steps, values)) in enumerate(sorted(by_rank.items())[:8])
    ]
    return {"data": data, "layout": _step_axis(_layout(title, "step", "ms", len(data) > 1), data)}


def _step_axis(layout: dict[str, Any], data: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Whole step numbers on the x axis (about ten ticks at most), never -0.5 or 2.5."""
    steps = [int(x) for trace in data for x in trace["x"]]
    if steps:
        span = max(steps) - min(steps) + 1
        layout["xaxis"].update({"tick0": min(steps), "dtick": max(1, math.ceil(span / 10))})
    return layout


def compare_steps_figure(
    a: Sequence[Mapping[str, Any]], b: Sequence[Mapping[str, Any]], name_a: str, name_b: str
) -> dict[str, Any] | None:
    """Step time (ms) per step of rank 0 for two runs, side by side; None when neither has steps."""
    data = []
    for rows, name, color in ((a, name_a, "#4c78a8"), (b, name_b, "#f58518")):
        rows0 = [r for r in rows if int(r.get("rank", 0)) == 0 and "step_time_ns" in r]
        if rows0:
            data.append(
                {
                    "type": "bar",
                    "name": name,
                    "x": [int(r["step"]) for r in rows0],
                    "y": [float(r["step_time_ns"] or 0) / 1e6 for r in rows0],
                    "marker": {"color": color},
                    "hovertemplate": "step %{x}: %{y:.3f} ms",
                }
            )
    if not data:
        return None
    return {"data": data, "layout": _step_axis(_layout("Step time, rank 0", "step", "ms", True), data)}


def compare_rows(metrics: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Comparison.metrics records as table rows: label (a run total compared per step says so), formatted a,
    b, delta, change (the metrics table's ``change`` as shown) and a better/worse/same class from the
    table's ``status`` (so the label and the number shown come from one figure), and the ``basis``."""
    rows = []
    for m in metrics:
        key = str(m.get("metric", ""))
        frac = catalog.unit_of(key) is Unit.FRAC
        change = change_text(m.get("change"), frac)
        status = m.get("status")
        basis = str(m.get("basis") or "")
        rows.append(
            {
                "metric": key,
                "label": compared_label(key, basis),
                "a": format_value(key, m.get("a")),
                "b": format_value(key, m.get("b")),
                "delta": change if frac else format_value(key, m.get("delta")),
                "change": change,
                "cls": status if status in ("better", "worse", "same") else "",
                "basis": basis,
            }
        )
    return rows


def compare_metric_rows(
    metrics: Sequence[Mapping[str, Any]], metrics_a: Mapping[str, Any], metrics_b: Mapping[str, Any]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The compare pages' metric rows (:func:`compare_rows`) in catalogue order, split into the headline
    ones (catalog.compared_headline of the two runs' metrics) and the others, where a run total (``basis``
    "total") is named as one (webapp.formatting.total_labels); GPU metrics only when a run has GPU work."""
    gpu = catalog.gpu_work(metrics_a) or catalog.gpu_work(metrics_b)
    shown = [r for r in compare_rows(metrics) if catalog.shown(r["metric"], gpu)]
    rows = {r["metric"]: r for r in shown if not r["a"] == r["b"] == "—"}  # a figure neither run has
    headline = {m.key for m in catalog.compared_headline(metrics_a, metrics_b)}
    keys = catalog.ordered(rows)
    others = [rows[k] for k in keys if k not in headline]
    totals = [r["metric"] for r in others if r["basis"] == "total"]
    return [rows[k] for k in keys if k in headline], total_labels(others, totals)


def _layout(title: str, xlabel: str, ylabel: str, legend: bool) -> dict[str, Any]:
    return {
        "title": {"text": title, "font": {"size": 13}},
        "height": 240,
        "margin": {"l": 50, "r": 10, "t": 34, "b": 36},
        "barmode": "group",
        "showlegend": legend,
        "xaxis": {"title": {"text": xlabel}},
        "yaxis": {"title": {"text": ylabel}, "rangemode": "tozero"},
        "paper_bgcolor": "#fff",
        "plot_bgcolor": "#fff",
        "font": {"family": "system-ui, sans-serif", "size": 11},
        "legend": {"orientation": "h", "y": 1.15, "x": 1, "xanchor": "right"},
    }


RANK_HEATMAPS = {"step_time_ns": "Step time", "wait_ns": "Wait in collectives"}
"""The grid matrices drawn as rank x step heatmaps, with their titles."""


def rank_heatmap_figures(grid: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """One heatmap per RANK_HEATMAPS key of a rank x step grid (webapp.analysis.rankview.step_grid): x = step,
    y = rank, colour = ms; empty cells are gaps. Empty dict without a grid."""
    if not grid or not grid.get("ranks"):
        return {}
    out = {}
    for key, title in RANK_HEATMAPS.items():
        z = [[None if v is None else v / 1e6 for v in row] for row in grid[key]]
        trace = {
            "type": "heatmap",
            "x": list(grid["steps"]),
            "y": list(grid["ranks"]),
            "z": z,
            "colorscale": "YlOrRd",
            "reversescale": True,
            "colorbar": {"title": {"text": "ms"}, "thickness": 10},
            "hovertemplate": "rank %{y} · step %{x}: %{z:.3f} ms<extra></extra>",
            "xgap": 1,
            "ygap": 1,
        }
        layout = _layout(f"{title} per rank and step (click a cell to see it)", "step", "rank", False)
        layout["yaxis"] = {"title": {"text": "rank"}, "autorange": "reversed"}
        if len(grid["ranks"]) <= 16:
            layout["yaxis"]["dtick"] = 1
        out[key] = {"data": [trace], "layout": layout}
    return out
