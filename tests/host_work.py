"""Host work of a known length for the tests that check where the host's time goes."""

from __future__ import annotations

import time


def spin(seconds: float) -> None:
    """Keep the calling thread busy in Python for ``seconds``."""
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        sum(range(100))
