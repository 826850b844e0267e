"""GPU tests of the collector (run on a CUDA machine; skipped elsewhere by tests/conftest.py)."""

from __future__ import annotations

import inspect
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from collector.recording.gcspans import label

pytestmark = pytest.mark.gpu

ROOT = Path(__file__).resolve().parents[2]
TIMING = {"mode": "cupti"}


@pytest.fixture(params=["cupti", "events"], autouse=True)
def timing(request: pytest.FixtureRequest) -> str:
    """Every test runs once per timing source."""
    TIMING["mode"] = request.param
    return str(request.param)


def _record(fn, **options):
    from collector.recording.api import record

    rec = record("test", None, probe=False, timing=TIMING["mode"], **options)
    rec.start()
    try:
        fn(rec)
    finally:
        rec.stop()
    assert rec.trace is not None
    return rec.trace


def _demo_trace(name: str, steps: int):
    from collector.demos import loops
    from collector.recording.api import record

    rec = record(f"demo:{name}", None, probe=False, source="demo", timing=TIMING["mode"])
    loops.run_demo(name, rec, steps=steps, quiet=True)
    assert rec.trace is not None
    return rec.trace


def _overlap_ns(a: pd.DataFrame, b: pd.DataFrame) -> int:
    """Total time during which some interval of ``a`` and some interval of ``b`` both run."""
    total = 0
    bs, be = b["start_ns"].to_numpy(), b["end_ns"].to_numpy()
    for s, e in zip(a["start_ns"].to_numpy(), a["end_ns"].to_numpy(), strict=False):
        total += int(np.clip(np.minimum(be, e) - np.maximum(bs, s), 0, None).sum())
    return total


def test_overlap_copies_run_under_compute_on_two_streams() -> None:
    iv = _demo_trace("overlap", 12).intervals
    gpu = iv[iv["lane_kind"] != "cpu_thread"]
    copies = gpu[(gpu["kind"] == "memcpy_h2d") & (gpu["bytes"] > 1 << 20)]
    kernels = gpu[gpu["kind"] == "kernel"]
    assert len(copies) >= 10
    assert set(copies["lane_kind"]) == {"transfer_stream"}
    assert set(kernels["lane_kind"]) == {"compute_stream"}
    assert "prefetch" in str(copies["lane_label"].iloc[0])
    shared = _overlap_ns(copies, kernels)
    # measured on an H200: 95% of the copy time under kernels (CUPTI, 30 warm steps); events timing read 44%
    # over the first 12 steps
    assert shared > 0.4 * int(copies["dur_ns"].sum())


def test_naive_copies_do_not_overlap_compute() -> None:
    iv = _demo_trace("naive", 8).intervals
    gpu = iv[iv["lane_kind"] != "cpu_thread"]
    assert gpu["lane"].nunique() == 1
    copies = gpu[gpu["kind"] == "memcpy_h2d"]
    kernels = gpu[gpu["kind"] == "kernel"]
    assert len(copies) >= 8
    assert set(copies["memory_kind"]) == {"pageable"}
    assert _overlap_ns(copies, kernels) <= 0.01 * int(copies["dur_ns"].sum())
    waits = iv[iv["kind"] == "sync_wait"]
    assert {"blocking_copy", "item"} <= set(waits["cause"])


def test_sync_trap_waits_point_at_the_lines() -> None:
    from collector.demos import loops

    lines, first = inspect.getsourcelines(loops.sync_trap)
    code = [s.strip() for s in lines]  # the code's lines, not the docstring that names them
    print_line = first + next(i for i, s in enumerate(code) if s.startswith('print(f"step'))
    item_line = first + next(i for i, s in enumerate(code) if s.startswith("if loss.item() < best"))
    iv = _demo_trace("sync-trap", 12).intervals
    waits = iv[iv["kind"] == "sync_wait"]
    by_cause = {c: set(waits.loc[waits["cause"].astype(str) == c, "source"].astype(str)) for c in ("print", "item")}
    assert any(s.endswith(f"demos/loops.py:{print_line}") for s in by_cause["print"]), by_cause
    assert any(s.endswith(f"demos/loops.py:{item_line}") for s in by_cause["item"]), by_cause
    # the item wait really waits for the step's GPU work
    item_waits = waits[(waits["cause"] == "item") & waits["source"].astype(str).str.endswith(f":{item_line}")]
    assert item_waits["dur_ns"].median() > 100_000


