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
from collections.abc import Sequence

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
    host_slot_list: np.ndarray
    host_slot_item: np.ndarray
    host_row_len: np.ndarray
    #: columns of the widest row; a bound above every token id (sort keys of group x token)
    width: int
    id_bound: int
    sep: int


@dataclasses.dataclass
class _Query:
    """One list after the host's decisions (canonical order, occurrences, groups)."""

    order: np.ndarray
    cost: np.ndarray
    tok: np.ndarray
    offset: np.ndarray
    starts: list[int]
    sizes: list[int]


def _decide(store: ItemTokens, rows: np.ndarray, union_len: int) -> _Query:
    """Canonical order, occurrences and next-fit groups of one list of held ``rows``."""
    order = fastpack.stable_argsort(store.sequence_ranks[rows], bound=len(store))
    held = rows[order]
    first = store.distinct_offsets[held]
    cost = store.distinct_offsets[held + 1] - first
    too_long = np.flatnonzero(cost > union_len)
    if len(too_long):
        k = int(too_long[0])
        raise ValueError(
            f"item {int(order[k])} needs {int(cost[k])} row tokens, more than union_len={union_len}"
        )
    item_end = np.cumsum(cost)
    total = int(item_end[-1]) if len(cost) else 0
    at = np.arange(total) + np.repeat(first - (item_end - cost), cost)
    tok, offset = store.distinct[at], store.first[at]
    if total <= union_len:  # next-fit cannot cut the list: one group
        one = ([0], [len(np.unique(tok))]) if len(cost) else ([], [])
        return _Query(order, cost, tok, offset, *one)
    # the previous occurrence of each token, from one stable (radix) sort by token
    by_tok = fastpack.stable_argsort(tok, bound=store.id_bound)
    same = tok[by_tok[1:]] == tok[by_tok[:-1]]
    union = total - int(np.count_nonzero(same))
    if union <= union_len:
        starts, sizes = [0], [union]
    else:
        prev = np.empty(total, dtype=np.int64)
        prev[by_tok[0]] = -1
        prev[by_tok[1:]] = np.where(same, by_tok[:-1], -1)
        starts, sizes = fastpack.next_fit(item_end, prev, union_len)
    return _Query(order, cost, tok, offset, starts, sizes)


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
    decisions per list, rows (one per group) cut into length buckets as
    :func:`~rankers.families.crossjem.packed.join_parts` cuts them, slots and tokens in bucket
    order, and one upload of six arrays. ``special``: the [CLS], [SEP] and padding ids."""
    cls, sep, pad = special
    lists = [_decide(store, r, union_len) for r in rows]
    # per group (a row before bucketing): its query, first item, row start and length
    g_query = np.repeat(np.arange(len(lists)), [len(q.starts) for q in lists])
    item_base = np.cumsum([0] + [len(q.cost) for q in lists])
    g_item = np.asarray(
        [s + b for q, b in zip(lists, item_base.tolist(), strict=False) for s in q.starts],
        dtype=np.int64,
    )
    q_start = np.asarray([len(q) + 2 for q in queries], dtype=np.int64)  # [CLS] query [SEP]
    g_start = q_start[g_query]
    g_size = np.asarray([s for q in lists for s in q.sizes], dtype=np.int64)
    row_len = g_start + g_size + 1
    # per item (canonical order, list after list): its group
    cost = np.concatenate([q.cost for q in lists]) if lists else np.zeros(0, np.int64)
    n = len(cost)
    mark = np.zeros(n, dtype=np.int64)
    mark[g_item[1:]] = 1  # every group after the first starts at a new item
    item_group = np.cumsum(mark)
    # rows in bucket order; slots (items) follow their rows, tokens their slots
    runs = length_buckets(row_len.tolist(), tolerance)
    row_order = np.asarray([r for run in runs for r in run], dtype=np.int64)
    new_row = np.empty_like(row_order)
    new_row[row_order] = np.arange(len(row_order))
    item_row = new_row[item_group]
    slot_order = fastpack.stable_argsort(item_row, bound=len(row_order))
    new_slot = np.empty_like(slot_order)
    new_slot[slot_order] = np.arange(n)
    run_rows = np.cumsum([0] + [len(run) for run in runs])
    slot_row = item_row[slot_order]
    run_slots = np.searchsorted(slot_row, run_rows)
    tok_new = np.zeros(n + 1, dtype=np.int64)  # token start of each slot in bucket order
    np.cumsum(cost[slot_order], out=tok_new[1:])
    bucket_width = np.maximum.reduceat(row_len[row_order], run_rows[:-1]) if n else row_len
    bounds = zip(run_rows.tolist(), run_slots.tolist(), tok_new[run_slots].tolist(), strict=True)
    starts = list(bounds)
    buckets = [
        Bucket(r0, r1, s0, s1, t0, t1, w)
        for (r0, s0, t0), (r1, s1, t1), w in zip(
            starts, starts[1:], bucket_width.tolist(), strict=False
        )
    ]
    row_start = np.repeat(run_rows[:-1], np.diff(run_rows))  # per row: its bucket's first row
    slot_start = np.repeat(run_slots[:-1], np.diff(run_slots))  # per slot: its bucket's first
    slot_list = g_query[item_group[slot_order]]
    slot_item = np.concatenate([q.order for q in lists])[slot_order] if lists else cost
    # the [CLS] query [SEP] part of each query's rows
    prefix = np.full((len(queries), int(q_start.max(initial=2))), pad, dtype=np.int64)
    for k, (query, start) in enumerate(zip(queries, q_start.tolist(), strict=True)):
        prefix[k, 0], prefix[k, 1 : start - 1], prefix[k, start - 1] = cls, query, sep
    tok = np.concatenate([q.tok for q in lists]) if lists else np.zeros(0, np.int32)
    offset = np.concatenate([q.offset for q in lists]) if lists else tok
    item_end = np.cumsum(cost)
    arrays = {
        "occurrences": np.stack([tok, offset]),
        # per item: end of its occurrences, their count, its group, where its first token goes
        # in bucket order, its slot and row within their bucket
        "items": np.stack(
            [
                item_end,
                cost,
                item_group,
                tok_new[new_slot],
                new_slot - slot_start[new_slot],
                item_row - row_start[item_row],
            ]
        ),
        # per group: first union rank, row start (query end), length, query; the bucket order
        "groups": np.stack([np.cumsum(g_size) - g_size, g_start, row_len, g_query, row_order]),
        "prefix": prefix,
        # per slot (bucket order): row within its bucket, pooled positions, list, item
        "slots": np.stack(
            [
                slot_row - row_start[slot_row],
                (q_start[slot_list] - 1) + cost[slot_order],
                slot_list,
                slot_item,
            ]
        ),
        "lengths": np.asarray([len(r) for r in rows], dtype=np.int64),
    }
    return HeldBatch(
        arrays=upload(arrays, device),
        buckets=buckets,
        n_items=[len(r) for r in rows],
        host_slot_list=slot_list,
        host_slot_item=slot_item,
        host_row_len=row_len[row_order],
        width=int(row_len.max(initial=0)),
        id_bound=store.id_bound,
        sep=sep,
    )


def expand(held: HeldBatch, pad: int) -> CrossJEMBatch:
    """The device's half: each group's sorted union and every occurrence's rank in it, the
    rows, and the pooling indices in bucket order, from arrays of sizes the host knows (no
    value read back, so no wait and nothing that stops a CUDA graph)."""
    a = held.arrays
    tok, offset = a["occurrences"]
    item_end, cost, item_group, item_token, item_slot, item_row = a["items"]
    union_base, g_start, g_len, g_query, row_order = a["groups"]
    occ = torch.arange(tok.shape[0], device=tok.device)
    item = torch.searchsorted(item_end, occ, right=True)
    group = item_group[item]
    # the sorted union of each group: occurrences sorted by (group, token), runs of one key
    keys, by_key = torch.sort(group * held.id_bound + tok)
    new = torch.ones_like(keys, dtype=torch.bool)
    new[1:] = keys[1:] != keys[:-1]
    rank = torch.empty_like(occ)
    rank[by_key] = torch.cumsum(new, 0) - 1 - union_base[group[by_key]]
    pos = g_start[group] + rank
    n_groups = g_len.shape[0]
    ids = torch.full((n_groups, held.width), pad, dtype=torch.int64, device=tok.device)
    head = min(a["prefix"].shape[1], held.width)  # a query without rows may be longer
    ids[:, :head] = a["prefix"][g_query, :head]
    ids[group, pos] = tok  # every occurrence of a token writes the same value
    ids[torch.arange(n_groups, device=tok.device), g_len - 1] = held.sep
    # tokens in bucket order: an item's tokens keep their order from its first token's place
    at = item_token[item] + occ - (item_end - cost)[item]

    def placed(values: Tensor) -> Tensor:
        out = torch.empty_like(values)
        out[at] = values
        return out

    slot_row, slot_count, slot_list, slot_item = a["slots"]
    return CrossJEMBatch(
        input_ids=ids[row_order],
        row_len=g_len[row_order],
        query_end=g_start[row_order],
        slot_row=slot_row,
        slot_count=slot_count,
        slot_list=slot_list,
        slot_item=slot_item,
        tok_slot=placed(item_slot[item]),
        tok_row=placed(item_row[item]),
        tok_pos=placed(pos),
        tok_offset=placed(offset),
        buckets=held.buckets,
        n_items=held.n_items,
        host_slot_list=held.host_slot_list,
        host_slot_item=held.host_slot_item,
        host_row_len=held.host_row_len,
        lengths=a["lengths"],
    )
