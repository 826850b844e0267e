"""Host waits while recording: :func:`install` wraps ``torch.cuda.synchronize``, ``Stream.synchronize``,
``Event.synchronize`` (each wait measured on the host) and gives ``Tensor.item`` / ``__bool__`` /
``tolist`` / ``numpy`` / ``cpu`` / ``__repr__`` / ``__format__`` a *cause context*, so the blocking op they
run inside is reported as ``item``, ``bool``, ``print``, ... rather than as a bare copy. The rules live in
collector.syncrules.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from collector.recording.patches import Patches
from collector.syncrules import METHOD_CAUSES, WHOLE_CALL_CAUSE

_tls = threading.local()


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

    patches = Patches()
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
