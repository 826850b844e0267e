"""analyze(trace) -> RunAnalysis: metrics, findings and what-if for one run."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from collector.model import IntervalKind, Trace
from webapp.analysis.causal import causal_model
from webapp.analysis.collectives import one_rank_section
from webapp.analysis.context import RunData, kind_mask, prepare
from webapp.analysis.findings import find_all, listed, ranked, share_of_steps
from webapp.analysis.hoststacks import frame_table, frame_tables_by_rank, frames_basis, missing_text
from webapp.analysis.metrics import kernel_table, per_rank_frame, per_step_frame, run_metrics
from webapp.analysis.pace import pace_note
from webapp.analysis.phases import phase_frame, phase_notes
from webapp.analysis.ranks import analyze_ranks
from webapp.analysis.records import Finding, RunAnalysis, frame_records, rule_key
from webapp.analysis.rules import RULES, RuleContext
from webapp.analysis.rules.base import Detection, pinned_gbps
from webapp.analysis.rules.sync_in_loop import source_saving, sync_groups
from webapp.analysis.whatif import fixed_per_step, straggler_fixed, what_if

EXTRA_STEP_COLUMNS: dict[str, str] = {
    "step_time_unrecorded_ns": "step time without the recorder's own host cost, as replayed, ns",
    "replay_error_frac": "|replayed - measured| / measured step time of the unchanged dependency graph",
    **{rule_key("cost", r.name): f"step time the {r.name} fix saves in this step, replayed, ns" for r in RULES},
    rule_key("cost", "straggler"): "step time the straggler's fix saves in this step, replayed (runs of several "
    "ranks whose collectives the dependency graph holds), ns",
    "step_time_fixed_ns": "step time with every listed finding's fix replayed together (webapp.analysis.whatif), ns",
}
"""Columns analyze() adds to the per-step table after the findings."""

_BASIS_NOTES = {
    "gpu": "Step windows follow the GPU: each starts where the work launched in that step starts on the "
    "streams that run kernels (the host may run steps ahead).",
    "host": "Step windows are the step markers (no GPU work is tagged with its step).",
    "annotation": "No step markers: steps come from 'step N' annotations (record_function), and each window "
    "follows the GPU work launched in that step.",
    "span": "No steps found: each rank's whole run (first to last GPU interval) is one step.",
    "collectives": "Step windows follow each step's collectives: each starts where the step's first collective "
    "starts (the host may run ahead).",
}

_METHOD_NOTES = {
    "optimizer": "No step markers: a step ends where each optimizer step (Optimizer.step) ends.",
    "repeat:source": "No step markers: steps are the iterations of the loop, found as the repeating sequence "
    "of source lines.",
    "repeat:cpu_op": "No step markers: steps are the iterations of the loop, found as the repeating sequence "
    "of host ops.",
    "repeat:gpu": "No step markers: steps are the iterations of the loop, found as the repeating sequence of GPU work.",
    "repeat:graph": "The step markers covered only the set-up (warm-up, capture): steps are the loop's CUDA graph "
    "replays, found as their repeating sequence.",
}


CPU_ONLY_NOTE = "No GPU work in this run (CPU ranks): only the multi-rank analysis applies, not the GPU findings."
UNSEEN_GPU_NOTE = (
    "The trace has {n:,} CUDA launches but no GPU work: the GPU's activity was not recorded (torch.profiler "
    "without ProfilerActivity.CUDA?), so no GPU figure or finding can be given."
)


def cpu_only_note(rd: RunData) -> str:
    """Why a run without GPU work has none: CPU ranks, or launches whose GPU side the trace lacks."""
    launches = int(kind_mask(rd.kind, IntervalKind.LAUNCH).sum())
    if launches:
        return UNSEEN_GPU_NOTE.format(n=launches)
    return CPU_ONLY_NOTE if len(rd.trace.ranks) > 1 else "No GPU work in this run: host figures only, no GPU finding."


def step_notes(method: str, basis: str) -> tuple[str, ...]:
    """How steps were found (RunMeta.step_method) and how their windows were placed."""
    found = _METHOD_NOTES.get(method, "")
    if method.startswith("step_at:"):
        found = f"Steps start where --step-at {method[len('step_at:') :]} matches."
    if found and basis == "host":  # the steps were found, not marked: the windows are those steps
        return (found, "Each step window is one of the steps found (no GPU work is tagged with its step).")
    return (found, _BASIS_NOTES[basis]) if found else (_BASIS_NOTES[basis],)


def timing_note(trace: Trace) -> tuple[str, ...]:
    """How a recorded run's GPU intervals were timed (``notes.timing``), as a page note; () if not said."""
    notes = trace.meta.notes or {}
    timing = str(notes.get("timing") or "")
    if not timing:
        return ()
    detail = str(notes.get("timing_note") or "")
    reader = READERS.get(str(notes.get("cupti_reader") or ""), "")
    limits = str(notes.get("limits") or "")
    text = f"GPU timing: {timing}" + (f", {reader}" if reader else "") + (f" ({detail})" if detail else "") + "."
    return (text + (f" Limits: {limits}." if limits else ""),)


