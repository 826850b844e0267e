"""Sync detection: which ops make the host wait, and why.

Pure rules (testable without a GPU): :func:`copy_kind`, :func:`copy_blocks`, :func:`implicit_sync_cause`.
Patching (while recording): :func:`install` wraps ``torch.cuda.synchronize``, ``Stream.synchronize``,
``Event.synchronize`` (each wait measured on the host) and gives ``Tensor.item`` / ``__bool__`` /
``tolist`` / ``numpy`` / ``cpu`` / ``__repr__`` / ``__format__`` a *cause context*, so the blocking op they
run inside is reported as ``item``, ``bool``, ``print``, ... rather than as a bare copy.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from collector.model import IntervalKind

SYNC_OP_CAUSES: dict[str, str] = {
    "aten::_local_scalar_dense": "item",
    "aten::is_nonzero": "bool",
    "aten::equal": "item",
    "aten::nonzero": "nonzero",
    "aten::argwhere": "nonzero",
    "aten::masked_select": "masked_index",
    "aten::_unique": "unique",
    "aten::_unique2": "unique",
    "aten::unique_dim": "unique",
    "aten::unique_consecutive": "unique",
}
"""Ops that always make the host wait for the GPU (a value or an output size must come back)."""

MASKABLE_INDEX_OPS = frozenset({"aten::index", "aten::index_put_", "aten::_index_put_impl_"})
"""Ops that wait when indexed with a boolean mask (the mask is turned into indices on the host)."""

METHOD_CAUSES: dict[str, str] = {
    "item": "item",
    "__bool__": "bool",
    "tolist": "tolist",
    "numpy": "numpy",
    "cpu": "cpu",
    "__repr__": "print",
    "__format__": "print",
}
"""Tensor methods whose blocking op is reported with this cause (the outermost one wins)."""

WHOLE_CALL_CAUSE = "print"
"""The cause whose method calls are timed whole as one wait (ops inside are not separate waits)."""

_tls = threading.local()


def copy_kind(src_is_cuda: bool, dst_is_cuda: bool) -> IntervalKind:
    """The interval kind of a copy between host (False) and device (True) memory."""
    if src_is_cuda and dst_is_cuda:
        return IntervalKind.MEMCPY_D2D
    return IntervalKind.MEMCPY_D2H if src_is_cuda else IntervalKind.MEMCPY_H2D


def copy_blocks(kind: IntervalKind, host_pinned: bool, non_blocking: bool) -> bool:
    """Whether the host waits for a copy: any host copy unless it is pinned *and* non_blocking."""
    if kind is IntervalKind.MEMCPY_D2D:
        return False
    return not (host_pinned and non_blocking)


def implicit_sync_cause(op: str, has_bool_index: bool = False) -> str:
    """Cause of the host wait an op implies by itself (``""`` if it does not wait)."""
    cause = SYNC_OP_CAUSES.get(op, "")
    if not cause and has_bool_index and op in MASKABLE_INDEX_OPS:
        cause = "masked_index"
    return cause


def current_cause() -> str:
    """The cause context of this thread (``""`` outside any)."""
    return getattr(_tls, "cause", "")


class cause_context:
    """Set this thread's cause context unless one is already set (the outermost call wins)."""

    __slots__ = ("cause", "owner")

    def __init__(self, cause: str) -> None:
        self.cause = cause
        self.owner = False

    def __enter__(self) -> cause_context:
        if not getattr(_tls, "cause", ""):
            _tls.cause = self.cause
            self.owner = True
        return self

    def __exit__(self, *exc: object) -> None:
        if self.owner:
            _tls.cause = ""


HostWait = Callable[[str, str, int, int], None]
"""``on_wait(name, cause, start_ns, end_ns)`` called after each measured host wait."""

_MISSING = object()


class _Patches:
    """Attribute patches that can be undone in reverse order."""

    def __init__(self) -> None:
        self._saved: list[tuple[Any, str, Any]] = []

    def set(self, owner: Any, name: str, value: Any) -> None:
        self._saved.append((owner, name, owner.__dict__.get(name, _MISSING)))
        setattr(owner, name, value)

    def undo(self) -> None:
        while self._saved:
            owner, name, old = self._saved.pop()
            if old is _MISSING:
                delattr(owner, name)
            else:
                setattr(owner, name, old)


def _wait_wrapper(orig: Callable[..., Any], name: str, cause: str, on_wait: HostWait) -> Callable[..., Any]:
    clock = time.monotonic_ns

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        t0 = clock()
        try:
            return orig(*args, **kwargs)
        finally:
            on_wait(name, cause, t0, clock())

    wrapper.__wrapped__ = orig  # type: ignore[attr-defined]
    wrapper.__doc__ = orig.__doc__
    return wrapper


def _cause_wrapper(orig: Callable[..., Any], cause: str, on_wait: HostWait | None = None) -> Callable[..., Any]:
    """Run ``orig`` in a cause context; with ``on_wait``, also report the whole call as one host wait
    (used for printing, which torch runs with dispatch modes disabled, so its copies are not seen)."""
    clock = time.monotonic_ns
    name = f"Tensor.{orig.__name__}"

    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        if getattr(_tls, "cause", "") or not getattr(self, "is_cuda", False):
            return orig(self, *args, **kwargs)
        _tls.cause = cause
        t0 = clock()
        try:
            return orig(self, *args, **kwargs)
        finally:
            _tls.cause = ""
            if on_wait is not None:
                on_wait(name, cause, t0, clock())

    wrapper.__wrapped__ = orig  # type: ignore[attr-defined]
    wrapper.__doc__ = orig.__doc__
    return wrapper


def install(on_wait: HostWait) -> Callable[[], None]:
    """Patch torch's explicit syncs and the cause-giving Tensor methods; return the undo function."""
    import torch

    patches = _Patches()
    patches.set(
        torch.cuda,
        "synchronize",
        _wait_wrapper(torch.cuda.synchronize, "cudaDeviceSynchronize", "synchronize", on_wait),
    )
    stream_sync = torch.cuda.Stream.synchronize
    patches.set(
        torch.cuda.Stream,
        "synchronize",
        _wait_wrapper(stream_sync, "cudaStreamSynchronize", "stream_synchronize", on_wait),
    )
    event_sync = torch.cuda.Event.synchronize
    patches.set(
        torch.cuda.Event,
        "synchronize",
        _wait_wrapper(event_sync, "cudaEventSynchronize", "event_synchronize", on_wait),
    )
    for method, cause in METHOD_CAUSES.items():
        orig = getattr(torch.Tensor, method)
        whole = on_wait if cause == WHOLE_CALL_CAUSE else None
        patches.set(torch.Tensor, method, _cause_wrapper(orig, cause, whole))
    return patches.undo
