"""The recorder's dispatch modes leave torch._dynamo unimported until Dynamo is in use, and never stop
torch.compile from compiling. Each case runs in a fresh interpreter (this one has Dynamo loaded)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parents[2]


def _run(code: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        cwd=ROOT,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def test_naming_ops_does_not_import_dynamo_and_dynamo_later_wraps_the_mode() -> None:
    out = _run(
        """
        import sys
        import torch
        from torch.utils._python_dispatch import TorchDispatchMode
        from collector.recording.opnames import NamingBound, OpNamer, warm_up
        assert "torch._dynamo" not in sys.modules
        warm_up()
        namer = OpNamer(NamingBound(ns=10**12))  # importing Dynamo takes seconds: no time bound here
        namer.start()
        torch.ones(4).mul_(2).sum()
        mode_cls = type(namer._mode)
        raw = mode_cls.__dict__["__torch_dispatch__"]
        print("dynamo after naming:", "torch._dynamo" in sys.modules)
        print("named:", sorted({name for _, name, _, _ in namer.rows}))
        import torch._dynamo
        wrapped = mode_cls.__dict__["__torch_dispatch__"]
        print("wrapped after import:", wrapped is not raw and getattr(wrapped, "__wrapped__", None) is raw)
        torch.ones(2).add_(1)
        print("still naming:", "aten::add_" in {name for _, name, _, _ in namer.rows})
        namer.stop()
        print("left meta_path:", not any(type(f).__name__ == "_ImportWatch" for f in sys.meta_path))
        """
    )
    assert "dynamo after naming: False" in out
    assert "'aten::mul_'" in out and "'aten::sum'" in out
    assert "wrapped after import: True" in out
    assert "still naming: True" in out
    assert "left meta_path: True" in out


def test_under_torch_compile_a_recorder_mode_compiles_as_without_one() -> None:
    """torch.compile inside an active mode of torch's own compiles no graph (it runs eagerly); inside the
    recorder's mode, made before Dynamo was imported, it compiles the same graph as with no mode at all."""
    out = _run(
        """
        import contextlib
        import sys
        import torch
        from torch.utils._python_dispatch import TorchDispatchMode
        from collector.recording.dispatchmode import mode_base

        class Ours(mode_base()):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                return func(*args, **(kwargs or {}))

        assert "torch._dynamo" not in sys.modules
        import torch._dynamo
        import torch._dynamo.testing

        class Torchs(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                return func(*args, **(kwargs or {}))

        x = torch.ones(5)
        for name, mode in (("Ours", Ours), ("Torchs", Torchs), ("none", contextlib.nullcontext)):
            backend = torch._dynamo.testing.EagerAndRecordGraphs()
            torch._dynamo.reset()
            with mode():
                out = torch.compile(lambda a, b: a + b, backend=backend)(x, x)
            print(name, "graphs:", len(backend.graphs), "sum:", float(out.sum()))
        """
    )
    lines = dict(line.split(" graphs: ") for line in out.splitlines() if " graphs: " in line)
    assert lines["Ours"] == lines["none"] == "1 sum: 10.0", out
    assert lines["Torchs"] == "0 sum: 10.0", out


def test_torch_compile_still_compiles_while_ops_are_named() -> None:
    """torch.compile runs eagerly under a dispatch mode that does not ask to be ignored, and keeps the frame
    eager: recording must not turn a compiled model into an eager one."""
    import torch
    import torch._dynamo.utils as dynamo_utils

    from collector.recording.opnames import OpNamer

    torch._dynamo.reset()
    dynamo_utils.counters.clear()
    net = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.ReLU())
    compiled = torch.compile(net, backend="eager")
    namer = OpNamer()
    namer.start()
    try:
        for _ in range(3):
            compiled(torch.ones(4, 16))
    finally:
        namer.stop("stop")
    assert dynamo_utils.counters["frames"]["ok"] >= 1
