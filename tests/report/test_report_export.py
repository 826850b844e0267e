"""--mlflow / --wandb: headline metrics and the report logged to the trackers.

The fake-module tests always run; the real ones run where mlflow / wandb are installed (their local file
store and offline mode: no server, no network) and are skipped elsewhere.
"""

from __future__ import annotations

import sys
import types
from pathlib import Path
from typing import Any

import pytest

from webapp import PACKAGE_ROOT
from webapp.cli import main
from webapp.report.export import PREFIX, ExportError, headline_metrics, to_mlflow

NAIVE, OVERLAP = (str(PACKAGE_ROOT / "sample_traces" / f"{n}.json.gz") for n in ("naive", "overlap"))


def fake_mlflow(log: dict[str, Any]) -> types.ModuleType:
    m = types.ModuleType("mlflow")
    run = types.SimpleNamespace(info=types.SimpleNamespace(run_id="r123"))
    m.active_run = lambda: None  # type: ignore[attr-defined]
    m.start_run = lambda run_name: log.setdefault("started", run_name) and run  # type: ignore[attr-defined]
    m.log_metrics = lambda metrics: log.setdefault("metrics", metrics)  # type: ignore[attr-defined]
    m.log_artifact = lambda path: log.setdefault("artifact", path)  # type: ignore[attr-defined]
    m.get_tracking_uri = lambda: "file:///tmp/mlruns"  # type: ignore[attr-defined]
    m.end_run = lambda: log.setdefault("ended", True)  # type: ignore[attr-defined]
    return m


def fake_wandb(log: dict[str, Any]) -> types.ModuleType:
    w = types.ModuleType("wandb")

    class Run:
        id = "w456"
        summary: dict[str, float] = {}

        def log(self, metrics: dict[str, float]) -> None:
            log["logged"] = metrics

        def log_artifact(self, art: Any) -> None:
            log["artifact"] = (art.name, art.type, art.files)

        def finish(self) -> None:
            log["finished"] = True

    class Artifact:
        def __init__(self, name: str, type: str) -> None:
            self.name, self.type = name, type
            self.files: list[str] = []

        def add_file(self, path: str) -> None:
            self.files.append(path)

    def init(**kw: Any) -> Run:
        log["init"] = kw
        run = Run()
        run.summary = {}
        log["run"] = run
        return run

    w.run = None  # type: ignore[attr-defined]
    w.init = init  # type: ignore[attr-defined]
    w.Artifact = Artifact  # type: ignore[attr-defined]
    return w


def test_headline_metrics_are_prefixed_and_finite() -> None:
    got = headline_metrics({"step_time_median_ns": 5.0, "gpu_busy_frac": float("nan"), "intervals": 3}, {"x": 1})
    assert got == {PREFIX + "step_time_median_ns": 5.0, PREFIX + "x": 1.0}


def test_report_logs_to_a_fake_mlflow(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    log: dict[str, Any] = {}
    monkeypatch.setitem(sys.modules, "mlflow", fake_mlflow(log))
    out = tmp_path / "r.html"
    assert main(["report", NAIVE, "--out", str(out), "--mlflow"]) == 0
    assert log["started"] == "naive" and log["artifact"] == str(out) and log["ended"]
    assert log["metrics"][PREFIX + "step_time_median_ns"] > 0
    assert "logged to MLflow run r123" in capsys.readouterr().out


def test_compare_logs_to_a_fake_wandb(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log: dict[str, Any] = {}
    monkeypatch.setitem(sys.modules, "wandb", fake_wandb(log))
    diff = tmp_path / "diff.html"
    assert main(["compare", NAIVE, OVERLAP, "--report", str(diff), "--wandb", "perf", "--json"]) == 0
    assert log["init"]["project"] == "perf" and log["finished"]
    assert log["artifact"] == ("streamscope-overlap-vs-naive", "streamscope-report", [str(diff)])
    assert log["run"].summary[PREFIX + "step_time_change_frac"] < 0
    assert log["logged"] == log["run"].summary


def test_a_tracker_error_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    fake = fake_mlflow({})

    def refuse(metrics: dict[str, float]) -> None:
        raise RuntimeError("tracking server refused\nlong traceback text")

    fake.log_metrics = refuse  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "mlflow", fake)
    assert main(["report", NAIVE, "--out", str(tmp_path / "r.html"), "--mlflow"]) == 2
    assert capsys.readouterr().err.strip() == "streamscope report: error: mlflow: tracking server refused"


def test_a_missing_tracker_is_a_clear_error(monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    monkeypatch.setitem(sys.modules, "mlflow", None)  # import fails
    with pytest.raises(ExportError, match="pip install -e '\\.\\[mlflow\\]' in the Streamscope checkout"):
        to_mlflow({}, None, "x")
    assert main(["report", NAIVE, "--out", "/dev/null", "--mlflow"]) == 2
    assert "needs the mlflow package" in capsys.readouterr().err


def test_real_mlflow_file_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    mlflow = pytest.importorskip("mlflow")
    monkeypatch.setenv("MLFLOW_TRACKING_URI", (tmp_path / "mlruns").as_uri())
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")  # the local store without a database
    out = tmp_path / "r.html"
    assert main(["report", NAIVE, "--out", str(out), "--mlflow"]) == 0
    runs = mlflow.search_runs(search_all_experiments=True, output_format="list")
    assert len(runs) == 1 and runs[0].data.metrics[PREFIX + "steps"] == 100
    artifacts = mlflow.artifacts.download_artifacts(run_id=runs[0].info.run_id, dst_path=str(tmp_path / "dl"))
    assert (Path(artifacts) / "r.html").read_bytes() == out.read_bytes()


def test_real_wandb_offline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("wandb")
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_DIR", str(tmp_path))
    monkeypatch.setenv("WANDB_SILENT", "true")
    out = tmp_path / "r.html"
    assert main(["report", NAIVE, "--out", str(out), "--wandb", "streamscope-test"]) == 0
    runs = list((tmp_path / "wandb").glob("offline-run-*/*.wandb"))
    assert len(runs) == 1
    records = runs[0].read_bytes()  # the offline run's records, synced later with `wandb sync`
    for text in (PREFIX + "step_time_median_ns", "streamscope-naive", "streamscope-report"):
        assert text.encode() in records
