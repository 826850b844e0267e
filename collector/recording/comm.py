"""The collectives a GPU rank ran, from torch.distributed's flight recorder: name, process group, bytes, when.

torch.distributed keeps a ring of its recent collectives (the flight recorder, NCCL's and, in recent
releases, gloo's): each with its op (``nccl:all_reduce``, ``gloo:all_reduce``), process group, input and
output sizes and dtypes, the wall-clock time it was enqueued and the thread that enqueued it. It is on only
when ``TORCH_FR_BUFFER_SIZE`` (or ``TORCH_NCCL_TRACE_BUFFER_SIZE``) is set before the first process group is
made: :func:`enable` sets it when the user has not, and :func:`calls` reads the ring when recording stops.
collector.recording.commjoin joins these calls to the CUPTI records (NCCL kernels; gloo's worker threads).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from collector.traceformat.collective_meta import DTYPE_BYTES, group_label

BUFFER_ENV = ("TORCH_FR_BUFFER_SIZE", "TORCH_NCCL_TRACE_BUFFER_SIZE")
"""Environment variables that size the flight recorder's ring (0 or unset: off)."""
BUFFER_ENTRIES = 20_000
"""Entries the ring keeps when the recorder turns it on (a few per step for DDP's gradient buckets)."""
DUMPERS = ("_dump_fr_trace_json", "_dump_nccl_trace_json")
"""torch._C._distributed_c10d functions that return the ring as JSON, newest first."""


@dataclass(frozen=True)
class CollectiveCall:
    """One collective as the flight recorder saw it enqueued: ``name`` (``gloo:all_reduce``), ``group``
    (``default_pg (pg 0)``), ``bytes`` (its larger message: input or output, all tensors), ``created_ns``
    (wall clock), ``thread`` (the enqueuing thread's ``pthread_self``, low 32 bits: CUPTI's thread id) and
    ``seq`` (its number in its process group)."""

    name: str
    group: str
    bytes: int
    created_ns: int
    thread: int
    seq: int

    @property
    def backend(self) -> str:
        return self.name.split(":", 1)[0] if ":" in self.name else ""


def enable(environ: dict[str, str] | None = None) -> bool:
    """Turn the flight recorder on for the process groups made from now on, unless the user sized it
    (then theirs stands); True when it is on."""
    env = os.environ if environ is None else environ
    if any(env.get(k) for k in BUFFER_ENV):
        return any(env.get(k, "0").strip() not in ("", "0") for k in BUFFER_ENV)
    for key in BUFFER_ENV:  # older releases read NCCL's name only
        env[key] = str(BUFFER_ENTRIES)
    return True


def calls(since_ns: int, until_ns: int) -> list[CollectiveCall] | None:
    """The collectives enqueued between ``since_ns`` and ``until_ns`` (wall clock), oldest first; None when
    there is no flight recorder to read (no torch.distributed, an older torch, a ring that was off) or it
    holds no call of that window (then gloo's worker threads are read without it).
    The ring outlives its process groups: a script that destroyed its group before the recording stopped
    still has its calls read."""
    try:
        import torch.distributed as dist
        from torch._C import _distributed_c10d as c10d
    except (ImportError, AttributeError):
        return None
    if not dist.is_available():
        return None
    for dumper in DUMPERS:
        dump = getattr(c10d, dumper, None)
        if dump is None:
            continue
        try:
            doc = json.loads(dump(True, False))
        except (RuntimeError, ValueError, TypeError):  # a ring that cannot be read: do without it
            continue
        inside = [c for c in parse(doc) if since_ns <= c.created_ns <= until_ns]
        return inside or None  # none in the window: no ring, or one whose clock is not the wall clock
    return None


def default_backend() -> str:
    """The default process group's backend (``gloo``, ``nccl``), or "" without one."""
    try:
        import torch.distributed as dist

        return str(dist.get_backend()) if dist.is_available() and dist.is_initialized() else ""
    except (ImportError, RuntimeError, ValueError):
        return ""


def parse(doc: Mapping[str, Any]) -> list[CollectiveCall]:
    """The collectives of a flight-recorder dump (its JSON as a dict), oldest first."""
    out = []
    for e in doc.get("entries") or []:
        if not isinstance(e, Mapping) or not e.get("profiling_name"):
            continue
        pg = e.get("process_group") or ["", ""]
        name, desc = (str(pg[0]), str(pg[1])) if len(pg) >= 2 else (str(pg[0]) if pg else "", "")
        try:
            created = int(e.get("time_created_ns") or 0)
            thread = int(str(e.get("thread_id") or "0")) & 0xFFFFFFFF
        except ValueError:
            continue
        inputs = _bytes(e.get("input_sizes"), e.get("input_dtypes"))
        message = max(inputs, _bytes(e.get("output_sizes"), e.get("output_dtypes")))
        seq = int(e.get("collective_seq_id") or e.get("p2p_seq_id") or 0)
        out.append(CollectiveCall(str(e["profiling_name"]), group_label(name, desc), message, created, thread, seq))
    out.sort(key=lambda c: c.created_ns)
    return out


def _bytes(sizes: Any, dtypes: Any) -> int:
    """Bytes of a list of tensor shapes with their dtype names (``Float``, ``BFloat16``); 0 if unknown."""
    if not isinstance(sizes, list) or not isinstance(dtypes, list):
        return 0
    total = 0
    for shape, dtype in zip(sizes, _spread(dtypes, len(sizes)), strict=False):
        if isinstance(shape, list) and all(isinstance(d, int) for d in shape):
            n = 1
            for d in shape:
                n *= d
            total += n * DTYPE_BYTES.get(str(dtype), 0)
    return total


def _spread(dtypes: list[Any], n: int) -> Iterable[Any]:
    """One dtype per shape: a single dtype stands for all of them (outputs of an all_gather)."""
    return dtypes if len(dtypes) >= n else [dtypes[0] if dtypes else ""] * n
