"""``streamscope record TARGET [ARGS...]``: record a built-in demo or run a user's script exactly as python would.

Argument rule: streamscope's own options come *before* TARGET (after ``demo:NAME`` too, since demos take
no arguments); everything after a script belongs to the script, untouched, with one exception:
when no ``--out`` was given before TARGET, a final ``--out FILE``
(or ``--out=FILE``) pair is streamscope's. To pass ``--out`` as your script's last argument, give
streamscope's ``--out`` before TARGET. TARGET is ``demo:NAME`` or a path to a Python script.

A script runs as ``__main__`` with ``sys.argv = [script, *args]`` and its folder first on ``sys.path``;
step boundaries are taken after each optimizer step. The process leaves with the script's exit status
(1 and a traceback when it raises); the trace is written in every case, with the error in its metadata.
The run is named after the script's file; the whole command is kept in the metadata.

``--out`` is checked before anything runs (its folder made; a path that cannot be written stops the
command with OutPathError, exit 2), and a trace that still cannot be written at the end is saved
to a fallback path that is printed (collector.traceformat.save).
"""

from __future__ import annotations

import argparse
import os
import runpy
import shlex
import signal
import sys
import threading
import traceback
from dataclasses import dataclass
from typing import Any

from collector.cli.launch import STOPPED_ERROR, add_launch_arguments, launch, rank_out, torchrun_flags
from collector.errors import StreamscopeError
from collector.recording.api import record
from collector.recording.base import NoCudaError, require_cuda
from collector.recording.sources import DEFAULT_TIMING, TIMING_SOURCES, recorder_class
from collector.traceformat.save import prepare_out


class RecordUsageError(StreamscopeError, ValueError):
    """A mistake on the record command line (exit 2, one line)."""


@dataclass(frozen=True)
class RecordRequest:
    target: str
    args: tuple[str, ...]
    out: str
    every: int = 1
    steps: int | None = None
    probe: bool = True
    timing: str = "cupti"
    nproc: int = 0
    launcher_flags: tuple[str, ...] = ()
    slow_rank: int = -1
    delay_ms: float = 0.0
    slow_cause: str = "data"

    def rank_argv(self) -> list[str]:
        """The command line of one rank (``python -m collector record ...``) for the launcher."""
        argv = ["--out", self.out, "--every", str(self.every), "--timing", self.timing]
        argv += [] if self.steps is None else ["--steps", str(self.steps)]
        argv += [] if self.probe else ["--no-probe"]
        if self.slow_rank >= 0:
            argv += ["--slow-rank", str(self.slow_rank), "--delay-ms", str(self.delay_ms)]
            argv += ["--slow-cause", self.slow_cause]
        return [*argv, self.target, *self.args]


def record_description(prog: str) -> str:
    """The record command's help text (the argument rule above), its examples run as ``prog``."""
    return (
        "Record a PyTorch job on the GPU: a built-in demo (demo:NAME) or your script, run unchanged as python "
        f"would.\n\n  {prog} demo:naive --out naive.json.gz\n  {prog} train.py --lr 3e-4 --out run.json.gz\n\n"
        "The record options go before TARGET (or after demo:NAME); everything after a script is passed to it\n"
        "unchanged, except a final `--out FILE` when --out was not given before TARGET. Exits with the script's\n"
        "status."
    )


def add_record_arguments(parser: argparse.ArgumentParser) -> None:
    _add_options(parser)
    parser.add_argument("target", metavar="TARGET", help="demo:NAME or a Python script")
    rest = parser.add_argument(
        "args", nargs=argparse.REMAINDER, metavar="ARGS", help="the script's own arguments, passed unchanged"
    )
    rest.required = False  # argparse counts a REMAINDER positional as required and names it when TARGET is missing


