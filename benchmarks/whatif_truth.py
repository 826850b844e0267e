"""Does the advice hold? In each of several rounds, each loop of benchmarks/whatif_loops.py is recorded as it
is and its finding's replayed saving read off the analysis (a prediction), and then the loop, the loop with that
one fix applied and the loop again are timed unrecorded (a measurement, the loop's two timings averaged). Run on
a GPU:

    PYTHONPATH=. python3 benchmarks/whatif_truth.py --md /tmp/whatif.md [--pairs NAME,NAME] [--rounds 3]
        [--alternations N]

Per pair: the finding's severity and replayed saving (its own fix alone; for a finding with several fixes,
the one applied), the step time unrecorded as the analysis estimates it and as the plain run measured it,
the predicted speedup ``now / (now - saving)`` and the measured one (medians over rounds; lowest and highest
round). Bounds: every prediction within 10% of the measured speedup, round by round (the median over rounds of
each round's prediction over its measurement); a fix that measured under 3% is never
above info; and where the fix saved nothing, the fixed loop, recorded too, keeps the same top finding.
Prints a Markdown section (``## whatif_truth``), written to ``--md`` if given.
"""

from __future__ import annotations

import argparse
import gc
import math
import platform
import statistics
import sys
import traceback
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from whatif_loops import PAIRS, WARM, Pair  # noqa: E402

PREDICTION_BOUND = 0.10
NOISE_FLOOR = 0.03


def _finding(result: Any, rule: str) -> tuple[Any, str]:
    for f in result.findings:
        if f.rule == rule:
            return f, f.severity
    for f in result.minor_findings:
        if f.rule == rule:
            return f, "minor"
    return None, "none"


def _analyze(rec: Any) -> Any:
    from collector.steps import find_steps
    from webapp.analysis import analyze

    return analyze(find_steps(rec.trace))


TRACES: list[Path] = []
"""Where to write each recorded run (``--traces``), if anywhere: the base loop's of every round, and one of
the fixed loop (``<pair>-fixed.json.gz``)."""
ATTACHED: list[str] = []
"""The pairs a recording of which left CUPTI attached (``notes.cupti_detached`` false: a thread other than
the loop's made CUDA calls): their later plain timings ran slower per launch than a process that never
recorded, which the analysis's unrecorded step estimates."""


def _recorded(pair: Pair, loop: Any, suffix: str = "") -> Any:
    from collector import record

    out = str(TRACES[0] / f"{pair.name}{suffix}.json.gz") if TRACES else None
    with record(pair.name, out, auto_steps=True) as rec:
        loop.run(pair.steps, on_step=rec.step)
    if rec.trace is not None and not rec.trace.meta.notes.get("cupti_detached", False) and pair.name not in ATTACHED:
        ATTACHED.append(pair.name)
    return _analyze(rec)


def _predict(pair: Pair, result: Any, warm: int) -> dict[str, Any]:
    """What one recorded run of the base loop predicts: the finding, its saving, the step now (unrecorded, as the
    analysis estimates it) and with the fix, by medians (``predicted``) and by means over the steps a plain
    timing counts (``pace``)."""
    finding, sev = _finding(result, pair.rule)
    saving, advised = 0.0, ""
    if finding is not None:
        saving = float(finding.cost_per_step_ns)
        if pair.option:
            advised, ns = next(((label, ns) for label, ns in finding.options if pair.option in label), ("", 0))
            saving = float(ns)
    # per step: the step unrecorded and that step with the fix (the finding's own replayed saving there);
    # medians, as the what-if, so that a recorded step slowed by the recorder's buffer flush counts once
    per = result.per_step
    now_k = per["step_time_unrecorded_ns"].to_numpy(float)
    cost = per.get(f"cost_{pair.rule.replace('-', '_')}_ns")
    fixes = [o for o in (finding.options if finding is not None else ()) if "(bound)" not in o[0]]
    best = not pair.option or (fixes and pair.option in max(fixes, key=lambda o: o[1])[0])
    per_step = cost is not None and best  # the finding's cost per step is this fix's saving there
    fixed_k = now_k - (np.nan_to_num(cost.to_numpy(float)) if per_step else saving)
    now = float(np.nanmedian(now_k))
    return {
        "finding": finding,
        "advised": advised,
        "severity": sev,
        "saving": saving,
        "now": now,
        "predicted": now / max(float(np.nanmedian(fixed_k)), 1.0),
        "pace": float(np.nanmean(now_k[warm:])) / max(float(np.nanmean(fixed_k[warm:])), 1.0),
        "recorded": float(result.metrics.get("step_time_median_ns", math.nan)),
        "call_ns": float(result.metrics.get("recorder_call_ns", 0.0)),
    }


