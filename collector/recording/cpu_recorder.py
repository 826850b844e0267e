"""Recording without CUDA: host lanes and collectives of a CPU rank (gloo), from torch.profiler's CPU activity.

A rank of a torch.distributed job on CPUs has no streams to time. What matters there is the host: the
``aten::`` ops of every thread, ``record_function`` ranges (a DataLoader's ``enumerate(DataLoader)#...``,
``Optimizer.step``), the collectives' enqueue ops (``c10d::allreduce_``) and the collectives themselves,
which gloo runs on worker threads (``gloo:all_reduce``; collector.importers.collectives turns them into
``collective`` intervals on comm lanes). Times are Kineto's: integer ns on the host's wall clock
(``time.time_ns``), the clock step marks are taken on too.

:func:`collector.record` picks :class:`CpuRecorder` on ``timing="cpu"``, and in place of a source that needs
CUDA when torch sees no CUDA device and a distributed job is running (``WORLD_SIZE`` set, or a process group
initialised): collector.recording.sources.recorder_class.
Each collective carries its bytes (input shapes are recorded) and its process group
(collector.recording.groups).
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd

from collector.model import RunMeta, Trace, conform_intervals, conform_markers, step_at
from collector.recording import groups
from collector.recording.base import Recorder
from collector.recording.kineto_capture import event_table, quiet_kineto
from collector.recording.threadnames import live_thread_labels, relabel_threads
from collector.traceformat.events import EventTable

CPU_NOTE = "host ops, ranges and collectives from torch.profiler's CPU activity; no CUDA device"
KEPT = frozenset({"cpu_op", "user_annotation"})


def distributed_env() -> tuple[int, int]:
    """(rank, world size) from a launcher's environment (``RANK``, ``WORLD_SIZE``), else (0, 1)."""

    def number(name: str, default: int) -> int:
        value = os.environ.get(name, "")
        return int(value) if value.isdigit() else default

    return number("RANK", 0), max(number("WORLD_SIZE", 1), 1)


def in_distributed_job() -> bool:
    """A launcher set ``WORLD_SIZE``, or this process already joined a process group."""
    if os.environ.get("WORLD_SIZE"):
        return True
    try:
        import torch.distributed as dist
    except ImportError:
        return False
    return bool(dist.is_available() and dist.is_initialized())


def _table(events: list[Any], info: dict[str, Any]) -> EventTable:
    """The profiler's host events (KEPT categories) as an event table carrying ``distributedInfo``; host
    collectives carry the bytes of their inputs."""
    from collector.importers.collectives import HOST_COMM_PREFIXES

    table = event_table(events, keep=KEPT, input_sized=HOST_COMM_PREFIXES)
    table.top["distributedInfo"] = info
    return table


def distributed_info(rank: int, world_size: int) -> dict[str, Any]:
    """``distributedInfo`` as torch.profiler writes it: rank, world size, backend and process groups."""
    info: dict[str, Any] = {"rank": rank, "world_size": world_size}
    try:
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized():
            info["backend"] = str(dist.get_backend())
            info["rank"], info["world_size"] = dist.get_rank(), dist.get_world_size()
    except (ImportError, RuntimeError, ValueError):
        pass
    return info


class CpuRecorder(Recorder):
    """A :class:`~collector.recording.base.Recorder` for a CPU rank; use :func:`collector.record`.
    ``name_stream()`` has no effect; the base's GPU options (``probe``, ``calibrate``, ``stacks``) are left
    unused. Step boundaries and marks are on the host's wall clock (``time.time_ns``), as the profiler's times
    are."""

    timing = "cpu"
    needs_cuda = False
    summary = "host ops and collectives; picked without CUDA in a distributed job"

    def __init__(self, workload: str = "", out: str | None = None, *, rank: int | None = None, **options: Any) -> None:
        env_rank, self.world_size = distributed_env()
        super().__init__(workload, out, rank=rank if rank is not None else env_rank, **options)
        self._prof: Any = None
        self._restore_log: Callable[[], None] = lambda: None  # quiet_kineto's undo, once started
        self._calls: list[tuple[int, int, str]] = []
        self._groups: set[str] = set()
        """Labels of the process groups seen while recording (each step's, each call's): a script
        that destroys its groups before the recorder stops leaves none to look up then."""

    def _now(self) -> int:
        return time.time_ns()

    def _begin(self) -> None:
        import torch
        from torch.profiler import ProfilerActivity, profile

        self._torch_version = torch.__version__
        self._prof = profile(activities=[ProfilerActivity.CPU], record_shapes=True, with_stack=False)
        self._restore_log = quiet_kineto()
        self._prof.start()
        self._undo.append(groups.install(self._on_collective_call))

    def _next_step(self, was_on: bool) -> None:
        self._groups.update(groups.known_groups())
        if self.every > 1 and self._on != was_on and self._prof is not None:
            from torch.profiler import ProfilerActivity

            self._prof.toggle_collection_dynamic(self._on, [ProfilerActivity.CPU])

    def _on_collective_call(self, t0: int, t1: int, group: str) -> None:
        self._groups.add(group)  # the groups that exist are read at each step, not on this path of every call
        if self._on:
            self._calls.append((t0, t1, group))

    def name_stream(self, stream: Any, label: str) -> None:
        """No streams on a CPU rank: nothing to name."""

    def _end(self, step_open: bool, error: str) -> Trace:
        """Stop the profiler and build the Trace (one rank)."""
        prof, self._prof = self._prof, None
        prof.stop()
        self._restore_log()
        events = list(prof.profiler.kineto_results.events())
        info = distributed_info(self.rank, self.world_size)
        self.rank = int(info["rank"])
        return self._build(_table(events, info), info, error)

    def _build(self, table: EventTable, info: dict[str, Any], error: str) -> Trace:

        from collector.importers.collectives import mark_host_collectives
        from collector.importers.kineto import trace_from_kineto

        raw = mark_host_collectives(trace_from_kineto(table, source_name=self.workload))
        lanes = relabel_threads(raw.lanes, live_thread_labels())
        frame = raw.intervals.copy()
        frame["lane_label"] = np.array([ln.label for ln in lanes], dtype=object)[frame["lane"].to_numpy()]
        markers = conform_markers(
            pd.DataFrame(
                [
                    {"rank": self.rank, "kind": k, "name": nm, "start_ns": a, "end_ns": b, "step": s}
                    for k, nm, a, b, s in self._markers
                ],
                columns=["rank", "kind", "name", "start_ns", "end_ns", "step"],
            )
        )
        frame["step"] = step_at(markers, frame["start_ns"].to_numpy(np.int64))
        frame["group"] = groups.assign_groups(frame, self._calls, sorted(self._groups.union(groups.known_groups())))
        meta = RunMeta.new(
            workload=self.workload,
            source=self.source,
            command=self.command,
            error=error,
            clock="unix_ns",
            host=socket.gethostname(),
            device_name="cpu",
            torch_version=self._torch_version,
            world_size=int(info.get("world_size", 1)),
            notes={"timing": "cpu", "timing_note": CPU_NOTE, "every": self.every, "rank": self.rank, **_dist(info)},
        )
        return Trace(meta, lanes, conform_intervals(frame), markers)


def _dist(info: dict[str, Any]) -> dict[str, Any]:
    return {"backend": info["backend"]} if "backend" in info else {}
