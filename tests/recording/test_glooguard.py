"""Op naming ends once a gloo process group takes CUDA tensors (its worker threads fail under a captured dispatch
mode), at once or when the group is made; other groups keep naming. torch.distributed is a stand-in module here:
the real failure needs a GPU (tests/gpu/test_ranks_gpu.py records DDP through gloo on one)."""

from __future__ import annotations

import sys
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from torch.utils._python_dispatch import _get_current_dispatch_mode  # noqa: E402

from collector.errors import StreamscopeError  # noqa: E402
from collector.recording import glooguard  # noqa: E402
from collector.recording.opnames import OpNamer, naming_note, naming_sentence  # noqa: E402


def _fake_dist(backends: dict[Any, str] | None) -> ModuleType:
    """A torch.distributed with process groups ``backends`` (group -> backend string; None: not initialized);
    ``init_process_group(backend)`` makes the default group."""
    dist = ModuleType("torch.distributed")
    state: dict[Any, str] = dict(backends or {})
    made = [backends is not None]
    dist.is_available = lambda: True  # type: ignore[attr-defined]
    dist.is_initialized = lambda: made[0]  # type: ignore[attr-defined]
    dist.get_backend = lambda group=None: state["default" if group is None else group]  # type: ignore[attr-defined]
    dist.distributed_c10d = SimpleNamespace(  # type: ignore[attr-defined]
        _world=SimpleNamespace(pg_map=state), _get_default_group=lambda: "default"
    )

    def init_process_group(backend: str) -> None:
        state["default"] = backend
        made[0] = True

    dist.init_process_group = init_process_group  # type: ignore[attr-defined]
    return dist


@pytest.fixture
def cuda(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)


@pytest.mark.parametrize(
    ("backend", "expected"),
    [("gloo", True), ("cuda:gloo,cpu:gloo", True), ("nccl", False), ("cuda:nccl,cpu:gloo", False)],
)
def test_only_gloo_for_cuda_tensors_counts(cuda: None, backend: str, expected: bool) -> None:
    assert glooguard.gloo_on_cuda(_fake_dist({"default": backend})) is expected


def test_a_gloo_side_group_beside_an_nccl_default_carries_cpu_tensors(cuda: None) -> None:
    assert not glooguard.gloo_on_cuda(_fake_dist({"default": "nccl", "side": "gloo"}))
    assert glooguard.gloo_on_cuda(_fake_dist({"default": "nccl", "side": "cuda:gloo"}))


def test_without_cuda_or_before_any_group_gloo_is_safe(monkeypatch: pytest.MonkeyPatch) -> None:
    assert not glooguard.gloo_on_cuda(_fake_dist(None))
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert not glooguard.gloo_on_cuda(_fake_dist({"default": "gloo"}))


def test_naming_ends_when_the_job_makes_a_gloo_group_and_the_watch_undoes(
    cuda: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    dist = _fake_dist(None)
    make = dist.init_process_group
    monkeypatch.setitem(sys.modules, "torch.distributed", dist)
    x = torch.ones(4)
    namer = OpNamer()
    namer.start()
    undo = glooguard.watch_gloo_on_cuda(lambda: namer.stop("gloo"))
    try:
        x.add_(1)
        assert namer.on and len(namer.rows) == 1
        dist.init_process_group("gloo")
        assert not namer.on and namer.stopped_by == "gloo"
        assert _get_current_dispatch_mode() is None  # left at once: the group's worker never sees it
        x.add_(1)
        assert len(namer.rows) == 1
    finally:
        undo()
        namer.stop("stop")
    assert dist.init_process_group is make
    assert "gloo process group" in naming_sentence(naming_note("gloo", 1, 1000))


def test_a_gloo_group_made_before_recording_stops_naming_at_once(cuda: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "torch.distributed", _fake_dist({"default": "gloo"}))
    namer = OpNamer()
    namer.start()
    undo = glooguard.watch_gloo_on_cuda(lambda: namer.stop("gloo"))
    undo()
    assert namer.stopped_by == "gloo" and _get_current_dispatch_mode() is None


def test_an_nccl_group_keeps_naming(cuda: None, monkeypatch: pytest.MonkeyPatch) -> None:
    dist = _fake_dist(None)
    monkeypatch.setitem(sys.modules, "torch.distributed", dist)
    namer = OpNamer()
    namer.start()
    undo = glooguard.watch_gloo_on_cuda(lambda: namer.stop("gloo"))
    try:
        dist.init_process_group("nccl")
        assert namer.on
    finally:
        undo()
        namer.stop("stop")


def test_events_timing_refuses_gloo_for_cuda_tensors_in_words() -> None:
    from collector.recording.events_recorder import _refuse_gloo_on_cuda

    with pytest.raises(StreamscopeError, match="--timing cupti"):
        _refuse_gloo_on_cuda()
