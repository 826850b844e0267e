"""``streamscope record --nproc N``: its argument checks and the launcher's command line, without starting
torchrun (the jobs themselves run in test_ranks_gloo.py, marked ``multiprocess``)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

import pytest

from collector.cli import runner
from collector.cli.launch import launcher_argv, rank_of_path, rank_path, single_node
from collector.demos.ddp import Plant

PLANTED = ("demo:ddp", "--slow-rank", "1", "--delay-ms", "40", "--slow-cause", "compute", "--out", "run.json.gz")


def _parse(*argv: str) -> runner.RecordRequest:
    parser = argparse.ArgumentParser()
    runner.add_record_arguments(parser)
    return runner.request_from_args(parser.parse_args(list(argv)))


@pytest.fixture
def launched(monkeypatch: pytest.MonkeyPatch) -> list[tuple[Any, ...]]:
    """The calls run_record makes to the launcher, which starts nothing."""
    calls: list[tuple[Any, ...]] = []

    def launch(*args: Any) -> int:
        calls.append(args)
        return 3 if args[-1] == "failing.json.gz" else 0  # torchrun's status when a rank fails

    monkeypatch.setattr(runner, "launch", launch)
    return calls


def test_each_rank_records_the_plant_and_the_launcher_runs_them(launched: list[tuple[Any, ...]]) -> None:
    req = _parse("--nproc", "2", "--steps", "8", *PLANTED)
    assert (req.nproc, req.slow_rank, req.delay_ms, req.slow_cause, req.out) == (2, 1, 40.0, "compute", "run.json.gz")
    rank_argv = ["--out", "run.json.gz", "--every", "1", "--timing", "cupti", "--steps", "8"]
    rank_argv += ["--slow-rank", "1", "--delay-ms", "40.0", "--slow-cause", "compute", "demo:ddp"]
    assert req.rank_argv() == rank_argv
    assert launcher_argv(2, req.launcher_flags, rank_argv) == [
        sys.executable,
        *("-m", "torch.distributed.run", "--nproc-per-node", "2", "--standalone"),
        *("-m", "collector", "record", *rank_argv),
    ]
    assert runner.run_record(req) == 0
    assert launched == [(2, (), rank_argv, "run.json.gz")]
    assert runner.run_record(_parse("--nproc", "2", "demo:ddp", "--out", "failing.json.gz")) == 3  # passed on


def test_torchrun_flags_pass_through_and_decide_standalone() -> None:
    flags = ("--nnodes", "2", "--node-rank", "1", "--master-addr", "10.0.0.1", "--master-port", "29500")
    req = _parse("--nproc", "4", *flags, "train.py", "--lr", "3")
    assert req.launcher_flags == flags and req.args == ("--lr", "3")
    assert not single_node(req.launcher_flags)
    assert "--standalone" not in launcher_argv(4, req.launcher_flags, req.rank_argv())
    assert single_node(("--nnodes", "1")) and single_node(("--nnodes", "1:1", "--max-restarts", "2"))
    assert not single_node(("--rdzv-endpoint", "h:1"))


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (("--nproc", "-1", "demo:ddp"), "--nproc must be a positive number of ranks"),
        (("--nproc", "2", "--slow-rank", "1", "demo:naive"), "options of demo:ddp"),
        (("--nproc", "2", "--slow-rank", "1", "--slow-cause", "disk", "demo:ddp"), "--slow-cause must be one of"),
        (("--nproc", "2", "--slow-rank", "1", "--delay-ms", "-5", "demo:ddp"), "--delay-ms must not be negative"),
        (("--nproc", "2", "demo:ddp", "--out", "run.txt"), "--out must end in .json or .json.gz"),
    ],
)
def test_bad_arguments_are_refused_before_any_launch(argv: tuple[str, ...], message: str) -> None:
    with pytest.raises(runner.RecordUsageError, match=message):
        _parse(*argv)


def test_a_missing_script_is_refused_before_the_launch(launched: list[tuple[Any, ...]]) -> None:
    with pytest.raises(runner.RecordUsageError, match="no such script: nowhere.py"):
        runner.run_record(_parse("--nproc", "2", "nowhere.py"))
    assert launched == []


def test_a_sync_plant_needs_cuda_on_each_rank(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    """The launching process cannot know the ranks' devices; each rank refuses a sync plant without CUDA,
    before it records anything (the job then exits with torchrun's non-zero status, passed on above)."""
    pytest.importorskip("torch")
    with pytest.raises(ValueError, match="--slow-cause sync needs CUDA"):
        Plant(1, 20.0, "sync").check(cuda=False)
    Plant(1, 20.0, "sync").check(cuda=True)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("WORLD_SIZE", "2")  # inside a launched job, as rank 1
    monkeypatch.setenv("RANK", "1")
    rank = _parse("--slow-rank", "1", "--slow-cause", "sync", "demo:ddp")  # the top level lets it through
    with pytest.raises(runner.RecordUsageError, match="--slow-cause sync needs CUDA"):
        runner.run_record(rank)
    assert list(tmp_path.iterdir()) == []


def test_rank_file_names() -> None:
    assert rank_path("run.json.gz", 3) == "run.rank3.json.gz"
    assert rank_path("out/run.json", 0) == "out/run.rank0.json"
    assert rank_of_path("/tmp/job/run.rank12.json.gz") == 12
    assert rank_of_path("run.json.gz") is None
