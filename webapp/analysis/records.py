"""Immutable records that cross the analysis boundary: Evidence, Finding, RunAnalysis.

Everything here is plain data: the web pages and the CLI render it, ``to_dict`` makes it JSON-ready.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd


def _plain(value: Any) -> Any:
    """A JSON-ready version of a numpy/pandas scalar (NaN and inf become None)."""
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (np.floating, float)):
        f = float(value)
        return f if math.isfinite(f) else None
    if isinstance(value, np.bool_):
        return bool(value)
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    return value


def frame_records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    """DataFrame rows as JSON-ready dicts (categoricals as strings, NaN as None)."""
    if frame.empty:
        return []
    out = frame.copy(deep=False)
    for name in out.columns:
        if isinstance(out[name].dtype, pd.CategoricalDtype):
            out[name] = out[name].astype(str)
    return [_plain(row) for row in out.to_dict(orient="records")]


def frame_columns(frame: pd.DataFrame) -> dict[str, list[Any]]:
    """A DataFrame as JSON-ready columns (a list per column): compact for long tables of numbers."""
    out: dict[str, list[Any]] = {}
    for name in frame.columns:
        col = frame[name]
        if isinstance(col.dtype, pd.CategoricalDtype) or col.dtype == object:
            out[str(name)] = [str(v) for v in col.tolist()]
        else:
            out[str(name)] = [_plain(v) for v in col.tolist()]
    return out


def rule_key(prefix: str, rule: str) -> str:
    """The key of a rule's figure in ns: ``rule_key("cost", "sync-in-loop")`` -> ``cost_sync_in_loop_ns``
    (per-step cost columns), ``rule_key("saving", ...)`` (what-if savings)."""
    return f"{prefix}_{rule.replace('-', '_')}_ns"


@dataclass(frozen=True)
class Evidence:
    """Where a finding shows on the timeline: a time range on one rank and the intervals in it."""

    rank: int
    start_ns: int
    end_ns: int
    interval_ids: tuple[int, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "rank": int(self.rank),
            "start_ns": int(self.start_ns),
            "end_ns": int(self.end_ns),
            "interval_ids": [int(i) for i in self.interval_ids],
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Evidence:
        return cls(
            int(d.get("rank") or 0),
            int(d.get("start_ns") or 0),
            int(d.get("end_ns") or 0),
            tuple(int(i) for i in d.get("interval_ids") or ()),
        )


@dataclass(frozen=True)
class Finding:
    """A problem found in a run, what it costs per step and the fix in PyTorch terms."""

    rule: str  # a rule's name (webapp.analysis.rules.RULES) or "straggler"
    title: str
    severity: str  # "info" | "warning" | "critical"
    cost_per_step_ns: int  # mean over steps
    fix: str
    detail: str
    sources: tuple[str, ...] = ()  # user file:line
    evidence: tuple[Evidence, ...] = ()
    cost_total_ns: int = 0  # over all steps
    options: tuple[tuple[str, int], ...] = ()
    """Fixes of a finding that has several (label, replayed saving per step in ns); its cost is the best one."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "rule": self.rule,
            "title": self.title,
            "severity": self.severity,
            "cost_per_step_ns": int(self.cost_per_step_ns),
            "fix": self.fix,
            "detail": self.detail,
            "sources": list(self.sources),
            "evidence": [e.to_dict() for e in self.evidence],
            "cost_total_ns": int(self.cost_total_ns),
            "options": [[str(label), int(ns)] for label, ns in self.options],
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Finding:
        return cls(
            rule=str(d.get("rule") or ""),
            title=str(d.get("title") or ""),
            severity=str(d.get("severity") or "info"),
            cost_per_step_ns=int(d.get("cost_per_step_ns") or 0),
            fix=str(d.get("fix") or ""),
            detail=str(d.get("detail") or ""),
            sources=tuple(str(s) for s in d.get("sources") or ()),
            evidence=tuple(Evidence.from_dict(e) for e in d.get("evidence") or ()),
            cost_total_ns=int(d.get("cost_total_ns") or 0),
            options=tuple((str(o[0]), int(o[1])) for o in d.get("options") or ()),
        )


