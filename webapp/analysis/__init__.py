"""Run analysis: metrics, findings with fixes, what-if estimates and run comparison.

Pure pandas/numpy, no Flask. Entry points: :func:`analyze` (one run) and ``webapp.analysis.compare.compare``
(two runs; import it from its module: ``compare`` here is that module). They are loaded on first use, so that
the small pure modules here (``catalog``, ``units``) import without pandas.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from webapp.analysis.compare import Comparison
    from webapp.analysis.records import Evidence, Finding, RunAnalysis
    from webapp.analysis.run import analyze

_HOMES = {
    "Comparison": "compare",
    "Evidence": "records",
    "Finding": "records",
    "RunAnalysis": "records",
    "analyze": "run",
}

__all__ = ["Comparison", "Evidence", "Finding", "RunAnalysis", "analyze"]


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'webapp.analysis' has no attribute {name!r}")
    return getattr(import_module(f"webapp.analysis.{home}"), name)