def test_copy_kinds_bytes_and_memory_kinds() -> None:
    import torch

    n = 1 << 20
    pageable = torch.ones(n)
    pinned = torch.ones(n).pin_memory()

    def work(rec):
        a = pageable.to("cuda")
        b = pinned.to("cuda", non_blocking=True)
        c = torch.empty(n, device="cuda")
        c.copy_(a)
        _ = b.cpu()
        host = torch.empty(n, pin_memory=True)
        host.copy_(c, non_blocking=True)
        c.zero_()
        torch.cuda.synchronize()

    trace = _record(work)
    iv = trace.intervals
    gpu = iv[iv["lane_kind"] != "cpu_thread"]
    rows = gpu[gpu["kind"].isin(["memcpy_h2d", "memcpy_d2h", "memcpy_d2d", "memset"])]
    got = [(str(r.kind), int(r.bytes), str(r.memory_kind), bool(r.non_blocking)) for r in rows.itertuples()]
    nbytes = 4 * n
    cupti = TIMING["mode"] == "cupti"
    expected = [
        ("memcpy_h2d", nbytes, "pageable", False),
        ("memcpy_h2d", nbytes, "pinned", True),
        ("memcpy_d2d", nbytes, "device", False),
        ("memcpy_d2h", nbytes, "pageable", False),
        ("memcpy_d2h", nbytes, "pinned", True),
    ]
    # events timing classifies aten::zero_ as a memset; CUPTI sees the fill kernel torch really runs
    assert got == (expected if cupti else [*expected, ("memset", nbytes, "", False)])
    waits = iv[iv["kind"] == "sync_wait"]
    causes = [c for i, c in enumerate(waits["cause"]) if i == 0 or c != waits["cause"].iloc[i - 1]]
    assert causes == ["blocking_copy", "cpu", "synchronize"]
    elsewhere = waits[~waits["source"].astype(str).str.contains("test_recorder_gpu.py:", regex=False)]
    assert elsewhere.empty, elsewhere[["name", "cause", "source", "start_ns", "end_ns"]].to_string()
    launches = iv.set_index("id")
    assert set(gpu["launch_id"]) <= set(launches.index)


