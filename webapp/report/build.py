"""Report pages as plain data: a run (or two) in, the template's context out. No I/O, no Flask.

:func:`prepare_run` analyses and indexes a loaded trace once; :func:`run_context` and
:func:`compare_context` turn prepared runs into what webapp/templates/report/*.html render, with every
table and list cut to a bounded size (what was cut is listed with the timeline's ``left_out``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pandas as pd

from collector.model import Trace
from webapp.analysis import catalog
from webapp.analysis.compare import Comparison, compare_analyses
from webapp.analysis.lod import RunIndex
from webapp.analysis.records import RunAnalysis, frame_records
from webapp.analysis.report import what_if_rows
from webapp.figures import all_metric_rows, compare_metric_rows, compare_steps_figure, metric_cards, step_time_figure
from webapp.formatting import total_labels
from webapp.lanes import lane_views
from webapp.report.assets import bundle, plotly_packed, stylesheet
from webapp.report.embed import (
    DEFAULT_BUDGET_BYTES,
    EmbeddedTimeline,
    Focus,
    embed_timeline,
    finding_window,
    focus_steps,
)

MAX_STEP_ROWS = 1000
"""Per-step table rows and step windows embedded (the first ones); the step chart keeps MAX_CHART_STEPS."""
MAX_CHART_STEPS = 5000
MAX_TABLE_ROWS = 500
"""Rows of the kernel, sync-source and op tables (they come costliest first)."""
MAX_EVIDENCE = 20
"""Evidence windows kept per finding, and interval ids per window."""


@dataclass(frozen=True)
class PreparedRun:
    """One run ready for a report: its name, trace, analysis (object and ``to_dict()``) and LOD index."""

    name: str
    trace: Trace
    analysis: RunAnalysis
    analysis_dict: dict[str, Any]
    index: RunIndex


def prepare_run(trace: Trace, name: str, analysis: RunAnalysis | None = None) -> PreparedRun:
    """Analyse (unless ``analysis`` is given) and index ``trace``."""
    from webapp.analysis import analyze

    result = analysis if analysis is not None else analyze(trace)
    return PreparedRun(name, trace, result, result.to_dict(), RunIndex(trace))


def run_summary(run: PreparedRun) -> dict[str, Any]:
    """The run header: name, source, device, workload, intervals, lanes, ranks, start_ns/end_ns (run clock)."""
    meta = run.trace.meta
    return {
        "name": run.name,
        "source": meta.source,
        "device": meta.device_name,
        "workload": meta.workload,
        "created": meta.created,
        "intervals": len(run.trace.intervals),
        "lanes": len(run.trace.lanes),
        "ranks": len(run.trace.ranks),
        "start_ns": run.index.origin_ns,
        "end_ns": run.index.end_ns,
    }


def _lanes(run: PreparedRun) -> list[dict[str, Any]]:
    return lane_views(run.index.lanes)


def _windows(rows: list[dict[str, Any]], key: str) -> list[dict[str, Any]]:
    return [
        {"rank": r.get("rank", 0), key: r[key], "start_ns": r["start_ns"], "end_ns": r["end_ns"]}
        for r in rows
        if key in r and "start_ns" in r
    ]


def _trim_findings(findings: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for f in findings:
        ev = [{**e, "interval_ids": e["interval_ids"][:MAX_EVIDENCE]} for e in f["evidence"][:MAX_EVIDENCE]]
        out.append({**f, "evidence": ev})
    return out


def _embed(run: PreparedRun, findings: list[dict[str, Any]], budget: int, focus: tuple[Focus, ...]) -> EmbeddedTimeline:
    ids = [i for f in findings for e in f["evidence"][:3] for i in e["interval_ids"]]
    first = [f["evidence"][0] for f in findings if f["evidence"]]
    windows = [finding_window(e["start_ns"], e["end_ns"]) for e in first]
    return embed_timeline(run.index, focus, ids, budget, windows, _step_windows(run.analysis.per_step))


def _step_windows(per_step: pd.DataFrame) -> list[tuple[int, int, int]]:
    """(step, start_ns, end_ns) of every step of the first rank (a view shows every rank's lanes)."""
    if per_step.empty or not {"step", "start_ns", "end_ns"} <= set(per_step.columns):
        return []
    steps = per_step[per_step["rank"] == per_step["rank"].min()] if "rank" in per_step.columns else per_step
    cols = [steps[c].to_numpy().tolist() for c in ("step", "start_ns", "end_ns")]
    return [(int(s), int(a), int(b)) for s, a, b in zip(*cols, strict=True)]


def _cut(name: str, rows: list[Any], limit: int, notes: list[str]) -> list[Any]:
    if len(rows) > limit:
        notes.append(f"{name}: the first {limit:,} of {len(rows):,} rows")
    return rows[:limit]


def _step_columns(rows: list[dict[str, Any]], gpu: bool) -> list[dict[str, Any]]:
    """Per-step rows with only the columns the table shows (rank, step and the catalogue's step columns)."""
    keep = ("rank", "step", *(m.key for m in catalog.step_columns(gpu)))
    return [{k: r[k] for k in keep if k in r} for r in rows]


def _tables(d: dict[str, Any], gpu: bool, cut: list[str]) -> dict[str, Any]:
    """The tables under the run's timeline, as the run page's tabs read them (webapp/static/run_parts.js
    bindTabs): per step, kernels, sync sources, host time (with what it is read from, or why it is empty) and
    the run's collectives (RunAnalysis.ranks, one rank or many); what is cut is added to ``cut``."""
    collectives = (d.get("ranks") or {}).get("collectives") or []
    return {
        "per_step": _cut("per-step table", _step_columns(d["per_step"], gpu), MAX_STEP_ROWS, cut),
        "kernels": _cut("kernels table", d["kernels"], MAX_TABLE_ROWS, cut),
        "sync_sources": _cut("sync sources table", d["sync_sources"], MAX_TABLE_ROWS, cut),
        "host_frames": _cut("host time table", d["host_frames"], MAX_TABLE_ROWS, cut),
        "host_frames_basis": d["host_frames_basis"],
        "host_frames_missing": d["host_frames_missing"],
        "ranks": {"collectives": _cut("collectives table", collectives, MAX_TABLE_ROWS, cut)},
    }


def run_context(run: PreparedRun, budget_bytes: int | None = None) -> dict[str, Any]:
    """The run report's template context (``page`` is what its script reads as window.STREAMSCOPE).
    ``budget_bytes``: the timeline data's budget; None: the default, less what the file would pass
    FILE_BOUND_BYTES by (:func:`fitted_budget`)."""
    d = run.analysis_dict
    gpu = catalog.gpu_work(d["metrics"])
    findings = _trim_findings(d["findings"])
    cut: list[str] = []
    per_step = d["per_step"]
    chart_rows = per_step[:: max(1, math.ceil(len(per_step) / MAX_CHART_STEPS))]
    if len(chart_rows) < len(per_step):
        cut.append(f"step chart: every {math.ceil(len(per_step) / MAX_CHART_STEPS)}th of {len(per_step):,} steps")
    page: dict[str, Any] = {
        "mode": "run",
        "run": run_summary(run),
        "lanes": _lanes(run),
        "gpu_work": gpu,
        "analysis": {
            "findings": findings,
            "steps": _cut("step windows", _windows(per_step, "step"), MAX_STEP_ROWS, []),
            "phases": _windows(d["phases"], "phase"),
        },
        "tables": _tables(d, gpu, cut),
        "metrics_catalog": catalog.to_json(gpu),
        "step_figure": step_time_figure(chart_rows, gpu=gpu),
    }
    budget = budget_bytes if budget_bytes is not None else fitted_budget(page)
    timeline = _embed(run, findings, budget, focus_steps(run.analysis.per_step))
    page["timeline"] = timeline.to_dict()
    metrics = d["metrics"]
    return {
        "run": page["run"],
        "page": page,
        "notes": d["notes"],
        "cards": metric_cards(metrics, d.get("per_rank") or []),
        "metrics": total_labels(all_metric_rows(metrics), run.analysis.per_step.columns),
        "findings": findings,
        "minor_findings": d["minor_findings"],
        "what_if": d["what_if"],
        "what_if_rows": what_if_rows(d["what_if"], findings),
        "focus": timeline.focus,
        "collectives": bool(page["tables"]["ranks"]["collectives"]),
        "detail": [timeline.detail],
        "left_out": [*timeline.left_out, *cut],
        "data_size": timeline.size_bytes,
        "data_budget": timeline.budget_bytes,
    }


FILE_BOUND_BYTES = 5 * 2**20
"""A report file stays within 5 MiB with the default budget: Plotly (~1.9 MiB packed), the scripts, the
page's tables and the timeline data."""
PAGE_HTML_BYTES = 150_000
"""What the report's HTML adds around its page data (cards, metric tables, findings, notes): at most this."""


def fitted_budget(*pages: Mapping[str, Any]) -> int:
    """The default timeline budget (DEFAULT_BUDGET_BYTES, shared by the ``pages``' runs) less what the file
    would pass FILE_BOUND_BYTES by: the assets, the page data (``pages``, without their timelines) and
    PAGE_HTML_BYTES come first. Never below a tenth of the default (the overview and the steps, coarse)."""
    rest = len(plotly_packed()) + len(bundle("report.js")) + len(stylesheet()) + PAGE_HTML_BYTES
    rest += sum(len(json.dumps(p, default=str, separators=(",", ":"))) for p in pages)
    return max(DEFAULT_BUDGET_BYTES // 10, min(DEFAULT_BUDGET_BYTES, FILE_BOUND_BYTES - rest))


def _rank0_steps(per_step: pd.DataFrame) -> list[dict[str, int]]:
    if not {"step", "start_ns", "end_ns"} <= set(per_step.columns):
        return []
    steps = per_step[per_step["rank"] == 0] if "rank" in per_step.columns else per_step
    return [{k: int(r[k]) for k in ("step", "start_ns", "end_ns")} for r in frame_records(steps[:MAX_STEP_ROWS])]


def _side(run: PreparedRun, timeline: EmbeddedTimeline) -> dict[str, Any]:
    """One run of the compare report's page data: header, lanes, rank 0's steps, embedded timeline."""
    steps = _rank0_steps(run.analysis.per_step)
    gpu = catalog.gpu_work(run.analysis.metrics)
    return {
        "run": run_summary(run),
        "lanes": _lanes(run),
        "steps": steps,
        "gpu_work": gpu,
        "timeline": timeline.to_dict(),
    }


def focus_pairs(fa: tuple[Focus, ...], fb: tuple[Focus, ...]) -> list[dict[str, Any]]:
    """Windows to align the two timelines on: the typical steps, then the worst steps (each run's own);
    a whole-run pair when a run has no steps."""
    by_a, by_b = {f.label: f for f in fa}, {f.label: f for f in fb}
    out, seen = [], set()
    for label in ("typical step", "worst step"):
        a, b = by_a.get(label) or by_a.get("typical step"), by_b.get(label) or by_b.get("typical step")
        if a and b and (a.step, b.step) not in seen:
            seen.add((a.step, b.step))
            out.append({"label": f"{label}: A step {a.step}, B step {b.step}", "a": a.to_dict(), "b": b.to_dict()})
    return out or [{"label": "whole runs, starts aligned", "a": None, "b": None}]


def compare_context(
    a: PreparedRun,
    b: PreparedRun,
    verdict: dict[str, str],
    budget_bytes: int | None = None,
    result: Comparison | None = None,
) -> tuple[Comparison, dict[str, Any]]:
    """The comparison (``result`` when already computed) and the compare report's template context; each
    run gets half the data budget (None: the default, fitted as in :func:`fitted_budget`)."""
    if result is None:
        result = compare_analyses(a.analysis, b.analysis, a.trace, b.trace)
    out = result.to_dict()
    fa, fb = focus_steps(a.analysis.per_step), focus_steps(b.analysis.per_step)
    budget = budget_bytes if budget_bytes is not None else fitted_budget(out)
    ta = _embed(a, [], budget // 2, fa)
    tb = _embed(b, [], budget // 2, fb)
    gpu = catalog.gpu_work(a.analysis.metrics) or catalog.gpu_work(b.analysis.metrics)
    headline, others = compare_metric_rows(out["metrics"], a.analysis.metrics, b.analysis.metrics)
    cut: list[str] = []
    side_a, side_b = _side(a, ta), _side(b, tb)
    page: dict[str, Any] = {
        "mode": "compare",
        "a": side_a,
        "b": side_b,
        "pairs": focus_pairs(fa, fb),
        "ops": _cut("ops table", out["ops"], MAX_TABLE_ROWS, cut),
        "metrics_catalog": catalog.to_json(gpu),
        "step_figure": compare_steps_figure(
            frame_records(a.analysis.per_step[:MAX_CHART_STEPS]),
            frame_records(b.analysis.per_step[:MAX_CHART_STEPS]),
            f"A: {a.name}",
            f"B: {b.name}",
        ),
    }
    left = [f"A: {n}" for n in ta.left_out] + [f"B: {n}" for n in tb.left_out] + cut
    return result, {
        "a": side_a["run"],
        "b": side_b["run"],
        "page": page,
        "verdict": verdict,
        "headline": headline,
        "all_rows": others,
        "fdiff": out["findings"],
        "fcosts": out["finding_costs"],
        "notes": out["notes"],
        "findings_b": b.analysis_dict["findings"],
        "detail": [f"A: {ta.detail}", f"B: {tb.detail}"],
        "left_out": left,
        "data_size": ta.size_bytes + tb.size_bytes,
        "data_budget": budget,
    }
