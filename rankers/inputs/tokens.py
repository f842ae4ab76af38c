"""Item token store: WordPiece ids of a collection's items, tokenised once at index time.

Dual encoders precompute item embeddings; a cross-encoder cannot, but it can hold its items'
token ids (a production ranker keeps its keywords tokenised). :class:`ItemTokens` tokenises every
item of ``index()`` once, so scoring only tokenises the query and gathers item rows. Items it has
not seen are tokenised at lookup time (and not kept), so a store never changes scores: looked-up
ids are exactly what the tokenizer gives, in both modes.

Lookups return padded int64 matrices (pad ``-1``), so a list's items are gathered with one fancy
index instead of a Python loop over tokens:

* ``ids``: the item's WordPiece ids in text order, cut to ``max_len``;
* ``distinct``: its distinct ids sorted ascending (what CROSS-JEM's union and pooling use), with
  ``first``: the position in the item of each one's first occurrence (CROSS-JEM item positions).

The store itself holds no Python object per token and no padding (so that a collection of 10^6 items
fits in memory): flat int32 arrays of every item's ids and of its distinct ids and first positions,
with int64 offsets per item, filled chunk by chunk so that the tokenizer's Python lists exist for
one chunk at a time. The one Python object per item is the text -> row dictionary. The simple padded
store it replaced, :class:`PaddedItemTokens`, is kept as the test oracle: both give the same arrays
for every lookup.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

PAD = -1


@dataclasses.dataclass(frozen=True)
class ItemArrays:
    """Token arrays of ``n`` items, rows aligned with the texts asked for."""

    ids: np.ndarray  # (n, width) int64, pad -1
    lens: np.ndarray  # (n,) int64
    distinct: np.ndarray  # (n, width) int64: sorted distinct ids, pad -1 at the end
    first: np.ndarray  # (n, width) int64: first position in the item of each distinct id
    n_distinct: np.ndarray  # (n,) int64

    def __len__(self) -> int:
        return int(self.lens.shape[0])

    def row(self, i: int) -> list[int]:
        """Item ``i``'s ids as a list (the simple implementation's input)."""
        return self.ids[i, : self.lens[i]].tolist()


@dataclasses.dataclass(frozen=True)
class ItemIds:
    """The ids of ``n`` items alone (what a pair of [CLS] q [SEP] k [SEP] is built from)."""

    ids: np.ndarray  # (n, width) int64, pad -1
    lens: np.ndarray  # (n,) int64

    def __len__(self) -> int:
        return int(self.lens.shape[0])


def pad_ragged(rows: Sequence[Sequence[int]], width: int) -> tuple[np.ndarray, np.ndarray]:
    """(len(rows), width) int64 matrix padded with -1, and the row lengths; no per-token loop."""
    lens = np.fromiter((len(r) for r in rows), dtype=np.int64, count=len(rows))
    out = np.full((len(rows), width), PAD, dtype=np.int64)
    if len(rows) and width:
        flat = np.fromiter(itertools.chain.from_iterable(rows), dtype=np.int64, count=lens.sum())
        mask = np.arange(width)[None, :] < lens[:, None]
        out[mask] = flat
    return out, lens


def distinct_sorted(ids: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per row of a padded id matrix: distinct ids ascending, the position of each one's first
    occurrence, and how many there are (vectorised: one sort of id * width + position)."""
    n, width = ids.shape
    if width == 0:
        empty = np.zeros((n, 0), dtype=np.int64)
        return empty, empty.copy(), np.zeros(n, dtype=np.int64)
    valid = ids != PAD
    big = np.iinfo(np.int64).max // 2
    key = np.where(valid, ids * width + np.arange(width)[None, :], big)
    key.sort(axis=1)
    tok, pos = key // width, key % width
    keep = key != big
    keep[:, 1:] &= tok[:, 1:] != tok[:, :-1]  # first occurrence: smallest position per id
    # move kept entries to the left of each row, order preserved
    order = np.argsort(~keep, axis=1, kind="stable")
    keep = np.take_along_axis(keep, order, axis=1)
    distinct = np.where(keep, np.take_along_axis(tok, order, axis=1), PAD)
    first = np.where(keep, np.take_along_axis(pos, order, axis=1), PAD)
    return distinct, first, keep.sum(axis=1)


