"""The fast kernels of CROSS-JEM's host step: the same arrays as the reference steps of
:mod:`rankers.families.crossjem.packed`, with fewer and cheaper NumPy passes.

Scoring prepares every list on the host while the device waits, so this step is timed against
monoBERT's (``[CLS] q [SEP] k [SEP]`` rows, a dozen array operations). The reference steps use
sort-based set operations (``np.unique``, ``np.isin``, argsorts of int64 keys); here:

* token sets are bitmaps over the list's id range (one bincount gives the holder counts);
* occurrences come out item-major from one ``np.nonzero`` over the shared and own columns side
  by side, with no sort;
* every remaining sort is a stable argsort of keys that fit 16 bits when they do, which NumPy
  runs as a radix sort (about 10x faster than its int64 merge sort on 18k keys);

A stable argsort has one answer, so each kernel gives bit-identical arrays; the reference steps
stay as the test oracle (``pack_lists(..., reference=True)``, ``tests/test_crossjem_fastpack.py``).
"""

from __future__ import annotations

import bisect
import functools

import numpy as np

from rankers.families.crossjem.inputs import Layout
from rankers.inputs.tokens import PAD


def stable_argsort(keys: np.ndarray, bound: int | None = None) -> np.ndarray:
    """``np.argsort(keys, kind="stable")``, as a radix sort when the keys fit 16 bits
    (``bound``: the caller knows every key is in ``[0, bound)``, so nothing is checked)."""
    if bound is not None:
        fits = bound <= 0x10000
    else:
        fits = bool(keys.size) and int(keys.min()) >= 0 and int(keys.max()) < 0x10000
    return (keys.astype(np.uint16) if fits else keys).argsort(kind="stable")


@functools.lru_cache(maxsize=8)
def _id_array(ids: frozenset[int]) -> np.ndarray:
    """A frozen id set as an int64 array (function words: built once per layout)."""
    return np.fromiter(ids, dtype=np.int64, count=len(ids))


def _bitmap(values: np.ndarray, size: int) -> np.ndarray:
    """Membership of ids ``0 .. size - 1`` (entry ``size``, read by the pad ``-1``, stays
    False)."""
    out = np.zeros(size + 1, dtype=bool)
    out[values[values >= 0]] = True
    return out


