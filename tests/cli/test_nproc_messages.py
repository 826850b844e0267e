"""``record --nproc N`` after the ranks ran: a failed script's rank files are still merged, the command says
which rank(s) failed and leaves with the script's exit status; one rank writes ``--out`` itself, with no merge
step; ``analyze`` shows the recorded script's error.

The launcher's report is tested on rank files written here (torchrun replaced by a stand-in); two small gloo
jobs, marked ``multiprocess``, check that the real ranks and the launcher agree."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from ranks.ranks_traces import job

from collector.cli import launch, runner
from collector.load import load_trace
from collector.traceformat.save import save_trace
from webapp.cli import main

ROOT = Path(__file__).resolve().parents[2]
BOOM = "RuntimeError: boom at end"


def _fake_torchrun(monkeypatch: pytest.MonkeyPatch, out: Path, errors: dict[int, str], status: int) -> None:
    """torchrun replaced: it writes one synthetic trace per rank in ``errors`` (with that error) and returns
    ``status``; a rank not in ``errors`` writes nothing."""
    world = max(errors) + 1

    def run(argv: Any, env: Any) -> int:
        for rank, trace in enumerate(job(world, steps=2)):
            if rank in errors:
                save_trace(trace.with_meta(error=errors[rank]), launch.rank_out(str(out), rank, world))
        return status

    monkeypatch.setattr(launch, "run_quiet", run)


def _launch(out: Path, nproc: int) -> int:
    return launch.launch(nproc, (), ["--out", str(out), "boom.py"], str(out))


def test_a_failed_script_is_still_merged_and_says_where_it_failed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "boom.json.gz"
    _fake_torchrun(monkeypatch, out, {0: BOOM, 1: BOOM}, status=1)
    assert _launch(out, 2) == 1
    err = capsys.readouterr().err
    assert f"the script failed (exit status 1): {BOOM} (ranks 0, 1)" in err
    assert f"merged 2 ranks into {out}" in err and "it holds the run up to the error" in err
    merged = load_trace(str(out))
    assert merged.ranks == [0, 1] and merged.meta.error == f"{BOOM} (ranks 0, 1)"


def test_the_scripts_own_exit_status_is_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "exit.json"
    _fake_torchrun(monkeypatch, out, {0: "", 1: "SystemExit: 3"}, status=1)  # torchrun says 1 whatever the rank
    assert _launch(out, 2) == 3
    assert "the script failed (exit status 3): SystemExit: 3 (rank 1)" in capsys.readouterr().err
    assert load_trace(str(out)).meta.error == "SystemExit: 3 (rank 1)"


def test_a_rank_without_a_file_keeps_the_others_and_says_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "lost.json.gz"
    _fake_torchrun(monkeypatch, out, {0: BOOM, 2: BOOM}, status=1)  # rank 1 was killed before writing
    assert _launch(out, 3) == 1
    err = capsys.readouterr().err
    assert f"the script failed (exit status 1): {BOOM} (ranks 0, 2); rank 1 left no trace" in err
    kept = f"kept {tmp_path / 'lost.rank0.json.gz'}, {tmp_path / 'lost.rank2.json.gz'}"
    assert f"not merged (no trace from {tmp_path / 'lost.rank1.json.gz'}); {kept}" in err
    assert not out.exists()


def test_a_rank_file_left_by_an_earlier_run_is_not_taken_for_this_ones(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "again.json.gz"
    old = launch.rank_out(str(out), 1, 2)
    save_trace(job(2, steps=2)[1], old)
    os.utime(old, (1_000_000_000, 1_000_000_000))  # written long before this launch

    def rank_0_only(argv: Any, env: Any) -> int:  # rank 1 died before writing this time
        save_trace(job(2, steps=2)[0].with_meta(error=BOOM), launch.rank_out(str(out), 0, 2))
        return 1

    monkeypatch.setattr(launch, "run_quiet", rank_0_only)
    assert _launch(out, 2) == 1
    err = capsys.readouterr().err
    assert "rank 1 left no trace" in err and "not merged" in err and not out.exists()


def test_a_job_that_went_well_but_cannot_be_merged_exits_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run.json"
    _fake_torchrun(monkeypatch, out, {1: ""}, status=0)
    assert _launch(out, 2) == 2
    err = capsys.readouterr().err
    assert "failed" not in err and f"not merged (no trace from {tmp_path / 'run.rank0.json'})" in err


def test_one_rank_writes_out_itself_with_no_merge(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("WORLD_SIZE", "1")
    monkeypatch.setenv("RANK", "0")
    assert runner._rank_out("s.json.gz") == "s.json.gz" == launch.rank_out("s.json.gz", 0, 1)
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "1")
    assert runner._rank_out("s.json.gz") == "s.rank1.json.gz" == launch.rank_out("s.json.gz", 1, 2)
    out = tmp_path / "s.json.gz"
    _fake_torchrun(monkeypatch, out, {0: ""}, status=0)
    assert _launch(out, 1) == 0
    assert capsys.readouterr().err == ""
    _fake_torchrun(monkeypatch, out, {0: "SystemExit: 4"}, status=1)
    assert _launch(out, 1) == 4
    assert capsys.readouterr().err.splitlines() == [
        "streamscope: the script failed (exit status 4): SystemExit: 4 (rank 0)",
        f"streamscope: {out} holds the run up to the error",
    ]


@pytest.mark.parametrize(
    ("error", "status"),
    [(BOOM, 1), ("SystemExit: 3", 3), ("SystemExit: stop here", 1), ("KeyboardInterrupt", 130)],
)
def test_the_exit_status_is_read_from_the_kept_error(error: str, status: int) -> None:
    assert launch.script_status(error) == status
    assert launch.exit_status(1, {2: error, 5: BOOM}) == status  # the first rank that failed
    assert launch.exit_status(0, {}) == 0 and launch.exit_status(1, {}) == 1


def test_a_failure_with_no_error_in_any_trace_points_at_torchruns_report() -> None:
    assert launch.failure_line(1, {}, [0, 1]) == (
        "the job failed (torchrun's exit status 1): ranks 0, 1 left no trace; see torchrun's report above"
    )
    assert "no rank's trace holds an error" in launch.failure_line(1, {}, [])
    nothing = "not merged (no trace from a, b); no rank file was written"
    assert launch.not_merged_line("no trace from a, b", []) == nothing


def test_the_merge_line_gives_a_clock_residual_only_for_ranks_on_another_host() -> None:
    """Ranks on the first rank's host share its clock: their collectives' ends differ by their own work."""
    from collector.ranks.merge import merge_traces

    MS = 1_000_000
    one_host = merge_traces(job(2, hosts=["a", "a"], end_jitter_ns=3 * MS))
    assert launch.merge_summary(one_host) == "all ranks on one host: one clock"
    two_hosts = merge_traces(job(3, hosts=["a", "a", "b"], offsets=[0, 0, 5 * MS]))
    said = launch.merge_summary(two_hosts)
    assert said.startswith("clock residual per rank 2: ") and said.endswith(" us") and "1:" not in said


def _analyze(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    assert main(["analyze", *argv]) == 0
    return capsys.readouterr().out


def test_analyze_shows_the_recorded_scripts_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    failed, fine = tmp_path / "failed.json", tmp_path / "fine.json"
    trace = job(1, steps=3)[0]
    save_trace(trace.with_meta(error=BOOM, workload="boom.py"), str(failed))
    save_trace(trace.with_meta(workload="fine.py"), str(fine))
    assert _analyze(capsys, str(failed)).splitlines()[:2] == [
        f"{failed} (boom.py)",
        f"The recorded script failed: {BOOM}",
    ]
    assert "failed" not in _analyze(capsys, str(fine)).replace(str(tmp_path), "")
    assert json.loads(_analyze(capsys, str(failed), "--json"))["meta"] == {"error": BOOM}
    assert json.loads(_analyze(capsys, str(fine), "--json"))["meta"] == {"error": ""}


SCRIPT = """\
import sys, torch, torch.distributed as dist
dist.init_process_group("gloo")
t = torch.ones(64)
for _ in range(3):
    dist.all_reduce(t)
