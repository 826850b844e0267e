"""The lanes the timeline lays out: which get a queue track and which fold into one row."""

from __future__ import annotations

from gloo_cuda_traces import rank_trace

from collector.model import Lane, LaneKind
from collector.synthetic.gloo_cuda import ddp_job
from webapp.lanes import lane_views


def test_gloo_on_gpus_queues_only_the_users_streams_and_groups_its_copy_streams() -> None:
    rank = ddp_job(2, steps=2, side_streams=3)[0]
    trace = rank_trace(rank, rank.calls)
    views = {v["label"]: v for v in lane_views(trace.lanes)}
    assert views["stream 7 (compute)"]["queue"] and views["stream 7 (compute)"]["group"] == ""
    comm = [v for label, v in views.items() if v["kind"] == "comm_stream"]
    assert comm and not any(v["queue"] for v in comm)  # gloo's comm lane is its worker thread
    copies = [v for v in views.values() if v["group"] == "gloo copies"]
    assert sorted(v["ident"] for v in copies) == [13, 17, 21] and not any(v["queue"] for v in copies)
    assert not any(v["queue"] for v in views.values() if v["kind"] == "cpu_thread")
    assert [v["index"] for v in lane_views(trace.lanes)] == list(range(len(trace.lanes)))


def test_nccl_streams_keep_their_queue_and_a_transfer_stream_is_no_group() -> None:
    lanes = [
        Lane(0, LaneKind.COMM_STREAM, 20, "stream 20 (comm)"),
        Lane(0, LaneKind.TRANSFER_STREAM, 24, "stream 24 (transfer)"),
        Lane(0, LaneKind.TRANSFER_STREAM, 28, "prefetch (stream 28)"),
    ]
    assert [(v["queue"], v["group"]) for v in lane_views(lanes)] == [(True, ""), (True, ""), (True, "")]
