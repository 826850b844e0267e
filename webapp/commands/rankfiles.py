"""Rank-file inputs shared by ``merge`` and ``analyze``: zip archives expanded, and where per-rank work runs."""

from __future__ import annotations

import argparse
from pathlib import Path

from webapp.commands.errors import CliError, check_input_file


def add_parallel_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--workers", type=int, default=None, metavar="N", help="processes for per-rank work (default: CPU count)"
    )
    parser.add_argument(
        "--ray",
        metavar="ADDRESS",
        default=None,
        help="run per-rank work as Ray tasks: 'auto' (the running cluster), an address, or 'local' (a fresh "
        "local instance); needs the [ray] extra and the files at the same paths on every node",
    )


def rank_paths(inputs: list[str], scratch: Path) -> list[str]:
    """The rank files named by ``inputs``: each a trace file, or a zip (by its bytes) whose rank files are
    written under ``scratch``. A missing file or a bad zip is a CliError."""
    from collector.ranks.rankzip import RankZipError, extract_ranks, is_rank_zip

    out: list[str] = []
    for n, name in enumerate(inputs):
        path = Path(name)
        check_input_file(path)
        if not is_rank_zip(path):
            out.append(str(path))
            continue
        try:
            out += [str(p) for p in extract_ranks(path, scratch / f"zip{n}")]
        except RankZipError as exc:
            raise CliError(str(exc)) from None
    return out


def check_workers(args: argparse.Namespace) -> None:

    if args.workers is not None and args.workers < 1:
        raise CliError("--workers must be at least 1")
