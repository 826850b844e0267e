"""``streamscope record --nproc N TARGET``: launch every rank with torch.distributed's own launcher.

The ranks are started by ``python -m torch.distributed.run`` (torchrun) with its own flags, so a multi-node
job is launched the same way on each node (``--nnodes``, ``--node-rank``, ``--rdzv-endpoint``, ...). Each rank
runs ``python -m collector record TARGET`` with the launcher's environment (``RANK``, ``WORLD_SIZE``,
``LOCAL_RANK``) and writes its own trace: ``run.json.gz`` becomes ``run.rank0.json.gz``, ``run.rank1.json.gz``,
... When every rank ran on this node, the rank files are then merged (clocks aligned on the collectives,
collector.ranks.merge) into the ``--out`` file itself. The ranks' output reaches the terminal as it comes, less the
``USDT:...`` lines their profiler library prints on its own (:func:`run_quiet`).
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
from collections.abc import Sequence
from typing import IO, Any

from collector.traceformat.save import FALLBACK_DIR_ENV

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

_RANK_FILE = re.compile(r"^(?P<stem>.*)\.rank(?P<rank>\d+)(?P<suffix>\.json(?:\.gz)?)$")


def add_launch_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--nproc",
        "--nproc-per-node",
        dest="nproc",
        type=int,
        default=0,
        metavar="N",
        help="launch N ranks on this node with torch.distributed.run (torchrun); each writes OUT.rankR.json.gz",
    )
    for flag, kind, text in TORCHRUN_OPTIONS:
        parser.add_argument(flag, type=kind, default=None, help=text)


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
    """Run the ranks; on one node, merge their files into ``out``. Returns the launcher's exit status.

    The ranks share one fallback folder (collector.traceformat.save): a rank that cannot write its file
    beside ``out`` saves it there, and the merge finds it there."""
    spare = tempfile.mkdtemp(prefix="streamscope-ranks-")
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "STREAMSCOPE_RANK_CHILD": "1", FALLBACK_DIR_ENV: spare}
    try:
        status = run_quiet(launcher_argv(nproc, flags, rank_argv), env)
        if status != 0 or not single_node(flags):
            return status
        return _merge_ranks(nproc, out, spare, status)
    finally:
        with contextlib.suppress(OSError):
            os.rmdir(spare)  # only when no rank had to save its file there


def _merge_ranks(nproc: int, out: str, spare: str, status: int) -> int:
    paths = [_found(rank_path(out, r), spare) for r in range(nproc)]
    missing = [rank_path(out, r) for r, p in enumerate(paths) if p is None]
    if missing:
        print(f"streamscope: no trace from {', '.join(missing)}; not merged", file=sys.stderr)
        return status
    from collector.ranks.merge import merge_files
    from collector.traceformat.save import save_trace

    trace = merge_files([p for p in paths if p is not None])
    written = save_trace(trace, out)
    print(f"streamscope: merged {nproc} ranks into {written} ({merge_summary(trace)})", file=sys.stderr, flush=True)
    return status


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


def _found(path: str, spare: str) -> str | None:
    """``path``, or the file of that name in the ranks' fallback folder, or None."""
    for candidate in (path, os.path.join(spare, os.path.basename(path))):
        if os.path.exists(candidate):
            return candidate
    return None


def merge_summary(trace: object) -> str:
    """``clock residual per rank: 0: 0 us, 1: 12 us`` from a merged trace's alignment notes."""
    notes = getattr(getattr(trace, "meta", None), "notes", {}) or {}
    ranks = (notes.get("clock_alignment") or {}).get("ranks") or []
    parts = [f"{r['rank']}: {r['residual_ns'] / 1e3:.0f} us" for r in ranks]
    return "clock residual per rank " + ", ".join(parts) if parts else "clocks not aligned: no shared collectives"
