"""What every finding rule shares: the context it reads, the detection it returns, evidence helpers.

A rule is a unit with a name, a title, a default fix text and ``detect(ctx) -> Detection | None``. A
detection carries the facts for the page (detail, source lines, evidence) and the fix as a change to the
dependency graph (webapp.analysis.causal.fixes). The engine (webapp.analysis.findings) replays every
change and turns the saving into the finding's cost, so a rule never estimates a cost by hand.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np
import pandas as pd

from webapp.analysis.causal.graph import Graph
from webapp.analysis.causal.replay import replay
from webapp.analysis.causal.segs import take
from webapp.analysis.causal.stepmap import StepMap, step_times
from webapp.analysis.context import RunData
from webapp.analysis.records import Evidence

EVIDENCE_LIMIT = 20
"""Evidence items kept per finding (the largest), enough to zoom the timeline to."""
LIST_FRAC = 0.005
"""Below 0.5% of the median step a saving is within run-to-run noise: a finding is minor, not listed
(webapp.analysis.findings); a rule spells out the assumptions of a fix only where its saving reaches it."""
MIN_COPY_BYTES = 1 << 20
"""Copies under 1 MiB (scalars read by .item(), small tensors) are latency, not bandwidth problems."""

Change = Callable[[Graph], Graph]


@dataclass(frozen=True)
class Detection:
    """What a rule found: ``change`` is its fix as a graph change; ``fix`` overrides the rule's fix text;
    ``saving`` is the change's replayed saving per step window (ns) when the rule already replayed it."""

    detail: str
    change: Change
    sources: tuple[str, ...] = ()
    evidence: tuple[Evidence, ...] = ()
    fix: str | None = None
    saving: np.ndarray | None = None
    options: tuple[tuple[str, int], ...] = ()
    """Every fix the rule replayed: (label, mean saving per step in ns)."""
    floor: np.ndarray | None = None
    """Per step window, the least a step can take with the fix (ns): a pace the graph does not hold, such as
    DataLoader workers delivering a batch every so often."""


class Rule(Protocol):
    name: str
    title: str
    fix: str

    def detect(self, ctx: RuleContext) -> Detection | None: ...