def tokenise_items(tokenizer: Any, texts: Sequence[str], max_len: int) -> ItemArrays:
    """Arrays of ``texts`` (no special tokens, each cut to ``max_len``), one tokenizer call."""
    if texts:
        enc = tokenizer(list(texts), add_special_tokens=False, truncation=True, max_length=max_len)
        rows = enc["input_ids"]
    else:
        rows = []
    ids, lens = pad_ragged(rows, max_len)
    distinct, first, n_distinct = distinct_sorted(ids)
    return ItemArrays(ids, lens, distinct, first, n_distinct)


class _TextStore:
    """What both stores share: the text -> row dictionary, tokenising now, and a lookup that
    gathers the held rows (:meth:`_held`, each store its own way) and tokenises the others
    without keeping them."""

    def __init__(self, tokenizer: Any, max_len: int) -> None:
        self.tokenizer = tokenizer
        self.max_len = max_len
        self._row: dict[str, int] = {}

    def __len__(self) -> int:
        return len(self._row)

    def tokenise(self, texts: Sequence[str]) -> ItemArrays:
        """Tokenise ``texts`` now (one batched tokenizer call), without keeping them."""
        return tokenise_items(self.tokenizer, texts, self.max_len)

    def _new(self, texts: Iterable[str]) -> list[str]:
        """The distinct texts of ``texts`` not yet held, in first-seen order."""
        return [t for t in dict.fromkeys(texts) if t not in self._row]

    def _held(self, rows: np.ndarray) -> ItemArrays:
        """Arrays of the held ``rows`` (a -1 row, a text not held, may hold anything)."""
        raise NotImplementedError

    def lookup_ids(self, texts: Sequence[str]) -> ItemIds:
        """The ids of ``texts`` alone: :meth:`lookup` without gathering the distinct ids and
        their first positions that only CROSS-JEM reads."""
        arrays = self.lookup(texts)
        return ItemIds(arrays.ids, arrays.lens)

    def lookup(self, texts: Sequence[str]) -> ItemArrays:
        """Arrays for ``texts`` in order: held rows gathered, the others tokenised now."""
        get = self._row.get
        rows = np.fromiter((get(t, -1) for t in texts), dtype=np.int64, count=len(texts))
        missing = np.flatnonzero(rows < 0)
        if len(missing) == len(texts):
            return self.tokenise(texts)
        held = self._held(rows)
        if len(missing):
            fresh = self.tokenise([texts[i] for i in missing.tolist()])
            for f in dataclasses.fields(ItemArrays):
                getattr(held, f.name)[missing] = getattr(fresh, f.name)
        return held


class PaddedItemTokens(_TextStore):
    """The simple store (padded int64 matrices per item, all texts tokenised in one call): the
    test oracle of :class:`ItemTokens`, which must give the same arrays."""

    def __init__(self, tokenizer: Any, max_len: int) -> None:
        super().__init__(tokenizer, max_len)
        self._arrays: ItemArrays | None = None

    def add(self, texts: Iterable[str]) -> int:
        """Tokenise and keep the texts not yet held; returns how many were new."""
        new = self._new(texts)
        if not new:
            return 0
        arrays = self.tokenise(new)
        start = len(self._row)
        for k, text in enumerate(new):
            self._row[text] = start + k
        if self._arrays is None:
            self._arrays = arrays
        else:
            self._arrays = ItemArrays(
                *(
                    np.concatenate([getattr(self._arrays, f.name), getattr(arrays, f.name)])
                    for f in dataclasses.fields(ItemArrays)
                )
            )
        return len(new)

    def _held(self, rows: np.ndarray) -> ItemArrays:
        assert self._arrays is not None
        return ItemArrays(
            *(getattr(self._arrays, f.name)[rows] for f in dataclasses.fields(ItemArrays))
        )