def test_the_probe_runs_at_stop_for_a_large_upload_and_measures_shared_pages() -> None:
    """A 4 MiB upload brings the probe: pinned and pageable bandwidth, and what a first read of shared memory
    costs a page; a run of small copies only does without it."""
    import torch

    from collector.recording.api import record

    def recorded(nbytes: int):
        host = torch.ones(nbytes // 4)
        rec = record("probe", None, probe=True, timing=TIMING["mode"])
        rec.start()
        try:
            host.to("cuda")
            torch.cuda.synchronize()
        finally:
            rec.stop()
        assert rec.trace is not None
        return dict(rec.trace.meta.bandwidth_probe)

    probe = recorded(4 << 20)
    assert probe["h2d_pinned_gbps"] > probe["h2d_pageable_gbps"] > 0
    assert 0 < probe["shm_fault_ns_per_4kib"] < 100_000
    if TIMING["mode"] == "cupti":  # the events recorder probes at start, whatever the run copies
        assert recorded(4 << 10) == {}


def test_implicit_and_explicit_syncs_are_classified() -> None:
    import torch

    def work(rec):
        x = torch.randn(1000, device="cuda")
        _ = x.nonzero()
        _ = x[x > 0]
        if x.sum():
            pass
        _ = x.tolist()
        s = torch.cuda.Stream()
        with torch.cuda.stream(s):
            y = x * 2
        s.synchronize()
        ev = torch.cuda.Event()
        ev.record()
        ev.synchronize()
        _ = f"{y.sum()}"
        _ = y.sum().item()

    waits = _record(work).intervals.query("kind == 'sync_wait'")
    causes = list(waits["cause"])
    for cause in (
        "nonzero",
        "masked_index",
        "bool",
        "tolist",
        "stream_synchronize",
        "event_synchronize",
        "print",
        "item",
    ):
        assert cause in causes, (cause, causes)


def test_mask_indexing_after_the_first_step_keeps_its_cause_and_line() -> None:
    import torch

    if TIMING["mode"] != "cupti":
        pytest.skip("the events timing names every op's cause itself")
    plain = torch.Tensor.__getitem__
    wrapped: list[bool] = []
    mask_lines: set[int] = set()

    def work(rec):
        x = torch.randn(4096, device="cuda")
        for _ in range(4):
            y = x[x > 0]
            mask_lines.add(sys._getframe().f_lineno - 1)
            wrapped.append(torch.Tensor.__getitem__ is not plain)
            y.sum()
            rec.step()

    iv = _record(work).intervals
    waits = iv[(iv["kind"] == "sync_wait") & (iv["cause"] == "masked_index")]
    assert wrapped == [True, False, False, False]  # indexing costs its plain price after the first step
    assert sorted(set(waits["step"])) == [0, 1, 2, 3]
    assert {str(s).rsplit(":", 1)[-1] for s in waits["source"]} == {str(n) for n in mask_lines}


def test_clock_alignment_within_50us() -> None:
    import torch

    a = torch.randn(4096, 4096, device="cuda")
    for _ in range(3):
        a @ a
    torch.cuda.synchronize()

    def work(rec):
        for _ in range(5):
            for _ in range(10):
                a @ a
            torch.cuda.synchronize()
            rec.step()

    iv = _record(work).intervals
    waits = iv[(iv["kind"] == "sync_wait") & (iv["cause"] == "synchronize") & (iv["step"] >= 0)]
    waits = waits.sort_values("start_ns")
    kernels = iv[iv["kind"] == "kernel"]
    assert len(waits) == 5
    lags = [
        int(w.end_ns) - int(kernels[kernels["step"] == k]["end_ns"].max()) for k, w in enumerate(waits.itertuples())
    ]
    # a clock error would shift every step alike; a host that wakes late from one wait (seen: 154 us once, on a
    # first step) is real host time, not misalignment
    assert abs(float(np.median(lags))) < 50_000 and max(abs(x) for x in lags) < 500_000, lags


def test_backward_thread_ops_are_recorded() -> None:
    import torch

    model = torch.nn.Sequential(torch.nn.Linear(1024, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 10)).cuda()
    x = torch.randn(256, 1024, device="cuda")

    def work(rec):
        model(x).sum().backward()

    iv = _record(work).intervals
    kernels = iv[iv["kind"] == "kernel"]
    # forward: 2 addmm; backward: mm for grads of both layers
    assert (kernels["name"].astype(str) == "aten::mm").sum() >= 3
    assert (kernels["name"].astype(str) == "aten::threshold_backward").sum() == 1
    assert iv[iv["kind"] == "cpu_op"]["lane"].nunique() == 2  # autograd's device thread has its own lane


def test_every_nth_step_and_annotations() -> None:
    import torch

    x = torch.randn(1000, device="cuda")

    def work(rec):
        for _ in range(9):
            with torch.profiler.record_function("my-range"):
                x.mul_(1.0)
            with torch.cuda.nvtx.range("nvtx-range"):
                x.mul_(1.0)
            rec.step()

    trace = _record(work, every=4)
    assert list(trace.steps()["step"]) == [0, 4, 8]
    iv = trace.intervals
    gpu = iv[iv["lane_kind"] != "cpu_thread"]
    stray = gpu[~gpu["step"].isin([0, 4, 8])]
    assert stray.empty, stray[["kind", "name", "start_ns", "launch_id", "step"]].to_string()
    assert sorted(set(gpu["step"])) == [0, 4, 8]
    ann = iv[(iv["kind"] == "annotation") & (iv["lane_kind"] == "cpu_thread")]
    collections = {label(generation) for generation in range(3)}  # a collection the test suite's heap made due
    ranges = [name for name in ann["name"].astype(str) if name not in collections]
    assert sorted(ranges) == ["my-range"] * 3 + ["nvtx-range"] * 3
    on_gpu = iv[(iv["kind"] == "annotation") & (iv["lane_kind"] != "cpu_thread")]  # CUPTI's GPU-side ranges
    assert set(on_gpu["name"].astype(str)) <= {"my-range"} and len(on_gpu) <= 3
    assert (iv["kind"] == "kernel").sum() == 6


def test_cuda_graph_replays(timing: str) -> None:
    """Events timing: one ``cuda_graph_replay`` interval per replay; CUPTI: the replayed kernels themselves."""
    import torch

    x = torch.randn(1 << 20, device="cuda")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            x.mul_(1.0)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()

    def work(rec):
        with torch.cuda.graph(graph):
            for _ in range(5):
                x.mul_(1.0)
        graph.replay()
        graph.replay()

    iv = _record(work).intervals
    gpu = iv[iv["lane_kind"] != "cpu_thread"]
    if timing == "events":
        assert list(gpu["name"].astype(str)) == ["cuda_graph_replay", "cuda_graph_replay"]
    else:
        kernels = gpu[gpu["kind"] == "kernel"]
        assert len(kernels) >= 10  # 2 replays x 5 kernels (CUPTI may add the graph's own upload work)
        assert kernels["dur_ns"].max() < 1_000_000


def test_gpu_durations_match_matmul_time() -> None:
    import torch

    a = torch.randn(4096, 4096, device="cuda")
    for _ in range(3):
        a @ a
    torch.cuda.synchronize()

    def work(rec):
        for _ in range(10):
            a @ a

    iv = _record(work).intervals
    mm = iv[(iv["kind"] == "kernel") & (iv["name"].astype(str) == "aten::mm")]
    assert len(mm) == 10
    assert mm["dur_ns"].min() > 50_000


SCRIPT = textwrap.dedent(
    """
    import sys
    import torch
    print("argv", sys.argv[1:], __name__)
    x = torch.randn(1024, 1024, device="cuda")
    opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1, device="cuda"))], lr=0.1)
    for _ in range(3):
        y = x @ x
        opt.step()
    if "--fail" in sys.argv:
        raise RuntimeError("boom")
    sys.exit(int(sys.argv[-1]) if sys.argv[-1].isdigit() else 0)
    """
)


def _kernels(trace, name: str) -> int:
    iv = trace.intervals
    return int(((iv["kind"] == "kernel") & (iv["name"].astype(str) == name)).sum())


def _run_cli(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "collector", "record", *args],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_script_runs_as_with_python(tmp_path: Path) -> None:
    from collector.traceformat.read import read_trace

    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    done = _run_cli(tmp_path, "--no-probe", "train.py", "--lr", "3e-4", "--out", "run.json.gz")
    assert done.returncode == 0, done.stderr
    assert "argv ['--lr', '3e-4'] __main__" in done.stdout
    trace = read_trace(str(tmp_path / "run.json.gz"))
    assert trace.meta.error == ""
    assert len(trace.steps()) == 3
    assert _kernels(trace, "aten::mm") == 3

    done = _run_cli(tmp_path, "--out", "x.json.gz", "train.py", "--out", "7")
    assert done.returncode == 7
    assert "argv ['--out', '7'] __main__" in done.stdout

    done = _run_cli(tmp_path, "--no-probe", "train.py", "--fail", "--out", "fail.json.gz")
    assert done.returncode == 1
    assert "RuntimeError: boom" in done.stderr
    assert "train.py" in done.stderr
    trace = read_trace(str(tmp_path / "fail.json.gz"))
    assert trace.meta.error == "RuntimeError: boom"
    assert _kernels(trace, "aten::mm") == 3


def test_cupti_readers_and_the_fallback_when_cupti_is_taken(timing: str) -> None:
    """CUPTI read by our client (the default) or through Kineto gives the same GPU work; with torch.profiler
    already running, the recorder falls back to events and says why."""
    if timing != "cupti":
        pytest.skip("about the CUPTI readers")
    import torch

    from collector.recording.api import record

    x = torch.ones(1 << 16, device="cuda")

    def work(rec):
        for _ in range(3):
            x.mul_(1.0001).add_(0.5)
            rec.step()
        torch.cuda.synchronize()

    counts = {}
    for reader in ("client", "kineto"):
        rec = record("readers", None, probe=False, timing="cupti")
        rec.READERS = (reader,)
        rec.start()
        work(rec)
        trace = rec.stop()
        assert trace.meta.notes["timing"] == "cupti" and trace.meta.notes["cupti_reader"] == reader
        kernels = trace.intervals[trace.intervals["kind"] == "kernel"]
        counts[reader] = kernels.groupby("step").size().to_dict()
        assert set(kernels["name"].astype(str)) == {"aten::mul_", "aten::add_"}
    assert counts["client"] == counts["kineto"] == {0: 2, 1: 2, 2: 2}

    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]):
        rec = record("taken", None, probe=False, timing="cupti")
        rec.start()
        work(rec)
        trace = rec.stop()
    assert trace.meta.notes["timing"] == "events"
    assert "CUPTI unavailable" in trace.meta.notes["timing_note"]
    assert (trace.intervals["kind"] == "kernel").sum() == 6


