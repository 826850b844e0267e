"""A run's level-of-detail index saved as memory-mappable ``.npy`` files, so a stored run opens instantly.

Layout of one index folder (``runs/<id>.lod/``)::

    index.json                 version, row count, lane bounds, run meta, lanes, markers, the categories
                               of ``name`` and ``source``, which lanes have prefix arrays, exposed ranks
    start.npy end.npy cummax.npy        int64 ns per row (rows sorted by lane then start_ns)
    kind.npy                   int8 codes into collector.model.KIND_NAMES
    name.npy source.npy memory_kind.npy category codes; id.npy bytes.npy step.npy
    coarse-<lane>-<part>.npy   the lodcoarse.Coarse prefix arrays of each long lane (no kind_cum for one kind)
    exposed-<rank>-s.npy / -e.npy       exposed-copy windows per rank (and -gap_order, -gap_neg_sorted
                               for ranks with many windows)
    level-<part>.npy           the folds of lodlevel.Level (an index saved before them builds them on use)

:func:`load_index` maps the files read-only (``np.load(mmap_mode="r")``): nothing is copied, pages are
read when a view touches them. The full run (for analysis or interval rows) is read on first use only.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from collector.model import RunMeta, Trace
from webapp.analysis.lod import RowColumns, RunIndex
from webapp.analysis.lodlevel import PARTS as LEVEL_PARTS
from webapp.analysis.lodlevel import Level
from webapp.runfile import lane_dict, lane_from_dict, markers_from_split, markers_json

INDEX_VERSION = 2
_ROW_ARRAYS = ("start", "end", "cummax", "kind")
_COLUMN_ARRAYS = ("name", "source", "memory_kind", "id", "bytes", "step")
_COARSE_PARTS = ("busy_cum", "kinds", "kind_cum", "gap_order", "gap_neg_sorted")


def save_index(index: RunIndex, folder: Path) -> None:
    """Write ``index`` into the (new, empty) ``folder``; every file is flushed to disk."""
    folder.mkdir()
    arrays: dict[str, np.ndarray] = {name: getattr(index, name) for name in _ROW_ARRAYS}
    arrays.update({name: getattr(index.columns, name) for name in _COLUMN_ARRAYS})
    coarse_lanes = []
    for lane, coarse in enumerate(index.coarse):
        if coarse is not None:
            coarse_lanes.append(lane)
            arrays.update(
                {
                    f"coarse-{lane}-{part}": getattr(coarse, part)
                    for part in _COARSE_PARTS
                    if part != "kind_cum" or len(coarse.kinds) > 1
                }
            )
    for rank, (s, e) in index.exposed.items():
        arrays[f"exposed-{rank}-s"], arrays[f"exposed-{rank}-e"] = s, e
    for rank, (order, neg_sorted) in index.exposed_gaps.items():
        arrays[f"exposed-{rank}-gap_order"], arrays[f"exposed-{rank}-gap_neg_sorted"] = order, neg_sorted
    level = index.level
    arrays.update({f"level-{part}": getattr(level, part) for part in LEVEL_PARTS})
    for name, arr in arrays.items():
        with open(folder / f"{name}.npy", "wb") as fh:
            np.save(fh, np.ascontiguousarray(arr), allow_pickle=False)
            fh.flush()
            os.fsync(fh.fileno())
    doc = {
        "version": INDEX_VERSION,
        "rows": len(index.start),
        "lane_bounds": index.lane_bounds,
        "meta": index.meta.to_dict(),
        "lanes": [lane_dict(ln) for ln in index.lanes],
        "markers": json.loads(markers_json(index.markers)),
        "name_cats": list(index.columns.name_cats),
        "source_cats": list(index.columns.source_cats),
        "coarse_lanes": coarse_lanes,
        "exposed_ranks": sorted(index.exposed),
        "exposed_gap_ranks": sorted(index.exposed_gaps),
        "level_p0_ns": level.p0_ns,
    }
    with open(folder / "index.json", "w", encoding="utf-8") as fh:
        json.dump(doc, fh, default=str)
        fh.flush()
        os.fsync(fh.fileno())


def load_index(
    folder: Path, load_trace: Callable[[], Trace], read_rows: Callable[[np.ndarray], pd.DataFrame] | None = None
) -> RunIndex | None:
    """The index saved in ``folder``, memory-mapped; None when it is missing, of another version or
    damaged (callers then rebuild it from the run file). ``load_trace`` reads the full run on demand,
    ``read_rows(positions)`` some of its rows (see RunIndex.from_arrays)."""
    try:
        doc: dict[str, Any] = json.loads((folder / "index.json").read_text(encoding="utf-8"))
        if doc.get("version") != INDEX_VERSION:
            return None
        rows = int(doc["rows"])

        def arr(name: str) -> np.ndarray:
            # a plain read-only ndarray over the mapping: slicing it costs less than slicing a memmap
            return np.asarray(np.load(folder / f"{name}.npy", mmap_mode="r", allow_pickle=False))

        row = {name: arr(name) for name in _ROW_ARRAYS + _COLUMN_ARRAYS}
        if any(len(a) != rows for a in row.values()):
            return None
        columns = RowColumns(
            name=row["name"],
            name_cats=np.asarray(doc["name_cats"], dtype=object),
            source=row["source"],
            source_cats=np.asarray(doc["source_cats"], dtype=object),
            memory_kind=row["memory_kind"],
            id=row["id"],
            bytes=row["bytes"],
            step=row["step"],
        )
        coarse = {int(lane): _coarse_parts(arr, int(lane)) for lane in doc["coarse_lanes"]}
        exposed = {int(r): (arr(f"exposed-{r}-s"), arr(f"exposed-{r}-e")) for r in doc["exposed_ranks"]}
        exposed_gaps = {
            int(r): (arr(f"exposed-{r}-gap_order"), arr(f"exposed-{r}-gap_neg_sorted"))
            for r in doc["exposed_gap_ranks"]
        }
        p0 = doc.get("level_p0_ns")
        level = None if p0 is None else Level(float(p0), *(arr(f"level-{part}") for part in LEVEL_PARTS))
        lanes = tuple(lane_from_dict(d) for d in doc["lanes"])
        markers = markers_from_split(doc["markers"])
        return RunIndex.from_arrays(
            RunMeta.from_dict(doc["meta"]),
            lanes,
            markers,
            start=row["start"],
            end=row["end"],
            kind=row["kind"],
            cummax=row["cummax"],
            lane_bounds=[tuple(b) for b in doc["lane_bounds"]],
            columns=columns,
            coarse=coarse,
            exposed=exposed,
            exposed_gaps=exposed_gaps,
            load_trace=load_trace,
            read_rows=read_rows,
            level=level,
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _coarse_parts(arr: Callable[[str], np.ndarray], lane: int) -> tuple[np.ndarray, ...]:
    """A long lane's Coarse arrays; a lane of one kind has no kind_cum file (it is busy_cum)."""
    busy_cum, kinds = arr(f"coarse-{lane}-busy_cum"), arr(f"coarse-{lane}-kinds")
    kind_cum = busy_cum.reshape(1, -1) if len(kinds) == 1 else arr(f"coarse-{lane}-kind_cum")
    return busy_cum, kinds, kind_cum, arr(f"coarse-{lane}-gap_order"), arr(f"coarse-{lane}-gap_neg_sorted")
