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
    lane = iv["lane"].to_numpy(np.int32)
    if iv["start_ns"].is_monotonic_increasing and not _host_row_inside(start, lane, w, host_lane):
        return iv  # the usual case (the recorder's own calls leave no records): no pass over every row
    on_host = host_lane[lane]
    i = np.searchsorted(w[:, 0], start, side="right") - 1
    inside = (i >= 0) & (start < w[np.maximum(i, 0), 1]) & on_host
    launch = lookup_first(iv["id"].to_numpy(np.int64), iv["launch_id"].to_numpy(np.int64))
    linked = launch >= 0
    inside[linked] |= inside[launch[linked]]
    # GPU-side ranges (record_function on the stream) launch nothing: they go with the GPU work they cover
    gpu_range = ~on_host & ~linked & (iv["kind"] == "annotation").to_numpy(bool)
    if gpu_range.any():
        end = iv["end_ns"].to_numpy(np.int64)
        work = ~on_host & linked
        dropped = first_covered(lane, start, end, work & inside, gpu_range) >= 0
        kept = first_covered(lane, start, end, work & ~inside, gpu_range) >= 0
        inside[gpu_range] = dropped & ~kept
    return take_rows(iv, np.flatnonzero(~inside)) if inside.any() else iv


def _host_row_inside(start: np.ndarray, lane: np.ndarray, windows: np.ndarray, host_lane: np.ndarray) -> bool:
    """Whether a host row starts inside one of ``windows`` (sorted (start, end) rows), for rows in start order
    (as the importer leaves them): by binary search, looking only at the rows inside."""
    lo = np.searchsorted(start, windows[:, 0], side="left")
    hi = np.searchsorted(start, windows[:, 1], side="left")
    return any(host_lane[lane[a:b]].any() for a, b in zip(lo.tolist(), hi.tolist(), strict=True))


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