#: texts per tokenizer call when filling the store: bounds the tokenizer's Python lists in memory
CHUNK = 8192
_FLAT = np.int32


def _gather(flat: np.ndarray, starts: np.ndarray, lens: np.ndarray, width: int) -> np.ndarray:
    """(len(starts), width) int64 matrix of ``flat[start : start + len]`` rows, padded with -1."""
    cols = np.arange(width, dtype=np.int64)
    mask = cols[None, :] < lens[:, None]
    out = np.full((len(starts), width), PAD, dtype=np.int64)
    if mask.any():
        out[mask] = flat[(starts[:, None] + cols[None, :])[mask]]
    return out


def sequence_ranks(flat: np.ndarray, offsets: np.ndarray, width: int) -> np.ndarray:
    """Dense ranks of the id sequences ``flat[offsets[i] : offsets[i + 1]]`` in tuple order:
    each row as big-endian ids + 1 padded with 0 (below every id), compared as byte strings."""
    n = len(offsets) - 1
    if n <= 0 or width == 0:
        return np.zeros(max(n, 0), dtype=np.int64)
    starts, lens = offsets[:-1], np.diff(offsets)
    dtype = ">u2" if int(flat.max(initial=0)) < 0xFFFF else ">u4"
    keys = (_gather(flat, starts, lens, width) + 1).astype(dtype)
    keys = np.ascontiguousarray(keys).view(f"S{keys.itemsize * width}").ravel()
    order = np.argsort(keys, kind="stable")
    ranked = keys[order]
    new = np.ones(n, dtype=np.int64)
    new[1:] = ranked[1:] != ranked[:-1]
    ranks = np.empty(n, dtype=np.int64)
    ranks[order] = np.cumsum(new) - 1
    return ranks


