"""Usage errors of both command lines are one line on stderr and exit code 2; ``--help`` is the full help and
says what the options really do."""

from __future__ import annotations

import subprocess
import sys

import pytest

from collector.cli.main import main as collector_main
from webapp.cli import main as streamscope_main

BAD = [
    (["analyze"], "streamscope analyze", "the following arguments are required: RUN"),
    (["frobnicate"], "streamscope", "argument COMMAND: invalid choice: 'frobnicate'"),
    (["analyze", "run.json", "--no-such-flag"], "streamscope analyze", "unrecognized arguments: --no-such-flag"),
    (["report", "run.json", "--budget-mb", "lots"], "streamscope report", "invalid float value: 'lots'"),
    (["compare", "a.json", "b.json", "--json", "--markdown"], "streamscope compare", "not allowed with argument"),
    (["record"], "streamscope record", "the following arguments are required: TARGET"),
    (["serve", "--port", "http"], "streamscope serve", "argument --port: invalid int value: 'http'"),
    (["--no-such-flag"], "streamscope", "unrecognized arguments: --no-such-flag"),
]


def _one_line(err: str, prog: str, says: str) -> None:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(f"{prog}: error: "), lines[0]
    assert says in lines[0] and lines[0].endswith(f"(see {prog} --help)"), lines[0]
    assert "usage:" not in err


COLLECTOR_BAD = [
    (["record"], "python3 -m collector record", "the following arguments are required: TARGET"),
    (["record", "--every", "two", "demo:naive"], "python3 -m collector record", "invalid int value: 'two'"),
    (["record", "--timing", "gpu", "demo:naive"], "python3 -m collector record", "invalid choice: 'gpu'"),
    (["demos", "--all"], "python3 -m collector demos", "unrecognized arguments: --all"),
    (["frobnicate"], "python3 -m collector", "invalid choice: 'frobnicate'"),
]


@pytest.mark.parametrize(
    "main, argv, prog, says",
    [(streamscope_main, *case) for case in BAD] + [(collector_main, *case) for case in COLLECTOR_BAD],
    ids=lambda v: " ".join(v) if isinstance(v, list) else None,
)
def test_a_usage_error_is_one_line_and_exit_2(main, argv, prog, says, capsys) -> None:
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert out == ""
    _one_line(err, prog, says)


def test_a_missing_target_does_not_ask_for_the_scripts_arguments(capsys) -> None:
    """ARGS may be empty: only TARGET is required (argparse names a REMAINDER positional as required too)."""
    assert collector_main(["record"]) == 2
    assert "TARGET, ARGS" not in capsys.readouterr().err


@pytest.mark.parametrize(
    "command",
    [
        ["-m", "webapp.cli", "analyze", "--no-such-flag", "x.json"],
        ["-m", "collector", "record", "--every", "two", "demo:naive"],
    ],
)
def test_the_installed_entry_points_exit_2_with_one_line(command: list[str]) -> None:
    done = subprocess.run([sys.executable, *command], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert done.stdout == ""
    assert len(done.stderr.strip().splitlines()) == 1 and ": error: " in done.stderr


@pytest.mark.parametrize(
    "main, argv, first",
    [
        (streamscope_main, ["--help"], "usage: streamscope [-h] [--version] COMMAND ..."),
        (streamscope_main, ["analyze", "--help"], "usage: streamscope analyze [-h]"),
        (collector_main, ["record", "--help"], "usage: python3 -m collector record [-h]"),
        (collector_main, ["--help"], "usage: python3 -m collector [-h] COMMAND ..."),
    ],
)
def test_help_is_still_the_full_help(main, argv, first, capsys) -> None:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith(first)
    assert "options:" in out and "-h, --help" in out


def _help(main, argv, capsys) -> str:
    with pytest.raises(SystemExit):
        main(argv)
    return " ".join(capsys.readouterr().out.split())


def test_collector_record_help_states_the_argument_rule_and_what_applies_when(capsys) -> None:
    text = _help(collector_main, ["record", "--help"], capsys)
    # the rule for where options go, with examples that run as this command
    assert "python3 -m collector record demo:naive --out naive.json.gz" in text
    assert "everything after a script is passed to it unchanged, except a final `--out FILE`" in text
    # --nproc's rank files are merged into OUT; the torchrun flags do nothing without --nproc
    assert "merged into OUT when every rank ran on this node" in text
    assert "the torchrun flags apply with --nproc only" in text
    group = text.index("several ranks (the torchrun flags apply with --nproc only)")
    assert group < text.index("--nproc N, --nproc-per-node N launch") < text.index("--nnodes NNODES number of")
    # the defaults the plant really uses
    assert "the straggler's extra ms per step (default 20)" in text
    assert "data (the default), compute or sync" in text


def test_record_defaults_are_the_ones_the_help_states() -> None:
    import argparse

    from collector.cli.runner import add_record_arguments, request_from_args

    parser = argparse.ArgumentParser(prog="record")
    add_record_arguments(parser)
    ns = parser.parse_args(["demo:ddp", "--slow-rank", "1"])
    req = request_from_args(ns)
    assert (req.delay_ms, req.slow_cause) == (20.0, "data")


def test_streamscope_help_points_to_the_commands_help(capsys) -> None:
    text = _help(streamscope_main, ["--help"], capsys)
    assert "Run `streamscope COMMAND --help` for a command's arguments and options." in text


def test_analyze_help_says_several_runs_give_a_summary_without_findings(capsys) -> None:
    text = _help(streamscope_main, ["analyze", "--help"], capsys)
    assert "wait inside collectives per step" in text
    assert "That summary has no findings or what-if: merge the ranks and analyze the merged run" in text
