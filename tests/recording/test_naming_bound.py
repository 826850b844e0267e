"""Op naming ends by itself when no step boundary comes: after a time, after a number of ops, or once the
loop repeats (a run of ops that named no new op); the mode then leaves the thread's mode stack."""

from __future__ import annotations

import itertools
import sys
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from torch.utils._python_dispatch import _get_current_dispatch_mode  # noqa: E402

from collector.recording.opnames import NamingBound, OpNamer, naming_note, naming_sentence  # noqa: E402

NEVER = 10**18


def _names(namer: OpNamer) -> list[str]:
    return [name for _, name, _, _ in namer.rows]


def test_naming_stops_at_the_op_bound_and_the_mode_leaves_at_the_next_call() -> None:
    x = torch.ones(4)
    namer = OpNamer(NamingBound(ns=NEVER, ops=30, stale_ops=NEVER))
    namer.start()
    for _ in range(100):
        x.add_(1)
    assert len(namer.rows) == 30 and namer.stopped_by == "ops" and not namer.on
    assert _get_current_dispatch_mode() is None  # left at the first call after the bound
    assert sys.getprofile() is None
    assert float(x[0]) == 101.0


def test_naming_stops_at_the_time_bound_on_an_injected_clock() -> None:
    clock = itertools.count(0, 1_000_000).__next__  # each reading 1 ms later
    x = torch.ones(4)
    namer = OpNamer(NamingBound(ns=10_000_000, ops=NEVER, stale_ops=NEVER), clock=clock)
    namer.start()
    for _ in range(50):
        x.mul_(1)
    assert namer.stopped_by == "time" and len(namer.rows) == 6  # 2 readings per op, from the first op's start
    assert namer.stopped_ns - namer.started_ns >= 10_000_000
    assert _get_current_dispatch_mode() is None


def test_naming_stops_once_the_loop_repeats_ops_it_has_named() -> None:
    x = torch.ones(4)
    namer = OpNamer(NamingBound(ns=NEVER, ops=NEVER, stale_ops=20))
    namer.start()
    for _ in range(100):
        x.add_(1)
        x.mul_(1)
    assert namer.stopped_by == "repeat" and len(namer.rows) == 22  # the last new op was the 2nd
    assert set(_names(namer)) == {"aten::add_", "aten::mul_"}


def test_ops_never_seen_before_keep_the_naming_on() -> None:
    x = torch.ones(4)
    ops: list[Any] = [x.add_, x.mul_, x.sub_, x.div_, x.clamp_min_, x.clamp_max_, x.pow_, x.fmod_]
    namer = OpNamer(NamingBound(ns=NEVER, ops=NEVER, stale_ops=6))
    namer.start()
    for op in ops:
        op(1)  # each a new op: 8 named, never 6 in a row without a new one
    assert namer.on and len(namer.rows) == 8
    namer.stop()
    assert namer.stopped_by == "step" and _get_current_dispatch_mode() is None


def test_a_thread_with_its_own_profiler_keeps_it_and_the_mode_passes_ops_through_until_stop() -> None:
    seen: list[str] = []

    def profiler(frame: Any, event: str, arg: Any) -> None:
        seen.append(event)

    x = torch.ones(4)
    namer = OpNamer(NamingBound(ns=NEVER, ops=3, stale_ops=NEVER))
    sys.setprofile(profiler)
    try:
        namer.start()
        for _ in range(10):
            x.add_(1)
        assert sys.getprofile() is profiler and len(namer.rows) == 3
        assert _get_current_dispatch_mode() is not None  # still there, passing ops through
        namer.stop()
        assert namer.stopped_by == "ops"  # the first reason stays
        assert _get_current_dispatch_mode() is None
    finally:
        sys.setprofile(None)
    assert seen and float(x[0]) == 11.0


def test_the_note_says_what_ended_the_naming() -> None:
    note = naming_note("repeat", 1412, 9_812_345)
    assert note == {"stopped_by": "repeat", "ops": 1412, "ms": 9.812}
    assert naming_sentence(note) == "ops named until the loop's repeat (1,412 ops, 9.8 ms)"
    assert naming_sentence(naming_note("", 10, 0)).startswith("ops named until the end of the recording")