def _add_options(parser: argparse.ArgumentParser) -> None:
    add_launch_arguments(parser)
    parser.add_argument("--slow-rank", type=int, default=-1, metavar="R", help="demo:ddp: plant a straggler on rank R")
    parser.add_argument(
        "--delay-ms",
        type=float,
        default=20.0,
        metavar="D",
        help="demo:ddp: the straggler's extra ms per step (default 20)",
    )
    parser.add_argument(
        "--slow-cause",
        default="data",
        metavar="CAUSE",
        help="demo:ddp: what the straggler spends its extra time on: data (the default), compute or sync",
    )
    parser.add_argument(
        "--out",
        "-o",
        metavar="FILE",
        help="trace to write (.json or .json.gz; its folder is made and checked before anything runs); "
        "default: <demo or script name>.json.gz",
    )
    parser.add_argument(
        "--every",
        type=int,
        default=1,
        metavar="N",
        help="keep every Nth step only (smaller traces; with events timing also lower overhead)",
    )
    parser.add_argument(
        "--steps",
        type=int,
        default=None,
        metavar="N",
        help="demos only: steps to record (default: the demo's own); a script is recorded until it ends",
    )
    parser.add_argument("--no-probe", action="store_true", help="skip the H2D bandwidth probe at start")
    parser.add_argument(
        "--timing",
        choices=tuple(TIMING_SOURCES),
        default=DEFAULT_TIMING,
        help=_timing_help(),
    )


def _timing_help() -> str:
    """``--timing``'s help, from the registry: each source's name and its ``summary``."""
    named = [f"{name} ({cls.summary})" if cls.summary else name for name, cls in TIMING_SOURCES.items()]
    return "timing source: " + (", ".join(named[:-1]) + " or " if len(named) > 1 else "") + named[-1]


def _demo_options(ns: argparse.Namespace) -> argparse.Namespace:
    """Demos take no arguments, so options after ``demo:NAME`` are streamscope's own."""
    parser = argparse.ArgumentParser(prog=f"record {ns.target}", add_help=False, exit_on_error=False)
    _add_options(parser)
    try:
        extra, unknown = parser.parse_known_args(list(ns.args))
    except argparse.ArgumentError as exc:
        raise RecordUsageError(str(exc)) from None
    if unknown:
        raise RecordUsageError(f"demos take no arguments, got {' '.join(unknown)!r}")
    merged = argparse.Namespace(target=ns.target, args=[])
    for key, default in vars(parser.parse_args([])).items():  # given before TARGET wins, else after it
        before = getattr(ns, key, default)
        setattr(merged, key, before if before != default else getattr(extra, key))
    return merged


def request_from_args(ns: argparse.Namespace) -> RecordRequest:
    """Apply the argument rule above; RecordUsageError on a bad value."""
    if str(ns.target).startswith("demo:") and ns.args:
        ns = _demo_options(ns)
    args = list(ns.args or [])
    out = ns.out
    if out is None and args:
        if len(args) >= 2 and args[-2] == "--out":
            out, args = args[-1], args[:-2]
        elif args[-1].startswith("--out="):
            out, args = args[-1][len("--out=") :], args[:-1]
    target = str(ns.target)
    if not out:
        stem = target[len("demo:") :] if target.startswith("demo:") else os.path.splitext(os.path.basename(target))[0]
        out = f"{stem or 'run'}.json.gz"
    if not (out.endswith(".json") or out.endswith(".json.gz")):
        raise RecordUsageError(f"--out must end in .json or .json.gz, got {out!r}")
    if ns.every < 1:
        raise RecordUsageError(f"--every must be a positive number of steps, got {ns.every}")
    if ns.steps is not None and ns.steps < 1:
        raise RecordUsageError(f"--steps must be a positive number, got {ns.steps}")
    nproc = int(getattr(ns, "nproc", 0) or 0)
    if nproc < 0:
        raise RecordUsageError(f"--nproc must be a positive number of ranks, got {nproc}")
    slow_rank = int(getattr(ns, "slow_rank", -1))
    if slow_rank >= 0 and target != "demo:ddp":
        raise RecordUsageError("--slow-rank, --delay-ms and --slow-cause are options of demo:ddp")
    from collector.demos.ddp import Plant

    plant = Plant(slow_rank, float(getattr(ns, "delay_ms", 20.0)), str(getattr(ns, "slow_cause", "data")))
    try:
        plant.check(cuda=True)
    except ValueError as exc:
        raise RecordUsageError(str(exc)) from None
    return RecordRequest(
        target,
        tuple(args),
        out,
        ns.every,
        ns.steps,
        not ns.no_probe,
        ns.timing,
        nproc,
        torchrun_flags(ns),
        plant.rank,
        plant.delay_ms,
        plant.cause,
    )


