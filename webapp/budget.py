"""The memory budget of ingest: what loading a trace will cost, and a first-come queue against the budget.

Loading a trace file costs about its own size (the file is memory-mapped and read once) plus
``BYTES_PER_EVENT`` per event for the columns, the run table, its analysis and its index, plus a fixed
``OVERHEAD_BYTES``; benchmarks/RESULTS.md has the measurements behind these constants. An ingest holds its
estimate while it loads, analyses and stores; others wait in arrival order until the budget has room.
"""

from __future__ import annotations

import itertools
import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

BYTES_PER_EVENT = 320
"""Peak bytes per event beyond the file itself (measured: about 235 for ours and torch.profiler's)."""
OVERHEAD_BYTES = 64 * 1024**2
"""Peak bytes of one ingest independent of its size (temporaries, the overview payload)."""
DEFAULT_RAM_FRACTION = 0.25
"""``--max-memory`` defaults to this fraction of the machine's physical memory."""


def physical_memory_bytes() -> int:
    """The machine's RAM in bytes (0 when the OS does not say)."""
    try:
        return int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        return 0


def default_budget_bytes() -> int:
    """DEFAULT_RAM_FRACTION of the machine's RAM (4 GiB when it cannot be read)."""
    ram = physical_memory_bytes()
    return int(ram * DEFAULT_RAM_FRACTION) if ram else 4 * 1024**3


def estimate_load_bytes(file_bytes: int, events: int) -> int:
    """Peak memory (bytes) of loading, analysing and storing a plain JSON trace of this size and event count."""
    return file_bytes + events * BYTES_PER_EVENT + OVERHEAD_BYTES


def largest_file_bytes(budget_bytes: int) -> int:
    """The largest plain trace (bytes) whose estimate can fit ``budget_bytes`` (one event, all file)."""
    return max(0, budget_bytes - OVERHEAD_BYTES)


class Cancelled(Exception):
    """The ingest waiting in the queue was given up (its client went away)."""


@dataclass(frozen=True)
class Job:
    """One ingest known to the budget: ``ticket`` (chosen by the client, may be ""), ``state``
    (``queued`` or ``loading``) and its estimate in bytes."""

    seq: int
    ticket: str
    state: str
    need_bytes: int


class MemoryBudget:
    """Admit ingests while their estimates fit ``budget_bytes``; later ones wait in arrival order.

    Thread-safe. An estimate larger than the whole budget must be refused by the caller before
    :meth:`hold` (it would never fit).
    """

    def __init__(self, budget_bytes: int) -> None:
        self.budget_bytes = int(budget_bytes)
        self._cond = threading.Condition()
        self._jobs: dict[int, Job] = {}
        self._seq = itertools.count()

    @property
    def in_use_bytes(self) -> int:
        with self._cond:
            return sum(j.need_bytes for j in self._jobs.values() if j.state == "loading")

    def jobs(self) -> list[Job]:
        """Ingests waiting or running, in arrival order."""
        with self._cond:
            return sorted(self._jobs.values(), key=lambda j: j.seq)

    @contextmanager
    def hold(
        self, need_bytes: int, ticket: str = "", gone: Callable[[], bool] = lambda: False, poll_s: float = 0.5
    ) -> Iterator[None]:
        """Wait until ``need_bytes`` fit (first come, first served), hold them for the ``with`` body.

        ``gone()`` is asked while waiting; when it turns true the wait ends with :class:`Cancelled`.
        """
        if need_bytes > self.budget_bytes:
            raise ValueError("an estimate over the whole budget can never be admitted")
        with self._cond:
            seq = next(self._seq)
            self._jobs[seq] = Job(seq, ticket, "queued", need_bytes)
            try:
                while not self._admissible(seq):
                    if gone():
                        raise Cancelled(ticket)
                    self._cond.wait(poll_s)
            except BaseException:
                del self._jobs[seq]
                self._cond.notify_all()
                raise
            self._jobs[seq] = Job(seq, ticket, "loading", need_bytes)
        try:
            yield
        finally:
            with self._cond:
                del self._jobs[seq]
                self._cond.notify_all()

    def _admissible(self, seq: int) -> bool:
        """The oldest waiting job goes first, when its estimate fits beside the running ones."""
        waiting = [j.seq for j in self._jobs.values() if j.state == "queued"]
        if min(waiting) != seq:
            return False
        used = sum(j.need_bytes for j in self._jobs.values() if j.state == "loading")
        return used + self._jobs[seq].need_bytes <= self.budget_bytes


def get_budget() -> MemoryBudget:
    """The MemoryBudget of the current app (use inside a request)."""
    from flask import current_app

    budget: MemoryBudget = current_app.extensions["streamscope.budget"]
    return budget
