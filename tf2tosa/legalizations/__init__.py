"""Legalization rules from framework ops to TOSA 1.0, one module per op family."""

from .registry import RULES, all_rules, get_rule, legalize

__all__ = ["RULES", "all_rules", "get_rule", "legalize"]
