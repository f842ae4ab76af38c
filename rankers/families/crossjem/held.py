"""CROSS-JEM's scoring step for the paper's union layout: the host decides, the device writes.

Scoring prepares every list on the host while the device waits, and that host step is timed
against monoBERT's (a dozen array operations). In the union layout every distinct token of an
item is shared, so an item's occurrences are exactly its sorted distinct ids, which
:class:`~rankers.inputs.tokens.ItemTokens` holds end to end. What needs the host is what decides
shapes: the canonical order (one argsort of the store's sequence ranks), the occurrences (one
gather from the flat arrays, no padded matrices), next-fit packing
(:func:`~rankers.families.crossjem.fastpack.next_fit`: a loop over groups) and the length buckets.
The rest is a fixed number of array operations on arrays whose sizes the host already knows -
each group's sorted union, every occurrence's rank in it, the rows, the pooling indices in bucket
order - so the device does it (:func:`expand`, in the model step), without reading anything back.

Both halves give, bit for bit, the arrays of ``pack_lists(..., layout=UNION)`` uploaded, which
stays the oracle (``tests/test_crossjem_held.py``).
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np
import torch
from torch import Tensor

from rankers.families.crossjem import fastpack
from rankers.families.crossjem.inputs import Layout, length_buckets
from rankers.families.crossjem.model import CrossJEMBatch
from rankers.families.crossjem.records import Bucket
from rankers.inputs.tokens import ItemTokens
from rankers.inputs.transfer import upload

__all__ = ["HeldBatch", "expand", "hold_lists", "takes_held_rows"]


def takes_held_rows(layout: Layout) -> bool:
    """Whether scoring in ``layout`` takes this path: the paper's union (every distinct token
    shared, row positions, nothing merged or pooled from the query)."""
    return (
        layout.order == "union"
        and layout.positions == "row"
        and not layout.merge_layers
        and not layout.query_pool
    )


@dataclasses.dataclass
class HeldBatch:
    """The host's half of a batch: occurrences, groups and bucket order uploaded in one copy
    (``arrays``), and on the host what shapes and the scores' placement need."""

    arrays: dict[str, Tensor]
    buckets: list[Bucket]
    n_items: list[int]
    host_row_len: np.ndarray
    #: columns of the widest row; a bound above every token id (sort keys of group x token)
    width: int
    id_bound: int
    sep: int


class _Groups(NamedTuple):
    """The per-group rows of the upload, in one order for both halves: each group's query,
    first item, first occurrence, row start (query end), length and first union rank; in
    bucket order its row, first slot and first token, the first row and slot of its bucket;
    and which group each row (in bucket order) is."""

    query: Any
    item: Any
    occ: Any
    start: Any
    length: Any
    union_base: Any
    new_row: Any
    slot_base: Any
    tok_base: Any
    row0: Any
    slot0: Any
    row_order: Any


@dataclasses.dataclass
class _Query:
    """One list after the host's decisions (canonical order, occurrences, groups)."""

    order: np.ndarray
    cost: np.ndarray
    item_end: np.ndarray
    #: the occurrences' tokens (row 0) and offsets in their items (row 1)
    occurrences: np.ndarray
    #: per group: its first item, union size, and where its occurrences end
    starts: list[int]
    sizes: list[int]
    ends: list[int]


