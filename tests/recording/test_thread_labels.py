"""CPU-thread lanes are labelled by what the thread is: one pure rule, fed by /proc, threading and Kineto."""

from __future__ import annotations

import threading
from pathlib import Path
from types import SimpleNamespace

import pytest

from collector.importers.threads import kineto_thread_name, thread_label
from collector.load import load_trace
from collector.model import Lane, LaneKind
from collector.recording.enrich import _labels
from collector.recording.threadnames import live_thread_labels, relabel_threads

SAMPLES = Path(__file__).resolve().parents[2] / "sample_traces"


@pytest.mark.parametrize(
    "main,names,label",
    [
        (True, ["python3"], "main thread"),
        (False, ["pt_autograd_0"], "autograd thread 7"),
        (False, ["python3", "pt_autograd_1"], "autograd thread 7"),  # Kineto names a thread twice
        (False, ["pt_data_pin"], "DataLoader pin-memory thread 7"),
        (False, ["python3", "Thread-2 (_pin_memory_loop)"], "DataLoader pin-memory thread 7"),
        (False, ["pt_data_worker"], "DataLoader worker thread 7"),
        (False, ["pt_gloo_runloop"], "gloo comm (thread 7)"),
        (False, ["gloo_tcp_loop"], "gloo comm (thread 7)"),
        (False, ["pt_nccl_watchdg"], "NCCL thread 7"),
        (False, ["QueueFeederThread"], "thread 7 (QueueFeederThread)"),
        (False, ["python3", "Thread-4"], "thread 7"),
        (False, [], "thread 7"),
        (False, ["", "  "], "thread 7"),
    ],
)
def test_thread_label(main: bool, names: list[str], label: str) -> None:
    assert thread_label(7, main=main, names=names) == label


def test_kineto_thread_names_are_read_from_their_metadata_text() -> None:
    assert kineto_thread_name("thread 587 (pt_autograd_0)") == "pt_autograd_0"
    assert kineto_thread_name("loader") == "loader"


def test_a_torch_profiler_trace_names_its_main_and_autograd_threads() -> None:
    trace = load_trace(str(SAMPLES / "torch-profiler-overlap.pt.trace.json.gz"))
    cpu = [(ln.ident, ln.label) for ln in trace.lanes if ln.kind is LaneKind.CPU_THREAD]
    (main, _), (autograd, _), _ = cpu
    assert cpu == [
        (main, "main thread"),
        (autograd, f"autograd thread {autograd}"),
        (-main, "main thread: Python stack (torch.profiler)"),
    ]


@pytest.mark.parametrize("name", ["naive", "pinned", "overlap", "sync-trap", "d2h"])
def test_the_samples_have_one_main_thread_and_one_autograd_thread(name: str) -> None:
    trace = load_trace(str(SAMPLES / f"{name}.json.gz"))
    cpu = [(ln.ident, ln.label) for ln in trace.lanes if ln.kind is LaneKind.CPU_THREAD]
    (_, main), (autograd, _), _ = cpu
    autograd_label = f"autograd thread {autograd}"
    assert [label for _, label in cpu] == [main, autograd_label, "main thread: Python stack (sampled)"]
    assert main == "main thread"
    iv = trace.intervals
    backward = iv["name"].astype(str).str.contains("backward")
    on = set(iv.loc[backward & (iv["lane_kind"] == "cpu_thread"), "lane_label"].astype(str))
    assert autograd_label in on and main not in on  # the main thread's sampled stacks show its wait for it


def test_the_issuing_thread_is_main_only_when_no_thread_id_matched() -> None:
    lanes = [Lane(0, LaneKind.CPU_THREAD, 10, "thread 10"), Lane(0, LaneKind.CPU_THREAD, 11, "thread 11")]
    # ids match: each lane gets its own thread's label, the busiest one is not called "main" as well
    got = _labels(lanes, {}, 1, {10: "main thread", 11: "autograd thread 11"})
    assert [ln.label for ln in got] == ["main thread", "autograd thread 11"]
    got = _labels(lanes, {}, 1, {10: "main thread"})
    assert [ln.label for ln in got] == ["main thread", "thread 11"]
    # ids do not match (Kineto numbered the threads): the busiest lane is the issuing, main thread
    got = _labels(lanes, {}, 1, {99: "main thread"})
    assert [ln.label for ln in got] == ["thread 10", "main thread"]


def test_live_threads_are_labelled_by_their_names() -> None:
    stop = threading.Event()
    worker = threading.Thread(target=stop.wait, name="Thread-9 (_pin_memory_loop)", daemon=True)
    worker.start()
    try:
        labels = live_thread_labels()
    finally:
        stop.set()
        worker.join()
    main, tid = threading.main_thread().native_id, worker.native_id
    assert main is not None and tid is not None
    assert labels[main] == "main thread"
    assert labels[tid] == f"DataLoader pin-memory thread {tid}"
    lanes = [Lane(0, LaneKind.CPU_THREAD, tid, "x"), Lane(0, LaneKind.COMPUTE_STREAM, 3, "s")]
    assert [ln.label for ln in relabel_threads(lanes, labels)] == [labels[tid], "s"]


def test_the_thread_that_runs_a_backward_is_found_by_a_hook() -> None:
    """On the CPU the backward runs on the calling thread; on a CUDA device, on its autograd worker (GPU test of
    the 2-rank gloo job). The probe never raises, with CUDA or not."""
    import torch

    from collector.recording.autogradprobe import autograd_threads, backward_thread

    with torch.inference_mode():  # a recording may stop inside inference mode
        found = backward_thread(torch, torch.device("cpu"))
    assert found == {threading.get_ident() & 0xFFFFFFFF: threading.get_native_id()}
    broken = SimpleNamespace(cuda=SimpleNamespace(is_initialized=lambda: True, current_device=lambda: 0))
    assert autograd_threads(broken, [0]) == {}  # no torch.device, no backward: no name, no error
