"""List the built-in demo loops (record one with `streamscope record demo:NAME`)."""

from __future__ import annotations

import argparse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--verbose", "-v", action="store_true", help="also say what each demo teaches")


def run(args: argparse.Namespace) -> int:
    from collector.cli.main import print_demos

    print_demos(verbose=args.verbose)
    return 0
