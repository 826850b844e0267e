"""Our own CUPTI client without a GPU: CUPTI activity records laid out byte for byte in a buffer, read back
by the client's buffer reader, tabulated and imported; the result must match what the Kineto path gives
for the same events (tests/recording/test_cupti_logic.py)."""

from __future__ import annotations

import ctypes
import struct

import numpy as np
import pytest

from collector.importers.kineto import trace_from_kineto
from collector.model import RunMeta
from collector.recording import cupti_client as cc
from collector.recording.client_capture import _devices, api_threads, event_table, losses, may_detach
from collector.recording.enrich import HostFacts, enrich
from collector.traceformat.events import EventTable

SIZES = {
    cc.RUNTIME: 40,
    cc.DRIVER: 40,
    cc.CONCURRENT_KERNEL: 216,
    cc.MEMCPY: 96,
    cc.MEMSET: 88,
    cc.OVERHEAD: 56,
    22: 24,
}
CUPTI_TID = 0xB238_1240  # CUPTI's thread id: the low 32 bits of pthread_self
NATIVE_TID = 4242
KERNEL = "void at::native::vectorized_elementwise_kernel<4, MulFunctor<float>>"
_NAME = ctypes.create_string_buffer(KERNEL.encode())  # a C string, as CUPTI keeps kernel names


def _api(kind: int, cbid: int, start: int, end: int, corr: int) -> bytes:
    return struct.pack("<IIQQIIII", kind, cbid, start, end, 1, CUPTI_TID, corr, 0)


def _kernel(start: int, end: int, corr: int, stream: int) -> bytes:
    rec = bytearray(216)
    struct.pack_into("<I", rec, 0, cc.CONCURRENT_KERNEL)
    struct.pack_into("<QQ", rec, 16, start, end)
    struct.pack_into("<III", rec, 40, 0, 1, stream)
    struct.pack_into("<I", rec, 92, corr)
    struct.pack_into("<Q", rec, 104, ctypes.addressof(_NAME))
    return bytes(rec)


def _copy(kind: int, start: int, end: int, corr: int, stream: int, nbytes: int, kinds: tuple[int, int, int]) -> bytes:
    rec = bytearray(SIZES[kind])
    struct.pack_into("<I", rec, 0, kind)
    if kind == cc.MEMCPY:
        struct.pack_into("<BBB", rec, 4, *kinds)
    else:
        struct.pack_into("<H", rec, 50, kinds[0])
    struct.pack_into("<QQQ", rec, 8, nbytes, start, end)
    struct.pack_into("<IIII", rec, 32, 0, 1, stream, corr)
    return bytes(rec)


def _lazy(start: int, end: int) -> bytes:
    rec = bytearray(56)
    struct.pack_into("<IIIII", rec, 0, cc.OVERHEAD, cc.LAZY_FUNCTION_LOADING, 2, 1, CUPTI_TID)
    struct.pack_into("<QQI", rec, 24, start, end, 77)
    return bytes(rec)


LAUNCH, MEMCPY_ASYNC, STREAM_SYNC = 211, 41, 131
CLOCK_SHIFT = 1_000_000  # CUPTI's clock runs this far ahead of the trace's in these tests


def _buffer() -> np.ndarray:
    """The events of test_cupti_logic's ``_events()`` (minus ops and annotations) as CUPTI records."""
    t = CLOCK_SHIFT
    records = [
        _api(cc.RUNTIME, LAUNCH, t + 100, t + 110, 1),
        _lazy(t + 101, t + 109),
        _kernel(t + 120, t + 150, 1, 7),
        bytes(struct.pack("<I", 22) + bytes(20)),  # a kind the client does not read: skipped
        _api(cc.RUNTIME, MEMCPY_ASYNC, t + 200, t + 400, 2),
        _copy(cc.MEMCPY, t + 210, t + 390, 2, 7, 4000, (2, 3, 1)),  # DtoH, Device -> Pageable
        _api(cc.RUNTIME, STREAM_SYNC, t + 400, t + 900, 3),
        _api(cc.RUNTIME, LAUNCH, t + 1000, t + 1010, 4),
        _kernel(t + 1020, t + 1030, 4, 7),
        _api(cc.DRIVER, 5, t + 1100, t + 1105, 99),  # a driver call that neither launched nor waits: dropped
        _api(cc.RUNTIME, 51, t + 1200, t + 1201, 6),
        _copy(cc.MEMSET, t + 1202, t + 1203, 6, 7, 64, (3, 0, 0)),
    ]
    return np.frombuffer(b"".join(records), dtype=np.uint8).copy()


