"""CUPTI activity records read straight from libcupti (ctypes): no Kineto, no per-op work in Python.

:class:`CuptiClient` enables CUPTI's activity API for kernels, memcpys, memsets, CUDA runtime and driver
calls and first-call set-up (lazy function loading), hands CUPTI buffers to fill, and at :meth:`stop`
reads the records out of the buffers at C speed (a regular expression steps from record to record, then
numpy gathers each field of every record of a kind at once). It is what torch.profiler does with
``ProfilerActivity.CUDA``, minus torch's per-op callbacks and its post-processing of every event into
Python objects.

Times are CUPTI's (ns); :meth:`timestamp` reads CUPTI's clock so callers can pair it with their own.
Host records carry CUPTI's thread id (the low 32 bits of ``pthread_self``, i.e. ``threading.get_ident()``).
Record layouts are CUPTI's (cupti_activity.h); the fields read sit at offsets that have not moved since
CUDA 11, and each kind's record size is asked of CUPTI (``cuptiActivityGetNextRecord`` from a record of
that kind) when the reader first meets the kind.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import glob
import os
import re
import sys
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np

MEMCPY, MEMSET, DRIVER, RUNTIME, CONCURRENT_KERNEL, OVERHEAD = 1, 2, 4, 5, 10, 17
KINDS = (CONCURRENT_KERNEL, MEMCPY, MEMSET, RUNTIME, DRIVER, OVERHEAD)
"""Activity kinds enabled, in CUPTI's numbering."""
LAZY_FUNCTION_LOADING = 5 << 16
"""The overhead kind of a kernel's module loaded at its first launch (first-call set-up)."""
_SUCCESS, _MAX_LIMIT_REACHED, _FLUSH_FORCED = 0, 12, 1
_DOMAIN_DRIVER, _DOMAIN_RUNTIME = 1, 2
BUFFER_BYTES = 16 << 20
GATHER_THREADS = 4
"""Threads gathering fields of buffers already walked, while the main thread walks the next."""
WALK_WINDOW_BYTES = 256 << 10
"""The most of a buffer one regular-expression walk covers (see :func:`_walk`)."""
FIRST_WALK_BYTES = 4 << 10
"""The first walk's window, and the window after each record of a kind the walk did not know; it doubles
after each walk that went through, up to :data:`WALK_WINDOW_BYTES` (what a walk past an unknown record
scans is wasted: a reader meeting every kind for the first time would waste whole large windows)."""

QUIET_RUNTIME_CALLS = frozenset(
    {
        "cudaGetDevice",
        "cudaSetDevice",
        "cudaGetLastError",
        "cudaPeekAtLastError",
        "cudaEventCreate",
        "cudaEventCreateWithFlags",
        "cudaEventDestroy",
        "cudaStreamIsCapturing",
        "cudaStreamGetCaptureInfo",
        "cudaStreamGetCaptureInfo_v2",
    }
)
"""Runtime calls not recorded: bookkeeping that every op makes and that neither launches nor waits."""
QUIET_DRIVER_CALLS = frozenset({"cuKernelGetAttribute", "cuDevicePrimaryCtxGetState", "cuCtxGetCurrent"})

# field offsets (bytes) inside each record: (offset, numpy dtype)
_KERNEL_FIELDS = {
    "start": (16, np.uint64),
    "end": (24, np.uint64),
    "device": (40, np.uint32),
    "stream": (48, np.uint32),
    "correlation": (92, np.uint32),
    "name": (104, np.uint64),
}
_COPY_FIELDS = {  # memcpy and memset share these
    "bytes": (8, np.uint64),
    "start": (16, np.uint64),
    "end": (24, np.uint64),
    "device": (32, np.uint32),
    "stream": (40, np.uint32),
    "correlation": (44, np.uint32),
}
_MEMCPY_BYTE_FIELDS = {"copy_kind": 4, "src_kind": 5, "dst_kind": 6}
_MEMSET_MEMORY_KIND = 50  # uint16
_API_FIELDS = {
    "cbid": (4, np.uint32),
    "start": (8, np.uint64),
    "end": (16, np.uint64),
    "thread": (28, np.uint32),
    "correlation": (32, np.uint32),
}
_OVERHEAD_FIELDS = {
    "overhead_kind": (4, np.uint32),
    "thread": (16, np.uint32),
    "start": (24, np.uint64),
    "end": (32, np.uint64),
    "correlation": (40, np.uint32),
}
_FIELDS = {
    CONCURRENT_KERNEL: _KERNEL_FIELDS,
    MEMCPY: _COPY_FIELDS,
    MEMSET: _COPY_FIELDS,
    RUNTIME: _API_FIELDS,
    DRIVER: _API_FIELDS,
    OVERHEAD: _OVERHEAD_FIELDS,
}
_MIN_SIZE = {CONCURRENT_KERNEL: 112, MEMCPY: 48, MEMSET: 52, RUNTIME: 40, DRIVER: 40, OVERHEAD: 44}
"""Smallest record size per kind that holds the fields read (a check on the learned sizes)."""

