"""Run analysis: metrics, findings with fixes, what-if estimates and run comparison.

Pure pandas/numpy, no Flask. Entry points: :func:`analyze` (one run) and :func:`compare` (two runs).
"""

from __future__ import annotations

from webapp.analysis.compare import Comparison, compare
from webapp.analysis.records import Evidence, Finding, RunAnalysis
from webapp.analysis.run import analyze

__all__ = ["Comparison", "Evidence", "Finding", "RunAnalysis", "analyze", "compare"]
