"""The CLI in-process: exit codes, messages, convert round trip."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from collector import __version__
from collector.load import load_trace
from collector.model import (
    Interval,
    IntervalKind,
    Lane,
    LaneKind,
    Marker,
    MarkerKind,
    MemoryKind,
    RunMeta,
    Trace,
)
from collector.traceformat.write import write_trace
from webapp.cli import main


def small_trace() -> Trace:
    lanes = [
        Lane(0, LaneKind.CPU_THREAD, 11, "CPU thread"),
        Lane(0, LaneKind.TRANSFER_STREAM, 13, "stream 13 (transfer)"),
        Lane(0, LaneKind.COMPUTE_STREAM, 7, "stream 7 (compute)"),
    ]
    rows = [
        Interval(0, IntervalKind.LAUNCH, "aten::copy_", 1_000, 2_000),
        Interval(
            1,
            IntervalKind.MEMCPY_H2D,
            "aten::copy_",
            2_500,
            9_000,
            bytes=1 << 20,
            memory_kind=MemoryKind.PINNED,
            non_blocking=True,
            launch_id=0,
            step=0,
        ),
        Interval(2, IntervalKind.KERNEL, "aten::mm", 3_000, 12_345, step=0),
        Interval(0, IntervalKind.SYNC_WAIT, "item", 2_000, 12_400, cause="item", source="train.py:42", step=0),
    ]
    return Trace.build(RunMeta.new(workload="unit"), lanes, rows, [Marker(0, MarkerKind.STEP, "step 0", 0, 13_000, 0)])


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0
    assert capsys.readouterr().out.strip() == f"streamscope {__version__}"


def test_no_command_prints_help_and_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 2
    assert "usage: streamscope" in capsys.readouterr().out


@pytest.mark.parametrize("suffix", [".json", ".json.gz"])
def test_convert_round_trip(tmp_path: Path, suffix: str, capsys: pytest.CaptureFixture[str]) -> None:
    src = tmp_path / "in.json"
    write_trace(small_trace(), str(src))
    dst = tmp_path / f"out{suffix}"
    assert main(["convert", str(src), str(dst)]) == 0
    assert "4 intervals on 3 lanes" in capsys.readouterr().out
    if suffix == ".json.gz":
        with gzip.open(dst) as fh:
            assert fh.read(1) == b"{"
    back = load_trace(str(dst))
    original = small_trace()
    cols = ["kind", "name", "start_ns", "end_ns", "bytes", "memory_kind", "source", "cause", "lane_kind"]
    assert back.intervals[cols].astype(str).equals(original.intervals[cols].astype(str))


def test_convert_missing_input_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["convert", str(tmp_path / "nope.json"), str(tmp_path / "out.json")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.endswith("nope.json: no such file")
    assert len(err.splitlines()) == 1


def test_convert_bad_output_suffix_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = tmp_path / "in.json"
    write_trace(small_trace(), str(src))
    assert main(["convert", str(src), str(tmp_path / "out.txt")]) == 2
    assert "must end in .json or .json.gz" in capsys.readouterr().err


def test_convert_invalid_file_exits_2_with_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = tmp_path / "broken.json"
    src.write_text('{"traceEvents": [')
    out = tmp_path / "out.json"
    assert main(["convert", str(src), str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("streamscope convert: error:")
    assert len(err.splitlines()) == 1
    assert not out.exists()


def test_convert_into_missing_folder_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = tmp_path / "in.json"
    write_trace(small_trace(), str(src))
    assert main(["convert", str(src), str(tmp_path / "nowhere" / "out.json")]) == 2
    assert "no such folder for the output" in capsys.readouterr().err


def test_convert_reads_torch_profiler_trace(tmp_path: Path) -> None:
    sample = Path(__file__).resolve().parents[1] / "sample_traces" / "torch-profiler-overlap.pt.trace.json.gz"
    out = tmp_path / "converted.json.gz"
    assert main(["convert", str(sample), str(out)]) == 0
    back = load_trace(str(out))
    assert back.meta.source == "torch.profiler"
    assert {"kernel", "memcpy_h2d", "sync_wait"} <= set(back.intervals["kind"].astype(str))


SAMPLES = Path(__file__).resolve().parent.parent / "sample_traces"


def _analysis(capsys: pytest.CaptureFixture[str], name: str) -> dict:
    import json

    assert main(["analyze", str(SAMPLES / name), "--json"]) == 0
    return dict(json.loads(capsys.readouterr().out))


def test_the_pageable_copy_finding_counts_every_pageable_copy(capsys: pytest.CaptureFixture[str]) -> None:
    """The naive sample's pageable uploads are 100 of 64 MiB and 100 of 32 KiB a run: the finding counts both."""
    from webapp.formatting import fmt_bytes

    iv = load_trace(str(SAMPLES / "naive.json.gz")).intervals
    up = iv[(iv["kind"] == "memcpy_h2d") & (iv["memory_kind"] == "pageable")]
    big, small = up[up["bytes"] >= 2**20], up[up["bytes"] < 2**20]
    assert len(big) and len(small)
    found = {f["rule"]: f for f in _analysis(capsys, "naive.json.gz")["findings"]}
    detail = found["pageable-copy"]["detail"]
    assert detail.startswith(
        f"{len(up)} host-to-device copies went through pageable memory: {len(big)} of 1 MiB or more "
        f"({fmt_bytes(big['bytes'].mean())} on average) at "
    ), detail
    assert f", and {len(small)} smaller ({fmt_bytes(small['bytes'].mean())} on average)" in detail
    assert "64 MiB on average" in detail and "32 KiB on average" in detail


