"""The probe of what a first read of shared memory costs per page (a DataLoader worker's batch)."""

from __future__ import annotations

import math
import os

import pytest

from collector.recording import probe


@pytest.mark.skipif(not hasattr(os, "memfd_create"), reason="memory files are Linux's")
def test_a_first_read_of_shared_pages_costs_more_than_the_second() -> None:
    out = probe.probe_shared_pages(nbytes=1 << 20, reps=2)
    assert set(out) == {"shm_fault_ns_per_4kib"}
    # a minor fault costs tenths of a microsecond; a re-read of a mapped page, nanoseconds
    assert math.isfinite(out["shm_fault_ns_per_4kib"]) and 0 < out["shm_fault_ns_per_4kib"] < 100_000


def test_no_memory_files_means_no_figure(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delattr(probe.os, "memfd_create", raising=False)
    assert probe.probe_shared_pages() == {}


def test_a_refused_memory_file_means_no_figure(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(name: str) -> int:
        raise OSError(38, "Function not implemented")

    monkeypatch.setattr(probe.os, "memfd_create", refuse, raising=False)
    assert probe.probe_shared_pages() == {}
