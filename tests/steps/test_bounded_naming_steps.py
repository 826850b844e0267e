"""A loop without step marks whose ops were named for its first iterations only (the recorder bounds its op
naming): the loop is found from its GPU work, not from the named window."""

from __future__ import annotations

import pytest

from collector.importers.kineto import trace_from_kineto
from collector.model import RunMeta
from collector.recording.enrich import HostFacts, enrich
from collector.steps import find_steps
from collector.synthetic.cupti import EventRows

MAIN, STREAM = 2001, 7


@pytest.mark.parametrize(("named", "note"), [(3, {}), (26, {"op_naming": {"stopped_by": "repeat", "ops": 1066}})])
def test_a_loop_named_in_its_first_iterations_only_is_found_by_its_gpu_work(named: int, note: dict) -> None:
    """Named in 3 of 40 iterations (any trace), or in 26 when the trace says its naming ended early."""
    rows = EventRows()
    t = 1_000_000
    for i in range(40):
        for op, kernel in [
            ("aten::tanh", "tanh_kernel"),
            *[("aten::mul", "mul_kernel"), ("aten::add", "add_kernel")] * 20,
        ]:
            if i < named:  # naming stopped by its bound
                rows.op(MAIN, op, t - 500, t + 4_500)
            c = rows.call(MAIN, "cudaLaunchKernel", t)
            rows.gpu("kernel", kernel, STREAM, t + 2_000, 2_000, c)
            t += 5_000
        rows.call(MAIN, "cudaStreamSynchronize", t, 20_000)  # a .item() each iteration
        t += 30_000
    trace = enrich(trace_from_kineto(rows.table()), HostFacts(threads={MAIN: "main thread"}), RunMeta.new(notes=note))
    found = find_steps(trace)
    assert found.meta.step_method == "repeat:gpu"
    assert len(found.steps()) == 40
