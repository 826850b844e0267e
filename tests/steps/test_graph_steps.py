"""CUDA graph replays: each replay's kernels under a labelled span, and in a loop of replays with nothing
else marking steps, each replay (or each repeat of the replay pattern) is a step."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import pandas as pd
import pytest

from collector.importers.graphs import mark_graph_replays
from collector.importers.kineto import trace_from_kineto
from collector.model import RunMeta, Trace
from collector.recording.enrich import HostFacts, enrich
from collector.steps import find_steps
from collector.synthetic.graphs import EAGER_KERNEL, replay_loop


def _trace(**kw: object) -> Trace:
    return mark_graph_replays(trace_from_kineto(replay_loop(**kw)))  # type: ignore[arg-type]


def _graph_kernels(iv: pd.DataFrame) -> pd.DataFrame:
    names = iv.set_index("id")["name"].astype(str)
    launched_by = names.reindex(iv["launch_id"]).to_numpy()
    return iv[(iv["kind"] == "kernel").to_numpy() & (launched_by == "cudaGraphLaunch")]


def _marked(raw: Trace, spans: Iterable[tuple[int, int]], name: str = "step {}") -> Trace:
    """``raw`` with a step marker over each (start_ns, end_ns) of ``spans``, numbered from 0, and each
    interval's step set from them."""
    from dataclasses import replace

    from collector.model import conform_markers, step_at

    marks = pd.DataFrame(
        [
            {"rank": 0, "kind": "step", "name": name.format(i), "start_ns": int(a), "end_ns": int(b), "step": i}
            for i, (a, b) in enumerate(spans)
        ]
    )
    markers = conform_markers(marks)
    iv = raw.intervals
    return replace(raw, markers=markers, intervals=iv.assign(step=step_at(markers, iv["start_ns"].to_numpy())))


def test_each_replay_is_drawn_under_a_labelled_span_holding_its_kernels() -> None:
    iv = _trace(replays=40, kernels=3).intervals
    spans = iv[iv["kind"] == "annotation"]
    assert spans["name"].astype(str).unique().tolist() == ["CUDA graph 0 replay"]
    assert len(spans) == 40 and set(spans["lane_kind"].astype(str)) == {"compute_stream"}
    kernels = _graph_kernels(iv)
    assert len(kernels) == 120
    s, e = spans["start_ns"].to_numpy(), spans["end_ns"].to_numpy()
    for start, end in zip(kernels["start_ns"], kernels["end_ns"], strict=True):
        assert ((s <= start) & (e >= end)).sum() == 1  # inside exactly one replay span
    eager = iv[(iv["kind"] == "kernel") & ~iv["id"].isin(kernels["id"])]
    assert len(eager) == 9 and not any(((s <= a) & (e >= a)).any() for a in eager["start_ns"])  # warm-up


def test_without_replays_the_trace_is_unchanged() -> None:
    raw = trace_from_kineto(replay_loop(replays=0))
    assert mark_graph_replays(raw) is raw


@pytest.mark.parametrize("sync", [True, False])
def test_in_a_loop_of_replays_each_replay_is_a_step(sync: bool) -> None:
    trace = find_steps(_trace(replays=40, kernels=3, sync=sync))
    assert trace.meta.step_method == "repeat:graph"
    assert len(trace.steps()) == 40
    kernels = _graph_kernels(trace.intervals)
    assert (kernels.groupby("step").size() == 3).all() and sorted(kernels["step"].unique()) == list(range(40))
    warmup = trace.intervals[(trace.intervals["kind"] == "kernel") & ~trace.intervals["id"].isin(kernels["id"])]
    assert (warmup["step"] == -1).all()  # the eager warm-up before the capture is set-up


def test_a_slow_first_launch_stays_in_the_first_replay_s_step() -> None:
    """The first cudaGraphLaunch uploads the graph (here 10x the others): that replay's step is longer, and
    still holds its launch and its span (the warm-up and the capture before it are the set-up)."""
    trace = find_steps(_trace(replays=40, kernels=3, sync=False, first_launch_ns=80_000))
    assert trace.meta.step_method == "repeat:graph" and len(trace.steps()) == 40
    iv = trace.intervals
    spans = iv[iv["name"].astype(str) == "CUDA graph 0 replay"]
    assert sorted(spans["step"]) == list(range(40))
    first_launch = iv[iv["name"].astype(str) == "cudaGraphLaunch"].iloc[0]
    assert first_launch["step"] == 0 and trace.steps()["start_ns"].iloc[0] <= first_launch["start_ns"]


