"""A result row's label, both ways: written by ``bench run`` and read back by the tables.

A label (``crossjem (minilm-l6, loss=ce, teacher=T+C, fine-tuned)``) is what a comparison record
keeps of how a row was made: the ranker, its model alias, the options that differ from the
ranker's settings for the dataset, whether it was fine-tuned and on which subsets. The README's
tables pick rows from such records. Picking by the label text would tie every table to the
label's exact wording and option order, so a table names the ranker and the options it wants
(:meth:`RowKey.matches`), and one class here both writes labels (:meth:`RowKey.label`, used by
:func:`bench.execution.runner.label_for`) and reads them (:meth:`RowKey.parse`): the two cannot
drift apart, and a test round-trips them.

A row scored from a file the harness did not make (a run file) also names the file's bytes
(``input sha256 1a2b3c4d5e6f``): two files of the same name from different systems are two
rows, and a reader can match a row to its file with ``sha256sum``.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass

FINE_TUNED = "fine-tuned"
_TRAIN_SUBSET = re.compile(r"trained on the first (\d+) queries")
_SUBSET = re.compile(r"first (\d+) queries")
_INPUT_PREFIX = "input sha256 "
_INPUT = re.compile(re.escape(_INPUT_PREFIX) + r"([0-9a-f]+)")
#: hex digits of an input's SHA-256 a label shows (enough to tell files apart, short to read)
INPUT_DIGITS = 12
#: a part boundary: ", " before an option, the model alias never follows one
_PART = re.compile(
    r", (?=[\w.-]+=|input sha256 [0-9a-f]+(?:$|, )|fine-tuned$|fine-tuned, "
    r"|trained on the first |first \d+ )"
)


@dataclass(frozen=True)
class RowKey:
    """What a label says about its row. ``options`` are in label order with their values as
    shown (``model`` first, when the ranker has one); they are the options that differed from the
    ranker's settings when the row was made, so two keys are compared option for option.
    ``input`` is the SHA-256 (first :data:`INPUT_DIGITS` hex) of the file the scores were read
    from, for rankers that read one (None for the others)."""

    ranker: str
    options: tuple[tuple[str, str], ...] = ()
    fine_tuned: bool = False
    train_subset: int | None = None
    subset: int | None = None
    input: str | None = None

    def label(self) -> str:
        """The label ``bench run`` writes: ``ranker (model, k=v, ..., fine-tuned, subsets)``."""
        parts = [value if name == "model" else f"{name}={value}" for name, value in self.options]
        if self.input:
            parts.append(_INPUT_PREFIX + self.input)
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
        fine_tuned, train_subset, subset, input_ = False, None, None, None
        for i, part in enumerate(_PART.split(rest[:-1])):
            if found := _INPUT.fullmatch(part):
                input_ = found[1]
            elif part == FINE_TUNED:
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
        return cls(ranker, tuple(options), fine_tuned, train_subset, subset, input_)

    def matches(self, ranker: str, fine_tuned: bool, options: Mapping[str, object]) -> bool:
        """Whether this is the row of ``ranker`` with exactly ``options`` (compared as shown in
        a label, so ``lr=1e-4`` matches ``lr=0.0001``; a None value means "not set"), fine-tuned
        or not; subsets must be absent. The input file is not compared: rows that differ only by
        it all match, so a table that picks one of them is told that several do."""
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


def input_digest(files: Mapping[str, str]) -> str | None:
    """What a label shows of the files a row's scores were read from (path -> SHA-256): the
    first :data:`INPUT_DIGITS` hex of the one file's SHA-256 (what ``sha256sum`` prints), of
    the SHA-256 of their sorted digests for several; None without any."""
    if not files:
        return None
    digests = sorted(files.values())
    whole = digests[0] if len(digests) == 1 else hashlib.sha256("\n".join(digests).encode())
    text = whole if isinstance(whole, str) else whole.hexdigest()
    return text[:INPUT_DIGITS]
