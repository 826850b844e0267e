"""The metric catalogue: every run metric's label, unit, better direction and where it is shown.

One entry per key of ``RunAnalysis.metrics`` (:func:`webapp.analysis.metrics.run_metrics`; a test keeps
the two in step). The text reports, the run page's cards, the compare page and CLI, and the pages' tables
(through :func:`to_json`) all read it, so a new metric needs a line here and its computation, nothing else.

Catalogue order is display order. Lookups read :data:`CATALOG` when called, so tests can replace it.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from functools import lru_cache
from types import MappingProxyType
from typing import Any


class Unit(str, enum.Enum):
    """What a metric's number counts; its key ends with the same suffix (counts may have none)."""

    NS = "ns"  # nanoseconds
    FRAC = "frac"  # a fraction, 0..1
    BYTES = "bytes"
    GBPS = "gbps"  # GB/s = 1e9 bytes/s
    COUNT = "count"


class Better(str, enum.Enum):
    """Which way a change is an improvement; metrics with neither (more work, more steps) have ``None``."""

    LOWER = "lower"
    HIGHER = "higher"


@dataclass(frozen=True)
class Metric:
    """One run metric.

    ``headline``: in the text reports and first on the compare page; ``card``: a number card on the run
    page; ``step_column``: a column of the run page's per-step table (the per-step value of the same key).
    """

    key: str
    label: str
    unit: Unit
    better: Better | None = None
    headline: bool = False
    card: bool = False
    step_column: bool = False

    @property
    def sign(self) -> int:
        """-1 when lower is better, +1 when higher is better, 0 when neither."""
        return {Better.LOWER: -1, Better.HIGHER: 1, None: 0}[self.better]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: enums as their strings (``better`` None when neither direction is better)."""
        d = asdict(self)
        d["unit"] = self.unit.value
        d["better"] = None if self.better is None else self.better.value
        return d


# shorthands for the table below
NS, FRAC, BYTES, GBPS, COUNT = Unit.NS, Unit.FRAC, Unit.BYTES, Unit.GBPS, Unit.COUNT
LOWER, HIGHER = Better.LOWER, Better.HIGHER

CATALOG: tuple[Metric, ...] = (
    # by family: the per-step value summed over all ranks and steps, then median and p90 over (rank, step)
    Metric("step_time_ns", "Step time", NS, LOWER, step_column=True),
    Metric("step_time_median_ns", "Median step", NS, LOWER, headline=True, card=True),
    Metric("step_time_p90_ns", "p90 step", NS, LOWER, headline=True, card=True),
    Metric("gpu_busy_frac", "GPU busy", FRAC, HIGHER, headline=True, card=True, step_column=True),
    Metric("gpu_busy_ns", "GPU busy time", NS),
    Metric("gpu_busy_step_median_ns", "GPU busy / step", NS),
    Metric("gpu_busy_step_p90_ns", "GPU busy / step, p90", NS),
    Metric("compute_busy_ns", "Compute busy", NS, step_column=True),
    Metric("compute_busy_step_median_ns", "Compute busy / step", NS, headline=True),
    Metric("compute_busy_step_p90_ns", "Compute busy / step, p90", NS),
    Metric("transfer_busy_ns", "Transfer busy", NS, step_column=True),
    Metric("transfer_busy_step_median_ns", "Transfer busy / step", NS, headline=True),
    Metric("transfer_busy_step_p90_ns", "Transfer busy / step, p90", NS),
    Metric(
        "copy_compute_overlap_frac", "Copy/compute overlap", FRAC, HIGHER, headline=True, card=True, step_column=True
    ),
    Metric("copy_compute_overlap_ns", "Copy/compute overlap time", NS),
    Metric("exposed_copy_ns", "Exposed copy", NS, LOWER, step_column=True),
    Metric("exposed_copy_step_median_ns", "Exposed copy / step", NS, LOWER, headline=True, card=True),
    Metric("exposed_copy_step_p90_ns", "Exposed copy / step, p90", NS, LOWER),
    Metric("gpu_idle_ns", "GPU idle", NS, LOWER, step_column=True),
    Metric("gpu_idle_step_median_ns", "GPU idle / step", NS, LOWER, headline=True, card=True),
    Metric("gpu_idle_step_p90_ns", "GPU idle / step, p90", NS, LOWER),
    # the critical path of each step (webapp.analysis.causal.critical): what the step waited on ("Path: ...")
    Metric("cp_host_ns", "Path: host work", NS, LOWER, step_column=True),
    Metric("cp_host_step_median_ns", "Path: host work / step", NS, LOWER, headline=True, card=True),
    Metric("cp_host_step_p90_ns", "Path: host work / step, p90", NS, LOWER),
    Metric("cp_launch_ns", "Path: launch latency", NS, LOWER),
    Metric("cp_launch_step_median_ns", "Path: launch latency / step", NS, LOWER, headline=True),
    Metric("cp_launch_step_p90_ns", "Path: launch latency / step, p90", NS, LOWER),
    Metric("cp_compute_ns", "Path: GPU compute", NS, step_column=True),
    Metric("cp_compute_step_median_ns", "Path: GPU compute / step", NS, headline=True),
    Metric("cp_compute_step_p90_ns", "Path: GPU compute / step, p90", NS),
    Metric("cp_copy_ns", "Path: copies", NS, LOWER, step_column=True),
    Metric("cp_copy_step_median_ns", "Path: copies / step", NS, LOWER, headline=True),
    Metric("cp_copy_step_p90_ns", "Path: copies / step, p90", NS, LOWER),
    Metric("cp_comm_ns", "Path: communication", NS, LOWER),
    Metric("cp_sync_ns", "Path: sync waits", NS, LOWER, step_column=True),
    Metric("cp_sync_step_median_ns", "Path: sync waits / step", NS, LOWER, headline=True),
    Metric("cp_sync_step_p90_ns", "Path: sync waits / step, p90", NS, LOWER),
    Metric("cp_other_ns", "Path: not attributed", NS, LOWER),
    Metric("sync_wait_count", "Sync waits", COUNT, LOWER, headline=True, step_column=True),
    Metric("sync_wait_ns", "Sync wait", NS, LOWER, step_column=True),
    Metric("sync_wait_step_median_ns", "Sync wait / step", NS, LOWER, headline=True, card=True),
    Metric("sync_wait_step_p90_ns", "Sync wait / step, p90", NS, LOWER),
    Metric("host_issue_ns", "Host issuing", NS, LOWER),
    # GPU ops launched and not finished (webapp.analysis.queue): a deeper queue keeps the GPU fed
    Metric("queue_depth_step_median", "Median queue depth / step", COUNT, HIGHER, headline=True),
    Metric("copy_count", "Copies", COUNT),
    Metric("copy_ns", "Copy time", NS),
    Metric("copy_bytes", "Copy bytes", BYTES),
    Metric("pageable_copy_count", "Pageable copies", COUNT, LOWER),
    Metric("pageable_copy_bytes", "Pageable copy bytes", BYTES, LOWER, headline=True, card=True),
    Metric("pageable_copy_ns", "Pageable copy time", NS, LOWER, headline=True),
    # H2D bandwidth over copies of at least 1 MiB, and what meta.bandwidth_probe measured
    Metric("h2d_pinned_achieved_gbps", "H2D pinned achieved", GBPS, HIGHER, headline=True),
    Metric("h2d_pinned_probe_gbps", "H2D pinned probe", GBPS, headline=True),
    Metric("h2d_pinned_vs_probe_frac", "H2D pinned vs probe", FRAC, HIGHER),
    Metric("h2d_pageable_achieved_gbps", "H2D pageable achieved", GBPS, HIGHER, headline=True),
    Metric("h2d_pageable_probe_gbps", "H2D pageable probe", GBPS),
    # one-time phases: work before the first step and after the last (never per-step cost)
    Metric("setup_ns", "Set-up (before the steps)", NS, headline=True),
    Metric("tail_ns", "Tail (after the steps)", NS, headline=True),
    # the replay (webapp.analysis.causal): its self-check and the recorder's own cost taken out
    Metric("step_time_unrecorded_median_ns", "Unrecorded step (median)", NS, LOWER, headline=True),
    Metric("recorder_call_ns", "Recorder cost per CUDA call", NS),
    Metric("replay_error_max_frac", "Replay error, worst step", FRAC, LOWER),
    # the run's size
    Metric("steps", "Steps", COUNT, card=True),
    Metric("ranks", "Ranks", COUNT, card=True),
    Metric("intervals", "Intervals", COUNT),
)


@lru_cache(maxsize=4)
def _index(entries: tuple[Metric, ...]) -> Mapping[str, Metric]:
    return MappingProxyType({m.key: m for m in entries})


def get(key: str) -> Metric | None:
    """The catalogue entry for ``key``; None for a key it does not know (e.g. from an older analysis)."""
    return _index(CATALOG).get(key)


def headline() -> tuple[Metric, ...]:
    """The entries the text reports list and the compare page shows first, in order."""
    return tuple(m for m in CATALOG if m.headline)


def cards() -> tuple[Metric, ...]:
    """The entries shown as number cards on the run page, in order."""
    return tuple(m for m in CATALOG if m.card)


def label(key: str) -> str:
    """The entry's label; for an unknown key, the key without its unit suffix ("foo_bar_ns" -> "foo bar")."""
    m = get(key)
    if m is not None:
        return m.label
    for unit in Unit:
        if key.endswith("_" + unit.value):
            key = key[: -len(unit.value) - 1]
            break
    return key.replace("_", " ")


def unit_of(key: str) -> Unit:
    """The entry's unit; for an unknown key, the unit its suffix names (COUNT without one)."""
    m = get(key)
    if m is not None:
        return m.unit
    return next((u for u in Unit if key.endswith("_" + u.value)), Unit.COUNT)


def direction(key: str) -> int:
    """-1 when lower is better, +1 when higher is better, 0 when neither or the key is unknown."""
    m = get(key)
    return 0 if m is None else m.sign


def ordered(keys: Iterable[str]) -> list[str]:
    """``keys`` in catalogue order, keys the catalogue does not know last (in their given order)."""
    rank = {m.key: i for i, m in enumerate(CATALOG)}
    return sorted(keys, key=lambda k: rank.get(k, len(rank)))


def to_json() -> list[dict[str, Any]]:
    """The catalogue for pages (``window.STREAMSCOPE.metrics_catalog``): one dict per entry, in order."""
    return [m.to_dict() for m in CATALOG]
