"""Steps found in traces without step markers, set-up and tail kept apart, findings ranked by cost."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from loop_traces import CPU_LINE, INPUT_LINE, MS, SETUP_LINE, inference_trace, kineto_loop

from collector.load import load_trace
from collector.model import Marker, MarkerKind, Trace
from collector.steps import find_steps, iterations
from collector.traceformat.write import write_trace
from webapp.analysis import analyze
from webapp.analysis.report import analysis_text
from webapp.cli import main

KINETO = Path(__file__).resolve().parents[1] / "kineto" / "data"


def test_iterations_skip_setup_and_tail() -> None:
    setup, body, tail = [9, 8, 9, 7], [1, 2, 3, 2, 4], [5, 6]
    tokens = np.array(setup + body * 5 + tail)
    found = iterations(tokens)
    assert found is not None
    starts, last = found
    assert starts.tolist() == [4 + 5 * k for k in range(5)]
    assert last == 4 + 5 * 5 - 1


def test_iterations_prefer_the_outer_loop() -> None:
    inner = [1, 2, 3]
    outer = [7, *inner, *inner, 8]  # two inner iterations per outer one
    found = iterations(np.array([0, 0, 5] + outer * 4))
    assert found is not None and len(found[0]) == 4


def test_iterations_without_a_loop() -> None:
    assert iterations(np.arange(50)) is None
    assert iterations(np.array([1, 1, 1])) is None


def test_inference_loop_steps_start_after_setup() -> None:
    trace = find_steps(inference_trace(iterations=20))
    assert trace.meta.step_method == "repeat:cpu_op"
    steps = trace.steps()
    assert len(steps) == 20
    df = trace.intervals
    setup_end = int(df.loc[df["source"] == SETUP_LINE, "end_ns"].max())
    first_input = int(df.loc[df["source"] == INPUT_LINE, "start_ns"].min())
    assert setup_end <= steps["start_ns"].iloc[0] <= first_input
    assert (df.loc[df["source"] == SETUP_LINE, "step"] == -1).all()
    assert (df.loc[df["source"] == CPU_LINE, "step"].to_numpy() == np.arange(20).repeat(2)).all()


def test_inference_top_finding_is_the_per_iteration_line() -> None:
    result = analyze(find_steps(inference_trace(iterations=20)))
    top = result.findings[0]
    assert top.rule == "sync-in-loop" and top.sources[0] == CPU_LINE
    assert all(SETUP_LINE not in f.sources for f in (*result.findings, *result.minor_findings))
    assert result.metrics["setup_ns"] > 50 * MS and result.metrics["tail_ns"] > 0
    setup = result.phases[result.phases["phase"] == "setup"].iloc[0]
    assert setup["copy_count"] == 12 and setup["top_source"] == SETUP_LINE
    assert any("Set-up before the first step" in n and SETUP_LINE in n for n in result.notes)
    # the what-if only names listed findings, and no per-step cost comes from the set-up
    shown = {f.rule for f in result.findings}
    savings = {k[len("saving_") : -3].replace("_", "-") for k in result.what_if if k.startswith("saving_")}
    assert savings - {"applied"} <= shown
    assert result.what_if["step_time_now_ns"] < 6 * MS


def test_findings_are_ranked_by_cost_and_minor_ones_kept_apart() -> None:
    result = analyze(find_steps(inference_trace()))
    costs = [f.cost_per_step_ns for f in result.findings]
    assert costs == sorted(costs, reverse=True)
    step = result.metrics["step_time_median_ns"]
    assert all(f.cost_per_step_ns >= 0.005 * step for f in result.findings)
    assert all(f.cost_per_step_ns < 0.005 * step or f.cost_per_step_ns < 1000 for f in result.minor_findings)
    text = analysis_text(result)
    assert "0.000 ms per step" not in text and " 0 launches per step" not in text


def test_without_steps_the_setup_copy_would_dominate() -> None:
    """The same trace taken as one step (the old behaviour) makes the set-up copy the top problem."""
    result = analyze(inference_trace().with_meta(step_method="none"))
    assert result.findings[0].rule in ("pageable-copy", "blocking-copy")


def test_step_at_source_line_and_annotation(tmp_path: Path) -> None:
    trace = find_steps(inference_trace(iterations=8), step_at=INPUT_LINE)
    assert trace.meta.step_method == f"step_at:{INPUT_LINE}" and len(trace.steps()) == 8
    loop = load_trace(
        kineto_loop(KINETO / "gpu_step.pt.trace.json.gz", tmp_path / "loop.json", 4), step_at="train_step"
    )
    assert loop.meta.step_method == "step_at:train_step" and len(loop.steps()) == 4
    with pytest.raises(ValueError, match="no interval has this source line or annotation name"):
        find_steps(inference_trace(), step_at="nowhere.py:1")


def test_step_at_on_the_command_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "infer.json.gz"
    write_trace(inference_trace(iterations=6), str(path))
    assert main(["analyze", str(path), "--step-at", INPUT_LINE]) == 0
    assert "6 step(s)" in capsys.readouterr().out
    assert main(["analyze", str(path), "--step-at", "nowhere.py:3"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--step-at 'nowhere.py:3'" in err
    out = tmp_path / "out.json"
    assert main(["convert", str(path), str(out), "--step-at", INPUT_LINE]) == 0
    assert load_trace(out).meta.step_method == f"step_at:{INPUT_LINE}"


@pytest.mark.parametrize("name", ["gpu_step", "gpu_train"])
def test_imported_loops_without_markers(tmp_path: Path, name: str) -> None:
    path = kineto_loop(KINETO / f"{name}.pt.trace.json.gz", tmp_path / f"{name}.json", 6)
    trace = load_trace(path)
    expected = "optimizer" if name == "gpu_train" else "repeat:cpu_op"
    assert trace.meta.step_method == expected
    steps = trace.steps()
    assert len(steps) == 6
    period = np.diff(steps["start_ns"].to_numpy())[1:]  # step 0 may start late (no work before the trace)
    assert period.max() - period.min() < 1000  # every copy of the step is one step
    result = analyze(trace)
    assert result.metrics["steps"] == 6
    assert any("No step markers" in n for n in result.notes)


def test_imported_training_loop_without_optimizer_ranges_repeats(tmp_path: Path) -> None:
    path = kineto_loop(KINETO / "gpu_train.pt.trace.json.gz", tmp_path / "train.json", 5)
    text = path.read_text().replace("Optimizer.step#", "opt_step#").replace("Optimizer.zero_grad#", "zero#")
    path.write_text(text)
    trace = load_trace(path)
    assert trace.meta.step_method == "repeat:cpu_op" and len(trace.steps()) == 5


def test_markers_win_and_a_long_first_step_is_trimmed() -> None:
    base = inference_trace(iterations=10)
    found = find_steps(base).steps()
    marks = [
        Marker(0, MarkerKind.STEP, f"step {k}", int(s), int(e), k)
        for k, (s, e) in enumerate(zip(found["start_ns"], found["end_ns"], strict=True))
    ]
    first_start = int(base.intervals["start_ns"].min())
    marks[0] = Marker(0, MarkerKind.STEP, "step 0", first_start, int(found["end_ns"].iloc[0]), 0)  # holds set-up
    marked = Trace.build(base.meta, base.lanes, [], marks)
    marked = Trace(base.meta, base.lanes, base.intervals, marked.markers)
    out = find_steps(marked)
    assert out.meta.step_method == "markers"
    assert out.steps()["start_ns"].iloc[0] > first_start + 50 * MS
    assert len(out.steps()) == 10


def _kernels_repeating(gaps_ms: list[float]) -> Trace:
    """Kernels A, B, C (0.2 ms each) repeated once per gap, each repeat followed by its gap."""
    from collector.model import Interval, IntervalKind, Lane, LaneKind, RunMeta

    rows, t = [], 10 * MS
    for gap in gaps_ms:
        for name in "ABC":
            rows.append(Interval(0, IntervalKind.KERNEL, name, t, t + MS // 5))
            t += MS // 5
        t += int(gap * MS)
    lanes = [Lane(0, LaneKind.COMPUTE_STREAM, 7, "stream 7 (compute)")]
    return Trace.build(RunMeta.new(source="synthetic"), lanes, rows, [])


def test_a_sequence_recurring_at_random_intervals_is_not_a_loop() -> None:
    """A benchmark sweeping sizes repeats the same kernels 22 us to 12 s apart: no pace, so no steps (the run
    is one step) rather than eight "steps" of which no two are alike."""
    irregular = find_steps(_kernels_repeating([0.1, 50, 0.3, 900, 2, 400, 0.05, 12_000]))
    assert irregular.meta.step_method == "none"
    paced = find_steps(_kernels_repeating([3, 3.1, 2.9, 3, 40, 3, 3.2, 3]))  # one eval-like outlier
    assert paced.meta.step_method == "repeat:gpu" and len(paced.steps()) == 8


def test_a_copy_running_on_into_the_first_step_counts_in_the_set_up_only_up_to_its_end() -> None:
    from collector.model import Interval, IntervalKind, Lane, LaneKind, RunMeta

    lanes = [Lane(0, LaneKind.CPU_THREAD, 1, "main thread"), Lane(0, LaneKind.COMPUTE_STREAM, 7, "stream 7")]
    rows = [Interval(1, IntervalKind.MEMCPY_H2D, "Memcpy HtoD", 1 * MS, 11 * MS, bytes=64 << 20)]
    marks = []
    for k in range(4):
        t = (8 + 10 * k) * MS
        rows.append(Interval(0, IntervalKind.LAUNCH, "cudaLaunchKernel", t, t + MS // 100, step=k, id=100 + k))
        rows.append(Interval(1, IntervalKind.KERNEL, "k", t + MS // 50, t + 6 * MS, step=k, launch_id=100 + k))
        marks.append(Marker(0, MarkerKind.STEP, f"step {k}", t, t + 10 * MS, k))
    result = analyze(Trace.build(RunMeta.new(source="synthetic"), lanes, rows, marks))
    setup = result.phases[result.phases["phase"] == "setup"].iloc[0]
    assert setup["copy_count"] == 1
    assert 0 < setup["copy_ns"] <= setup["dur_ns"] < 10 * MS  # not the copy's whole 10 ms


def test_found_steps_are_not_called_markers_on_the_page() -> None:
    """A CPU-only run whose steps were found as the loop's repeats: its notes say so, and never that the
    windows are step markers it does not have."""
    from webapp.analysis.run import step_notes

    found, basis = step_notes("repeat:cpu_op", "host")
    assert found.startswith("No step markers: steps are the iterations of the loop")
    assert "marker" not in basis and "steps found" in basis
    (marked,) = step_notes("markers", "host")
    assert marked == "Step windows are the step markers (no GPU work is tagged with its step)."
