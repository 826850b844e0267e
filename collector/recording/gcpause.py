"""Python's cyclic garbage collector held off while the recorder starts and stops.

Starting and stopping make thousands of short-lived containers (rows, frames, dicts of columns). Their count can
trigger a full collection, which walks every object the program holds: once torch is imported that is a
million objects and 0.1 s or more, charged to whichever allocation tipped it over, here the recorder's stop.
Within :func:`paused_gc` nothing is collected; what the block leaves behind is collected afterwards as usual
(the collector counts only the net allocations, so a block that frees what it made adds nothing to that count).
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def paused_gc() -> Iterator[None]:
    """No cyclic garbage collection within the block; the collector is left as it was found (a program that
    disabled it keeps it disabled)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