PROFILER_OWN = ("overhead", "cuda_profiler_range")
"""Categories of the profiler's own ranges: annotations, nothing to analyse, not worth a note."""


def unknown_note(trace: Trace) -> tuple[str, ...]:
    """Events of categories the importer does not know (``notes.unknown_categories_as_annotations``), as a page
    note: drawn as annotations, left out of every figure; () if none."""
    unknown = dict((trace.meta.notes or {}).get("unknown_categories_as_annotations") or {})
    unknown = {k: v for k, v in unknown.items() if k not in PROFILER_OWN}
    if not unknown:
        return ()
    top = sorted(unknown.items(), key=lambda kv: -int(kv[1]))
    named = ", ".join(f"{k} ({int(v):,})" for k, v in top[:4]) + (f" and {len(top) - 4} more" if len(top) > 4 else "")
    count = sum(int(v) for v in unknown.values())
    events = "1 event" if count == 1 else f"{count:,} events"
    return (
        f"{events} of categories this version does not read ({named}): drawn as annotations, left out of every "
        "figure and finding.",
    )


READERS = {"client": "read from libcupti by the recorder", "kineto": "read through torch.profiler (Kineto)"}
"""How the CUPTI records of a recording were read (``notes.cupti_reader``), as the page says it."""


MAX_PATH_SEGMENTS = 100_000
"""Critical-path stretches kept with the analysis (in time order); a run with more is highlighted in its
first part only, and the page says so."""
SYNC_SAVING_GROUPS = 10
"""Sync sources (cause, line) whose removal is replayed one by one for the sync table, most waited first."""


def path_note(n: int) -> tuple[str, ...]:
    """What the page's critical-path highlight covers, where it does not cover the whole run."""
    if n <= MAX_PATH_SEGMENTS:
        return ()
    return (f"The critical path has {n:,} stretches; the timeline highlights the first {MAX_PATH_SEGMENTS:,}.",)


def sync_table(rd: RunData, ctx: RuleContext) -> pd.DataFrame:
    """Sync waits per (cause, source) over the whole run, largest saving first. Columns: ``cause``,
    ``source`` (user file:line, '' if unknown), ``count``, ``steps`` (step windows holding one), ``total_ns``,
    ``mean_ns``, ``max_ns`` (wait durations, ns), ``saving_ns`` (step time saved per step if these waits were
    read every few steps instead, replayed; NaN where not replayed: copies' own waits, other threads, beyond
    the SYNC_SAVING_GROUPS most waited)."""
    rows = np.flatnonzero(rd.sync_mask)
    cols = ["cause", "source", "count", "steps", "total_ns", "mean_ns", "max_ns", "saving_ns"]
    if not len(rows):
        return pd.DataFrame({c: pd.Series(dtype="object" if c in ("cause", "source") else "int64") for c in cols})
    frame = pd.DataFrame(
        {
            "cause": rd.strings("cause", rows),
            "source": rd.strings("source", rows),
            "dur": rd.e[rows] - rd.s[rows],
            "win": rd.win_row[rows],
        }
    )
    g = frame.groupby(["cause", "source"], sort=False)
    out = g.agg(
        count=("dur", "size"),
        steps=("win", lambda w: int(np.unique(w[w >= 0]).size)),
        total_ns=("dur", "sum"),
        max_ns=("dur", "max"),
    ).reset_index()
    out["mean_ns"] = out["total_ns"] / out["count"]
    out["saving_ns"] = np.nan
    groups = sync_groups(ctx)
    if len(groups):
        waited = ctx.graph.h_end - ctx.graph.h_start
        groups = groups.assign(dur=waited[groups["node"].to_numpy()])
        top = groups.groupby(["cause", "source"])["dur"].sum().nlargest(SYNC_SAVING_GROUPS)
        for cause, source in top.index:
            saving = source_saving(ctx, groups, cause, source)
            hit = (out["cause"] == cause) & (out["source"] == source)
            out.loc[hit, "saving_ns"] = max(float(saving.sum()), 0.0) / ctx.n_win
    out = out.sort_values(["saving_ns", "total_ns"], ascending=False, kind="stable", na_position="last")
    return out.reset_index(drop=True)[cols]


