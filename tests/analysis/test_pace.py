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


def test_a_short_last_window_is_said_against_the_steps_just_before_it_not_the_whole_run() -> None:
    """GPU-aligned windows: a last step far under its neighbours is said; one at the pace its loop changed to
    (65 ms steps, then 12 ms ones) is not, though it is under half the run's median."""
    import pandas as pd

    from webapp.analysis.run import short_last_notes

    def per_step(times_ms: Sequence[float], rank: int = 0) -> pd.DataFrame:
        return pd.DataFrame({"rank": rank, "step": range(len(times_ms)), "step_time_ns": np.array(times_ms) * MS})

    assert short_last_notes(per_step([65] * 30 + [12] * 30), "gpu") == ()
    (note,) = short_last_notes(per_step([25, 25, 26, 25, 25, 4.7]), "gpu")
    assert note.startswith("The last step (4.70 ms, against 25.00 ms for the steps before it) ends with its GPU")
    assert short_last_notes(per_step([25, 25, 26, 25, 25, 4.7]), "host") == ()  # marker windows: as marked
    assert short_last_notes(per_step([25, 4.7]), "gpu") == ()  # too few steps to tell
    (cpu,) = short_last_notes(per_step([25, 25, 26, 25, 25, 4.7]), "gpu", gpu=False)  # windows on collectives
    assert "ends with its collectives" in cpu and "GPU" not in cpu
