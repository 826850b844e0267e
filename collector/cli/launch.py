"""``streamscope record --nproc N TARGET``: launch every rank with torch.distributed's own launcher.

The ranks are started by ``python -m torch.distributed.run`` (torchrun) with its own flags, so a multi-node
job is launched the same way on each node (``--nnodes``, ``--node-rank``, ``--rdzv-endpoint``, ...). Each rank
runs ``python -m collector record TARGET`` with the launcher's environment (``RANK``, ``WORLD_SIZE``,
``LOCAL_RANK``) and writes its own trace: ``run.json.gz`` becomes ``run.rank0.json.gz``, ``run.rank1.json.gz``,
... (a job of one rank writes ``run.json.gz`` itself). When every rank ran on this node, the rank files are
then merged (clocks aligned on the collectives, collector.ranks.merge) into the ``--out`` file itself, also
when the script failed: the merged trace then holds the run up to the error, and the command says which
rank(s) failed and leaves with the script's exit status. The ranks' output reaches the terminal as it comes,
less the ``USDT:...`` lines their profiler library prints on its own (:func:`run_quiet`).
"""

from __future__ import annotations

import argparse
import codecs
import contextlib
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import IO, TYPE_CHECKING, Any

from collector.traceformat.save import FALLBACK_DIR_ENV

if TYPE_CHECKING:
    from collector.model import Trace

TORCHRUN_OPTIONS: tuple[tuple[str, type, str], ...] = (
    ("--nnodes", str, "number of nodes, or MIN:MAX (torchrun --nnodes)"),
    ("--node-rank", int, "rank of this node (torchrun --node-rank)"),
    ("--master-addr", str, "address of the rank-0 node (torchrun --master-addr)"),
    ("--master-port", int, "port on the rank-0 node (torchrun --master-port)"),
    ("--rdzv-backend", str, "rendezvous backend, e.g. c10d (torchrun --rdzv-backend)"),
    ("--rdzv-endpoint", str, "rendezvous host:port (torchrun --rdzv-endpoint)"),
    ("--rdzv-id", str, "job id shared by all nodes (torchrun --rdzv-id)"),
    ("--max-restarts", int, "restarts of the worker group on failure (torchrun --max-restarts)"),
)
"""torchrun flags ``streamscope record`` passes through unchanged."""

MTIME_SLACK_S = 2.0
"""File systems keep modification times coarse (whole seconds on some): a file this much older than the launch
still counts as written by it."""
_RANK_FILE = re.compile(r"^(?P<stem>.*)\.rank(?P<rank>\d+)(?P<suffix>\.json(?:\.gz)?)$")


def add_launch_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("several ranks (the torchrun flags apply with --nproc only)")
    group.add_argument(
        "--nproc",
        "--nproc-per-node",
        dest="nproc",
        type=int,
        default=0,
        metavar="N",
        help="launch N ranks on this node with torch.distributed.run (torchrun); each writes OUT.rankR.json.gz, "
        "merged into OUT when every rank ran on this node",
    )
    for flag, kind, text in TORCHRUN_OPTIONS:
        group.add_argument(flag, type=kind, default=None, help=text)


def torchrun_flags(ns: argparse.Namespace) -> tuple[str, ...]:
    """The torchrun flags given on the command line, as arguments for torch.distributed.run."""
    out: list[str] = []
    for flag, _, _ in TORCHRUN_OPTIONS:
        value = getattr(ns, flag[2:].replace("-", "_"), None)
        if value is not None:
            out += [flag, str(value)]
    return tuple(out)


def rank_path(out: str, rank: int) -> str:
    """``run.json.gz`` -> ``run.rank3.json.gz`` (``.json`` likewise)."""
    for suffix in (".json.gz", ".json"):
        if out.endswith(suffix):
            return f"{out[: -len(suffix)]}.rank{rank}{suffix}"
    return f"{out}.rank{rank}"


def rank_out(out: str, rank: int, world_size: int) -> str:
    """The file a rank writes: ``out`` itself when it is the job's only rank, else :func:`rank_path`."""
    return rank_path(out, rank) if world_size > 1 else out


def rank_of_path(path: str) -> int | None:
    """The rank in a rank file's name (``run.rank3.json.gz`` -> 3), else None."""
    m = _RANK_FILE.match(os.path.basename(path))
    return int(m.group("rank")) if m else None


def single_node(flags: Sequence[str]) -> bool:
    """No multi-node flags: run torchrun ``--standalone`` (a free local port, no fixed one)."""
    given = set(flags[::2])
    if "--nnodes" in given and flags[list(flags).index("--nnodes") + 1] not in ("1", "1:1"):
        return False
    return not given & {"--master-addr", "--master-port", "--rdzv-endpoint", "--rdzv-backend", "--node-rank"}


def launcher_argv(nproc: int, flags: Sequence[str], rank_argv: Sequence[str]) -> list[str]:
    """``python -m torch.distributed.run ... -m collector record ...`` for ``nproc`` ranks on this node."""
    head = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(nproc)]
    if single_node(flags):
        head.append("--standalone")
    return [*head, *flags, "-m", "collector", "record", *rank_argv]