def _records() -> cc.Records:
    records = cc.Records(columns=cc.read_buffer(_buffer(), dict(SIZES))[0], record_sizes=SIZES)
    cc.name_kernels(records)
    records.names[cc.RUNTIME] = {
        LAUNCH: "cudaLaunchKernel",
        MEMCPY_ASYNC: "cudaMemcpyAsync",
        STREAM_SYNC: "cudaStreamSynchronize",
        51: "cudaMemsetAsync",
    }
    records.names[cc.DRIVER] = {5: "cuModuleGetFunction"}
    return records


OPS = [(CUPTI_TID, "aten::mul_", 95, 118)]


def _table() -> EventTable:
    return event_table(_records(), OPS, {CUPTI_TID: NATIVE_TID}, lambda ns: ns - CLOCK_SHIFT, lambda ns: ns)


def test_the_buffer_reader_finds_every_record_and_field() -> None:
    cols, unread = cc.read_buffer(_buffer(), dict(SIZES))
    assert unread == 0
    assert {k: len(v["start"]) for k, v in cols.items()} == {
        cc.CONCURRENT_KERNEL: 2,
        cc.MEMCPY: 1,
        cc.MEMSET: 1,
        cc.RUNTIME: 5,
        cc.DRIVER: 1,
        cc.OVERHEAD: 1,
    }
    copy = cols[cc.MEMCPY]
    assert (copy["copy_kind"][0], copy["src_kind"][0], copy["dst_kind"][0], copy["bytes"][0]) == (2, 3, 1, 4000)
    assert cols[cc.MEMSET]["memory_kind"].tolist() == [3]
    assert cols[cc.CONCURRENT_KERNEL]["stream"].tolist() == [7, 7]
    assert cols[cc.RUNTIME]["thread"].tolist() == [CUPTI_TID] * 5
    assert cols[cc.OVERHEAD]["overhead_kind"].tolist() == [cc.LAZY_FUNCTION_LOADING]


def test_a_kind_of_unknown_size_is_learned_from_cupti_or_reading_stops_there() -> None:
    buf = _buffer()
    sizes = {k: v for k, v in SIZES.items() if k != 22}
    asked: list[int] = []

    def size_at(off: int) -> int:
        asked.append(off)
        return 24

    cols, unread = cc.read_buffer(buf, dict(sizes), size_at)
    assert len(cols[cc.CONCURRENT_KERNEL]["start"]) == 2 and unread == 0 and len(asked) == 1
    cols, unread = cc.read_buffer(buf, dict(sizes))  # no way to learn it: only the records before it
    assert len(cols[cc.CONCURRENT_KERNEL]["start"]) == 1 and unread == len(buf) - asked[0]
    cols, unread = cc.read_buffer(buf, dict(sizes), lambda off: 12)  # a size that cannot be right
    assert len(cols[cc.CONCURRENT_KERNEL]["start"]) == 1 and unread == len(buf) - asked[0]


def test_the_table_names_records_as_kineto_does_on_the_trace_clock() -> None:
    ev = _table().events
    rows = {(str(c), str(n)) for c, n in zip(ev["cat"], ev["name"], strict=True)}
    assert ("kernel", KERNEL) in rows
    assert ("gpu_memcpy", "Memcpy DtoH (Device -> Pageable)") in rows
    assert ("gpu_memset", "Memset (Device)") in rows
    assert ("cuda_driver", "Lazy Function Loading") in rows
    assert ("cpu_op", "aten::mul_") in rows
    assert not any(n == "cuModuleGetFunction" for _, n in rows)
    host = ev[ev["cat"].astype(str).isin(["cuda_runtime", "cpu_op"])]
    assert set(host["tid"]) == {NATIVE_TID}
    assert int(ev["ts_ns"].min()) == 95 and list(ev["ts_ns"]) == sorted(ev["ts_ns"])