def _decide(store: ItemTokens, rows: np.ndarray, union_len: int) -> _Query:
    """Canonical order, occurrences and next-fit groups of one list of held ``rows``."""
    order = fastpack.stable_argsort(store.sequence_ranks[rows], bound=len(store))
    held = rows[order]
    first, cost = store.distinct_offsets[held], store.distinct_counts[held]
    if store.most_distinct > union_len and int(cost.max()) > union_len:
        k = int(np.argmax(cost > union_len))
        raise ValueError(
            f"item {int(order[k])} needs {int(cost[k])} row tokens, more than union_len={union_len}"
        )
    item_end = cost.cumsum()
    total = int(item_end[-1]) if len(cost) else 0
    at = np.arange(total) + np.repeat(first - (item_end - cost), cost)
    occurrences = store.distinct_first.take(at, axis=1)
    tok = occurrences[0]
    if not len(cost):
        return _Query(order, cost, item_end, occurrences, [], [], [])
    if total <= union_len:  # next-fit cannot cut the list: one group
        return _Query(order, cost, item_end, occurrences, [0], [len(np.unique(tok))], [total])
    # the previous occurrence of each token, from one stable (radix) sort by token
    by_tok = fastpack.stable_argsort(tok, bound=store.id_bound)
    sorted_tok = tok[by_tok]
    same = sorted_tok[1:] == sorted_tok[:-1]
    union = total - int(np.count_nonzero(same))
    if union <= union_len:
        return _Query(order, cost, item_end, occurrences, [0], [union], [total])
    prev = np.empty(total, dtype=np.int64)
    prev[by_tok[0]] = -1
    prev[by_tok[1:]] = np.where(same, by_tok[:-1], -1)
    return _Query(order, cost, item_end, occurrences, *fastpack.next_fit(item_end, prev, union_len))


def hold_lists(
    queries: Sequence[np.ndarray],
    store: ItemTokens,
    rows: Sequence[np.ndarray],
    union_len: int,
    special: tuple[int, int, int],
    tolerance: float,
    device: str,
) -> HeldBatch:
    """The host's half for lists whose items ``store`` holds (``rows``: their store rows):
    decisions per list, and per group (a row) where it goes - rows cut into length buckets as
    :func:`~rankers.families.crossjem.packed.pack_lists` cuts them, its items' slots and tokens
    following it - in one upload of five arrays. ``special``: the [CLS], [SEP] and padding
    ids."""
    cls, sep, pad = special
    lists = [_decide(store, r, union_len) for r in rows]
    # per group, in query order (Python lists: a few dozen groups a list)
    g_query, g_item, g_items, g_occ, g_occs, g_start, g_len = ([] for _ in range(7))
    item_base = occ_base = 0
    for k, (query, q) in enumerate(zip(queries, lists, strict=True)):
        bounds = [*q.starts, len(q.order)]
        occ_bounds = [0, *q.ends]
        for j, size in enumerate(q.sizes):
            g_query.append(k)
            g_item.append(item_base + bounds[j])
            g_items.append(bounds[j + 1] - bounds[j])
            g_occ.append(occ_base + occ_bounds[j])
            g_occs.append(occ_bounds[j + 1] - occ_bounds[j])
            g_start.append(len(query) + 2)  # [CLS] query [SEP]
            g_len.append(len(query) + 3 + size)
        item_base += len(q.order)
        occ_base += occ_bounds[-1]
    # rows in bucket order; each group's items (slots) and tokens follow it, in their order
    runs = length_buckets(g_len, tolerance)
    row_order = [g for run in runs for g in run]
    n_groups = len(row_order)
    new_row, slot_base, tok_base = [0] * n_groups, [0] * n_groups, [0] * n_groups
    row0, slot0 = [0] * n_groups, [0] * n_groups  # the first row and slot of its bucket
    buckets = []
    r = slots = toks = 0
    for run in runs:
        r0, s0, t0 = r, slots, toks
        for g in run:
            new_row[g], slot_base[g], tok_base[g], row0[g], slot0[g] = r, slots, toks, r0, s0
            r, slots, toks = r + 1, slots + g_items[g], toks + g_occs[g]
        buckets.append(Bucket(r0, r, s0, slots, t0, toks, max(g_len[g] for g in run)))
    if len(lists) == 1:
        cost, order, occurrences = lists[0].cost, lists[0].order, lists[0].occurrences
    else:
        cost, order = (np.concatenate([getattr(q, k) for q in lists]) for k in ("cost", "order"))
        occurrences = np.concatenate([q.occurrences for q in lists], axis=1)
    item_end = lists[0].item_end if len(lists) == 1 else np.cumsum(cost)  # list after list
    longest = max(map(len, queries), default=0)
    prefix = [[cls, *q.tolist(), sep, *[pad] * (longest - len(q))] for q in queries]
    sizes = [s for q in lists for s in q.sizes]
    union_base = list(itertools.accumulate(sizes, initial=0))[:-1]
    arrays = {
        "occurrences": occurrences,
        "items": np.stack([item_end, order]),
        "groups": np.asarray(
            _Groups(
                g_query,
                g_item,
                g_occ,
                g_start,
                g_len,
                union_base,
                new_row,
                slot_base,
                tok_base,
                row0,
                slot0,
                row_order,
            ),
            dtype=np.int64,
        ).reshape(len(_Groups._fields), n_groups),
        # per query: its items, then [CLS] query [SEP]
        "queries": np.asarray([[len(r), *p] for r, p in zip(rows, prefix, strict=True)]),
    }
    return HeldBatch(
        arrays=upload(arrays, device),
        buckets=buckets,
        n_items=[len(r) for r in rows],
        host_row_len=np.asarray([g_len[g] for g in row_order], dtype=np.int64),
        width=max(g_len, default=0),
        id_bound=store.id_bound,
        sep=sep,
    )


