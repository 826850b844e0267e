"""Run names from file names (what reports and notebooks call a run)."""

from __future__ import annotations

from pathlib import Path


def stem(path: str) -> str:
    """A trace file's name without .json/.json.gz/.pt.trace ("runs/naive.json.gz" -> "naive")."""
    name = Path(path).name
    for suffix in (".gz", ".json", ".trace", ".pt"):
        name = name.removesuffix(suffix)
    return name or "run"