def _timed(loop: Any, steps: int) -> float:
    """``loop.run(steps)`` (seconds per step) after a full garbage collection, so that every timing starts from
    the same collector state. Otherwise a full collection that other work made due (a recording's rows, the
    analysis, another loop's allocations) falls on whichever timing comes next, and a loop timed by its mean
    step counts all of it (in a Lightning loop's recordings, the step that held a full collection took 276 ms
    against a 6.7 ms median; that loop is timed by its median step, which one such step barely moves).
    Collections the loop's own allocations trigger within the timing still count."""
    gc.collect()
    return loop.run(steps)


def run_pair(pair: Pair, rounds: int, alternations: int | None = None) -> dict[str, Any]:
    """Per round: the base loop timed plain, then recorded (a prediction), then the base loop, the fixed one and
    the base loop again timed plain, so that each prediction and its measurement see the host as it was in that
    round (a host-bound loop's speed drifts by 10-30% between minutes on a shared host), and the base's two
    timings around the fixed loop's cancel a drift within the round. Between the recording and those timings the
    base loop runs once untimed: whatever the recording leaves behind (in one Lightning loop the base timed right
    after it was the round's slowest in every round) would slow only the first timing, the base's, and favour the
    fix. The base's timing ahead of the recording only measures the host: how far the base's timings part is the
    round's noise, against which the prediction (made during the recording) cannot be read more closely. With
    ``alternations`` (None: the pair's own, ``Pair.alternations``) above 1, the fixed loop and the base loop
    alternate that many times after the first base timing (base, fixed, base, fixed, base, ...): each fixed
    timing is read against the mean of the base timings on its two sides, and the round's measurement is the
    median of those ratios, which a host whose pace moves from one timing to the next (a host-bound Python
    loop) sways less than one pair of timings. The figures are medians over the rounds."""
    import torch

    alternations = max(alternations or pair.alternations, 1)
    base, fixed = pair.make(False), pair.make(True)
    try:
        base.run(min(pair.steps, 8))
        fixed.run(min(pair.steps, 8))
        warm = getattr(base, "warm", WARM)
        preds, times_b, times_f, base_runs, fixed_runs, ratios = [], [], [], [], [], []
        for i in range(max(rounds, 1)):  # at least one: the last recording gives the table its top finding
            ahead = _timed(base, pair.steps)
            gc.collect()  # the recording, too, starts from the collector state every timing starts from
            result = _recorded(pair, base, "" if i == 0 else f"-{i}")
            preds.append(_predict(pair, result, warm))
            _timed(base, pair.steps)  # untimed: what the recording leaves behind settles here, not in a timing
            bases, fixes = [_timed(base, pair.steps)], []
            for _ in range(alternations):
                fixes.append(_timed(fixed, pair.steps))
                bases.append(_timed(base, pair.steps))
            around = [(b0 + b1) / 2 for b0, b1 in zip(bases[:-1], bases[1:], strict=True)]  # either side of each fixed
            ratios.append(statistics.median(b / f for b, f in zip(around, fixes, strict=True)))
            times_b.append(statistics.median(around))
            times_f.append(statistics.median(fixes))
            base_runs.append((ahead, *bases))
            fixed_runs.append(tuple(fixes))
        measured = statistics.median(ratios)
        last = preds[-1]
        finding = last["finding"]
        out = {
            "pair": pair.name,
            "fix": pair.fix,
            "rule": pair.rule + (f" ({last['advised'] or pair.option})" if pair.option else ""),
            "advice": pair.advice,
            "advised": last["advised"],
            "severity": last["severity"],
            "saving_ms": statistics.median(p["saving"] for p in preds) / 1e6,
            "now_ms": statistics.median(p["now"] for p in preds) / 1e6,
            "recorded_ms": statistics.median(p["recorded"] for p in preds) / 1e6,
            "plain_ms": statistics.median(times_b) * 1e3,
            "fixed_ms": statistics.median(times_f) * 1e3,
            "predicted": statistics.median(p["predicted"] for p in preds),
            "predicted_each": [p["predicted"] for p in preds],
            "predicted_pace": statistics.median(p["pace"] for p in preds),
            "measured": measured,
            "measured_each": ratios,  # round by round, beside predicted_each
            # each round's prediction over that round's measurement: the host's regime can change between
            # rounds (a loop sync-bound in one round, host-bound in the next), and each round's recording
            # predicts its own round
            "paired": statistics.median(p["predicted"] / m for p, m in zip(preds, ratios, strict=True)),
            # the base loop's seconds per step ahead of the recording, and around each of the fixed loop's
            "base_timings": base_runs,
            "fixed_timings": fixed_runs,  # the fixed loop's seconds per step, each between two of the base's
            "alternations": alternations,
            # how far the base loop's timings in one round part (median over rounds, a fraction of their
            # mean): the host's own noise, against which a 10% bound cannot be read when it is larger
            "noise": statistics.median((max(t) - min(t)) / max(statistics.mean(t), 1e-12) for t in base_runs),
            "lo": min(ratios),
            "hi": max(ratios),
            "top": result.findings[0].rule if result.findings else "-",
            "top_fixed": "",
            "replay_error": float(result.metrics.get("replay_error_max_frac", math.nan)),
            "frames": "; ".join(f"{r.frame} {r.total_frac:.0%}" for r in result.host_frames.head(6).itertuples()),
            "detail": finding.detail if finding is not None else "",
            # the recorder's own cost per CUDA call as each recording calibrated it (the analysis takes it out)
            "recorder_call_ns": statistics.median(p["call_ns"] for p in preds),
            "recorder_call_each": [p["call_ns"] for p in preds],
        }
        if measured < 1 + NOISE_FLOOR:  # a fix that saves nothing: the fixed loop keeps the same top finding
            fixed_result = _recorded(pair, fixed, "-fixed")
            out["top_fixed"] = fixed_result.findings[0].rule if fixed_result.findings else "-"
        elif TRACES:  # the fixed loop's recording beside the base's, to see where a prediction and the fix part
            _recorded(pair, fixed, "-fixed")
        return out
    finally:
        for loop in (base, fixed):
            loop.close()
        del base, fixed
        gc.collect()
        torch.cuda.empty_cache()


