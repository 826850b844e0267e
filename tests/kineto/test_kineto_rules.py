"""Pure rules of the Kineto importer: memcpy names, API causes, user frames, enclosing ops, Python sources."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from collector.importers.kineto import memcpy_kind, start_order, used_categories
from collector.importers.kineto_lanes import lookup_first
from collector.importers.kineto_sync import (
    PyFrames,
    api_sync_cause,
    format_frame,
    frame_cause,
    is_async_copy_api,
    is_user_frame,
    latest_start,
    outermost_enclosing,
    python_sources,
)
from collector.traceformat.grouping import group_numbers


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("Memcpy HtoD (Pageable -> Device)", ("memcpy_h2d", "pageable")),
        ("Memcpy HtoD (Pinned -> Device)", ("memcpy_h2d", "pinned")),
        ("Memcpy DtoH (Device -> Pageable)", ("memcpy_d2h", "pageable")),
        ("Memcpy DtoH (Device -> Pinned)", ("memcpy_d2h", "pinned")),
        ("Memcpy DtoD (Device -> Device)", ("memcpy_d2d", "device")),
        ("Memcpy PtoP (Device -> Device)", ("memcpy_d2d", "device")),
        ("Memcpy HtoD (Managed -> Device)", ("memcpy_h2d", "")),
        ("Memcpy HtoH (Pinned -> Pinned)", ("", "")),
        ("Memset (Device)", ("", "")),
    ],
)
def test_memcpy_kind(name: str, expected: tuple[str, str]) -> None:
    assert memcpy_kind(name) == expected


def test_api_causes() -> None:
    assert api_sync_cause("cudaStreamSynchronize") == "stream_synchronize"
    assert api_sync_cause("cudaDeviceSynchronize") == "synchronize"
    assert api_sync_cause("cudaEventSynchronize") == "event_synchronize"
    assert api_sync_cause("cudaMemcpy") == "blocking_copy"
    assert api_sync_cause("cuMemcpyDtoH_v2") == "blocking_copy"
    assert api_sync_cause("cudaFree") == "cuda_free"
    for name in (
        "cudaMemcpyAsync",
        "cudaLaunchKernel",
        "cudaStreamWaitEvent",
        "cuLaunchKernel",
        "cudaMalloc",
    ):
        assert api_sync_cause(name) == ""
    assert is_async_copy_api("cudaMemcpyAsync") and is_async_copy_api("cudaMemcpy2DAsync")
    assert not is_async_copy_api("cudaMemcpy") and not is_async_copy_api("cudaMemsetAsync")


@pytest.mark.parametrize(
    ("name", "user"),
    [
        ("train.py(20): train_step", True),
        ("models/net.py(7): forward", True),
        ("/home/me/proj/train.py(3): <module>", True),
        ("torch/nn/modules/module.py(1750): _call_impl", False),
        ("transformers/models/llama/modeling_llama.py(300): forward", False),
        ("/usr/lib/python3/dist-packages/foo/bar.py(1): f", False),
        ("typing.py(359): inner", False),
        ("<frozen os>(674): __getitem__", False),
        ("<built-in method item of Tensor object at 0x7f00>", False),
    ],
)
def test_user_frames(name: str, user: bool) -> None:
    assert is_user_frame(name) is user


def test_frame_format_and_causes() -> None:
    assert format_frame("dir/train.py(41): step") == "dir/train.py:41 (step)"
    assert frame_cause("<built-in method item of Tensor object at 0x7f3a>") == "item"
    assert frame_cause("<built-in method tolist of Tensor object at 0x7f3a>") == "tolist"
    assert frame_cause("torch/_tensor.py(568): __repr__") == "print"
    assert frame_cause("<built-in method sum of Tensor object at 0x7f3a>") == ""
    assert frame_cause("train.py(1): item") == ""


def test_outermost_enclosing_per_thread() -> None:
    # thread 1: [0,100) > [10,50) ; [200,300) ; thread 2: [0,1000)
    key = np.array([1, 1, 1, 2])
    start = np.array([10, 0, 200, 0])
    end = np.array([50, 100, 300, 1000])
    got = outermost_enclosing(key, start, end, np.array([1, 1, 1, 2, 3, 1]), np.array([20, 150, 250, 20, 20, 100]))
    assert got.tolist() == [1, -1, 2, 3, -1, 1]


def test_latest_start_per_key() -> None:
    got = latest_start(
        np.array([1, 1, 2, 1]),
        np.array([10, 30, 5, 20]),
        np.array([1, 1, 2, 2, 3, 1]),
        np.array([25, 5, 5, 4, 9, 30]),
    )
    assert got.tolist() == [3, -1, 2, -1, -1, 1]


def test_python_sources_walk_parents_past_library_and_sibling_frames() -> None:
    names = pd.Index(
        [
            "train.py(5): step",
            "train.py(9): helper",
            "torch/x.py(1): f",
            "<built-in method item of Tensor object at 0x1>",
            "other.py(2): g",
        ]
    )
    frames = PyFrames(
        *(
            np.array(v)
            for v in (
                [1, 1, 1, 1, 2],  # key (thread)
                [0, 10, 30, 32, 0],  # start_ns
                [100, 20, 60, 50, 100],  # end_ns
                [0, 1, 2, 3, 4],  # code
                [1, 2, 3, 4, 5],  # py_id
                [-1, 1, 1, 3, -1],  # parent_id
            )
        )
    )
    source, cause = python_sources(frames, names, np.array([1, 1, 1, 2, 1]), np.array([40, 25, 15, 50, 500]))
    assert source.tolist() == [
        "train.py:5 (step)",
        "train.py:5 (step)",
        "train.py:9 (helper)",
        "other.py:2 (g)",
        "",
    ]
    assert cause.tolist() == ["item", "", "", "", ""]


@pytest.mark.parametrize("offset", [0, 10**12], ids=["dense", "sparse"])
def test_lookup_first(offset: int) -> None:
    ids = np.array([5, 7, 5, -1, 9]) + np.where(np.array([5, 7, 5, -1, 9]) >= 0, offset, 0)
    queries = np.array([5, 9, 8, -1, 7]) + np.where(np.array([5, 9, 8, -1, 7]) >= 0, offset, 0)
    assert lookup_first(ids, queries).tolist() == [0, 4, -1, -1, 1]


def test_start_order_breaks_ties_by_lane_then_longest_first() -> None:
    start = np.array([5, 1, 5, 3, 5, 1, 9])
    lane = np.array([2, 0, 1, 0, 1, 0, 0])
    end = np.array([6, 2, 9, 4, 7, 8, 9])
    expected = np.lexsort((-end, lane, start))
    assert start_order(start, lane, end).tolist() == expected.tolist() == [5, 1, 3, 2, 4, 0, 6]
    rng = np.random.default_rng(3)
    start, lane = rng.integers(0, 50, 2_000), rng.integers(0, 4, 2_000)
    end = start + rng.integers(0, 9, 2_000)
    assert start_order(start, lane, end).tolist() == np.lexsort((-end, lane, start)).tolist()


def test_used_categories_drops_names_no_row_uses() -> None:
    cats = pd.Index(["a", "b", "c", "d"])
    got = used_categories(np.array([3, 1, -1, 3], dtype=np.int16), cats)
    assert list(got.categories) == ["b", "d"] and got.astype(object).tolist()[:2] == ["d", "b"]
    assert got.codes.tolist() == [1, 0, -1, 1]
    every = used_categories(np.array([0, 1, 2, 3]), cats)
    assert list(every.categories) == list(cats) and every.tolist() == ["a", "b", "c", "d"]
    assert len(used_categories(np.array([], dtype=np.int64), cats).categories) == 0


def test_group_numbers_of_narrow_and_wide_unsigned_keys() -> None:
    """Keys coded by their value range (narrow) and hashed (wide, or past int64) number groups alike."""
    top = np.uint64(2**64 - 1)
    wide = np.array([top, 5, top, 7, 5], dtype=np.uint64)
    narrow = np.array([3, 1, 3, 2, 1], dtype=np.uint64)
    assert group_numbers(wide).tolist() == [2, 0, 2, 1, 0]
    assert group_numbers(narrow).tolist() == [2, 0, 2, 1, 0]
    assert group_numbers(narrow, wide).tolist() == [2, 0, 2, 1, 0]
    two = np.array([1, 1, 0, 0, 1], dtype=np.uint64)
    assert group_numbers(np.array([top, top - np.uint64(1), top], dtype=np.uint64)).tolist() == [1, 0, 1]
    assert group_numbers(two, wide).tolist() == [3, 2, 1, 0, 2]


def test_lookup_first_on_ids_that_are_their_positions() -> None:
    """Interval ids 0..n-1 answer each query by itself; ids that only look so take the general path."""
    assert lookup_first(np.arange(5), np.array([3, -1, 5, 0, 4])).tolist() == [3, -1, -1, 0, 4]
    assert lookup_first(np.array([0, 1, 1, 3]), np.array([1, 2, 3])).tolist() == [1, -1, 3]
    assert lookup_first(np.array([0, 2, 1, 3]), np.array([1, 2])).tolist() == [2, 1]


@pytest.mark.parametrize("rows", [0, 1, 2_000])
def test_group_numbers_match_pandas_ngroup(rows: int) -> None:
    rng = np.random.default_rng(rows)
    gpu = rng.random(rows) < 0.5
    pid = rng.integers(-3, 5, rows)
    tid = rng.integers(0, 7, rows) * (1 << 40) - (1 << 42)  # wide and negative values: kept apart
    expected = pd.DataFrame({"g": gpu, "a": pid, "b": tid}).groupby(["g", "a", "b"]).ngroup().to_numpy()
    got = group_numbers(gpu, pid, tid)
    assert got.dtype == np.int32
    assert got.tolist() == expected.tolist()
    assert len(set(got.tolist())) == len(set(zip(gpu.tolist(), pid.tolist(), tid.tolist(), strict=True)))


@pytest.mark.parametrize("span", [1, 5, 15, 40])
def test_lookup_first_on_sparse_ids_far_from_zero_matches_a_plain_search(span: int) -> None:
    """CUPTI's correlation ids skip the calls it does not record and need not start near 0: a direct table over
    their range (up to 16 values per id) and the hash lookup give what a plain search does."""
    rng = np.random.default_rng(span)
    ids = 10**9 + rng.choice(span * 3_000, 3_000, replace=False)
    ids[rng.integers(0, 3_000, 50)] = -1
    ids[rng.integers(0, 3_000, 50)] = ids[rng.integers(0, 3_000, 50)]  # repeats: the first one counts
    queries = np.concatenate([ids[::3], 10**9 + rng.integers(-5, span * 3_000 + 5, 500), [-1, 0, 2**40]])
    first: dict[int, int] = {}
    for pos, value in enumerate(ids.tolist()):
        if value >= 0:
            first.setdefault(value, pos)
    expected = [first.get(q, -1) if q >= 0 else -1 for q in queries.tolist()]
    assert lookup_first(ids, queries).tolist() == expected