def test_an_imported_client_capture_gives_the_kineto_paths_results() -> None:
    facts = HostFacts(
        spans=[(NATIVE_TID, "item", 190, 950, "train.py:12", 4000)],
        markers=[("step", "step 0", 0, 500, 0), ("step", "step 1", 500, 2000, 1)],
        threads={NATIVE_TID: "main thread"},
    )
    trace = enrich(trace_from_kineto(_table()), facts, RunMeta.new(clock="unix_ns", notes={"timing": "cupti"}))
    iv = trace.intervals
    kernels = iv[iv["kind"] == "kernel"]
    assert list(kernels["name"].astype(str)) == ["aten::mul_", "aten::mul_"]  # exact, then by its kernel
    assert list(kernels["step"]) == [0, 1]
    copy = iv[iv["kind"] == "memcpy_d2h"].iloc[0]
    assert (copy["bytes"], str(copy["memory_kind"])) == (4000, "pageable")
    waits = iv[iv["kind"] == "sync_wait"].set_index("name")
    assert waits.loc["cudaStreamSynchronize", "cause"] == "item"
    assert waits.loc["cudaStreamSynchronize", "source"] == "train.py:12"
    assert len(iv[iv["name"] == "first-call set-up: Lazy Function Loading"]) == 1


def test_the_op_namer_notes_ops_that_can_launch_until_stopped() -> None:
    import threading

    import torch
    from torch.utils._python_dispatch import _get_current_dispatch_mode

    from collector.recording.opnames import OpNamer

    x = torch.ones(8)
    namer = OpNamer()
    namer.start()
    y = x.mul(2).view(2, 4)
    z = y.sum()
    namer.stop()
    x.add(1)  # after stop: not noted
    names = [r[1] for r in namer.rows]
    assert names == ["aten::mul", "aten::sum"]  # the view is not an op that launches
    assert _get_current_dispatch_mode() is None
    me = threading.get_ident() & 0xFFFFFFFF
    assert {r[0] for r in namer.rows} == {me} and namer.threads[me] == threading.get_native_id()
    assert all(r[2] <= r[3] for r in namer.rows) and float(z) == 16.0


def test_a_cuda_call_from_a_thread_python_never_saw_asks_for_its_name() -> None:
    """The capture then finds the autograd worker (collector.recording.autogradprobe) before naming lanes."""
    assert api_threads(_records()) == {CUPTI_TID}
    assert api_threads(cc.Records()) == set()
    # the probe's backward runs on the devices the records ran on only: no other device gets a context
    on_1 = cc.Records(columns={cc.CONCURRENT_KERNEL: {"device": np.array([1, 1], np.uint32)}})
    assert _devices(_records()) == [0] and _devices(on_1) == [1] and _devices(cc.Records()) == []


def test_what_a_capture_lost_is_said_in_words() -> None:
    assert losses(cc.Records()) == ""
    said = losses(cc.Records(dropped=1200, unread_bytes=4096))
    assert said == (
        "CUPTI dropped 1,200 records; 4,096 bytes of CUPTI records could not be read: "
        "GPU work is missing from this trace"
    )


def test_libcupti_names_its_calls_and_a_start_without_a_gpu_is_refused_cleanly() -> None:
    """Where libcupti is installed (not on the CI machine): the client reads call names from it, and on a
    machine without a GPU its start raises CuptiUnavailable (the recorder then tries the next reader)."""
    import torch

    try:
        client = cc.CuptiClient(cc.find_libcupti())
    except cc.CuptiUnavailable:
        pytest.skip("no libcupti on this machine")
    assert client.callback_name(2, 211) == "cudaLaunchKernel"  # runtime domain, cudaLaunchKernel_v7000
    assert client.timestamp() > 0
    if torch.cuda.is_available():
        pytest.skip("a GPU is present: starting would record")
    with pytest.raises(cc.CuptiUnavailable):
        client.start()


def test_a_size_met_only_at_a_buffers_end_is_not_kept_for_later_buffers() -> None:
    tail = struct.pack("<I", 22) + bytes(20)
    buf = np.frombuffer(_api(cc.RUNTIME, LAUNCH, 1, 2, 1) + tail, dtype=np.uint8).copy()
    sizes = {cc.RUNTIME: 40}
    cols, unread = cc.read_buffer(buf, sizes, lambda off: len(buf) - off)
    assert unread == 0 and len(cols[cc.RUNTIME]["start"]) == 1
    assert 22 not in sizes


@pytest.mark.parametrize("reader", ["client", "kineto"])
def test_a_reader_refuses_cupti_held_by_torch_profiler_and_leaves_that_profiler_running(reader: str) -> None:
    torch = pytest.importorskip("torch")
    from collector.recording.client_capture import ClientCapture
    from collector.recording.kineto_capture import CaptureUnavailable, KinetoCapture

    capture = ClientCapture() if reader == "client" else KinetoCapture()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        with pytest.raises(CaptureUnavailable, match="torch.profiler is running"):
            capture.start(naming=False)
        torch.ones(4).mul_(2.0)
    assert any(e.name == "aten::mul_" for e in prof.events())  # the user's profiler ran to its end