@pytest.mark.parametrize("name, phase", [("d2h.json.gz", "tail"), ("overlap.json.gz", "setup")])
def test_phase_notes_count_their_copies_in_words(capsys: pytest.CaptureFixture[str], name: str, phase: str) -> None:
    from webapp.formatting import fmt_bytes

    result = _analysis(capsys, name)
    row = next(p for p in result["phases"] if p["phase"] == phase and p["copy_count"])
    n, size = row["copy_count"], fmt_bytes(row["copy_bytes"])
    said = f"1 copy of {size} in " if n == 1 else f"{n} copies, {size} in all, in "
    assert any(said in note for note in result["notes"]), result["notes"]
    assert not any(" 1 copies" in note for note in result["notes"])


@pytest.mark.parametrize("command", [["analyze"], ["convert"], ["report"], ["merge"]])
def test_a_folder_given_as_a_trace_is_called_a_folder(
    command: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = [*command, str(tmp_path)] + {"convert": [str(tmp_path / "out.json")], "merge": ["--out", "x.json"]}.get(
        command[0], []
    )
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"streamscope {command[0]}: error: {tmp_path}: is a folder, not a trace file"
    assert main([command[0], str(tmp_path / "missing.json"), *argv[2:]]) == 2
    assert capsys.readouterr().err.strip().endswith("missing.json: no such file")


def test_demos_describe_the_sync_trap_condition_as_its_code_has_it(capsys: pytest.CaptureFixture[str]) -> None:
    import inspect

    from collector.demos import loops

    condition = next(
        line.split("#")[0].strip()
        for line in inspect.getsource(loops.sync_trap).splitlines()
        if line.strip().startswith("if ") and "item()" in line
    )
    assert condition == "if loss.item() < best:"
    assert main(["demos"]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("sync-trap"))
    assert f"`{condition}`" in line
    assert f"``{condition}``" in (loops.sync_trap.__doc__ or "")
    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    assert f"`{condition}`" in readme


def test_readme_states_the_pinned_copy_speed_up_the_samples_show(capsys: pytest.CaptureFixture[str]) -> None:
    naive = _analysis(capsys, "naive.json.gz")["metrics"]
    pinned = _analysis(capsys, "pinned.json.gz")["metrics"]
    slow, fast = naive["transfer_busy_step_median_ns"] / 1e6, pinned["transfer_busy_step_median_ns"] / 1e6
    readme = " ".join((Path(__file__).resolve().parent.parent / "README.md").read_text().split())
    assert f"take {fast:.2f} ms a step instead of {slow:.2f} ms" in readme
    assert f"({slow / fast:.1f}x faster: {pinned['h2d_pinned_achieved_gbps']:.0f} GB/s pinned against " in readme
    assert f"{naive['h2d_pageable_achieved_gbps']:.1f} GB/s pageable)" in readme
