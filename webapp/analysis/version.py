"""Which analysis made a stored analysis: a digest of the code that computes it.

A run's analysis is computed once, at ingest, and stored beside the run. An upgrade of Streamscope may change
what the analysis says of a run (a new finding, a truer cost, a note); a stored analysis that another version
made is computed again from the stored run when it is next read (webapp.pipeline.current_analysis), so no page
shows what an older Streamscope said.
"""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path

SOURCES = ("webapp/analysis", "collector/model.py", "collector/steps.py", "collector/syncrules.py", "collector/ranks")
"""The code an analysis comes from, relative to the repository (a folder: its .py files)."""


@functools.cache
def analysis_version() -> str:
    """16 hex digits of the SHA-256 of SOURCES (paths and contents); "unknown" where they cannot be read."""
    root = Path(__file__).resolve().parents[2]
    digest = hashlib.sha256()
    try:
        for rel in SOURCES:
            path = root / rel
            for file in sorted(path.rglob("*.py")) if path.is_dir() else [path]:
                digest.update(file.relative_to(root).as_posix().encode())
                digest.update(file.read_bytes())
    except OSError:
        return "unknown"
    return digest.hexdigest()[:16]
