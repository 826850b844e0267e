"""Labels of this process's live threads, taken when a recording stops (collector.importers.threads names them).

A thread's names: the operating system's (``/proc/self/task/<tid>/comm``: torch names its own threads
``pt_autograd_0``, ``pt_data_pin``, ``pt_gloo_runloop`` ...) and Python's (``threading``). Threads that ended
before the stop keep the label the trace gave them (``thread N``).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping, Sequence
from dataclasses import replace

from collector.importers.threads import thread_label
from collector.model import Lane, LaneKind


def _os_names() -> dict[int, str]:
    names: dict[int, str] = {}
    try:
        tids = os.listdir("/proc/self/task")
    except OSError:  # not Linux: Python's names only
        return names
    for tid in tids:
        try:
            with open(f"/proc/self/task/{tid}/comm", encoding="utf-8", errors="replace") as f:
                names[int(tid)] = f.read().strip()
        except (OSError, ValueError):
            continue
    return names


def live_thread_labels() -> dict[int, str]:
    """Native thread id -> label (:func:`thread_label`) for every live thread of this process."""
    names: dict[int, list[str]] = {tid: [n] for tid, n in _os_names().items()}
    for t in threading.enumerate():
        if t.native_id is not None and not isinstance(t, threading._DummyThread):
            names.setdefault(t.native_id, []).append(t.name)
    main = threading.main_thread().native_id
    return {tid: thread_label(tid, main=tid == main, names=n) for tid, n in names.items()}


def relabel_threads(lanes: Sequence[Lane], labels: Mapping[int, str]) -> tuple[Lane, ...]:
    """``lanes`` with each CPU-thread lane whose id is in ``labels`` labelled so."""
    return tuple(
        replace(ln, label=labels[ln.ident]) if ln.kind is LaneKind.CPU_THREAD and ln.ident in labels else ln
        for ln in lanes
    )
