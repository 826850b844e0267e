"""Browsing and analysis never need torch: importing our packages must not import it."""

from __future__ import annotations

import subprocess
import sys

import pytest

MODULES = [
    "collector",
    "collector.model",
    "collector.traceformat.events",
    "collector.traceformat.read",
    "collector.importers.registry",
    "collector.load",
    "webapp",
    "webapp.cli",
    "webapp.analysis",
]


@pytest.mark.parametrize("module", MODULES)
def test_import_does_not_import_torch(module: str) -> None:
    code = f"import sys, {module}; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_cli_help_lists_working_subcommands_only() -> None:
    out = subprocess.run([sys.executable, "-m", "webapp.cli", "--help"], capture_output=True, text=True, check=True)
    assert "convert" in out.stdout
    assert "serve" in out.stdout


def test_recording_needs_no_msgspec() -> None:
    """A GPU host records with torch and the standard library alone: writing a trace never imports msgspec."""
    code = (
        "import sys; sys.modules['msgspec'] = None; "
        "import collector.cli.runner, collector.recording.build, collector.traceformat.write, collector.cli.main; "
        "print('ok')"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "ok"
