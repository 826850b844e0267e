"""Sync waits in torch.profiler (Kineto) traces: which host calls wait, why, and from which user code.

Used by :mod:`collector.importers.kineto`, whose host-waits stage is :func:`host_waits`. Everything here is
vectorized over the event table; the only loops run over API-name tables, CPU threads' frame depth, or the
categories of a column, never over events.

Cause vocabulary (the ``cause`` column of ``sync_wait`` intervals), shared with the recorder
(:mod:`collector.recording.hostwaits`). The most specific evidence wins: a Tensor method on the Python stack
(``item``, ``tolist``, ``numpy``, ``cpu``, ``print``), then the outermost syncing aten op (``item``,
``bool``, ``nonzero``, ``masked_index``, ``unique``, ``implicit``, ``blocking_copy`` for ``.to()`` /
``copy_``), then the API call itself (``synchronize`` for cudaDeviceSynchronize, ``stream_synchronize``,
``event_synchronize``, ``blocking_copy`` for cudaMemcpy or a copy from/to pageable memory, ``cuda_free``
for cudaFree, which waits for the whole device).

Python sources come from ``python_function`` events (``with_stack=True``). Their names read
``file.py(LINE): function`` where LINE is where the *function starts* (or the line current when tracing
began, for module-level code), not the line of the call, so sources are ``"file.py:LINE (function)"``:
exact to the function, approximate to the line.
"""

from __future__ import annotations

import re
import sys
from typing import NamedTuple

import numpy as np
import pandas as pd

from collector.importers.kineto_events import KinetoEvents, Launches
from collector.importers.kineto_lanes import lookup_first
from collector.syncrules import MASKABLE_INDEX_OPS, METHOD_CAUSES, SYNC_OP_CAUSES

SYNC_API_CAUSE: dict[str, str] = {
    "cudaStreamSynchronize": "stream_synchronize",
    "cuStreamSynchronize": "stream_synchronize",
    "cudaDeviceSynchronize": "synchronize",
    "cuCtxSynchronize": "synchronize",
    "cudaEventSynchronize": "event_synchronize",
    "cuEventSynchronize": "event_synchronize",
    "cudaFree": "cuda_free",
    "cudaFreeHost": "cuda_free",
    "cuMemFree": "cuda_free",
    "cuMemFree_v2": "cuda_free",
    # ROCm (HIP) names of the same calls
    "hipStreamSynchronize": "stream_synchronize",
    "hipDeviceSynchronize": "synchronize",
    "hipCtxSynchronize": "synchronize",
    "hipEventSynchronize": "event_synchronize",
    "hipFree": "cuda_free",
    "hipHostFree": "cuda_free",
}
"""Host API calls that always block the calling thread until GPU work finishes, and their cause."""

_BLOCKING_COPY_API = re.compile(r"^((?:cuda|hip)Memcpy(?!.*Async)\w*|cuMemcpy(?!.*Async)\w*)$")
"""Synchronous copy APIs (``cudaMemcpy``, ``cudaMemcpy2D``, ``cuMemcpyDtoH_v2``, ROCm's ``hipMemcpyWithStream``
...; not the *Async ones)."""

_ASYNC_COPY_API = re.compile(r"^((?:cuda|hip)Memcpy\w*Async\w*|cuMemcpy\w*Async\w*)$")

CUDA_SYNC_EVENT_CAUSE: dict[str, str] = {
    "Stream Sync": "stream_synchronize",
    "Context Sync": "synchronize",
    "Event Sync": "event_synchronize",
}
"""Names of Kineto ``cuda_sync`` events that mean the host waited (``Stream Wait Event`` does not)."""

CAUSE_BY_OP: dict[str, str] = {
    **SYNC_OP_CAUSES,
    **{op: "masked_index" for op in MASKABLE_INDEX_OPS},  # a sync inside aten::index is a boolean mask
    "aten::item": "item",
    "aten::allclose": "item",
    "aten::repeat_interleave": "implicit",
    "aten::to": "blocking_copy",
    "aten::_to_copy": "blocking_copy",
    "aten::copy_": "blocking_copy",
}
"""The outermost of these ops enclosing a sync names its cause (``x.to()`` wins over the ``copy_`` inside)."""

LIBRARY_ROOTS = frozenset(
    {
        "torch",
        "torchvision",
        "torchaudio",
        "torchtext",
        "functorch",
        "triton",
        "numpy",
        "transformers",
        "accelerate",
        "deepspeed",
        "apex",
        "lightning",
        "pytorch_lightning",
        "megatron",
        "timm",
        "diffusers",
        "peft",
        "datasets",
        "tqdm",
        "streamscope",
        "collector",
    }
)
"""Top-level packages never reported as the user's source (plus the standard library and site-packages)."""

_FRAME = re.compile(r"^(?P<file>.+)\((?P<line>\d+)\): (?P<func>.+)$")
_METHOD_FRAME = re.compile(r"^<built-in method (\w+) of Tensor object|^torch/_tensor\.py\(\d+\): (\w+)$")