def launch(nproc: int, flags: Sequence[str], rank_argv: Sequence[str], out: str) -> int:
    """Run the ranks; on one node, merge their files into ``out`` (one rank's file is ``out`` itself).
    Returns 0, or the script's exit status when it failed (:func:`exit_status`), else the launcher's.

    The ranks share one fallback folder (collector.traceformat.save): a rank that cannot write its file
    beside ``out`` saves it there, and the merge finds it there."""
    spare = tempfile.mkdtemp(prefix="streamscope-ranks-")
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "STREAMSCOPE_RANK_CHILD": "1", FALLBACK_DIR_ENV: spare}
    started = time.time()
    try:
        status = run_quiet(launcher_argv(nproc, flags, rank_argv), env)
        if not single_node(flags):
            return status
        written = _Written(spare, started)
        if nproc == 1:
            return _report_one(out, written, status)
        return _merge_ranks(nproc, out, written, status)
    finally:
        with contextlib.suppress(OSError):
            os.rmdir(spare)  # only when no rank had to save its file there


def _report_one(out: str, written: _Written, status: int) -> int:
    """One rank wrote ``out`` itself: nothing to merge; say so when the script failed."""
    if status == 0:
        return 0
    path = written.find(rank_out(out, 0, 1))
    traces, _ = _load_ranks({0: path} if path else {})
    errors = rank_errors(traces)
    _say(failure_line(status, errors, [] if path else [0]))
    if path:
        _say(f"{path} holds the run up to the error")
    return exit_status(status, errors)


def _merge_ranks(nproc: int, out: str, written: _Written, status: int) -> int:
    """Merge the rank files into ``out``, also after a failed script (they hold the run up to the error)."""
    found = {r: written.find(rank_out(out, r, nproc)) for r in range(nproc)}
    kept = {r: p for r, p in found.items() if p is not None}
    absent = [r for r in found if r not in kept]
    traces, reason = _load_ranks(kept)
    errors = rank_errors(traces)
    if status != 0:
        _say(failure_line(status, errors, absent))
    if absent:
        reason = f"no trace from {', '.join(rank_path(out, r) for r in absent)}"
    trace, reason = (None, reason) if reason else _merged(traces, kept)
    if trace is None:
        _say(not_merged_line(reason, list(kept.values())))
        return exit_status(status, errors) or 2  # a run that went well but whose --out is missing
    from collector.traceformat.save import save_trace

    saved = save_trace(trace.with_meta(error=job_error(errors)) if errors else trace, out)
    _say(merged_line(nproc, saved, merge_summary(trace), failed=status != 0))
    return exit_status(status, errors)


def _load_ranks(paths: Mapping[int, str]) -> tuple[dict[int, Any], str]:
    """The trace of each rank file, and why one could not be read ('' when all were)."""
    from collector.load import load_trace
    from collector.traceformat.spec import TraceFileError

    traces: dict[int, Any] = {}
    unread: list[str] = []
    for rank, path in paths.items():
        try:
            traces[rank] = load_trace(path)
        except TraceFileError as exc:
            unread.append(str(exc))
    return traces, "; ".join(unread)


def _merged(traces: Mapping[int, Any], paths: Mapping[int, str]) -> tuple[Any, str]:
    """The ranks merged on one clock, or None and why not."""
    from collector.ranks.merge import merge_traces
    from collector.traceformat.spec import TraceFileError

    try:
        return merge_traces(list(traces.values()), [paths[r] for r in traces]), ""
    except TraceFileError as exc:
        return None, str(exc)


def _say(line: str) -> None:
    print(f"streamscope: {line}", file=sys.stderr, flush=True)


def rank_errors(traces: Mapping[int, Any]) -> dict[int, str]:
    """rank -> the script's error kept in that rank's trace (``meta.error``), for the ranks that failed."""
    return {r: str(t.meta.error) for r, t in sorted(traces.items()) if getattr(t.meta, "error", "")}


def script_status(error: str) -> int:
    """The exit status a script left with, from the error its trace keeps (collector.cli.runner)."""
    kind, _, detail = error.partition(": ")
    if kind == "SystemExit" and detail.strip().lstrip("-").isdigit():
        return int(detail)
    return 130 if kind == "KeyboardInterrupt" else 1


STOPPED_ERROR = "stopped by torchrun (SIGTERM) as another rank failed"
"""The error a rank's trace keeps when torchrun stopped it because another rank failed."""


def _causes(errors: Mapping[int, str]) -> Mapping[int, str]:
    """The ranks' errors that caused the failure: those of ranks torchrun stopped left out (all if none is)."""
    return {r: e for r, e in errors.items() if e != STOPPED_ERROR} or errors


def exit_status(status: int, errors: Mapping[int, str]) -> int:
    """The job's exit status: the script's own on the first rank that failed of itself (torchrun's is always 1)."""
    if status == 0 or not errors:
        return status
    causes = _causes(errors)
    return script_status(causes[min(causes)]) or status


def _ranks_text(ranks: Sequence[int]) -> str:
    return f"rank{'s' if len(ranks) > 1 else ''} {', '.join(str(r) for r in ranks)}"