COPY_KINDS = ("Unknown", "HtoD", "DtoH", "HtoA", "AtoH", "AtoA", "AtoD", "DtoA", "DtoD", "HtoH", "PtoP")
MEMORY_KINDS = ("Unknown", "Pageable", "Pinned", "Device", "Array", "Managed", "Device Static", "Managed Static")
"""Kineto's spelling of CUPTI's copy and memory kinds (names like ``Memcpy HtoD (Pageable -> Device)``)."""


class CuptiUnavailable(RuntimeError):
    """libcupti could not be found or started (another profiler such as Nsight Systems holds it)."""


@dataclass
class Records:
    """The records of one capture, one dict of numpy columns per kind (keys as in the field tables above,
    plus ``name`` as text for kernels and API calls and, for memcpys, the three kind bytes)."""

    columns: dict[int, dict[str, np.ndarray]] = field(default_factory=dict)
    names: dict[int, dict[int, str]] = field(default_factory=dict)
    """Per kind, code -> text for the ``name`` column (kernel names, API call names)."""
    dropped: int = 0
    """Records CUPTI dropped (no buffer to put them in)."""
    unread_bytes: int = 0
    """Buffer bytes left unread (a record of a kind whose size could not be learned)."""
    record_sizes: dict[int, int] = field(default_factory=dict)
    """Bytes per record of each kind met, as CUPTI gave them."""


_REQUESTED = ctypes.CFUNCTYPE(
    None, ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_size_t), ctypes.POINTER(ctypes.c_size_t)
)
_COMPLETED = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_uint32, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_size_t)


def find_libcupti() -> str:
    """The path of libcupti: the one this process already loaded (torch's Kineto links it), else the
    usual install places. Raises CuptiUnavailable when there is none."""
    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                path = line.rstrip().split(" ")[-1]
                if "libcupti.so" in os.path.basename(path):
                    return path
    except OSError:
        pass
    roots = [os.path.dirname(p) for p in sys.path if p.endswith("-packages")]
    patterns = [os.path.join(r, "nvidia", "*", "lib", "libcupti.so*") for r in roots]
    patterns += [os.path.join(r, "nvidia", "*", "*", "lib", "libcupti.so*") for r in roots]
    home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH") or "/usr/local/cuda"
    patterns += [os.path.join(home, sub, "libcupti.so*") for sub in ("lib64", "lib", "extras/CUPTI/lib64")]
    for pattern in patterns:
        hits = sorted(glob.glob(pattern))
        if hits:
            return hits[0]
    found = ctypes.util.find_library("cupti")
    if found:
        return found
    raise CuptiUnavailable("libcupti not found (set CUDA_HOME, or install torch with CUDA)")


