"""``streamscope record TARGET [ARGS...]``: record a built-in demo or run a user's script exactly as python would.

Argument rule: streamscope's own options come *before* TARGET (after ``demo:NAME`` too, since demos take
no arguments); everything after a script belongs to the script, untouched, with one exception:
when no ``--out`` was given before TARGET, a final ``--out FILE``
(or ``--out=FILE``) pair is streamscope's. To pass ``--out`` as your script's last argument, give
streamscope's ``--out`` before TARGET. TARGET is ``demo:NAME`` or a path to a Python script.

A script runs as ``__main__`` with ``sys.argv = [script, *args]`` and its folder first on ``sys.path``;
step boundaries are taken after each optimizer step. The process leaves with the script's exit status
(1 and a traceback when it raises); the trace is written in every case, with the error in its metadata.
"""

from __future__ import annotations

import argparse
import os
import runpy
import sys
import traceback
from dataclasses import dataclass
from typing import Any

from collector.errors import StreamscopeError
from collector.recording.api import TIMINGS, record
from collector.recording.recorder import NoCudaError, Recorder, require_cuda


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


def add_record_arguments(parser: argparse.ArgumentParser) -> None:
    _add_options(parser)
    parser.add_argument("target", metavar="TARGET", help="demo:NAME or a Python script")
    parser.add_argument(
        "args", nargs=argparse.REMAINDER, metavar="ARGS", help="the script's own arguments, passed unchanged"
    )


def _add_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--out", "-o", metavar="FILE", help="trace to write (.json or .json.gz); default: <demo or script name>.json.gz"
    )
    parser.add_argument(
        "--every",
        type=int,
        default=1,
        metavar="N",
        help="record every Nth step only (lower overhead on launch-bound loops)",
    )
    parser.add_argument("--steps", type=int, default=None, metavar="N", help="demos only: steps to record")
    parser.add_argument("--no-probe", action="store_true", help="skip the H2D bandwidth probe at start")
    parser.add_argument(
        "--timing",
        choices=TIMINGS,
        default="cupti",
        help="GPU timing source: cupti (exact device times, default; falls back to events when CUPTI is taken) "
        "or events (CUDA events around every op)",
    )


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
    return argparse.Namespace(
        target=ns.target,
        args=[],
        out=ns.out or extra.out,
        every=ns.every if ns.every != 1 else extra.every,
        steps=ns.steps if ns.steps is not None else extra.steps,
        no_probe=ns.no_probe or extra.no_probe,
        timing=ns.timing if ns.timing != "cupti" else extra.timing,
    )


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
    return RecordRequest(target, tuple(args), out, ns.every, ns.steps, not ns.no_probe, ns.timing)


def run_record(req: RecordRequest) -> int:
    """Check CUDA, then record ``req.target``; returns the exit status. Raises NoCudaError/RecordUsageError."""
    if req.target.startswith("demo:"):
        from collector import demos

        name = req.target[len("demo:") :]
        try:
            demos.get(name)
        except ValueError as exc:  # an unknown demo: its message lists the demos
            raise RecordUsageError(str(exc)) from None
        if req.args:
            raise RecordUsageError(f"demos take no arguments, got {' '.join(req.args)!r}")
        require_cuda()
        rec = record(
            req.target,
            req.out,
            timing=req.timing,
            every=req.every,
            probe=req.probe,
            source="demo",
            command=f"streamscope record {req.target}",
        )
        demos.run_demo(name, rec, steps=req.steps)
        _report(rec)
        return 0
    if not os.path.isfile(req.target):
        raise RecordUsageError(f"no such script: {req.target}")
    require_cuda()
    return run_script(req.target, req.args, req.out, every=req.every, probe=req.probe, timing=req.timing)


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
    workload = " ".join([path, *args])
    rec = recorder or record(workload, out, timing=timing, every=every, probe=probe, auto_steps=True, command=workload)
    saved_argv, saved_path = sys.argv[:], sys.path[:]
    sys.argv = [path, *args]
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    status, error = 0, ""
    rec.start()
    try:
        runpy.run_path(path, run_name="__main__")
    except SystemExit as exc:
        status, error = _exit_status(exc)
    except KeyboardInterrupt:
        status, error = 130, "KeyboardInterrupt"
        _print_script_traceback(path)
    except BaseException as exc:  # the script's own error: report it as python would
        status, error = 1, f"{type(exc).__name__}: {exc}"
        _print_script_traceback(path)
    finally:
        sys.argv, sys.path[:] = saved_argv, saved_path
        sys.stdout.flush()
        rec.stop(error=error)
    _report(rec)
    return status


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


def _report(rec: Recorder) -> None:
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
