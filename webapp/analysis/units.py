"""Sizes as the pages, reports and findings write them: binary units, three significant digits."""

from __future__ import annotations

BINARY_UNITS = (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10))
"""Size units, largest first, and their bytes."""


def size_text(nbytes: float) -> str:
    """Bytes in the largest binary unit they reach, 3 significant digits, never an exponent: "64 MiB",
    "6.25 GiB", "1000 MiB", "512 B"."""
    for unit, scale in BINARY_UNITS:
        if abs(nbytes) >= scale:
            return f"{float(f'{nbytes / scale:.3g}'):g} {unit}"
    return f"{nbytes:.0f} B"
