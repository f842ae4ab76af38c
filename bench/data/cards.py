"""Dataset cards and the catalogue: which datasets exist and what their files do not say.

A card (``datasets/cards/<name>.yaml``) gives the layout, the relevance level for binary measures,
the default split, where the data comes from and CROSS-JEM's per-dataset defaults. A folder under
the data root with no card still works: it gets a default card with the layout read off its files.
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from bench.data import mteb, trec
from bench.data.files import DatasetError
from bench.settings import cards_dir, data_root

log = logging.getLogger(__name__)

#: Datasets the harness can fetch (or be pointed at) even when no folder exists yet.
BUILTIN = ("msmarco-titles", "sodq")
LAYOUTS = (mteb.LAYOUT, trec.LAYOUT)


@dataclass(frozen=True)
class DatasetCard:
    """What the harness knows about one dataset beyond its files."""

    name: str
    layout: str
    relevance_level: int = 1
    default_split: str = "test"
    description: str = ""
    #: splits the source can provide even before any file is local (downloadable datasets)
    splits: tuple[str, ...] = ()
    hf_id: str | None = None
    hf_revision: str | None = None
    #: ir_datasets id; ``{split}`` is replaced by the split name
    irds_id: str | None = None
    #: TREC layout: which run.*.trec to use when a folder holds several
    run_file: str | None = None
    licence: str = ""
    source: str = ""
    #: True when no card file exists and these are defaults
    default: bool = False


_FIELDS = {f.name: f for f in dataclasses.fields(DatasetCard) if f.name != "default"}
_INTS = ("relevance_level",)


def read_card(path: Path) -> DatasetCard:
    """Parse and check one card file."""
    try:
        raw: Any = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise DatasetError(f"{path}: not valid YAML ({exc})") from exc
    if not isinstance(raw, dict):
        raise DatasetError(f"{path}: a dataset card must be a YAML mapping of field: value")
    unknown = sorted(set(raw) - set(_FIELDS))
    if unknown:
        raise DatasetError(
            f"{path}: unknown card field(s) {', '.join(unknown)}; known: {', '.join(_FIELDS)}"
        )
    raw.setdefault("name", path.stem)
    if raw["name"] != path.stem:
        raise DatasetError(f"{path}: name {raw['name']!r} must match the file name {path.stem!r}")
    if raw.get("layout") not in LAYOUTS:
        raise DatasetError(f"{path}: layout must be one of {LAYOUTS}, got {raw.get('layout')!r}")
    for key in _INTS:
        value = raw.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            raise DatasetError(f"{path}: {key} must be an integer, got {value!r}")
    splits = raw.get("splits", [])
    if not isinstance(splits, list) or not all(isinstance(s, str) for s in splits):
        raise DatasetError(f"{path}: splits must be a list of split names, got {splits!r}")
    raw["splits"] = tuple(splits)
    for key in ("description", "licence", "source"):
        raw[key] = " ".join(str(raw.get(key) or "").split())
    return DatasetCard(**raw)


def detect_layout(folder: Path) -> str | None:
    """``"mteb"`` for ``*.jsonl[.gz]`` split files, ``"trec"`` for TREC files, else None."""
    if mteb.find_splits(folder):
        return mteb.LAYOUT
    if trec.find_splits(folder, "test"):
        return trec.LAYOUT
    return None


def list_datasets(data_dir: str | Path | None = None) -> list[str]:
    """The built-in datasets plus every folder under the data root in either layout."""
    root = data_root(data_dir)
    names = set(BUILTIN)
    if root.is_dir():
        names.update(
            d.name
            for d in root.iterdir()
            if d.is_dir() and not d.name.startswith(".") and detect_layout(d)
        )
    return sorted(names)


def get_card(name: str, data_dir: str | Path | None = None) -> DatasetCard:
    """The card for ``name``; a default card for a folder with no card file."""
    if not name or name != Path(name).name or name.startswith("."):
        raise DatasetError(f"invalid dataset name {name!r}: use a folder name under the data root")
    path = cards_dir() / f"{name}.yaml"
    if path.is_file():
        return read_card(path)
    folder = data_root(data_dir) / name
    layout = detect_layout(folder)
    if layout is None:
        raise DatasetError(
            f"unknown dataset {name!r}: no card {path} and no folder {folder} holding "
            f"{{split}}.jsonl or TREC files; available: {', '.join(list_datasets(data_dir))}"
        )
    splits = mteb.find_splits(folder) if layout == mteb.LAYOUT else trec.find_splits(folder, "test")
    default_split = "test" if "test" in splits else min(splits)
    log.info(
        "%s: no dataset card at %s - using defaults (layout %s, relevance level 1, split %s)",
        name,
        path,
        layout,
        default_split,
    )
    return DatasetCard(
        name=name, layout=layout, default_split=default_split, default=True, source=str(folder)
    )
