"""On-disk dataset layouts, registered like the rankers.

A layout says which files make a split and how to read them into a :class:`RankingSplit`. The
harness asks the registry, never a name: a dataset card's ``layout:`` is checked against it,
detection of a folder without a card tries every registered layout, and loading calls the
layout's :attr:`DatasetLayout.load`. A new layout is one module defining a
:class:`DatasetLayout` plus one
:func:`register_layout` call (``register_layout("name", "module:ATTR")``; the module is imported
when the layout is first needed, so registering costs nothing). The built-in ones are
:mod:`bench.data.mteb` and :mod:`bench.data.trec`.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from bench.data.files import DatasetError

if TYPE_CHECKING:
    from bench.data.cards import DatasetCard
    from bench.data.model import RankingSplit


@dataclass(frozen=True)
class DatasetLayout:
    """What the harness needs to know of one layout."""

    name: str
    #: what its files are, for messages (``{split}.jsonl or {split}.jsonl.gz files``)
    files: str
    #: what its files are called in a listing (``MTEB split files``)
    label: str
    #: ``(folder, default split) -> {split name: path}`` for the splits present in ``folder``
    find_splits: Callable[[Path, str], dict[str, Path]]
    #: ``(folder, split, card) -> RankingSplit``: read (fetching or building it first when the
    #: card says where from) one split; the card's conventions are applied by the caller
    load: Callable[[Path, str, DatasetCard], RankingSplit]
    #: ``(folder, splits) -> [relative file names]``: the files that make it this layout, for the
    #: error naming a folder that holds files of two layouts
    file_names: Callable[[Path, dict[str, Path]], list[str]]
    #: ``split path or None -> (level, why)``: the relevance level a card should declare, for the
    #: warning when a folder has no card
    suggested_level: Callable[[Path | None], tuple[int, str]]


#: layout name -> the DatasetLayout, or "module:ATTR" until first use
_REGISTRY: dict[str, DatasetLayout | str] = {
    "mteb": "bench.data.mteb:LAYOUT_SPEC",
    "trec": "bench.data.trec:LAYOUT_SPEC",
}


def register_layout(name: str, target: DatasetLayout | str) -> None:
    """Register a layout: a :class:`DatasetLayout`, or ``"module:ATTR"`` naming one (imported
    lazily)."""
    if isinstance(target, str) and target.count(":") != 1:
        raise DatasetError(f"layout {name!r}: expected 'module:ATTR', got {target!r}")
    _REGISTRY[name] = target


def layout_names() -> tuple[str, ...]:
    """The registered layouts, in registration order (the built-in ones first)."""
    return tuple(_REGISTRY)


def get_layout(name: str) -> DatasetLayout:
    """The registered layout ``name``; an unknown one lists the known ones."""
    target = _REGISTRY.get(name)
    if target is None:
        raise DatasetError(f"unknown layout {name!r}; known: {', '.join(_REGISTRY)}")
    if isinstance(target, str):
        module, attr = target.split(":")
        layout = getattr(importlib.import_module(module), attr)
        if not isinstance(layout, DatasetLayout) or layout.name != name:
            raise DatasetError(f"layout {name!r}: {target} is not a DatasetLayout named {name!r}")
        _REGISTRY[name] = target = layout
    return target


def detect_layout(folder: Path, default_split: str = "test") -> str | None:
    """The one registered layout whose files ``folder`` holds, else None.

    A folder holding files of several layouts is an error naming each set: silently picking one
    would rank data the user may not have meant."""
    found = {}
    for name in _REGISTRY:
        layout = get_layout(name)
        splits = layout.find_splits(folder, default_split)
        if splits:
            found[name] = (layout, splits)
    if len(found) > 1:
        sets = " and ".join(
            f"{layout.label} ({', '.join(layout.file_names(folder, splits))})"
            for layout, splits in found.values()
        )
        several = "both layouts" if len(found) == 2 else f"{len(found)} layouts"
        keep = "remove one set" if len(found) == 2 else "remove all but one set"
        choices = " or ".join(f"layout: {name}" for name in found)
        raise DatasetError(
            f"{folder} holds files of {several}: {sets}; {keep}, or declare the layout in "
            f"{folder / 'card.yaml'} ({choices})"
        )
    return next(iter(found), None)
