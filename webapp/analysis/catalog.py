"""The metric catalogue: every run metric's label, unit, better direction and where it is shown.

One entry per key of ``RunAnalysis.metrics`` (:func:`webapp.analysis.metrics.run_metrics`; a test keeps
the two in step). The text reports, the run page's cards, the compare page and CLI, and the pages' tables
(through :func:`to_json`) all read it, so a new metric needs a line here and its computation, nothing else.

Catalogue order is display order. Lookups read :data:`CATALOG` when called, so tests can replace it.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, replace
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
    ``gpu``: it measures GPU work, so it is shown only for runs that have some (:func:`gpu_work`).
    ``host_card`` / ``host_step_column``: on runs without GPU work, a headline and card / a step column, in
    place of the GPU ones.
    """

    key: str
    label: str
    unit: Unit
    better: Better | None = None
    headline: bool = False
    card: bool = False
    step_column: bool = False
    gpu: bool = False
    host_card: bool = False
    host_step_column: bool = False
    hint: str = ""
    """What the figure is where its label cannot say (a tooltip on the run page's card)."""

    def shown(self, gpu: bool = True) -> bool:
        """Whether the metric applies to a run with (``gpu``) or without GPU work."""
        return gpu or not self.gpu

    def for_run(self, gpu: bool = True) -> Metric:
        """The entry as a run with (``gpu``) or without GPU work shows it: its roles resolved."""
        if gpu:
            return self
        return replace(
            self,
            headline=(self.headline and not self.gpu) or self.host_card,
            card=(self.card and not self.gpu) or self.host_card,
            step_column=(self.step_column and not self.gpu) or self.host_step_column,
        )

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
PATH_SHARE = (
    "the median step split by this part's share of the critical path over all steps, so that the parts add up "
    "to the median step; each step's own figure is in its per-step row"
)

