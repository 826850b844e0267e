"""One multi-rank run from the traces of the ranks (ours or torch.profiler's), on one aligned clock.

:func:`merge_traces` shifts each rank by its clock offset (collector.ranks.align: the ends of synchronous
collectives), concatenates lanes, intervals and markers (lane indices and interval ids renumbered) and
records the alignment in the metadata: ``notes.clock_alignment = {"method", "reference_rank", "ranks":
[{rank, offset_ns, residual_ns, max_residual_ns, anchors, host, device}]}``. A rank's ``residual_ns`` is
the typical error left after alignment (median absolute deviation of its collective ends, ns).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np
import pandas as pd

from collector.importers.collectives import mark_host_collectives
from collector.model import NO_LAUNCH, Lane, Trace, conform_intervals, conform_markers, empty_markers
from collector.ranks.align import clock_offsets, matched_collectives
from collector.traceformat.spec import TraceFileError

ALIGN_METHOD = "collective_ends"


class MergeError(TraceFileError):
    """Rank files that cannot be merged (one line; CLI exit 2, HTTP 400)."""


def _one_rank(trace: Trace, where: str) -> int:
    ranks = trace.ranks or sorted(set(trace.markers["rank"].tolist()))
    if len(ranks) != 1:
        raise MergeError(f"{where}: holds ranks {ranks}; merge takes one rank per file")
    return int(ranks[0])


def merge_traces(traces: Sequence[Trace], names: Sequence[str] = (), *, align: bool = True) -> Trace:
    """One Trace holding every rank of ``traces`` (one rank each), clocks aligned unless ``align`` is False.

    Raises MergeError when fewer than two traces are given or two hold the same rank.
    """
    names = list(names) or [f"file {i + 1}" for i in range(len(traces))]
    if len(traces) < 2:
        raise MergeError("merge needs the traces of at least two ranks")
    traces = [mark_host_collectives(t) for t in traces]
    ranks = [_one_rank(t, n) for t, n in zip(traces, names, strict=True)]
    dup = sorted({r for r in ranks if ranks.count(r) > 1})
    if dup:
        held = [n for n, r in zip(names, ranks, strict=True) if r == dup[0]]
        raise MergeError(f"rank {dup[0]} is in more than one file ({', '.join(held)}); give each rank once")
    order = np.argsort(ranks, kind="stable")
    traces = [traces[i] for i in order]
    ranks = [ranks[i] for i in order]
    frames = [t.intervals for t in traces]
    offsets = pd.DataFrame({"rank": ranks, "offset_ns": 0, "residual_ns": 0, "max_residual_ns": 0, "anchors": 0})
    if align:
        cols = ["rank", "kind", "name", "group", "start_ns", "end_ns"]
        whole = pd.concat([f[cols] for f in frames], ignore_index=True)
        hosts = {r: t.meta.host for t, r in zip(traces, ranks, strict=True)}
        offsets = clock_offsets(matched_collectives(whole), ranks, hosts)
    shift = dict(zip(offsets["rank"].tolist(), offsets["offset_ns"].tolist(), strict=True))
    lanes: list[Lane] = []
    parts: list[pd.DataFrame] = []
    marks: list[pd.DataFrame] = []
    next_id = 0
    for t, r in zip(traces, ranks, strict=True):
        f = t.intervals.copy()
        for col in ("start_ns", "end_ns"):
            f[col] = f[col].to_numpy(np.int64) + shift[r]
        f["lane"] = f["lane"].to_numpy(np.int64) + len(lanes)
        launch = f["launch_id"].to_numpy(np.int64)
        f["launch_id"] = np.where(launch == NO_LAUNCH, NO_LAUNCH, launch + next_id)
        f["id"] = f["id"].to_numpy(np.int64) + next_id
        for col in ("name", "lane_label", "source", "cause"):
            f[col] = f[col].astype(str)
        next_id = int(f["id"].max()) + 1 if len(f) else next_id
        parts.append(f)
        m = t.markers.copy()
        for col in ("start_ns", "end_ns"):
            m[col] = m[col].to_numpy(np.int64) + shift[r]
        marks.append(m)
        lanes.extend(t.lanes)
    intervals = conform_intervals(pd.concat(parts, ignore_index=True))
    markers = pd.concat(marks, ignore_index=True)
    markers = conform_markers(markers) if len(markers) else empty_markers()
    meta = _merged_meta(traces, ranks, offsets, align)
    return Trace(meta, tuple(lanes), intervals, markers)


def _merged_meta(traces: Sequence[Trace], ranks: list[int], offsets: pd.DataFrame, align: bool) -> Any:
    first = traces[0].meta
    per_rank = []
    for t, row in zip(traces, offsets.to_dict(orient="records"), strict=True):
        per_rank.append(
            {
                **{k: int(v) for k, v in row.items()},
                "host": t.meta.host,
                "device": t.meta.device_name,
            }
        )
    notes = dict(first.notes or {})
    notes.pop("rank", None)
    notes["clock_alignment"] = {
        "method": ALIGN_METHOD if align else "none",
        "reference_rank": ranks[0],
        "ranks": per_rank,
    }
    world = max([len(ranks), *[int(t.meta.world_size or 1) for t in traces]])
    return replace(first, world_size=world, notes=notes)


def merge_files(paths: Sequence[str | os.PathLike[str]], *, align: bool = True) -> Trace:
    """Load each rank's file (ours or torch.profiler's; collector.load) and merge them (:func:`merge_traces`)."""
    from collector.load import load_trace

    names = [os.fspath(p) for p in paths]
    return merge_traces([load_trace(p) for p in names], names, align=align)


def alignment_rows(trace: Trace) -> list[dict[str, Any]]:
    """The per-rank alignment records of a merged trace (``notes.clock_alignment.ranks``), or []."""
    info = (trace.meta.notes or {}).get("clock_alignment") or {}
    return [dict(r) for r in info.get("ranks") or [] if isinstance(r, dict)]


def own_clock_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Of alignment records, those of the ranks on their own clock: another host than the reference (lowest)
    rank's, or an unknown one. Ranks on the reference's host share its clock: nothing aligns them, and their
    residual is their collectives' ends differing by their own work, not a clock error."""
    if not rows:
        return []
    ref = min(rows, key=lambda r: int(r.get("rank") or 0))
    return [r for r in rows if r is not ref and (not r.get("host") or r.get("host") != ref.get("host"))]
