"""CROSS-JEM (paper sections 3-4): inputs (pure Python), module (torch), ranker."""

from rankers.crossjem.ranker import CrossJEMConfig, CrossJEMRanker

__all__ = ["CrossJEMConfig", "CrossJEMRanker"]
