"""Findings: each rule's fix is replayed on the run's dependency graph, and what it saves is its cost.

:func:`find_all` runs every rule of webapp.analysis.rules.RULES on a RuleContext, replays the graph change
of each detection (webapp.analysis.causal), and returns the listed findings, the minor ones, each rule's
saving per step window (ns) and each rule's change (for the what-if, which replays them together). Only
work inside step windows is judged: the set-up and tail (webapp.analysis.phases) are one-time work.

Severity, from a finding's mean saving per step against the median step: critical >= CRITICAL_FRAC (20%),
warning >= WARNING_FRAC (5%), info below; a saving that hits fewer than IN_LOOP_STEP_FRAC of the steps
stays info. Below LIST_FRAC (0.5%) of the step, or under MIN_LISTED_NS, a finding is minor: kept in the
JSON, not listed. Findings are ranked by saving per step, then total saving, largest first.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from webapp.analysis.records import Finding
from webapp.analysis.rules import RULES, Rule, RuleContext
from webapp.analysis.rules.base import LIST_FRAC, Detection, ms

INFO_FRAC = 0.01
"""A step counts as hit by a finding when its fix saves at least 1% of the median step there."""
MIN_LISTED_NS = 1_000
"""A saving under 1 us per step is never listed (it would read as 0.000 ms)."""
WARNING_FRAC = 0.05
"""5% of step time is worth a code change; a clean run (the overlap demo) stays below it."""
CRITICAL_FRAC = 0.20
"""A fifth of every step lost: the first thing to fix."""
IN_LOOP_STEP_FRAC = 0.5
"""A saving in fewer than half the steps is a one-off (checkpoint, eval, a pause): info whatever its size."""


def severity(frac: float) -> str:
    """Severity for a saving that is ``frac`` of the step time."""
    if frac >= CRITICAL_FRAC:
        return "critical"
    if frac >= WARNING_FRAC:
        return "warning"
    return "info"


def share_of_steps(ctx: RuleContext, total_ns: float) -> float:
    """A saving's share of the time in the steps the graph covers (never above 1 for a saving that is)."""
    in_steps = float(ctx.base_steps[ctx.covered].sum())
    return total_ns / in_steps if in_steps > 0 else 0.0


def listed(per_step_ns: float, frac: float) -> bool:
    """Whether a finding saving ``per_step_ns`` per step, ``frac`` of the time in steps, is listed (else minor)."""
    return frac >= LIST_FRAC and per_step_ns >= MIN_LISTED_NS


def find_all(
    ctx: RuleContext, rules: Sequence[Rule] = RULES
) -> tuple[tuple[Finding, ...], tuple[Finding, ...], dict[str, np.ndarray], dict[str, Detection]]:
    """Listed findings and minor ones, each largest saving first; each rule's replayed saving per step window
    (ns, aligned with rd.win, 0 where it found nothing) and each detecting rule's detection (its change)."""
    n = len(ctx.rd.win)
    n_win = ctx.n_win
    step_ref = ctx.step_ref
    costs = {rule.name: np.zeros(n, dtype=np.int64) for rule in rules}
    changes: dict[str, Detection] = {}
    found: list[Finding] = []
    minor: list[Finding] = []
    for rule in rules:
        det = rule.detect(ctx)
        if det is None:
            continue
        saving = det.saving if det.saving is not None else ctx.saving(det.change)
        # a window may get slower where the fix moves work into it (the GPU's backlog lands in the last one):
        # the saving is over the whole run, each window's as replayed, and none if it adds up to nothing
        saving = np.asarray(saving, dtype=np.int64)
        costs[rule.name] = saving
        changes[rule.name] = det
        total = max(float(saving.sum()), 0.0)
        per_step = total / n_win
        frac = share_of_steps(ctx, total)
        sev = severity(frac)
        detail = det.detail + f" Replayed with the fix, a step takes {ms(per_step)} less on average ({frac:.1%})."
        hit = int((saving >= INFO_FRAC * step_ref).sum()) if step_ref > 0 else 0
        if sev != "info" and hit < IN_LOOP_STEP_FRAC * n_win:
            sev = "info"
            detail += (
                f" It saves {INFO_FRAC:.1%} of a step or more in only {hit} of the {n_win} steps, so it is rated info."
            )
        finding = Finding(
            rule.name,
            rule.title,
            sev,
            int(round(per_step)),
            det.fix or rule.fix,
            detail,
            det.sources,
            det.evidence,
            int(round(total)),
            det.options,
        )
        (found if listed(per_step, frac) else minor).append(finding)
    return ranked(found), ranked(minor), costs, changes


def ranked(findings: Sequence[Finding]) -> tuple[Finding, ...]:
    """Findings by saving per step, then total saving, largest first."""
    return tuple(sorted(findings, key=lambda f: (-f.cost_per_step_ns, -f.cost_total_ns)))
