"""``streamscope analyze`` and ``streamscope compare``: output and exit codes, run in-process."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from analysis_traces import clean_run, pageable_run

from collector.traceformat.write import write_trace
from webapp.cli import main


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    d = tmp_path_factory.mktemp("runs")
    out = {}
    for name, t in (("slow", pageable_run(3)), ("fast", clean_run(3))):
        path = d / f"{name}.json.gz"
        write_trace(t, str(path))
        out[name] = str(path)
    return out


def test_analyze_prints_metrics_findings_and_what_if(files, capsys) -> None:
    assert main(["analyze", files["slow"]]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^  Median step +28\.000 ms$", out, re.MULTILINE)
    assert "[CRITICAL] pageable-copy" in out and "where: train.py:10" in out and "fix: Copy from pinned" in out
    assert "estimated 15.980 ms" in out  # the copies pinned and prefetched: the kernels alone, back to back


def test_analyze_json(files, capsys) -> None:
    assert main(["analyze", files["slow"], "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["metrics"]["step_time_median_ns"] == 28_000_000
    assert [f["rule"] for f in data["findings"]] == ["no-copy-overlap", "pageable-copy"]
    assert len(data["per_step"]) == 3 and data["what_if"]["step_time_fixed_ns"] == 15_980_000


def test_analyze_missing_file_exits_2(tmp_path: Path, capsys) -> None:
    assert main(["analyze", str(tmp_path / "nope.json")]) == 2
    assert "no such file" in capsys.readouterr().err


def test_analyze_bad_file_exits_2(tmp_path: Path, capsys) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    assert main(["analyze", str(bad)]) == 2
    assert capsys.readouterr().err.strip()


def test_compare_exit_codes(files, capsys) -> None:
    # B = slow is 75% slower than A = fast
    assert main(["compare", files["fast"], files["slow"], "--fail-if-slower", "5%"]) == 1
    out = capsys.readouterr().out
    assert "FAIL" in out and "+75.0%" in out and "findings new: no-copy-overlap, pageable-copy" in out
    assert main(["compare", files["fast"], files["slow"], "--fail-if-slower", "80%"]) == 0
    assert main(["compare", files["slow"], files["fast"], "--fail-if-slower", "5"]) == 0
    assert main(["compare", files["fast"], files["slow"]]) == 0


def test_compare_json_and_bad_input(files, tmp_path: Path, capsys) -> None:
    assert main(["compare", files["fast"], files["slow"], "--json", "--fail-if-slower", "5%"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert data["failed"] is True and data["step_time_change"] == pytest.approx(0.75)
    assert main(["compare", files["fast"], files["slow"], "--fail-if-slower", "five"]) == 2
    assert main(["compare", files["fast"], str(tmp_path / "missing.json")]) == 2
