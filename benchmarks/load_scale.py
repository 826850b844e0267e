"""Load-scale benchmark: how fast, and in how much memory, a large Chrome trace becomes the run DataFrame.

Generates (into ./bench-data/, reused when present) a synthetic but realistic torch.profiler (Kineto) trace
of about 100 MB and 1 GB: python_function and cpu_op nests, cudaLaunchKernel runtime calls with ``ac2g``
flows to kernels with long templated names on many streams, pinned and pageable copies, memsets and
stream syncs, laid out the way Kineto writes them. Each file is loaded in a fresh subprocess (so peak RSS
is that load's own) through ``collector.traceformat.read.load_trace`` when the torch.profiler importer exists,
else ``collector.traceformat.events.read_events``; the script prints MB/s and peak RSS / file size and writes the
``## load_scale`` section of benchmarks/RESULTS.md.

    python3 benchmarks/load_scale.py                 # 100 MB and 1 GB
    python3 benchmarks/load_scale.py --sizes 100     # just 100 MB
    python3 benchmarks/load_scale.py --stdlib        # also time the stdlib-json fallback (slow)
    python3 benchmarks/load_scale.py --ours 3000000  # our own format: write + load of 3M intervals

It also writes a synthetic run of ``--ours`` intervals (collector.synthetic) in our own format, .json and
.json.gz, times ``write_trace`` and loads each back through ``load_trace`` in a fresh process.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import random
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "bench-data"
RESULTS = ROOT / "benchmarks" / "RESULTS.md"
SECTION = "load_scale"

_TEMPLATES = [
    "void at::native::elementwise_kernel<128, 4, at::native::gpu_kernel_impl<at::native::CUDAFunctor_add<{t}> >"
    "(at::TensorIteratorBase&, at::native::CUDAFunctor_add<{t}> const&)::{{lambda(int)#1}}>(int, "
    "at::native::gpu_kernel_impl<at::native::CUDAFunctor_add<{t}> >(at::TensorIteratorBase&, "
    "at::native::CUDAFunctor_add<{t}> const&)::{{lambda(int)#1}})",
    "sm90_xmma_gemm_{t}_{t}_{t}_f32_tn_n_tilesize{n}x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas",
    "void cutlass::Kernel2<cutlass_80_tensorop_{t}_s16816gemm_relu_{t}_{n}x64_64x4_nn_align8>(cutlass_80_tensorop_"
    "{t}_s16816gemm_relu_{t}_{n}x64_64x4_nn_align8::Params)",
    "void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<{t}, float>(int, float, {t} const*, "
    "{t} const*, {t} const*, float*, float*, {t}*)",
    "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<{t}, at::native::func_wrapper_t<{t}, "
    "at::native::sum_functor<{t}, float, {t}>::operator()(at::TensorIterator&)::{{lambda(float, float)#1}}>, "
    "unsigned int, {t}, 4> >(at::native::ReduceOp<{t}, at::native::func_wrapper_t<{t}, at::native::sum_functor"
    "<{t}, float, {t}>::operator()(at::TensorIterator&)::{{lambda(float, float)#1}}>, unsigned int, {t}, 4>)",
    "ncclDevKernel_AllReduce_Sum_{t}_RING_LL(ncclDevComm*, unsigned long, ncclWork*)",
]
_KERNELS = [
    tpl.format(t=t, n=n) for tpl in _TEMPLATES for t in ("float", "c10::BFloat16", "c10::Half") for n in (64, 128, 256)
]
_OPS = [
    "aten::linear",
    "aten::addmm",
    "aten::add_",
    "aten::layer_norm",
    "aten::native_layer_norm",
    "aten::sum",
    "aten::mul",
    "aten::gelu",
    "aten::copy_",
    "aten::to",
    "aten::_to_copy",
    "aten::empty_strided",
]
_PYFUNCS = [
    "torch/nn/modules/module.py(1736): _call_impl",
    "torch/nn/modules/linear.py(124): forward",
    "train.py(88): step",
    "torch/nn/functional.py(2901): layer_norm",
    "torch/_tensor.py(40): wrapped",
]
_COPIES = [
    ("Memcpy HtoD (Pinned -> Device)", 13),
    ("Memcpy HtoD (Pageable -> Device)", 13),
    ("Memcpy DtoH (Device -> Pageable)", 14),
    ("Memcpy DtoD (Device -> Device)", 7),
]


def _ev(ph: str, cat: str, name: str, pid: int, tid: int, ts: float, dur: float | None, args: dict) -> str:
    d = "" if dur is None else f', "dur": {dur:.3f}'
    body = ",\n      ".join(f"{json.dumps(k)}: {json.dumps(v)}" for k, v in args.items())
    return (
        f'  {{\n    "ph": "{ph}", "cat": "{cat}", "name": {json.dumps(name)}, "pid": {pid}, "tid": {tid},\n'
        f'    "ts": {ts:.3f}{d},\n    "args": {{\n      {body}\n    }}\n  }}'
    )


def _flow(ph: str, corr: int, pid: int, tid: int, ts: float) -> str:
    bp = ', "bp": "e"' if ph == "f" else ""
    return (
        f'  {{\n    "ph": "{ph}", "id": {corr}, "pid": {pid}, "tid": {tid}, "ts": {ts:.3f},\n'
        f'    "cat": "ac2g", "name": "ac2g"{bp}\n  }}'
    )


def _unit(rng: random.Random, i: int, ts: float, pid: int) -> tuple[list[str], float]:
    """One Python call -> op -> launch -> GPU work group of events, Kineto-shaped."""
    tid = pid
    out = []
    ext = 2 * i
    corr = 10 * i
    py_id = 3 * i
    out.append(
        _ev(
            "X",
            "python_function",
            rng.choice(_PYFUNCS),
            pid,
            tid,
            ts,
            60.0,
            {"Python parent id": py_id - 1, "Python id": py_id, "Ev Idx": py_id},
        )
    )
    op = rng.choice(_OPS)
    out.append(
        _ev(
            "X",
            "cpu_op",
            op,
            pid,
            tid,
            ts + 1.1,
            50.5,
            {
                "External id": ext,
                "Record function id": 0,
                "Ev Idx": ext + 1,
                "Input Dims": [[64, 4096], [4096, 4096], [4096]],
                "Input type": ["float", "float", "float"],
                "Input Strides": [[4096, 1], [4096, 1], [1]],
                "Concrete Inputs": ["", "", ""],
                "Sequence number": i,
            },
        )
    )
    roll = rng.random()
    stream = rng.choice((7, 7, 7, 20, 21, 22, 23, 24, 25, 26))
    gpu_ts = ts + 30 + rng.random() * 20
    if roll < 0.08:
        name, stream = rng.choice(_COPIES)
        out.append(
            _ev(
                "X",
                "cuda_runtime",
                "cudaMemcpyAsync",
                pid,
                tid,
                ts + 3.3,
                9.2,
                {"External id": ext, "cbid": 51, "correlation": corr},
            )
        )
        nbytes = rng.choice((4096, 1 << 20, 64 << 20))
        out.append(
            _ev(
                "X",
                "gpu_memcpy",
                name,
                0,
                stream,
                gpu_ts,
                nbytes / 53_700.0 + 1.0,
                {
                    "External id": ext,
                    "device": 0,
                    "context": 1,
                    "stream": stream,
                    "correlation": corr,
                    "bytes": nbytes,
                    "memory bandwidth (GB/s)": 53.7,
                },
            )
        )
        if "DtoH" in name:
            out.append(
                _ev(
                    "X",
                    "cuda_runtime",
                    "cudaStreamSynchronize",
                    pid,
                    tid,
                    ts + 13.0,
                    40.0,
                    {"External id": ext, "cbid": 131, "correlation": corr + 1},
                )
            )
    elif roll < 0.1:
        out.append(
            _ev(
                "X",
                "cuda_runtime",
                "cudaMemsetAsync",
                pid,
                tid,
                ts + 3.3,
                4.2,
                {"External id": ext, "cbid": 62, "correlation": corr},
            )
        )
        out.append(
            _ev(
                "X",
                "gpu_memset",
                "Memset (Device)",
                0,
                stream,
                gpu_ts,
                1.5,
                {"External id": ext, "device": 0, "context": 1, "stream": stream, "correlation": corr, "bytes": 4096},
            )
        )
    else:
        out.append(
            _ev(
                "X",
                "cuda_runtime",
                "cudaLaunchKernel",
                pid,
                tid,
                ts + 3.3,
                5.1,
                {"External id": ext, "cbid": 211, "correlation": corr},
            )
        )
        out.append(_flow("s", corr, pid, tid, ts + 3.3))
        out.append(
            _ev(
                "X",
                "kernel",
                rng.choice(_KERNELS),
                0,
                stream,
                gpu_ts,
                5 + rng.random() * 200,
                {
                    "External id": ext,
                    "queued": 0,
                    "device": 0,
                    "context": 1,
                    "stream": stream,
                    "correlation": corr,
                    "registers per thread": 32,
                    "shared memory": 0,
                    "blocks per SM": 0.25,
                    "warps per SM": 1.0,
                    "grid": [64, 1, 1],
                    "block": [128, 1, 1],
                    "est. achieved occupancy %": 100,
                },
            )
        )
        out.append(_flow("f", corr, 0, stream, gpu_ts))
    return out, ts + 62.0


def generate(path: Path, target_bytes: int, seed: int = 0) -> int:
    """Write a Kineto-like trace of about ``target_bytes``; return the number of events."""
    rng = random.Random(seed)
    head = {
        "schemaVersion": 1,
        "deviceProperties": [
            {
                "id": 0,
                "name": "NVIDIA H200",
                "totalGlobalMem": 150_000_000_000,
                "computeMajor": 9,
                "computeMinor": 0,
                "numSms": 132,
            }
        ],
        "distributedInfo": {"backend": "nccl", "rank": 0, "world_size": 1},
        "baseTimeNanoseconds": 1_700_000_000_000_000_000,
    }
    tmp = path.with_suffix(".tmp")
    written = events = 0
    ts = 5_365_727_895_816.610
    with open(tmp, "w", encoding="utf-8") as f:
        text = json.dumps(head, indent=2)[:-2] + ',\n  "traceEvents": [\n'
        f.write(text)
        written += len(text)
        meta = ['  {"name": "process_name", "ph": "M", "ts": 0, "pid": 0, "tid": 0, "args": {"name": "GPU 0"}}']
        meta += [
            f'  {{"name": "thread_name", "ph": "M", "ts": 0, "pid": 0, "tid": {s}, "args": {{"name": "stream {s}"}}}}'
            for s in (7, 13, 14, 20, 21, 22, 23, 24, 25, 26)
        ]
        f.write(",\n".join(meta))
        i = 0
        while written < target_bytes:
            block = []
            for _ in range(max(10, min(2000, target_bytes // 50_000))):
                evs, ts = _unit(rng, i, ts, 4242)
                i += 1
                block.extend(evs)
            text = ",\n" + ",\n".join(block)
            f.write(text)
            written += len(text)
            events += len(block)
        f.write('\n  ],\n  "traceName": "synthetic.pt.trace.json"\n}\n')
    os.replace(tmp, path)
    return events + len(meta)


_CHILD = r"""
import json, os, resource, sys, time
path, how = sys.argv[1], sys.argv[2]
import pandas, numpy  # imported before the clock and the baseline, like a running app
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
t0 = time.perf_counter()
if how == "load_trace":
    from collector.load import load_trace
    frame = load_trace(path).intervals
