"""Finding rules, one module each, registered in :data:`RULES` (the order pages list ties in).

To add a rule: write a class with ``name``, ``title``, ``fix`` and ``detect(ctx) -> Detection | None``
(webapp.analysis.rules.base) in a module of its own, and add an instance here. Its cost is the replayed
saving of the graph change its detection returns.
"""

from __future__ import annotations

from webapp.analysis.rules.base import Detection, Rule, RuleContext
from webapp.analysis.rules.blocking_copy import BlockingCopy
from webapp.analysis.rules.host_bound import HostBound
from webapp.analysis.rules.no_copy_overlap import NoCopyOverlap
from webapp.analysis.rules.pageable_copy import PageableCopy
from webapp.analysis.rules.sync_in_loop import SyncInLoop

RULES: tuple[Rule, ...] = (PageableCopy(), BlockingCopy(), NoCopyOverlap(), SyncInLoop(), HostBound())

__all__ = ["RULES", "Detection", "Rule", "RuleContext"]
