"""What a host thread is, from the names it goes by: the one labelling rule for CPU-thread lanes.

Names come from the operating system (``/proc/self/task/<tid>/comm``, which torch sets for its own threads:
``pt_autograd_0``, ``pt_data_pin``, ``pt_gloo_runloop`` ...), from Python's ``threading`` (``Thread-3
(_pin_memory_loop)``) and from torch.profiler's ``thread_name`` metadata (``thread 587 (pt_autograd_0)``).
:func:`thread_label` is pure; the recorders gather the names of their live threads when they stop, the Kineto
importer reads them from the trace.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

_ROLES: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"^pt_autograd"), "autograd thread {tid}"),
    (re.compile(r"^pt_data_pin$|_pin_memory_loop"), "DataLoader pin-memory thread {tid}"),
    (re.compile(r"^pt_data_worker$|_worker_loop"), "DataLoader worker thread {tid}"),
    (re.compile(r"gloo", re.IGNORECASE), "gloo comm (thread {tid})"),
    (re.compile(r"nccl", re.IGNORECASE), "NCCL thread {tid}"),
)
"""Name patterns of the threads torch starts, and what to call them (first match wins)."""

_PLAIN = re.compile(r"^(python[\d.]*|pt_main_thread|MainThread|Thread-\d+|Dummy-\d+|)$")
"""Names that say nothing of what a thread does (the process's own name, Python's defaults)."""

_KINETO = re.compile(r"^thread (?P<tid>\d+) \((?P<name>.*)\)$")


def thread_label(tid: int, *, main: bool = False, names: Iterable[str] = ()) -> str:
    """The lane label of host thread ``tid``: ``main thread``; ``autograd thread N``, ``DataLoader pin-memory
    thread N``, ``gloo comm (thread N)`` ... for torch's own threads (by any of ``names``); ``thread N (NAME)``
    for a thread with a telling name of its own; else ``thread N``."""
    if main:
        return "main thread"
    given = [n.strip() for n in names if n and n.strip()]
    for pattern, label in _ROLES:
        if any(pattern.search(n) for n in given):
            return label.format(tid=tid)
    own = next((n for n in given if not _PLAIN.match(n)), "")
    return f"thread {tid} ({own})" if own else f"thread {tid}"


def kineto_thread_name(text: str) -> str:
    """The name inside torch.profiler's ``thread N (NAME)`` metadata (the text itself when it is not that)."""
    m = _KINETO.match(text.strip())
    return m.group("name") if m else text
