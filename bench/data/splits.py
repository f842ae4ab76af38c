"""Loading a dataset's splits: the data root, the dataset's card and layout, one split as a
:class:`~bench.data.model.RankingSplit` with the card attached, and which split is dev."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from bench.core.settings import data_root
from bench.data.cards import DatasetCard, get_card, list_datasets
from bench.data.files import DatasetError
from bench.data.layouts import get_layout
from bench.data.model import RankingSplit

#: names a development split (epoch selection) goes by, in order of preference
DEV_SPLITS = ("dev", "validation", "val")


def dev_split_name(splits: Iterable[str]) -> str | None:
    """The development split among ``splits`` (``dev``, ``validation`` or ``val``), or None."""
    available = set(splits)
    return next((name for name in DEV_SPLITS if name in available), None)


def dataset_splits(
    dataset: str, data_dir: str | Path | None = None, local_only: bool = False
) -> list[str]:
    """Splits present under the data root, plus (unless ``local_only``) those the card says can
    be fetched - loading one of those downloads or builds it."""
    resolved = Dataset.resolve(dataset, data_dir)
    return list(resolved.local if local_only else resolved.splits)


def existing_data_root(data_dir: str | Path | None = None) -> Path:
    """The data root (:func:`bench.core.settings.data_root`), or a DatasetError when that folder
    does not exist: a listing of it would otherwise show only the built-in datasets and exit 0."""
    root = data_root(data_dir)
    if not root.is_dir():
        raise DatasetError(
            f"the data folder {root} does not exist (--data-dir, else $BENCH_DATA_DIR, else "
            "./datasets); point --data-dir or $BENCH_DATA_DIR at the folder holding the datasets"
        )
    return root


def _no_data(
    dataset: str, folder: Path, card: DatasetCard, data_dir: str | Path | None
) -> DatasetError:
    """The error for a dataset with a card but no split of the card's layout: a missing data
    root or folder, or a folder whose files are not what the card's layout reads (which, and
    what it holds instead)."""
    existing_data_root(data_dir)
    if not folder.is_dir():
        return DatasetError(
            f"dataset {dataset!r} has a card but no data in {folder}; point --data-dir (or "
            f"$BENCH_DATA_DIR) at a folder holding {dataset}/, "
            f"available here: {', '.join(list_datasets(data_dir))}"
        )
    found = sorted(p.name + ("/" if p.is_dir() else "") for p in folder.iterdir())
    shown = ", ".join(found[:8]) + (f" and {len(found) - 8} more" if len(found) > 8 else "")
    card_file = card.card_file or f"the card of {dataset}"
    return DatasetError(
        f"dataset {dataset!r}: {card_file} declares layout {card.layout}, which reads "
        f"{get_layout(card.layout).files}, but {folder} holds {shown or 'no files'}; "
        "fix the card's layout or the files"
    )


@dataclass(frozen=True)
class Dataset:
    """One dataset resolved once: the data root, its folder, its card and the splits on disk.

    A command resolves each dataset it reads once (:meth:`RunContext.dataset
    <bench.execution.context.RunContext.dataset>`) and hands this on, so the root, the card and
    the layout's file search are not looked up again by every step that needs a piece of them.
    """

    name: str
    root: Path
    card: DatasetCard
    #: splits present in the folder when resolved
    local: tuple[str, ...]

    @classmethod
    def resolve(cls, name: str, data_dir: str | Path | None = None) -> Dataset:
        """The dataset ``name`` under the data root (``--data-dir``, else ``$BENCH_DATA_DIR``...);
        a DatasetError names what is missing."""
        root = data_root(data_dir)
        card = get_card(name, root)
        splits = get_layout(card.layout).find_splits(root / name, card.default_split)
        return cls(name, root, card, tuple(sorted(splits)))

    @property
    def folder(self) -> Path:
        return self.root / self.name

    @property
    def splits(self) -> tuple[str, ...]:
        """The splits on disk and those the card can fetch (loading one downloads or builds it)."""
        return tuple(sorted({*self.local, *self.card.splits}))

    def dev_split(self) -> str | None:
        """The development split (:data:`DEV_SPLITS`), or None."""
        return dev_split_name(self.splits)

    def load(self, split: str | None = None) -> RankingSplit:
        """Load one split (the card's default split when ``split`` is None)."""
        split = split or self.card.default_split
        available = self.splits
        if not available:
            raise _no_data(self.name, self.folder, self.card, self.root)
        if split not in available:
            raise DatasetError(
                f"unknown split {split!r} of dataset {self.name!r}; available: "
                f"{', '.join(available)}"
            )
        result = get_layout(self.card.layout).load(self.folder, split, self.card)
        return _with_card(result, self.card)


def load_split(
    dataset: str, split: str | None = None, data_dir: str | Path | None = None
) -> RankingSplit:
    """Load one split (the card's default split when ``split`` is None)."""
    return Dataset.resolve(dataset, data_dir).load(split)


def _with_card(split: RankingSplit, card: DatasetCard) -> RankingSplit:
    """The loaded split with its card recorded and the card's conventions applied (queries
    whose every candidate is relevant dropped when it says ``drop_all_relevant``)."""
    split.card = card.to_dict()
    return split.without_all_relevant() if card.drop_all_relevant else split
