"""compare(a, b) -> Comparison: metrics side by side, per-op changes, findings fixed/new, step alignment, and
the verdict on the median step."""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from collector.model import Trace
from webapp.analysis.catalog import Unit, direction, gpu_work, label, shown, unit_of
from webapp.analysis.records import Finding, RunAnalysis, _plain, frame_records
from webapp.analysis.run import analyze
from webapp.analysis.units import table_time_text

SAME_TOLERANCE = 0.05
"""Per-op times per step within 5% count as "same": run-to-run noise of kernel times is a few %."""


NOISE_REL = 0.005
"""A change shown as under 0.5% of A's value (or 0.5 points, for a fraction) reads "same": run-to-run noise
(below the same share of the step a finding is minor, webapp.analysis.rules.base.LIST_FRAC)."""

CHANGE_DECIMALS = 1
"""Changes are shown with one decimal: percent of A, or percentage points (B - A) for a fraction."""

PER_STEP_LABEL = ", mean per step"
"""Added to the label of a run total compared per step (each run's total over its steps)."""


def shown_change(change: float) -> float:
    """``change`` (relative to A, or a fraction's B - A) in percent or points, rounded as the tables show it
    (-0.0 reads +0.0); NaN when there is none."""
    value = 100 * float(change)
    if not math.isfinite(value):
        return math.nan
    return float(f"{value:.{CHANGE_DECIMALS}f}") + 0.0


def within_noise(shown_value: float) -> bool:
    """Whether a change as shown (:func:`shown_change`) reads "same": under NOISE_REL, so 0.0 to 0.4 either
    way. The label comes from the number shown, nothing else."""
    return math.isfinite(shown_value) and abs(shown_value) < NOISE_REL * 100


RATIO_FROM_PCT = 900.0
"""A change of +900% or more (B ten times A) reads as a ratio: "1,021x", not "+102000.0%"."""


def change_text(change: float | None, frac: bool, missing: str = "—") -> str:
    """A compared metric's change as the tables show it: a fraction's in percentage points ("+11.4 pts"), any
    other's relative to A ("-52.7%", or "1,021x" from RATIO_FROM_PCT on); ``missing`` where there is none."""
    if change is None or not math.isfinite(change):
        return missing
    shown = f"{change:+.{CHANGE_DECIMALS}f}"
    if frac:
        return f"{shown} pts"
    return f"{1 + change / 100:,.0f}x" if change >= RATIO_FROM_PCT else f"{shown}%"


def compared_label(key: str, basis: str = "") -> str:
    """The label of a compared metric: the catalogue's, and "mean per step" for a run total compared per
    step (``basis`` "per_step", see :func:`metrics_table`)."""
    return label(key) + (PER_STEP_LABEL if basis == "per_step" else "")


def run_totals(keys: Iterable[str], per_step_columns: Iterable[str]) -> frozenset[str]:
    """The metrics among ``keys`` that are run totals: a per-step column of time, events or bytes summed over
    the steps (webapp.analysis.metrics.run_metrics; named so by webapp.formatting.total_labels)."""
    columns = set(per_step_columns)
    return frozenset(k for k in keys if k in columns and unit_of(k) in (Unit.NS, Unit.COUNT, Unit.BYTES))


def metrics_table(
    a: dict[str, float], b: dict[str, float], a_steps: int = 1, b_steps: int = 1, totals: Collection[str] = ()
) -> pd.DataFrame:
    """Columns: ``metric``, ``a``, ``b`` (NaN for a GPU metric of a run without GPU work: it has none),
    ``delta`` (b - a, the metric's unit), ``rel_change`` (delta / |a|, NaN where a is 0 or missing),
    ``change`` (the change as shown, :func:`shown_change`: percentage points for a fraction, else percent of
    A; NaN where A is 0 or missing, B - A is shown then), ``status`` (``same`` where the change shown is
    within NOISE_REL (:func:`within_noise`), or where A is 0 and B - A shows as 0; else ``better``/``worse``
    by the catalogue's direction, or ``changed`` where neither direction is better or the key is not
    catalogued; '' where a run lacks the figure), ``better`` (True / False for ``better`` / ``worse``, else
    None) and ``basis``: ``total`` for the ``totals`` (run totals over the steps), ``per_step`` for those
    when the runs have different step counts (``a_steps`` and ``b_steps``): then ``a`` and ``b`` are each
    run's total divided by its steps, so a run twice as long does not read as twice as slow; '' for the
    others (medians, fractions, rates, ...)."""
    names = list(a) + [k for k in b if k not in a]
    va, vb = _values(a, names), _values(b, names)
    total = np.array([k in totals for k in names], dtype=bool)
    per_step = total if a_steps != b_steps and min(a_steps, b_steps) > 0 else np.zeros(len(names), dtype=bool)
    va = np.where(per_step, va / max(a_steps, 1), va)
    vb = np.where(per_step, vb / max(b_steps, 1), vb)
    delta = vb - va
    with np.errstate(invalid="ignore", divide="ignore"):
        rel = np.where(va != 0, delta / np.abs(va), np.nan)
    changes = [
        0.0 if _shown_alike(k, x, y) else shown_change(d if unit_of(k) is Unit.FRAC else r)
        for k, x, y, d, r in zip(names, va, vb, delta, rel, strict=True)
    ]
    status = [_status(*row) for row in zip(names, va, vb, delta, changes, strict=True)]
    return pd.DataFrame(
        {
            "metric": names,
            "a": va,
            "b": vb,
            "delta": delta,
            "rel_change": rel,
            "change": np.array(changes, dtype=np.float64),
            "status": status,
            "better": pd.Series([{"better": True, "worse": False}.get(s) for s in status], dtype=object),
            "basis": np.where(per_step, "per_step", np.where(total, "total", "")),
        }
    )


