"""Stage 1a: the pattern table and its matcher."""

from fact.patterns.engine import MatchResult, match_graph, precision_for
from fact.patterns.table import pattern_table
from fact.patterns.types import AttentionShape, Group, Match, Rejection

__all__ = ["AttentionShape", "Group", "Match", "MatchResult", "Rejection", "match_graph", "pattern_table",
           "precision_for"]
