"""A recording is never lost to a bad ``--out``: checked before the work runs, saved elsewhere if writing fails.

CPU recordings (``--timing cpu``, and gloo ranks under ``--nproc``) run real scripts without a GPU. The full
disk is a monkeypatched writer here, and a real small tmpfs where this machine lets the tests mount one.
"""

from __future__ import annotations

import errno
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from collector.cli import runner
from collector.load import load_trace
from collector.traceformat import save
from collector.traceformat.save import OutPathError, prepare_out, save_trace, saved_path

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = """\
import sys, torch
open(sys.argv[1], "w").write("ran")
m = torch.nn.Linear(8, 8)
opt = torch.optim.SGD(m.parameters(), lr=0.1)
for _ in range(3):
    opt.zero_grad()
    m(torch.randn(4, 8)).sum().backward()
    opt.step()
"""


def _record(cwd: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full = {**os.environ, "PYTHONPATH": str(ROOT), "CUDA_VISIBLE_DEVICES": "", **(env or {})}
    cmd = [sys.executable, "-m", "webapp.cli", "record", *args]
    return subprocess.run(cmd, cwd=cwd, env=full, capture_output=True, text=True, timeout=240, check=False)


@pytest.fixture
def script(tmp_path: Path) -> Path:
    path = tmp_path / "train.py"
    path.write_text(SCRIPT)
    return path


def test_a_missing_folder_is_created(tmp_path: Path, script: Path) -> None:
    out = tmp_path / "new" / "deeper" / "run.json.gz"
    done = _record(tmp_path, "--timing", "cpu", "--out", str(out), str(script), str(tmp_path / "ran"))
    assert done.returncode == 0, done.stderr[-2000:]
    trace = load_trace(str(out))
    assert len(trace.intervals) and len(trace.steps()) == 3
    assert trace.meta.workload == "train.py"  # the run's name: the script's file
    assert trace.meta.command == f"{script} {tmp_path / 'ran'}"  # the whole command stays in the metadata


def _unwritable(tmp_path: Path, how: str) -> Path:
    if how == "under a file":
        (tmp_path / "afile").write_text("")
        return tmp_path / "afile" / "run.json.gz"
    if os.geteuid() == 0:
        pytest.skip("a read-only folder does not stop root")
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o555)
    return folder / "run.json.gz"


@pytest.mark.parametrize("how", ["under a file", "read-only folder"])
@pytest.mark.parametrize("nproc", [0, 2])
def test_an_unwritable_out_exits_2_before_the_script_runs(tmp_path: Path, script: Path, how: str, nproc: int) -> None:
    out = _unwritable(tmp_path, how)
    ran = tmp_path / "ran"
    done = _record(tmp_path, "--timing", "cpu", "--nproc", str(nproc), "--out", str(out), str(script), str(ran))
    assert done.returncode == 2
    assert done.stderr.startswith("streamscope record: error: cannot ") and str(out) in done.stderr
    assert done.stderr.rstrip().endswith("nothing was run")
    assert not ran.exists()  # the script never started


def test_prepare_out_refuses_a_folder_and_names_the_file_in_the_way(tmp_path: Path) -> None:
    with pytest.raises(OutPathError, match="is a folder: name a file in it"):
        prepare_out(str(tmp_path))
    (tmp_path / "f").write_text("")
    with pytest.raises(OutPathError, match=f"{tmp_path / 'f'} is a file, not a folder"):
        prepare_out(str(tmp_path / "f" / "g" / "run.json"))
    prepare_out(str(tmp_path / "a" / "b" / "run.json"))
    assert (tmp_path / "a" / "b").is_dir() and not list((tmp_path / "a" / "b").iterdir())
    if Path("/proc").is_dir():  # a folder that takes no new files: why, not "No such file or directory"
        with pytest.raises(OutPathError, match=r"/proc is not writable \(it takes no new files\)"):
            prepare_out("/proc/run.json.gz")