@dataclass(frozen=True)
class RunAnalysis:
    """Everything :func:`webapp.analysis.analyze` computes for one run.

    ``metrics`` keys carry their unit (``*_ns`` nanoseconds, ``*_frac`` 0..1, ``*_bytes``, ``*_gbps``
    GB/s = 1e9 bytes/s, ``*_count``); they are computed in :func:`webapp.analysis.metrics.run_metrics` and
    described (label, unit, better direction) in :data:`webapp.analysis.catalog.CATALOG`.
    The DataFrames' columns are documented where they are built: ``per_step``
    (:data:`webapp.analysis.metrics.PER_STEP_COLUMNS` plus :data:`webapp.analysis.run.EXTRA_STEP_COLUMNS`),
    ``per_rank`` (:func:`~webapp.analysis.metrics.per_rank_frame`), ``kernels``
    (:func:`~webapp.analysis.metrics.kernel_table`), ``sync_sources`` (:func:`~webapp.analysis.run.sync_table`).
    ``what_if`` is described in :func:`webapp.analysis.whatif.what_if`; ``notes`` says how steps were found
    and placed and what the set-up and tail cost. ``findings`` are those worth listing, costliest first;
    ``minor_findings`` those below the listing threshold (webapp.analysis.rules.base.LIST_FRAC). ``phases`` is
    the set-up and tail table (:data:`webapp.analysis.phases.PHASE_COLUMNS`).
    """

    metrics: dict[str, float]
    per_rank: pd.DataFrame
    per_step: pd.DataFrame
    kernels: pd.DataFrame
    sync_sources: pd.DataFrame
    findings: tuple[Finding, ...]
    what_if: dict[str, float]
    notes: tuple[str, ...] = field(default=())
    phases: pd.DataFrame = field(default_factory=pd.DataFrame)
    minor_findings: tuple[Finding, ...] = field(default=())
    ranks: dict[str, Any] = field(default_factory=dict)
    """Multi-rank runs: collectives, per-rank breakdown, straggler, what-if and clock alignment
    (webapp.analysis.ranks.analyze_ranks); one rank: its collectives only
    (webapp.analysis.collectives.one_rank_section), empty without any."""
    host_frames: pd.DataFrame = field(default_factory=pd.DataFrame)
    """Host time by Python frame over the steps (webapp.analysis.hoststacks.FRAME_COLUMNS)."""
    host_frames_basis: str = ""
    """What ``host_frames`` is read from: webapp.analysis.hoststacks.BASES, '' when empty."""
    host_frames_missing: str = ""
    """Why ``host_frames`` is empty and how to fill it (webapp.analysis.hoststacks.missing_text)."""
    critical_path: pd.DataFrame = field(default_factory=pd.DataFrame)
    """The critical path's stretches (webapp.analysis.causal.critical.SEGMENT_COLUMNS), at most
    MAX_PATH_SEGMENTS in time order; ``to_dict`` writes it as columns."""

    def summary(self) -> dict[str, Any]:
        """Small dict for the run catalog. ``findings`` counts the listed findings, whatever their severity (the
        run page's list), ``minor_findings`` those below the listing threshold (folded on the run page)."""
        m = self.metrics
        return {
            "steps": int(m.get("steps", 0)),
            "step_time_median_ns": _plain(m.get("step_time_median_ns", 0.0)),
            "gpu_busy_frac": _plain(m.get("gpu_busy_frac", 0.0)),
            "copy_compute_overlap_frac": _plain(m.get("copy_compute_overlap_frac", 0.0)),
            "findings": len(self.findings),
            "minor_findings": len(self.minor_findings),
        }

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: DataFrames as lists of records, NaN as None."""
        return {
            "metrics": _plain(dict(self.metrics)),
            "per_rank": frame_records(self.per_rank),
            "per_step": frame_records(self.per_step),
            "kernels": frame_records(self.kernels),
            "sync_sources": frame_records(self.sync_sources),
            "findings": [f.to_dict() for f in self.findings],
            "what_if": _plain(dict(self.what_if)),
            "summary": self.summary(),
            "notes": list(self.notes),
            "phases": frame_records(self.phases),
            "minor_findings": [f.to_dict() for f in self.minor_findings],
            "ranks": _plain(dict(self.ranks)),
            "host_frames": frame_records(self.host_frames),
            "host_frames_basis": self.host_frames_basis,
            "host_frames_missing": self.host_frames_missing,
            "critical_path": frame_columns(self.critical_path),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> RunAnalysis:
        """The inverse of :meth:`to_dict` (a stored analysis read back); keys missing from dicts stored by
        older versions get empty defaults, None metrics become NaN."""

        def number(v: Any) -> float:
            return math.nan if v is None else float(v)

        return cls(
            metrics={str(k): number(v) for k, v in (d.get("metrics") or {}).items()},
            per_rank=pd.DataFrame(d.get("per_rank") or []),
            per_step=pd.DataFrame(d.get("per_step") or []),
            kernels=pd.DataFrame(d.get("kernels") or []),
            sync_sources=pd.DataFrame(d.get("sync_sources") or []),
            findings=tuple(Finding.from_dict(f) for f in d.get("findings") or ()),
            what_if={str(k): number(v) for k, v in (d.get("what_if") or {}).items()},
            notes=tuple(str(n) for n in d.get("notes") or ()),
            phases=pd.DataFrame(d.get("phases") or []),
            minor_findings=tuple(Finding.from_dict(f) for f in d.get("minor_findings") or ()),
            ranks=dict(d.get("ranks") or {}),
            host_frames=pd.DataFrame(d.get("host_frames") or []),
            host_frames_basis=str(d.get("host_frames_basis") or ""),
            host_frames_missing=str(d.get("host_frames_missing") or ""),
            critical_path=pd.DataFrame(d.get("critical_path") or {}),
        )