else:
    from collector.traceformat.events import read_events
    frame = read_events(path, fast=(how == "read_events")).events
secs = time.perf_counter() - t0
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(json.dumps({"secs": secs, "peak": peak, "base": base, "rows": len(frame),
                  "frame_bytes": int(frame.memory_usage(deep=True).sum())}))
"""


def measure(path: Path, how: str) -> dict:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", _CHILD, str(path), how], capture_output=True, text=True, env=env)
    if out.returncode:
        raise SystemExit(f"load failed ({how}): {out.stderr.strip().splitlines()[-1:]}")
    return json.loads(out.stdout)


def write_ours(n: int) -> list[tuple[Path, float]]:
    """Write a synthetic run of about ``n`` intervals as .json and .json.gz; return (path, seconds)."""
    import time

    sys.path.insert(0, str(ROOT))
    from collector.synthetic import synthetic_trace
    from collector.traceformat.write import write_trace

    trace = synthetic_trace(n, ranks=2)
    out = []
    for suffix in (".json", ".json.gz"):
        path = DATA / f"ours-{n // 1000}k{suffix}"
        t0 = time.perf_counter()
        write_trace(trace, path)
        out.append((path, time.perf_counter() - t0))
    return out


_LABELS = {
    "load_trace": "load_trace (msgspec reader + torch.profiler import)",
    "read_events": "read_events (msgspec reader)",
    "stdlib": "read_events (stdlib json fallback)",
}


def _how() -> str:
    try:
        import collector.importers.kineto  # noqa: F401
    except ImportError:
        return "read_events"
    return "load_trace"


def write_section(lines: list[str]) -> None:
    text = RESULTS.read_text() if RESULTS.exists() else "# Benchmark results\n"
    body = f"## {SECTION}\n\n" + "\n".join(lines).rstrip() + "\n"
    start = text.find(f"## {SECTION}\n")
    if start < 0:
        text = text.rstrip() + "\n\n" + body
    else:
        nxt = text.find("\n## ", start + 1)
        text = text[:start] + body + ("" if nxt < 0 else "\n" + text[nxt + 1 :])
    RESULTS.write_text(text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100,1000", help="file sizes in MB, comma separated")
    parser.add_argument("--stdlib", action="store_true", help="also measure the stdlib json fallback")
    parser.add_argument("--repeat", type=int, default=3, help="loads per file (best time reported, and the worst)")
    parser.add_argument("--ours", type=int, default=3_000_000, help="intervals in our-format run (0: skip)")
    parser.add_argument("--no-results", action="store_true", help="do not write benchmarks/RESULTS.md")
    args = parser.parse_args(argv)
    DATA.mkdir(exist_ok=True)
    how = _how()
    rows = []
    for mb in (int(s) for s in args.sizes.split(",")):
        path = DATA / f"kineto-{mb}mb.json"
        if not path.exists():
            n = generate(path, mb * 1_000_000)
            print(f"generated {path.name}: {n:,} events")
        size = path.stat().st_size
        for mode in [how] + (["stdlib"] if args.stdlib else []):
            runs = [measure(path, mode) for _ in range(args.repeat if mode != "stdlib" else 1)]
            r = min(runs, key=lambda x: x["secs"])
            r["worst"] = max(x["secs"] for x in runs)
            r["peak"] = max(x["peak"] for x in runs)
            row = (mb, mode, size, r)
            rows.append(row)
            print(
                f"{path.name} via {mode}: {r['rows']:,} rows in {r['secs']:.1f} s (worst {r['worst']:.1f}) "
                f"= {size / 1e6 / r['secs']:.0f} MB/s; "
                f"peak RSS {r['peak'] / 1e6:,.0f} MB = {r['peak'] / size:.2f}x the file "
                f"(baseline {r['base'] / 1e6:.0f} MB); frame {r['frame_bytes'] / 1e6:,.0f} MB"
            )
    ours = []
    if args.ours:
        for path, write_s in write_ours(args.ours):
            size = path.stat().st_size
            r = measure(path, "load_trace")
            ours.append((path, write_s, size, r))
            print(
                f"{path.name}: {r['rows']:,} intervals, {size / 1e6:,.0f} MB; write_trace {write_s:.1f} s; "
                f"load_trace {r['secs']:.1f} s, peak RSS {r['peak'] / 1e6:,.0f} MB"
            )
    if not args.no_results:
        load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
        lines = [
            f"Measured {dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M} UTC on {platform.node() or 'this machine'}: "
            f"{os.cpu_count()} cores, Python {platform.python_version()}, "
            "`python3 benchmarks/load_scale.py"
            + "".join(" " + a for a in (argv if argv is not None else sys.argv[1:]))
            + "`.",
            "Synthetic Kineto-like trace (python_function, cpu_op, cuda_runtime + ac2g flows, kernels with long "
            f"templated names on 10 streams, copies, memsets, syncs), each load in a fresh process, "
            f"{args.repeat} loads "
            "per file (the stdlib path once); peak RSS is the largest seen and "
            "includes the interpreter with pandas/numpy imported (baseline). Target: 1 GB in <= 20 s at <= 3x.",
            f"Load average when measured: {load:.1f} (a shared machine: timings vary by tens of percent).",
            "",
            "`rows` is what the loader returns: run intervals for load_trace (flows, metadata and python_function "
            "events are not intervals), one row per event for read_events.",
            "",
            "| file | loaded by | rows | seconds, best (worst) | MB/s | peak RSS | RSS / file | frame in memory |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for _mb, mode, size, r in rows:
            lines.append(
                f"| {size / 1e6:,.0f} MB | {_LABELS[mode]} | {r['rows']:,} | {r['secs']:.1f} ({r['worst']:.1f}) | "
                f"{size / 1e6 / r['secs']:.0f} | "
                f"{r['peak'] / 1e6:,.0f} MB | {r['peak'] / size:.2f}x | {r['frame_bytes'] / 1e6:,.0f} MB |"
            )
        if ours:
            lines += [
                "",
                "Our own format (collector.synthetic run, 2 ranks), written by `write_trace` and read back by "
                "`load_trace` in a fresh process:",
                "",
                "| file | intervals | size | write_trace s | load_trace s | peak RSS | RSS / JSON size |",
                "|---|---|---|---|---|---|---|",
            ]
            json_size = {p.name: s for p, _, s, _ in ours if p.suffix == ".json"}
            for path, write_s, size, r in ours:
                plain = json_size.get(path.name.removesuffix(".gz"), size)
                lines.append(
                    f"| {path.name} | {r['rows']:,} | {size / 1e6:,.0f} MB | {write_s:.1f} | {r['secs']:.1f} | "
                    f"{r['peak'] / 1e6:,.0f} MB | {r['peak'] / plain:.2f}x |"
                )
        write_section(lines)
        print(f"wrote the ## {SECTION} section of {RESULTS.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
