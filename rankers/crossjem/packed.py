"""CROSS-JEM inputs with array operations: what scoring and training run on.

:mod:`rankers.crossjem.inputs` builds rows with Python loops over tokens and is the test oracle;
this module builds the same rows, pooling sets and item positions with NumPy, from the token
arrays of :class:`rankers.tokens.ItemTokens`, in a form the model pools from with index tensors
(:class:`PackedRows`):

* rows ``[CLS] query [SEP] union [SEP]`` as one padded id matrix, with each row's length and the
  end of its query part (attention mask and token types follow on the device);
* pooled union tokens as flat ``(slot, row, position, item offset)`` arrays: item ``k``'s pooled
  positions are the query part of its row (shared by every item of the row) plus the positions
  of its distinct tokens in the union;
* rows sorted by length into buckets (one encoder call each, padding within ``tolerance``), with
  rows, slots and tokens contiguous per bucket so that the device only slices.

Canonical order, next-fit packing, the sorted union and first-occurrence item positions are the
oracle's rules, so both give identical inputs (``tests/test_crossjem.py`` checks it).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from rankers.crossjem.inputs import length_buckets
from rankers.tokens import PAD, ItemArrays


@dataclasses.dataclass(frozen=True)
class Bucket:
    """One encoder call: rows ``[r0, r1)`` cut to ``width`` columns, their item slots
    ``[s0, s1)`` and pooled union tokens ``[t0, t1)``."""

    r0: int
    r1: int
    s0: int
    s1: int
    t0: int
    t1: int
    width: int


@dataclasses.dataclass
class PackedRows:
    """Host-side (NumPy int64) inputs of one forward pass over several queries' lists.

    Per row: ``input_ids``, ``row_len``, ``query_end`` (positions ``1 .. query_end - 1``, the
    query and its [SEP], are pooled by every item of the row). Per item slot: ``slot_row`` (row
    within its bucket), ``slot_count`` (pooled positions), ``slot_list`` / ``slot_item`` (which
    list and candidate it scores). Per pooled union token: ``tok_slot`` (slot within its
    bucket), ``tok_row`` (row within its bucket), ``tok_pos`` and ``tok_offset`` (position inside
    its item, for item positions).
    """

    input_ids: np.ndarray
    row_len: np.ndarray
    query_end: np.ndarray
    slot_row: np.ndarray
    slot_count: np.ndarray
    slot_list: np.ndarray
    slot_item: np.ndarray
    tok_slot: np.ndarray
    tok_row: np.ndarray
    tok_pos: np.ndarray
    tok_offset: np.ndarray
    buckets: list[Bucket]
    n_items: list[int]

    #: the array fields, in upload order
    ARRAYS = (
        "input_ids",
        "row_len",
        "query_end",
        "slot_row",
        "slot_count",
        "slot_list",
        "slot_item",
        "tok_slot",
        "tok_row",
        "tok_pos",
        "tok_offset",
    )

    @property
    def rows(self) -> int:
        return int(self.input_ids.shape[0])

    def groups(self) -> list[list[tuple[int, int]]]:
        """(list, item) pairs of each row, in row order (for tests and statistics)."""
        out: list[list[tuple[int, int]]] = []
        for b in self.buckets:
            rows = self.slot_row[b.s0 : b.s1]
            for r in range(b.r1 - b.r0):
                picked = np.flatnonzero(rows == r) + b.s0
                out.append(
                    [(int(self.slot_list[s]), int(self.slot_item[s])) for s in picked.tolist()]
                )
        return out


def canonical_order(ids: np.ndarray) -> np.ndarray:
    """Item indices sorted by their id sequences (shorter prefix first), ties by index: the
    oracle's ``sorted(range(n), key=lambda i: (tuple(items[i]), i))`` without a Python key.

    Ids + 1 as big-endian uint16 make each row a byte string whose order is the tuple order
    (padding becomes 0, below every id); a stable sort keeps index order on ties."""
    n, width = ids.shape
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    if width == 0:
        return np.arange(n)
    if int(ids.max(initial=0)) >= 0xFFFF:  # ids that do not fit 16 bits: sort column by column
        return np.lexsort(ids.T[::-1])
    keys = np.ascontiguousarray((ids + 1).astype(">u2")).view(f"S{2 * width}").ravel()
    return np.argsort(keys, kind="stable")


def next_fit_cuts(
    item_start: np.ndarray, item_end: np.ndarray, prev: np.ndarray, union_len: int
) -> np.ndarray:
    """Group of each item (in canonical order) under next-fit packing.

    ``prev[o]``: index of the previous occurrence of occurrence ``o``'s token (-1: none), with
    the items' distinct tokens laid out item after item. A group starting at item ``a`` has, after
    item ``b``, as many distinct tokens as occurrences in ``[start_a, end_b)`` whose previous
    occurrence lies before ``start_a``: one cumulative sum per group, over a window that doubles
    until the cut falls inside it."""
    n, total = len(item_start), int(item_end[-1]) if len(item_end) else 0
    group = np.empty(n, dtype=np.int64)
    a, g = 0, 0
    while a < n:
        s_a = int(item_start[a])
        window = 4 * union_len
        while True:
            e = min(total, s_a + window)
            cum = np.zeros(e - s_a + 1, dtype=np.int64)
            np.cumsum(prev[s_a:e] < s_a, out=cum[1:])
            b_hi = int(np.searchsorted(item_end, e, side="right"))
            sizes = cum[item_end[a:b_hi] - s_a]
            fit = int(np.searchsorted(sizes, union_len, side="right"))
            if fit < b_hi - a or e == total:
                break
            window *= 2
        group[a : a + fit] = g
        a += fit
        g += 1
    return group


@dataclasses.dataclass
class _QueryRows:
    input_ids: np.ndarray
    row_len: np.ndarray
    query_end: np.ndarray
    slot_row: np.ndarray
    slot_count: np.ndarray
    slot_item: np.ndarray
    tok_slot: np.ndarray
    tok_row: np.ndarray
    tok_pos: np.ndarray
    tok_offset: np.ndarray


def query_rows(
    query: np.ndarray, items: ItemArrays, union_len: int, cls: int, sep: int, pad: int
) -> _QueryRows:
    """Rows, slots and pooled tokens of one query (slots in canonical order; ``tok_slot`` and
    ``slot_row`` relative to this query)."""
    n = len(items)
    too_long = np.flatnonzero(items.n_distinct > union_len)
    if len(too_long):
        i = int(too_long[0])
        raise ValueError(
            f"item {i} has {int(items.n_distinct[i])} distinct tokens, "
            f"more than union_len={union_len}"
        )
    if n == 0:
        none = np.zeros(0, dtype=np.int64)
        return _QueryRows(np.zeros((0, 0), np.int64), *([none] * 9))
    order = canonical_order(items.ids)
    n_distinct = items.n_distinct[order]
    distinct = items.distinct[order]
    valid = distinct != PAD
    occ_tok = distinct[valid]
    occ_first = items.first[order][valid]
    occ_item = np.repeat(np.arange(n), n_distinct)
    item_end = np.cumsum(n_distinct)
    item_start = item_end - n_distinct
    # previous occurrence of the same token (occurrences are item-major)
    prev = np.full(len(occ_tok), -1, dtype=np.int64)
    by_tok = np.argsort(occ_tok, kind="stable")
    same = occ_tok[by_tok][1:] == occ_tok[by_tok][:-1]
    prev[by_tok[1:][same]] = by_tok[:-1][same]
    group = next_fit_cuts(item_start, item_end, prev, union_len)
    n_rows = int(group[-1]) + 1
    # the sorted union of each group, and each occurrence's rank in it
    occ_group = group[occ_item]
    vocab = int(occ_tok.max(initial=0)) + 1
    union_keys, rank_of = np.unique(occ_group * vocab + occ_tok, return_inverse=True)
    union_group, union_tok = union_keys // vocab, union_keys % vocab
    group_start = np.searchsorted(union_group, np.arange(n_rows))
    union_size = np.diff(np.append(group_start, len(union_keys)))
    union_rank = np.arange(len(union_keys)) - group_start[union_group]
    q_len = len(query)
    start = q_len + 2  # [CLS] query [SEP]
    row_len = start + union_size + 1
    width = int(row_len.max(initial=0))
    input_ids = np.full((n_rows, width), pad, dtype=np.int64)
    input_ids[:, 0] = cls
    input_ids[:, 1 : start - 1] = query
    input_ids[:, start - 1] = sep
    input_ids[union_group, start + union_rank] = union_tok
    input_ids[np.arange(n_rows), row_len - 1] = sep
    return _QueryRows(
        input_ids=input_ids,
        row_len=row_len,
        query_end=np.full(n_rows, start, dtype=np.int64),
        slot_row=group,
        slot_count=(start - 1) + n_distinct,
        slot_item=order,
        tok_slot=occ_item,
        tok_row=occ_group,
        tok_pos=start + union_rank[np.ravel(rank_of)],
        tok_offset=occ_first,
    )


def pack_lists(
    queries: Sequence[np.ndarray],
    items: Sequence[ItemArrays],
    union_len: int,
    cls: int,
    sep: int,
    pad: int,
    tolerance: float | None = None,
) -> PackedRows:
    """The packed rows of several queries. ``tolerance``: cut rows into length buckets whose
    padding stays within that fraction of their real tokens (see
    :func:`~rankers.crossjem.inputs.length_buckets`); None: one bucket, the rows in query order
    (training)."""
    parts = [
        query_rows(q, it, union_len, cls, sep, pad) for q, it in zip(queries, items, strict=True)
    ]
    n_items = [len(it) for it in items]
    row_base = np.cumsum([0] + [len(p.row_len) for p in parts])
    slot_base = np.cumsum([0] + [len(p.slot_row) for p in parts])
    cat = np.concatenate

    def joined(name: str) -> np.ndarray:
        arrays = [getattr(p, name) for p in parts]
        return cat(arrays) if arrays else np.zeros(0, dtype=np.int64)

    row_len, query_end = joined("row_len"), joined("query_end")
    slot_row = cat([p.slot_row + row_base[k] for k, p in enumerate(parts)] or [np.zeros(0, int)])
    tok_slot = cat([p.tok_slot + slot_base[k] for k, p in enumerate(parts)] or [np.zeros(0, int)])
    tok_row = cat([p.tok_row + row_base[k] for k, p in enumerate(parts)] or [np.zeros(0, int)])
    slot_list = np.repeat(np.arange(len(parts)), [len(p.slot_row) for p in parts])
    width = max((p.input_ids.shape[1] for p in parts), default=0)
    input_ids = np.full((int(row_base[-1]), width), pad, dtype=np.int64)
    for k, p in enumerate(parts):
        input_ids[row_base[k] : row_base[k + 1], : p.input_ids.shape[1]] = p.input_ids

    # rows in bucket order; slots and tokens follow their rows (stable: canonical order kept)
    if tolerance is None or not len(row_len):
        runs = [list(range(len(row_len)))] if len(row_len) else []
    else:
        runs = length_buckets(row_len.tolist(), tolerance)
    row_order = np.asarray([r for run in runs for r in run], dtype=np.int64)
    new_row = np.empty_like(row_order)
    new_row[row_order] = np.arange(len(row_order))
    slot_order = np.argsort(new_row[slot_row], kind="stable")
    new_slot = np.empty_like(slot_order)
    new_slot[slot_order] = np.arange(len(slot_order))
    tok_order = np.argsort(new_slot[tok_slot], kind="stable")

    slot_row_new = new_row[slot_row][slot_order]
    tok_slot_new = new_slot[tok_slot][tok_order]
    tok_row_new = new_row[tok_row][tok_order]
    row_len_new = row_len[row_order]
    buckets, r0 = [], 0
    bounds_s = np.searchsorted(slot_row_new, np.cumsum([len(run) for run in runs]))
    bounds_t = np.searchsorted(tok_slot_new, bounds_s)
    s0 = t0 = 0
    row_start = np.zeros(len(row_order), dtype=np.int64)
    slot_start = np.zeros(len(slot_order), dtype=np.int64)
    for k, run in enumerate(runs):
        r1, s1, t1 = r0 + len(run), int(bounds_s[k]), int(bounds_t[k])
        buckets.append(Bucket(r0, r1, s0, s1, t0, t1, int(row_len_new[r0:r1].max())))
        row_start[r0:r1] = r0
        slot_start[s0:s1] = s0
        r0, s0, t0 = r1, s1, t1
    return PackedRows(
        input_ids=input_ids[row_order],
        row_len=row_len_new,
        query_end=query_end[row_order],
        slot_row=slot_row_new - row_start[slot_row_new],
        slot_count=joined("slot_count")[slot_order],
        slot_list=slot_list[slot_order],
        slot_item=joined("slot_item")[slot_order],
        tok_slot=tok_slot_new - slot_start[tok_slot_new],
        tok_row=tok_row_new - row_start[tok_row_new],
        tok_pos=joined("tok_pos")[tok_order],
        tok_offset=joined("tok_offset")[tok_order],
        buckets=buckets,
        n_items=n_items,
    )
