"""Where the host's time goes: a thread that samples the Python stack of the recorded (main) thread.

Every ``interval_s`` the sampler reads the main thread's current frame (``sys._current_frames``) and walks
it outwards, keeping each frame's code and instruction offset. Consecutive samples with the same stack are
one stretch, so a loop that stays in one place costs one row; at stop each stretch becomes ``(start_ns,
end_ns, folded stack)`` where the folded stack is frames ``func (file:line)`` from the outermost to the
innermost joined by ``;`` (the trace's ``sample`` intervals). Files under site-packages are named from there
(``torch/utils/data/dataloader.py``), files under the working directory relative to it.

Each sample holds the GIL for the walk, a few us for a deep stack, because it reads no line numbers: a
frame's ``f_lineno`` scans its code's line table from the start, which on a stack of 40 frames of 800-line
functions took 0.37 ms a sample against 9 us (benchmarks/stack_sampling.py ``--sample-cost``); frameworks'
stacks are of such functions (a Trainer's training loop, a model's forward). Lines are looked up at stop,
once per distinct instruction.

A sample waits for the GIL, and the main thread gives it up either at its next call that releases it (a CUDA
op, I/O) or when Python's switch interval (5 ms) runs out. With Python work of a few ms between CUDA calls the
first comes first: every sample would land on the CUDA call and none in the Python work, which is where the
time went. So while sampling, the switch interval is at most SWITCH_INTERVAL_S, and a sample lands within
that of when it was due.
"""

from __future__ import annotations

import bisect
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
"""A sampled stack: (code, byte offset of the frame's current instruction) per frame, innermost first."""


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
        self._distinct: dict[Key, Key] = {}
        """Each distinct stack once: a stretch refers to it, so memory grows with the program's stacks, not
        with its samples (a long run's instruction offsets change at almost every sample)."""
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

    @property
    def native_id(self) -> int | None:
        """The sampling thread's OS id (None before :meth:`start`)."""
        return self._thread.native_id if self._thread is not None else None

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
            self._keys.append(self._distinct.setdefault(key, key))

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
        lines = LineTable()
        out: list[tuple[int, int, str]] = []
        for first, end, key in zip(self._first, ends, self._keys, strict=True):
            text = names.get(key)
            if text is None:
                text = names[key] = folded(key, lines)
            if out and out[-1][2] == text:  # another instruction of the same lines: one stretch
                out[-1] = (out[-1][0], end, text)
            else:
                out.append((first, end, text))
        return out


def stack_key(frame: FrameType | None) -> Key:
    """The stack from ``frame`` outwards as (code, instruction offset) pairs, innermost first, at most
    MAX_DEPTH. The offset (``f_lasti``) is read as is; ``f_lineno`` would scan the code's line table."""
    out: list[tuple[CodeType, int]] = []
    while frame is not None and len(out) < MAX_DEPTH:
        out.append((frame.f_code, frame.f_lasti))
        frame = frame.f_back
    return tuple(out)


class LineTable:
    """Source lines of instruction offsets, each code's line table read once (``co_lines``)."""

    def __init__(self) -> None:
        self._tables: dict[CodeType, tuple[list[int], list[int]]] = {}

    def line(self, code: CodeType, offset: int) -> int:
        """The line of the instruction at byte ``offset`` of ``code``, as the frame's ``f_lineno`` reads it
        there; for an instruction without a line of its own (``f_lineno`` None), the line of the code before
        it, or the code's first line."""
        table = self._tables.get(code)
        if table is None:
            starts, lines, last = [], [], code.co_firstlineno
            for start, _end, line in code.co_lines():
                last = line if line is not None else last
                starts.append(start)
                lines.append(last)
            table = self._tables[code] = (starts, lines)
        at = bisect.bisect_right(table[0], offset) - 1
        return table[1][at] if at >= 0 else code.co_firstlineno


def folded(key: Key, lines: LineTable | None = None) -> str:
    """A stack key as ``func (file:line)`` frames, outermost first, joined by ``;``."""
    table = lines or LineTable()
    return SEP.join(
        f"{code.co_name} ({short_path(code.co_filename)}:{table.line(code, at)})" for code, at in reversed(key)
    )


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
