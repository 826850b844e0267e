"""Sync waits in torch.profiler (Kineto) traces: which host calls wait, why, and from which user code.

Used by :mod:`collector.kineto`. Everything here is vectorized over the event table; the only loops run over
API-name tables, CPU threads' frame depth, or the categories of a column, never over events.

Cause vocabulary (the ``cause`` column of ``sync_wait`` intervals), shared with the recorder
(:mod:`collector.syncs`). The most specific evidence wins: a Tensor method on the Python stack (``item``,
``tolist``, ``numpy``, ``cpu``, ``print``), then the outermost syncing aten op (``item``, ``bool``, ``nonzero``,
``masked_index``, ``unique``, ``implicit``, ``blocking_copy`` for ``.to()`` / ``copy_``), then the API call
itself (``synchronize`` for cudaDeviceSynchronize, ``stream_synchronize``, ``event_synchronize``,
``blocking_copy`` for cudaMemcpy or a copy from/to pageable memory, ``cuda_free`` for cudaFree, which waits
for the whole device).

Python sources come from ``python_function`` events (``with_stack=True``). Their names read
``file.py(LINE): function`` where LINE is where the *function starts* (or the line current when tracing
began, for module-level code), not the line of the call, so sources are ``"file.py:LINE (function)"``:
exact to the function, approximate to the line.
"""

from __future__ import annotations

import re
import sys

import numpy as np
import pandas as pd

from collector.syncs import MASKABLE_INDEX_OPS, METHOD_CAUSES, SYNC_OP_CAUSES

SYNC_API_CAUSE: dict[str, str] = {
    "cudaStreamSynchronize": "stream_synchronize",
    "cuStreamSynchronize": "stream_synchronize",
    "cudaDeviceSynchronize": "synchronize",
    "cuCtxSynchronize": "synchronize",
    "cudaEventSynchronize": "event_synchronize",
    "cuEventSynchronize": "event_synchronize",
    "cudaFree": "cuda_free",
    "cuMemFree": "cuda_free",
    "cuMemFree_v2": "cuda_free",
}
"""Host API calls that always block the calling thread until GPU work finishes, and their cause."""

_BLOCKING_COPY_API = re.compile(r"^(cudaMemcpy(?!.*Async)\w*|cuMemcpy(?!.*Async)\w*)$")
"""Synchronous copy APIs (``cudaMemcpy``, ``cudaMemcpy2D``, ``cuMemcpyDtoH_v2`` ...; not the *Async ones)."""

_ASYNC_COPY_API = re.compile(r"^(cudaMemcpy\w*Async\w*|cuMemcpy\w*Async\w*)$")

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
        "torch", "torchvision", "torchaudio", "torchtext", "functorch", "triton", "numpy", "transformers",
        "accelerate", "deepspeed", "apex", "lightning", "pytorch_lightning", "megatron", "timm", "diffusers",
        "peft", "datasets", "tqdm", "streamscope", "collector",
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
    right = pd.DataFrame({"key": iv_key[roots], "t": iv_start[roots], "pos": roots}).sort_values("t")
    left = pd.DataFrame({"key": pt_key, "t": pt_t, "i": np.arange(len(pt_t))}).sort_values("t")
    hit = pd.merge_asof(left, right, on="t", by="key", direction="backward")
    pos = hit["pos"].fillna(-1).to_numpy(dtype=np.int64)
    ok = pos >= 0
    ok[ok] = iv_end[pos[ok]] >= hit["t"].to_numpy()[ok]
    out[hit["i"].to_numpy()[ok]] = pos[ok]
    return out


def python_sources(
    frames: pd.DataFrame, categories: pd.Index, pt_key: np.ndarray, pt_t: np.ndarray, max_depth: int = 512
) -> tuple[np.ndarray, np.ndarray]:
    """Per point: the innermost user frame enclosing it, ``"file.py:LINE (function)"`` or ``""``, and the
    cause named by the outermost Tensor-method frame between the point and that user frame (or ``""``).

    ``frames``: python_function events with columns key (thread), start_ns, end_ns, py_id, parent_id and
    code (index into ``categories``, the frame names). Walks ``Python parent id`` links outward from the
    latest frame that started before the point, vectorized over points (one pass per stack level).
    """
    source = np.full(len(pt_t), "", dtype=object)
    cause = np.full(len(pt_t), "", dtype=object)
    if frames.empty or len(pt_t) == 0:
        return source, cause
    used, codes = np.unique(frames["code"].to_numpy(), return_inverse=True)
    codes = codes.reshape(-1)
    used_names = [str(categories[c]) if c >= 0 else "" for c in used]
    shown = np.array([format_frame(n) if is_user_frame(n) else "" for n in used_names], dtype=object)
    implied = np.array([frame_cause(n) for n in used_names], dtype=object)
    user = shown[codes] != ""
    start = frames["start_ns"].to_numpy(dtype=np.int64)
    end = frames["end_ns"].to_numpy(dtype=np.int64)
    ids = pd.Index(frames["py_id"].to_numpy(dtype=np.int64))
    first = ~ids.duplicated()
    lookup = pd.Index(ids[first])
    positions = np.flatnonzero(first)
    parent_at = lookup.get_indexer(frames["parent_id"].to_numpy(dtype=np.int64))
    parent = np.where(parent_at >= 0, positions[np.maximum(parent_at, 0)], -1)

    right = pd.DataFrame({"key": frames["key"].to_numpy(), "t": start, "pos": np.arange(len(frames))})
    left = pd.DataFrame({"key": pt_key, "t": pt_t, "i": np.arange(len(pt_t))})
    hit = pd.merge_asof(left.sort_values("t"), right.sort_values("t", kind="stable"), on="t", by="key")
    cur = np.full(len(pt_t), -1, dtype=np.int64)
    cur[hit["i"].to_numpy()] = hit["pos"].fillna(-1).to_numpy(dtype=np.int64)
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