def _shown_alike(key: str, a: float, b: float) -> bool:
    """Two times the tables show alike (webapp.analysis.units.table_time_text, which the pages' coarser
    rendering then shows alike too): no change to speak of, whatever the ratio."""
    if unit_of(key) is not Unit.NS or not (math.isfinite(a) and math.isfinite(b)):
        return False
    return table_time_text(a) == table_time_text(b)


def _status(key: str, a: float, b: float, delta: float, change: float) -> str:
    if not (math.isfinite(a) and math.isfinite(b)):
        return ""
    if _shown_alike(key, a, b):
        return "same"
    if math.isfinite(change):
        same = within_noise(change)
    else:  # A is 0: B - A is shown, in whole ns or bytes for those units
        same = abs(delta) < 0.5 if unit_of(key) in (Unit.NS, Unit.BYTES) else delta == 0
    if same:
        return "same"
    sign = direction(key)
    return "changed" if sign == 0 else "better" if delta * sign > 0 else "worse"


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
    """Rule ids, by what became of each run's findings: listed ones (``findings``) and minor ones
    (``minor_findings``: below the listing threshold, webapp.analysis.rules.base.LIST_FRAC). ``fixed``: listed
    in A, gone from B; ``minor``: listed in A, minor in B (still there, below the threshold now); ``new``:
    listed in B, not in A at all; ``grown``: minor in A, listed in B (above the threshold now);
    ``unchanged``: listed in both; ``unseen``: listed in one run, of a rule the other cannot show (a GPU rule
    against a run without GPU work, the straggler against a run of one rank), so neither fixed nor new."""
    la, lb = _rules(a.findings), _rules(b.findings)
    ma, mb = _rules(a.minor_findings).keys() - la.keys(), _rules(b.minor_findings).keys() - lb.keys()
    unseen: list[str] = []
    if gpu_work(a.metrics) != gpu_work(b.metrics):
        unseen = [r for r in (*la, *lb) if r not in HOST_RULES]
        la, lb = (dict.fromkeys(r for r in rules if r in HOST_RULES) for rules in (la, lb))
    if min(int(a.metrics.get("ranks", 1) or 1), int(b.metrics.get("ranks", 1) or 1)) < 2:  # one rank: no straggler
        unseen += [r for r in (*la, *lb) if r in RANK_RULES]
        la, lb = (dict.fromkeys(r for r in rules if r not in RANK_RULES) for rules in (la, lb))
    return {
        "fixed": [r for r in la if r not in lb and r not in mb],
        "minor": [r for r in la if r in mb],
        "new": [r for r in lb if r not in la and r not in ma],
        "grown": [r for r in lb if r in ma],
        "unchanged": [r for r in la if r in lb],
        "unseen": unseen,
    }


HOST_RULES = frozenset({"straggler"})
"""Rules a run without GPU work can have findings of (CPU ranks: the straggler)."""
RANK_RULES = frozenset({"straggler"})
"""Rules only a run of several ranks can have findings of."""


def gpu_notes(a: RunAnalysis, b: RunAnalysis) -> tuple[str, ...]:
    """A note when one run has GPU work and the other has none: their GPU figures and findings are not
    compared."""
    ga, gb = gpu_work(a.metrics), gpu_work(b.metrics)
    if ga == gb:
        return ()
    has, lacks = ("A", "B") if ga else ("B", "A")
    return (
        f"{has} has GPU work and {lacks} has none: the runs record different things. GPU figures are {has}'s "
        f"alone, and {has}'s GPU findings are neither fixed nor new in {lacks}, which cannot show them.",
    )