def test_a_stopped_capture_detaches_cupti_and_the_next_one_attaches_it_again(timing: str) -> None:
    """Attached, CUPTI slows every later launch of the process (a launch-bound loop 1.3x), so our
    reader detaches it when a recording stops; the process's next recording attaches it again, times the tiny
    op anew and records all its kernels (the speed itself: benchmarks/after_stop.py)."""
    if timing != "cupti":
        pytest.skip("about CUPTI's attachment")
    import torch

    from collector.recording import cupti_recorder

    x = torch.ones(64, device="cuda")

    def steps(rec) -> None:
        for _ in range(3):
            x.mul_(1.0001).add_(0.5)
            rec.step()

    for _ in range(2):
        trace = _record(steps)
        assert trace.meta.notes["cupti_reader"] == "client" and trace.meta.notes["cupti_detached"] is True
        assert (trace.intervals["kind"] == "kernel").sum() == 6
        assert not cupti_recorder._CAPTURED and not cupti_recorder._PLAIN_OP_NS  # detached: timed anew next time


def test_the_stop_leaves_no_rows_of_its_own_to_drop(timing: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The recorder's own calls while it stops (its synchronize) are not recorded at all, so stopping does not
    copy the whole frame to drop them."""
    if timing != "cupti":
        pytest.skip("the events timing records its intervals itself")
    import torch

    from collector.recording import enrich

    dropped: list[int] = []
    real = enrich.without_windows

    def counted(iv: pd.DataFrame, windows, host_lane) -> pd.DataFrame:
        out = real(iv, windows, host_lane)
        dropped.append(len(iv) - len(out))
        return out

    monkeypatch.setattr(enrich, "without_windows", counted)
    x = torch.ones(1 << 16, device="cuda")

    def steps(rec) -> None:
        for _ in range(3):
            x.mul_(1.0001)
            rec.step()

    trace = _record(steps, calibrate=False)  # calibration's rows are dropped by design: not the stop's
    assert dropped == [0]
    names = trace.intervals["name"].astype(str)
    assert not names.str.contains("Synchronize").any(), sorted(set(names))
    assert (trace.intervals["kind"] == "kernel").sum() >= 3
