"""Whether one median describes a run's steps (webapp.analysis.pace)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from webapp.analysis.pace import pace_note

MS = 1_000_000


def _steps(times_ms: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    return np.array(times_ms) * MS, np.arange(len(times_ms))


def test_a_loop_that_changes_pace_half_way_says_so_with_its_parts() -> None:
    rng = np.random.default_rng(0)
    times = [*(65 + rng.normal(0, 1, 30)), *(12 + rng.normal(0, 0.1, 30))]
    note = pace_note(*_steps(times))
    assert "30 steps at 6" in note and "(steps 0-29)" in note and "30 steps at 12" in note and "(steps 30-59)" in note
    assert "describes neither" in note


def test_alternating_paces_are_two_groups_without_step_ranges() -> None:
    note = pace_note(*_steps([10, 30] * 10))
    assert "10 steps at 30.00 ms, and 10 steps at 10.00 ms" in note and "(steps" not in note


def test_one_pace_with_noise_or_a_few_slow_steps_is_left_alone() -> None:
    rng = np.random.default_rng(1)
    assert pace_note(*_steps(list(20 + rng.normal(0, 2, 50)))) == ""
    eval_every_10 = [80 if k % 10 == 9 else 20 for k in range(50)]  # 10% slow: outliers, not a pace
    assert pace_note(*_steps(eval_every_10)) == ""
    assert pace_note(*_steps([10, 30] * 3)) == ""  # too few steps to tell