def split_tokens(
    ids: np.ndarray, distinct: np.ndarray, layout: Layout, query: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Per item: which of its distinct tokens are shared, and which of its tokens are its own
    (:func:`~rankers.families.crossjem.packed.shared_mask` and the own mask of the reference
    step), from bitmaps over the list's ids."""
    valid = distinct != PAD
    need = layout.min_holders(len(ids))
    function = None
    if layout.share == "function":
        if layout.function_ids is None:
            raise ValueError("share=function needs the tokenizer: use Layout.bind(tokenizer)")
        function = _id_array(layout.function_ids)
    pooled = query if layout.query_pool else query[:0]
    size = 1 + max(
        int(distinct.max(initial=-1)),
        int(pooled.max(initial=-1)),
        int(function.max(initial=-1)) if function is not None else -1,
    )
    if need is None:
        is_shared = np.zeros_like(valid)
    else:
        is_shared = valid
        if need > 1 or layout.content_min:
            holders = np.bincount(distinct[valid], minlength=size + 1)[distinct]
        if need > 1:
            is_shared = is_shared & (holders >= need)
        if function is not None:
            wanted = _bitmap(function, size)[distinct]
            if layout.content_min:
                wanted |= holders >= layout.content_min
            is_shared = is_shared & wanted
        if len(pooled):
            is_shared = is_shared & ~_bitmap(pooled, size)[distinct]
    if need == 1 and function is None:  # every token is shared or pooled from the query
        return is_shared, np.zeros(ids.shape, dtype=bool)
    kept = _bitmap(distinct[is_shared], size)
    if len(pooled):
        kept |= _bitmap(pooled, size)
    return is_shared, (ids != PAD) & ~kept[ids]


def occurrence_arrays(
    ids: np.ndarray,
    distinct: np.ndarray,
    first: np.ndarray,
    is_shared: np.ndarray,
    is_own: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Occurrences item after item, shared ones before own ones: (item, token, offset, shared,
    previous occurrence of the same shared token or -1, the shared occurrences by token).

    The shared and own columns side by side make one flat ``np.flatnonzero`` list them in that
    order (a union row has no own tokens: the shared columns alone); the previous occurrence of
    a token comes from one stable sort of the shared tokens."""
    width = ids.shape[1]
    if is_own.any():
        cols = 2 * width
        where = np.flatnonzero(np.concatenate([is_shared, is_own], axis=1))
        tok = np.concatenate([distinct, ids], axis=1).ravel()[where]
        positions = np.broadcast_to(np.arange(width), ids.shape)
        offset = np.concatenate([first, positions], axis=1).ravel()[where]
    else:
        cols = width
        where = np.flatnonzero(is_shared)
        tok, offset = distinct.ravel()[where], first.ravel()[where]
    item, col = np.divmod(where, cols)
    shared = col < width
    prev = np.full(len(tok), -1, dtype=np.int64)
    by_tok = stable_argsort(tok)
    if cols != width:  # own occurrences too: only the shared ones chain
        by_tok = by_tok[shared[by_tok]]
    same = tok[by_tok[1:]] == tok[by_tok[:-1]]
    prev[by_tok[1:][same]] = by_tok[:-1][same]
    return item, tok, offset, shared, prev, by_tok


def union_ranks(
    occ_group: np.ndarray, tok: np.ndarray, by_tok: np.ndarray, n_rows: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The sorted union of each group's shared tokens (``np.unique`` of ``group * vocab +
    token`` in the reference step) from the shared occurrences already sorted by token:
    (each shared occurrence's rank in its group's union, in ``by_tok`` order; the union size
    per group; the union's tokens and their groups)."""
    order = by_tok[stable_argsort(occ_group[by_tok])]  # by (group, token, occurrence)
    g, t = occ_group[order], tok[order]
    new = np.ones(len(order), dtype=bool)
    new[1:] = (g[1:] != g[:-1]) | (t[1:] != t[:-1])
    union_id = np.cumsum(new) - 1
    union_group, union_tok = g[new], t[new]
    union_size = np.bincount(union_group, minlength=n_rows)
    group_start = np.cumsum(union_size) - union_size
    rank = union_id - group_start[g]
    ranks = np.empty(len(tok), dtype=np.int64)
    ranks[order] = rank
    return ranks, union_size, union_tok, union_group


def next_fit(
    item_end: np.ndarray, prev: np.ndarray, union_len: int
) -> tuple[list[int], list[int], list[int]]:
    """Next-fit packing of items ``[item_end - cost, item_end)`` (the result of
    :func:`~rankers.families.crossjem.packed.next_fit_cuts`): the first item of each group, the
    group's size and the end of its occurrences, with few array calls per group (item ends
    searched in a Python list, one cumulative sum over a window that grows only when a group
    outruns it)."""
    n = len(item_end)
    ends = item_end.tolist()
    total = ends[-1] if n else 0
    starts: list[int] = []
    sizes: list[int] = []
    stops: list[int] = []
    a = s_a = 0
    window = 2 * union_len
    while a < n:
        starts.append(a)
        while True:
            e = min(total, s_a + window)
            # new tokens up to each occurrence since s_a (its previous one is before s_a); the
            # first occurrence past union_len lies in the first item that does not fit
            new = (prev[s_a:e] < s_a).cumsum()
            over = int(new.searchsorted(union_len, side="right"))
            if over < len(new) or e == total:
                break
            window *= 2
        b = bisect.bisect_right(ends, s_a + over, a)  # items ending by then fit
        if b == a:  # an item alone over union_len: callers refuse it before packing
            raise ValueError(f"item {a} needs more than union_len={union_len} row tokens")
        end = ends[b - 1]
        sizes.append(int(new[end - s_a - 1]) if end > s_a else 0)
        stops.append(end)
        a, s_a = b, end
    return starts, sizes, stops


def next_fit_groups(item_end: np.ndarray, prev: np.ndarray, union_len: int) -> np.ndarray:
    """Group of each item under next-fit packing (:func:`next_fit`)."""
    starts, _, _ = next_fit(item_end, prev, union_len)
    group = np.zeros(len(item_end), dtype=np.int64)
    group[starts[1:]] = 1
    return np.cumsum(group)
