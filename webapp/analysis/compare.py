"""compare(a, b) -> Comparison: metrics side by side, per-op changes, findings fixed/new, step alignment."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from collector.model import Trace
from webapp.analysis.catalog import direction, gpu_work, shown
from webapp.analysis.records import RunAnalysis, _plain, frame_records
from webapp.analysis.run import analyze

SAME_TOLERANCE = 0.05
"""Per-op times per step within 5% count as "same": run-to-run noise of kernel times is a few %."""


def metrics_table(a: dict[str, float], b: dict[str, float]) -> pd.DataFrame:
    """Columns: ``metric``, ``a``, ``b`` (NaN for a GPU metric of a run without GPU work: it has none),
    ``delta`` (b - a, the metric's unit), ``rel_change`` (delta / |a|, NaN where a is 0 or missing),
    ``better`` (True/False by the catalogue's direction; None where neither direction is better, the key is
    not catalogued, or nothing changed)."""
    names = list(a) + [k for k in b if k not in a]
    va, vb = _values(a, names), _values(b, names)
    delta = vb - va
    with np.errstate(invalid="ignore", divide="ignore"):
        rel = np.where(va != 0, delta / np.abs(va), np.nan)
    better: list[bool | None] = []
    for name, d in zip(names, delta, strict=True):
        sign = direction(name)
        better.append(None if sign == 0 or not np.isfinite(d) or d == 0 else bool(d * sign > 0))
    return pd.DataFrame(
        {
            "metric": names,
            "a": va,
            "b": vb,
            "delta": delta,
            "rel_change": rel,
            "better": pd.Series(better, dtype=object),
        }
    )


def _values(metrics: dict[str, float], names: list[str]) -> np.ndarray:
    gpu = gpu_work(metrics)
    return np.array([metrics.get(k, math.nan) if gpu or shown(k, False) else math.nan for k in names], np.float64)


def ops_table(a: pd.DataFrame, b: pd.DataFrame, a_steps: int = 1, b_steps: int = 1) -> pd.DataFrame:
    """Per (kind, name) of two kernel tables (RunAnalysis.kernels) of runs with ``a_steps`` / ``b_steps`` steps.

    Columns: ``name``, ``kind``, ``a_count``, ``b_count``, ``a_total_ns``, ``b_total_ns``, ``delta_ns``
    (b_total - a_total), ``a_step_ns`` / ``b_step_ns`` (total time per step, ns), ``delta_step_ns``
    (b_step - a_step: what the op adds to or saves from each step, fair when the runs have different step
    counts), ``a_mean_ns``, ``b_mean_ns`` and ``status``: ``added`` (only in B), ``removed`` (only in A),
    ``faster``/``slower`` (its time per step, the number the tables show, changed by more than
    SAME_TOLERANCE of A's) or ``same``. Largest absolute per-step delta first."""
    cols = ["kind", "name", "count", "total_ns", "mean_ns"]
    m = a[cols].merge(b[cols], on=["kind", "name"], how="outer", suffixes=("_a", "_b"))
    out = pd.DataFrame(
        {
            "name": m["name"],
            "kind": m["kind"],
            "a_count": m["count_a"].fillna(0).astype(np.int64),
            "b_count": m["count_b"].fillna(0).astype(np.int64),
            "a_total_ns": m["total_ns_a"].fillna(0).astype(np.int64),
            "b_total_ns": m["total_ns_b"].fillna(0).astype(np.int64),
        }
    )
    out["delta_ns"] = out["b_total_ns"] - out["a_total_ns"]
    out["a_step_ns"] = out["a_total_ns"] / max(int(a_steps), 1)
    out["b_step_ns"] = out["b_total_ns"] / max(int(b_steps), 1)
    out["delta_step_ns"] = out["b_step_ns"] - out["a_step_ns"]
    out["a_mean_ns"], out["b_mean_ns"] = m["mean_ns_a"], m["mean_ns_b"]
    with np.errstate(invalid="ignore", divide="ignore"):
        rel = out["delta_step_ns"] / out["a_step_ns"]
    status = np.select(
        [out["a_count"] == 0, out["b_count"] == 0, rel < -SAME_TOLERANCE, rel > SAME_TOLERANCE],
        ["added", "removed", "faster", "slower"],
        default="same",
    )
    out["status"] = status
    order = np.argsort(-out["delta_step_ns"].abs().to_numpy(), kind="stable")
    return out.iloc[order].reset_index(drop=True)


def findings_diff(a: RunAnalysis, b: RunAnalysis) -> dict[str, list[str]]:
    """Rule ids: ``fixed`` (in A, gone in B), ``new`` (only in B), ``unchanged`` (in both)."""
    ra = [f.rule for f in a.findings]
    rb = [f.rule for f in b.findings]
    return {
        "fixed": [r for r in ra if r not in rb],
        "new": [r for r in rb if r not in ra],
        "unchanged": [r for r in ra if r in rb],
    }


RANK_COLUMNS = ("step_time_ns", "wait_ns", "comm_ns", "compute_ns", "data_ns")
"""Per-rank means (ns per step, from the ranks section of each analysis) compared by :func:`ranks_table`."""


def ranks_table(a: RunAnalysis, b: RunAnalysis) -> pd.DataFrame:
    """Per rank of two runs of several ranks (empty when neither has any): ``rank``, then for each of
    RANK_COLUMNS ``a_<col>``, ``b_<col>`` and ``delta_<col>`` (b - a; NaN where a run lacks the rank), and
    ``a_last``/``b_last``: how many collectives the rank entered last. Ranks are matched by number."""
    sides = []
    for name, analysis in (("a", a), ("b", b)):
        section = analysis.ranks or {}
        per = pd.DataFrame(section.get("per_rank") or [], columns=["rank", *RANK_COLUMNS])
        per = per[["rank", *RANK_COLUMNS]].rename(columns={c: f"{name}_{c}" for c in RANK_COLUMNS})
        last = {int(k): int(v) for k, v in (section.get("last_counts") or {}).items()}
        per[f"{name}_last"] = per["rank"].map(last).fillna(0).astype(np.int64)
        sides.append(per)
    if not len(sides[0]) and not len(sides[1]):
        return pd.DataFrame()
    out = sides[0].merge(sides[1], on="rank", how="outer").sort_values("rank").reset_index(drop=True)
    out["rank"] = out["rank"].astype(np.int64)
    for c in RANK_COLUMNS:
        out[f"delta_{c}"] = out[f"b_{c}"] - out[f"a_{c}"]
    cols = ["rank", *(f"{s}_{c}" for c in RANK_COLUMNS for s in ("a", "b", "delta")), "a_last", "b_last"]
    return out[cols]


def rank_notes(a: RunAnalysis, b: RunAnalysis) -> tuple[str, ...]:
    """What a reader of a comparison of runs of several ranks should know: how steps are aligned, rank
    counts that differ, and the straggler of each run."""
    na, nb = int(a.metrics.get("ranks", 1) or 1), int(b.metrics.get("ranks", 1) or 1)
    if na <= 1 and nb <= 1:
        return ()
    notes = [
        "Several ranks: each run's ranks share its aligned clock; steps are lined up on one rank's step "
        "(rank 0 unless picked), the other ranks follow on that clock."
    ]
    if na != nb:
        notes.append(f"A has {na} rank{'s' if na != 1 else ''} and B {nb}: ranks are compared by number.")
    sa, sb = (a.ranks or {}).get("straggler"), (b.ranks or {}).get("straggler")
    if sa or sb:
        say = [
            f"{n}: rank {s['rank']} ({s['cause']}, {s['wait_per_step_ns'] / 1e6:.2f} ms per step)"
            if s
            else f"{n}: none"
            for n, s in (("A", sa), ("B", sb))
        ]
        notes.append("Straggler " + ", ".join(say) + ".")
    return tuple(notes)


def _step_intervals(trace: Trace, per_step: pd.DataFrame, step: int, rank: int) -> pd.DataFrame:
    row = per_step[(per_step["rank"] == rank) & (per_step["step"] == step)]
    if row.empty:
        have = per_step.loc[per_step["rank"] == rank, "step"]
        span = f"steps {int(have.min())}..{int(have.max())}" if len(have) else "no steps"
        raise ValueError(f"step {step} of rank {rank} is not in this run ({span})")
    start, end = int(row["start_ns"].iloc[0]), int(row["end_ns"].iloc[0])
    df = trace.intervals
    m = (df["rank"].to_numpy() == rank) & (df["start_ns"].to_numpy() < end) & (df["end_ns"].to_numpy() > start)
    out = df[m].copy()
    out["rel_start_ns"] = out["start_ns"] - start
    out["rel_end_ns"] = out["end_ns"] - start
    return out.reset_index(drop=True)


@dataclass(frozen=True)
class Comparison:
    """Run A against run B. ``metrics``, ``ops``, ``findings``, ``ranks`` and ``notes`` as documented in their
    builders (:func:`metrics_table`, :func:`ops_table`, :func:`findings_diff`, :func:`ranks_table`,
    :func:`rank_notes`)."""

    a: Trace | None  # None when built from stored analyses only (no step_aligned then)
    b: Trace | None
    analysis_a: RunAnalysis
    analysis_b: RunAnalysis
    metrics: pd.DataFrame
    ops: pd.DataFrame
    findings: dict[str, list[str]]
    ranks: pd.DataFrame = field(default_factory=pd.DataFrame)  # ranks_table(); empty for one-rank runs
    notes: tuple[str, ...] = ()  # rank_notes()

    @property
    def step_time_change(self) -> float:
        """Relative change of the median step time, (B - A) / A (positive: B is slower)."""
        ta = self.analysis_a.metrics.get("step_time_median_ns", math.nan)
        tb = self.analysis_b.metrics.get("step_time_median_ns", math.nan)
        return (tb - ta) / ta if ta and ta == ta and tb == tb else math.nan

    def step_aligned(self, a_step: int, b_step: int, rank: int = 0) -> tuple[pd.DataFrame, pd.DataFrame]:
        """Intervals of step ``a_step`` of A and ``b_step`` of B on ``rank`` (those overlapping the step
        window), with the run DataFrame's columns plus ``rel_start_ns``/``rel_end_ns``: ns from the step
        window's start. Raises ValueError for a step that is not there (or when the traces are not here)."""
        if self.a is None or self.b is None:
            raise ValueError("this comparison was built from analyses only: no intervals to align")
        return (
            _step_intervals(self.a, self.analysis_a.per_step, a_step, rank),
            _step_intervals(self.b, self.analysis_b.per_step, b_step, rank),
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: tables as lists of records, NaN as None."""
        return {
            "metrics": frame_records(self.metrics),
            "ops": frame_records(self.ops),
            "findings": {k: list(v) for k, v in self.findings.items()},
            "step_time_change": _plain(self.step_time_change),
            "ranks": frame_records(self.ranks),
            "notes": list(self.notes),
            "a": {
                "summary": self.analysis_a.summary(),
                "what_if": _plain(dict(self.analysis_a.what_if)),
                "findings": [f.to_dict() for f in self.analysis_a.findings],
            },
            "b": {
                "summary": self.analysis_b.summary(),
                "what_if": _plain(dict(self.analysis_b.what_if)),
                "findings": [f.to_dict() for f in self.analysis_b.findings],
            },
        }


def compare(a: Trace, b: Trace) -> Comparison:
    """Compare run A (baseline) with run B."""
    return compare_analyses(analyze(a), analyze(b), a, b)


def compare_analyses(ra: RunAnalysis, rb: RunAnalysis, a: Trace | None = None, b: Trace | None = None) -> Comparison:
    """Compare two analyses (e.g. stored ones read back with RunAnalysis.from_dict); the traces are optional."""
    cols = {"kind", "name", "count", "total_ns", "mean_ns"}
    has_ops = cols <= set(ra.kernels.columns) and cols <= set(rb.kernels.columns)
    steps_a, steps_b = ra.summary()["steps"], rb.summary()["steps"]
    ops = ops_table(ra.kernels, rb.kernels, steps_a, steps_b) if has_ops else pd.DataFrame()
    return Comparison(
        a,
        b,
        ra,
        rb,
        metrics_table(ra.metrics, rb.metrics),
        ops,
        findings_diff(ra, rb),
        ranks_table(ra, rb),
        rank_notes(ra, rb),
    )