CATALOG: tuple[Metric, ...] = (
    # by family: the per-step value summed over all ranks and steps, then median and p90 over (rank, step)
    Metric("step_time_ns", "Step time", NS, LOWER, step_column=True),
    Metric("step_time_median_ns", "Median step", NS, LOWER, headline=True, card=True),
    Metric("step_time_p90_ns", "p90 step", NS, LOWER, headline=True, card=True),
    Metric("gpu_busy_frac", "GPU busy", FRAC, HIGHER, headline=True, card=True, step_column=True, gpu=True),
    Metric("gpu_busy_ns", "GPU busy time", NS, gpu=True),
    Metric("gpu_busy_step_median_ns", "GPU busy / step", NS, gpu=True),
    Metric("gpu_busy_step_p90_ns", "GPU busy / step, p90", NS, gpu=True),
    Metric("compute_busy_ns", "Compute busy", NS, step_column=True, gpu=True),
    Metric("compute_busy_step_median_ns", "Compute busy / step", NS, headline=True, gpu=True),
    Metric("compute_busy_step_p90_ns", "Compute busy / step, p90", NS, gpu=True),
    Metric("transfer_busy_ns", "Transfer busy", NS, step_column=True, gpu=True),
    Metric("transfer_busy_step_median_ns", "Transfer busy / step", NS, headline=True, gpu=True),
    Metric("transfer_busy_step_p90_ns", "Transfer busy / step, p90", NS, gpu=True),
    Metric(
        "copy_compute_overlap_frac",
        "Copy/compute overlap",
        FRAC,
        HIGHER,
        headline=True,
        card=True,
        step_column=True,
        gpu=True,
    ),
    Metric("copy_compute_overlap_ns", "Copy/compute overlap time", NS, gpu=True),
    Metric("exposed_copy_ns", "Exposed copy", NS, LOWER, step_column=True, gpu=True),
    Metric("exposed_copy_step_median_ns", "Exposed copy / step", NS, LOWER, headline=True, card=True, gpu=True),
    Metric("exposed_copy_step_p90_ns", "Exposed copy / step, p90", NS, LOWER, gpu=True),
    Metric("gpu_idle_ns", "GPU idle", NS, LOWER, step_column=True, gpu=True),
    Metric("gpu_idle_step_median_ns", "GPU idle / step", NS, LOWER, headline=True, card=True, gpu=True),
    Metric("gpu_idle_step_p90_ns", "GPU idle / step, p90", NS, LOWER, gpu=True),
    # the critical path of each step (webapp.analysis.causal.critical): what the step waited on ("Path: ...");
    # walked through the GPU work, so its host and GPU parts are GPU figures. "/ step": PATH_SHARE
    Metric("cp_host_ns", "Path: host work", NS, LOWER, step_column=True, gpu=True),
    Metric(
        "cp_host_step_median_ns",
        "Path: host work / step",
        NS,
        LOWER,
        headline=True,
        card=True,
        gpu=True,
        hint=PATH_SHARE,
    ),
    Metric("cp_launch_ns", "Path: launch latency", NS, LOWER, gpu=True),
    Metric(
        "cp_launch_step_median_ns", "Path: launch latency / step", NS, LOWER, headline=True, gpu=True, hint=PATH_SHARE
    ),
    Metric("cp_compute_ns", "Path: GPU compute", NS, step_column=True, gpu=True),
    Metric("cp_compute_step_median_ns", "Path: GPU compute / step", NS, headline=True, gpu=True, hint=PATH_SHARE),
    Metric("cp_copy_ns", "Path: copies", NS, LOWER, step_column=True, gpu=True),
    Metric("cp_copy_step_median_ns", "Path: copies / step", NS, LOWER, headline=True, gpu=True, hint=PATH_SHARE),
    Metric("cp_comm_ns", "Path: communication", NS, LOWER, gpu=True),
    Metric("cp_comm_step_median_ns", "Path: communication / step", NS, LOWER, headline=True, gpu=True, hint=PATH_SHARE),
    Metric("cp_sync_ns", "Path: sync waits", NS, LOWER, step_column=True, gpu=True),
    Metric("cp_sync_step_median_ns", "Path: sync waits / step", NS, LOWER, headline=True, gpu=True, hint=PATH_SHARE),
    Metric("cp_other_ns", "Path: not attributed", NS, LOWER, gpu=True),
    Metric(
        "cp_other_step_median_ns", "Path: not attributed / step", NS, LOWER, headline=True, gpu=True, hint=PATH_SHARE
    ),
    Metric("sync_wait_count", "Sync waits", COUNT, LOWER, headline=True, step_column=True, gpu=True),
    Metric("sync_wait_ns", "Sync wait", NS, LOWER, step_column=True, gpu=True),
    Metric("sync_wait_step_median_ns", "Sync wait / step", NS, LOWER, headline=True, card=True, gpu=True),
    Metric("sync_wait_step_p90_ns", "Sync wait / step, p90", NS, LOWER, gpu=True),
    Metric("host_issue_ns", "Host issuing", NS, LOWER),
    # runs without GPU work (CPU ranks): the host's busy time and the collectives, in place of the GPU figures
    Metric("host_busy_ns", "Host busy", NS, host_step_column=True),
    Metric("host_busy_step_median_ns", "Host busy / step", NS, host_card=True),
    Metric("host_busy_step_p90_ns", "Host busy / step, p90", NS),
    Metric("collective_ns", "Collectives", NS, host_step_column=True),
    Metric("collective_step_median_ns", "Collectives / step", NS, headline=True, card=True, host_card=True),
    Metric("collective_step_p90_ns", "Collectives / step, p90", NS),
    # GPU ops launched and not finished (webapp.analysis.queue): a deeper queue keeps the GPU fed
    Metric("queue_depth_step_median", "Median queue depth / step", COUNT, HIGHER, headline=True, gpu=True),
    Metric("copy_count", "Copies", COUNT, gpu=True),
    Metric("copy_ns", "Copy time", NS, gpu=True),
    Metric("copy_bytes", "Copy bytes", BYTES, gpu=True),
    Metric("pageable_copy_count", "Pageable copies", COUNT, LOWER, gpu=True),
    Metric("pageable_copy_bytes", "Pageable copy bytes", BYTES, LOWER, headline=True, card=True, gpu=True),
    Metric("pageable_copy_ns", "Pageable copy time", NS, LOWER, headline=True, gpu=True),
    # H2D bandwidth over copies of at least 1 MiB, and what meta.bandwidth_probe measured
    Metric("h2d_pinned_achieved_gbps", "H2D pinned achieved", GBPS, HIGHER, headline=True, gpu=True),
    Metric("h2d_pinned_probe_gbps", "H2D pinned probe", GBPS, headline=True, gpu=True),
    Metric("h2d_pinned_vs_probe_frac", "H2D pinned vs probe", FRAC, HIGHER, gpu=True),
    Metric("h2d_pageable_achieved_gbps", "H2D pageable achieved", GBPS, HIGHER, headline=True, gpu=True),
    Metric("h2d_pageable_probe_gbps", "H2D pageable probe", GBPS, gpu=True),
    # one-time phases: work before the first step and after the last (never per-step cost)
    Metric("setup_ns", "Set-up (before the steps)", NS, headline=True),
    Metric("tail_ns", "Tail (after the steps)", NS, headline=True),
    # the replay (webapp.analysis.causal): its self-check and the recorder's own cost taken out
    Metric("step_time_unrecorded_median_ns", "Median step, recorder out", NS, LOWER, headline=True),
    Metric("recorder_call_ns", "Recorder cost per CUDA call", NS, gpu=True),
    Metric("replay_error_max_frac", "Replay error, worst step", FRAC, LOWER),
    # the run's size
    Metric("steps", "Steps", COUNT, card=True),
    Metric("ranks", "Ranks", COUNT),  # the run header says it; no card
    Metric("intervals", "Intervals", COUNT),
)


