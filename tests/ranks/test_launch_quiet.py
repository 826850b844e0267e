"""``record --nproc`` passes the ranks' output through without the profiler library's own ``USDT:`` lines."""

from __future__ import annotations

import os
import sys
import textwrap

import pytest

from collector.cli.launch import run_quiet

CHILD = textwrap.dedent(
    r"""
    import os, sys, time
    print("rank 0: step 1", flush=True)
    os.write(2, b"USDT:2026-12-04 21:05:27 29599:29599 SyncActivityProfilerHandler.cpp:52] profiler_start\n")
    os.write(2, b"US")  # a noise line in pieces
    time.sleep(0.05)
    os.write(2, b"DT:2026-12-04 21:05:28 29599:29599 SyncActivityProfilerHandler.cpp:59] profiler_stop\n")
    os.write(2, b"streamscope: wrote run.rank0.json.gz\n")
    os.write(1, b"50%\r")  # a progress bar: no newline
    time.sleep(0.05)
    os.write(1, b"100%\nUSER line kept\nrank 0 says USDT:mid-line text is kept\n")
    sys.exit(3)
    """
)


def test_noise_lines_are_dropped_and_the_rest_passes_in_order(capfd: pytest.CaptureFixture[str]) -> None:
    status = run_quiet([sys.executable, "-c", CHILD], dict(os.environ))
    out, err = capfd.readouterr()
    assert status == 3
    assert out == "rank 0: step 1\n50%\r100%\nUSER line kept\nrank 0 says USDT:mid-line text is kept\n"
    assert err == "streamscope: wrote run.rank0.json.gz\n"
