"""Per-rank work in parallel (webapp.rankwork): the pool, serial and Ray paths give one answer, and the joined
per-rank summaries find the planted straggler and clock offsets; rank files in a .zip for merge and analyze."""

from __future__ import annotations

import json
import re
import sys
import zipfile
from pathlib import Path

import pytest

from collector.synthetic.ranks import rank_job, write_rank_files
from webapp.cli import main
from webapp.rankwork import RankWorkError, join_summaries, run_per_rank, summarize_rank

WORLD = 4


@pytest.fixture(scope="module")
def rank_files(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    traces = rank_job(WORLD, 1_500, steps=8, ranks_per_host=2, slow_rank=3, delay_ns=4_000_000, seed=5)
    return [str(p) for p in write_rank_files(traces, tmp_path_factory.mktemp("ranks"))]


@pytest.fixture(scope="module")
def serial(rank_files: list[str]) -> dict:
    return join_summaries(run_per_rank(summarize_rank, rank_files, workers=1))


def test_joined_summaries_name_the_late_rank_and_undo_the_host_clocks(serial: dict) -> None:
    assert serial["collective_count"] == 9  # the barrier and one all_reduce per step
    assert serial["straggler"] == {"rank": 3, "last_frac": pytest.approx(8 / 9)}
    rows = {r["rank"]: r for r in serial["ranks"]}
    assert rows[0]["offset_ns"] == rows[1]["offset_ns"] == 0  # the reference host
    assert rows[2]["offset_ns"] == rows[3]["offset_ns"] != 0  # one clock per host
    assert all(r["residual_ns"] == 0 for r in rows.values())  # synthetic ends agree exactly
    assert rows[3]["wait_ns"] < rows[0]["wait_ns"]
    assert rows[0]["wait_ns"] >= 8 * 3_500_000  # waited about the planted 4 ms in every step
    assert all(r["intervals"] > 1_000 for r in rows.values())


def _number(pattern: str, line: str) -> str:
    found = re.search(pattern, line)
    assert found, f"{pattern!r} not in {line!r}"
    return found[1]


def test_the_per_rank_lines_print_each_wait_per_step_as_the_merged_run_has_it(
    rank_files: list[str], tmp_path: Path, capsys
) -> None:
    """Every rank waits about the planted 4 ms in each of its 8 steps: the summary line labelled per step says
    so (not the 30 ms or so the rank waited over the whole run), and the merged run's per-rank breakdown
    agrees; the median step is the one ``analyze`` of that rank alone prints."""
    assert main(["merge", *rank_files, "--out", str(tmp_path / "m.json.gz")]) == 0
    capsys.readouterr()
    assert main(["analyze", str(tmp_path / "m.json.gz"), "--json"]) == 0
    merged = {r["rank"]: r for r in json.loads(capsys.readouterr().out)["ranks"]["per_rank"]}
    assert main(["analyze", rank_files[0], "--json"]) == 0
    alone = json.loads(capsys.readouterr().out)["metrics"]
    assert main(["analyze", *rank_files, "--workers", "1"]) == 0
    lines = {int(x.split()[1]): x for x in capsys.readouterr().out.splitlines() if x.startswith("  rank ")}
    assert sorted(lines) == list(range(WORLD))
    waited = {rank: float(_number(r"waited +([0-9.]+) ms per step", line)) for rank, line in lines.items()}
    for rank in lines:
        assert waited[rank] == pytest.approx(merged[rank]["wait_ns"] / 1e6, abs=0.006)
    last = {rank: int(_number(r"last in +(\d+) of 9 ", line)) for rank, line in lines.items()}
    assert last[3] == 8 and sum(last.values()) == 9  # each of the 9 collectives has one rank last
    assert all(3.0 < waited[r] < 5.0 for r in (0, 1, 2)) and waited[3] < 0.1
    assert f"median step {alone['step_time_median_ns'] / 1e6:8.2f} ms" in lines[0]


def test_waits_per_step_follow_the_steps_the_analysis_places(tmp_path: Path) -> None:
    """Ranks whose steps are "step N" annotations (no step markers: the file's ``step`` column is -1
    throughout) still wait about the planted 4 ms per step."""
    from dataclasses import replace

    import numpy as np
    import pandas as pd

    from collector.model import LaneKind, conform_intervals, conform_markers

    traces = []
    for t in rank_job(WORLD, 1500, steps=8, ranks_per_host=2, slow_rank=3, delay_ns=4_000_000, seed=5):
        iv, st = t.intervals, t.steps()
        cpu = next(i for i, lane in enumerate(t.lanes) if lane.kind == LaneKind.CPU_THREAD)
        marks = (
            iv.iloc[[0] * len(st)]
            .reset_index(drop=True)
            .assign(
                kind="annotation",
                lane=cpu,
                name=[f"step {int(s)}" for s in st["step"]],
                start_ns=st["start_ns"].to_numpy(),
                end_ns=st["end_ns"].to_numpy(),
                id=np.arange(len(st)) + int(iv["id"].max()) + 1,
            )
        )
        iv = pd.concat([iv, marks], ignore_index=True).assign(step=-1)
        markers = conform_markers(t.markers[t.markers["kind"] != "step"])
        traces.append(replace(t, intervals=conform_intervals(iv), markers=markers).with_meta(step_method=""))
    files = [str(p) for p in write_rank_files(traces, tmp_path)]
    ranks = {r["rank"]: r for r in join_summaries(run_per_rank(summarize_rank, files, workers=1))["ranks"]}
    assert all(3e6 < ranks[r]["wait_per_step_ns"] < 5e6 for r in (0, 1, 2)), ranks
    assert ranks[3]["wait_per_step_ns"] < 1e5


def test_overlapping_waits_in_a_step_count_once() -> None:
    """Two buckets' all_reduces waiting at the same time (DDP) wait once; the barrier before the steps is no
    step's, and a step without a wait counts 0 in the mean."""
    import pandas as pd

    from webapp.rankwork import _per_step, _step_waits

    m = pd.DataFrame(
        {
            "rank": [0, 0, 0, 0],
            "step": [-1, 0, 0, 1],
            "start_ns": [0, 100, 150, 500],
            "wait_ns": [1_000, 200, 200, 60],  # step 0: [100, 300] and [150, 350] -> 250 ns
        }
    )
    waits = _step_waits(m)
    assert waits[0].tolist() == [250, 60]
    assert _per_step(waits[0], steps=3) == round(310 / 3)
    assert _per_step(None, steps=0) is None


def test_process_pool_gives_the_serial_answer(rank_files: list[str], serial: dict) -> None:
    assert join_summaries(run_per_rank(summarize_rank, rank_files, workers=2)) == serial


def test_ray_on_a_local_instance_gives_the_pool_answer(rank_files: list[str], serial: dict) -> None:
    pytest.importorskip("ray")
    assert join_summaries(run_per_rank(summarize_rank, rank_files, ray="local")) == serial


def test_a_rank_given_twice_or_alone_is_refused(rank_files: list[str]) -> None:
    one = run_per_rank(summarize_rank, rank_files[:1], workers=1)
    with pytest.raises(RankWorkError, match="at least two ranks"):
        join_summaries(one)
    with pytest.raises(RankWorkError, match="rank 0 is given twice"):
        join_summaries(one + one)


def _zip(rank_files: list[str], dst: Path) -> Path:
    with zipfile.ZipFile(dst, "w") as zf:
        for p in rank_files:
            zf.write(p, f"job/{Path(p).name}")
        zf.writestr("job/README.txt", "not a trace")
        zf.writestr("__MACOSX/job/._run.rank0.json.gz", "resource fork")
    return dst


def test_merge_and_analyze_take_a_zip(rank_files: list[str], serial: dict, tmp_path: Path, capsys) -> None:
    archive = _zip(rank_files, tmp_path / "ranks.zip")
    out = tmp_path / "run.json.gz"
    assert main(["merge", str(archive), "--out", str(out), "--workers", "2"]) == 0
    assert f"{WORLD} ranks" in capsys.readouterr().out
    assert main(["analyze", str(out), "--json"]) == 0
    merged = json.loads(capsys.readouterr().out)
    assert merged["ranks"]["last_counts"]["3"] == 8  # the merged run's analysis agrees on who is late
    assert merged["ranks"]["straggler"]["rank"] == 3
    assert main(["analyze", str(archive), "--json", "--workers", "1"]) == 0
    assert json.loads(capsys.readouterr().out) == serial
    assert main(["analyze", str(archive), "--workers", "1"]) == 0  # the summary points to the full analysis
    assert f"streamscope merge {archive} --out merged.json.gz && streamscope analyze" in capsys.readouterr().out


def test_bad_zips_and_options_exit_2(rank_files: list[str], tmp_path: Path, capsys) -> None:
    empty = tmp_path / "empty.zip"
    with zipfile.ZipFile(empty, "w") as zf:
        zf.writestr("notes.txt", "nothing")
    fake = tmp_path / "fake.zip"
    fake.write_bytes(b"not a zip")
    out = str(tmp_path / "o.json.gz")
    assert main(["merge", str(empty), "--out", out]) == 2
    assert "holds no rank files" in capsys.readouterr().err
    assert main(["analyze", str(fake)]) == 2  # named .zip, but its bytes are no zip (nor any trace)
    assert "fake.zip: not a trace file" in capsys.readouterr().err
    assert main(["analyze", *rank_files, "--workers", "0"]) == 2
    assert main(["analyze", rank_files[0], "--ray", "local"]) == 2
    assert "several rank files" in capsys.readouterr().err


def test_ray_asked_for_without_ray_installed_exits_2(rank_files: list[str], monkeypatch, capsys) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray raises ImportError
    assert main(["analyze", *rank_files, "--ray", "auto"]) == 2
    assert "pip install -e '.[ray]' in the Streamscope checkout" in capsys.readouterr().err


@pytest.mark.parametrize("where", [["--workers", "2"], ["--ray", "local"]])
def test_a_bad_rank_file_is_one_line_from_a_worker(rank_files: list[str], tmp_path: Path, capsys, where) -> None:
    if "--ray" in where:
        pytest.importorskip("ray")
    bad = tmp_path / "run.rank9.json"
    bad.write_text("{not json")
    assert main(["analyze", *rank_files[:2], str(bad), *where]) == 2
    err = capsys.readouterr().err
    last = err.strip().splitlines()[-1]
    assert last.startswith("streamscope analyze: error: ") and "run.rank9.json" in last
    assert "Traceback" not in err