def _pace_notes(per_step: pd.DataFrame) -> tuple[str, ...]:
    """The pace note (webapp.analysis.pace) of the first rank's steps, if they run at two paces."""
    if per_step.empty:
        return ()
    first = per_step[per_step["rank"] == per_step["rank"].min()]
    note = pace_note(first["step_time_ns"].to_numpy(), first["step"].to_numpy())
    return (note,) if note else ()


MAX_RANK_FRAMES = 64
"""Runs of up to this many ranks keep each rank's host frames too (``ranks.host_frames``: rank -> rows)."""
SHORT_LAST_FRAC = 0.5
"""A rank's last step window under this share of the median of the LAST_NEIGHBOURS steps before it gets a note
(GPU-aligned windows; the steps just before it, as a loop may change pace on the way)."""
LAST_NEIGHBOURS = 5


def short_last_notes(per_step: pd.DataFrame, basis: str, gpu: bool = True) -> tuple[str, ...]:
    """Where windows follow the GPU, each holds the host work before the next step's GPU work; a rank's last
    has no next step, so a step that begins with host work (loading, a sleep, logging) ends short. One note
    per rank whose last window is under SHORT_LAST_FRAC of the median of the steps just before it (3 steps or
    more). ``gpu``: the run has GPU work (else windows follow its collectives, and the note says so)."""
    if basis not in ("gpu", "annotation") or per_step.empty:
        return ()
    several = per_step["rank"].nunique() > 1
    work = "GPU work" if gpu else "collectives"
    notes = []
    for rank, steps in per_step.sort_values("step").groupby("rank"):
        times = steps["step_time_ns"].to_numpy(np.float64)
        if len(times) < 3:
            continue
        typical, last = float(np.median(times[-1 - LAST_NEIGHBOURS : -1])), float(times[-1])
        if last < SHORT_LAST_FRAC * typical:
            whose = f"Rank {rank}'s last step" if several else "The last step"
            notes.append(
                f"{whose} ({last / 1e6:.2f} ms, against {typical / 1e6:.2f} ms for the steps before it) ends with "
                f"its {work}: each other window also holds the host work before the next step's {work}, and no "
                "next step came. It is kept as measured."
            )
    return tuple(notes)