class ItemTokens(_TextStore):
    """WordPiece ids of items (no special tokens, cut to ``max_len``), kept per text in flat
    arrays (see the module docstring); lookups give the same :class:`ItemArrays` as
    :class:`PaddedItemTokens`."""

    def __init__(self, tokenizer: Any, max_len: int, chunk: int = CHUNK) -> None:
        super().__init__(tokenizer, max_len)
        self.chunk = chunk
        empty = np.zeros(0, dtype=_FLAT)
        #: every held item's ids, end to end; item i is ids[offsets[i]:offsets[i + 1]]
        self.ids, self.offsets = empty, np.zeros(1, dtype=np.int64)
        #: every held item's sorted distinct ids and their first positions, end to end
        self.distinct, self.first = empty, empty
        self.distinct_offsets = np.zeros(1, dtype=np.int64)
        self._ranks: np.ndarray | None = None
        self._id_bound: int | None = None
        self._counts: np.ndarray | None = None
        self._pairs: np.ndarray | None = None
        self._most: int | None = None

    @property
    def nbytes(self) -> int:
        """Bytes held in the flat arrays (the text -> row dictionary not counted)."""
        arrays = (self.ids, self.offsets, self.distinct, self.first, self.distinct_offsets)
        return sum(a.nbytes for a in arrays)

    def add(self, texts: Iterable[str]) -> int:
        """Tokenise and keep the texts not yet held, :attr:`chunk` at a time; returns how many
        were new."""
        new = self._new(texts)
        if not new:
            return 0
        parts: dict[str, list[np.ndarray]] = {
            k: [] for k in ("ids", "lens", "distinct", "first", "n")
        }
        for start in range(0, len(new), self.chunk):
            arrays = self.tokenise(new[start : start + self.chunk])
            if arrays.ids.size and (arrays.ids.max() > np.iinfo(_FLAT).max):
                raise ValueError(f"token id {arrays.ids.max()} does not fit the store's int32")
            held = arrays.ids != PAD
            kept = arrays.distinct != PAD
            parts["ids"].append(arrays.ids[held].astype(_FLAT))
            parts["lens"].append(arrays.lens)
            parts["distinct"].append(arrays.distinct[kept].astype(_FLAT))
            parts["first"].append(arrays.first[kept].astype(_FLAT))
            parts["n"].append(arrays.n_distinct)
        base = len(self._row)
        self._row.update((text, base + k) for k, text in enumerate(new))
        self.ids = np.concatenate([self.ids, *parts["ids"]])
        self.distinct = np.concatenate([self.distinct, *parts["distinct"]])
        self.first = np.concatenate([self.first, *parts["first"]])
        for name, counts in (("offsets", parts["lens"]), ("distinct_offsets", parts["n"])):
            old = getattr(self, name)
            ends = old[-1] + np.cumsum(np.concatenate(counts))
            setattr(self, name, np.concatenate([old, ends]))
        self._ranks = self._id_bound = self._counts = self._pairs = self._most = None
        return len(new)

    def rows(self, texts: Sequence[str]) -> np.ndarray | None:
        """The store rows of ``texts`` in order; None when one of them is not held (then
        :meth:`lookup` tokenises it)."""
        get = self._row.get
        rows = np.fromiter((get(t, -1) for t in texts), dtype=np.int64, count=len(texts))
        return None if len(rows) and int(rows.min()) < 0 else rows

    @property
    def distinct_first(self) -> np.ndarray:
        """Every held item's distinct ids (row 0) and their first positions (row 1), end to
        end: one gather reads both."""
        if self._pairs is None:
            self._pairs = np.stack([self.distinct, self.first])
        return self._pairs

    @property
    def distinct_counts(self) -> np.ndarray:
        """Per held item: how many distinct ids it has (its cost in a union row)."""
        if self._counts is None:
            self._counts = np.diff(self.distinct_offsets)
        return self._counts

    @property
    def most_distinct(self) -> int:
        """The most distinct ids any held item has (0 when empty)."""
        if self._most is None:
            self._most = int(self.distinct_counts.max(initial=0))
        return self._most

    @property
    def id_bound(self) -> int:
        """One more than the largest distinct id held (0 when empty): every id is below it."""
        if self._id_bound is None:
            self._id_bound = int(self.distinct.max(initial=-1)) + 1
        return self._id_bound

    @property
    def sequence_ranks(self) -> np.ndarray:
        """Per held item: the rank of its id sequence among all held items' in tuple order
        (a shorter prefix first; equal sequences equal ranks), so a stable argsort of a list's
        ranks orders its items by their ids with ties in list order. CROSS-JEM's canonical
        order then costs one small argsort per list instead of a sort of byte strings; computed
        on first use after the store changes."""
        if self._ranks is None:
            self._ranks = sequence_ranks(self.ids, self.offsets, self.max_len)
        return self._ranks

    def lookup_ids(self, texts: Sequence[str]) -> ItemIds:
        rows = self.rows(texts)
        if rows is None:  # a text not held: tokenised with the others' rows
            return super().lookup_ids(texts)
        starts = self.offsets[rows]
        lens = self.offsets[rows + 1] - starts
        return ItemIds(_gather(self.ids, starts, lens, self.max_len), lens)

    def _held(self, rows: np.ndarray) -> ItemArrays:
        safe = np.where(rows < 0, 0, rows)
        starts, dstarts = self.offsets[safe], self.distinct_offsets[safe]
        lens = self.offsets[safe + 1] - starts
        n_distinct = self.distinct_offsets[safe + 1] - dstarts
        width = self.max_len
        return ItemArrays(
            ids=_gather(self.ids, starts, lens, width),
            lens=lens,
            distinct=_gather(self.distinct, dstarts, n_distinct, width),
            first=_gather(self.first, dstarts, n_distinct, width),
            n_distinct=n_distinct,
        )
