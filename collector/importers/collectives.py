"""Collectives run by the host (gloo, MPI, UCC) as ``collective`` intervals on their own comm lanes.

On GPUs NCCL's collectives are kernels, which the Kineto importer already turns into ``collective``
intervals. CPU backends run the collective on worker threads of the process, and torch.profiler records
each one there as a ``record_function`` range named ``gloo:all_reduce``, ``gloo:barrier``, ... (category
``user_annotation``). :func:`mark_host_collectives` turns those annotations into ``collective`` intervals
and the worker threads into ``comm_stream`` lanes labelled ``gloo comm (thread N)``. The host's enqueue ops
(``c10d::allreduce_``) stay ``cpu_op`` intervals on the calling thread.

Vectorized over the interval frame; loops run over lanes and category names only.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd

from collector.model import IntervalKind, LaneKind, Trace, conform_intervals

HOST_COMM_PREFIXES = ("gloo:", "mpi:", "ucc:")
"""``record_function`` name prefixes of collectives that CPU backends run on their worker threads."""


def is_host_collective(name: str) -> bool:
    return name.startswith(HOST_COMM_PREFIXES)


def backend_of(name: str) -> str:
    """``"gloo:all_reduce"`` -> ``"gloo"``."""
    return name.split(":", 1)[0]


def mark_host_collectives(trace: Trace) -> Trace:
    """``trace`` with host-run collectives as ``collective`` intervals (see the module docstring).

    A trace that already holds ``collective`` intervals (NCCL kernels) or no host collectives is returned
    unchanged.
    """
    iv = trace.intervals
    if iv.empty:
        return trace
    kind = iv["kind"].astype(str).to_numpy()
    if (kind == IntervalKind.COLLECTIVE.value).any():
        return trace
    names = iv["name"] if isinstance(iv["name"].dtype, pd.CategoricalDtype) else iv["name"].astype("category")
    per_name = np.array([is_host_collective(str(c)) for c in names.cat.categories] + [False], dtype=bool)
    hit = per_name[names.cat.codes.to_numpy()] & (kind == IntervalKind.ANNOTATION.value)
    if not hit.any():
        return trace
    lane = iv["lane"].to_numpy(np.int64)
    comm_lanes = np.unique(lane[hit])
    backend = backend_of(str(names.iloc[int(np.flatnonzero(hit)[0])]))
    lanes = list(trace.lanes)
    for i in comm_lanes.tolist():
        ln = lanes[i]
        lanes[i] = replace(ln, kind=LaneKind.COMM_STREAM, label=f"{backend} comm (thread {ln.ident})")
    frame = iv.copy()
    frame["kind"] = np.where(hit, IntervalKind.COLLECTIVE.value, kind)
    on_comm = np.isin(lane, comm_lanes)
    frame["lane_kind"] = np.where(on_comm, LaneKind.COMM_STREAM.value, frame["lane_kind"].astype(str).to_numpy())
    labels = np.array([ln.label for ln in lanes], dtype=object)
    frame["lane_label"] = labels[lane]
    return replace(trace, lanes=tuple(lanes), intervals=conform_intervals(frame))