if len(sys.argv) > 1:
    raise RuntimeError("boom at end")
"""


def _record(tmp_path: Path, nproc: int, *args: str) -> subprocess.CompletedProcess[str]:
    """``streamscope record --nproc N --out job.json.gz job.py ARGS`` in ``tmp_path`` (gloo ranks on CPUs)."""
    (tmp_path / "job.py").write_text(SCRIPT)
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    cmd = [sys.executable, "-m", "webapp.cli", "record", "--nproc", str(nproc), "--out", "job.json.gz", "job.py"]
    return subprocess.run(
        [*cmd, *args], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=240, check=False
    )


def _files(tmp_path: Path) -> list[str]:
    return sorted(p.name for p in tmp_path.glob("job*.json.gz"))


@pytest.mark.multiprocess
def test_two_real_ranks_that_raise_are_merged(tmp_path: Path) -> None:
    pytest.importorskip("torch.distributed")
    done = _record(tmp_path, 2, "raise")
    assert done.returncode == 1, done.stderr[-3000:]
    assert f"streamscope: the script failed (exit status 1): {BOOM} (ranks 0, 1)" in done.stderr
    assert "merged 2 ranks into job.json.gz" in done.stderr and "up to the error" in done.stderr
    assert _files(tmp_path) == ["job.json.gz", "job.rank0.json.gz", "job.rank1.json.gz"]
    merged = load_trace(str(tmp_path / "job.json.gz"))
    assert merged.ranks == [0, 1] and merged.meta.error == f"{BOOM} (ranks 0, 1)"


@pytest.mark.multiprocess
def test_one_real_rank_writes_out_with_no_warning(tmp_path: Path) -> None:
    pytest.importorskip("torch.distributed")
    done = _record(tmp_path, 1)
    assert done.returncode == 0, done.stderr[-3000:]
    said = [ln for ln in done.stderr.splitlines() if "streamscope:" in ln]
    assert len(said) == 1 and said[0].startswith("streamscope: wrote job.json.gz ("), said
    assert _files(tmp_path) == ["job.json.gz"]


STOPPED = """\
import sys, time, torch, torch.distributed as dist
dist.init_process_group("gloo")
t = torch.ones(64)
for _ in range(3):
    dist.all_reduce(t)