def _full_first(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The writer fails with ENOSPC on its first path (as on a full disk) and works after; returns its paths."""
    calls: list[str] = []
    real = save.write_trace

    def write(trace: Any, path: str) -> None:
        calls.append(path)
        if len(calls) == 1:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        real(trace, path)

    monkeypatch.setattr(save, "write_trace", write)
    return calls


def test_a_full_disk_at_the_end_saves_the_trace_at_a_printed_path(
    tmp_path: Path, script: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    spare = tmp_path / "spare"
    spare.mkdir()
    monkeypatch.setenv(save.FALLBACK_DIR_ENV, str(spare))
    calls = _full_first(monkeypatch)
    out = tmp_path / "run.json.gz"
    assert runner.run_script(str(script), [str(tmp_path / "ran")], str(out), timing="cpu", probe=False) == 0
    err = capsys.readouterr().err
    fallback = spare / "run.json.gz"
    assert calls == [str(out), str(fallback)]
    assert saved_path(err.splitlines()) == str(fallback)
    assert f"could not write {out} (No space left on device)" in err
    assert f"streamscope: wrote {fallback} (" in err  # the summary line names where it is
    assert not out.exists() and len(load_trace(str(fallback)).steps()) == 3


def test_save_trace_tries_every_fallback_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from collector.synthetic import synthetic_trace

    monkeypatch.delenv(save.FALLBACK_DIR_ENV, raising=False)
    monkeypatch.setattr(save.tempfile, "tempdir", str(tmp_path / "no-such-tmp"))  # cannot make a folder there
    monkeypatch.chdir(tmp_path)
    _full_first(monkeypatch)
    written = save_trace(synthetic_trace(50, steps=1), str(tmp_path / "out" / "run.json"))
    assert Path(written).parent.parent == tmp_path and Path(written).name == "run.json"
    assert Path(written).parent.name.startswith("streamscope-saved-")


def test_nothing_writable_raises_with_what_was_tried(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from collector.synthetic import synthetic_trace

    def never(trace: Any, path: str) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(save, "write_trace", never)
    monkeypatch.setattr(save, "fallback_folders", lambda: iter([str(tmp_path)]))
    with pytest.raises(OSError, match=r"could not write .*run.json \(No space left on device\) nor in "):
        save_trace(synthetic_trace(50, steps=1), str(tmp_path / "run.json"))


@pytest.fixture
def small_tmpfs(tmp_path: Path) -> Iterator[Path]:
    """A 64 KiB tmpfs (a disk that fills up), where this machine lets the tests mount one."""
    where = tmp_path / "small"
    where.mkdir()
    try:
        done = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(where)], capture_output=True, timeout=30
        )
    except OSError:
        pytest.skip("no mount command here")
    if done.returncode != 0:
        pytest.skip("cannot mount a tmpfs here (needs root with CAP_SYS_ADMIN)")
    try:
        yield where
    finally:
        subprocess.run(["umount", str(where)], capture_output=True, timeout=30)


def test_a_really_full_disk_keeps_the_trace(tmp_path: Path, script: Path, small_tmpfs: Path) -> None:
    (small_tmpfs / "filler").write_bytes(b"\0" * 60_000)  # room for the check's empty file, not for a trace
    out = small_tmpfs / "run.json"
    spare = tmp_path / "spare"
    spare.mkdir()
    done = _record(
        tmp_path, "--timing", "cpu", "--out", str(out), str(script), str(tmp_path / "ran"),
        env={save.FALLBACK_DIR_ENV: str(spare)},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert saved_path(done.stderr.splitlines()) == str(spare / "run.json")
    assert not out.exists() and len(load_trace(str(spare / "run.json")).steps()) == 3


RANKS_SCRIPT = """\
import os, shutil, sys, torch, torch.distributed as dist
dist.init_process_group("gloo")
folder = sys.argv[1]
assert os.path.isdir(folder), "the launcher creates --out's folder before the ranks start"
t = torch.ones(64)
for _ in range(3):
    dist.all_reduce(t)
dist.barrier()
if dist.get_rank() == 0:  # the folder goes away before the ranks write their files
    shutil.rmtree(folder)
    open(folder, "w").write("not a folder any more")
dist.barrier()
"""


@pytest.mark.multiprocess
def test_ranks_that_cannot_write_are_saved_and_merged(tmp_path: Path) -> None:
    """--nproc 2 (gloo): --out's missing folder is made before the ranks start; when the ranks then cannot
    write there, their files go to the launcher's shared fallback folder, are merged from there, and the
    merged run goes to a fallback path that is printed."""
    script = tmp_path / "ranks.py"
    script.write_text(RANKS_SCRIPT)
    folder = tmp_path / "runs" / "today"
    out = folder / "job.json.gz"
    done = _record(tmp_path, "--nproc", "2", "--out", str(out), str(script), str(folder), env={"TMPDIR": str(tmp_path)})
    assert done.returncode == 0, done.stderr[-3000:]
    saved = [line for line in done.stderr.splitlines() if saved_path([line])]
    # two rank files and the merged run (the ranks print at once: their lines may run into each other)
    could_not = re.findall(r"could not write (\S+) \(", done.stderr)
    assert sorted(Path(w).name for w in could_not) == ["job.json.gz", "job.rank0.json.gz", "job.rank1.json.gz"]
    merged = Path(saved_path(saved[-1:]) or "")
    assert f"could not write {out}" in saved[-1] and merged.name == "job.json.gz"
    assert f"merged 2 ranks into {merged}" in done.stderr
    trace = load_trace(str(merged))
    assert trace.ranks == [0, 1] and (trace.intervals["kind"] == "collective").any()
    labels = sorted((ln.rank, ln.kind.value, ln.label.split(" (")[0]) for ln in trace.lanes)  # by what they are
    assert sorted(set(labels)) == [
        (r, k, lb) for r in (0, 1) for k, lb in (("comm_stream", "gloo comm"), ("cpu_thread", "main thread"))
    ]
