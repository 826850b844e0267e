"""CPU tests of the record command: argument rule, script runner, no-GPU error, demos listing."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from collector.cli import runner
from collector.recording.base import NO_CUDA_MESSAGE

ROOT = Path(__file__).resolve().parents[2]


def _parse(*argv: str) -> runner.RecordRequest:
    parser = argparse.ArgumentParser()
    runner.add_record_arguments(parser)
    return runner.request_from_args(parser.parse_args(list(argv)))


def test_trailing_out_is_streamscopes() -> None:
    req = _parse("train.py", "--lr", "3e-4", "--out", "run.json.gz")
    assert (req.target, req.args, req.out) == ("train.py", ("--lr", "3e-4"), "run.json.gz")
    req = _parse("train.py", "--lr", "3e-4", "--out=run.json")
    assert (req.args, req.out) == (("--lr", "3e-4"), "run.json")


def test_out_before_target_leaves_script_args_alone() -> None:
    req = _parse("--out", "a.json.gz", "train.py", "--epochs", "2", "--out", "model.pt")
    assert req.out == "a.json.gz"
    assert req.args == ("--epochs", "2", "--out", "model.pt")


def test_script_flags_that_look_like_ours_stay_the_scripts() -> None:
    req = _parse("train.py", "--every", "5", "-h", "--steps", "3")
    assert req.args == ("--every", "5", "-h", "--steps", "3")
    assert (req.every, req.steps, req.out) == (1, None, "train.json.gz")


def test_options_after_a_demo_are_ours() -> None:
    req = _parse("demo:overlap", "--steps", "20", "--every", "2", "--no-probe", "--out", "o.json.gz")
    assert (req.target, req.args, req.steps, req.every, req.probe, req.out) == (
        "demo:overlap",
        (),
        20,
        2,
        False,
        "o.json.gz",
    )
    with pytest.raises(runner.RecordUsageError, match="demos take no arguments"):
        _parse("demo:overlap", "--lr", "3")
    with pytest.raises(runner.RecordUsageError, match="invalid int"):
        _parse("demo:overlap", "--steps", "x")


def test_default_out_and_bad_values() -> None:
    assert _parse("demo:naive").out == "naive.json.gz"
    with pytest.raises(runner.RecordUsageError, match="must end in"):
        _parse("--out", "x.txt", "demo:naive")
    with pytest.raises(runner.RecordUsageError, match="--every"):
        _parse("--every", "0", "demo:naive")


class FakeRecorder:
    def __init__(self) -> None:
        self.started = False
        self.error: str | None = None
        self.trace = None
        self.out = None

    def start(self) -> None:
        self.started = True

    def stop(self, error: str = "") -> None:
        self.error = error


def _script(tmp_path: Path, body: str) -> str:
    path = tmp_path / "script.py"
    path.write_text(body)
    return str(path)


def test_script_runs_as_main_with_its_argv(tmp_path: Path, capsys: Any) -> None:
    path = _script(tmp_path, "import sys\nprint(__name__, sys.argv[1:], sys.argv[0].endswith('script.py'))\n")
    rec = FakeRecorder()
    saved = sys.argv[:]
    assert runner.run_script(path, ["--lr", "3e-4"], "x.json.gz", recorder=rec) == 0
    assert capsys.readouterr().out.strip() == "__main__ ['--lr', '3e-4'] True"
    assert rec.started and rec.error == ""
    assert sys.argv == saved


def test_script_exit_status_and_error_kept(tmp_path: Path, capsys: Any) -> None:
    rec = FakeRecorder()
    assert runner.run_script(_script(tmp_path, "import sys\nsys.exit(3)\n"), [], "x.json", recorder=rec) == 3
    assert rec.error == "SystemExit: 3"
    rec = FakeRecorder()
    assert (
        runner.run_script(_script(tmp_path, "def f():\n    raise KeyError('k')\nf()\n"), [], "x.json", recorder=rec)
        == 1
    )
    err = capsys.readouterr().err
    assert err.startswith("Traceback (most recent call last):")
    assert "script.py" in err and "KeyError: 'k'" in err and "runpy" not in err
    assert rec.error == "KeyError: 'k'"


def _cli(tmp_path: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    code = "import sys; from collector.cli.main import main; sys.exit(main(sys.argv[1:]))"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "CUDA_VISIBLE_DEVICES": ""}
    return subprocess.run(
        [sys.executable, "-c", code, *argv], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )


def test_no_cuda_exits_2_and_writes_nothing(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text("open('ran', 'w').write('x')\n")
    for target in ("demo:naive", "train.py"):
        done = _cli(tmp_path, "record", target, "--out", "run.json.gz")
        assert done.returncode == 2
        assert done.stderr.strip() == f"streamscope record: error: {NO_CUDA_MESSAGE}"
        assert sorted(p.name for p in tmp_path.iterdir()) == ["train.py"]


def test_unknown_demo_and_missing_script(tmp_path: Path) -> None:
    done = _cli(tmp_path, "record", "demo:nope")
    assert (
        done.returncode == 2
        and "the demos are: naive, pinned, overlap, sync-trap, d2h, tiny-ops, convnet" in done.stderr
    )
    done = _cli(tmp_path, "record", "missing.py")
    assert done.returncode == 2 and "no such script: missing.py" in done.stderr


def test_demos_lists_one_line_each(tmp_path: Path) -> None:
    done = _cli(tmp_path, "demos")
    lines = done.stdout.splitlines()
    assert done.returncode == 0
    assert [line.split()[0] for line in lines] == [
        "naive",
        "pinned",
        "overlap",
        "sync-trap",
        "d2h",
        "tiny-ops",
        "convnet",
        "transformer-small",
        "transformer-large",
        "ddp",
    ]


def test_importing_the_collector_does_not_import_torch() -> None:
    code = (
        "import sys, collector, collector.recording.events_recorder, collector.cli.runner, collector.demos.loops, "
        "collector.cli.main, collector.load; "
        "print('torch' in sys.modules)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.stdout.strip() == "False"


def test_rank_defaults_to_the_launchers(monkeypatch: Any) -> None:
    from collector.recording.events_recorder import EventsRecorder

    monkeypatch.setenv("RANK", "3")
    assert EventsRecorder("w").rank == 3
    assert EventsRecorder("w", rank=1).rank == 1
    monkeypatch.delenv("RANK")
    assert EventsRecorder("w").rank == 0
    with pytest.raises(ValueError, match="every"):
        EventsRecorder("w", every=0)
