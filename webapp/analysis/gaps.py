"""GPU idle gaps inside steps, each attributed to one cause.

A gap is a stretch of a step in which no GPU stream of the rank runs anything. Its cause, checked in
this order (vectorized over all gaps):

``QUEUED``    the GPU work that ends the gap had been launched before the gap began: the device waited
              on itself (scheduling bubble, cross-stream dependency), not on the host.
``BLOCKING``  the gap follows a blocking host-to-device copy (or is SYNC-like with a copy's own wait):
              the host sat in the copy and only then issued the next work.
``SYNC``      the gap overlaps a host ``sync_wait``, or a sync in this or the previous step drained the
              queue and the host has been issuing just in time since (the work ending the gap was
              launched during it) -- unless the host needs longer to issue a step than the GPU to run it.
``STARVED``   the host was issuing the work that ends the gap while the GPU idled: launch-bound. A gap ended
              by work launched during it counts when it is short next to the host's launch cadence
              (ISSUE_CADENCES); longer ones when the host was busy in launches or ops for most of it.
``HOST``      the host was doing something else (Python, data loading, unrecorded work).

Without a launch link (``launch_id`` -1) "queued" cannot be known: gaps shorter than BUBBLE_NS count as
QUEUED, longer ones go by what the host was doing during the gap.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from collector.model import IntervalKind
from webapp.analysis import intervals as iv
from webapp.analysis.context import COPY_SYNC_CAUSES, RunData

QUEUED, BLOCKING, SYNC, STARVED, HOST = range(5)

BUBBLE_NS = 5_000
"""Gaps under 5 us between GPU ops are normal launch/scheduling latency on current GPUs (measured:
events resolve ~1 us, a launch costs several us); without launch links they are not blamed on the host."""

LONG_GAP_NS = 50_000
"""A launch costs ~5-10 us of host time; a single gap of 50 us or more is not launch overhead but the
host doing other work, unless it was busy issuing ops for most of the gap."""

CLOCK_SLACK_NS = 100_000
"""Host and GPU times agree to within tens of us (in the H200 samples a blocking copy's host wait ends ~30 us
before its copy does): a host wait ending this little before a GPU event still counts as covering it."""

ISSUE_CADENCES = 10
"""A linked gap up to this many times the host's median time between launches is still the host issuing
work (Python and dispatcher time between ops, which a CUPTI trace does not cover with host intervals)."""

HOST_BUSY_FRAC = 0.5
"""A gap counts as launch-bound (without a launch link) when the host issued work for at least half of it."""


@dataclass(frozen=True)
class Gaps:
    """Idle gaps on the shared axis. ``sync_row`` is the sync_wait row a SYNC/BLOCKING gap is blamed on
    (-1 if none); ``win`` the step window; ``next_row`` the GPU interval that ends the gap (-1: none)."""

    s: np.ndarray
    e: np.ndarray
    win: np.ndarray
    cause: np.ndarray
    sync_row: np.ndarray
    next_row: np.ndarray

    @property
    def length(self) -> np.ndarray:
        return self.e - self.s

    def per_window(self, n_windows: int, mask: np.ndarray) -> np.ndarray:
        return np.bincount(self.win[mask], weights=self.length[mask].astype(np.float64), minlength=n_windows).astype(
            np.int64
        )


def blocked_copies(rd: RunData) -> np.ndarray:
    """Rows of host-to-device copies that blocked the host: not ``non_blocking`` and either pageable or
    ending while the host waits in a sync."""
    df = rd.trace.intervals
    h2d = rd.kind == rd.code(IntervalKind.MEMCPY_H2D)
    nb = np.asarray(df["non_blocking"], dtype=bool)
    rows = np.flatnonzero(h2d & ~nb)
    if not len(rows):
        return rows
    waiting = rd.sync.measure_in(rd.e[rows] - CLOCK_SLACK_NS, rd.e[rows]) > 0
    pageable = rd.mem[rows] == rd.mem_code("pageable")
    return rows[waiting | pageable]


def find_gaps(rd: RunData, blocked: np.ndarray) -> Gaps:
    """All GPU idle gaps inside step windows, with causes."""
    idle, win, seg = iv.complement_index(rd.win, rd.gpu)  # seg: the GPU busy segment that ends the gap
    gs, ge = idle.starts, idle.ends
    n = len(gs)
    has_next = seg < len(rd.gpu)
    next_row = np.where(has_next, rd.gpu_first[np.minimum(seg, max(len(rd.gpu) - 1, 0))] if len(rd.gpu) else -1, -1)
    prev_seg = seg - 1
    prev_end = np.where(prev_seg >= 0, rd.gpu.ends[np.maximum(prev_seg, 0)] if len(rd.gpu) else 0, -1)
    df = rd.trace.intervals
    launch_ids = np.asarray(df["launch_id"], dtype=np.int64)
    cause = np.full(n, HOST, dtype=np.int8)
    undecided = np.ones(n, dtype=bool)

    # QUEUED: the ending work was launched before the gap began (or an unlinked gap is a short bubble)
    lrow = np.full(n, -1, dtype=np.int64)
    lrow[has_next] = rd.rows_of_ids(launch_ids[next_row[has_next]])
    linked = lrow >= 0
    launch_end = np.where(linked, rd.e[np.maximum(lrow, 0)], 0)
    queued = (linked & (launch_end <= gs)) | (~linked & (ge - gs < BUBBLE_NS))
    cause[queued] = QUEUED
    undecided &= ~queued

    # BLOCKING: the GPU segment before the gap ended with a blocking copy
    sync_row = np.full(n, -1, dtype=np.int64)
    if len(blocked):
        bend = np.sort(rd.e[blocked])
        pos = np.minimum(np.searchsorted(bend, prev_end), len(bend) - 1)
        after_block = undecided & (bend[pos] == prev_end)
        cause[after_block] = BLOCKING
        undecided &= ~after_block

    # SYNC: the gap overlaps a host sync wait (a copy's own wait counts as BLOCKING)
    srows = np.flatnonzero(rd.sync_mask)
    codes, cats = rd.codes_of("cause")
    is_copy_cause = np.array([c in COPY_SYNC_CAUSES for c in cats] + [False])
    if len(srows) and undecided.any():
        by_start = srows[np.argsort(rd.s[srows], kind="stable")]
        ss, se = rd.s[by_start], rd.e[by_start]
        run = np.maximum.accumulate(se)
        owner = np.maximum.accumulate(np.where(se >= run, np.arange(len(se)), 0))
        # blame the wait in progress when the GPU went idle (it drained the queue), else the first one
        # that began during the gap
        j = np.searchsorted(ss, gs, side="right") - 1
        in_progress = (j >= 0) & (run[np.maximum(j, 0)] > gs - CLOCK_SLACK_NS)
        j1 = np.minimum(j + 1, len(ss) - 1)
        began = (j + 1 < len(ss)) & (ss[j1] < ge)
        hit = undecided & (in_progress | began)
        row = np.where(in_progress, by_start[owner[np.maximum(j, 0)]], by_start[j1])
        sync_row = np.where(hit, row, -1)
        cause[hit] = np.where(is_copy_cause[codes[row[hit]]], BLOCKING, SYNC)
        undecided &= ~hit

    # DRAIN: a sync in this or the previous step emptied the GPU queue, and the work that ends the gap was
    # issued during the gap: the host never got ahead again. Without the sync the host would run ahead and
    # the gap would not exist -- unless the host needs longer to issue a step than the GPU needs to run it
    # (then the step is launch-bound either way).
    if len(srows) and undecided.any():
        by_end = srows[np.argsort(rd.e[srows], kind="stable")]
        ee = rd.e[by_end]
        k = np.searchsorted(ee, ge, side="right") - 1
        swin = iv.window_index(rd.win, ee[np.maximum(k, 0)])
        a, b = rd.win.starts, rd.win.ends
        host_bound = (rd.host.measure_in(a, b) - rd.sync.measure_in(a, b)) >= rd.gpu.measure_in(a, b)
        recent = (k >= 0) & (swin >= 0) & (win >= 0) & (swin >= win - 1) & (swin <= win)
        recent &= rd.win_rank[np.maximum(swin, 0)] == rd.win_rank[np.maximum(win, 0)]
        drained = undecided & recent & ~host_bound[np.maximum(win, 0)]
        row = by_end[np.maximum(k, 0)]
        sync_row = np.where(drained, row, sync_row)
        cause[drained] = np.where(is_copy_cause[codes[row[drained]]], BLOCKING, SYNC)
        undecided &= ~drained

    # STARVED: short linked gaps ended by work issued during the gap; long or unlinked gaps only when the
    # host was issuing work (launch, cpu_op) for most of the gap, else HOST
    if undecided.any():
        u = np.flatnonzero(undecided)
        starved = linked[u].copy()
        long_gap = max(LONG_GAP_NS, ISSUE_CADENCES * issue_cadence_ns(rd))
        check = ~linked[u] | (ge[u] - gs[u] >= long_gap)
        if check.any():
            a, b = gs[u[check]], ge[u[check]]
            issuing = rd.host.measure_in(a, b) - rd.sync.measure_in(a, b)
            starved[check] = issuing >= HOST_BUSY_FRAC * (b - a)
        cause[u[starved]] = STARVED
    return Gaps(gs, ge, win, cause, sync_row, next_row)


def issue_cadence_ns(rd: RunData) -> float:
    """Median time between consecutive launches on the host (host ops when no launches were recorded), ns;
    0 with fewer than two."""
    rows = np.flatnonzero(rd.kind == rd.code(IntervalKind.LAUNCH))
    if len(rows) < 2:
        rows = np.flatnonzero(rd.kind == rd.code(IntervalKind.CPU_OP))
    if len(rows) < 2:
        return 0.0
    return float(np.median(np.diff(np.sort(rd.s[rows]))))
