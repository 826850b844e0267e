"""Level of detail for the timeline: what the browser draws for one visible window and pixel width.

For each lane, intervals at least ``px_ns`` long (one pixel, or coarser when needed to stay under the
box budget) are sent as they are; narrower ones are merged into *busy* boxes: a run of narrow intervals
whose gaps are under ``px_ns`` becomes one box carrying how many intervals it holds and how much of it is
busy. A busy box's ``busy_ns`` is exactly the length of the union of its members (clipped to the window),
so the merged boxes of a lane cover exactly the busy time of its narrow intervals. Zooming in refines.

Everything is vectorized numpy over the visible slice of pre-sorted per-lane arrays (found with
``searchsorted``); :class:`RunIndex` holds those arrays for one run and is built once per run.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from collector.model import (
    COPY_KINDS,
    KIND_CODE,
    KIND_NAMES,
    IntervalKind,
    Lane,
    MarkerKind,
    RunMeta,
    Trace,
)
from webapp.analysis import intervals as iv
from webapp.analysis.lodboxes import MAX_BOXES_PER_LANE, LaneLod, lod_lane, window_slice
from webapp.analysis.lodcoarse import Coarse, gap_order, runs
from webapp.analysis.lodlevel import Level

MAX_BOXES_PER_VIEW = 10_000
RAW_LIMIT = 50_000
"""Windows with more intervals than this on a lane use the precomputed prefix arrays (Coarse), which lanes
longer than this have: a whole-run view then costs well under a millisecond per lane."""
_N_KINDS = len(KIND_NAMES)
_COMPUTE_KINDS = (IntervalKind.KERNEL.value, IntervalKind.MEMSET.value, IntervalKind.COLLECTIVE.value)


@dataclass(frozen=True)
class RowColumns:
    """Per-row columns a timeline payload reads, in the index's row order: category codes with their
    categories (``name``, ``source``; code -1 = missing), ``memory_kind`` codes (MEMORY_KIND_DTYPE),
    ``id``, ``bytes`` and ``step``."""

    name: np.ndarray
    name_cats: np.ndarray  # object array of str
    source: np.ndarray
    source_cats: np.ndarray
    memory_kind: np.ndarray
    id: np.ndarray
    bytes: np.ndarray
    step: np.ndarray

    @classmethod
    def from_frame(cls, frame: pd.DataFrame) -> RowColumns:
        def cats(col: str) -> np.ndarray:
            return np.asarray([str(c) for c in frame[col].cat.categories], dtype=object)

        return cls(
            name=frame["name"].cat.codes.to_numpy(),
            name_cats=cats("name"),
            source=frame["source"].cat.codes.to_numpy(),
            source_cats=cats("source"),
            memory_kind=frame["memory_kind"].cat.codes.to_numpy(),
            id=frame["id"].to_numpy(),
            bytes=frame["bytes"].to_numpy(),
            step=frame["step"].to_numpy(),
        )


class RunIndex:
    """Per-lane sorted arrays of one run, built once, for fast level-of-detail views.

    ``frame`` is the run DataFrame sorted by lane then start_ns (rows of LaneLod index into it);
    ``columns`` the per-row columns a view payload reads, without the DataFrame.
    ``exposed[rank]`` holds the windows where copies run and no compute does (sorted, disjoint).
    :attr:`level` folds runs of short intervals for wide windows (webapp.analysis.lodlevel).
    """

    meta: RunMeta
    lanes: tuple[Lane, ...]
    markers: pd.DataFrame
    start: np.ndarray
    end: np.ndarray
    kind: np.ndarray
    cummax: np.ndarray
    columns: RowColumns
    lane_bounds: list[tuple[int, int]]
    coarse: list[Coarse | None]
    origin_ns: int
    end_ns: int
    exposed: dict[int, tuple[np.ndarray, np.ndarray]]
    exposed_gaps: dict[int, tuple[np.ndarray, np.ndarray]]  # gap_order of the ranks with many windows
    _level: Level | None

    def __init__(self, trace: Trace) -> None:
        frame = trace.intervals
        lanes = frame["lane"].to_numpy()
        starts = frame["start_ns"].to_numpy()
        if len(frame) and not (np.all(np.diff(lanes) >= 0) and _sorted_within(lanes, starts)):
            frame = frame.sort_values(["lane", "start_ns"], kind="stable").reset_index(drop=True)
        self._setup(trace.meta, trace.lanes, trace.markers, Trace(trace.meta, trace.lanes, frame, trace.markers))
        self.start = frame["start_ns"].to_numpy(dtype=np.int64)
        self.end = frame["end_ns"].to_numpy(dtype=np.int64)
        self.kind = frame["kind"].cat.codes.to_numpy().astype(np.int8)
        self.columns = RowColumns.from_frame(frame)
        lane_col = frame["lane"].to_numpy()
        bounds = np.searchsorted(lane_col, np.arange(len(trace.lanes) + 1), side="left")
        self.lane_bounds = [(int(bounds[i]), int(bounds[i + 1])) for i in range(len(trace.lanes))]
        self.cummax = np.empty_like(self.end)
        self.coarse = []
        for lo, hi in self.lane_bounds:
            if hi > lo:
                self.cummax[lo:hi] = np.maximum.accumulate(self.end[lo:hi])
            self.coarse.append(Coarse.build(self, lo, hi) if hi - lo > RAW_LIMIT else None)
        self.origin_ns = int(self.start.min()) if len(frame) else 0
        self.end_ns = int(self.end.max()) if len(frame) else 0
        self._level = self._build_level()
        self.exposed = self._exposed_copies()
        self.exposed_gaps = {r: gap_order(s[1:], e[:-1]) for r, (s, e) in self.exposed.items() if len(s) > RAW_LIMIT}

    def _setup(
        self,
        meta: RunMeta,
        lanes: tuple[Lane, ...],
        markers: pd.DataFrame,
        trace: Trace | None,
        load_trace: Callable[[], Trace] | None = None,
    ) -> None:
        self.meta, self.lanes, self.markers = meta, lanes, markers
        self._trace, self._load_trace = trace, load_trace
        self._read_rows: Callable[[np.ndarray], pd.DataFrame] | None = None
        self._trace_lock = threading.Lock()
        self._steps: pd.DataFrame | None = None

    @classmethod
    def from_arrays(
        cls,
        meta: RunMeta,
        lanes: tuple[Lane, ...],
        markers: pd.DataFrame,
        *,
        start: np.ndarray,
        end: np.ndarray,
        kind: np.ndarray,
        cummax: np.ndarray,
        lane_bounds: list[tuple[int, int]],
        columns: RowColumns,
        coarse: dict[int, tuple[np.ndarray, ...]],
        exposed: dict[int, tuple[np.ndarray, np.ndarray]],
        exposed_gaps: dict[int, tuple[np.ndarray, np.ndarray]],
        load_trace: Callable[[], Trace],
        read_rows: Callable[[np.ndarray], pd.DataFrame] | None = None,
        level: Level | None = None,
    ) -> RunIndex:
        """An index from arrays saved by webapp.index_files.save_index (memory-mapped ``.npy`` files).

        ``coarse[lane]`` holds (busy_cum, kinds, kind_cum, gap_order, gap_neg_sorted) of each long lane,
        ``exposed_gaps[rank]`` gap_order() of the ranks with many exposed windows;
        ``load_trace`` reads the full run (sorted like the arrays) the first time :attr:`trace` is asked;
        ``read_rows(positions)`` reads only the run's rows at these positions (for :meth:`rows_of_ids`);
        ``level`` is built on first use when not given (an index saved before levels).
        """
        self = cls.__new__(cls)
        self._setup(meta, lanes, markers, None, load_trace)
        self._read_rows = read_rows
        self.start, self.end, self.kind, self.cummax = start, end, kind, cummax
        self.columns = columns
        self.lane_bounds = [(int(lo), int(hi)) for lo, hi in lane_bounds]
        self.coarse = [
            Coarse(lo, self, *coarse[i]) if i in coarse else None for i, (lo, _) in enumerate(self.lane_bounds)
        ]
        self.origin_ns = int(start.min()) if len(start) else 0  # whole-array reductions: a few ms
        self.end_ns = int(end.max()) if len(end) else 0
        self.exposed, self.exposed_gaps = exposed, dict(exposed_gaps)
        self._level = level
        return self

    @property
    def level(self) -> Level:
        """The folds of runs of short intervals that wide windows draw from (webapp.analysis.lodlevel)."""
        if self._level is None:  # two threads may both build it: the same arrays
            self._level = self._build_level()
        return self._level

    def _build_level(self) -> Level:
        return Level.build(self.start, self.end, self.kind, self.lane_bounds, self.end_ns - self.origin_ns)

    @property
    def trace(self) -> Trace:
        """The run (intervals sorted by lane then start_ns); read on first use for a saved index."""
        if self._trace is None:
            with self._trace_lock:
                if self._trace is None and self._load_trace is not None:
                    self._trace = self._load_trace()
        if self._trace is None:
            raise RuntimeError("this index has no run to read")
        return self._trace

    @property
    def frame(self) -> pd.DataFrame:
        """The run DataFrame sorted by lane then start_ns (LaneLod rows index into it)."""
        return self.trace.intervals

    def rows_of_ids(self, ids: list[int]) -> pd.DataFrame:
        """Full rows (INTERVAL_COLUMNS) of the intervals with these ids, in row order; a saved index
        reads only the parts of the run file that hold them."""
        if self._trace is None and self._read_rows is not None:
            return self._read_rows(np.flatnonzero(np.isin(self.columns.id, np.asarray(ids, dtype=np.int64))))
        frame = self.frame
        return frame[frame["id"].isin(ids)]

    def _exposed_copies(self) -> dict[int, tuple[np.ndarray, np.ndarray]]:
        copy_table = np.zeros(_N_KINDS, dtype=bool)
        copy_table[[KIND_CODE[k] for k in COPY_KINDS]] = True
        compute_table = np.zeros(_N_KINDS, dtype=bool)
        compute_table[[KIND_CODE[k] for k in _COMPUTE_KINDS]] = True
        per_rank: dict[int, list[list[np.ndarray]]] = {}
        for lane, (lo, hi) in zip(self.lanes, self.lane_bounds, strict=True):
            if not lane.kind.is_gpu or hi == lo:
                continue
            s, e, k = self.start[lo:hi], self.end[lo:hi], self.kind[lo:hi]
            parts = per_rank.setdefault(lane.rank, [[], [], [], []])
            for offset, table in ((0, copy_table), (2, compute_table)):
                mask = table[k]
                seg = iv.union(s[mask], e[mask])
                parts[offset].append(seg.starts)
                parts[offset + 1].append(seg.ends)
        out: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        for rank, (cs, ce, ks, ke) in per_rank.items():
            copies = iv.union(np.concatenate(cs), np.concatenate(ce))
            compute = iv.union(np.concatenate(ks), np.concatenate(ke))
            exposed = iv.complement_in(copies, compute)
            out[rank] = (exposed.starts, exposed.ends)
        return out

    def lane(
        self, lane: int, t0: int, t1: int, width_px: int, cap: int = MAX_BOXES_PER_LANE, raw_limit: int | None = None
    ) -> LaneLod:
        """Boxes of one lane. Windows holding more than ``raw_limit`` (default RAW_LIMIT) intervals use
        the precomputed prefix arrays (cost: one compare over the slice plus work per box); smaller ones
        the exact wide/narrow split of :func:`lod_lane`, drawn from the :attr:`level`'s folds when the window
        is wide enough (the same boxes, work per fold instead of per interval)."""
        lo, hi = self.lane_bounds[lane]
        cm = self.cummax[lo:hi]
        i0, i1 = window_slice(self.start[lo:hi], cm, t0, t1)
        coarse = self.coarse[lane] if lane < len(self.coarse) else None
        if i1 - i0 > (RAW_LIMIT if raw_limit is None else raw_limit):
            coarse = coarse or Coarse.build(self, lo, hi)
            return coarse.view(lane, lo + i0, lo + i1, t0, t1, width_px, cap)
        folded = self.level.lane(lane, (self.start, self.end, self.kind), (lo + i0, lo + i1), t0, t1, width_px, cap)
        if folded is not None:
            return folded
        out = lod_lane(lane, self.start[lo:hi], self.end[lo:hi], self.kind[lo:hi], cm, t0, t1, width_px, cap)
        return replace(out, rows=out.rows + lo)

    def view(
        self,
        t0: int,
        t1: int,
        width_px: int,
        lanes: list[int] | None = None,
        max_per_lane: int = MAX_BOXES_PER_LANE,
        max_per_view: int = MAX_BOXES_PER_VIEW,
    ) -> list[LaneLod]:
        """Boxes for every lane (or ``lanes``) in [t0, t1): at most ``max_per_lane`` per lane and
        ``max_per_view`` in all, shared by need: each lane is drawn at the view's resolution first, and only
        when all of them together pass ``max_per_view`` are the lanes that need the most coarsened, to one
        common cap (:func:`water_level`); a lane that needs few boxes leaves the rest to the others."""
        if t1 <= t0:
            raise ValueError("the window is empty: end_ns must be greater than start_ns")
        if width_px < 1:
            raise ValueError("width_px must be at least 1")
        chosen = list(range(len(self.lanes))) if lanes is None else lanes
        first = [self.lane(i, t0, t1, width_px, max_per_lane) for i in chosen]
        need = np.array([x.n_boxes for x in first], dtype=np.int64)
        if need.sum() <= max_per_view:
            return first
        cap = water_level(need, max_per_view)
        return [
            x if x.n_boxes <= cap else self.lane(i, t0, t1, width_px, cap) for i, x in zip(chosen, first, strict=True)
        ]

    def exposed_view(
        self, rank: int, t0: int, t1: int, width_px: int, cap: int = 1000
    ) -> tuple[np.ndarray, np.ndarray]:
        """Exposed-copy windows of ``rank`` in [t0, t1), sub-pixel ones merged, at most ``cap``."""
        s, e = self.exposed.get(rank, (np.zeros(0, np.int64), np.zeros(0, np.int64)))
        if len(s) == 0:
            return s, e
        a, b = window_slice(s, e, t0, t1)  # disjoint and sorted: ends are increasing
        if b - a > RAW_LIMIT:  # many windows: boxes are the runs between gaps of at least one pixel
            gaps = self.exposed_gaps.get(rank)
            if gaps is None:
                gaps = self.exposed_gaps.setdefault(rank, gap_order(s[1:], e[:-1]))
            px = max(1.0, (t1 - t0) / max(1, width_px), (t1 - t0) / max(1, cap - 1))
            first, last = runs(gaps, a, b, px, lambda: s[a + 1 : b] - e[a : b - 1])
            return np.maximum(s[first], t0), np.minimum(e[last], t1)
        cm = e
        lod = lod_lane(-1, s, e, np.zeros(len(s), np.int8), cm, t0, t1, width_px, cap)
        bs = np.concatenate([lod.start_ns, lod.busy_start_ns])
        be = np.concatenate([lod.end_ns, lod.busy_end_ns])
        order = np.argsort(bs, kind="stable")
        return np.maximum(bs[order], t0), np.minimum(be[order], t1)

    def steps(self, rank: int | None = None) -> pd.DataFrame:
        """Step markers (rank, step, start_ns, end_ns), optionally of one rank."""
        steps = self._steps
        if steps is None:  # once per index
            m = self.markers
            steps = m[m["kind"] == MarkerKind.STEP.value][["rank", "step", "start_ns", "end_ns"]]
            steps = self._steps = steps.sort_values(["rank", "step"]).reset_index(drop=True)
        return steps if rank is None else steps[steps["rank"] == rank].reset_index(drop=True)


def water_level(need: np.ndarray, total: int) -> int:
    """The largest cap ``c`` (at least 1) with ``sum(min(need, c)) <= total``: lanes needing at most ``c``
    boxes keep them all, the others get ``c`` each."""
    s = np.sort(need)
    n = len(s)
    below = np.concatenate([[0], np.cumsum(s)[:-1]])  # boxes of the lanes before position k
    caps = (total - below) // np.maximum(1, n - np.arange(n))  # cap if lanes k.. are the capped ones
    hit = np.flatnonzero(caps < s)
    return max(1, int(caps[hit[0]]) if len(hit) else int(s[-1]))


def _sorted_within(lanes: np.ndarray, starts: np.ndarray) -> bool:
    same = lanes[1:] == lanes[:-1]
    return bool(np.all(starts[1:][same] >= starts[:-1][same]))
