"""Process groups and bytes of the collectives a CPU rank runs (gloo), for :class:`CpuRecorder`.

torch.profiler names a gloo collective by its op (``gloo:all_reduce``, on a worker thread) but not by its
process group. Each process group runs its collectives on worker threads of its own, so a comm lane belongs
to one group. With one group (no ``new_group``) every collective is in it. With several, :func:`install`
wraps torch.distributed's collective functions: each call reports ``(start_ns, end_ns, group)`` on the
wall clock (``time.time_ns``, the clock of the CPU recorder's Kineto times), and :func:`assign_groups` gives
every collective on a comm lane the group of the calls its collectives started in (a majority vote; a lane
no call explains keeps ``''``, unknown).

Bytes come from the input shapes torch.profiler records with ``record_shapes=True``: a gloo collective's
``bytes`` is the size of its input tensors (for an all_gather, the rank's own part).
"""

from __future__ import annotations

import inspect
import math
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pandas as pd

from collector.model import IntervalKind
from collector.recording.patches import Patches
from collector.traceformat.collective_meta import group_label

COLLECTIVES = (
    "all_reduce",
    "broadcast",
    "all_gather",
    "all_gather_into_tensor",
    "all_gather_object",
    "reduce",
    "reduce_scatter",
    "reduce_scatter_tensor",
    "all_to_all",
    "all_to_all_single",
    "barrier",
    "monitored_barrier",
    "send",
    "recv",
    "isend",
    "irecv",
    "gather",
    "scatter",
    "broadcast_object_list",
)
"""torch.distributed functions whose calls report their group."""

CPP_TYPE_BYTES = {
    "float": 4,
    "double": 8,
    "c10::Half": 2,
    "c10::BFloat16": 2,
    "long int": 8,
    "int": 4,
    "short int": 2,
    "signed char": 1,
    "unsigned char": 1,
    "bool": 1,
}
"""Bytes per element of the C++ type names torch.profiler records as input types of host ops."""

OnCall = Callable[[int, int, str], None]


def label_of(group: Any) -> str:
    """A process group's label, as torch.profiler's collective metadata gives it (``default_pg (pg 0)``)."""
    return group_label(str(getattr(group, "group_name", "")), str(getattr(group, "group_desc", "") or ""))


def known_groups() -> list[str]:
    """Labels of the process groups this process has made (empty without torch.distributed)."""
    try:
        from torch.distributed import distributed_c10d as c10d

        return sorted({label_of(pg) for pg in c10d._world.pg_names})
    except (ImportError, AttributeError, RuntimeError):
        return []


def install(on_call: OnCall) -> Callable[[], None]:
    """Wrap torch.distributed's collectives (COLLECTIVES) to report each call's group; the undo function."""
    import torch.distributed as dist
    from torch.distributed import distributed_c10d as c10d

    patches = Patches()
    for name in COLLECTIVES:
        orig = getattr(c10d, name, None)
        if orig is None:
            continue
        wrapped = _reporting(orig, on_call, dist)
        for module in (dist, c10d):
            if getattr(module, name, None) is orig:
                patches.set(module, name, wrapped)
    return patches.undo


def _reporting(orig: Callable[..., Any], on_call: OnCall, dist: Any) -> Callable[..., Any]:
    signature = inspect.signature(orig)

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        t0 = time.time_ns()
        try:
            return orig(*args, **kwargs)
        finally:
            try:
                group = signature.bind_partial(*args, **kwargs).arguments.get("group")
                on_call(t0, time.time_ns(), label_of(group if group is not None else dist.group.WORLD))
            except (TypeError, RuntimeError, AttributeError):
                pass

    wrapper.__wrapped__ = orig  # type: ignore[attr-defined]
    wrapper.__doc__ = orig.__doc__
    return wrapper


def assign_groups(frame: pd.DataFrame, calls: Sequence[tuple[int, int, str]], groups: Sequence[str]) -> np.ndarray:
    """The ``group`` column for ``frame`` (INTERVAL_COLUMNS): each ``collective`` row gets its comm lane's
    group (module docstring); other rows ``''``. ``calls``: (start_ns, end_ns, label) of reported calls;
    ``groups``: labels of the groups that exist."""
    out = np.full(len(frame), "", dtype=object)
    rows = np.flatnonzero((frame["kind"].astype(str) == IntervalKind.COLLECTIVE.value).to_numpy())
    if not len(rows):
        return out
    if len(groups) == 1:
        out[rows] = groups[0]
        return out
    if not calls:
        return out
    spans = np.array([(a, b) for a, b, _ in calls], dtype=np.int64)
    labels = np.array([g for _, _, g in calls], dtype=object)
    order = np.argsort(spans[:, 0], kind="stable")
    spans, labels = spans[order], labels[order]
    start = frame["start_ns"].to_numpy(np.int64)[rows]
    i = np.searchsorted(spans[:, 0], start, side="right") - 1
    inside = (i >= 0) & (start <= spans[np.maximum(i, 0), 1])
    votes = pd.DataFrame({"lane": frame["lane"].to_numpy()[rows][inside], "group": labels[i[inside]]})
    if votes.empty:
        return out
    winner = votes.groupby("lane")["group"].agg(lambda g: g.value_counts().index[0])
    lane = frame["lane"].to_numpy()[rows]
    out[rows] = pd.Series(lane).map(winner).fillna("").to_numpy(dtype=object)
    return out


def input_bytes(shapes: Sequence[Any], dtypes: Sequence[str]) -> int:
    """Bytes of an op's tensor inputs from torch.profiler's recorded shapes and C++ type names (0 when
    none is a tensor of a known type)."""
    total = 0
    for shape, dtype in zip(shapes, dtypes, strict=False):
        size = CPP_TYPE_BYTES.get(str(dtype), 0)
        if size and isinstance(shape, (list, tuple)) and all(isinstance(d, int) for d in shape):
            total += size * math.prod(shape)
    return total
