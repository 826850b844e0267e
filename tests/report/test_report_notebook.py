"""Notebooks: the light `streamscope` package, load() giving DataFrames and analysis objects, the HTML repr."""

from __future__ import annotations

import html
import subprocess
import sys
import types

import pandas as pd
import pytest

import streamscope
from collector.load import load_trace
from webapp import PACKAGE_ROOT

NAIVE = PACKAGE_ROOT / "sample_traces" / "naive.json.gz"


def test_importing_streamscope_imports_nothing_heavy() -> None:
    code = (
        "import sys, streamscope; "
        "print(','.join(m for m in ('pandas', 'numpy', 'flask', 'torch', 'plotly', 'webapp') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=PACKAGE_ROOT, check=True)
    assert out.stdout.strip() == ""


@pytest.fixture(scope="module")
def run() -> streamscope.Run:
    return streamscope.load(NAIVE)


def test_load_gives_the_run_frame_and_the_analysis(run: streamscope.Run) -> None:
    n = len(load_trace(NAIVE).intervals)
    assert isinstance(run.frame, pd.DataFrame) and len(run.frame) == n
    assert {"start_ns", "end_ns", "kind", "name", "lane"} <= set(run.frame.columns)
    assert run.metrics["steps"] == 100 and run.metrics.name == "naive"
    assert {f.rule for f in run.findings[:2]} == {"pageable-copy", "no-copy-overlap"}
    assert len(run.per_step) == 100 and "step_time_ns" in run.per_step
    assert repr(run) == f"<streamscope.Run 'naive': {n:,} intervals, 100 steps, {len(run.findings)} findings>"


def test_html_repr_is_the_report_in_an_isolated_frame(run: streamscope.Run) -> None:
    out = run._repr_html_()
    assert out.startswith("<iframe srcdoc=") and 'sandbox="allow-scripts"' in out
    inner = html.unescape(out.split('srcdoc="', 1)[1].split('"', 1)[0])
    assert inner.startswith("<!doctype html>") and '"mode": "run"' in inner
    assert "<script" not in out  # every tag of the report is inside the attribute, escaped


def test_show_displays_through_ipython(run: streamscope.Run, monkeypatch: pytest.MonkeyPatch) -> None:
    shown: list[object] = []
    display_mod = types.ModuleType("IPython.display")
    display_mod.display = shown.append  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "IPython.display", display_mod)
    assert streamscope.show(run) is run and shown == [run]
    other = streamscope.show(NAIVE)
    assert isinstance(other, streamscope.Run) and shown[-1] is other


def test_compare_in_a_notebook(run: streamscope.Run) -> None:
    both = streamscope.compare(run, PACKAGE_ROOT / "sample_traces" / "overlap.json.gz")
    assert both.result.findings["fixed"] and "pageable-copy" in both.result.findings["fixed"]
    assert "&quot;mode&quot;: &quot;compare&quot;" in both._repr_html_()


def test_a_bad_file_raises_one_clear_error(tmp_path) -> None:
    from collector.errors import StreamscopeError

    bad = tmp_path / "bad.json"
    bad.write_text('{"traceEvents": [')
    with pytest.raises(StreamscopeError, match="bad.json"):
        streamscope.load(bad)