@pytest.mark.parametrize("top", [5, 1 << 23])  # counted, and past the counting range (sorted)
def test_small_codes_and_contains_agree_with_numpy(top: int) -> None:
    from collector.recording.client_capture import contains
    from collector.recording.cupti_client import small_codes

    rng = np.random.default_rng(7)
    values = rng.integers(0, top, 1_000)
    distinct, codes = small_codes(values)
    expect, inverse = np.unique(values, return_inverse=True)
    assert distinct.tolist() == expect.tolist() and codes.tolist() == inverse.reshape(-1).tolist()
    members = rng.integers(0, top, 50)
    assert contains(members, values).tolist() == np.isin(values, members).tolist()
    assert not contains(np.array([], dtype=np.int64), values).any()
    assert small_codes(np.array([], dtype=np.int64))[1].tolist() == []


def test_a_record_of_unknown_kind_that_holds_the_bytes_of_a_known_one_is_not_misread() -> None:
    """The reader steps over records by their kind's size; inside a record of a kind it has no size for,
    it must not pick up bytes that happen to look like a record of a known kind."""
    fake = _api(cc.RUNTIME, LAUNCH, 5, 6, 999)
    unknown = struct.pack("<I", 23) + bytes(4) + fake + bytes(8)  # 56 bytes, a fake runtime record at 8
    buf = np.frombuffer(_api(cc.RUNTIME, LAUNCH, 1, 2, 1) + unknown + _api(cc.RUNTIME, LAUNCH, 3, 4, 2), np.uint8)
    cols, unread = cc.read_buffer(buf.copy(), {cc.RUNTIME: 40}, lambda off: 56)
    assert cols[cc.RUNTIME]["correlation"].tolist() == [1, 2] and unread == 0
    cols, unread = cc.read_buffer(buf.copy(), {cc.RUNTIME: 40})
    assert cols[cc.RUNTIME]["correlation"].tolist() == [1] and unread == len(buf) - 40


def test_a_buffer_of_many_windows_is_read_whole_with_each_size_asked_once() -> None:
    """Records straddle the reader's window boundaries; every kind's size is asked of CUPTI once, when first
    met, and every record is read."""
    one = _buffer()
    copies = 3 * cc.WALK_WINDOW_BYTES // len(one) + 7
    buf = np.tile(one, copies)
    asked: list[int] = []

    def size_at(off: int) -> int:
        asked.append(int(buf[off]))
        return SIZES[int(buf[off])]

    sizes: dict[int, int] = {}
    cols, unread = cc.read_buffer(buf, sizes, size_at)
    assert unread == 0 and sorted(asked) == sorted(set(asked)) and sizes == SIZES
    once, _ = cc.read_buffer(one, dict(SIZES))
    assert {k: len(v["start"]) for k, v in cols.items()} == {k: copies * len(v["start"]) for k, v in once.items()}
    assert cols[cc.RUNTIME]["correlation"].tolist() == once[cc.RUNTIME]["correlation"].tolist() * copies


def test_a_kind_numbered_past_255_is_stepped_over_by_its_size() -> None:
    """The fast walk reads kinds below 256 (one byte); a larger kind number is stepped over by its size."""
    odd = struct.pack("<I", 300) + bytes(20)
    buf = np.frombuffer(_api(cc.RUNTIME, LAUNCH, 1, 2, 1) + odd + _api(cc.RUNTIME, LAUNCH, 3, 4, 2), np.uint8)
    for sizes, size_at in (({cc.RUNTIME: 40, 300: 24}, None), ({cc.RUNTIME: 40}, lambda off: 24)):
        cols, unread = cc.read_buffer(buf.copy(), dict(sizes), size_at)
        assert cols[cc.RUNTIME]["correlation"].tolist() == [1, 2] and unread == 0