@dataclass
class RuleContext:
    """What rules read: the run's arrays (``rd``), its dependency graph with the recorder's own cost taken
    out (``graph``), the replayed step times of that graph (``base_steps``, ns per window), metrics and the
    pinned bandwidth (GB/s, NaN if unknown)."""

    rd: RunData
    graph: Graph
    steps: StepMap
    base_steps: np.ndarray
    metrics: dict[str, float]
    pinned_gbps: float
    replayed: np.ndarray | None = None
    """The windows the graph covers (None: all)."""
    straggler: int | None = None
    """The rank the straggler finding names (webapp.analysis.ranks), if any: its extra time is that finding's."""
    _cache: dict[str, np.ndarray] = field(default_factory=dict)

    @property
    def covered(self) -> np.ndarray:
        return np.ones(len(self.rd.win), dtype=bool) if self.replayed is None else self.replayed

    @property
    def n_win(self) -> int:
        return max(int(self.covered.sum()), 1)

    @property
    def step_ref(self) -> float:
        steps = self.base_steps[self.covered]
        return float(np.median(steps)) if len(steps) else 0.0

    @property
    def step_mean(self) -> float:
        """The average replayed step over the windows the graph covers (ns): what a saving per step, a sum over
        them divided by :attr:`n_win`, is read against."""
        return float(self.base_steps[self.covered].sum()) / self.n_win

    def host_win(self) -> np.ndarray:
        """Step window of each host node (its step tag, else its start), -1 outside the steps."""
        if "host_win" not in self._cache:
            self._cache["host_win"] = self.rd.step_win(self.graph.h_row)
        return self._cache["host_win"]

    def gpu_win(self) -> np.ndarray:
        """Step window of each GPU op: that of the host node that launched it, else its own start's."""
        if "gpu_win" not in self._cache:
            g = self.graph
            own = self.rd.win_row[g.g_row]
            launched = take(self.host_win(), g.g_launch, -1)
            self._cache["gpu_win"] = np.where(launched >= 0, launched, own)
        return self._cache["gpu_win"]

    def cached(self, key: str, compute: Callable[[], np.ndarray]) -> np.ndarray:
        """``compute()``, once per ``key`` for this run (a replay two parts of the analysis ask for)."""
        if key not in self._cache:
            self._cache[key] = compute()
        return self._cache[key]

    def saving(self, change: Change) -> np.ndarray:
        """Replayed step time saved by ``change`` in each step window (ns; negative if it made a step slower;
        0 in windows the graph does not cover)."""
        changed = change(self.graph)
        replayed = step_times(self.rd, self.steps, replay(changed), changed.g_stream)
        return np.where(self.covered, self.base_steps - replayed, 0)

    def column(self, name: str, rows: np.ndarray) -> np.ndarray:
        """A column of the run DataFrame at ``rows`` as an object array of str."""
        return self.rd.strings(name, rows)

    def sources(self, rows: np.ndarray) -> np.ndarray:
        """User source of each row: its own, else that of the CPU interval that launched it."""
        own = self.column("source", rows)
        lid = self.rd.ints("launch_id", rows)
        lrow = self.rd.rows_of_ids(lid)
        missing = (own == "") & (lrow >= 0)
        if missing.any():
            own[missing] = self.column("source", lrow[missing])
        return own

    def launch_rows(self, rows: np.ndarray) -> np.ndarray:
        """Row of the CPU interval that launched each row (-1 where unknown)."""
        return self.rd.rows_of_ids(self.rd.ints("launch_id", rows))

    def evidence(self, rows: np.ndarray, weight: np.ndarray, extra: Sequence[np.ndarray] = ()) -> tuple[Evidence, ...]:
        """The EVIDENCE_LIMIT heaviest rows as evidence (their own time range; ``extra`` rows as more ids)."""
        return evidence_items(self.rd, rows, self.rd.s[rows], self.rd.e[rows], weight, extra)


def evidence_items(
    rd: RunData,
    rows: np.ndarray,
    start: np.ndarray,
    end: np.ndarray,
    weight: np.ndarray,
    extra: Sequence[np.ndarray] = (),
) -> tuple[Evidence, ...]:
    """The EVIDENCE_LIMIT heaviest items; ``start``/``end`` on the axis, ``rows`` (and extra rows) as ids."""
    if not len(weight):
        return ()
    top = np.argsort(-np.asarray(weight), kind="stable")[:EVIDENCE_LIMIT]
    rank = (start[top] // rd.tb.stride).astype(np.int64)
    s = rd.tb.from_axis(rank, start[top])
    e = rd.tb.from_axis(rank, end[top])
    out = []
    for k, i in enumerate(top):
        rid = [r for r in (rows[i], *(x[i] for x in extra)) if r >= 0]
        out.append(Evidence(int(rank[k]), int(s[k]), int(e[k]), tuple(int(rd.ids[r]) for r in rid)))
    return tuple(out)


def top_sources(sources: np.ndarray, weights: np.ndarray, limit: int = 5) -> tuple[str, ...]:
    """The ``limit`` source lines with the largest summed weight ('' left out)."""
    if not len(sources):
        return ()
    s = pd.Series(weights, index=sources).groupby(level=0).sum().sort_values(ascending=False)
    return tuple(str(k) for k in s.index if k)[:limit]


def ms(ns: float) -> str:
    """A duration in ns as milliseconds for a sentence."""
    return f"{ns / 1e6:.2f} ms" if ns == ns else "unknown"


def pinned_gbps(metrics: dict[str, float]) -> float:
    """Pinned host-to-device bandwidth (GB/s): the probe's, else the run's achieved; NaN if neither."""
    for key in ("h2d_pinned_probe_gbps", "h2d_pinned_achieved_gbps"):
        value = metrics.get(key, math.nan)
        if value == value and value > 0:
            return float(value)
    return math.nan