def _call_us(row: dict[str, Any]) -> str:
    """The recorder's calibrated cost per CUDA call, us: the median over rounds (lowest-highest)."""
    each = row.get("recorder_call_each") or [row.get("recorder_call_ns", 0.0)]
    return f"{row['recorder_call_ns'] / 1e3:.1f} ({min(each) / 1e3:.1f}-{max(each) / 1e3:.1f})"


def _alternated(row: dict[str, Any]) -> str:
    """``"; N alt."`` for a pair timed with N > 1 alternations a round, else ``""``."""
    n = int(row.get("alternations", 1))
    return f"; {n} alt." if n > 1 else ""


def verdicts(row: dict[str, Any]) -> list[str]:
    """What the bounds say of one pair ('' list: all hold)."""
    bad = []
    if abs(row["paired"] - 1) > PREDICTION_BOUND:
        bad.append(
            f"undecided: the base loop's timings in a round part by {row['noise']:.0%}, more than the bound"
            if row["noise"] > PREDICTION_BOUND
            else "prediction off by more than 10%"
        )
    if row["measured"] < 1 + NOISE_FLOOR and row["severity"] in ("warning", "critical"):
        bad.append("a fix under 3% above info")
    if row["top_fixed"] and row["top_fixed"] != row["top"]:
        bad.append("top finding changed")
    if row.get("advice") and row["advice"] not in row.get("advised", ""):
        bad.append(f"the fix applied is not the one advised ({row.get('advised') or 'none'})")
    return bad