def job_error(errors: Mapping[int, str]) -> str:
    """``RuntimeError: boom (ranks 0, 1)``; different errors joined by ``; ``."""
    by_error: dict[str, list[int]] = {}
    causes = _causes(errors)
    for rank, error in sorted(errors.items(), key=lambda re: (re[0] not in causes, re[0])):  # the causes first
        by_error.setdefault(error, []).append(rank)
    return "; ".join(f"{error} ({_ranks_text(ranks)})" for error, ranks in by_error.items())


def failure_line(status: int, errors: Mapping[int, str], absent: Sequence[int]) -> str:
    """What failed: the script's exit status, its error and rank(s), and the ranks that left no trace."""
    lost = [f"{_ranks_text(absent)} left no trace"] if absent else []
    if errors:
        return f"the script failed (exit status {exit_status(status, errors)}): {'; '.join([job_error(errors), *lost])}"
    why = lost or ["no rank's trace holds an error"]
    return f"the job failed (torchrun's exit status {status}): {why[0]}; see torchrun's report above"


def merged_line(nproc: int, written: str, summary: str, *, failed: bool) -> str:
    """The merge's report; after a failed script it says the trace stops at the error."""
    tail = "; it holds the run up to the error" if failed else ""
    return f"merged {nproc} ranks into {written} ({summary}){tail}"


def not_merged_line(reason: str, kept: Sequence[str]) -> str:
    """Why the rank files were not merged, and which were kept."""
    files = f"kept {', '.join(kept)}" if kept else "no rank file was written"
    return f"not merged ({reason}); {files}"


KINETO_NOISE = b"USDT:"
"""Lines the ranks' profiler library (Kineto) prints on its own at each profiler start and stop, e.g.
``USDT:2026-12-04 21:05:27 29599:29599 SyncActivityProfilerHandler.cpp:59] profiler_stop``: kept off the
terminal."""


def run_quiet(argv: Sequence[str], env: dict[str, str]) -> int:
    """Run ``argv``, passing its stdout and stderr through as they come, less the lines that start with
    :data:`KINETO_NOISE`; returns its exit status. A partial line (a progress bar's ``\\r``) passes at once
    unless it could be the start of such a line."""
    with subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE) as proc:
        pumps = [
            threading.Thread(target=_pass_through, args=(pipe, out), daemon=True)
            for pipe, out in ((proc.stdout, sys.stdout), (proc.stderr, sys.stderr))
        ]
        for pump in pumps:
            pump.start()
        try:
            status = proc.wait()
        except BaseException:  # Ctrl-C reached the launcher too; do not leave it running
            proc.kill()
            raise
        for pump in pumps:
            pump.join()
    return status


def _pass_through(pipe: Any, out: IO[str]) -> None:
    """Copy ``pipe`` to ``out`` chunk by chunk, dropping every line that starts with KINETO_NOISE."""
    decode = codecs.getincrementaldecoder("utf-8")(errors="replace").decode
    held = b""  # the start of a line that may yet turn out to be noise
    at_start = True  # the next byte starts a line
    while chunk := os.read(pipe.fileno(), 1 << 16):
        data, held = held + chunk, b""
        kept = []
        for line in data.splitlines(keepends=True):
            whole = line.endswith((b"\n", b"\r"))
            if at_start and not whole and KINETO_NOISE.startswith(line[: len(KINETO_NOISE)]):
                held = line  # too short to tell, or noise still arriving
            elif not (at_start and line.startswith(KINETO_NOISE)):
                kept.append(line)
            if not held:
                at_start = whole
        if kept:
            out.write(decode(b"".join(kept)))
            out.flush()
    if held and not held.startswith(KINETO_NOISE):
        out.write(decode(held, final=True))
        out.flush()


@dataclass(frozen=True)
class _Written:
    """Where the ranks' files are looked for: beside ``out``, else in the fallback folder ``spare``; only files
    written since ``since`` (epoch seconds, the launch) count: a file left by an earlier run is not this one's."""

    spare: str
    since: float

    def find(self, path: str) -> str | None:
        """``path``, or the file of that name in the fallback folder, written by this launch; else None."""
        for candidate in (path, os.path.join(self.spare, os.path.basename(path))):
            with contextlib.suppress(OSError):
                if os.path.getmtime(candidate) >= self.since - MTIME_SLACK_S:
                    return candidate
        return None


def merge_summary(trace: Trace) -> str:
    """How the ranks' clocks were aligned, from a merged trace's notes: ``clock residual per rank 1: 12 us, 2:
    9 us`` for the ranks on other hosts than the first rank's (ranks on its host share its clock: nothing to
    align, and their collectives' ends differ by their own work, not by clocks)."""
    from collector.ranks.merge import alignment_rows, own_clock_rows

    ranks = alignment_rows(trace)
    if not ranks:
        return "clocks not aligned: no shared collectives"
    own = own_clock_rows(ranks)
    if not own:
        return "all ranks on one host: one clock"
    parts = [f"{r['rank']}: {r['residual_ns'] / 1e3:.0f} us" for r in own]
    return "clock residual per rank " + ", ".join(parts)