def expand(held: HeldBatch, pad: int) -> CrossJEMBatch:
    """The device's half: each group's sorted union and every occurrence's rank in it, the
    rows, and the slots and pooling indices in bucket order, from arrays of sizes the host
    knows (no value read back, so no wait and nothing that stops a CUDA graph)."""
    a = held.arrays
    tok, offset = a["occurrences"]
    item_end, order = a["items"]
    g = _Groups(*a["groups"])
    g_query, g_item, g_occ, g_start, g_len, union_base = g[:6]
    new_row, slot_base, tok_base, row0, slot0, row_order = g[6:]
    device = tok.device
    occ = torch.arange(tok.shape[0], device=device)
    item = torch.searchsorted(item_end, occ, right=True)
    items = torch.arange(item_end.shape[0], device=device)
    item_group = torch.searchsorted(g_item, items, right=True) - 1
    group = item_group[item]
    # the sorted union of each group: occurrences sorted by (group, token), runs of one key
    keys, by_key = torch.sort(group * held.id_bound + tok)
    new = torch.ones_like(keys, dtype=torch.bool)
    new[1:] = keys[1:] != keys[:-1]
    rank = torch.empty_like(occ)
    rank[by_key] = torch.cumsum(new, 0) - 1 - union_base[group[by_key]]
    pos = g_start[group] + rank
    n_groups = g_len.shape[0]
    ids = torch.full((n_groups, held.width), pad, dtype=torch.int64, device=device)
    lengths, prefix = a["queries"][:, 0], a["queries"][:, 1:]
    head = min(prefix.shape[1], held.width)  # a query without rows may be longer
    ids[:, :head] = prefix[g_query, :head]
    ids[group, pos] = tok  # every occurrence of a token writes the same value
    ids[torch.arange(n_groups, device=device), g_len - 1] = held.sep
    # slots: a group's items in their order from its first slot; tokens likewise
    slot = slot_base[item_group] + items - g_item[item_group]
    cost = torch.diff(item_end, prepend=item_end.new_zeros(1))

    def placed(at: Tensor, values: Tensor) -> Tensor:
        out = torch.empty_like(values)
        out[at] = values
        return out

    at = tok_base[group] + occ - g_occ[group]
    return CrossJEMBatch(
        input_ids=ids[row_order],
        row_len=g_len[row_order],
        query_end=g_start[row_order],
        slot_row=placed(slot, (new_row - row0)[item_group]),
        slot_count=placed(slot, g_start[item_group] - 1 + cost),
        slot_list=placed(slot, g_query[item_group]),
        slot_item=placed(slot, order),
        tok_slot=placed(at, (slot - slot0[item_group])[item]),
        tok_row=placed(at, (new_row - row0)[group]),
        tok_pos=placed(at, pos),
        tok_offset=placed(at, offset),
        buckets=held.buckets,
        n_items=held.n_items,
        host_row_len=held.host_row_len,
        lengths=lengths,
    )
