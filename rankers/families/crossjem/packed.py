"""CROSS-JEM inputs with array operations: what scoring and training run on.

:mod:`rankers.families.crossjem.inputs` builds rows with Python loops over tokens and is the test
oracle;
this module builds the same rows, pooling sets and item positions with NumPy, from the token
arrays of :class:`rankers.inputs.tokens.ItemTokens`, in a form the model pools from with index
tensors
(:class:`PackedRows`):

* rows ``[CLS] query [SEP] shared own_1 ... own_k [SEP]`` (the
  :class:`~rankers.families.crossjem.inputs.
  Layout` decides which tokens are shared: all of them in the paper's union) as one padded id
  matrix, with each row's length and the end of its query part (attention mask and token types
  follow on the device), and position ids where own tokens are numbered by their place in the
  item;
* pooled item tokens as flat ``(slot, row, position, item offset)`` arrays: item ``k``'s pooled
  positions are the query part of its row (shared by every item of the row) plus the positions
  of its distinct shared tokens and of its own tokens;
* rows sorted by length into buckets (one encoder call each, padding within ``tolerance``), with
  rows, slots and tokens contiguous per bucket so that the device only slices.

Canonical order, the shared tokens, next-fit packing, the sorted shared block, own segments and
first-occurrence item positions are the oracle's rules, so both give identical inputs
(``tests/test_crossjem.py`` and ``tests/test_crossjem_order.py`` check it). The array steps come
in two kinds: the simple ones (``reference=True``) and the fast kernels of
:mod:`rankers.families.crossjem.fastpack` that scoring runs, tested bit-identical against them
(``tests/test_crossjem_fastpack.py``). The records (:class:`PackedRows`, :class:`Bucket`) live
in :mod:`rankers.families.crossjem.records`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from rankers.families.crossjem import fastpack
from rankers.families.crossjem.inputs import CONCAT, UNION, Layout, length_buckets
from rankers.families.crossjem.records import Bucket, PackedRows, drop_default_positions
from rankers.inputs.tokens import PAD, ItemArrays

__all__ = [
    "Bucket",
    "PackedRows",
    "drop_default_positions",
    "pack_lists",
    "query_rows",
]


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
    position_ids: np.ndarray | None
    row_len: np.ndarray
    query_end: np.ndarray
    slot_row: np.ndarray
    slot_count: np.ndarray
    slot_item: np.ndarray
    tok_slot: np.ndarray
    tok_row: np.ndarray
    tok_pos: np.ndarray
    tok_offset: np.ndarray
    first_ids: np.ndarray | None = None
    first_len: np.ndarray | None = None
    merge_dst: np.ndarray | None = None
    #: whether each pooled token is a shared one (merging needs it)
    tok_shared: np.ndarray | None = None


def shared_mask(items: ItemArrays, layout: Layout, query: np.ndarray | None = None) -> np.ndarray:
    """Which entries of ``items.distinct`` are shared tokens (held by at least
    ``layout.min_holders(n)`` of the list's n items, function words only under ``share="function"``,
    query terms never when they are pooled from the query); the oracle's
    :meth:`Layout.shared_tokens`."""
    valid = items.distinct != PAD
    need = layout.min_holders(len(items))
    if need is None:
        return np.zeros_like(valid)
    if need > 1 or layout.content_min:  # holder counts: only where a rule reads them
        tokens, holders = np.unique(items.distinct[valid], return_counts=True)
    if need > 1:
        valid &= np.isin(items.distinct, tokens[holders >= need])
    if layout.share == "function":
        if layout.function_ids is None:
            raise ValueError("share=function needs the tokenizer: use Layout.bind(tokenizer)")
        function = np.isin(items.distinct, np.fromiter(layout.function_ids, np.int64))
        if layout.content_min:
            function |= np.isin(items.distinct, tokens[holders >= layout.content_min])
        valid &= function
    if layout.query_pool and query is not None:
        valid &= ~np.isin(items.distinct, query)
    return valid


def query_rows(
    query: np.ndarray,
    items: ItemArrays,
    union_len: int,
    cls: int,
    sep: int,
    pad: int,
    layout: Layout = UNION,
    group: np.ndarray | None = None,
    reference: bool = False,
) -> _QueryRows:
    """Rows, slots and pooled tokens of one query (slots in canonical order; ``tok_slot`` and
    ``slot_row`` relative to this query).

    Each item's row content is laid out as occurrences (:func:`_occurrences`), item after item in
    canonical order: its distinct shared tokens (ascending, as in ``items.distinct``), then its
    own tokens in item order. ``group``: the group of each item in canonical order (default:
    next-fit packing of this layout's content, :func:`next_fit_cuts`). The vectorised core writes
    the rows (:func:`write_rows`); the layout's options add to it: item positions
    (``positions="item"``, :func:`_item_positions`), query terms pooled from the query
    (:func:`_pool_query_terms`), and a merged layout (``merge_layers`` > 0), packed by its concat
    rows, which become the first rows (:func:`merge_targets`).

    ``reference``: the simple array steps (the test oracle); else the kernels of
    :mod:`~rankers.families.crossjem.fastpack`, which give the same arrays."""
    if layout.merge_layers:
        first = query_rows(query, items, union_len, cls, sep, pad, CONCAT, None, reference)
        rows = query_rows(
            query, items, union_len, cls, sep, pad, layout.target, first.slot_row, reference
        )
        return merge_targets(first, rows)
    n = len(items)
    order = canonical_order(items.ids) if n else np.zeros(0, dtype=np.int64)
    distinct, first, ids = items.distinct[order], items.first[order], items.ids[order]
    pooled = query if layout.query_pool else np.zeros(0, np.int64)
    if reference:
        is_shared = shared_mask(items, layout, query)[order]
        shared_tok = np.unique(distinct[is_shared]) if is_shared.any() else np.zeros(0, np.int64)
        is_own = (ids != PAD) & ~np.isin(ids, shared_tok) & ~np.isin(ids, pooled)
    else:
        is_shared, is_own = fastpack.split_tokens(ids, distinct, layout, query)
    cost = is_shared.sum(axis=1) + is_own.sum(axis=1)
    too_long = np.flatnonzero(cost > union_len)
    if len(too_long):
        k = int(too_long[0])
        raise ValueError(
            f"item {int(order[k])} needs {int(cost[k])} row tokens, more than union_len={union_len}"
        )
    if n == 0:
        none = np.zeros(0, dtype=np.int64)
        return _QueryRows(np.zeros((0, 0), np.int64), None, *([none] * 9))
    occ = _occurrences(ids, distinct, first, is_shared, is_own, reference)
    if group is None and reference:
        group = next_fit_cuts(occ.item_start, occ.item_end, occ.prev, union_len)
    elif group is None:
        group = fastpack.next_fit_groups(occ.item_end, occ.prev, union_len)
    input_ids, row_len, tok_pos = _write_rows(query, occ, group, cls, sep, pad, reference)
    start = len(query) + 2  # [CLS] query [SEP]
    position_ids = None
    if layout.positions == "item" and len(occ.tok):
        position_ids = _item_positions(input_ids, occ, group, tok_pos, ids, start)
    tokens = _Tokens(occ.item, group[occ.item], tok_pos, occ.offset, occ.shared)
    slot_count = (start - 1) + cost
    if len(pooled):
        tokens, slot_count = _pool_query_terms(query, distinct, first, group, tokens, slot_count)
    return _QueryRows(
        input_ids=input_ids,
        position_ids=position_ids,
        row_len=row_len,
        query_end=np.full(len(row_len), start, dtype=np.int64),
        slot_row=group,
        slot_count=slot_count,
        slot_item=order,
        tok_slot=tokens.slot,
        tok_row=tokens.row,
        tok_pos=tokens.pos,
        tok_offset=tokens.offset,
        tok_shared=tokens.shared,
    )


@dataclasses.dataclass
class _Occurrences:
    """One query's row content, item after item in canonical order: each item's distinct shared
    tokens, then its own tokens. A shared occurrence adds a token to its group only when the
    group holds no earlier occurrence of it (``prev``); an own one always does unless its item
    copies the previous one (``is_copy``: it pools the own tokens of the first of its run,
    ``source``), which is what :func:`next_fit_cuts` counts."""

    #: per occurrence: its item (canonical index), token, offset in the item, whether shared
    item: np.ndarray
    tok: np.ndarray
    offset: np.ndarray
    shared: np.ndarray
    #: per occurrence: the previous occurrence that makes it add nothing (-1: none)
    prev: np.ndarray
    #: per item: its occurrences ``[item_start, item_end)``
    item_start: np.ndarray
    item_end: np.ndarray
    #: the shared and the own occurrences (indices)
    sh_occ: np.ndarray
    own_occ: np.ndarray
    #: per own occurrence: whether its item copies the previous one, and the occurrence it pools
    is_copy: np.ndarray
    source: np.ndarray
    #: the shared occurrences sorted by token (stable), where the fast kernels keep it
    by_tok: np.ndarray | None = None


def _occurrences(
    ids: np.ndarray,
    distinct: np.ndarray,
    first: np.ndarray,
    is_shared: np.ndarray,
    is_own: np.ndarray,
    reference: bool = True,
) -> _Occurrences:
    """The :class:`_Occurrences` of items (canonical order) with these shared and own tokens
    (``reference``: the simple steps; else :func:`~rankers.families.crossjem.fastpack.
    occurrence_arrays`)."""
    n, width = ids.shape
    n_own = is_own.sum(axis=1)
    cost = is_shared.sum(axis=1) + n_own
    item_end = np.cumsum(cost)
    by_tok: np.ndarray | None = None
    if reference:
        # occurrences, item-major: shared ones (columns 0 .. w-1) before own ones (w .. 2w-1)
        sh_item, sh_col = np.nonzero(is_shared)
        own_item, own_col = np.nonzero(is_own)
        occ_item = np.concatenate([sh_item, own_item])
        occ_order = np.argsort(occ_item * (2 * width) + np.concatenate([sh_col, own_col + width]))
        occ_item = occ_item[occ_order]
        occ_tok = np.concatenate([distinct[sh_item, sh_col], ids[own_item, own_col]])[occ_order]
        occ_offset = np.concatenate([first[sh_item, sh_col], own_col])[occ_order]
        occ_shared = occ_order < len(sh_item)
        # previous occurrence of the same shared token (own occurrences add a token, except a
        # copy's)
        prev = np.full(len(occ_tok), -1, dtype=np.int64)
        sh_occ = np.flatnonzero(occ_shared)
        by_tok_ref = sh_occ[np.argsort(occ_tok[sh_occ], kind="stable")]
        same = occ_tok[by_tok_ref][1:] == occ_tok[by_tok_ref][:-1]
        prev[by_tok_ref[1:][same]] = by_tok_ref[:-1][same]
    else:
        arrays = fastpack.occurrence_arrays(ids, distinct, first, is_shared, is_own)
        occ_item, occ_tok, occ_offset, occ_shared, prev, by_tok = arrays
        sh_occ = np.flatnonzero(occ_shared)
    if reference or len(sh_occ) < len(occ_tok):
        own_occ, is_copy, source = _copies(ids, occ_item, occ_shared, n_own, prev)
    else:  # no own occurrence (a union row)
        own_occ = source = np.zeros(0, dtype=np.int64)
        is_copy = np.zeros(0, dtype=bool)
    return _Occurrences(
        item=occ_item,
        tok=occ_tok,
        offset=occ_offset,
        shared=occ_shared,
        prev=prev,
        item_start=item_end - cost,
        item_end=item_end,
        sh_occ=sh_occ,
        own_occ=own_occ,
        is_copy=is_copy,
        source=source,
        by_tok=by_tok,
    )


def _copies(
    ids: np.ndarray,
    occ_item: np.ndarray,
    occ_shared: np.ndarray,
    n_own: np.ndarray,
    prev: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The own occurrences, whether their item copies the previous one, and the occurrence each
    pools; ``prev`` of a copy's own occurrences is set to that occurrence.

    A copy of the previous item (canonical order puts identical items together) pools the own
    tokens of the first of its run: its own occurrences point at those, so they add nothing."""
    n = len(ids)
    own_occ = np.flatnonzero(~occ_shared)
    copy = np.zeros(n, dtype=bool)
    copy[1:] = (ids[1:] == ids[:-1]).all(axis=1)
    run_first = np.maximum.accumulate(np.where(copy, 0, np.arange(n)))
    own_first = np.cumsum(n_own) - n_own  # index in own_occ of each item's first own token
    own_item = occ_item[own_occ]
    source = own_occ[own_first[run_first[own_item]] + np.arange(len(own_occ)) - own_first[own_item]]
    is_copy = copy[own_item]
    prev[own_occ[is_copy]] = source[is_copy]
    return own_occ, is_copy, source


def _write_rows(
    query: np.ndarray,
    occ: _Occurrences,
    group: np.ndarray,
    cls: int,
    sep: int,
    pad: int,
    reference: bool = True,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The rows of ``group``'s groups - ``[CLS] query [SEP]``, the sorted union of the group's
    shared tokens, its own occurrences (not a copy's) in order, ``[SEP]`` - as (padded ids, row
    lengths, each occurrence's position in its row). ``reference``: the union by ``np.unique``
    and every occurrence written; else by :func:`~rankers.families.crossjem.fastpack.
    union_ranks` and each union token and own token written once."""
    n_rows = int(group[-1]) + 1
    occ_group = group[occ.item]
    sh_occ, own_occ, is_copy = occ.sh_occ, occ.own_occ, occ.is_copy
    # the sorted union of each group's shared tokens, and each shared occurrence's rank in it
    if reference or occ.by_tok is None:
        g_sh, t_sh = occ_group[sh_occ], occ.tok[sh_occ]
        vocab = int(occ.tok.max(initial=0)) + 1
        union_keys, rank_of = np.unique(g_sh * vocab + t_sh, return_inverse=True)
        union_group = union_keys // vocab
        group_start = np.searchsorted(union_group, np.arange(n_rows))
        union_size = np.diff(np.append(group_start, len(union_keys)))
        sh_rank = (np.arange(len(union_keys)) - group_start[union_group])[np.ravel(rank_of)]
    else:
        ranks, union_size, union_tok, union_group = fastpack.union_ranks(
            occ_group, occ.tok, occ.by_tok, n_rows
        )
        sh_rank = ranks[sh_occ]
    # own occurrences (not a copy's) follow the union, in occurrence order within their group
    written = own_occ[~is_copy]
    own_count = np.bincount(occ_group[written], minlength=n_rows)
    own_rank = np.arange(len(written)) - (np.cumsum(own_count) - own_count)[occ_group[written]]
    start = len(query) + 2  # [CLS] query [SEP]
    row_len = start + union_size + own_count + 1
    tok_pos = np.empty(len(occ.tok), dtype=np.int64)
    tok_pos[sh_occ] = start + sh_rank
    tok_pos[written] = start + union_size[occ_group[written]] + own_rank
    tok_pos[own_occ[is_copy]] = tok_pos[occ.source[is_copy]]
    input_ids = np.full((n_rows, int(row_len.max(initial=0))), pad, dtype=np.int64)
    input_ids[:, 0] = cls
    input_ids[:, 1 : start - 1] = query
    input_ids[:, start - 1] = sep
    if reference or occ.by_tok is None:
        input_ids[occ_group, tok_pos] = occ.tok
    else:  # each union token once (its rank from the start of its group's union), own tokens
        union_at = np.arange(len(union_tok)) - (np.cumsum(union_size) - union_size)[union_group]
        input_ids[union_group, start + union_at] = union_tok
        input_ids[occ_group[written], tok_pos[written]] = occ.tok[written]
    input_ids[np.arange(n_rows), row_len - 1] = sep
    return input_ids, row_len, tok_pos


def _item_positions(
    input_ids: np.ndarray,
    occ: _Occurrences,
    group: np.ndarray,
    tok_pos: np.ndarray,
    ids: np.ndarray,
    start: int,
) -> np.ndarray:
    """Position ids of ``positions="item"``: own tokens numbered by their place in their item,
    the shared block after the row's longest item (the oracle's rule), the rest by column."""
    n_rows, row_width = input_ids.shape
    occ_group = group[occ.item]
    written = occ.own_occ[~occ.is_copy]
    position_ids = np.broadcast_to(np.arange(row_width), input_ids.shape).copy()
    position_ids[occ_group[written], tok_pos[written]] = start + occ.offset[written]
    longest = np.zeros(n_rows, dtype=np.int64)
    np.maximum.at(longest, group, (ids != PAD).sum(axis=1))
    g_sh = occ_group[occ.sh_occ]
    position_ids[g_sh, tok_pos[occ.sh_occ]] = tok_pos[occ.sh_occ] + longest[g_sh]
    return position_ids


@dataclasses.dataclass
class _Tokens:
    """The pooled tokens of one query's items: slot (item), row, position, item offset, and
    whether each is a shared token."""

    slot: np.ndarray
    row: np.ndarray
    pos: np.ndarray
    offset: np.ndarray
    shared: np.ndarray


def _pool_query_terms(
    query: np.ndarray,
    distinct: np.ndarray,
    first: np.ndarray,
    group: np.ndarray,
    tokens: _Tokens,
    slot_count: np.ndarray,
) -> tuple[_Tokens, np.ndarray]:
    """``tokens`` and ``slot_count`` with each item's query terms pooled from the query's first
    copy: before the shared tokens, as in the oracle (each item's query terms and shared tokens
    by row position, then its own)."""
    q_item, q_col = np.nonzero((distinct != PAD) & np.isin(distinct, query))
    q_tok, q_first = np.unique(query, return_index=True)
    q_pos = 1 + q_first[np.searchsorted(q_tok, distinct[q_item, q_col])]
    slot_count = slot_count + np.bincount(q_item, minlength=len(distinct))
    item = np.concatenate([q_item, tokens.slot])
    none = np.zeros(len(q_item), bool)
    shared = np.concatenate([none, tokens.shared])
    is_own = np.concatenate([none, ~tokens.shared])
    pos = np.concatenate([q_pos, tokens.pos])
    offset = np.concatenate([first[q_item, q_col], tokens.offset])
    ranked = np.lexsort((np.where(is_own, np.arange(len(pos)), pos), is_own, item))
    item = item[ranked]
    pooled = _Tokens(item, group[item], pos[ranked], offset[ranked], shared[ranked])
    return pooled, slot_count


def merge_targets(first: _QueryRows, rows: _QueryRows) -> _QueryRows:
    """``rows`` (the merged layout's rows of the same groups as the concat rows ``first``) with
    ``first``'s ids and, for each of its positions, the position in ``rows`` it merges into.

    Both hold the items of a row in canonical order. A concat occurrence ``(item, column)`` of a
    shared token goes to that item's shared occurrence of the token, any other to the item's own
    occurrence of that column; [CLS], the query and both [SEP] keep their places."""
    n_rows, width = first.input_ids.shape
    dst = np.full((n_rows, width), -1, dtype=np.int64)
    if n_rows:
        start = int(first.query_end[0])
        dst[:, :start] = np.arange(start)
        dst[np.arange(n_rows), first.row_len - 1] = rows.row_len - 1
        tok = rows.input_ids[rows.tok_row, rows.tok_pos]
        assert rows.tok_shared is not None
        shared = rows.tok_shared
        f_tok = first.input_ids[first.tok_row, first.tok_pos]
        big = int(max(tok.max(initial=0), f_tok.max(initial=0), width)) + 1
        # shared occurrences are keyed by (item, token), own ones by (item, column)
        keys = (rows.tok_slot * 2 + ~shared) * big + np.where(shared, tok, rows.tok_offset)
        order = np.argsort(keys, kind="stable")
        shared_tok = np.unique(tok[shared])
        f_shared = np.isin(f_tok, shared_tok)
        f_keys = (first.tok_slot * 2 + ~f_shared) * big + np.where(
            f_shared, f_tok, first.tok_offset
        )
        at = order[np.searchsorted(keys[order], f_keys)]
        dst[first.tok_row, first.tok_pos] = rows.tok_pos[at]
    return dataclasses.replace(
        rows, first_ids=first.input_ids, first_len=first.row_len, merge_dst=dst
    )


def pack_lists(
    queries: Sequence[np.ndarray],
    items: Sequence[ItemArrays],
    union_len: int,
    cls: int,
    sep: int,
    pad: int,
    tolerance: float | None = None,
    layout: Layout = UNION,
    reference: bool = False,
) -> PackedRows:
    """The packed rows of several queries, laid out as ``layout`` says. ``tolerance``: cut rows
    into length buckets whose padding stays within that fraction of their real tokens (see
    :func:`~rankers.families.crossjem.inputs.length_buckets`); None: one bucket, the rows in query
    order (training). ``reference``: the simple array steps, the test oracle of the fast kernels
    (:func:`query_rows`)."""
    parts = [
        query_rows(q, it, union_len, cls, sep, pad, layout, None, reference)
        for q, it in zip(queries, items, strict=True)
    ]
    return _join_parts(parts, [len(it) for it in items], pad, tolerance, reference)


def _join_parts(
    parts: Sequence[_QueryRows],
    n_items: list[int],
    pad: int,
    tolerance: float | None,
    reference: bool,
) -> PackedRows:
    """The queries' rows as one :class:`PackedRows`, rows cut into length buckets
    (``tolerance``; None: one bucket in query order) with their slots and tokens following."""
    row_base = np.cumsum([0] + [len(p.row_len) for p in parts])
    slot_base = np.cumsum([0] + [len(p.slot_row) for p in parts])

    def cat(arrays: list[np.ndarray]) -> np.ndarray:  # one query (scoring): no copy
        return arrays[0] if len(arrays) == 1 else np.concatenate(arrays or [np.zeros(0, int)])

    def joined(name: str, base: np.ndarray | None = None) -> np.ndarray:
        if base is None or len(parts) == 1:
            return cat([getattr(p, name) for p in parts])
        return cat([getattr(p, name) + base[k] for k, p in enumerate(parts)])

    row_len, query_end = joined("row_len"), joined("query_end")
    slot_row, tok_row = joined("slot_row", row_base), joined("tok_row", row_base)
    tok_slot = joined("tok_slot", slot_base)
    slot_list = np.repeat(np.arange(len(parts)), [len(p.slot_row) for p in parts])
    width = max((p.input_ids.shape[1] for p in parts), default=0)
    if len(parts) == 1:
        input_ids = parts[0].input_ids
    else:
        input_ids = np.full((int(row_base[-1]), width), pad, dtype=np.int64)
        for k, p in enumerate(parts):
            input_ids[row_base[k] : row_base[k + 1], : p.input_ids.shape[1]] = p.input_ids
    position_ids = None
    if any(p.position_ids is not None for p in parts):
        position_ids = np.broadcast_to(np.arange(width), input_ids.shape).copy()
        for k, p in enumerate(parts):
            if p.position_ids is not None:
                rows = slice(row_base[k], row_base[k + 1])
                position_ids[rows, : p.position_ids.shape[1]] = p.position_ids
        position_ids = drop_default_positions(position_ids)
    merged = _join_first_rows(parts, row_base, pad)

    # rows in bucket order; slots and tokens follow their rows (stable: canonical order kept)
    if tolerance is None or not len(row_len):
        runs = [list(range(len(row_len)))] if len(row_len) else []
    else:
        runs = length_buckets(row_len.tolist(), tolerance)
    row_order = np.asarray([r for run in runs for r in run], dtype=np.int64)
    new_row = np.empty_like(row_order)
    new_row[row_order] = np.arange(len(row_order))
    argsort = _reference_argsort if reference else fastpack.stable_argsort
    slot_order = argsort(new_row[slot_row])
    new_slot = np.empty_like(slot_order)
    new_slot[slot_order] = np.arange(len(slot_order))
    tok_order = argsort(new_slot[tok_slot])

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
        first_width = 0 if merged is None else int(merged[1][row_order[r0:r1]].max())
        width_k = int(row_len_new[r0:r1].max())
        buckets.append(Bucket(r0, r1, s0, s1, t0, t1, width_k, first_width))
        row_start[r0:r1] = r0
        slot_start[s0:s1] = s0
        r0, s0, t0 = r1, s1, t1
    return PackedRows(
        input_ids=input_ids[row_order],
        position_ids=None if position_ids is None else position_ids[row_order],
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
        **(
            {}
            if merged is None
            else dict(zip(PackedRows.MERGE_ARRAYS, (m[row_order] for m in merged), strict=True))
        ),
    )


def _reference_argsort(keys: np.ndarray) -> np.ndarray:
    return np.argsort(keys, kind="stable")


def _join_first_rows(
    parts: Sequence[_QueryRows], row_base: np.ndarray, pad: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """The first rows, their lengths and merge targets of every query, one matrix each (None
    when the layout merges nothing)."""
    if not parts or parts[0].first_ids is None:
        return None
    width = max(p.first_ids.shape[1] for p in parts if p.first_ids is not None)
    ids = np.full((int(row_base[-1]), width), pad, dtype=np.int64)
    dst = np.full(ids.shape, -1, dtype=np.int64)
    for k, p in enumerate(parts):
        assert p.first_ids is not None and p.merge_dst is not None
        rows = slice(row_base[k], row_base[k + 1])
        ids[rows, : p.first_ids.shape[1]] = p.first_ids
        dst[rows, : p.merge_dst.shape[1]] = p.merge_dst
    lengths = np.concatenate([p.first_len for p in parts if p.first_len is not None])
    return ids, lengths, dst
