"""The host-to-device handoff of one run: which CPU interval queued which GPU op, which GPU work a sync
waited for, and each stream's queue (webapp.analysis.queue).

:class:`Handoff` is built once per run from its :class:`~webapp.analysis.lod.RunIndex` (rows sorted by
lane then start_ns) and the run's ``launch_id`` column in the same row order; all lookups are
``searchsorted`` over arrays sorted at build time. Rows and times here are the index's (ns, run clock).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from collector.model import GPU_KINDS, KIND_CODE, IntervalKind
from webapp.analysis.lod import RunIndex
from webapp.analysis.queue import LaneQueue, enqueue_times

GPU_CODES = np.asarray([KIND_CODE[k] for k in GPU_KINDS], dtype=np.int8)
SYNC_CODE = KIND_CODE[IntervalKind.SYNC_WAIT]
MAX_LINKS = 200
"""At most this many linked intervals per answer (a launch that queued more lists the first ones)."""


@dataclass(frozen=True)
class Link:
    """One arrow of the timeline: ``src_row`` (host side) -> ``dst_row`` (GPU side), index rows.

    ``relation`` is ``launch`` (src queued dst) or ``waited`` (the sync wait src waited for dst to end);
    ``delay_ns`` is the queueing delay, launch end -> GPU start (``launch``), or GPU end -> sync end
    (``waited``), ns (negative when the GPU started before the launch call returned)."""

    src_row: int
    dst_row: int
    relation: str
    delay_ns: int


class Handoff:
    """Launch links, sync-wait links and per-stream queues of one run.

    ``launch_row[r]``: row of the CPU interval that queued row r (-1 if none); ``enqueue_ns[r]``: when a
    GPU row joined its stream's queue (webapp.analysis.queue.enqueue_times); ``queues[lane]``: the
    LaneQueue of each GPU lane that holds work.
    """

    def __init__(self, index: RunIndex, launch_id: np.ndarray) -> None:
        ids = np.asarray(index.columns.id, dtype=np.int64)
        self.index = index
        self._id_order = np.argsort(ids, kind="stable")
        self._ids_sorted = ids[self._id_order]
        self.launch_row = self.rows_of_ids(np.asarray(launch_id, dtype=np.int64))
        self.gpu = np.isin(index.kind, GPU_CODES)
        self.enqueue_ns = enqueue_times(index.start, np.where(self.gpu, self.launch_row, -1), index.end)
        linked = np.flatnonzero(self.launch_row >= 0)
        by_launch = np.argsort(self.launch_row[linked], kind="stable")
        self._launched = linked[by_launch]  # GPU rows, sorted by the row of their launch
        self._launched_by = self.launch_row[self._launched]
        self.queues: dict[int, LaneQueue] = {}
        for lane, (lo, hi) in enumerate(index.lane_bounds):
            if index.lanes[lane].kind.is_gpu and hi > lo:
                self.queues[lane] = LaneQueue.build(self.enqueue_ns[lo:hi], index.end[lo:hi])
        # GPU rows of each rank sorted by end, for "which work did this sync wait for"
        gpu_rows = np.flatnonzero(self.gpu)
        lane_rank = np.asarray([ln.rank for ln in index.lanes], dtype=np.int64)
        row_lane = np.repeat(np.arange(len(index.lanes)), [hi - lo for lo, hi in index.lane_bounds])
        self.row_rank = lane_rank[row_lane] if len(row_lane) else np.zeros(0, np.int64)
        self.row_lane = row_lane
        key = np.lexsort((index.end[gpu_rows], self.row_rank[gpu_rows]))
        self._gpu_by_end = gpu_rows[key]

    def rows_of_ids(self, ids: np.ndarray) -> np.ndarray:
        """Index row of each interval id (-1 for an unknown id or -1)."""
        ids = np.asarray(ids, dtype=np.int64)
        n = len(self._ids_sorted)
        if not n:
            return np.full(len(ids), -1, dtype=np.int64)
        pos = np.minimum(np.searchsorted(self._ids_sorted, ids), n - 1)
        return np.where((self._ids_sorted[pos] == ids) & (ids >= 0), self._id_order[pos], -1)

    def launched_by(self, row: int) -> np.ndarray:
        """GPU rows (and a sync's own copies) queued by the CPU interval at ``row``, in row order."""
        a = int(np.searchsorted(self._launched_by, row, side="left"))
        b = int(np.searchsorted(self._launched_by, row, side="right"))
        return np.sort(self._launched[a:b])

    def waited_for(self, row: int) -> int:
        """The GPU row a sync wait at ``row`` waited for: of its rank's GPU work that was unfinished when
        the wait began, the one that ended last, at or before the wait's end; -1 if none."""
        ix = self.index
        rank, s, e = int(self.row_rank[row]), int(ix.start[row]), int(ix.end[row])
        ends_rank = self.row_rank[self._gpu_by_end]
        lo = int(np.searchsorted(ends_rank, rank, side="left"))
        hi = int(np.searchsorted(ends_rank, rank, side="right"))
        ends = ix.end[self._gpu_by_end[lo:hi]]
        j = int(np.searchsorted(ends, e, side="right")) - 1
        if j < 0 or ends[j] <= s:
            return -1
        return int(self._gpu_by_end[lo + j])

    def links(self, row: int) -> list[Link]:
        """Every arrow touching ``row``: to its launch (GPU row), to what it queued (CPU row), and to the
        GPU work it waited for (sync wait)."""
        ix = self.index
        out: list[Link] = []
        lr = int(self.launch_row[row])
        if self.gpu[row] and lr >= 0:
            out.append(Link(lr, row, "launch", int(ix.start[row] - ix.end[lr])))
        for g in self.launched_by(row)[:MAX_LINKS]:
            out.append(Link(row, int(g), "launch", int(ix.start[g] - ix.end[row])))
        if ix.kind[row] == SYNC_CODE:
            w = self.waited_for(row)
            if w >= 0 and all(link.dst_row != w for link in out):
                out.append(Link(row, w, "waited", int(ix.end[row] - ix.end[w])))
        return out
