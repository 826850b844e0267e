"""Traces of loops without step markers, for the step-finding tests.

``inference_trace``: an inference loop as the recorder sees it (``net.cuda()`` once, then per iteration a
non-blocking input copy, the forward kernels, ``argmax`` and a blocking ``.cpu()`` that drains the queue).
``kineto_loop``: a torch.profiler fixture's ProfilerStep#2 repeated N times with its step markers removed.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

from collector.model import Interval, IntervalKind, Lane, LaneKind, MemoryKind, RunMeta, Trace

US = 1_000
MS = 1_000_000
SETUP_LINE = "infer.py:5"
INPUT_LINE = "infer.py:9"
CPU_LINE = "infer.py:10"
CPU, COMPUTE = 0, 1


def inference_trace(iterations: int = 20, params: int = 12, tail_ms: int = 3) -> Trace:
    """The loop of issue 10: set-up copies 4.8 ms each, 4 ms of kernels and a 1 ms host stall per step."""
    rows: list[Interval] = []
    t = 1 * MS
    for _ in range(params):  # net.cuda(): blocking pageable copies, each a host wait
        copy_ns = 4_800 * US
        rows.append(
            Interval(
                CPU,
                IntervalKind.SYNC_WAIT,
                "aten::_to_copy",
                t,
                t + copy_ns + 20 * US,
                source=SETUP_LINE,
                cause="blocking_copy",
                id=len(rows) + 1000,
            )
        )
        rows.append(
            Interval(
                COMPUTE,
                IntervalKind.MEMCPY_H2D,
                "Memcpy HtoD",
                t + 10 * US,
                t + 10 * US + copy_ns,
                bytes=16 << 20,
                memory_kind=MemoryKind.PAGEABLE,
                source=SETUP_LINE,
                launch_id=len(rows) + 999,
            )
        )
        t += copy_ns + 40 * US
    for _ in range(iterations):
        host = t
        lid = len(rows) + 1000
        rows.append(
            Interval(CPU, IntervalKind.CPU_OP, "aten::_to_copy", host, host + 15 * US, source=INPUT_LINE, id=lid)
        )
        gpu = host + 20 * US
        rows.append(
            Interval(
                COMPUTE,
                IntervalKind.MEMCPY_H2D,
                "Memcpy HtoD",
                gpu,
                gpu + 30 * US,
                bytes=64 << 10,
                memory_kind=MemoryKind.PINNED,
                non_blocking=True,
                source=INPUT_LINE,
                launch_id=lid,
            )
        )
        gpu += 30 * US
        host += 20 * US
        for name in ("aten::addmm", "aten::relu", "aten::addmm", "aten::relu", "aten::addmm", "aten::argmax"):
            lid = len(rows) + 1000
            rows.append(Interval(CPU, IntervalKind.CPU_OP, name, host, host + 10 * US, id=lid))
            rows.append(
                Interval(
                    COMPUTE,
                    IntervalKind.KERNEL,
                    name.replace("aten::", "k_"),
                    max(gpu, host + 8 * US),
                    max(gpu, host + 8 * US) + 660 * US,
                    launch_id=lid,
                )
            )
            gpu = max(gpu, host + 8 * US) + 660 * US
            host += 12 * US
        lid = len(rows) + 1000  # .cpu(): waits for the queue, then a small pageable copy back
        rows.append(
            Interval(
                CPU, IntervalKind.SYNC_WAIT, "aten::_to_copy", host, gpu + 40 * US, source=CPU_LINE, cause="cpu", id=lid
            )
        )
        rows.append(
            Interval(
                COMPUTE,
                IntervalKind.MEMCPY_D2H,
                "Memcpy DtoH",
                gpu,
                gpu + 30 * US,
                bytes=4 << 10,
                memory_kind=MemoryKind.PAGEABLE,
                source=CPU_LINE,
                launch_id=lid,
            )
        )
        t = gpu + 40 * US + 1 * MS  # host work on the result (numpy) while the GPU idles
    rows.append(Interval(CPU, IntervalKind.CPU_OP, "aten::cat", t, t + tail_ms * MS, id=len(rows) + 1000))
    lanes = [Lane(0, LaneKind.CPU_THREAD, 100, "main"), Lane(0, LaneKind.COMPUTE_STREAM, 7, "stream 7")]
    return Trace.build(RunMeta.new(workload="infer.py", source="recorded"), lanes, rows)


def kineto_loop(src: Path, dst: Path, iterations: int, step: str = "ProfilerStep#2") -> Path:
    """Write ``src``'s ``step`` (its events by time, GPU work by correlation) ``iterations`` times, one after
    another, to ``dst`` without any ProfilerStep events; ids are shifted so every copy keeps its own links."""
    raw = Path(src).read_bytes()
    doc = json.loads(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw)
    events: list[dict[str, Any]] = doc["traceEvents"]
    mark = next(e for e in events if e.get("name") == step and e.get("cat") == "user_annotation")
    t0, t1 = float(mark["ts"]), float(mark["ts"]) + float(mark["dur"])
    host = [
        e
        for e in events
        if e.get("ph") != "M"
        and "ts" in e
        and t0 <= float(e["ts"]) < t1
        and e.get("cat") not in ("kernel", "gpu_memcpy", "gpu_memset", "gpu_user_annotation")
    ]
    corr = {e["args"]["correlation"] for e in host if "correlation" in (e.get("args") or {})}
    gpu = [
        e
        for e in events
        if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset") and (e.get("args") or {}).get("correlation") in corr
    ]
    flows = {e.get("id") for e in host if e.get("ph") == "s"}
    gpu += [e for e in events if e.get("ph") == "f" and e.get("id") in flows]
    body = [e for e in host + gpu if not str(e.get("name", "")).startswith("ProfilerStep#")]
    end = max(float(e["ts"]) + float(e.get("dur", 0)) for e in body)
    period = end - t0 + 50.0
    out = [e for e in events if e.get("ph") == "M"]
    for k in range(iterations):
        for e in body:
            e2 = json.loads(json.dumps(e))
            e2["ts"] = round(float(e["ts"]) + k * period, 3)
            args = e2.get("args") or {}
            for key in ("correlation", "External id", "Python id", "Python parent id"):
                if isinstance(args.get(key), int):
                    args[key] += k * 1_000_000
            if e2.get("ph") in ("s", "f") and isinstance(e2.get("id"), int):
                e2["id"] += k * 1_000_000
            out.append(e2)
    doc["traceEvents"] = out
    dst.write_text(json.dumps(doc))
    return dst
