"""Dataset cards and the catalogue: which datasets exist and what their files do not say.

A card gives the layout, the relevance level for binary measures, the default split and where the
data comes from. It is read from the dataset's own folder (``<data root>/<name>/card.yaml``, so a
new local dataset is declared without touching the checkout), else from the checkout's
``datasets/cards/<name>.yaml``. A folder with no card still works: it gets a default card with the
layout read off its files, and one warning per command says which relevance level is assumed.
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from bench.core.settings import cards_dir, data_root
from bench.data.files import DatasetError, read_text
from bench.data.layouts import detect_layout, get_layout, layout_names

log = logging.getLogger(__name__)

#: Datasets the harness can fetch (or be pointed at) even when no folder exists yet.
BUILTIN = ("msmarco-titles", "sodq")
#: a card inside the dataset's own folder (wins over the checkout's datasets/cards/<name>.yaml)
CARD_FILE = "card.yaml"


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
    #: drop queries whose every candidate is relevant (counted as ``all_relevant`` in the
    #: dropped queries), as sentence-transformers' RerankingEvaluator, and so MTEB's reranking
    #: tasks, skip them; default False: kept, and every ranker scores 1.0 on them
    drop_all_relevant: bool = False
    #: True when no card file exists and these are defaults
    default: bool = False
    #: the file the card was read from ("" for a default card)
    card_file: str = field(default="", compare=False)

    def to_dict(self) -> dict[str, Any]:
        """The card's content, as recorded with every result."""
        return dataclasses.asdict(self)


_FIELDS = {
    f.name: f for f in dataclasses.fields(DatasetCard) if f.name not in ("default", "card_file")
}
_INTS = ("relevance_level",)
_BOOLS = ("drop_all_relevant",)
#: folders already warned about having no card (one warning per folder and process)
_NO_CARD_WARNED: set[str] = set()


def read_card(path: Path, name: str | None = None) -> DatasetCard:
    """Parse and check one card file; ``name`` is the dataset it must describe (default: the
    file name, as in ``datasets/cards/<name>.yaml``)."""
    name = name or path.stem
    try:
        raw: Any = yaml.safe_load(read_text(path))
    except yaml.YAMLError as exc:
        raise DatasetError(f"{path}: not valid YAML ({exc})") from exc
    if not isinstance(raw, dict):
        raise DatasetError(f"{path}: a dataset card must be a YAML mapping of field: value")
    unknown = sorted(set(raw) - set(_FIELDS))
    if unknown:
        raise DatasetError(
            f"{path}: unknown card field(s) {', '.join(unknown)}; known: {', '.join(_FIELDS)}"
        )
    raw.setdefault("name", name)
    if raw["name"] != name:
        whose = "the file name" if path.stem == name else "the dataset folder's name"
        raise DatasetError(f"{path}: name {raw['name']!r} must match {whose} {name!r}")
    if raw.get("layout") not in layout_names():
        raise DatasetError(
            f"{path}: layout must be one of {layout_names()}, got {raw.get('layout')!r}"
        )
    for key in _INTS:
        value = raw.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            raise DatasetError(f"{path}: {key} must be an integer, got {value!r}")
    for key in _BOOLS:
        value = raw.get(key)
        if value is not None and not isinstance(value, bool):
            raise DatasetError(f"{path}: {key} must be true or false, got {value!r}")
    if raw.get("relevance_level", 1) < 1:
        raise DatasetError(
            f"{path}: relevance_level must be >= 1 (grade 0 means not relevant), "
            f"got {raw['relevance_level']}"
        )
    splits = raw.get("splits", [])
    if not isinstance(splits, list) or not all(isinstance(s, str) for s in splits):
        raise DatasetError(f"{path}: splits must be a list of split names, got {splits!r}")
    raw["splits"] = tuple(splits)
    for key in ("description", "licence", "source"):
        raw[key] = " ".join(str(raw.get(key) or "").split())
    return DatasetCard(**raw, card_file=str(path))


def _is_dataset_folder(folder: Path) -> bool:
    """A folder with a card or either layout's files; one whose files cannot be read or sorted
    out counts too, so listings show it (with its error) instead of failing or hiding it."""
    if folder.name.startswith(".") or not folder.is_dir():
        return False
    if (folder / CARD_FILE).is_file():
        return True
    try:
        return detect_layout(folder) is not None
    except (DatasetError, OSError):
        return True


def list_datasets(data_dir: str | Path | None = None) -> list[str]:
    """The built-in datasets plus every folder under the data root in either layout."""
    root = data_root(data_dir)
    names = set(BUILTIN)
    if root.is_dir():
        names.update(d.name for d in root.iterdir() if _is_dataset_folder(d))
    return sorted(names)


def get_card(name: str, data_dir: str | Path | None = None) -> DatasetCard:
    """The card for ``name``: the data folder's ``card.yaml``, else the checkout's
    ``datasets/cards/<name>.yaml``, else a default card (with a warning naming the assumed
    relevance level, once per folder)."""
    if not name or name != Path(name).name or name.startswith("."):
        raise DatasetError(f"invalid dataset name {name!r}: use a folder name under the data root")
    folder = data_root(data_dir) / name
    local, checkout = folder / CARD_FILE, cards_dir() / f"{name}.yaml"
    if local.is_file():
        card = read_card(local, name)
        if checkout.is_file():
            log.debug("%s: using the data folder's card %s, not %s", name, local, checkout)
        return card
    if checkout.is_file():
        return read_card(checkout)
    layout = detect_layout(folder)
    if layout is None:
        raise DatasetError(
            f"unknown dataset {name!r}: no card ({local} or {checkout}) and no folder {folder} "
            f"holding {{split}}.jsonl or TREC files; available: "
            f"{', '.join(list_datasets(data_dir))}"
        )
    splits = get_layout(layout).find_splits(folder, "test")
    default_split = "test" if "test" in splits else min(splits)
    card = DatasetCard(
        name=name, layout=layout, default_split=default_split, default=True, source=str(folder)
    )
    if str(folder) not in _NO_CARD_WARNED:
        _NO_CARD_WARNED.add(str(folder))
        level, why = get_layout(layout).suggested_level(splits.get(default_split))
        log.warning(
            "%s: no dataset card, so binary measures (AP, RR, P) count grade >= %d as relevant "
            "(layout %s, default split %s); to change that, write %s with e.g. "
            "`layout: %s` and `relevance_level: %d` (the highest level that keeps a relevant "
            "item for every query: %s)",
            name,
            card.relevance_level,
            layout,
            default_split,
            local,
            layout,
            level,
            why,
        )
    return card
