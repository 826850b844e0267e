"""Record a PyTorch job on the GPU: a built-in demo (demo:NAME) or your script, run unchanged as python would.

The full help, with the rule for where the options go, is collector.cli.runner.record_description, shared
with ``python3 -m collector record``.
"""

from __future__ import annotations

import argparse

from collector.cli.runner import add_record_arguments, record_description


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.description = record_description("streamscope record")
    add_record_arguments(parser)


def run(args: argparse.Namespace) -> int:
    from collector.cli.runner import request_from_args, run_record

    return run_record(request_from_args(args))  # NoCudaError / RecordUsageError: StreamscopeError, exit 2
