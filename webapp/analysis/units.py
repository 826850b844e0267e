"""Sizes and durations as the pages, reports and findings write them: three significant digits (sizes in
binary units); text tables write durations from 1 ms up in ms with three decimals."""

from __future__ import annotations

BINARY_UNITS = (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10))
"""Size units, largest first, and their bytes."""


def size_text(nbytes: float) -> str:
    """Bytes in the largest binary unit they reach, 3 significant digits, never an exponent: "64 MiB",
    "6.25 GiB", "1000 MiB", "512 B"."""
    return _scaled(nbytes, BINARY_UNITS, "B")


TIME_UNITS = (("s", 1e9), ("ms", 1e6), ("µs", 1e3))
"""Duration units, largest first, and their ns."""


def duration_text(ns: float) -> str:
    """Nanoseconds in the largest unit they reach, 3 significant digits, never an exponent: "12.3 ms",
    "447 ns"."""
    return _scaled(ns, TIME_UNITS, "ns")


def table_time_text(ns: float) -> str:
    """Nanoseconds as a text table writes them: ms with three decimals from 1 ms up ("12.346 ms"), below that
    as the pages do (:func:`duration_text`), where three decimals of a ms would hide the figure."""
    return f"{ns / 1e6:.3f} ms" if abs(ns) >= 1e6 or ns == 0 else duration_text(ns)


def _scaled(v: float, units: tuple[tuple[str, float], ...], base_unit: str) -> str:
    """``v`` in the first of ``units`` (largest first) it reaches, 3 significant digits (trailing zeros dropped,
    never an exponent: 1000 MiB, not 1e+03 MiB); else in ``base_unit``."""
    for unit, scale in units:
        if abs(v) >= scale:
            return f"{float(f'{v / scale:.3g}'):g} {unit}"
    return f"{v:.0f} {base_unit}"
