"""A run's Parquet file: the run DataFrame (INTERVAL_COLUMNS, sorted by lane then start_ns) with the run's
meta, lanes and markers as JSON in the schema metadata (``streamscope.meta``, ``streamscope.lanes``,
``streamscope.markers``). Whole runs or only some rows (by row group) are read back.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from collector.model import (
    Lane,
    LaneKind,
    RunMeta,
    Trace,
    conform_intervals,
    conform_markers,
    conforms,
)


def lane_dict(lane: Lane) -> dict[str, Any]:
    """A lane as stored: rank, kind, ident, label."""
    return {"rank": lane.rank, "kind": lane.kind.value, "ident": lane.ident, "label": lane.label}


def lane_from_dict(d: dict[str, Any]) -> Lane:
    """A lane stored by :func:`lane_dict`."""
    return Lane(int(d["rank"]), LaneKind(d["kind"]), int(d["ident"]), str(d["label"]))


def markers_json(markers: pd.DataFrame) -> str:
    """The marker table as pandas ``split`` JSON (kinds as strings)."""
    markers = markers.copy()
    markers["kind"] = markers["kind"].astype(str)
    return str(markers.to_json(orient="split", index=False))


def markers_from_split(split: dict[str, Any]) -> pd.DataFrame:
    """The marker table from the parsed JSON of :func:`markers_json`."""
    return conform_markers(pd.DataFrame(split["data"], columns=split["columns"]))


def write_run_file(path: Path, trace: Trace, frame: pd.DataFrame) -> None:
    """Write the run (``frame``: its intervals sorted by lane then start_ns) under a temporary name, flush
    it to disk and rename it to ``path``."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.Table.from_pandas(frame, preserve_index=False)
    extra = {
        b"streamscope.meta": json.dumps(trace.meta.to_dict(), default=str).encode(),
        b"streamscope.lanes": json.dumps([lane_dict(lane) for lane in trace.lanes]).encode(),
        b"streamscope.markers": markers_json(trace.markers).encode(),
    }
    table = table.replace_schema_metadata({**(table.schema.metadata or {}), **extra})
    tmp = path.with_name(f".tmp-{path.name}")
    pq.write_table(table, tmp, compression="zstd")
    with open(tmp, "rb") as fh:
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def read_run_file(path: Path) -> Trace:
    """Read a run file written by :meth:`Store.add` back into a Trace."""
    import pyarrow.parquet as pq

    table = pq.read_table(path)
    md = table.schema.metadata or {}
    meta = RunMeta.from_dict(json.loads(md[b"streamscope.meta"]))
    lanes = tuple(lane_from_dict(d) for d in json.loads(md[b"streamscope.lanes"]))
    markers = markers_from_split(json.loads(md[b"streamscope.markers"]))
    intervals = table.to_pandas(split_blocks=True, self_destruct=True)
    del table
    if not conforms(intervals):
        intervals = conform_intervals(intervals)
    return Trace(meta, lanes, intervals, markers)


def read_run_rows(path: Path, positions: np.ndarray) -> pd.DataFrame:
    """The rows at ``positions`` (sorted row numbers) of a run file, reading only the row groups that
    hold them; columns as in INTERVAL_COLUMNS (categories may differ from the whole run's)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    pf = pq.ParquetFile(path)
    sizes = [pf.metadata.row_group(g).num_rows for g in range(pf.num_row_groups)]
    bounds = np.concatenate([[0], np.cumsum(sizes, dtype=np.int64)])
    groups = np.unique(np.searchsorted(bounds, positions, side="right") - 1)
    parts = []
    for g in groups.tolist():
        local = positions[(positions >= bounds[g]) & (positions < bounds[g + 1])] - bounds[g]
        parts.append(pf.read_row_group(g).take(pa.array(local)))
    table = pa.concat_tables(parts) if parts else pf.schema_arrow.empty_table()
    return table.to_pandas().reset_index(drop=True)
