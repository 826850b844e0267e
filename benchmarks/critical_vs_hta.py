"""Critical path per step against HolisticTraceAnalysis (HTA), the anchor for causal costs, on torch.profiler
traces.

For each step of each trace, both tools break the step's critical path down, and the shares are compared
in three groups both can name:

- host: ours ``host + sync``; HTA ``cpu_bound`` (HTA keeps a wait's call on the CPU and weighs its dependency
  edges 0);
- launch: ours ``launch``; HTA ``gpu_kernel_launch_overhead``;
- GPU: ours ``compute + copy + comm``; HTA ``gpu_compute_bound + gpu_communication_bound +
  gpu_kernel_kernel_overhead`` (ours counts a short bubble between two ops of a stream as GPU time).

Ours also has ``other``: time the trace gives no cause for (a gap before a GPU op that no launch it holds
started). HTA has no such part; shares are taken without it, and its own share is shown beside.

HTA's path is made of operator edges: it starts at the step annotation's first event and skips the host's
time between operators (Python), which ours counts as host work over the whole step window. So HTA's
path is shorter and its host share lower on host-bound steps; shares are compared, not nanoseconds. The
check: both name the same largest group (the step's bottleneck). The largest share gap is shown beside.

HTA runs in the python of a separate virtual environment (never the system python; HTA 0.5 needs pandas 2):

    python3 -m venv /tmp/hta-venv && /tmp/hta-venv/bin/pip install holistictraceanalysis "pandas<3"
    python3 benchmarks/critical_vs_hta.py                          # the torch.profiler traces in the repo
    python3 benchmarks/critical_vs_hta.py bench-data/profiles/*.pt.trace.json.gz

HTA's own test traces (``tests/data`` of github.com/facebookresearch/HolisticTraceAnalysis: real training and
inference jobs, NCCL, CUDA graphs, ROCm) make a wider check; copied into ``bench-data/hta/`` (one file per
folder, named after it; for ``critical_path``, ``cuda_event_sync/event_sync_trace.json.gz``) they run as
``python3 benchmarks/critical_vs_hta.py bench-data/hta/*.json.gz``.
HTA fails on the last step of each trace (its own error, listed as such).

The traces of the what-if loops (Hugging Face Trainer, Lightning, a torchvision loop, ...) are recorded on
a GPU, with torch alone, by ``python3 benchmarks/critical_vs_hta.py --record DIR`` (torch.profiler with CPU
and CUDA activities and CUDA sync events, a ``ProfilerStep`` per optimizer step or loop step). Figures go
to the ``## critical_vs_hta`` section of benchmarks/RESULTS.md.
"""

from __future__ import annotations

import argparse
import datetime as dt
import gzip
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from results_file import write_section

ROOT = Path(__file__).resolve().parent.parent
SECTION = "critical_vs_hta"
DEFAULT_HTA_PYTHON = "/tmp/hta-venv/bin/python"
DEFAULT_TRACES = (
    ROOT / "tests" / "kineto" / "data" / "gpu_step.pt.trace.json.gz",
    ROOT / "sample_traces" / "torch-profiler-overlap.pt.trace.json.gz",
)
GROUPS = ("host", "launch", "gpu")
OURS_GROUPS = {"host": ("host", "sync"), "launch": ("launch",), "gpu": ("compute", "copy", "comm")}
HTA_GROUPS = {
    "host": ("cpu_bound",),
    "launch": ("gpu_kernel_launch_overhead",),
    "gpu": ("gpu_compute_bound", "gpu_communication_bound", "gpu_kernel_kernel_overhead"),
}
STEP_NAMES = (re.compile(r"^ProfilerStep#(\d+)$"), re.compile(r"^step (\d+)$"))
"""CPU annotations that mark steps: torch.profiler's own, and the ``step N`` ranges of the sample loops."""