def _rank_out(out: str) -> str:
    """This rank's file: ``OUT.rankR.json.gz`` inside a job of several ranks, else ``out`` (as the launcher
    expects: collector.cli.launch.rank_out)."""
    size = os.environ.get("WORLD_SIZE", "")
    rank = os.environ.get("RANK", "")
    return rank_out(out, int(rank) if rank.isdigit() else 0, int(size) if size.isdigit() else 1)


def _require_device(timing: str, cpu_ok: bool) -> None:
    """CUDA is needed unless the workload runs without it (``cpu_ok``: a script, demo:ddp) and so does the
    source that records it here (``needs_cuda`` of collector.recording.sources.recorder_class: a source that
    needs CUDA gives way to the CPU source on a rank without CUDA in a distributed job)."""
    if cpu_ok and not recorder_class(timing).needs_cuda:
        return
    require_cuda()


def run_record(req: RecordRequest) -> int:
    """Check CUDA, then record ``req.target``; returns the exit status. Raises NoCudaError/RecordUsageError.
    With ``req.nproc``, launch that many ranks instead (collector.cli.launch), each recording itself."""
    if req.nproc:
        if not req.target.startswith("demo:") and not os.path.isfile(req.target):
            raise RecordUsageError(f"no such script: {req.target}")
        prepare_out(req.out)
        return launch(req.nproc, req.launcher_flags, req.rank_argv(), req.out)
    out = _rank_out(req.out)
    if req.target.startswith("demo:"):
        from collector.demos import loops

        name = req.target[len("demo:") :]
        try:
            loops.get(name)
        except ValueError as exc:  # an unknown demo: its message lists the demos
            raise RecordUsageError(str(exc)) from None
        if req.args:
            raise RecordUsageError(f"demos take no arguments, got {' '.join(req.args)!r}")
        _require_device(req.timing, cpu_ok=name == "ddp")
        prepare_out(out)
        from collector.demos.ddp import Plant

        plant = Plant(req.slow_rank, req.delay_ms, req.slow_cause)
        try:
            plant.check(cuda=recorder_class(req.timing).needs_cuda)
        except ValueError as exc:
            raise RecordUsageError(str(exc)) from None
        rec = record(
            req.target,
            out,
            timing=req.timing,
            every=req.every,
            probe=req.probe,
            source="demo",
            command=f"streamscope record {req.target}",
        )
        loops.run_demo(name, rec, steps=req.steps, plant=plant)
        _report(rec)
        return 0
    if not os.path.isfile(req.target):
        raise RecordUsageError(f"no such script: {req.target}")
    _require_device(req.timing, cpu_ok=True)
    prepare_out(out)
    rank_child = bool(os.environ.get("STREAMSCOPE_RANK_CHILD"))
    if rank_child:
        # torchrun stops every rank (SIGTERM) as soon as one fails: a rank still running ends its script there
        # and writes its trace up to that point; one already writing finishes first
        signal.signal(signal.SIGTERM, _stop_on_sigterm)
    status = run_script(req.target, req.args, out, every=req.every, probe=req.probe, timing=req.timing)
    if rank_child:
        # a rank launched by `record --nproc`: its trace is written; leave without tearing down the script's
        # process group at interpreter exit, which can hang (gloo's worker threads wait for the GIL)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(status)
    return status


