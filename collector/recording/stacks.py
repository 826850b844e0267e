"""Where the host's time goes: a thread that samples the Python stack of the recorded (main) thread.

Every ``interval_s`` the sampler reads the main thread's current frame (``sys._current_frames``) and walks
it outwards. Consecutive samples with the same stack are one stretch, so a loop that stays in one place
costs one row; at stop each stretch becomes ``(start_ns, end_ns, folded stack)`` where the folded stack is
frames ``func (file:line)`` from the outermost to the innermost joined by ``;`` (the trace's ``sample``
intervals). Files under site-packages are named from there (``torch/utils/data/dataloader.py``), files under
the working directory relative to it.

Each sample holds the GIL for the walk (a few us for a deep stack); at the default 200 Hz that is well under
1% of a host-bound loop (benchmarks/overhead.py measures it).

A sample waits for the GIL, and the main thread gives it up either at its next call that releases it (a CUDA
op, I/O) or when Python's switch interval (5 ms) runs out. With Python work of a few ms between CUDA calls the
first comes first: every sample would land on the CUDA call and none in the Python work, which is where the
time went. So while sampling, the switch interval is at most SWITCH_INTERVAL_S, and a sample lands within
that of when it was due.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable
from types import CodeType, FrameType

DEFAULT_INTERVAL_S = 0.005
"""Seconds between samples (200 Hz)."""
SWITCH_INTERVAL_S = 0.0002
"""Python's switch interval while sampling (seconds; restored at stop): how late a sample may land."""
MAX_DEPTH = 48
"""Frames kept per sample, innermost first; deeper stacks lose their outermost frames."""
SEP = ";"

Key = tuple[tuple[CodeType, int], ...]


class StackSampler:
    """Samples one thread's Python stack on a daemon thread; ``stop()`` returns the stretches."""

    def __init__(
        self,
        thread_id: int | None = None,
        interval_s: float = DEFAULT_INTERVAL_S,
        clock: Callable[[], int] = time.monotonic_ns,
    ) -> None:
        self.thread_id = int(threading.main_thread().ident or 0) if thread_id is None else thread_id
        self.interval_s = float(interval_s)
        self._clock = clock
        self._first: list[int] = []  # per stretch: its first sample's time (ns), its last's, its stack
        self._last: list[int] = []
        self._keys: list[Key] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._switch = sys.getswitchinterval()
        self.samples = 0

    def start(self) -> StackSampler:
        self._switch = sys.getswitchinterval()
        sys.setswitchinterval(min(self._switch, SWITCH_INTERVAL_S))
        self._thread = threading.Thread(target=self._loop, name="streamscope-stack-sampler", daemon=True)
        self._thread.start()
        return self

    def _loop(self) -> None:
        wait = self._stop.wait
        while not wait(self.interval_s):
            self.sample()

    def sample(self) -> None:
        """Take one sample now (the loop calls this; tests call it directly)."""
        frame = sys._current_frames().get(self.thread_id)  # noqa: SLF001 - the documented way to read a stack
        if frame is None:
            return
        key = stack_key(frame)
        now = self._clock()
        self.samples += 1
        if self._keys and self._keys[-1] == key:
            self._last[-1] = now
        else:
            self._first.append(now)
            self._last.append(now)
            self._keys.append(key)

    def stop(self) -> list[tuple[int, int, str]]:
        """Stop sampling; each stretch as (start_ns, end_ns, folded stack), on the sampler's clock. A stretch
        lasts until the next one begins (the last one, one interval past its last sample)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=1.0)
            sys.setswitchinterval(self._switch)
        ends = [*self._first[1:], *self._last[-1:]]
        if ends:
            ends[-1] += int(self.interval_s * 1e9)
        names: dict[Key, str] = {}
        out = []
        for first, end, key in zip(self._first, ends, self._keys, strict=True):
            text = names.get(key)
            if text is None:
                text = names[key] = folded(key)
            out.append((first, end, text))
        return out


def stack_key(frame: FrameType | None) -> Key:
    """The stack from ``frame`` outwards as (code, line) pairs, innermost first, at most MAX_DEPTH."""
    out: list[tuple[CodeType, int]] = []
    while frame is not None and len(out) < MAX_DEPTH:
        out.append((frame.f_code, frame.f_lineno))
        frame = frame.f_back
    return tuple(out)


def folded(key: Key) -> str:
    """A stack key as ``func (file:line)`` frames, outermost first, joined by ``;``."""
    return SEP.join(f"{code.co_name} ({short_path(code.co_filename)}:{line})" for code, line in reversed(key))


_CWD = os.getcwd()


def short_path(path: str) -> str:
    """A source path as people read it: from site-packages on, relative to the working directory, or as is."""
    for marker in ("site-packages/", "dist-packages/"):
        i = path.rfind(marker)
        if i >= 0:
            return path[i + len(marker) :]
    if path.startswith(_CWD + os.sep):
        return os.path.relpath(path, _CWD)
    return path