class CuptiClient:
    """One capture: :meth:`start`, run the workload, :meth:`stop` -> :class:`Records`."""

    def __init__(self, lib_path: str | None = None, buffer_bytes: int = BUFFER_BYTES) -> None:
        try:
            self._lib = ctypes.CDLL(lib_path or find_libcupti())
        except OSError as exc:
            raise CuptiUnavailable(f"libcupti could not be loaded: {exc}") from None
        self._buffer_bytes = int(buffer_bytes)
        self._buffers: dict[int, np.ndarray] = {}
        self._done: list[tuple[int, int, int, int]] = []  # (context, stream, address, valid bytes)
        self._enabled: list[int] = []
        self._on_requested = _REQUESTED(self._requested)
        self._on_completed = _COMPLETED(self._completed)
        lib = self._lib
        lib.cuptiGetTimestamp.argtypes = [ctypes.POINTER(ctypes.c_uint64)]
        lib.cuptiGetResultString.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)]
        lib.cuptiGetCallbackName.argtypes = [ctypes.c_int, ctypes.c_uint32, ctypes.POINTER(ctypes.c_char_p)]
        lib.cuptiActivityRegisterCallbacks.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
        lib.cuptiActivityFlushAll.argtypes = [ctypes.c_uint32]
        lib.cuptiActivityGetNextRecord.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_void_p)]
        lib.cuptiActivityGetNumDroppedRecords.argtypes = [
            ctypes.c_void_p,
            ctypes.c_uint32,
            ctypes.POINTER(ctypes.c_size_t),
        ]
        self.flush_s = 0.0
        self.detached = False
        """After :meth:`stop`: whether CUPTI was detached from the process."""
        self._stamp = ctypes.c_uint64()
        self._stamp_ref = ctypes.byref(self._stamp)

    # -------------------------------------------------------------- CUPTI's buffer callbacks
    def _requested(self, buffer: Any, size: Any, max_records: Any) -> None:
        arr = np.empty(self._buffer_bytes + 8, dtype=np.uint8)
        addr = arr.ctypes.data
        pad = (-addr) % 8
        self._buffers[addr + pad] = arr[pad : pad + self._buffer_bytes]
        buffer[0] = addr + pad
        size[0] = self._buffer_bytes
        max_records[0] = 0

    def _completed(self, context: Any, stream: int, buffer: Any, size: int, valid: int) -> None:
        self._done.append((int(context or 0), int(stream), int(buffer or 0), int(valid)))

    # -------------------------------------------------------------- control
    def _check(self, rc: int, what: str) -> None:
        if rc != _SUCCESS:
            text = ctypes.c_char_p()
            self._lib.cuptiGetResultString(rc, ctypes.byref(text))
            raise CuptiUnavailable(f"{what}: {(text.value or b'').decode() or f'CUPTI error {rc}'}")

    def timestamp(self) -> int:
        """CUPTI's clock now, ns."""
        self._lib.cuptiGetTimestamp(self._stamp_ref)
        return int(self._stamp.value)

    def callback_name(self, domain: int, cbid: int) -> str:
        """The API call's name without its version suffix (``cudaLaunchKernel``), or "" if unknown."""
        out = ctypes.c_char_p()
        if self._lib.cuptiGetCallbackName(domain, cbid, ctypes.byref(out)) != _SUCCESS or not out.value:
            return ""
        return _VERSION_SUFFIX.sub("", out.value.decode(errors="replace"))

    def start(self) -> None:
        """Register the buffer callbacks and enable :data:`KINDS` (raises CuptiUnavailable on refusal)."""
        global _registered
        _registered = (self._on_requested, self._on_completed)  # CUPTI holds them past this client's life
        self._check(
            self._lib.cuptiActivityRegisterCallbacks(
                ctypes.cast(self._on_requested, ctypes.c_void_p), ctypes.cast(self._on_completed, ctypes.c_void_p)
            ),
            "cuptiActivityRegisterCallbacks",
        )
        try:
            for kind in KINDS:
                self._check(self._lib.cuptiActivityEnable(kind), f"cuptiActivityEnable({kind})")
                self._enabled.append(kind)
        except CuptiUnavailable:
            self._disable()
            raise
        self._quiet(_DOMAIN_RUNTIME, "cuptiActivityEnableRuntimeApi", QUIET_RUNTIME_CALLS)
        self._quiet(_DOMAIN_DRIVER, "cuptiActivityEnableDriverApi", QUIET_DRIVER_CALLS)

    def _quiet(self, domain: int, function: str, names: frozenset[str]) -> None:
        enable = getattr(self._lib, function, None)
        if enable is None:  # CUPTI before 12.x: every call is recorded
            return
        key = (domain, names)
        cbids = _QUIET_CBIDS.get(key)
        if cbids is None:  # the ids CUPTI has numbered them by since 12.x, checked by name; else all 1,023 ids

            def quiet_among(ids: Iterable[int]) -> dict[int, str]:
                named = {c: self.callback_name(domain, c) for c in ids}
                return {c: name for c, name in named.items() if name in names}

            found = quiet_among(_QUIET_CBID_HINTS.get(domain, ()))
            if set(found.values()) != names:
                found = quiet_among(range(1, 1024))
            cbids = _QUIET_CBIDS[key] = list(found)
        for cbid in cbids:
            enable(ctypes.c_uint32(cbid), ctypes.c_uint8(0))

    def stop_api_records(self) -> None:
        """Stop recording runtime and driver calls; GPU work already launched is still recorded. Calls made
        after this (a recorder's own, while it stops) leave no records."""
        for kind in (RUNTIME, DRIVER):
            if kind in self._enabled:
                self._lib.cuptiActivityDisable(kind)
                self._enabled.remove(kind)

    def _disable(self) -> None:
        while self._enabled:
            self._lib.cuptiActivityDisable(self._enabled.pop())

    def stop(self) -> Records:
        """Flush every buffer, disable the kinds and read the records (call after the GPU is idle).
        :attr:`flush_s` then holds the seconds CUPTI took to hand its last buffers over."""
        t0 = time.perf_counter()
        self._lib.cuptiActivityFlushAll(_FLUSH_FORCED)
        self._disable()
        self._lib.cuptiActivityFlushAll(_FLUSH_FORCED)
        self.flush_s = time.perf_counter() - t0
        done, self._done = self._done, []
        buffers, self._buffers = self._buffers, {}
        records = Records()
        parts: dict[int, list[dict[str, np.ndarray]]] = {k: [] for k in KINDS}
        with ThreadPoolExecutor(GATHER_THREADS) as pool:  # one buffer's fields gathered while the next is walked
            gathers = []
            for context, stream, addr, valid in done:
                dropped = ctypes.c_size_t()
                if self._lib.cuptiActivityGetNumDroppedRecords(context, stream, ctypes.byref(dropped)) == _SUCCESS:
                    records.dropped += int(dropped.value)
                buf = buffers.get(addr)
                if buf is None or valid <= 0:
                    continue
                size_at = functools.partial(self._size_at, addr, valid)
                offsets, unread = record_offsets(buf[:valid], records.record_sizes, size_at)
                records.unread_bytes += unread
                gathers.append(pool.submit(record_fields, buf[:valid], offsets))
            for gathered in gathers:
                for kind, cols in gathered.result().items():
                    parts[kind].append(cols)
        for kind, chunks in parts.items():
            if chunks:
                records.columns[kind] = {k: np.concatenate([c[k] for c in chunks]) for k in chunks[0]}
        self._name_columns(records)  # kernel names are CUPTI's strings: read before it may detach
        return records

    def detach(self) -> bool:
        """After :meth:`stop`: detach CUPTI from the process (``cuptiFinalize``; the GPU idle and every buffer
        read, as CUPTI asks of a detach outside a CUDA call, and no other thread in one: the caller's to know).
        Attached, it leaves every later kernel launch slower with nothing enabled (a launch-bound loop 1.3x
        slower on an H100: benchmarks/after_stop.py). Any later CUPTI call attaches it again. False where the library
        has no such call or refuses; :attr:`detached` keeps the answer."""
        finalize = getattr(self._lib, "cuptiFinalize", None)
        self.detached = finalize is not None and finalize() == _SUCCESS
        return self.detached

    def _size_at(self, addr: int, valid: int, off: int) -> int:
        """The size of the record at ``off`` in a buffer: where CUPTI says the next one starts (the buffer's
        end for its last record; 0 when CUPTI will not say)."""
        record = ctypes.c_void_p(addr + off)
        rc = self._lib.cuptiActivityGetNextRecord(addr, valid, ctypes.byref(record))
        if rc == _SUCCESS and record.value:
            return int(record.value) - (addr + off)
        return valid - off if rc == _MAX_LIMIT_REACHED else 0  # 0: unknown, reading stops there

    def _name_columns(self, records: Records) -> None:
        """Kernel name pointers -> codes into a table of names; API cbids -> call names."""
        name_kernels(records)
        for kind, domain in ((RUNTIME, _DOMAIN_RUNTIME), (DRIVER, _DOMAIN_DRIVER)):
            api = records.columns.get(kind)
            if api:
                cbids = small_codes(api["cbid"])[0]
                records.names[kind] = {int(c): self.callback_name(domain, int(c)) or f"cbid {c}" for c in cbids}