@lru_cache(maxsize=4)
def _index(entries: tuple[Metric, ...]) -> Mapping[str, Metric]:
    return MappingProxyType({m.key: m for m in entries})


def get(key: str) -> Metric | None:
    """The catalogue entry for ``key``; None for a key it does not know (e.g. from an older analysis)."""
    return _index(CATALOG).get(key)


def gpu_work(metrics: Mapping[str, Any]) -> bool:
    """Whether a run has GPU work (kernels, memsets or copies), from its metrics. A run without any (CPU ranks:
    host-run collectives are its only stream work) shows no GPU metric. True when the metrics do not say."""
    keys = ("compute_busy_ns", "transfer_busy_ns")
    if not any(k in metrics for k in keys):
        return True
    return any(float(metrics.get(k) or 0) > 0 for k in keys)


def for_run(gpu: bool = True) -> tuple[Metric, ...]:
    """The entries a run with (``gpu``) or without GPU work shows, roles resolved (:meth:`Metric.for_run`)."""
    return tuple(m.for_run(gpu) for m in CATALOG if m.shown(gpu))


def headline(gpu: bool = True) -> tuple[Metric, ...]:
    """The entries the text reports list and the compare page shows first, in order."""
    return tuple(m for m in for_run(gpu) if m.headline)


def compared_headline(metrics_a: Mapping[str, Any], metrics_b: Mapping[str, Any]) -> tuple[Metric, ...]:
    """The headline entries of a comparison, in order: a GPU run's, a run without GPU work's, or, when one run
    has GPU work and the other not, both sets (each run's own figures side by side)."""
    gpu_a, gpu_b = gpu_work(metrics_a), gpu_work(metrics_b)
    keys = {m.key for g in {gpu_a, gpu_b} for m in headline(g)}
    return tuple(m for m in CATALOG if m.key in keys)


def cards(gpu: bool = True) -> tuple[Metric, ...]:
    """The entries shown as number cards on the run page, in order."""
    return tuple(m for m in for_run(gpu) if m.card)


def step_columns(gpu: bool = True) -> tuple[Metric, ...]:
    """The entries shown as columns of the per-step table, in order."""
    return tuple(m for m in for_run(gpu) if m.step_column)


def shown(key: str, gpu: bool = True) -> bool:
    """Whether metric ``key`` is shown for a run with (``gpu``) or without GPU work (unknown keys are)."""
    m = get(key)
    return m is None or m.shown(gpu)


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


def to_json(gpu: bool = True) -> list[dict[str, Any]]:
    """The catalogue for pages (``window.STREAMSCOPE.metrics_catalog``): one dict per entry a run with
    (``gpu``) or without GPU work shows, its roles resolved, in order."""
    return [m.to_dict() for m in for_run(gpu)]