def analyze(trace: Trace) -> RunAnalysis:
    """Analyze one run. Raises ValueError (one line) for a run that cannot be analysed."""
    rd = prepare(trace)
    causal = causal_model(rd)
    per_step = per_step_frame(rd, causal.critical)
    metrics = run_metrics(rd, per_step)
    phases = phase_frame(rd)
    for kind in ("setup", "tail"):  # the longest rank's: the ranks' phases run side by side
        durations = phases.loc[phases["phase"] == kind, "dur_ns"]
        metrics[f"{kind}_ns"] = float(durations.max()) if len(durations) else 0.0
    ctx = RuleContext(rd, causal.graph, causal.steps, causal.base_steps, metrics, pinned_gbps(metrics), causal.replayed)
    cpu_only = not (rd.gpu_mask & ~kind_mask(rd.kind, IntervalKind.COLLECTIVE)).any() and len(rd.kind)
    measured = (rd.win.ends - rd.win.starts).astype(np.int64)
    now = measured - (causal.raw_steps - causal.base_steps)
    findings: tuple[Finding, ...] = ()
    minor: tuple[Finding, ...] = ()
    costs = {r.name: np.zeros(len(rd.win), dtype=np.int64) for r in RULES}
    changes: dict[str, Detection] = {}
    rk = analyze_ranks(rd, None if cpu_only else ctx) if len(trace.ranks) > 1 else None
    if rk is not None and rk.finding is not None:
        ctx.straggler = int(rk.section["straggler"]["rank"])
    if not cpu_only:
        findings, minor, costs, changes = find_all(ctx)
    applied = [f for f in findings if f.rule in changes]
    fixed = fixed_per_step(ctx, now, [changes[f.rule] for f in applied])
    order = np.lexsort((rd.win_step, rd.win_rank))  # per_step rows are sorted by (rank, step)
    covered = causal.replayed[order]
    per_step["step_time_unrecorded_ns"] = now[order]
    per_step["replay_error_frac"] = np.where(covered, causal.error[order], np.nan)
    for rule in RULES:
        per_step[rule_key("cost", rule.name)] = np.where(covered, costs[rule.name][order], np.nan)
    ranks: dict[str, object] = dict(one_rank_section(rd)) if rk is None else {}
    rank_notes: tuple[str, ...] = ()
    if cpu_only:
        rank_notes = (cpu_only_note(rd),)
    if rk is not None:
        ranks, rank_notes = rk.section, (*rank_notes, *rk.notes)
        if rk.saving is not None:
            per_step[rule_key("cost", "straggler")] = np.where(covered, rk.saving[order], np.nan)
        if rk.finding is not None:
            if listed(rk.finding.cost_per_step_ns, share_of_steps(ctx, rk.finding.cost_total_ns)):
                fixed = straggler_fixed(ctx, rk, now, fixed, [changes[f.rule] for f in applied])
                findings, applied = ranked([*findings, rk.finding]), [*applied, rk.finding]
            else:
                minor = ranked([*minor, rk.finding])
    per_step["step_time_fixed_ns"] = np.where(covered, np.round(fixed[order]), np.nan)
    # only where the recorder's cost was taken out: else it would be the median step again, under another name
    unrecorded = len(now) and causal.recorder_call_ns > 0
    metrics["step_time_unrecorded_median_ns"] = float(np.median(now)) if unrecorded else math.nan
    metrics["replay_error_max_frac"] = float(causal.error.max()) if len(causal.error) else math.nan
    sampled = causal.replayed
    metrics["recorder_call_ns"] = causal.recorder_call_ns
    recorded = measured if causal.recorder_call_ns > 0 else None
    host_frames = frame_table(rd)
    if len(trace.ranks) > 1 and len(host_frames) and len(trace.ranks) <= MAX_RANK_FRAMES:
        ranks["host_frames"] = {str(r): frame_records(t) for r, t in frame_tables_by_rank(rd).items()}
    return RunAnalysis(
        metrics=metrics,
        per_rank=per_rank_frame(per_step),
        per_step=per_step,
        kernels=kernel_table(rd),
        sync_sources=sync_table(rd, ctx),
        findings=findings,
        what_if=what_if(now[sampled], fixed[sampled], applied, None if recorded is None else recorded[sampled]),
        notes=(
            *step_notes(
                trace.meta.step_method, "collectives" if cpu_only and rd.step_basis == "gpu" else rd.step_basis
            ),
            *phase_notes(phases, gpu=not cpu_only),
            *_pace_notes(per_step),
            *short_last_notes(per_step, rd.step_basis, gpu=not cpu_only),
            *timing_note(trace),
            *unknown_note(trace),
            *(() if cpu_only else (*causal.notes, *path_note(len(causal.path)))),
            *rank_notes,
        ),
        phases=phases,
        minor_findings=minor,
        ranks=ranks,
        host_frames=host_frames,
        host_frames_basis=frames_basis(rd) if len(host_frames) else "",
        host_frames_missing="" if len(host_frames) else missing_text(rd),
        critical_path=causal.path.head(MAX_PATH_SEGMENTS),
    )