def markdown(rows: list[dict[str, Any]], failed: list[str], rounds: int) -> str:
    import torch

    when = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    lines = [
        "## whatif_truth",
        "",
        f"Measured {when} on {torch.cuda.get_device_name(0)}, torch {torch.__version__}, Python "
        f"{platform.python_version()} (`PYTHONPATH=. python3 benchmarks/whatif_truth.py`, {rounds} rounds per "
        "pair). In each round the loop is recorded, its finding's replayed saving read off the analysis, the "
        "loop run once untimed (whatever the recording leaves behind settles there), then the loop, the loop "
        "with that one fix and the loop again are timed unrecorded (the loop's two timings averaged, so that a "
        "drift within the round favours neither side; each timing and recording starts after a full garbage "
        "collection, so that a collection other work made due falls on neither side"
        + "; where `alt.` in the measured column is above 1, the fixed loop and the loop alternate that many "
        "times a round, each fixed timing read against the loop's timings on its two sides and the round's "
        "measurement the median of those ratios); figures are medians "
        "over the rounds. The loop is also timed ahead of each recording, to measure how far the host moves "
        "within a round (`base noise`). "
        "`now` is the analysis's step time "
        "unrecorded (the recorder's own cost per CUDA call taken out: `recorder us/call`, as each recording "
        "calibrated it), `plain` the loop's measured step. "
        "`predicted` is the median step now over the median step with the fix (lowest and highest round); "
        "`pace` the same from means over the steps the plain timing counts, as the measured side is; "
        "`paired` the median over rounds of each round's prediction over that round's measurement, which the "
        "bound reads (a host's regime can change from one round to the next, and each round's recording "
        "predicts its own round).",
        "",
        "| loop | fix | finding (severity) | saving | now / plain / recorded | recorder us/call | predicted | pace "
        "| measured (rounds) | paired | base noise | top finding (fixed) | bounds |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        bad = verdicts(r)
        top = r["top"] + (f" ({r['top_fixed']})" if r["top_fixed"] else "")
        lines.append(
            f"| {r['pair']} | {r['fix']} | {r['rule']} ({r['severity']}) | {r['saving_ms']:.2f} ms | "
            f"{r['now_ms']:.2f} / {r['plain_ms']:.2f} / {r['recorded_ms']:.2f} ms | {_call_us(r)} | "
            f"{r['predicted']:.2f}x "
            f"({min(r['predicted_each']):.2f}-{max(r['predicted_each']):.2f}) | "
            f"{r['predicted_pace']:.2f}x | "
            f"{r['measured']:.2f}x ({r['lo']:.2f}-{r['hi']:.2f}{_alternated(r)}) | {r['paired']:.2f} | "
            f"{r['noise']:.0%} | {top} | "
            f"{'; '.join(bad) or 'hold'} |"
        )
    for name in failed:
        lines.append(f"| {name} | failed to run: see the log | | | | | | | | | | | |")
    if ATTACHED:
        lines += [
            "",
            f"Plain timings after a recording ran with CUPTI still attached for {', '.join(ATTACHED)} (another "
            "thread made CUDA calls during the recording, so the recorder did not detach it): slower per launch "
            "than the unrecorded process the analysis estimates.",
        ]
    short = [r for r in rows if r["now_ms"] > (1 + PREDICTION_BOUND) * r["plain_ms"]]
    if short:
        lines += [
            "",
            "The analysis's unrecorded step exceeds the plain one by more than the bound for "
            + ", ".join(f"{r['pair']} ({r['now_ms'] / r['plain_ms'] - 1:.0%})" for r in short)
            + ": the recorder's own cost taken out (`recorder us/call`, per recorded CUDA call) fell short of what "
            "the recording added, so the recorded loop reads more host-bound than the plain one runs.",
        ]
    held = sum(1 for r in rows if not verdicts(r))
    lines += [
        "",
        f"{held} of {len(rows) + len(failed)} pairs hold every bound. `base noise`: how far the base loop's "
        "timings in one round part (ahead of the recording, and around the fixed loop's; median over "
        "rounds); where it exceeds 10%, a prediction outside the bound is reported as undecided, not as off.",
    ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pairs", default="", help="comma-separated pair names (default: all)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--alternations", type=int, help="fixed/base timings alternated per round (default: each pair's own)"
    )
    parser.add_argument("--md", type=Path)
    parser.add_argument(
        "--traces", type=Path, help="a folder to write each recorded run to (the base loop's, and one of the fixed)"
    )
    args = parser.parse_args(argv)
    if args.traces:
        args.traces.mkdir(parents=True, exist_ok=True)
        TRACES[:] = [args.traces]
    wanted = [p for p in args.pairs.split(",") if p]
    pairs = [p for p in PAIRS if not wanted or p.name in wanted]
    rows, failed = [], []
    for pair in pairs:
        print(f"--- {pair.name}", flush=True)
        try:
            row = run_pair(pair, args.rounds, args.alternations)
        except Exception:  # one loop's missing package or API change must not lose the others
            traceback.print_exc()
            failed.append(pair.name)
            continue
        rows.append(row)
        print({k: (round(v, 3) if isinstance(v, float) else v) for k, v in row.items()}, flush=True)
    text = markdown(rows, failed, args.rounds)
    print(text)
    if args.md:
        args.md.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
