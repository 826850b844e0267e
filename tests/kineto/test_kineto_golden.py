"""The Kineto importer's output, pinned: a digest of every column (dtype, categories, values), the lanes, the
step markers and the metadata (but its import-time stamps) of each recorded torch.profiler trace, taken before
the importer was split into its stages. A change to any value, dtype or row order changes the digest.

Regenerate only for an intended change of output: ``python tests/kineto/test_kineto_golden.py``.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from collector.importers.kineto import trace_from_kineto
from collector.load import load_trace
from collector.model import Trace
from collector.traceformat.events import read_events

ROOT = Path(__file__).resolve().parents[2]
TRACES = {
    "sample-overlap": ROOT / "sample_traces" / "torch-profiler-overlap.pt.trace.json.gz",
    "gpu-step": ROOT / "tests" / "kineto" / "data" / "gpu_step.pt.trace.json.gz",
    "gpu-train": ROOT / "tests" / "kineto" / "data" / "gpu_train.pt.trace.json.gz",
    "rocm": ROOT / "tests" / "kineto" / "data" / "rocm_mi250_train.pt.trace.json.gz",
    "fixture": ROOT / "tests" / "kineto" / "data" / "gpu_fixture.json",
}
STAMPED = ("created", "host", "streamscope_version")
"""Metadata stamped at import time (RunMeta.new), left out of the digest."""
DIGESTS = {
    ("fixture", False): "742a1ae82adbeba2b287a44eba67894200a34ae6a71bb9d32eef88ac5a5375ea",
    ("fixture", True): "3fcf6d6a2129bd9295204c81707ca99608a0040d44c771e5dc5532509b393c89",
    ("gpu-step", False): "9e9f6ed4f5c96819e3d98ea9ea37c9eb849251a9c68da59156f8aec6b37cdfa8",
    ("gpu-step", True): "27cd1807fc05589fc5eb4079edd386b29559d18bc863c64c0269a5bc10975fef",
    ("gpu-train", False): "1df456ab6870e55a150e02a7047a70558155684b84c9f8ff35eff00c4510e225",
    ("gpu-train", True): "a473c964480ebb47b10577b8da3d62e784b4f214f12bb63639d18fca59effa16",
    ("rocm", False): "a972cd1b1c75cf17c77e432396e2ff5b41353922b00851c3e78a129b907b6f04",
    ("rocm", True): "38e1d7de7850ecb2e92c70234f8920a149b5454980eb51cd393f0c88667c19ce",
    ("sample-overlap", False): "d83b208a3fe296a4ed2e28bacca09f343d25271ad290d5a374e14d3c44887dd6",
    ("sample-overlap", True): "445ca75a0440a500ba3e9b5e37737881d55592d34a5b2db62e5b02dd0b952bc2",
}


def frame_digest(frame: pd.DataFrame) -> str:
    """sha256 over each column's name, dtype and values (a categorical's categories and codes)."""
    h = hashlib.sha256()
    for name in frame.columns:
        col = frame[name]
        h.update(f"{name}:{col.dtype}".encode())
        if isinstance(col.dtype, pd.CategoricalDtype):
            h.update(json.dumps([str(c) for c in col.cat.categories]).encode())
            h.update(col.cat.codes.to_numpy().astype(np.int64).tobytes())
        elif col.dtype == object:
            h.update(json.dumps([str(v) for v in col]).encode())
        else:
            h.update(np.ascontiguousarray(col.to_numpy()).tobytes())
    return h.hexdigest()


def trace_digest(trace: Trace) -> str:
    h = hashlib.sha256()
    h.update(frame_digest(trace.intervals).encode())
    h.update(frame_digest(trace.markers.reset_index(drop=True)).encode())
    h.update(json.dumps([[ln.rank, ln.kind.value, ln.ident, ln.label] for ln in trace.lanes]).encode())
    meta = {k: v for k, v in trace.meta.to_dict().items() if k not in STAMPED}
    h.update(json.dumps(meta, sort_keys=True, default=str).encode())
    return h.hexdigest()


LOADED = {
    "fixture": "00c101f6e8600d26cdd108e72caa139953fe94e266428cb8c0749f7ce3a083e6",
    "gpu-step": "b9bb1c9e5c4f0795d8a21dbda58656c6f0f82148202eba971eec06c7347c9801",
    "gpu-train": "f46b80f0c78d481af75327eb711d9c7277439a5dab0657b69da16ca747759c47",
    "rocm": "af1632281488baf63c1d942acf0ebace8f9afc6d21ebf6edd29813ec3a21bcbf",
    "sample-overlap": "858733db90710584dc77070ec665f0014fcba060f8408cae50b3abf564bd60bf",
}


def imported(name: str, by_start: bool) -> Trace:
    path = TRACES[name]
    return trace_from_kineto(read_events(path), source_name=path.name, by_start=by_start)


@pytest.mark.parametrize(("name", "by_start"), sorted(DIGESTS), ids=lambda v: str(v))
def test_imported_run_is_unchanged(name: str, by_start: bool) -> None:
    assert trace_digest(imported(name, by_start)) == DIGESTS[(name, by_start)]


@pytest.mark.parametrize("name", sorted(LOADED))
def test_loaded_run_is_unchanged(name: str) -> None:
    """The whole load (recognise the file, import it, mark host collectives, find steps) likewise."""
    assert trace_digest(load_trace(TRACES[name])) == LOADED[name]


if __name__ == "__main__":  # pragma: no cover - prints the tables above
    for key in sorted(DIGESTS):
        print(f"    {key!r}: {trace_digest(imported(*key))!r},")
    for name in sorted(TRACES):
        print(f"    {name!r}: {trace_digest(load_trace(TRACES[name]))!r},")
