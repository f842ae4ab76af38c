"""Ranker implementations, one module per family, behind a lazy registry.

Heavy dependencies (torch, sentence-transformers, colbert-ai) are imported only when a ranker is
created, so ``bench --help`` and BM25 runs stay fast and an absent extra gives a clear error.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rankers.base import FAMILIES, Ranker, RankerConfig, RankerError, Role
from rankers.hooks import fits

log = logging.getLogger(__name__)

# name -> "module:Class". A new ranker is one module plus one line here (or one :func:`register`
# call from anywhere); nothing in ``bench`` names rankers, so no other file changes.
_REGISTRY: dict[str, str] = {
    "firststage": "rankers.families.firststage:FirstStageRanker",
    "bm25": "rankers.families.bm25:BM25Ranker",
    "dpr": "rankers.families.dense:DPRRanker",
    "ance": "rankers.families.dense:ANCERanker",
    "monobert": "rankers.families.monobert:MonoBERTRanker",
    "crossjem": "rankers.families.crossjem.ranker:CrossJEMRanker",
    "set-encoder": "rankers.families.setencoder:SetEncoderRanker",
    "colbert": "rankers.families.colbert:ColBERTRanker",
    "rankt5": "rankers.families.rankt5:RankT5Ranker",
    "st-crossencoder": "rankers.families.stcross:STCrossEncoderRanker",
    "runfile": "rankers.families.runfile:RunFileRanker",
}

ALIASES: dict[str, str] = {
    "first-stage": "firststage",
    "before": "firststage",
    "okapi": "bm25",
    "cross-jem": "crossjem",
    "mono-bert": "monobert",
    "setencoder": "set-encoder",
}

# extra to install when a ranker's import fails
_EXTRAS: dict[str, str] = {"colbert": "colbert"}

# name -> settings file, for rankers registered with one of their own (default:
# rankers/configs/<name>.yaml, see bench.execution.ranker_settings.ranker_options)
_CONFIG_FILES: dict[str, Path] = {}


def register(name: str, target: str, config: Path | str | None = None) -> None:
    """Register ranker ``name`` as ``"module:Class"`` (imported only when first created, like the
    built-in rankers). ``config``: its settings file (``default`` and ``datasets`` sections) when
    it is not ``rankers/configs/<name>.yaml``; a ranker without one runs on its defaults.

    This is the one line a ranker defined outside this package needs: the CLI, runner, tables
    and latency benchmark read everything else (family, options, hooks) from the class."""
    key = name.strip().lower()
    module_name, sep, cls_name = target.partition(":")
    if not (key and module_name and sep and cls_name):
        raise RankerError(f"register({name!r}, {target!r}): expected a name and 'module:Class'")
    _REGISTRY[key] = target
    if config is not None:
        _CONFIG_FILES[key] = Path(config)
    else:
        _CONFIG_FILES.pop(key, None)


def config_file(name: str) -> Path | None:
    """The settings file ranker ``name`` was registered with, else None (then the runner reads
    ``rankers/configs/<name>.yaml`` if there is one)."""
    key = name.strip().lower()
    return _CONFIG_FILES.get(ALIASES.get(key, key))


def available() -> list[str]:
    """Registered ranker names."""
    return sorted(_REGISTRY)


def canonical_name(name: str) -> str:
    key = name.strip().lower()
    key = ALIASES.get(key, key)
    if key not in _REGISTRY:
        raise RankerError(f"unknown ranker {name!r}; known: {', '.join(available())}")
    return key


def module_of(name: str) -> str:
    """The module that defines ranker ``name`` (not imported): the root of its code for a cache
    key (:mod:`bench.execution.keys`)."""
    return _REGISTRY[canonical_name(name)].split(":")[0]


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


def open_ranker(
    ranker: str | Path | Ranker,
    options: Mapping[str, Any] | None = None,
    device: str = "cpu",
) -> Ranker:
    """A ranker by name (with ``options``), a folder a ranker's ``save()`` wrote (its
    ``ranker.json`` names the ranker; saved options win, as in `bench run --set checkpoint=`),
    or a ranker instance as it is."""
    if isinstance(ranker, Ranker):
        return ranker
    folder = Path(ranker)
    if isinstance(ranker, Path) or (folder / "ranker.json").is_file():
        meta_file = folder / "ranker.json"
        if not meta_file.is_file():
            raise RankerError(
                f"{folder}: not a saved ranker folder (no ranker.json); `bench train` prints "
                "the folder it saves a model in (results/models/DATASET/RANKER/KEY)"
            )
        from rankers.io.persist import read_ranker_file

        name = read_ranker_file(meta_file).get("name")
        if not isinstance(name, str):
            raise RankerError(f"{meta_file}: names no ranker")
        opened = create_ranker(name, dict(options or {}), device=device)
        opened.load(folder)
        return opened
    opened = create_ranker(str(ranker), dict(options or {}), device=device)
    untrained = fits(opened).untrained_weights()
    if untrained:
        log.warning(
            "%s: %s is untrained here; give a trained folder (a `bench train` model) to re-rank",
            opened.name,
            untrained,
        )
    return opened


__all__ = [
    "FAMILIES",
    "Ranker",
    "RankerConfig",
    "RankerError",
    "Role",
    "available",
    "canonical_name",
    "config_file",
    "create_ranker",
    "get_ranker_class",
    "module_of",
    "open_ranker",
    "register",
]
