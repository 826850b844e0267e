"""analyze(trace) -> RunAnalysis: metrics, findings and what-if for one run."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from collector.model import IntervalKind, Trace
from webapp.analysis import gaps as gp
from webapp.analysis.context import RunData, kind_mask, prepare
from webapp.analysis.findings import RULES, find_all
from webapp.analysis.metrics import kernel_table, per_rank_frame, per_step_frame, run_metrics
from webapp.analysis.phases import phase_frame, phase_notes
from webapp.analysis.ranks import analyze_ranks
from webapp.analysis.records import RunAnalysis
from webapp.analysis.whatif import fixed_per_step, what_if

EXTRA_STEP_COLUMNS: dict[str, str] = {
    **{f"cost_{r.replace('-', '_')}_ns": f"what the {r} finding costs in this step, ns" for r in RULES},
    "step_time_fixed_ns": "estimated step time with the copy and sync findings fixed (webapp.analysis.whatif), ns",
}
"""Columns analyze() adds to the per-step table after the findings."""

_BASIS_NOTES = {
    "gpu": "Step windows follow the GPU: each starts where the work launched in that step starts on the "
    "streams that run kernels (the host may run steps ahead).",
    "host": "Step windows are the step markers (no GPU work is tagged with its step).",
    "annotation": "No step markers: steps come from 'step N' annotations (record_function), and each window "
    "follows the GPU work launched in that step.",
    "span": "No steps found: each rank's whole run (first to last GPU interval) is one step.",
}

_METHOD_NOTES = {
    "optimizer": "No step markers: a step ends where each optimizer step (Optimizer.step) ends.",
    "repeat:source": "No step markers: steps are the iterations of the loop, found as the repeating sequence "
    "of source lines.",
    "repeat:cpu_op": "No step markers: steps are the iterations of the loop, found as the repeating sequence "
    "of host ops.",
    "repeat:gpu": "No step markers: steps are the iterations of the loop, found as the repeating sequence of GPU work.",
}


CPU_ONLY_NOTE = "No GPU work in this run (CPU ranks): only the multi-rank analysis applies, not the GPU findings."


def step_notes(method: str, basis: str) -> tuple[str, ...]:
    """How steps were found (RunMeta.step_method) and how their windows were placed."""
    found = _METHOD_NOTES.get(method, "")
    if method.startswith("step_at:"):
        found = f"Steps start where --step-at {method[len('step_at:') :]} matches."
    return (found, _BASIS_NOTES[basis]) if found else (_BASIS_NOTES[basis],)


def timing_note(trace: Trace) -> tuple[str, ...]:
    """How a recorded run's GPU intervals were timed (``notes.timing``), as a page note; () if not said."""
    notes = trace.meta.notes or {}
    timing = str(notes.get("timing") or "")
    if not timing:
        return ()
    detail = str(notes.get("timing_note") or "")
    reader = READERS.get(str(notes.get("cupti_reader") or ""), "")
    return (f"GPU timing: {timing}" + (f", {reader}" if reader else "") + (f" ({detail})" if detail else "") + ".",)


READERS = {"client": "read from libcupti by the recorder", "kineto": "read through torch.profiler (Kineto)"}
"""How the CUPTI records of a recording were read (``notes.cupti_reader``), as the page says it."""


