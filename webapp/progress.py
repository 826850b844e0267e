"""Progress of long commands on stderr, only when stderr is a terminal (pipes and CI logs stay quiet).

``Progress("report")`` prints one line that it rewrites in place: the stage under way and the seconds it
has taken so far (a ticker thread refreshes the count), then :meth:`Progress.done` ends with a one-line
summary and the total time. The clock is injectable and the ticker optional, so tests need no real time.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TextIO

CLEAR = "\r\x1b[K"
"""Carriage return and erase-line: the next text replaces the progress line."""


def is_terminal(stream: TextIO) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # closed or not a real stream
        return False


class Progress:
    """Stages of one command. Disabled (every method a no-op) unless ``stream`` is a terminal or
    ``enabled`` says so; ``tick_s`` None draws only at stage changes (no thread)."""

    def __init__(
        self,
        command: str,
        stream: TextIO | None = None,
        *,
        enabled: bool | None = None,
        clock: Callable[[], float] = time.monotonic,
        tick_s: float | None = 0.25,
    ) -> None:
        self.command = command
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = is_terminal(self.stream) if enabled is None else enabled
        self.clock = clock
        self.tick_s = tick_s
        self.started = clock()
        self.stages: list[tuple[str, float]] = []  # (stage, seconds), finished ones
        self._what = ""
        self._since = self.started
        self._lock = threading.Lock()

    def _draw(self) -> None:
        with self._lock:
            if self._what:
                elapsed = self.clock() - self._since
                self.stream.write(f"{CLEAR}streamscope {self.command}: {self._what}… {elapsed:.1f} s")
                self.stream.flush()

    @contextmanager
    def stage(self, what: str) -> Iterator[None]:
        """Show ``what`` while the block runs (with its elapsed seconds); record how long it took."""
        self._what, self._since = what, self.clock()
        stop = threading.Event()
        ticker = None
        if self.enabled:
            self._draw()
            if self.tick_s:
                ticker = threading.Thread(target=self._tick, args=(stop, self.tick_s), daemon=True)
                ticker.start()
        try:
            yield
        except BaseException:
            self.clear()  # an error message follows on a clean line
            raise
        finally:
            stop.set()
            if ticker is not None:
                ticker.join()
            self.stages.append((what, self.clock() - self._since))
            self._what = ""

    def _tick(self, stop: threading.Event, tick_s: float) -> None:
        while not stop.wait(tick_s):
            self._draw()

    def done(self, summary: str) -> None:
        """Replace the progress line with ``summary`` and the total seconds (on a terminal only)."""
        if self.enabled:
            total = self.clock() - self.started
            with self._lock:
                self.stream.write(f"{CLEAR}streamscope {self.command}: {summary} in {total:.1f} s\n")
                self.stream.flush()

    def clear(self) -> None:
        """Erase the progress line (before an error message)."""
        if self.enabled:
            with self._lock:
                self.stream.write(CLEAR)
                self.stream.flush()