def _rules(findings: Iterable[Finding]) -> dict[str, None]:
    """The findings' rule ids in order, each once (as the keys of a dict)."""
    return dict.fromkeys(f.rule for f in findings)


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
    """Run A against run B. ``metrics``, ``ops``, ``findings`` and ``ranks`` as documented in their builders
    (:func:`metrics_table`, :func:`ops_table`, :func:`findings_diff`, :func:`ranks_table`); ``notes``: what a
    reader should know (:func:`step_notes`, :func:`rank_notes`)."""

    a: Trace | None  # None when built from stored analyses only (no step_aligned then)
    b: Trace | None
    analysis_a: RunAnalysis
    analysis_b: RunAnalysis
    metrics: pd.DataFrame
    ops: pd.DataFrame
    findings: dict[str, list[str]]
    ranks: pd.DataFrame = field(default_factory=pd.DataFrame)  # ranks_table(); empty for one-rank runs
    notes: tuple[str, ...] = ()  # step_notes() and rank_notes()

    @property
    def step_time_change(self) -> float:
        """Relative change of the median step time, (B - A) / A (positive: B is slower)."""
        ta = self.analysis_a.metrics.get("step_time_median_ns", math.nan)
        tb = self.analysis_b.metrics.get("step_time_median_ns", math.nan)
        return (tb - ta) / ta if ta and ta == ta and tb == tb else math.nan

    @property
    def finding_costs(self) -> dict[str, int]:
        """B's cost per step (ns) of each of its findings, listed or minor, by rule id."""
        found = (*self.analysis_b.minor_findings, *self.analysis_b.findings)  # a listed one wins
        return {f.rule: int(f.cost_per_step_ns) for f in found}

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
            "finding_costs": self.finding_costs,
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


def step_notes(a_steps: int, b_steps: int) -> tuple[str, ...]:
    """Runs of different step counts: their run totals are compared per step (:func:`metrics_table`)."""
    if a_steps == b_steps or min(a_steps, b_steps) <= 0:
        return ()
    return (
        f"A has {a_steps} steps and B {b_steps}: run totals are compared per step (each run's total divided "
        f'by its steps, labelled "{PER_STEP_LABEL.lstrip(", ")}"), so that the longer run does not read as slower.',
    )


def compare(a: Trace, b: Trace) -> Comparison:
    """Compare run A (baseline) with run B."""
    return compare_analyses(analyze(a), analyze(b), a, b)


def compare_analyses(ra: RunAnalysis, rb: RunAnalysis, a: Trace | None = None, b: Trace | None = None) -> Comparison:
    """Compare two analyses (e.g. stored ones read back with RunAnalysis.from_dict); the traces are optional."""
    cols = {"kind", "name", "count", "total_ns", "mean_ns"}
    has_ops = cols <= set(ra.kernels.columns) and cols <= set(rb.kernels.columns)
    steps_a, steps_b = ra.summary()["steps"], rb.summary()["steps"]
    ops = ops_table(ra.kernels, rb.kernels, steps_a, steps_b) if has_ops else pd.DataFrame()
    totals = run_totals([*ra.metrics, *rb.metrics], [*ra.per_step.columns, *rb.per_step.columns])
    return Comparison(
        a,
        b,
        ra,
        rb,
        # run totals sum every rank's steps: per step means per (rank, step) row
        metrics_table(ra.metrics, rb.metrics, len(ra.per_step) or steps_a, len(rb.per_step) or steps_b, totals),
        ops,
        findings_diff(ra, rb),
        ranks_table(ra, rb),
        (*gpu_notes(ra, rb), *step_notes(steps_a, steps_b), *rank_notes(ra, rb)),
    )


@dataclass(frozen=True)
class Verdict:
    """B against A on the median step time: ``change`` (B - A) / A (NaN when unknown), ``bound`` the
    allowed slow-down (None: no gate), ``failed`` when change > bound. The text says how much more or less
    time B's median step takes, and the ratio of the two ("52.7% less time than A's (2.11x faster)"); a
    change that shows as 0.0% reads as the same time, one within NOISE_REL as about the same."""

    change: float
    bound: float | None

    @property
    def failed(self) -> bool:
        return self.bound is not None and self.change == self.change and self.change > self.bound

    @property
    def text(self) -> str:
        shown_pct = shown_change(self.change)
        if self.change != self.change:
            head = "no median step time to compare"
        elif self.failed and within_noise(shown_pct):  # over a tight bound: the change itself, not "same"
            head = f"B's median step takes {self.change * 100:.2f}% more time than A's"
        elif shown_pct == 0:
            head = "B's median step takes as long as A's"
        elif within_noise(shown_pct):
            which = "more" if self.change > 0 else "less"
            head = (
                f"B's median step takes about as long as A's ({abs(shown_pct):.1f}% {which}: within run-to-run noise)"
            )
        else:
            more = self.change > 0
            ratio = 1 + self.change if more else 1 / (1 + self.change) if self.change > -1 else math.inf
            times = f" ({ratio:.2f}x {'slower' if more else 'faster'})" if math.isfinite(ratio) else ""
            amount = f"{abs(shown_pct):.1f}% {'more' if more else 'less'}"
            head = f"B's median step takes {amount} time than A's{times}"
        if self.bound is None:
            return head
        return f"{'FAIL' if self.failed else 'OK'}: {head}; the bound is {self.bound * 100:.1f}% more"

    def to_dict(self) -> dict[str, Any]:
        """For templates: text and a CSS class (``fail``, ``ok`` or empty without a gate)."""
        cls = "" if self.bound is None else ("fail" if self.failed else "ok")
        return {"text": self.text, "cls": cls}


def verdict_of(result: Comparison, bound: float | None = None) -> Verdict:
    """The verdict on ``result``'s median step time against ``bound`` (None: no gate)."""
    return Verdict(result.step_time_change, bound)