def test_a_kind_first_met_deep_in_a_buffer_after_the_windows_grew_is_read_and_asked_once() -> None:
    """The walk's window doubles while it goes through; a record of a kind it does not know, met 200 KB in,
    stops it there, its size is asked of CUPTI once, and the walk goes on from it with every record read."""
    runtime = b"".join(_api(cc.RUNTIME, LAUNCH, i, i + 1, i) for i in range(5_000))  # 200 KB
    kernels = b"".join(_kernel(i, i + 1, 10_000 + i, 7) for i in range(300))  # a kind the walk does not know yet
    tail = b"".join(_api(cc.RUNTIME, LAUNCH, i, i + 1, 20_000 + i) for i in range(2_000))
    buf = np.frombuffer(runtime + kernels + tail, np.uint8).copy()
    asked: list[int] = []

    def size_at(off: int) -> int:
        asked.append(int(buf[off]))
        return SIZES[int(buf[off])]

    cols, unread = cc.read_buffer(buf, {cc.RUNTIME: 40}, size_at)
    assert unread == 0 and asked == [cc.CONCURRENT_KERNEL]
    assert cols[cc.RUNTIME]["correlation"].tolist() == [*range(5_000), *range(20_000, 22_000)]
    assert cols[cc.CONCURRENT_KERNEL]["correlation"].tolist() == list(range(10_000, 10_300))


def test_cupti_is_detached_at_stop_only_where_no_other_thread_can_be_in_a_cuda_call() -> None:
    """Every CUDA call from the stopping thread, or from it and an autograd worker: detach. A call from any
    other thread (a DataLoader's pin-memory thread, a gloo worker): stay attached. The autograd workers are
    looked up only where another thread made calls."""

    def records(*threads: int) -> cc.Records:
        r = cc.Records()
        n = len(threads)
        r.columns[cc.RUNTIME] = {
            "cbid": np.full(n, 211, np.int64),
            "start": np.arange(n, dtype=np.int64),
            "end": np.arange(n, dtype=np.int64) + 1,
            "thread": np.array(threads, dtype=np.int64),
            "correlation": np.arange(n, dtype=np.int64),
        }
        return r

    asked: list[int] = []

    def autograd() -> set[int]:
        asked.append(1)
        return {9}

    assert may_detach(api_threads(records(7, 7)), 7, autograd) and not asked
    assert may_detach(set(), 7, autograd) and not asked  # nothing recorded at all
    assert may_detach(api_threads(records(7, 9, 7)), 7, autograd) and asked == [1]
    assert not may_detach(api_threads(records(7, 9, 5)), 7, autograd)
    assert not may_detach(api_threads(records(5)), 7, lambda: set())


def test_the_quiet_calls_hinted_ids_are_every_id_a_scan_finds() -> None:
    """Where libcupti is installed: the quiet calls' hinted callback ids are exactly those a scan of every id
    names (the start looks up 14 names instead of 2,046)."""
    try:
        client = cc.CuptiClient(cc.find_libcupti())
    except cc.CuptiUnavailable:
        pytest.skip("no libcupti on this machine")
    for domain, names in ((cc._DOMAIN_RUNTIME, cc.QUIET_RUNTIME_CALLS), (cc._DOMAIN_DRIVER, cc.QUIET_DRIVER_CALLS)):
        scanned = [c for c in range(1, 1024) if client.callback_name(domain, c) in names]
        assert list(cc._QUIET_CBID_HINTS[domain]) == scanned


class _Lib:
    def __init__(self) -> None:
        self.quiet: list[int] = []

    def cuptiActivityEnableRuntimeApi(self, cbid: ctypes.c_uint32, on: ctypes.c_uint8) -> int:  # noqa: N802
        self.quiet.append(cbid.value)
        return 0


@pytest.mark.parametrize("moved", [False, True])
def test_quiet_ids_come_from_the_hints_where_they_name_every_call_else_from_a_scan(
    moved: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A CUPTI whose numbering moved (a quiet call's name not at its hinted id) is scanned, so no quiet call
    is missed; where the hints hold, only they are looked up."""
    names = {c: f"call{c}" for c in cc._QUIET_CBID_HINTS[cc._DOMAIN_RUNTIME]}
    if moved:
        names[900] = names.pop(cc._QUIET_CBID_HINTS[cc._DOMAIN_RUNTIME][0])
    looked: list[int] = []

    def name(domain: int, cbid: int) -> str:
        looked.append(cbid)
        return names.get(cbid, "")

    client = cc.CuptiClient.__new__(cc.CuptiClient)
    lib = client._lib = _Lib()  # type: ignore[assignment]
    monkeypatch.setattr(client, "callback_name", name)
    monkeypatch.setattr(cc, "_QUIET_CBIDS", {})
    client._quiet(cc._DOMAIN_RUNTIME, "cuptiActivityEnableRuntimeApi", frozenset(names.values()))
    assert sorted(lib.quiet) == sorted(names)
    assert (len(looked) > 1000) == moved