def frame_cause(name: str) -> str:
    """The sync cause a Python frame implies (``<built-in method item of Tensor ...>`` -> ``item``)."""
    m = _METHOD_FRAME.match(name)
    return METHOD_CAUSES.get(m.group(1) or m.group(2), "") if m else ""


def api_sync_cause(name: str) -> str:
    """A runtime/driver API name's sync cause: its SYNC_API_CAUSE, ``"blocking_copy"`` for a synchronous
    copy API, ``""`` for calls that do not wait."""
    return SYNC_API_CAUSE.get(name) or ("blocking_copy" if _BLOCKING_COPY_API.match(name) else "")


def is_async_copy_api(name: str) -> bool:
    """True for ``cudaMemcpyAsync`` and friends."""
    return bool(_ASYNC_COPY_API.match(name))


def is_user_frame(name: str) -> bool:
    """True for a ``python_function`` name in the user's own code (not torch, a library or the stdlib)."""
    m = _FRAME.match(name)
    if m is None:
        return False
    path = m.group("file").replace("\\", "/")
    if path.startswith("<") or "site-packages/" in path or "dist-packages/" in path:
        return False
    root = path.lstrip("/").split("/", 1)[0]
    root = root[:-3] if root.endswith(".py") else root
    return root not in LIBRARY_ROOTS and root not in sys.stdlib_module_names


def format_frame(name: str) -> str:
    """``"dir/train.py(41): step"`` -> ``"dir/train.py:41 (step)"``; unparseable names pass through."""
    m = _FRAME.match(name)
    return f"{m.group('file')}:{m.group('line')} ({m.group('func')})" if m else name


class PyFrames(NamedTuple):
    """``python_function`` events as arrays: thread key, start/end ns, name code (index into the names'
    categories), ``Python id`` and ``Python parent id`` (-1 for none)."""

    key: np.ndarray
    start_ns: np.ndarray
    end_ns: np.ndarray
    code: np.ndarray
    py_id: np.ndarray
    parent_id: np.ndarray


def py_frames(events: KinetoEvents) -> PyFrames:
    """The trace's ``python_function`` events (none without ``with_stack=True``)."""
    rows = events.rows(("python_function",))
    return PyFrames(
        events.thread[rows],
        events.start[rows],
        events.end[rows],
        events.name_codes[rows],
        events.ev["arg_python_id"].to_numpy(np.int64)[rows],
        events.ev["arg_python_parent_id"].to_numpy(np.int64)[rows],
    )


def latest_start(iv_key: np.ndarray, iv_start: np.ndarray, pt_key: np.ndarray, pt_t: np.ndarray) -> np.ndarray:
    """Per point (key, t): position of the interval with that key and the latest start <= t, or -1."""
    out = np.full(len(pt_t), -1, dtype=np.int64)
    if len(iv_start) == 0 or len(pt_t) == 0:
        return out
    order = np.lexsort((iv_start, iv_key))
    sorted_key, sorted_start = iv_key[order], iv_start[order]
    keys, first_at = np.unique(sorted_key, return_index=True)
    bounds = np.append(first_at, len(order))
    for j, k in enumerate(keys):  # one pass per CPU thread, not per event
        pts = np.flatnonzero(pt_key == k)
        if len(pts) == 0:
            continue
        lo, hi = bounds[j], bounds[j + 1]
        i = np.searchsorted(sorted_start[lo:hi], pt_t[pts], side="right") - 1
        ok = i >= 0
        out[pts[ok]] = order[lo + i[ok]]
    return out


def outermost_enclosing(
    iv_key: np.ndarray, iv_start: np.ndarray, iv_end: np.ndarray, pt_key: np.ndarray, pt_t: np.ndarray
) -> np.ndarray:
    """For each point (key, t): position of the outermost interval with the same key that contains t, or -1.

    Intervals on one key (a CPU thread) are expected to nest like a call stack; an interval that only
    overlaps an earlier one counts as outermost itself.
    """
    out = np.full(len(pt_t), -1, dtype=np.int64)
    if len(iv_start) == 0 or len(pt_t) == 0:
        return out
    order = np.lexsort((-iv_end, iv_start, iv_key))
    k, e = iv_key[order], iv_end[order]
    prev_max = pd.Series(e).groupby(k).cummax().groupby(k).shift(1).to_numpy(dtype=float, na_value=-np.inf)
    roots = order[~(prev_max >= e)]
    hit = latest_start(iv_key[roots], iv_start[roots], pt_key, pt_t)
    pos = np.where(hit >= 0, roots[np.maximum(hit, 0)], -1)
    ok = pos >= 0
    ok[ok] = iv_end[pos[ok]] >= pt_t[ok]
    out[ok] = pos[ok]
    return out