if dist.get_rank() == 1:
    raise RuntimeError("boom on rank 1")
for _ in range(600):  # rank 0 works on alone until torchrun stops it
    time.sleep(0.1)
"""


@pytest.mark.multiprocess
def test_a_rank_torchrun_stops_as_another_fails_keeps_its_trace(tmp_path: Path) -> None:
    """Rank 1 fails; torchrun then stops rank 0 (SIGTERM) in the middle of its work: rank 0 ends there and
    writes its trace up to that point, and both are merged."""
    pytest.importorskip("torch.distributed")
    (tmp_path / "job.py").write_text(STOPPED)
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    cmd = [sys.executable, "-m", "webapp.cli", "record", "--nproc", "2", "--out", "job.json.gz", "job.py"]
    done = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=50, check=False)
    assert done.returncode == 1, done.stderr[-3000:]  # the failing rank's status, not the stopped one's 143
    assert _files(tmp_path) == ["job.json.gz", "job.rank0.json.gz", "job.rank1.json.gz"], done.stderr[-3000:]
    assert load_trace(str(tmp_path / "job.json.gz")).ranks == [0, 1]
    assert (
        "the script failed (exit status 1): RuntimeError: boom on rank 1 (rank 1); "
        "stopped by torchrun (SIGTERM) as another rank failed (rank 0)" in done.stderr
    )
