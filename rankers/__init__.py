"""Ranker implementations, one module per family, behind a lazy registry.

Heavy dependencies (torch, sentence-transformers, colbert-ai) are imported only when a ranker is
created, so ``bench --help`` and BM25 runs stay fast and an absent extra gives a clear error.
"""

from __future__ import annotations

import importlib
from typing import Any

from rankers.base import FAMILIES, Ranker, RankerConfig, RankerError, Role

# name -> "module:Class". Later rankers register here.
_REGISTRY: dict[str, str] = {
    "firststage": "rankers.firststage:FirstStageRanker",
    "bm25": "rankers.bm25:BM25Ranker",
    "dpr": "rankers.dense:DPRRanker",
    "ance": "rankers.dense:ANCERanker",
    "monobert": "rankers.monobert:MonoBERTRanker",
    "crossjem": "rankers.crossjem:CrossJEMRanker",
    "colbert": "rankers.colbert:ColBERTRanker",
    "rankt5": "rankers.rankt5:RankT5Ranker",
    "st-crossencoder": "rankers.stcross:STCrossEncoderRanker",
}

ALIASES: dict[str, str] = {
    "first-stage": "firststage",
    "before": "firststage",
    "okapi": "bm25",
    "cross-jem": "crossjem",
    "mono-bert": "monobert",
}

# extra to install when a ranker's import fails
_EXTRAS: dict[str, str] = {"colbert": "colbert"}


def available() -> list[str]:
    """Registered ranker names."""
    return sorted(_REGISTRY)


def canonical_name(name: str) -> str:
    key = name.strip().lower()
    key = ALIASES.get(key, key)
    if key not in _REGISTRY:
        raise RankerError(f"unknown ranker {name!r}; known: {', '.join(available())}")
    return key


def get_ranker_class(name: str) -> type[Ranker]:
    key = canonical_name(name)
    module_name, cls_name = _REGISTRY[key].split(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        extra = _EXTRAS.get(key)
        hint = f"pip install 'crossjem-bench[{extra}]'" if extra else "pip install -e ."
        raise RankerError(f"ranker {key!r} needs a missing package ({exc.name}): {hint}") from exc
    return getattr(module, cls_name)


def create_ranker(name: str, options: dict[str, Any] | None = None, device: str = "cpu") -> Ranker:
    """A configured ranker instance; unknown options name the known ones."""
    cls = get_ranker_class(name)
    return cls(cls.Config.from_options(options), device=device)


__all__ = [
    "FAMILIES",
    "Ranker",
    "RankerConfig",
    "RankerError",
    "Role",
    "available",
    "canonical_name",
    "create_ranker",
    "get_ranker_class",
]
