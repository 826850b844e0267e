"""A synthetic but realistic torch.profiler (Kineto) trace file of any size, for tests and benchmarks.

python_function and cpu_op nests, cudaLaunchKernel runtime calls with ``ac2g`` flows to kernels with long
templated names on many streams, pinned and pageable copies, memsets and stream syncs, laid out the way Kineto
writes them. Pure standard library; deterministic for a given seed.
"""

from __future__ import annotations

import json
import os
import random
from pathlib import Path

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
