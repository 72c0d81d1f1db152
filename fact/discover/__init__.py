"""Stage 1, discover: from a module to a prioritised, retrieval-grounded plan."""

from fact.discover.discover import detect_arch, discover, discover_captured
from fact.discover.plan import Exemplar, Plan, PlanItem

__all__ = ["Exemplar", "Plan", "PlanItem", "detect_arch", "discover", "discover_captured"]