_HTA = r"""
import json, logging, sys
logging.disable(logging.CRITICAL)
from hta.trace_analysis import TraceAnalysis
analyzer = TraceAnalysis(trace_dir=sys.argv[1])
rank = int(sys.argv[3])
out = {}
for name in json.loads(sys.argv[2]):
    try:
        graph, ok = analyzer.critical_path_analysis(rank=rank, annotation=name, instance_id=0)
    except Exception as exc:  # HTA fails on some steps; say so rather than stop
        out[name] = {"error": f"{type(exc).__name__}: {exc}"[:200]}
        continue
    if not ok:
        out[name] = {"error": "no critical path"}
        continue
    edges = graph.get_critical_path_breakdown()
    out[name] = {str(k): float(v) * 1000 for k, v in edges.groupby("bound_by").duration.sum().items()}
print(json.dumps(out))
"""


def step_annotations(path: Path) -> tuple[int, dict[int, str]]:
    """The trace's rank, and step number -> the name of the CPU annotation that marks it (first pattern of
    STEP_NAMES that matches any event)."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as f:
        doc = json.load(f)
    rank = int((doc.get("distributedInfo") or {}).get("rank", 0) or 0)
    events = doc.get("traceEvents", [])
    names = {e.get("name", "") for e in events if e.get("ph") == "X" and e.get("cat") in ("user_annotation", "cpu_op")}
    for pattern in STEP_NAMES:
        found = {int(m.group(1)): n for n in names if (m := pattern.match(n))}
        if found:
            return rank, found
    return rank, {}


def ours(path: Path) -> dict[int, dict[str, float]]:
    """Step -> ns on the critical path per part (PARTS of webapp.analysis.causal.critical)."""
    sys.path.insert(0, str(ROOT))
    from collector.load import load_trace
    from webapp.analysis import analyze
    from webapp.analysis.causal.critical import PARTS

    per_step = analyze(load_trace(str(path))).per_step
    return {int(r["step"]): {p: float(r[f"cp_{p}_ns"]) for p in PARTS} for _, r in per_step.iterrows()}


def hta(path: Path, names: list[str], python: str, rank: int) -> dict[str, dict[str, Any]]:
    """Annotation name -> ns on HTA's critical path per ``bound_by``, or {"error": text}."""
    with tempfile.TemporaryDirectory() as d:  # HTA reads every trace file of a directory
        os.symlink(path.resolve(), Path(d) / "rank-0.json.gz" if path.suffix == ".gz" else Path(d) / "rank-0.json")
        proc = subprocess.run([python, "-c", _HTA, d, json.dumps(names), str(rank)], capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"{python} failed on {path.name}:\n{proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def shares(parts: dict[str, float], groups: dict[str, tuple[str, ...]]) -> tuple[dict[str, float], float]:
    total = sum(parts.get(k, 0.0) for g in groups.values() for k in g)
    return {g: sum(parts.get(k, 0.0) for k in keys) / total if total else 0.0 for g, keys in groups.items()}, total


def compare(path: Path, python: str) -> list[dict[str, Any]]:
    """One row per step that both tools analysed."""
    rank, names = step_annotations(path)
    mine = ours(path)
    steps = [s for s in sorted(mine) if s in names]
    theirs = hta(path, [names[s] for s in steps], python, rank)
    rows = []
    for s in steps:
        got = theirs.get(names[s], {"error": "missing"})
        row: dict[str, Any] = {"trace": path.name, "step": s}
        row["ours"], row["ours_ns"] = shares(mine[s], OURS_GROUPS)
        row["other"] = mine[s]["other"] / max(sum(mine[s].values()), 1.0)
        if "error" in got:
            row["error"] = got["error"]
        else:
            row["hta"], row["hta_ns"] = shares(got, HTA_GROUPS)
            row["held"] = max(row["ours"], key=row["ours"].get) == max(row["hta"], key=row["hta"].get)
            row["gap"] = max(abs(row["ours"][g] - row["hta"][g]) for g in GROUPS)
        rows.append(row)
    return rows


def markdown(rows: list[dict[str, Any]]) -> list[str]:
    def pct(d: dict[str, float]) -> str:
        return " / ".join(f"{100 * d[g]:.0f}" for g in GROUPS)

    lines = [
        "| trace | step | ours: host / launch / GPU % (path ms) | ours: other % | HTA: host / launch / GPU % "
        "(path ms) | largest gap | held |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        theirs = f"{pct(r['hta'])} ({r['hta_ns'] / 1e6:.2f})" if "hta" in r else f"HTA failed: {r['error']}"
        gap = f"{100 * r['gap']:.0f} pts" if "gap" in r else "-"
        held = "-" if "held" not in r else "yes" if r["held"] else "**no**"
        lines.append(
            f"| {r['trace']} | {r['step']} | {pct(r['ours'])} ({r['ours_ns'] / 1e6:.2f}) | {100 * r['other']:.0f} | "
            f"{theirs} | {gap} | {held} |"
        )
    checked = [r for r in rows if "held" in r]
    lines += [
        "",
        f"{sum(r['held'] for r in checked)} of {len(checked)} steps held (both name the same largest group); "
        f"HTA failed on {len(rows) - len(checked)}.",
    ]
    return lines


# ----------------------------------------------------------------------------------------- recording on a GPU


def record(folder: Path, names: list[str], steps: int) -> None:
    """torch.profiler traces of the base loops of benchmarks/whatif_loops.py, one ProfilerStep per step."""
    import torch
    from torch.optim.optimizer import register_optimizer_step_post_hook
    from torch.profiler import ProfilerActivity, profile, schedule

    sys.path.insert(0, str(ROOT / "benchmarks"))
    from whatif_loops import PAIRS

    folder.mkdir(parents=True, exist_ok=True)
    config = torch._C._profiler._ExperimentalConfig(enable_cuda_sync_events=True)
    for pair in PAIRS:
        if names and pair.name not in names:
            continue
        loop = pair.make(False)
        loop.run(3)  # warm: compile, allocate, autotune
        out = folder / f"{pair.name}.pt.trace.json.gz"
        with profile(
            activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
            schedule=schedule(wait=1, warmup=1, active=steps),
            on_trace_ready=lambda p, out=out: p.export_chrome_trace(str(out)),
            experimental_config=config,
        ) as prof:
            if loop.steps_marked:
                hook = register_optimizer_step_post_hook(lambda *_: prof.step())
                try:
                    loop.run(steps + 3)
                finally:
                    hook.remove()
            else:
                loop.run(steps + 3, on_step=prof.step)
        loop.close()
        print(f"{pair.name}: {out}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("traces", nargs="*", type=Path, help="torch.profiler traces (default: those in the repository)")
    ap.add_argument("--hta-python", default=DEFAULT_HTA_PYTHON)
    ap.add_argument("--record", type=Path, metavar="DIR", help="on a GPU: profile the what-if loops into DIR")
    ap.add_argument("--loops", default="", help="with --record: comma-separated loop names (default all)")
    ap.add_argument("--steps", type=int, default=6, help="with --record: profiled steps per loop")
    ap.add_argument("--no-results", action="store_true", help="do not write benchmarks/RESULTS.md")
    args = ap.parse_args(argv)
    if args.record:
        record(args.record, [n for n in args.loops.split(",") if n], args.steps)
        return 0
    if not Path(args.hta_python).exists():
        print(f"no HTA python at {args.hta_python}: see this script's docstring", file=sys.stderr)
        return 2
    rows = [row for path in args.traces or DEFAULT_TRACES for row in compare(path, args.hta_python)]
    lines = markdown(rows)
    print("\n".join(lines))
    if not args.no_results:
        stamp = f"Measured {dt.date.today()} on {platform.machine()}, Python {platform.python_version()}"
        where = [p.resolve() for p in args.traces]
        files = "".join(f" {p.relative_to(ROOT) if p.is_relative_to(ROOT) else p.name}" for p in where)
        version = subprocess.run(
            [args.hta_python, "-c", "import importlib.metadata as m; print(m.version('HolisticTraceAnalysis'))"],
            capture_output=True,
            text=True,
        ).stdout.strip()
        how = "\n\n".join(__doc__.split("\n\n")[1:4])
        command = f"`python3 benchmarks/critical_vs_hta.py{files}`"
        write_section(SECTION, "\n".join([f"{stamp}, HTA {version} ({command}).", "", how, "", *lines]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
