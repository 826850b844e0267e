"""Cause spans for CUPTI timing: which Python call, at which user line, made the host wait or copy.

Under CUPTI timing the waits themselves come from the CUDA runtime records (``cudaStreamSynchronize``,
a blocking ``cudaMemcpyAsync`` ...), exact to the nanosecond but with no Python stack. :func:`install`
wraps the few Python entry points that wait or copy, so each outermost call reports
``on_span(cause, start_ns, end_ns, frame, bytes)`` (``time.monotonic_ns``; ``frame`` is the caller's, for
its source line; ``bytes`` the size of the tensor it copies or reads back, which CUPTI records do not always
carry). The recorder then gives every runtime wait inside a span the span's cause and line
(collector.recording.enrich).

Wrapped (:func:`install`): the Tensor methods of collector.syncrules.METHOD_CAUSES, the explicit synchronize
calls, copies to, from or on the GPU (``Tensor.to`` / ``cuda`` / ``copy_``, cause ``""``: their line and bytes)
and the ops whose output size needs the GPU (``nonzero``, ``masked_select``, ``unique``). Only the calls that
can wait pay more than a flag test. Boolean-mask indexing (:func:`install_masked`) is wrapped only while the
recorder names ops: a wrapped ``Tensor.__getitem__`` makes every ``x[i]`` a Python call (0.4-0.5 us; a
DataLoader over a TensorDataset indexes each tensor once per sample, 1,024 calls a batch of 512 pairs). Later
waits of the same indexing are told by the op they follow (collector.recording.enrich).
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from types import FrameType
from typing import Any

from collector.recording.patches import Patches
from collector.syncrules import METHOD_CAUSES

OnSpan = Callable[[str, int, int, FrameType, int], None]
"""``on_span(cause, start_ns, end_ns, caller_frame, bytes)``; bytes of the tensor copied or read back, 0 if none."""

WINDOW_CAUSES = frozenset({"masked_index"})
"""Causes reported only while the recorder names ops (:func:`install_masked`)."""

SIZE_OPS: dict[str, str] = {"nonzero": "nonzero", "masked_select": "masked_index", "unique": "unique"}
"""Tensor methods and torch functions whose output size needs the GPU's answer, and their cause."""

_tls = threading.local()


def _nbytes(t: Any) -> int:
    try:
        return int(t.numel()) * int(t.element_size())
    except (AttributeError, TypeError, RuntimeError):
        return 0


def _spanning(
    orig: Callable[..., Any], cause: str, on_span: OnSpan, sized: bool = False, on_tensor: bool = False
) -> Callable[..., Any]:
    """Report each outermost call; ``sized``: its first argument is the tensor read back (its bytes);
    ``on_tensor``: calls whose first argument is a tensor off the GPU cannot wait and are not reported (an
    optimizer's ``.item()`` of its CPU step counters costs no more than unrecorded)."""
    clock = time.monotonic_ns

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if getattr(_tls, "busy", False) or (on_tensor and args and getattr(args[0], "is_cuda", True) is False):
            return orig(*args, **kwargs)
        _tls.busy = True
        t0 = clock()
        try:
            return orig(*args, **kwargs)
        finally:
            _tls.busy = False
            on_span(cause, t0, clock(), sys._getframe(1), _nbytes(args[0]) if sized and args else 0)

    wrapper.__wrapped__ = orig  # type: ignore[attr-defined]
    wrapper.__doc__ = orig.__doc__
    return wrapper


def _copying(orig: Callable[..., Any], on_span: OnSpan, is_copy_: bool) -> Callable[..., Any]:
    """A copy method reporting a span (cause ``""``) when it made a copy on or to or from the GPU."""
    clock = time.monotonic_ns

    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        if getattr(_tls, "busy", False):
            return orig(self, *args, **kwargs)
        _tls.busy = True
        t0 = clock()
        try:
            out = orig(self, *args, **kwargs)
        finally:
            _tls.busy = False
        other = (args[0] if args else kwargs.get("src")) if is_copy_ else out
        if other is not self and (self.is_cuda or getattr(other, "is_cuda", False)):
            on_span("", t0, clock(), sys._getframe(1), _nbytes(other))
        return out

    wrapper.__wrapped__ = orig  # type: ignore[attr-defined]
    wrapper.__doc__ = orig.__doc__
    return wrapper


def _masked(orig: Callable[..., Any], tensor: Any, boolean: Any, on_span: OnSpan) -> Callable[..., Any]:
    """``x[mask]`` / ``x[mask] = v`` with a boolean CUDA mask: a span with cause ``masked_index``."""
    spanning = _spanning(orig, "masked_index", on_span)

    def wrapper(self: Any, index: Any, *rest: Any) -> Any:
        if type(index) is tensor and index.dtype is boolean and index.is_cuda:
            return spanning(self, index, *rest)
        return orig(self, index, *rest)

    wrapper.__wrapped__ = orig  # type: ignore[attr-defined]
    return wrapper


def install(on_span: OnSpan) -> Callable[[], None]:
    """Patch the waiting and copying entry points of torch (all but indexing); return the undo function."""
    import torch

    patches = Patches()
    patches.set(torch.cuda, "synchronize", _spanning(torch.cuda.synchronize, "synchronize", on_span))
    patches.set(
        torch.cuda.Stream, "synchronize", _spanning(torch.cuda.Stream.synchronize, "stream_synchronize", on_span)
    )
    patches.set(torch.cuda.Event, "synchronize", _spanning(torch.cuda.Event.synchronize, "event_synchronize", on_span))
    for method, cause in METHOD_CAUSES.items():
        spanning = _spanning(getattr(torch.Tensor, method), cause, on_span, sized=True, on_tensor=True)
        patches.set(torch.Tensor, method, spanning)
    for method in ("to", "cuda"):
        patches.set(torch.Tensor, method, _copying(getattr(torch.Tensor, method), on_span, False))
    patches.set(torch.Tensor, "copy_", _copying(torch.Tensor.copy_, on_span, True))
    for name, cause in SIZE_OPS.items():
        patches.set(torch.Tensor, name, _spanning(getattr(torch.Tensor, name), cause, on_span, on_tensor=True))
        patches.set(torch, name, _spanning(getattr(torch, name), cause, on_span, on_tensor=True))
    return patches.undo


def install_masked(on_span: OnSpan) -> Callable[[], None]:
    """Patch ``Tensor.__getitem__`` / ``__setitem__`` for boolean CUDA masks (cause ``masked_index``); return the
    undo function, which may be called more than once."""
    import torch

    patches = Patches()
    for method in ("__getitem__", "__setitem__"):
        patches.set(torch.Tensor, method, _masked(getattr(torch.Tensor, method), torch.Tensor, torch.bool, on_span))
    return patches.undo
