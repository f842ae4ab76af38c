"""A result row's label, both ways: written by ``bench run`` and read back by the tables.

A label (``crossjem (minilm-l6, loss=ce, teacher=T+C, fine-tuned)``) is what a comparison record
keeps of how a row was made: the ranker, its model alias, the options that differ from the
ranker's settings for the dataset, whether it was fine-tuned and on which subsets. The README's
tables pick rows from such records. Picking by the label text would tie every table to the
label's exact wording and option order, so a table names the ranker and the options it wants
(:meth:`RowKey.matches`), and one class here both writes labels (:meth:`RowKey.label`, used by
:func:`bench.execution.runner.label_for`) and reads them (:meth:`RowKey.parse`): the two cannot
drift apart, and a test round-trips them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

FINE_TUNED = "fine-tuned"
_TRAIN_SUBSET = re.compile(r"trained on the first (\d+) queries")
_SUBSET = re.compile(r"first (\d+) queries")
#: a part boundary: ", " before an option, the model alias never follows one
_PART = re.compile(r", (?=[\w.-]+=|fine-tuned$|fine-tuned, |trained on the first |first \d+ )")


@dataclass(frozen=True)
class RowKey:
    """What a label says about its row. ``options`` are in label order with their values as
    shown (``model`` first, when the ranker has one); they are the options that differed from the
    ranker's settings when the row was made, so two keys are compared option for option."""

    ranker: str
    options: tuple[tuple[str, str], ...] = ()
    fine_tuned: bool = False
    train_subset: int | None = None
    subset: int | None = None

    def label(self) -> str:
        """The label ``bench run`` writes: ``ranker (model, k=v, ..., fine-tuned, subsets)``."""
        parts = [value if name == "model" else f"{name}={value}" for name, value in self.options]
        if self.fine_tuned:
            parts.append(FINE_TUNED)
        if self.train_subset:
            parts.append(f"trained on the first {self.train_subset} queries")
        if self.subset:
            parts.append(f"first {self.subset} queries")
        return f"{self.ranker} ({', '.join(parts)})" if parts else self.ranker

    @classmethod
    def parse(cls, label: str) -> RowKey:
        """The key :meth:`label` wrote ``label`` from (a value shown with ", " in it stays one
        option: parts are split only before ``name=``, the flags and the subsets)."""
        ranker, sep, rest = label.partition(" (")
        if not sep:
            return cls(ranker)
        if not rest.endswith(")"):
            raise ValueError(f"not a row label: {label!r}")
        options: list[tuple[str, str]] = []
        fine_tuned, train_subset, subset = False, None, None
        for i, part in enumerate(_PART.split(rest[:-1])):
            if part == FINE_TUNED:
                fine_tuned = True
            elif found := _TRAIN_SUBSET.fullmatch(part):
                train_subset = int(found[1])
            elif found := _SUBSET.fullmatch(part):
                subset = int(found[1])
            elif "=" in part:
                name, _, value = part.partition("=")
                options.append((name, value))
            elif i == 0:
                options.append(("model", part))
            else:
                raise ValueError(f"row label {label!r}: cannot read {part!r}")
        return cls(ranker, tuple(options), fine_tuned, train_subset, subset)

    def matches(self, ranker: str, fine_tuned: bool, options: Mapping[str, object]) -> bool:
        """Whether this is the row of ``ranker`` with exactly ``options`` (compared as shown in
        a label, so ``lr=1e-4`` matches ``lr=0.0001``; a None value means "not set"), fine-tuned
        or not; subsets must be absent."""
        wanted = {name: show(value) for name, value in options.items() if value is not None}
        return (
            (self.ranker, self.fine_tuned, self.train_subset, self.subset)
            == (ranker, fine_tuned, None, None)
            and dict(self.options) == wanted
            and len(self.options) == len(wanted)
        )


def show(value: object) -> str:
    """An option value as a label shows it."""
    return str(value)