def python_sources(
    frames: PyFrames, categories: pd.Index, pt_key: np.ndarray, pt_t: np.ndarray, max_depth: int = 512
) -> tuple[np.ndarray, np.ndarray]:
    """Per point: the innermost user frame enclosing it, ``"file.py:LINE (function)"`` or ``""``, and the
    cause named by the outermost Tensor-method frame between the point and that user frame (or ``""``).

    Walks ``Python parent id`` links outward from the latest frame on the point's thread that started
    before it, vectorized over points (one pass per stack level).
    """
    source = np.full(len(pt_t), "", dtype=object)
    cause = np.full(len(pt_t), "", dtype=object)
    if len(frames.key) == 0 or len(pt_t) == 0:
        return source, cause
    codes = frames.code.astype(np.int64) + 1  # 0: no name
    used = np.flatnonzero(np.bincount(codes, minlength=len(categories) + 1))
    shown = np.full(len(categories) + 1, "", dtype=object)
    implied = np.full(len(categories) + 1, "", dtype=object)
    for c in used[used > 0]:  # once per distinct frame name
        name = str(categories[c - 1])
        shown[c] = format_frame(name) if is_user_frame(name) else ""
        implied[c] = frame_cause(name)
    user = (shown != "")[codes]
    start, end = frames.start_ns, frames.end_ns
    parent_at = lookup_first(frames.py_id, frames.parent_id)
    parent = np.where(frames.parent_id >= 0, parent_at, -1)

    cur = latest_start(frames.key, start, pt_key, pt_t)
    for _ in range(max_depth):
        live = np.flatnonzero(cur >= 0)
        if len(live) == 0:
            break
        c = cur[live]
        inside = (start[c] <= pt_t[live]) & (end[c] >= pt_t[live])
        found = user[c] & inside
        source[live[found]] = shown[codes[c[found]]]
        named = inside & ~found & (implied[codes[c]] != "")
        cause[live[named]] = implied[codes[c[named]]]
        cur[live[found]] = -1
        cur[live[~found]] = parent[c[~found]]
    return source, cause


class HostWaits(NamedTuple):
    """Which host API calls waited, and why: the importer's stage between the GPU work and the rows.
    Arrays over the calls (launch positions, :class:`~collector.importers.kineto_events.Launches`), except
    ``sources``, which follows ``waits``."""

    cause: np.ndarray
    """object: the sync cause of each call, ``""`` for a call that did not wait"""
    waits: np.ndarray
    """the launch positions of the calls that waited (``cause != ""``), in order"""
    sources: np.ndarray
    """object: the user frame around each wait, ``"file.py:LINE (function)"`` or ``""``"""
    non_blocking: np.ndarray
    """bool: an async copy call with no sync inside the same op (the copy was asked to be non-blocking)"""


def host_waits(
    events: KinetoEvents, launches: Launches, ops: np.ndarray, copies: np.ndarray, pageable: np.ndarray
) -> HostWaits:
    """The causes of the waits among ``launches``: the most specific evidence wins (module docstring).

    ``ops`` are the ``cpu_op`` rows; ``copies`` the launch positions of copy calls, ``pageable`` those whose
    copy moves from or to pageable memory (an async copy of pageable memory blocks the host).
    """
    calls = launches.rows
    cause = events.by_name(calls, api_sync_cause, object)
    async_copy = events.by_name(calls, is_async_copy_api, bool)
    pageable = pageable[async_copy[pageable] & (cause[pageable] == "")]
    cause[pageable] = "blocking_copy"
    sync_ev = events.rows(("cuda_sync",))  # opt-in events naming the call that waited
    s_pos = launches.position(events.correlation(sync_ev, "f"))
    s_cause = events.by_name(sync_ev, lambda c: CUDA_SYNC_EVENT_CAUSE.get(c, ""), object)
    s_ok = (s_pos >= 0) & (s_cause != "")
    s_ok[s_ok] = cause[s_pos[s_ok]] == ""
    cause[s_pos[s_ok]] = s_cause[s_ok]

    # the outermost classifying aten op around a sync names its cause; around a copy launch, whether the
    # copy was asked to be non-blocking (no sync inside the same op)
    cause_ops = ops[events.by_name(ops, lambda c: c in CAUSE_BY_OP, bool)]
    waits = np.flatnonzero(cause != "")
    pts = calls[np.concatenate([waits, copies])]
    thread, start, end = events.thread, events.start, events.end
    outer = outermost_enclosing(thread[cause_ops], start[cause_ops], end[cause_ops], thread[pts], start[pts])
    wait_outer, copy_outer = outer[: len(waits)], outer[len(waits) :]
    op_cause = np.full(len(waits), "", dtype=object)
    op_cause[wait_outer >= 0] = events.by_name(cause_ops[wait_outer[wait_outer >= 0]], CAUSE_BY_OP.__getitem__, object)
    cause[waits] = np.where(op_cause != "", op_cause, cause[waits])
    blocked = copy_outer >= 0
    blocked[blocked] = np.isin(copy_outer[blocked], wait_outer[wait_outer >= 0])
    non_blocking = np.zeros(len(calls), dtype=bool)
    non_blocking[copies] = async_copy[copies] & ~blocked

    sources, py_cause = python_sources(py_frames(events), events.names, thread[calls[waits]], start[calls[waits]])
    cause[waits] = np.where(py_cause != "", py_cause, cause[waits])
    return HostWaits(cause, waits, sources, non_blocking)
