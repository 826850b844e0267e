"""Rows that are not the workload's: the recorder's own calls and the steps ``every`` skips (internal).

:func:`without_windows` removes the host rows that start inside such a window, with the GPU work they
launched; GPU-side ranges (``record_function`` on a stream, launched by nothing) go with the work they cover
(:func:`first_covered`, which also gives such a range its step in collector.recording.enrich).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from collector.importers.kineto_lanes import lookup_first
from collector.traceformat.gather import take_rows


def without_windows(iv: pd.DataFrame, windows: Sequence[tuple[int, int]], host_lane: np.ndarray) -> pd.DataFrame:
    """``iv`` without the host rows starting inside any of ``windows`` ([start_ns, end_ns), trace clock) and
    the GPU work those rows launched. ``host_lane[lane]`` says whether a lane is a CPU thread."""
    if not windows or iv.empty:
        return iv
    w = np.array(sorted(windows), dtype=np.int64).reshape(-1, 2)
    start = iv["start_ns"].to_numpy(np.int64)
    if not _host_row_inside(start, w, host_lane[iv["lane"].to_numpy(np.int32)]):
        return iv  # the usual case (the recorder's own calls leave no records): no pass over every row
    i = np.searchsorted(w[:, 0], start, side="right") - 1
    inside = (i >= 0) & (start < w[np.maximum(i, 0), 1]) & host_lane[iv["lane"].to_numpy(np.int32)]
    launch = lookup_first(iv["id"].to_numpy(np.int64), iv["launch_id"].to_numpy(np.int64))
    linked = launch >= 0
    inside[linked] |= inside[launch[linked]]
    # GPU-side ranges (record_function on the stream) launch nothing: they go with the GPU work they cover
    lane = iv["lane"].to_numpy(np.int32)
    gpu_range = ~host_lane[lane] & ~linked & (iv["kind"] == "annotation").to_numpy(bool)
    if gpu_range.any():
        end = iv["end_ns"].to_numpy(np.int64)
        work = ~host_lane[lane] & linked
        dropped = first_covered(lane, start, end, work & inside, gpu_range) >= 0
        kept = first_covered(lane, start, end, work & ~inside, gpu_range) >= 0
        inside[gpu_range] = dropped & ~kept
    return take_rows(iv, np.flatnonzero(~inside)) if inside.any() else iv


def _host_row_inside(start: np.ndarray, windows: np.ndarray, on_host: np.ndarray) -> bool:
    """Whether a host row starts inside one of ``windows`` (sorted (start, end) rows); by binary search when
    the rows are in start order (as the importer leaves them), else by a pass over them."""
    if len(start) > 1 and not (start[1:] >= start[:-1]).all():
        return True  # not in start order: let the full pass decide
    lo = np.searchsorted(start, windows[:, 0], side="left")
    hi = np.searchsorted(start, windows[:, 1], side="left")
    return any(on_host[a:b].any() for a, b in zip(lo.tolist(), hi.tolist(), strict=True))


def first_covered(
    lane: np.ndarray, start: np.ndarray, end: np.ndarray, work: np.ndarray, ranges: np.ndarray
) -> np.ndarray:
    """For each row in ``ranges`` (GPU-side ranges): the row of the first ``work`` row on its lane that starts
    inside it (``start_ns <= start < end_ns``), or -1. Loops over the ranges' lanes only (a few streams)."""
    r_rows = np.flatnonzero(ranges)
    out = np.full(len(r_rows), -1, dtype=np.int64)
    for ln in np.unique(lane[r_rows]).tolist():
        w = np.flatnonzero(work & (lane == ln))
        w = w[np.argsort(start[w], kind="stable")]
        at = np.flatnonzero(lane[r_rows] == ln)
        first = np.searchsorted(start[w], start[r_rows[at]], side="left")
        ok = first < len(w)
        ok[ok] = start[w[first[ok]]] < end[r_rows[at[ok]]]
        out[at[ok]] = w[first[ok]]
    return out
