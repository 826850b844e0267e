"""Recording overhead on the GPU: ms per step recorded / not recorded, same loop, same process.

Every loop of benchmarks/regimes.py (launch-bound, host-bound, GPU-bound, the teaching demos) and the
programs of benchmarks/programs.py (an inference loop without an optimizer or step marks, a CUDA graph
replay loop, a ``torch.compile``d model), warm, every step recorded, in each mode (``--modes``):

* ``plain``: not recorded (the baseline);
* ``cupti``: ``record(timing="cupti")`` (the default; CUPTI read by our own client; the host stack sampler
  on); ``cupti-nostacks``: the same without the stack sampler (``stacks=False``), which prices it;
* ``cupti-kineto``: the same with CUPTI read through torch's Kineto (the recorder's fallback);
* ``events``: ``record(timing="events")``;
* ``prof``: torch.profiler with CPU + CUDA activities; ``prof-cuda``: with the CUDA activity only.

Segments alternate (plain, cupti, cupti-kineto, events, prof, prof-cuda, plain, ...); each round's ratio is
a mode's time over that round's plain time, and the median over ``--rounds`` is reported with the lowest and
highest round (host-bound loops of a few ms move by several percent between rounds). The ratio is of the
steps after the first (steady state); the first step, which pays one-time costs (the recorder names the
first step's ops), is reported apart as ms over plain's first step, and folded into a whole-segment ratio.
Stop time (resolving, joining, building the trace; for the profiler its own post-processing) is timed apart
and reported per million intervals. The programs' loops are not marked as steps where a real one would not
be (the inference loop, the replays): the recorder's op naming must end by itself (``naming`` column).

``--whole`` times short scripts (benchmarks/programs.py ``SCRIPTS``) as whole processes, each mode in a fresh
process, rounds alternating: the script's time after ``import torch``, and the recorder's import, start and
stop, against the bound of 0.1 s plus 1 s per million intervals for start plus stop.

Prints a Markdown section (``## overhead``), written to ``--md`` if given.

    PYTHONPATH=. python3 benchmarks/overhead.py --md /tmp/overhead.md
    PYTHONPATH=. python3 benchmarks/overhead.py --quick   # the programs and the short scripts, ~3 minutes
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from programs import MARKED, PROGRAMS, SCRIPTS, profiler, program_steps, script_source
from regimes import LOOPS, loop_steps, step_fn, sync

MODES = ("plain", "cupti", "cupti-nostacks", "cupti-kineto", "events", "prof", "prof-cuda")
QUICK_MODES = ("plain", "cupti", "prof", "prof-cuda")
"""Modes of ``--quick``: the recorder beside torch.profiler CPU+CUDA and CUDA only (CUPTI's own cost)."""
WHOLE_MODES = ("plain", "cupti", "prof-cuda", "prof")
BENCH_DIR = Path(__file__).resolve().parent
STEPS = {"transformer-large": 20, "overlap": 20, "sync-trap": 20}
"""Steps per segment (default 50)."""
HOST_PACED = 0.8
"""A loop is paced by its host when its median unrecorded step is at least this share of its mean step.
Otherwise the host runs ahead of the GPU and waits in bursts (a full launch queue, the allocator), so one
step's host time is not the loop's speed and the per-step ratios are left out."""


@dataclass
class Segment:
    """One segment's times in seconds: the first step, each later step, the stop; and intervals recorded."""

    first_s: float
    steps_s: list[float]
    stop_s: float
    intervals: int
    naming: dict[str, Any]
    """The recorder's ``notes.op_naming`` (what ended its op naming), {} for the other modes."""


def segment(step: Callable[[], None], steps: int, mode: str, marked: bool = True) -> Segment:
    """Run ``steps`` steps under ``mode``; ``marked``: ``rec.step()`` after each (as an optimizer hook would).
    The GPU is waited for after the first step in every mode, so the later steps start from the same state;
    garbage is collected before, so no mode pays for another's."""

    from collector.recording.api import record

    gc.collect()
    rec: Any = None
    prof: Any = None
    if mode in ("cupti", "cupti-nostacks", "cupti-kineto", "events"):
        extra = {"stacks": False} if mode == "cupti-nostacks" else {}
        rec = record("bench", None, timing=mode.split("-")[0], probe=False, **extra)
        if mode == "cupti-kineto":
            rec.READERS = ("kineto",)
        rec.start()
    elif mode.startswith("prof"):
        prof = profiler(mode)
    sync()
    ends = [time.perf_counter()]
    for i in range(steps):
        step()
        if rec is not None and marked:
            rec.step()
        if i == 0:
            sync()
        ends.append(time.perf_counter())
    sync()
    ends[-1] = t1 = time.perf_counter()  # the last step ends when its GPU work has
    n = 0
    naming: dict[str, Any] = {}
    if rec is not None:
        trace = rec.stop()
        n, naming = len(trace.intervals), dict(trace.meta.notes.get("op_naming") or {})
    if prof is not None:
        prof.stop()
        n = len(prof.events())  # the profiler's own post-processing, for the stop column
    times = [b - a for a, b in zip(ends, ends[1:], strict=False)]
    return Segment(times[0], times[1:], time.perf_counter() - t1, n, naming)


def paired_ratio(mode: list[float], plain: list[float]) -> dict[str, float]:
    """Each round's time under a mode over that round's plain time (neighbouring segments, so a slow drift of
    the host cancels): their median (``ratio``) and range (``lo``, ``hi``)."""
    ratios = [m / p for m, p in zip(mode, plain, strict=True)]
    return {"ratio": statistics.median(ratios), "lo": min(ratios), "hi": max(ratios)}


def measure(
    name: str, rounds: int, modes: tuple[str, ...] = MODES, compiled_model: str = "convnet"
) -> dict[str, dict[str, Any]]:
    it = program_steps(name, compiled_model=compiled_model) if name in PROGRAMS else loop_steps(name)
    step = step_fn(it)
    for _ in range(10):  # warm: a compiled model compiles and autotunes here
        step()
    sync()
    steps = STEPS.get(name, 50)
    marked = MARKED.get(name, True)
    runs: dict[str, list[Segment]] = {m: [] for m in modes}
    for _ in range(rounds):
        for mode in modes:
            runs[mode].append(segment(step, steps, mode, marked))

    def per_round(mode: str, of: Callable[[Segment], float]) -> list[float]:
        return [of(r) for r in runs[mode]]

    def later(r: Segment) -> float:
        return sum(r.steps_s)

    def typical(r: Segment) -> float:
        return statistics.median(r.steps_s)

    def whole(r: Segment) -> float:
        return r.first_s + sum(r.steps_s)

    def quick(r: Segment) -> float:
        return statistics.quantiles(r.steps_s, n=10)[0] if len(r.steps_s) > 1 else sum(r.steps_s)

    plain = per_round("plain", later)
    noise = [abs(b / a - 1) for a, b in zip(plain, plain[1:], strict=False)]
    paced = statistics.median(per_round("plain", typical)) >= HOST_PACED * statistics.median(plain) / (steps - 1)
    out: dict[str, dict[str, Any]] = {
        "noise": {"plain_vs_plain": statistics.median(noise) if noise else 0.0, "host_paced": float(paced)},
        "naming": runs["cupti"][-1].naming if "cupti" in runs else {},
    }
    for m in modes:
        stop = statistics.median(per_round(m, lambda r: r.stop_s))
        out[m] = {
            "ms": statistics.median(per_round(m, later)) * 1e3 / (steps - 1),
            **paired_ratio(per_round(m, later), per_round("plain", later)),
            "typical_ratio": paired_ratio(per_round(m, typical), per_round("plain", typical))["ratio"],
            "quick_ratio": paired_ratio(per_round(m, quick), per_round("plain", quick))["ratio"],
            "first_extra_ms": statistics.median(
                r.first_s - p.first_s for r, p in zip(runs[m], runs["plain"], strict=True)
            )
            * 1e3,
            "whole_ratio": paired_ratio(per_round(m, whole), per_round("plain", whole))["ratio"],
            "stop_s": stop,
            "stop_s_per_m": stop / max(runs[m][-1].intervals, 1) * 1e6,
            "intervals": runs[m][-1].intervals,
        }
    return out


def stop_scale(intervals: int, out: Path) -> dict[str, float]:
    """Record the tiny-op loop until about ``intervals`` intervals; seconds per million intervals per phase
    of stopping (CUPTI timing), the trace written to ``out``."""
    from collector.recording.api import record

    step = step_fn(loop_steps("tiny-ops"))
    for _ in range(5):
        step()
    rec = record("stop-scale", str(out), probe=False)
    rec.start()
    for _ in range(max(intervals // 800, 1)):  # ~800 intervals a step: 400 kernels and their launches
        step()
        rec.step()
    sync()
    t0 = time.perf_counter()
    n = len(rec.stop().intervals)
    total = time.perf_counter() - t0
    per_m = {k: v / n * 1e6 for k, v in rec.stop_timings.items()}
    return {"intervals": n, "total_s_per_m": total / n * 1e6, **per_m}


LABELS = {
    "cupti": "cupti",
    "cupti-nostacks": "cupti without stack samples",
    "cupti-kineto": "cupti via Kineto",
    "events": "events",
    "prof": "torch.profiler CPU+CUDA",
    "prof-cuda": "torch.profiler CUDA",
}
"""Column titles of the modes."""


def markdown(results: dict[str, dict[str, Any]], device: str, modes: tuple[str, ...] = MODES) -> str:
    when = datetime.now(timezone.utc).strftime("%Y-%m-%d")
    measured = [m for m in modes if m != "plain"]
    stops = [m for m in measured if not m.startswith("prof")]
    head = [LABELS[m] for m in measured] + ["cupti first step +ms", "cupti whole", "cupti naming"]
    head += [f"stop {LABELS[m]} s/M" for m in stops]
    lines = [
        "## overhead",
        "",
        f"{when}, {device}. Warm loops, every step recorded, alternating segments; ratio = each round's "
        "ms/step over the unrecorded loop's in the same round and process, steps after a segment's first, "
        "median over rounds (lowest-highest round in brackets). First step = the recorder's first step over "
        "plain's, ms (median); whole = the cupti ratio of whole segments, first step included; naming = what "
        "ended the recorder's op naming and how many ops it named. Stop = resolving and building the trace "
        "(ours) or the profiler's post-processing, per million intervals.",
        "",
        "| loop | plain ms/step | " + " | ".join(head) + " |",
        "|---|---|" + "---|" * len(head),
    ]
    for name, r in results.items():
        cells = [_ratio(r[m]) for m in measured]
        if "cupti" in r:
            naming = r["naming"]
            cells += [f"{r['cupti']['first_extra_ms']:.1f}", f"{r['cupti']['whole_ratio']:.3f}x"]
            cells.append(f"{naming.get('stopped_by', '-')} ({naming.get('ops', 0):,} ops)" if naming else "-")
        else:
            cells += ["-", "-", "-"]
        cells += [f"{r[m]['stop_s_per_m']:.2f}" for m in stops]
        lines.append(f"| {name} | {r['plain']['ms']:.2f} | " + " | ".join(cells) + " |")
    lines += _ratio_table(
        results,
        "typical_ratio",
        "The same segments by their typical step (each segment's median step time after the first, so a few "
        "slow steps, such as a garbage collection or a preempted host thread, do not move it; - where the host "
        "runs ahead of the GPU, so that one step's host time is not the loop's speed):",
        measured,
    )
    lines += _ratio_table(
        results,
        "quick_ratio",
        "And by their quick steps (each segment's 10th-percentile step: the loop when nothing else on the host "
        "gets in its way); noise = the median difference between one round's plain segment and the next's:",
        measured,
        noise=True,
    )
    return "\n".join(lines) + "\n"


def _ratio_table(
    results: dict[str, dict[str, Any]], key: str, intro: str, measured: list[str], noise: bool = False
) -> list[str]:
    """A Markdown table of one ratio (``key``) per loop and mode, after a line saying what it is."""
    extra = " noise |" if noise else ""
    lines = [
        "",
        intro,
        "",
        "| loop | " + " | ".join(LABELS[m] for m in measured) + " |" + extra,
        "|---|" + "---|" * len(measured) + ("---|" if noise else ""),
    ]
    for name, r in results.items():
        paced = r["noise"].get("host_paced", 1.0) > 0
        ratios = " | ".join(f"{r[m][key]:.3f}x" if paced else "-" for m in measured)
        tail = f" {r['noise']['plain_vs_plain']:.1%} |" if noise else ""
        lines.append(f"| {name} | {ratios} |{tail}")
    return lines


def compiled_first() -> None:
    """The recorder's modules compiled to bytecode before any timed process, as an installed package has them
    (pip compiles a wheel's modules; a checkout gets them at its first import, unless PYTHONDONTWRITEBYTECODE
    is set): otherwise whichever process imports a module first, or every one where bytecode is not written,
    times Python compiling our sources (about 10 ms of a stop's imports alone)."""
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(BENCH_DIR.parent / "collector")], check=True)


def whole_processes(names: list[str], rounds: int, device: str = "cuda") -> dict[str, dict[str, list[dict]]]:
    """Each short script in each of WHOLE_MODES, a fresh process each, rounds alternating: per script and
    mode, each round's JSON line (benchmarks/programs.py ``script_source``)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(BENCH_DIR.parent), str(BENCH_DIR)])}
    compiled_first()
    out: dict[str, dict[str, list[dict]]] = {n: {m: [] for m in WHOLE_MODES} for n in names}
    for i in range(rounds):
        for name in names:
            for mode in WHOLE_MODES:
                t0 = time.perf_counter()
                done = subprocess.run(
                    [sys.executable, "-c", script_source(name, mode, device)],
                    cwd=BENCH_DIR,
                    env=env,
                    capture_output=True,
                    text=True,
                    timeout=300,
                    check=False,
                )
                if done.returncode != 0:
                    raise RuntimeError(f"{name} ({mode}) failed: {done.stderr[-2000:]}")
                out[name][mode].append(json.loads(done.stdout.strip().splitlines()[-1]))
                took = time.perf_counter() - t0
                print(f"whole: {name} {mode} round {i + 1}/{rounds}: {took:.1f} s", file=sys.stderr, flush=True)
    return out


def whole_markdown(whole: dict[str, dict[str, list[dict]]]) -> str:
    """The whole-process table: median script time per mode and ratio to plain (paired by round), and the
    recorder's import, start and stop against the bound of 0.1 s plus 1 s per million intervals."""
    lines = [
        "",
        "Short scripts as whole processes (a fresh process per mode and round, the device initialised first, "
        "the recorder's modules compiled to bytecode beforehand, as installed): "
        "the script's time after `import torch` (the recorder's import, start and stop included), median over "
        "rounds, and each mode's ratio to plain in the same round; the recorder's start plus stop against "
        "the bound 0.1 s + 1 s per million intervals:",
        "",
        "| script | plain s | cupti | torch.profiler CUDA | torch.profiler CPU+CUDA | intervals | cupti import s | "
        "cupti start s | cupti stop s | start+stop vs bound | cupti naming |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, runs in whole.items():
        plain = [r["total_s"] for r in runs["plain"]]

        def ratio(mode: str, runs: dict[str, list[dict]] = runs, plain: list[float] = plain) -> str:
            return _ratio(paired_ratio([r["total_s"] for r in runs[mode]], plain))

        cupti = runs["cupti"]
        n = int(statistics.median(r["intervals"] for r in cupti))
        start = statistics.median(r["start_s"] for r in cupti)
        stop = statistics.median(r["stop_s"] for r in cupti)
        bound = 0.1 + n / 1e6
        verdict = f"{start + stop:.3f} s vs {bound:.3f} s: {'met' if start + stop <= bound else 'not met'}"
        naming = cupti[-1].get("op_naming") or {}
        said = f"{naming.get('stopped_by', '-')} ({naming.get('ops', 0):,} ops)" if naming else "-"
        lines.append(
            f"| {name} | {statistics.median(plain):.3f} | {ratio('cupti')} | {ratio('prof-cuda')} | "
            f"{ratio('prof')} | {n:,} | {statistics.median(r['import_s'] for r in cupti):.3f} | {start:.3f} | "
            f"{stop:.3f} | {verdict} | {said} |"
        )
    phases = {}
    for name, runs in whole.items():
        keys = dict.fromkeys(k for r in runs["cupti"] for k in r.get("phases", {}))
        phases[name] = {k: statistics.median(r.get("phases", {}).get(k, 0.0) for r in runs["cupti"]) for k in keys}
    lines += ["", "The recorder's start and stop by phase (median seconds, cupti):", ""]
    lines += [f"- {name}: " + ", ".join(f"{k} {v:.3f}" for k, v in p.items()) for name, p in phases.items()]
    return "\n".join(lines) + "\n"


def _ratio(r: dict[str, float]) -> str:
    return f"{r['ratio']:.3f}x ({r['lo']:.2f}-{r['hi']:.2f})"


def main() -> None:
    import torch

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--loops", default=",".join(LOOPS), help=f"of {', '.join((*LOOPS, *PROGRAMS))}")
    parser.add_argument("--modes", default=",".join(MODES), help=f"of {', '.join(MODES)} (plain always runs)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--md", type=Path)
    parser.add_argument("--stop-intervals", type=int, default=1_000_000, help="0 to skip the stop-scale run")
    parser.add_argument("--stop-out", type=Path, default=Path("/tmp/stop-scale.json.gz"))
    parser.add_argument(
        "--whole",
        default="",
        help=f"short scripts timed as whole processes, of {', '.join(SCRIPTS)}: a fresh process per script, mode "
        f"of {', '.join(WHOLE_MODES)} (whatever --modes says) and round",
    )
    parser.add_argument("--whole-rounds", type=int, default=3)
    parser.add_argument("--compiled-model", default="convnet", choices=("convnet", "resnet18"))
    parser.add_argument(
        "--quick",
        action="store_true",
        help="the programs (2 rounds; plain, cupti, torch.profiler CPU+CUDA and CUDA only) and the short "
        "scripts as whole processes (2 rounds), no stop-scale run: about 3 minutes",
    )
    args = parser.parse_args()
    if args.quick:
        args.loops, args.modes, args.rounds = ",".join(PROGRAMS), ",".join(QUICK_MODES), 2
        args.stop_intervals, args.whole, args.whole_rounds = 0, args.whole or ",".join(SCRIPTS), 2
    modes = tuple(dict.fromkeys(["plain", *filter(None, args.modes.split(","))]))
    unknown = [m for m in modes if m not in MODES]
    if unknown:
        parser.error(f"unknown modes {unknown}; modes: {', '.join(MODES)}")
    results = {}
    for name in filter(None, args.loops.split(",")):  # --loops "": the stop-scale run alone
        results[name] = measure(name, args.rounds, modes, args.compiled_model)
        r = results[name]
        print(
            name,
            {m: f"{r[m]['ms']:.3f} ms {r[m]['ratio']:.3f}x ({r[m]['typical_ratio']:.3f}x typical)" for m in modes},
            flush=True,
        )
    text = markdown(results, torch.cuda.get_device_name(0), modes) if results else "## overhead\n"
    if args.whole:
        text += whole_markdown(whole_processes(list(filter(None, args.whole.split(","))), args.whole_rounds))
    if args.stop_intervals:
        scale = stop_scale(args.stop_intervals, args.stop_out)
        phases = ", ".join(f"{k} {v:.2f}" for k, v in scale.items() if k not in ("intervals", "total_s_per_m"))
        text += (
            f"\nStopping a CUPTI recording of {scale['intervals']:,} intervals (tiny-op loop): "
            f"{scale['total_s_per_m']:.2f} s per million intervals ({phases}).\n"
        )
    print(text)
    if args.md:
        args.md.write_text(text)


if __name__ == "__main__":
    main()
