"""The host stack sampler on a CPU loop whose hot functions are known."""

from __future__ import annotations

import itertools
import sys
import threading
import time
from collections.abc import Iterator
from types import CodeType, FrameType

import pytest
from host_work import spin

from collector.recording.stacks import SEP, LineTable, StackSampler, folded, short_path, stack_key


def hot_loader() -> None:
    spin(0.03)


def hot_model() -> None:
    spin(0.01)


def test_a_loop_is_sampled_where_its_time_goes() -> None:
    sampler = StackSampler(interval_s=0.001).start()
    for _ in range(4):
        hot_loader()
        hot_model()
    rows = sampler.stop()
    assert sampler.samples >= 10
    assert sampler.native_id not in (None, threading.get_native_id())  # its own thread (the recorder's)
    assert all(a < b for a, b, _ in rows) and all(b <= c for (_, b, _), (c, _, _) in itertools.pairwise(rows))
    time_in: dict[str, int] = {}
    for a, b, stack in rows:
        for frame in dict.fromkeys(stack.split(SEP)):
            name = frame.split(" (")[0]
            time_in[name] = time_in.get(name, 0) + (b - a)
    # three quarters of the loop is in hot_loader, a quarter in hot_model; both run under this test
    assert time_in["hot_loader"] > 1.5 * time_in["hot_model"] > 0
    assert time_in["test_a_loop_is_sampled_where_its_time_goes"] >= time_in["hot_loader"]


def test_python_work_between_calls_that_release_the_gil_is_sampled_there() -> None:
    """4 ms of Python, then a call that releases the GIL (as a CUDA op does), 30 times: a sample waits for the
    GIL, and under Python's 5 ms switch interval the main thread gave it up only at those calls, so every
    sample landed there (a sampled share of Python near 0). The sampled share is held against the share the
    loop itself timed (most of the time on a quiet host; less where a loaded host stretches the short sleeps),
    and the interval is restored."""
    before = sys.getswitchinterval()
    in_spin = in_sleep = 0.0
    sampler = StackSampler().start()
    for _ in range(30):
        t0 = time.perf_counter()
        hot_model_short()
        t1 = time.perf_counter()
        time.sleep(0.0001)
        in_spin, in_sleep = in_spin + t1 - t0, in_sleep + time.perf_counter() - t1
    rows = sampler.stop()
    in_python = sum(b - a for a, b, stack in rows if "hot_model_short" in stack)
    timed_share = in_spin / (in_spin + in_sleep)
    assert in_python / sum(b - a for a, b, _ in rows) > 0.6 * timed_share
    assert sys.getswitchinterval() == before


def hot_model_short() -> None:
    spin(0.004)


def test_the_same_stack_sampled_twice_is_one_stretch() -> None:
    clock = itertools.count(0, 1000)
    ready, done = threading.Event(), threading.Event()

    def worker() -> None:
        ready.set()
        done.wait()

    t = threading.Thread(target=worker)
    t.start()
    ready.wait()
    sampler = StackSampler(thread_id=t.ident, interval_s=0.001, clock=lambda: next(clock))
    for _ in range(3):
        sampler.sample()
    done.set()
    t.join()
    rows = sampler.stop()
    assert sampler.samples == 3 and len(rows) == 1
    (start, end, stack) = rows[0]
    assert (start, end) == (0, 2000 + 1_000_000)  # the last stretch lasts one interval past its last sample
    assert stack.split(SEP)[-1].startswith("wait (") and "worker (" in stack


def test_folded_frames_read_outermost_first_with_short_paths() -> None:
    frame = sys._getframe()
    key, line = stack_key(frame), frame.f_lineno  # one line: the key's and f_lineno's are the same
    text = folded(key)
    assert text.split(SEP)[-1].startswith("test_folded_frames_read_outermost_first_with_short_paths (")
    assert text.split(SEP)[-1].endswith(f"tests/recording/test_stacks.py:{line})")
    callers = [f"{f.f_code.co_name} ({short_path(f.f_code.co_filename)}:{f.f_lineno})" for f in _frames(frame)]
    assert text.split(SEP)[:-1] == callers[::-1][-(len(key) - 1) :]  # every caller at the line it calls from
    assert short_path("/usr/lib/python3/site-packages/torch/utils/data/dataloader.py") == (
        "torch/utils/data/dataloader.py"
    )


def _frames(frame: FrameType) -> list[FrameType]:
    out = []
    while frame.f_back is not None:
        frame = frame.f_back
        out.append(frame)
    return out


def test_instruction_offsets_read_as_the_lines_python_gives_them() -> None:
    """Every instruction of a module's functions: the line the sampler gives its offset at stop is the line
    Python's own position table gives (``f_lineno`` reads the same table)."""
    lines, checked = LineTable(), 0

    def codes(code: CodeType) -> Iterator[CodeType]:
        yield code
        for const in code.co_consts:
            if isinstance(const, CodeType):
                yield from codes(const)

    source = threading.__file__
    with open(source, encoding="utf-8") as f:
        top = compile(f.read(), source, "exec")
    if not hasattr(top, "co_positions"):
        pytest.skip("Python 3.10 has no position table to compare with")
    for code in codes(top):
        for i, (line, *_) in enumerate(getattr(code, "co_positions")()):  # noqa: B009 - 3.11+
            if line is not None:
                assert lines.line(code, 2 * i) == line, (code.co_name, 2 * i)
                checked += 1
    assert checked > 1000


def test_two_instructions_of_one_line_are_one_stretch() -> None:
    """A thread that waits at one call, then at another call on the same line: two stacks as sampled, one
    stack as read (its lines are the same), so one stretch."""
    clock = itertools.count(0, 1000)
    first, second, ready = threading.Event(), threading.Event(), threading.Event()

    def worker() -> None:
        ready.set()
        first.wait() and second.wait()  # two calls on one line

    def offset() -> int:  # where the worker's own frame is
        frame = sys._current_frames().get(t.ident or 0)
        while frame is not None and frame.f_code.co_name != "worker":
            frame = frame.f_back
        return frame.f_lasti if frame is not None else -1

    t = threading.Thread(target=worker)
    t.start()
    ready.wait()
    time.sleep(0.02)
    sampler = StackSampler(thread_id=t.ident, interval_s=0.001, clock=lambda: next(clock))
    at_first = offset()
    sampler.sample()
    first.set()
    deadline = time.monotonic() + 5
    while offset() == at_first and time.monotonic() < deadline:
        time.sleep(0.001)
    time.sleep(0.02)
    sampler.sample()
    second.set()
    t.join()
    assert sampler.samples == 2
    rows = sampler.stop()
    assert len(rows) == 1 and rows[0][:2] == (0, 1000 + 1_000_000)


def test_a_stack_sampled_again_later_is_kept_once() -> None:
    """A stack that comes back after another is a new stretch that refers to the stack kept the first time:
    the sampler's memory grows with the program's distinct stacks, not with its samples."""
    sampler = StackSampler(thread_id=threading.get_ident())
    for _ in range(3):
        sampler.sample()  # here
        sampler.sample()  # and here, alternately
    keys = sampler._keys
    assert len(keys) == 6 and keys[0] is keys[2] is keys[4] and keys[1] is keys[3] and keys[0] != keys[1]
    assert len(sampler.stop()) == 6
