"""GPU ranks' collectives from the flight recorder and the CUPTI records: gloo with CUDA tensors through its
worker threads (their waits and copies marked as the collective's, not the user's), NCCL kernels named with
their group and bytes; merged, the planted straggler is found."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from gloo_cuda_traces import rank_trace

from collector.importers.kineto import trace_from_kineto
from collector.model import RunMeta
from collector.ranks.merge import merge_traces
from collector.recording import comm
from collector.recording.commjoin import COLLECTIVE_CAUSE, Threads, join_comm
from collector.recording.enrich import HostFacts, enrich
from collector.synthetic.gloo_cuda import AUTOGRAD, BUCKET_BYTES, GROUP, MAIN, WORKER, ddp_job

MS = 1_000_000
ROOT = Path(__file__).resolve().parents[2]


def _by_lane(iv: pd.DataFrame, label: str) -> pd.DataFrame:
    return iv[iv["lane_label"].astype(str) == label]


def test_gloo_worker_runs_become_the_calls_collectives_on_a_comm_lane() -> None:
    rank = ddp_job(steps=8, buckets=2)[0]
    trace = rank_trace(rank, rank.calls)
    iv = trace.intervals
    coll = iv[iv["kind"] == "collective"]
    assert len(coll) == 16 and set(coll["name"].astype(str)) == {"gloo:all_reduce"}
    assert set(coll["group"].astype(str)) == {GROUP} and set(coll["bytes"]) == {BUCKET_BYTES}
    assert set(coll["lane_label"].astype(str)) == {f"gloo comm (thread {WORKER})"}
    assert set(coll["lane_kind"].astype(str)) == {"comm_stream"}
    created = sorted(c.created_ns for c in rank.calls if c.name == "gloo:all_reduce")
    assert sorted(coll["start_ns"]) == created  # from the enqueue: when this rank arrived
    assert (coll["step"] >= 0).all()
    assert trace.meta.notes["comm"]["host_collectives"] == 16


def test_the_workers_waits_and_copies_are_the_collectives_not_the_users() -> None:
    rank = ddp_job(steps=6, buckets=2)[1]
    iv = rank_trace(rank, rank.calls).intervals
    worker = _by_lane(iv, f"gloo worker (thread {WORKER})")
    waits = worker[worker["kind"] == "sync_wait"]
    assert len(waits) == 12
    assert set(waits["cause"].astype(str)) == {COLLECTIVE_CAUSE}
    assert set(waits["source"].astype(str)) == {"gloo:all_reduce"}
    copies = iv[iv["kind"].isin(["memcpy_h2d", "memcpy_d2h"])]
    assert len(copies) == 24  # the copies back (worker) and to the host (autograd's enqueue)
    assert set(copies["source"].astype(str)) == {"gloo:all_reduce"}
    assert set(copies["cause"].astype(str)) == {COLLECTIVE_CAUSE}
    assert set(copies["lane_label"].astype(str)) == {"stream 13 (gloo copies)"}  # gloo's side stream, named so
    launches = iv.set_index("id").loc[copies["launch_id"]]
    assert set(launches["stream"]) == {WORKER, AUTOGRAD} and set(launches["source"].astype(str)) == {"gloo:all_reduce"}
    main = iv[(iv["stream"] == MAIN) & (iv["lane_kind"] == "cpu_thread")]
    assert len(main) and not (main["cause"].astype(str) == COLLECTIVE_CAUSE).any()


def test_merged_ranks_find_the_planted_straggler() -> None:
    from webapp.analysis.run import analyze

    ranks = ddp_job(world=2, steps=10, buckets=2, slow_rank=1, delay_ns=20 * MS)
    merged = merge_traces([rank_trace(r, r.calls) for r in ranks])
    result = analyze(merged)
    straggler = [f for f in result.findings if f.rule == "straggler"]
    assert straggler and "Rank 1" in straggler[0].title, [(f.rule, f.title) for f in result.findings]
    # the main thread waits for the buckets with no CUDA call: the graph infers that wait, so the replay saves
    # the planted 20 ms; the two buckets wait at the same time, so the wait per step is ~21 ms, not twice it
    assert 18 * MS < straggler[0].cost_per_step_ns < 22 * MS
    assert 20 * MS < result.ranks["straggler"]["wait_per_step_ns"] < 23 * MS
    align = merged.meta.notes["clock_alignment"]["ranks"]
    assert [a["anchors"] for a in align] == [20, 20]
    # GPU busy is the GPU's: kernels and copies, never the collectives gloo runs on a host thread
    per = result.per_step
    assert (per["gpu_busy_ns"] <= per["compute_busy_ns"] + per["transfer_busy_ns"]).all()
    assert float(result.metrics["gpu_busy_frac"]) < 0.2


def test_without_the_flight_recorder_each_run_is_a_collective_of_the_default_backend() -> None:
    rank = ddp_job(steps=4, buckets=3)[0]
    iv = rank_trace(rank, None, backend="gloo").intervals
    coll = iv[iv["kind"] == "collective"]
    assert len(coll) == 12 and set(coll["name"].astype(str)) == {"gloo:collective"}
    assert rank_trace(rank, None).meta.notes["comm"]["calls"] == "worker threads"
    untouched = rank_trace(rank, None, backend="")
    assert not (untouched.intervals["kind"] == "collective").any()


def test_a_call_of_host_tensors_is_passed_over() -> None:
    """A collective of CPU tensors (the loss, logged) runs no CUDA work: the worker's runs pair with the
    CUDA calls around it, by order and bytes."""
    rank = ddp_job(steps=3, buckets=2)[0]
    extra = [comm.CollectiveCall("gloo:all_reduce", GROUP, 4, c.created_ns - 1, MAIN, 0) for c in rank.calls[1::2]]
    iv = rank_trace(rank, sorted([*rank.calls, *extra], key=lambda c: c.created_ns)).intervals
    coll = iv[iv["kind"] == "collective"]
    assert len(coll) == 6 and set(coll["bytes"]) == {BUCKET_BYTES}


def test_a_run_the_flight_recorder_missed_keeps_its_waits_off_the_user() -> None:
    """A worker run with no call to pair with (here the ring lost the last step's calls) makes no collective,
    but its waits and copies are still the communication's."""
    rank = ddp_job(steps=4, buckets=2)[0]
    iv = rank_trace(rank, rank.calls[:-2]).intervals
    coll = iv[iv["kind"] == "collective"]
    assert len(coll) == 6
    waits = _by_lane(iv, f"gloo worker (thread {WORKER})")
    waits = waits[waits["kind"] == "sync_wait"]
    assert len(waits) == 8 and set(waits["cause"].astype(str)) == {COLLECTIVE_CAUSE}
    assert set(waits["source"].astype(str)) == {"gloo:all_reduce", "gloo:collective"}


def test_nccl_kernels_take_the_group_and_bytes_of_their_call() -> None:
    from collector.synthetic.cupti import EventRows

    rows = EventRows()
    calls = []
    for i in range(3):
        t = 1_000_000 + i * 1_000_000
        calls.append(comm.CollectiveCall("nccl:all_reduce", f"pg {i % 2}", 1000 * (i + 1), t, MAIN, i + 1))
        c = rows.call(MAIN, "cudaLaunchKernel", t + 20_000)
        rows.gpu("kernel", "ncclDevKernel_AllReduce_Sum_f32_RING_LL", 21, t + 30_000, 50_000, c)
    trace = enrich(trace_from_kineto(rows.table()), HostFacts(), RunMeta.new())
    iv = join_comm(trace, calls, Threads(python=frozenset({MAIN}))).intervals
    coll = iv[iv["kind"] == "collective"].sort_values("start_ns")
    assert coll["group"].astype(str).tolist() == ["pg 0", "pg 1", "pg 0"]
    assert coll["bytes"].tolist() == [1000, 2000, 3000]


def test_the_flight_recorders_dump_is_read() -> None:
    doc = {
        "entries": [
            {
                "profiling_name": "gloo:all_gather",
                "process_group": ["0", "default_pg"],
                "input_sizes": [[10]],
                "input_dtypes": ["Float"],
                "output_sizes": [[2, 10]],
                "output_dtypes": ["Float"],
                "time_created_ns": 2_000,
                "thread_id": str((7 << 32) | 1234),
                "collective_seq_id": 3,
            },
            {"profiling_name": "gloo:barrier", "process_group": ["1", "undefined"], "time_created_ns": 1_000},
            {"state": "no name: skipped"},
        ]
    }
    found = comm.parse(doc)
    assert [c.name for c in found] == ["gloo:barrier", "gloo:all_gather"]
    gather = found[1]
    assert (gather.group, gather.bytes, gather.thread, gather.seq, gather.backend) == (
        "default_pg (pg 0)",
        80,
        1234,
        3,
        "gloo",
    )
    assert found[0].group == "pg 1" and found[0].bytes == 0


def test_the_flight_recorder_is_turned_on_unless_the_user_sized_it() -> None:
    env: dict[str, str] = {}
    size = str(comm.BUFFER_ENTRIES)
    assert comm.enable(env) and env == {"TORCH_FR_BUFFER_SIZE": size, "TORCH_NCCL_TRACE_BUFFER_SIZE": size}
    theirs = {"TORCH_NCCL_TRACE_BUFFER_SIZE": "0"}
    assert not comm.enable(theirs) and theirs == {"TORCH_NCCL_TRACE_BUFFER_SIZE": "0"}


def test_a_real_gloo_group_leaves_its_calls_in_the_flight_recorder() -> None:
    """A world of one on this host's CPU: the calls of the recording window come back, barrier included."""
    code = textwrap.dedent(
        """
        import json, time
        from collector.recording import comm
        comm.enable()
        import torch, torch.distributed as dist
        dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
        t0 = time.time_ns()
        dist.all_reduce(torch.ones(16))
        dist.barrier()
        found = comm.calls(t0, time.time_ns())
        print(json.dumps([(c.name, c.group, c.bytes) for c in found] if found is not None else None))
        """
    )
    root = ROOT
    done = subprocess.run(
        [sys.executable, "-c", code],
        env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    found = done.stdout.strip().splitlines()[-1]
    if found == "null":
        pytest.skip("this torch has no flight recorder to read")
    assert json.loads(found) == [
        ["gloo:all_reduce", "default_pg (pg 0)", 64],
        ["gloo:barrier", "default_pg (pg 0)", 0],
    ]


def test_a_broadcast_received_without_a_wait_is_a_run_of_its_own() -> None:
    """The receiving rank's worker only copies a broadcast back (no wait first): that copy starts a run of its
    own, so the all_reduces after it keep their own calls (no shift by one)."""
    rank = ddp_job(steps=6, buckets=2, broadcast_step=2)[1]
    iv = rank_trace(rank, rank.calls).intervals
    coll = iv[iv["kind"] == "collective"].sort_values("start_ns")
    assert coll["name"].astype(str).tolist().count("gloo:broadcast") == 1 and len(coll) == 13
    created = sorted(c.created_ns for c in rank.calls if c.name != "gloo:barrier")
    assert coll["start_ns"].tolist() == created


def test_runs_start_at_a_first_wait_or_at_a_copy_back_after_a_finished_one() -> None:
    from collector.recording.commjoin import run_starts

    #            wait  wait  copy  rec   rec   copy  rec   copy  wait  copy  rec
    sync = [1, 1, 0, 0, 0, 0, 0, 0, 1, 0, 0]
    copy = [0, 0, 1, 0, 0, 1, 0, 1, 0, 1, 0]
    rec = [0, 0, 0, 1, 1, 0, 1, 0, 0, 0, 1]
    as_bool = [np.array(x, dtype=bool) for x in (sync, copy, rec)]
    assert run_starts(*as_bool).tolist() == [0, 5, 7, 8]
    assert run_starts(np.zeros(2, bool), np.array([1, 0], bool), np.zeros(2, bool)).tolist() == [0]


def test_the_straggler_s_host_time_is_its_finding_not_host_bound() -> None:
    """Rank 1 sleeps 20 ms a step before issuing ~2 ms of GPU work; rank 0 issues it at once: the straggler
    finding names rank 1's sleep, and host-bound judges the other rank, which keeps its GPU busy enough."""
    from webapp.analysis.run import analyze

    merged = merge_traces([rank_trace(r, r.calls) for r in ddp_job(2, steps=6)])
    result = analyze(merged)
    found = {x.rule: x for x in (*result.findings, *result.minor_findings)}
    assert result.ranks["straggler"]["rank"] == 1 and "straggler" in found
    assert "host-bound" not in found
    per = result.per_step
    assert per["cost_straggler_ns"].notna().all() and (per["cost_straggler_ns"] >= 0).all()
    # the straggler's own windows come down to the others' fixed step, never below zero
    assert (per["step_time_ns"] - per["cost_straggler_ns"] >= 0).all()


def test_a_straggler_whose_steps_begin_with_host_work_has_its_short_last_window_said() -> None:
    """Rank 1 sleeps at the start of each step: each of its GPU-aligned windows holds the next step's sleep,
    but the last has no next step. The note says so, for rank 1 only."""
    from webapp.analysis.run import analyze

    result = analyze(merge_traces([rank_trace(r, r.calls) for r in ddp_job(2, steps=6)]))
    per = result.per_step
    last = per[per["rank"] == 1].sort_values("step")["step_time_ns"].to_numpy()
    assert last[-1] < 0.2 * last[-2]
    said = [n for n in result.notes if "last step (" in n]
    assert len(said) == 1 and said[0].startswith(f"Rank 1's last step ({last[-1] / 1e6:.2f} ms, against ")


def test_the_ops_table_gives_no_gpu_share_to_host_run_collectives() -> None:
    """gloo's collectives run on host threads: their share of GPU busy time is none of the GPU's (it read
    7331% on a real run); kernels keep theirs."""
    from webapp.analysis.run import analyze

    table = analyze(merge_traces([rank_trace(r, r.calls) for r in ddp_job(2, steps=6)])).kernels
    gloo = table[table["name"].str.startswith("gloo:")]
    assert len(gloo) and gloo["gpu_frac"].isna().all()
    kernels = table[table["kind"] == "kernel"]
    assert len(kernels) and (kernels["gpu_frac"] <= 1).all() and (kernels["gpu_frac"] > 0).all()
    assert "sample" not in set(table["kind"])


def test_a_cpu_run_s_set_up_says_its_collectives_time() -> None:
    """CPU ranks: the set-up note's device work is the collectives run in it (the barrier), not a GPU figure
    that is 0 on a run without a GPU."""
    from ranks.ranks_traces import job

    from webapp.analysis.run import analyze

    result = analyze(merge_traces(job(world=2, steps=8, slow_rank=1, delay_ns=3_000_000)))
    phases = result.phases
    setup = phases[phases["phase"] == "setup"]
    assert setup["gpu_busy_ns"].sum() == 0 and setup["collective_ns"].sum() > 0
    (note,) = [n for n in result.notes if n.startswith("Set-up before the first step")]
    assert f"in collectives {setup['collective_ns'].sum() / 1e6:.2f} ms" in note


def test_the_straggler_s_cause_is_its_typical_excess() -> None:
    """Rank 1 loads 3 ms more per step; its last window holds no next step's loading: the cause says 3 ms,
    not a mean pulled down by that window."""
    import re

    from ranks.ranks_traces import job

    from webapp.analysis.run import analyze

    result = analyze(merge_traces(job(world=2, steps=8, slow_rank=1, delay_ns=3_000_000)))
    f = {x.rule: x for x in result.findings}["straggler"]
    said = re.search(r"Cause on rank 1: data loading \(([\d.]+) ms more per step", f.detail)
    assert said and 2.9 <= float(said.group(1)) <= 3.1, f.detail