def sync_table(rd: RunData, gaps: gp.Gaps) -> pd.DataFrame:
    """Sync waits per (cause, source) over the whole run, most costly first. Columns: ``cause``,
    ``source`` (user file:line, '' if unknown), ``count``, ``steps`` (step windows holding one), ``total_ns``,
    ``mean_ns``, ``max_ns`` (wait durations, ns), ``gpu_idle_ns`` (GPU idle gaps blamed on these syncs, ns)."""
    df = rd.trace.intervals
    rows = np.flatnonzero(rd.sync_mask)
    cols = ["cause", "source", "count", "steps", "total_ns", "mean_ns", "max_ns", "gpu_idle_ns"]
    if not len(rows):
        return pd.DataFrame({c: pd.Series(dtype="object" if c in ("cause", "source") else "int64") for c in cols})
    hit = gaps.sync_row >= 0
    blamed = pd.Series(gaps.length[hit]).groupby(gaps.sync_row[hit]).sum()
    frame = pd.DataFrame(
        {
            "cause": df["cause"].iloc[rows].astype(str).to_numpy(dtype=object),
            "source": df["source"].iloc[rows].astype(str).to_numpy(dtype=object),
            "dur": rd.e[rows] - rd.s[rows],
            "win": rd.win_row[rows],
            "idle": blamed.reindex(rows, fill_value=0).to_numpy(),
        }
    )
    g = frame.groupby(["cause", "source"], sort=False)
    out = g.agg(
        count=("dur", "size"),
        steps=("win", lambda w: int(np.unique(w[w >= 0]).size)),
        total_ns=("dur", "sum"),
        max_ns=("dur", "max"),
        gpu_idle_ns=("idle", "sum"),
    ).reset_index()
    out["mean_ns"] = out["total_ns"] / out["count"]
    out = out.sort_values(["gpu_idle_ns", "total_ns"], ascending=False, kind="stable").reset_index(drop=True)
    return out[cols]


def analyze(trace: Trace) -> RunAnalysis:
    """Analyze one run. Raises ValueError (one line) for a run that cannot be analysed."""
    rd = prepare(trace)
    blocked = gp.blocked_copies(rd)
    gaps = gp.find_gaps(rd, blocked)
    per_step = per_step_frame(rd, gaps)
    metrics = run_metrics(rd, per_step)
    findings, minor, costs = find_all(rd, per_step, metrics, gaps, blocked)
    phases = phase_frame(rd)
    for kind in ("setup", "tail"):
        metrics[f"{kind}_ns"] = float(phases.loc[phases["phase"] == kind, "dur_ns"].sum())
    order = np.lexsort((rd.win_step, rd.win_rank))  # per_step rows are sorted by (rank, step)
    pinned = metrics.get("h2d_pinned_probe_gbps", math.nan)
    if pinned != pinned:
        pinned = metrics.get("h2d_pinned_achieved_gbps", math.nan)
    ordered = {rule: costs[rule][order] for rule in RULES}
    for rule in RULES:
        per_step[f"cost_{rule.replace('-', '_')}_ns"] = ordered[rule]
    listed = {rule: ordered[rule] for rule in dict.fromkeys(f.rule for f in findings)}  # what-if: listed only
    per_step["step_time_fixed_ns"] = fixed_per_step(per_step, listed, pinned).round().astype(np.int64)
    ranks: dict[str, object] = {}
    rank_notes: tuple[str, ...] = ()
    if not (rd.gpu_mask & ~kind_mask(rd.kind, IntervalKind.COLLECTIVE)).any() and len(rd.kind):
        findings, minor = (), ()  # CPU ranks: the GPU rules do not apply
        rank_notes = (CPU_ONLY_NOTE,)
    if len(trace.ranks) > 1:
        straggler, ranks, more_notes = analyze_ranks(rd)
        rank_notes = (*rank_notes, *more_notes)
        if straggler is not None:
            findings = tuple(sorted([*findings, straggler], key=lambda f: (-f.cost_per_step_ns, -f.cost_total_ns)))
    return RunAnalysis(
        metrics=metrics,
        per_rank=per_rank_frame(per_step),
        per_step=per_step,
        kernels=kernel_table(rd),
        sync_sources=sync_table(rd, gaps),
        findings=findings,
        what_if=what_if(per_step, listed, pinned),
        notes=(
            *step_notes(trace.meta.step_method, rd.step_basis),
            *phase_notes(phases),
            *timing_note(trace),
            *rank_notes,
        ),
        phases=phases,
        minor_findings=minor,
        ranks=ranks,
    )
