"""Rows that are not the workload's: the recorder's own calls and the steps ``every`` skips (internal).

:func:`without_windows` removes the host rows that start inside such a window, with the GPU work they
launched; GPU-side ranges (``record_function`` on a stream, launched by nothing) go with the work they cover.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from collector.importers.kineto_lanes import lookup_first


def without_windows(iv: pd.DataFrame, windows: Sequence[tuple[int, int]], host_lane: np.ndarray) -> pd.DataFrame:
    """``iv`` without the host rows starting inside any of ``windows`` ([start_ns, end_ns), trace clock) and
    the GPU work those rows launched. ``host_lane[lane]`` says whether a lane is a CPU thread."""
    if not windows or iv.empty:
        return iv
    w = np.array(sorted(windows), dtype=np.int64).reshape(-1, 2)
    start = iv["start_ns"].to_numpy(np.int64)
    i = np.searchsorted(w[:, 0], start, side="right") - 1
    inside = (i >= 0) & (start < w[np.maximum(i, 0), 1]) & host_lane[iv["lane"].to_numpy(np.int32)]
    launch = lookup_first(iv["id"].to_numpy(np.int64), iv["launch_id"].to_numpy(np.int64))
    linked = launch >= 0
    inside[linked] |= inside[launch[linked]]
    # GPU-side ranges (record_function on the stream) launch nothing: they go with the GPU work they cover
    lane = iv["lane"].to_numpy(np.int32)
    gpu_range = ~host_lane[lane] & ~linked & (iv["kind"].astype(str).to_numpy() == "annotation")
    if gpu_range.any():
        end = iv["end_ns"].to_numpy(np.int64)
        work = ~host_lane[lane] & linked
        dropped = _covers(lane, start, end, work & inside, gpu_range)
        kept = _covers(lane, start, end, work & ~inside, gpu_range)
        inside[gpu_range] = dropped & ~kept
    return iv[~inside].reset_index(drop=True)


def _covers(lane: np.ndarray, start: np.ndarray, end: np.ndarray, work: np.ndarray, ranges: np.ndarray) -> np.ndarray:
    """For each row in ``ranges``: whether any ``work`` row on its lane overlaps it (a few lanes: a loop)."""
    out = np.zeros(int(ranges.sum()), dtype=bool)
    r_rows = np.flatnonzero(ranges)
    for ln in np.unique(lane[r_rows]).tolist():
        w = work & (lane == ln)
        at = lane[r_rows] == ln
        began = np.searchsorted(np.sort(start[w]), end[r_rows[at]], side="left")
        ended = np.searchsorted(np.sort(end[w]), start[r_rows[at]], side="right")
        out[at] = began > ended
    return out