def test_the_trace_says_how_ops_were_named_and_what_ended_the_naming() -> None:
    from collector.recording.cupti_recorder import _with_naming_sentence
    from collector.synthetic import synthetic_trace

    notes = {
        "op_names": "aten ops: 800 exact (recorded), 11200 by their kernel",
        "op_naming": naming_note("repeat", 800, 6_000_000),
    }
    trace = _with_naming_sentence(synthetic_trace(50).with_meta(notes=notes))
    assert trace.meta.notes["op_names"] == (
        "aten ops: 800 exact (recorded), 11200 by their kernel; ops named until the loop's repeat (800 ops, 6.0 ms)"
    )


def test_a_pause_leaves_the_mode_and_resume_names_ops_again() -> None:
    x = torch.ones(4)
    namer = OpNamer(NamingBound(ns=NEVER, ops=NEVER, stale_ops=NEVER))
    namer.start()
    x.add_(1)
    namer.pause()
    assert _get_current_dispatch_mode() is None
    x.mul_(2)  # the recorder's own calibration: not named
    namer.resume()
    x.sub_(1)
    namer.stop()
    assert _names(namer) == ["aten::add_", "aten::sub_"] and namer.stopped_by == "step"
    namer.resume()  # after a stop: nothing
    assert not namer.on and _get_current_dispatch_mode() is None


def test_the_time_bound_counts_from_the_first_op_not_the_set_up_before_it() -> None:
    now = [0]
    x = torch.ones(4)
    namer = OpNamer(NamingBound(ns=10_000_000, ops=NEVER, stale_ops=NEVER), clock=lambda: now[0])
    namer.start()
    now[0] = 30_000_000_000  # 30 s of data loading before the first op
    for _ in range(5):
        x.add_(1)
        now[0] += 1_000_000
    assert namer.on and len(namer.rows) == 5
    namer.stop()


def test_the_end_of_naming_is_told_once_by_a_bound_or_a_stop_not_by_a_pause() -> None:
    x = torch.ones(4)
    ended: list[str] = []
    namer = OpNamer(NamingBound(ns=NEVER, ops=10, stale_ops=NEVER))
    namer.on_end.add(lambda: ended.append(namer.stopped_by), ended=False)
    namer.start()
    namer.pause()
    namer.resume()
    assert ended == []
    for _ in range(20):
        x.add_(1)
    namer.stop("step")
    assert ended == ["ops"]


def test_mask_indexing_is_wrapped_until_its_undo() -> None:
    from collector.recording import hostspans

    plain = torch.Tensor.__getitem__
    spans: list[str] = []
    undo = hostspans.install_masked(lambda cause, *rest: spans.append(cause))
    assert torch.Tensor.__getitem__ is not plain
    assert float(torch.arange(4.0)[2]) == 2.0  # a CPU tensor: no span
    undo()
    undo()  # a second undo (the recorder's at stop) changes nothing
    assert torch.Tensor.__getitem__ is plain and spans == []


def test_both_capture_readers_tell_the_end_of_naming_once_and_not_at_a_pause() -> None:
    from collector.recording.client_capture import ClientCapture
    from collector.recording.kineto_capture import KinetoCapture

    class Prof:
        def toggle_collection_dynamic(self, on: bool, activities: Any) -> None:
            pass

    ends: list[str] = []
    client = ClientCapture()
    client.when_naming_ends(lambda: ends.append("client, not naming"))  # told at once
    client._namer.start()  # as ClientCapture.start(naming=True) does, after CUPTI's start
    client.when_naming_ends(lambda: ends.append("client"))
    client._namer.pause()
    client._namer.resume()
    client.set_naming(False, "step")
    client.set_naming(False, "step")
    kineto = KinetoCapture()
    kineto._prof, kineto.naming = Prof(), True
    kineto.when_naming_ends(lambda: ends.append("kineto"))
    kineto.set_naming(False, "pause")
    kineto.set_naming(True)
    kineto.set_naming(False, "ops")
    kineto.set_naming(True)
    kineto.set_naming(False, "step")
    assert ends == ["client, not naming", "client", "kineto"]
    assert _get_current_dispatch_mode() is None
