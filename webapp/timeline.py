"""Timeline slices as JSON-ready dicts: the level-of-detail boxes of every lane for one window.

Times in the payload are nanoseconds relative to the run's first interval (``origin_ns``), so they stay
small and exact in JavaScript numbers. Per lane, single intervals come as parallel arrays (``s`` start,
``d`` duration, ``k`` kind code, ``n`` name index, ``id``, ``b`` bytes, ``m`` memory kind code, ``src``
source index, ``st`` step) and merged busy boxes as ``bs``, ``bd``, ``bk``, ``bn`` (member count) and
``bb`` (busy ns).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from collector.model import KIND_NAMES, MEMORY_KIND_DTYPE
from webapp.analysis.lod import MAX_BOXES_PER_LANE, MAX_BOXES_PER_VIEW, RunIndex

MEMORY_KINDS: tuple[str, ...] = tuple(MEMORY_KIND_DTYPE.categories)
MAX_WIDTH_PX = 10_000
OVERVIEW_WIDTH_PX = 1600
MAX_STEP_MARKS = 400


def _codes(all_codes: np.ndarray, cats: np.ndarray, rows: np.ndarray) -> tuple[list[int], list[str]]:
    """Category codes of ``rows`` remapped onto the few categories they use."""
    codes = all_codes[rows]
    used, inverse = np.unique(codes, return_inverse=True)
    return inverse.astype(np.int64).tolist(), [str(cats[c]) if c >= 0 else "" for c in used]


def view_payload(
    index: RunIndex,
    t0: int,
    t1: int,
    width_px: int,
    *,
    rank: int | None = None,
    ranks: frozenset[int] | None = None,
    max_per_lane: int = MAX_BOXES_PER_LANE,
    max_per_view: int = MAX_BOXES_PER_VIEW,
) -> dict[str, Any]:
    """Everything the timeline draws for [t0, t1) (absolute ns) at ``width_px`` pixels: the lanes of ``rank``
    (all by default) that belong to ``ranks`` (all by default; the ranks the page shows expanded)."""
    lanes = [
        i
        for i, ln in enumerate(index.lanes)
        if (rank is None or ln.rank == rank) and (ranks is None or ln.rank in ranks)
    ]
    lods = index.view(t0, t1, width_px, lanes, max_per_lane, max_per_view)
    cols, origin = index.columns, index.origin_ns
    all_rows = np.concatenate([x.rows for x in lods]) if lods else np.zeros(0, np.int64)
    name_idx, names = _codes(cols.name, cols.name_cats, all_rows)
    src_idx, sources = _codes(cols.source, cols.source_cats, all_rows)
    ids = cols.id[all_rows]
    nbytes = cols.bytes[all_rows]
    mem = cols.memory_kind[all_rows]
    steps = cols.step[all_rows]
    out_lanes = []
    pos = 0
    for lod in lods:
        n = len(lod.rows)
        sl = slice(pos, pos + n)
        pos += n
        lane = index.lanes[lod.lane]
        out_lanes.append(
            {
                "lane": lod.lane,
                "rank": lane.rank,
                "kind": lane.kind.value,
                "label": lane.label,
                "px_ns": lod.px_ns,
                "s": (lod.start_ns - origin).tolist(),
                "d": (lod.end_ns - lod.start_ns).tolist(),
                "k": lod.kind.tolist(),
                "n": name_idx[sl],
                "src": src_idx[sl],
                "id": ids[sl].tolist(),
                "b": nbytes[sl].tolist(),
                "m": mem[sl].tolist(),
                "st": steps[sl].tolist(),
                "bs": (lod.busy_start_ns - origin).tolist(),
                "bd": (lod.busy_end_ns - lod.busy_start_ns).tolist(),
                "bk": lod.busy_kind.tolist(),
                "bn": lod.busy_count.tolist(),
                "bb": lod.busy_ns.tolist(),
            }
        )
    return {
        "origin_ns": origin,
        "start_ns": t0 - origin,
        "end_ns": t1 - origin,
        "width_px": width_px,
        "run_end_ns": index.end_ns - origin,
        "kinds": list(KIND_NAMES),
        "memory_kinds": list(MEMORY_KINDS),
        "names": names,
        "sources": sources,
        "lanes": out_lanes,
        "steps": _steps(index, t0, t1, rank),
        "exposed": _exposed(index, t0, t1, width_px, rank, ranks),
    }


def _steps(index: RunIndex, t0: int, t1: int, rank: int | None) -> list[dict[str, int]]:
    steps = index.steps(rank)
    visible = steps[(steps["end_ns"] > t0) & (steps["start_ns"] < t1)]
    if len(visible) > MAX_STEP_MARKS:
        visible = visible.iloc[:: -(-len(visible) // MAX_STEP_MARKS)]
    o = index.origin_ns
    return [
        {"rank": int(r), "step": int(s), "s": int(a) - o, "e": int(b) - o}
        for r, s, a, b in visible[["rank", "step", "start_ns", "end_ns"]].itertuples(index=False)
    ]


def _exposed(
    index: RunIndex, t0: int, t1: int, width_px: int, rank: int | None, ranks: frozenset[int] | None
) -> list[dict[str, Any]]:
    out = []
    for r in index.exposed:
        if (rank is not None and r != rank) or (ranks is not None and r not in ranks):
            continue
        s, e = index.exposed_view(r, t0, t1, width_px)
        out.append({"rank": r, "s": (s - index.origin_ns).tolist(), "d": (e - s).tolist()})
    return out


def interval_rows(index: RunIndex, ids: list[int]) -> list[dict[str, Any]]:
    """Full rows of the intervals with these ids (unknown ids are skipped); times relative to origin."""
    found: Any = index.rows_of_ids(ids)  # itertuples rows: attributes by column name
    o = index.origin_ns
    out = []
    for row in found.itertuples(index=False):
        out.append(
            {
                "id": int(row.id),
                "lane": int(row.lane),
                "rank": int(row.rank),
                "kind": str(row.kind),
                "name": str(row.name),
                "s": int(row.start_ns) - o,
                "d": int(row.dur_ns),
                "bytes": int(row.bytes),
                "memory_kind": str(row.memory_kind),
                "source": str(row.source),
                "step": int(row.step),
                "stream": int(row.stream),
            }
        )
    return out
