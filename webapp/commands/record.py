"""Record a PyTorch job on the GPU: a built-in demo (demo:NAME) or your script, run unchanged as python would.

  streamscope record demo:naive --out naive.json.gz
  streamscope record train.py --lr 3e-4 --out run.json.gz

streamscope's options go before TARGET (or after demo:NAME); everything after a script is passed to it
unchanged, except a final `--out FILE` when --out was not given before TARGET. Exits with the script's status.
"""

from __future__ import annotations

import argparse

from collector.cli.runner import add_record_arguments


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    add_record_arguments(parser)


def run(args: argparse.Namespace) -> int:
    from collector.cli.runner import request_from_args, run_record

    return run_record(request_from_args(args))  # NoCudaError / RecordUsageError: StreamscopeError, exit 2
