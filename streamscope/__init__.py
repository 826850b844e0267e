"""Streamscope in notebooks and scripts: ``load`` a trace into a :class:`Run`, ``show`` its report inline.

    import streamscope
    run = streamscope.load("run.json.gz")   # run.frame: the intervals; run.analysis: metrics, findings, ...
    run                                     # in Jupyter: the same report as `streamscope report`
    streamscope.show("other.json.gz")       # load and display in one call

Importing this package imports nothing heavy (no pandas, numpy, Flask or torch); they load on first use.
"""

from __future__ import annotations

import html
import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd

    from collector.model import Trace
    from webapp.analysis import Comparison, Finding, RunAnalysis
    from webapp.report import PreparedRun

__all__ = ["Compared", "Run", "compare", "load", "show"]

IFRAME_HEIGHT_PX = 900


@dataclass(frozen=True, eq=False)
class Run:
    """One loaded, analysed run. ``trace`` the whole run (intervals, lanes, markers, metadata);
    ``analysis`` its RunAnalysis (``metrics``, ``per_step``, ``kernels``, ``findings``, ``what_if``, ...)."""

    name: str
    trace: Trace
    analysis: RunAnalysis
    _prepared: list[PreparedRun] = field(default_factory=list, repr=False)

    @property
    def frame(self) -> pd.DataFrame:
        """The run DataFrame: one row per interval (columns and units in collector.model.INTERVAL_COLUMNS)."""
        return self.trace.intervals

    @property
    def metrics(self) -> pd.Series:
        """The run's metrics as a Series indexed by catalogue key (units in the key)."""
        import pandas as pd

        return pd.Series(self.analysis.metrics, name=self.name, dtype="float64")

    @property
    def findings(self) -> tuple[Finding, ...]:
        return self.analysis.findings

    @property
    def per_step(self) -> pd.DataFrame:
        return self.analysis.per_step

    def prepared(self) -> PreparedRun:
        """The run with its level-of-detail index (built once, for reports)."""
        if not self._prepared:
            from webapp.report import prepare_run

            self._prepared.append(prepare_run(self.trace, self.name, self.analysis))
        return self._prepared[0]

    def report_html(self) -> str:
        """The full report, as `streamscope report` writes it."""
        from webapp.report import run_report

        return run_report(self.prepared())

    def save_report(self, path: str | os.PathLike[str]) -> str:
        """Write the report to ``path``; returns the path."""
        with open(path, "w", encoding="utf-8") as out:
            out.write(self.report_html())
        return os.fspath(path)

    def _repr_html_(self) -> str:
        return iframe(self.report_html(), f"Streamscope report: {self.name}")

    def __repr__(self) -> str:
        m = self.analysis.metrics
        return (
            f"<streamscope.Run {self.name!r}: {len(self.trace.intervals):,} intervals, "
            f"{int(m.get('steps', 0))} steps, {len(self.analysis.findings)} findings>"
        )


@dataclass(frozen=True, eq=False)
class Compared:
    """Two runs compared: ``result`` the Comparison (``metrics``, ``ops``, ``findings`` tables)."""

    a: Run
    b: Run
    result: Comparison

    def report_html(self) -> str:
        from webapp.report import compare_report

        return compare_report(self.a.prepared(), self.b.prepared())[2]

    def _repr_html_(self) -> str:
        return iframe(self.report_html(), f"Streamscope comparison: {self.b.name} vs {self.a.name}")


def iframe(document: str, title: str) -> str:
    """``document`` inside a sandboxed ``srcdoc`` iframe: its styles and scripts stay out of the notebook."""
    return (
        f'<iframe srcdoc="{html.escape(document, quote=True)}" title="{html.escape(title, quote=True)}" '
        f'sandbox="allow-scripts" style="width: 100%; height: {IFRAME_HEIGHT_PX}px; border: 1px solid #e2e5ec; '
        'border-radius: 6px"></iframe>'
    )


def load(path: str | os.PathLike[str], *, step_at: str | None = None, name: str | None = None) -> Run:
    """Read and analyse a Streamscope or torch.profiler trace (.json or .json.gz).

    Raises collector.errors.StreamscopeError (TraceFileError) with a one-line message for a bad file."""
    from collector.load import load_trace
    from webapp.analysis import analyze
    from webapp.report.names import stem

    trace = load_trace(path, step_at=step_at)
    return Run(name or stem(os.fspath(path)), trace, analyze(trace))


def compare(a: Run | str | os.PathLike[str], b: Run | str | os.PathLike[str]) -> Compared:
    """Compare run A (baseline) with run B; either may be a path or a loaded Run."""
    from webapp.analysis.compare import compare_analyses

    ra, rb = (x if isinstance(x, Run) else load(x) for x in (a, b))
    return Compared(ra, rb, compare_analyses(ra.analysis, rb.analysis, ra.trace, rb.trace))


def show(run: Run | Compared | str | os.PathLike[str]) -> Run | Compared:
    """Display a run's report inline in Jupyter (load it first when given a path); returns the run.
    Outside IPython it only returns the run."""
    obj = run if isinstance(run, (Run, Compared)) else load(run)
    try:
        from IPython.display import display
    except ImportError:
        return obj
    display(obj)
    return obj