def name_kernels(records: Records) -> None:
    """Replace the kernels' name pointers (C strings CUPTI keeps for the process's life) by codes into
    ``records.names[CONCURRENT_KERNEL]``, the demangled names."""
    import pandas as pd

    kernels = records.columns.get(CONCURRENT_KERNEL)
    if kernels:
        codes, pointers = pd.factorize(kernels["name"])  # hashing: np.unique sorted them, 10x slower
        kernels["name"] = codes.astype(np.int64)
        records.names[CONCURRENT_KERNEL] = {
            i: _demangle(ctypes.string_at(int(p)).decode(errors="replace") if p else "")
            for i, p in enumerate(pointers.tolist())
        }


def small_codes(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(distinct values ascending, each value's index into them) for non-negative ints below a few
    million (CUPTI callback ids), by counting instead of sorting; as ``np.unique(..., return_inverse=True)``."""
    if not len(values):
        return np.array([], dtype=np.int64), np.array([], dtype=np.int64)
    if values.min() < 0 or values.max() >= 1 << 22:
        distinct, codes = np.unique(values, return_inverse=True)
        return distinct, codes.reshape(-1)
    distinct = np.flatnonzero(np.bincount(values))
    lookup = np.zeros(int(distinct[-1]) + 1, dtype=np.int64)
    lookup[distinct] = np.arange(len(distinct))
    return distinct, lookup[values]


_VERSION_SUFFIX = re.compile(r"_v\d+$")
_QUIET_CBID_HINTS = {
    _DOMAIN_RUNTIME: (10, 11, 16, 17, 133, 134, 136, 317, 324, 409, 461),
    _DOMAIN_DRIVER: (304, 392, 686),
}
"""Where CUPTI 12-13 numbers the quiet calls (its callback ids only grow): 14 name lookups where a scan of every
id takes 2,046 (3 ms of a recording's start). Used when they name every quiet call; else the scan runs."""
_QUIET_CBIDS: dict[tuple[int, frozenset[str]], list[int]] = {}
"""Callback ids of the quiet calls per (domain, names), found once per process (libcupti's numbering)."""
_registered: tuple[Any, Any] | None = None
"""The callbacks CUPTI was last given, kept alive for as long as CUPTI may call them."""


def read_buffer(
    buf: np.ndarray, sizes: dict[int, int], size_at: Callable[[int], int] | None = None
) -> tuple[dict[int, dict[str, np.ndarray]], int]:
    """The fields of every record of a wanted kind in one filled buffer (uint8 array), and the bytes left
    unread. A record of a kind not in ``sizes`` gets its size from ``size_at(offset)`` (added to
    ``sizes``); without it, or with a size that cannot be right, reading stops there."""
    offsets, unread = record_offsets(buf, sizes, size_at)
    return record_fields(buf, offsets), unread


def record_offsets(
    buf: np.ndarray, sizes: dict[int, int], size_at: Callable[[int], int] | None = None
) -> tuple[dict[int, np.ndarray], int]:
    """Where each record of a wanted kind starts in one filled buffer (byte offsets per kind), and the bytes
    left unread: the walk half of :func:`read_buffer` (it holds the GIL; the gathers do not)."""
    n = len(buf)
    words = buf[: n - n % 4].view(np.uint32)
    data = buf.data
    runs: list[tuple[np.ndarray, np.ndarray]] = []
    off, window = 0, FIRST_WALK_BYTES
    while off < n:
        at, kinds, walked = _walk(data, words, sizes, off, min(n, off + window))
        runs.append((at, kinds))
        if walked > off:
            off, window = walked, min(2 * window, WALK_WINDOW_BYTES)
            continue
        window = FIRST_WALK_BYTES
        kind = int(words[off >> 2])
        step = sizes.get(kind, 0)
        if step and 0 <= kind < 256:
            break  # a record of a kind the walk knows, yet it did not fit in what is left
        if not step:  # a kind not met before: its size from CUPTI
            step = size_at(off) if size_at is not None else 0
            if step < _MIN_SIZE.get(kind, 8) or step % 8 or off + step > n:
                break  # stop rather than misread
            if off + step < n:  # a buffer's last record ends at the buffer's end, not at its own size
                sizes[kind] = step
        elif off + step > n:
            break
        runs.append((np.array([off], dtype=np.int64), np.array([kind], dtype=np.int64)))
        off += step
    all_at = np.concatenate([r[0] for r in runs]) if runs else np.array([], dtype=np.int64)
    all_kinds = np.concatenate([r[1] for r in runs]) if runs else np.array([], dtype=np.int64)
    offsets = {k: all_at[all_kinds == k] for k in _FIELDS}
    return {k: at for k, at in offsets.items() if len(at)}, max(n - off, 0)


def record_fields(buf: np.ndarray, offsets: dict[int, np.ndarray]) -> dict[int, dict[str, np.ndarray]]:
    """Per kind, the fields (int64 columns) of the records starting at ``offsets`` in ``buf``."""
    n = len(buf)
    out: dict[int, dict[str, np.ndarray]] = {}
    u8 = buf
    u16 = buf[: n - n % 2].view(np.uint16)
    u32 = buf[: n - n % 4].view(np.uint32)
    u64 = buf[: n - n % 8].view(np.uint64)
    for kind, at in offsets.items():
        cols: dict[str, np.ndarray] = {}
        for name, (pos, dtype) in _FIELDS[kind].items():
            if dtype is np.uint64:  # times and pointers, below 2**63: read as int64 in place of a copy
                cols[name] = u64[(at + pos) >> 3].view(np.int64)
            else:
                cols[name] = u32[(at + pos) >> 2].astype(np.int64)
        if kind == MEMCPY:
            for name, pos in _MEMCPY_BYTE_FIELDS.items():
                cols[name] = u8[at + pos].astype(np.int64)
        elif kind == MEMSET:
            cols["memory_kind"] = u16[(at + _MEMSET_MEMORY_KIND) // 2].astype(np.int64)
        out[kind] = cols
    return out


def _walk(
    data: Any, words: np.ndarray, sizes: dict[int, int], off: int, end: int
) -> tuple[np.ndarray, np.ndarray, int]:
    """Records from ``off`` up to ``end`` whose kinds have known ``sizes``: (offsets, kinds, where the walk
    stopped).

    A regular expression steps from record to record at C speed (each record is its kind's 4-byte word and
    that kind's size in bytes; ``findall`` yields each one's first byte). Where a record of another kind
    sits, the expression skips ahead and no longer lines up: each offset's word is checked against the
    kind found there, and the walk stops at the first that does not match. What it skipped to find later
    matches is wasted, so the caller walks a window at a time (:data:`WALK_WINDOW_BYTES`)."""
    known = {k: v for k, v in sizes.items() if 0 <= k < 256 and v >= 8}
    if not known:
        return np.array([], dtype=np.int64), np.array([], dtype=np.int64), off
    pattern, size_of = _record_pattern(tuple(sorted(known.items())))
    kinds = np.frombuffer(b"".join(pattern.findall(data, off, end)), np.uint8).astype(np.int64)
    ends = off + np.cumsum(size_of[kinds])
    at = ends - size_of[kinds]
    good = (at + 4 <= len(words) * 4) & (words[np.minimum(at, len(words) * 4 - 4) >> 2] == kinds)
    first_bad = int(np.argmin(good)) if not good.all() else len(good)
    return at[:first_bad], kinds[:first_bad], int(ends[first_bad - 1]) if first_bad else off


@functools.lru_cache(maxsize=16)
def _record_pattern(sizes: tuple[tuple[int, int], ...]) -> tuple[re.Pattern[bytes], np.ndarray]:
    """One record of a kind in ``sizes`` ((kind, bytes) pairs), capturing the kind's low byte; and the size
    of each kind below 256 as an array (0 for kinds not in ``sizes``)."""
    size_of = np.zeros(256, dtype=np.int64)
    size_of[[k for k, _ in sizes]] = [v for _, v in sizes]
    by_size: dict[int, list[int]] = {}
    for kind, size in sizes:
        by_size.setdefault(size, []).append(kind)
    alternatives = [
        b"[" + b"".join(re.escape(bytes([k])) for k in kinds) + b"]\x00\x00\x00.{%d}" % (size - 4)
        for size, kinds in by_size.items()
    ]
    return re.compile(b"(?s)(?=(.))(?:" + b"|".join(alternatives) + b")"), size_of


_DEMANGLED: dict[str, str] = {}


def _demangle(name: str) -> str:
    """A C++ kernel symbol demangled as Kineto shows it (torch's demangler when present)."""
    hit = _DEMANGLED.get(name)
    if hit is None:
        hit = name
        if name.startswith("_Z"):
            try:
                import torch

                hit = torch._C._demangle(name)
            except (ImportError, AttributeError, RuntimeError):
                pass
        _DEMANGLED[name] = hit
    return hit