def test_each_repeat_of_a_replay_and_eager_work_is_a_step() -> None:
    trace = find_steps(_trace(replays=30, kernels=4, eager=2))
    assert trace.meta.step_method == "repeat:graph" and len(trace.steps()) == 30
    iv = trace.intervals
    per_step = iv[(iv["kind"] == "kernel") & (iv["step"] >= 0)].groupby("step")["name"].agg(list)
    assert all(names.count(EAGER_KERNEL) == 2 and len(names) == 6 for names in per_step)


def test_replays_keep_their_spans_and_steps_through_the_recorders_join() -> None:
    raw = _trace(replays=25, kernels=3)
    trace = find_steps(enrich(raw, HostFacts(), RunMeta.new(workload="graphs", clock="unix_ns")))
    iv = trace.intervals
    spans = iv[iv["name"].astype(str) == "CUDA graph 0 replay"]
    assert len(spans) == 25 and trace.meta.step_method == "repeat:graph" and len(trace.steps()) == 25
    assert np.array_equal(np.sort(spans["step"].to_numpy()), np.arange(25))  # each span in its replay's step
    assert list(iv["id"]) == list(range(len(iv))) and iv["start_ns"].is_monotonic_increasing


def test_two_graphs_are_numbered_in_the_order_they_first_ran() -> None:
    from collector.importers.graphs import graph_numbers, graph_work

    iv = _trace(replays=6, kernels=3).intervals
    rows, replay = graph_work(iv)
    other = iv.copy()
    names = other["name"].astype(str).to_numpy().copy()
    late = rows[replay >= np.sort(np.unique(replay))[3]]  # the last 3 replays run another graph
    names[late] = "other_kernel"
    other["name"] = pd.Categorical(names)
    _, numbers = graph_numbers(other, rows, replay)
    assert numbers.tolist() == [0, 0, 0, 1, 1, 1]


def test_steps_marked_in_the_warm_up_give_way_to_the_replays_after_them() -> None:
    """An optimizer step in each eager warm-up iteration (and one in the capture) marked steps; the loop of
    replays after them marks none: the replays are the steps, the marked warm-up is set-up."""

    raw = _trace(replays=30, kernels=3)
    iv = raw.intervals
    warm = iv[(iv["kind"] == "kernel") & ~iv["id"].isin(_graph_kernels(iv)["id"])].sort_values("start_ns")
    bounds = warm["start_ns"].to_numpy()[::3].tolist() + [int(warm["end_ns"].max())]
    trace = find_steps(_marked(raw, zip(bounds, bounds[1:], strict=False)))
    assert trace.meta.step_method == "repeat:graph" and len(trace.steps()) == 30
    # the recorder closes a last step when it stops: there it holds every replay
    closed = _marked(raw, [*zip(bounds, bounds[1:], strict=False), (bounds[-1], int(iv["end_ns"].max()) + 1)])
    assert find_steps(closed).meta.step_method == "repeat:graph"
    # an optimizer step after each replay: the marks are the loop's
    launches = iv[iv["name"].astype(str) == "cudaGraphLaunch"]["start_ns"]
    stepped = _marked(raw, [(a, a + 100_000) for a in launches])
    assert find_steps(stepped).meta.step_method == "markers"


def test_a_long_eager_warm_up_before_the_capture_is_set_up_not_the_loop() -> None:
    """Three warm-up iterations of 40 eager kernels each (120 tokens) before 20 replays: the replays are the loop."""
    trace = find_steps(_trace(replays=20, kernels=40, warmup=3))
    assert trace.meta.step_method == "repeat:graph" and len(trace.steps()) == 20


def test_a_batch_copied_in_before_each_replay_makes_each_step_a_copy_and_a_replay() -> None:
    trace = find_steps(_trace(replays=30, kernels=3, copy_in=True))
    assert trace.meta.step_method == "repeat:graph" and len(trace.steps()) == 30
    iv = trace.intervals
    spans = iv[iv["name"].astype(str) == "CUDA graph 0 replay"]
    copies = iv[iv["kind"] == "memcpy_d2d"]
    assert sorted(spans["step"]) == list(range(30)) and sorted(copies["step"]) == list(range(30))


def test_steps_that_each_hold_several_replays_keep_their_marks() -> None:
    """torch.profiler's ProfilerStep around ten replays each, five steps: 10 replays in the last step (as in
    every step) are not a loop past the marks."""
    raw = _trace(replays=50, kernels=3)
    iv = raw.intervals
    launch = np.sort(iv[iv["name"].astype(str) == "cudaGraphLaunch"]["start_ns"].to_numpy())
    bounds = [*launch[::10].tolist(), int(iv["end_ns"].max()) + 1]
    marked = _marked(raw, zip(bounds, bounds[1:], strict=False), "ProfilerStep#{}")
    trace = find_steps(marked)
    assert trace.meta.step_method == "markers" and len(trace.steps()) == 5