def run_script(
    path: str,
    args: tuple[str, ...] | list[str],
    out: str,
    *,
    every: int = 1,
    probe: bool = True,
    recorder: Any = None,
    timing: str = "cupti",
) -> int:
    """Run ``path`` as python would, recording it to ``out``; returns the script's exit status.

    ``recorder`` (tests) replaces the Recorder: anything with ``start()``, ``stop(error=...)``, ``trace``, ``out``.
    """
    command = shlex.join([path, *args])  # the run is named after the script's file; the command stays in the metadata
    name = os.path.basename(path)
    rec = recorder or record(name, out, timing=timing, every=every, probe=probe, auto_steps=True, command=command)
    saved_argv, saved_path = sys.argv[:], sys.path[:]
    sys.argv = [path, *args]
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    status, error = 0, ""
    rec.start()
    namespace: dict[str, Any] = {}
    try:
        # keep the script's objects alive: a process group freed here, with the GIL held, can deadlock with
        # its own worker threads (seen with gloo and DDP); ranks leave with os._exit (run_record)
        namespace = runpy.run_path(path, run_name="__main__")
    except _Stopped:
        status, error = 128 + signal.SIGTERM, STOPPED_ERROR
    except SystemExit as exc:
        status, error = _exit_status(exc)
    except KeyboardInterrupt:
        status, error = 130, "KeyboardInterrupt"
        _print_script_traceback(path)
    except BaseException as exc:  # the script's own error: report it as python would
        status, error = 1, f"{type(exc).__name__}: {exc}"
        _print_script_traceback(path)
    finally:
        _STOPPING.set()  # a SIGTERM from here on waits for the trace to be written
        sys.argv, sys.path[:] = saved_argv, saved_path
        sys.stdout.flush()
        rec.stop(error=error)
    _report(rec)
    _KEPT.append(namespace)
    return status


_STOPPING = threading.Event()
"""Set once the script has ended and its trace is being written."""


class _Stopped(SystemExit):
    """The script of a rank ended by torchrun's SIGTERM."""


def _stop_on_sigterm(signum: int, frame: Any) -> None:
    """SIGTERM in a rank of ``record --nproc``: end the script as python's default would (exit 143), so that
    its trace is written up to here; ignored while the trace is being written (the rank leaves after)."""
    if not _STOPPING.is_set():
        raise _Stopped(128 + signum)


_KEPT: list[dict[str, Any]] = []
"""The namespaces of recorded scripts, never freed before the process ends (see run_script)."""


def _exit_status(exc: SystemExit) -> tuple[int, str]:
    code: Any = exc.code
    if code is None or code == 0:
        return 0, ""
    if isinstance(code, int):
        return code, f"SystemExit: {code}"
    print(code, file=sys.stderr)  # python prints a non-integer exit code and exits 1
    return 1, f"SystemExit: {code}"


def _print_script_traceback(path: str) -> None:
    """Print the current exception's traceback from the script's first frame on, as python would."""
    exc = sys.exc_info()[1]
    if exc is None:
        return
    te = traceback.TracebackException.from_exception(exc)
    script = os.path.abspath(path)
    frames = list(te.stack)
    for i, fs in enumerate(frames):
        if os.path.abspath(fs.filename) == script:
            te.stack = traceback.StackSummary.from_list(frames[i:])
            break
    print("".join(te.format()), end="", file=sys.stderr)


def _report(rec: Any) -> None:
    trace = rec.trace
    if trace is not None and rec.out:
        steps = len(trace.steps())
        print(
            f"streamscope: wrote {rec.out} ({len(trace.intervals)} intervals, {steps} steps)",
            file=sys.stderr,
            flush=True,
        )


__all__ = [
    "NoCudaError",
    "RecordRequest",
    "RecordUsageError",
    "add_record_arguments",
    "request_from_args",
    "run_record",
    "run_script",
]
