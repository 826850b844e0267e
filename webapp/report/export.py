"""Log a run's headline metrics, and its report as an artifact, to MLflow or Weights & Biases.

Both are optional extras (``pip install -e '.[mlflow]'`` / ``'.[wandb]'`` in the checkout), imported
only when asked. Each logs into the active run when there is one, else starts and ends its own; both
honour their usual settings (``MLFLOW_TRACKING_URI``; ``WANDB_MODE=offline``, ``WANDB_DIR``, ...).
Metric names are ``streamscope/<catalogue key>`` (units in the name, as everywhere).
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

from collector.errors import StreamscopeError
from webapp.analysis import catalog

PREFIX = "streamscope/"


class ExportError(StreamscopeError):
    """The tracking package is missing or refused the data (exit code 2)."""


def _module(name: str) -> ModuleType:
    try:
        return importlib.import_module(name)
    except ImportError:
        raise ExportError(
            f"--{name} needs the {name} package: pip install -e '.[{name}]' in the Streamscope checkout"
        ) from None


def headline_metrics(metrics: Mapping[str, Any], extra: Mapping[str, Any] | None = None) -> dict[str, float]:
    """The catalogue's headline and card metrics (finite values only) plus ``extra``, prefixed."""
    keys = [m.key for m in catalog.CATALOG if m.headline or m.card]
    out = {PREFIX + k: float(metrics[k]) for k in keys if k in metrics and metrics[k] is not None}
    out.update({PREFIX + k: float(v) for k, v in (extra or {}).items() if v is not None})
    return {k: v for k, v in out.items() if math.isfinite(v)}


def to_mlflow(metrics: dict[str, float], report: Path | None, run_name: str) -> str:
    """Log to the active MLflow run, or a new one named ``run_name``; returns where it went."""
    mlflow: Any = _module("mlflow")
    active = mlflow.active_run()
    run = active or mlflow.start_run(run_name=run_name)
    try:
        mlflow.log_metrics(metrics)
        if report is not None:
            mlflow.log_artifact(str(report))
        where = f"MLflow run {run.info.run_id} ({mlflow.get_tracking_uri()})"
    finally:
        if active is None:
            mlflow.end_run()
    return where


def to_wandb(metrics: dict[str, float], report: Path | None, run_name: str, project: str) -> str:
    """Log to the active W&B run, or a new one in ``project``: metrics into its summary, the report as
    an artifact of type ``streamscope-report``; returns where it went."""
    wandb: Any = _module("wandb")
    active = wandb.run
    run = active or wandb.init(project=project, name=run_name, job_type="streamscope")
    try:
        run.summary.update(metrics)
        run.log(metrics)
        if report is not None:
            art = wandb.Artifact(name=_artifact_name(run_name), type="streamscope-report")
            art.add_file(str(report))
            run.log_artifact(art)
        where = f"W&B run {run.id} (project {project})"
    finally:
        if active is None:
            run.finish()
    return where


def _artifact_name(run_name: str) -> str:
    """W&B artifact names allow letters, digits, dashes, underscores and dots."""
    safe = "".join(c if c.isalnum() or c in "-_." else "-" for c in run_name).strip("-.")
    return f"streamscope-{safe or 'report'}"[:128]


def export(
    metrics: dict[str, float], report: Path | None, run_name: str, *, mlflow: bool, wandb: str | None
) -> list[str]:
    """Send to each backend asked for; returns one line per backend saying where."""
    done = []
    try:
        if mlflow:
            done.append(to_mlflow(metrics, report, run_name))
        if wandb:
            done.append(to_wandb(metrics, report, run_name, wandb))
    except ExportError:
        raise
    except Exception as exc:  # the tracker's own errors (settings, storage): one line, exit 2
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]
        raise ExportError(f"{'mlflow' if mlflow and not done else 'wandb'}: {first}") from None
    return done
