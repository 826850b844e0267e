"""The host stack sampler on a CPU loop whose hot functions are known."""

from __future__ import annotations

import itertools
import sys
import threading
import time

from host_work import spin

from collector.recording.stacks import SEP, StackSampler, folded, short_path, stack_key


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
    sample landed there. The Python work holds most of the sampled time, and the interval is restored."""
    before = sys.getswitchinterval()
    sampler = StackSampler().start()
    for _ in range(30):
        hot_model_short()
        time.sleep(0.0001)
    rows = sampler.stop()
    in_python = sum(b - a for a, b, stack in rows if "hot_model_short" in stack)
    assert in_python > 0.6 * sum(b - a for a, b, _ in rows)
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
    key = stack_key(__import__("sys")._getframe())
    text = folded(key)
    assert text.split(SEP)[-1].startswith("test_folded_frames_read_outermost_first_with_short_paths (")
    assert "tests/recording/test_stacks.py:" in text.split(SEP)[-1]
    assert short_path("/usr/lib/python3/site-packages/torch/utils/data/dataloader.py") == (
        "torch/utils/data/dataloader.py"
    )
