"""CROSS-JEM input building (paper section 3, Algorithms 1-2): pure Python over token ids.

For one query and its items (WordPiece ids, already truncated) this builds encoder rows::

    [CLS] query [SEP] shared own_1 own_2 ... own_k [SEP]   token_type_ids 0 ... 0 | 1 ... 1

A :class:`Layout` decides which of an item's tokens are *shared* (written once per row, sorted by
id, and pooled by every item of the row that holds them) and which are *own* (written in the
item's order, every occurrence, pooled by that item alone):

* ``union`` (the paper's, the default): every token is shared, so the row is the sorted union of
  its items' tokens and each item becomes a bag of distinct tokens;
* ``concat``: no token is shared, so the row is the items as written, one after the other (the
  query still once per row, the items attending to each other);
* ``hybrid``: a token held by at least ``share_min`` items of the list is shared; the rest stay in
  their item's order. Repeated tokens (function words, the page's topic) cost one position per
  row as in the union, while the words that tell items apart keep their order. With
  ``share_frac`` f the count is a share of the list instead: a list of n items shares a token
  held by at least max(2, ceil(f x n)) of them (:func:`share_threshold`). A fixed count fits one
  list length only: a token held by a fraction p of the items is held by about p x n of them,
  so ``share_min=4`` shares the tokens held by 4% of a list of 100 but by 40% of a list of 10,
  and a list of 10 keeps nearly every token in its own place (slow); a fraction shares the
  tokens of the same list-level frequency at every length. The floor 2: a token held by one
  item has no other holder to share it with.

Token merging (``merge_layers`` k > 0) keeps every item's whole word order *and* shares: the first
k encoder layers run over the ``concat`` row of the group (the items as written, numbered left to
right), so every token is contextualised in its sentence; then the hidden states of a shared
token's copies are averaged into its one place of the layout's row (``union`` or ``hybrid``), own
tokens move to theirs, and the remaining layers run over that shorter row. Groups are packed by
the concat row's length (it must fit ``union_len``), and :attr:`Row.first_ids` /
:attr:`Row.merge_dst` carry the first row and where each of its positions goes.

Each item pools ``P_k = T_q + [SEP] + (its shared tokens) + (its own tokens)``: [CLS] and the
final [SEP] are not pooled. With ``positions="item"`` an own token gets the position id
``len([CLS] query [SEP]) + (its position in its item)``, so every item's words sit where the
first item's would (the order inside an item is kept, the order of items is not visible), and
the shared block (hybrid) is numbered after the row's longest item, ``start + longest + rank``,
so a shared token never has an own token's position id; the final [SEP] keeps its row position.
``positions="row"`` numbers the whole row left to right as BERT does.

When the items' tokens exceed ``union_len`` the items are packed into groups that fit, one
encoder row per group (paper: 700 items in 7 passes).

Scores must not depend on candidate order: which tokens are shared is decided from the list as a
multiset, the shared block is sorted, and packing and the order of own segments follow a canonical
order of the items (by token ids) rather than the given one. Identical items are neighbours in
that order and always share a row; a copy writes no own tokens but pools those of the first, so
identical items get identical scores in every layout.

This module is the simple implementation, kept as the test oracle of the vectorised one that
scoring and training use (:mod:`rankers.families.crossjem.packed`): both must give the same rows,
position
ids, pooling sets and scores.

Item positions (paper section 5.3): each pooled token of item ``j`` other than the query part also
records its position inside item ``j`` (a shared token: its first occurrence), so the model can
add an item-specific positional encoding after the encoder.
"""

from __future__ import annotations

import dataclasses
import math
from collections import Counter
from collections.abc import Sequence
from typing import Any

#: how a row is laid out (option ``order`` of :class:`~rankers.families.crossjem.CrossJEMConfig`)
ORDERS = ("union", "concat", "hybrid")
#: position ids of own tokens (option ``positions``)
POSITIONS = ("row", "item")
#: which tokens a hybrid row may share (option ``share``)
SHARES = ("all", "function")


def share_threshold(share_frac: float, n: int) -> int:
    """Items of a list of ``n`` that must hold a token for ``hybrid`` to share it under
    ``share_frac``: max(2, ceil(share_frac x n)). The product is rounded to 9 decimals first, so
    a fraction written in decimal gives the count it reads as (0.07 x 100 is 7, not the 8 that
    ceil(7.000000000000001) would give)."""
    return max(2, math.ceil(round(share_frac * n, 9)))


@dataclasses.dataclass(frozen=True)
class Layout:
    """Which tokens a row shares between its items, and how own tokens are numbered."""

    order: str = "union"
    share_min: int = 2
    #: ``hybrid``: share a token held by at least max(2, ceil(share_frac x n)) of a list's n
    #: items instead of ``share_min`` (0: off, ``share_min`` decides)
    share_frac: float = 0.0
    positions: str = "row"
    #: encoder layers run over the concat row before shared tokens are merged (0: none)
    merge_layers: int = 0
    #: ``hybrid``: which tokens may be shared: any (``all``) or function words and punctuation
    share: str = "all"
    #: an item's tokens that occur in the query are not written; the item pools the query's copy
    query_pool: bool = False
    #: ``share="function"``: content tokens are shared too when at least this many items hold
    #: them (0: never)
    content_min: int = 0
    #: ``share="function"``: the tokenizer's function-word ids (:meth:`bind` sets them)
    function_ids: frozenset[int] | None = dataclasses.field(default=None, repr=False)

    def __post_init__(self) -> None:
        if self.order not in ORDERS:
            raise ValueError(f"order must be one of {', '.join(ORDERS)}, not {self.order!r}")
        if self.positions not in POSITIONS:
            raise ValueError(
                f"positions must be one of {', '.join(POSITIONS)}, not {self.positions!r}"
            )
        if self.share_min < 1:
            raise ValueError(f"share_min must be at least 1, not {self.share_min}")
        if not 0.0 <= self.share_frac <= 1.0:  # written so that NaN fails
            raise ValueError(f"share_frac must be in (0, 1] (0: off), not {self.share_frac}")
        if self.share_frac and self.order != "hybrid":
            raise ValueError(f"share_frac={self.share_frac} needs order=hybrid, not {self.order}")
        if self.share_frac and self.share_min != 2:
            raise ValueError(
                f"share_frac={self.share_frac} replaces share_min={self.share_min}: set one of them"
            )
        if self.merge_layers < 0:
            raise ValueError(f"merge_layers must be at least 0, not {self.merge_layers}")
        if self.share not in SHARES:
            raise ValueError(f"share must be one of {', '.join(SHARES)}, not {self.share!r}")
        if self.share != "all" and self.order != "hybrid":
            raise ValueError(f"share={self.share} needs order=hybrid, not {self.order}")
        if self.content_min and (self.share != "function" or self.content_min < self.share_min):
            raise ValueError(
                f"content_min={self.content_min} needs share=function and content_min >= "
                f"share_min ({self.share_min})"
            )
        if self.query_pool and self.merge_layers:
            raise ValueError("query_pool cannot be combined with merge_layers > 0")

    def bind(self, tokenizer: Any) -> Layout:
        """This layout with the tokenizer's function-word ids where ``share="function"`` needs
        them (any other layout, or one whose ids are set, is returned as it is)."""
        if self.share != "function" or self.function_ids is not None:
            return self
        from rankers.families.crossjem.function_words import function_token_ids

        return dataclasses.replace(self, function_ids=function_token_ids(tokenizer))

    @property
    def packing(self) -> Layout:
        """The layout whose row content decides the groups: the concat row when the first layers
        run over it (it is the longest row a group has), else this one."""
        return CONCAT if self.merge_layers else self

    @property
    def target(self) -> Layout:
        """The layout of the rows after the merge (this one without ``merge_layers``)."""
        return dataclasses.replace(self, merge_layers=0)

    def min_holders(self, n: int) -> int | None:
        """Items of a list of ``n`` that must hold a token for it to be shared (None: nothing is
        shared)."""
        if self.order == "hybrid":
            return share_threshold(self.share_frac, n) if self.share_frac else self.share_min
        return {"union": 1, "concat": None}[self.order]

    def shared_tokens(self, items: Sequence[Sequence[int]], query: Sequence[int] = ()) -> set[int]:
        """The tokens of this list that are written once per row (a query term pooled from the
        query is not: :meth:`query_terms`)."""
        need = self.min_holders(len(items))
        if need is None:
            return set()
        holders = Counter(t for ids in items for t in set(ids))
        shared = {t for t, c in holders.items() if c >= need}
        if self.share == "function":
            if self.function_ids is None:
                raise ValueError("share=function needs the tokenizer: use Layout.bind(tokenizer)")
            content = self.content_min or len(items) + 1
            shared = {t for t in shared if t in self.function_ids or holders[t] >= content}
        return shared - self.query_terms(query)

    def query_terms(self, query: Sequence[int]) -> set[int]:
        """Item tokens pooled from the query instead of written in the row."""
        return set(query) if self.query_pool else set()


UNION = Layout()
#: the first rows of a merged layout: items as written, numbered along the row
CONCAT = Layout(order="concat")


@dataclasses.dataclass(frozen=True)
class ItemSlot:
    """One item inside a row: which candidate it is and where its tokens sit in the row."""

    item: int
    #: row positions pooled for this item: query tokens, the first [SEP], its shared tokens
    #: (ascending), then its own tokens (in item order)
    pool: tuple[int, ...]
    #: position inside the item of each pooled item token (aligned with the end of ``pool``)
    offsets: tuple[int, ...]


@dataclasses.dataclass(frozen=True)
class Row:
    """One encoder pass: a query with a group of its items whose tokens fit."""

    input_ids: tuple[int, ...]
    token_type_ids: tuple[int, ...]
    slots: tuple[ItemSlot, ...]
    #: position id of every token (``range(len(input_ids))`` unless own tokens are numbered by
    #: their place in the item)
    position_ids: tuple[int, ...] = ()
    #: merged layouts: the concat row the first layers run over (positions numbered 0, 1, ...)
    first_ids: tuple[int, ...] = ()
    #: merged layouts: for each position of ``first_ids``, its position in ``input_ids``
    merge_dst: tuple[int, ...] = ()


def canonical(items: Sequence[Sequence[int]]) -> list[int]:
    """Item indices in canonical order: by token ids, then index (which only breaks ties
    between identical items)."""
    return sorted(range(len(items)), key=lambda i: (tuple(items[i]), i))


def item_cost(
    ids: Sequence[int], shared: set[int], pooled: set[int] | frozenset[int] = frozenset()
) -> tuple[set[int], int]:
    """An item's distinct shared tokens and its number of own tokens (``pooled``: tokens it
    pools from the query, which take no place in the row)."""
    return {t for t in ids if t in shared}, sum(
        1 for t in ids if t not in shared and t not in pooled
    )


def pack_groups(
    items: Sequence[Sequence[int]],
    union_len: int,
    layout: Layout = UNION,
    query: Sequence[int] = (),
) -> list[list[int]]:
    """Next-fit packing of items, in canonical order, into groups whose row content (the union of
    their shared tokens plus all their own tokens) has <= union_len tokens. Returns item indices
    per group.

    Items are visited in canonical order: similar items are neighbours, and identical ones share
    a group under ``union`` (they add no token). Each item joins the current group while its
    content still fits, else opens the next one, so groups are runs of the canonical order. On
    wikiqa's BM25 top-700 lists this makes 38.6 union groups per list against 37.5 for a best-fit
    rule (+0.6% encoder tokens), and it can be computed with array operations
    (:mod:`rankers.families.crossjem.packed`).
    """
    layout = layout.packing
    shared_tokens = layout.shared_tokens(items, query)
    pooled = layout.query_terms(query)
    groups: list[list[int]] = []
    shared: set[int] = set()
    own = 0
    written: set[tuple[int, ...]] = set()  # items whose own tokens the group already holds
    for i in canonical(items):
        mine, n_own = item_cost(items[i], shared_tokens, pooled)
        if len(mine) + n_own > union_len:
            raise ValueError(
                f"item {i} needs {len(mine) + n_own} row tokens, more than union_len={union_len}"
            )
        if tuple(items[i]) in written:  # a copy of an item of this group: pools its tokens
            n_own = 0
        if not groups or len(shared | mine) + own + n_own > union_len:
            groups.append([])
            shared, own, written = set(), 0, set()
        groups[-1].append(i)
        shared |= mine
        own += n_own
        written.add(tuple(items[i]))
    return groups


def build_row(
    query: Sequence[int],
    items: Sequence[Sequence[int]],
    indices: Sequence[int],
    cls: int,
    sep: int,
    layout: Layout = UNION,
    shared_tokens: set[int] | None = None,
) -> Row:
    """The encoder row for ``query`` and the items ``indices`` in that order (their content must
    already fit). ``shared_tokens``: the list's shared tokens (default: from ``items``)."""
    if shared_tokens is None:
        shared_tokens = layout.shared_tokens(items, query)
    union = sorted({t for i in indices for t in items[i] if t in shared_tokens})
    start = len(query) + 2  # [CLS] query [SEP]
    where = {t: start + p for p, t in enumerate(union)}
    pooled = layout.query_terms(query)
    for p in reversed(range(len(query))):  # a query term: its first place in the query
        if query[p] in pooled:
            where[query[p]] = 1 + p
    input_ids = [cls, *query, sep, *union]
    position_ids = list(range(len(input_ids)))
    if layout.positions == "item" and union:
        # own tokens take start + (their place in the item): the shared block is numbered after
        # the row's longest item, so no shared token shares a position id with an own token
        longest = max(len(items[i]) for i in indices)
        position_ids[start:] = range(start + longest, start + longest + len(union))
    shared = tuple(range(1, start))  # query tokens and the first [SEP]
    slots = []
    written: dict[tuple[int, ...], list[tuple[int, int]]] = {}  # item -> its own tokens' places
    for i in indices:
        first: dict[int, int] = {}  # shared token -> its first position inside the item
        copy = written.get(tuple(items[i]))
        own: list[tuple[int, int]] = [] if copy is None else copy  # (row position, offset)
        for offset, token in enumerate(items[i]):
            if token in shared_tokens or token in pooled:
                first.setdefault(token, offset)
            elif copy is None:
                own.append((len(input_ids), offset))
                input_ids.append(token)
                position_ids.append(
                    start + offset if layout.positions == "item" else len(position_ids)
                )
        written[tuple(items[i])] = own
        pairs = sorted((where[t], o) for t, o in first.items()) + own
        slots.append(
            ItemSlot(
                item=i,
                pool=shared + tuple(p for p, _ in pairs),
                offsets=tuple(o for _, o in pairs),
            )
        )
    position_ids.append(len(input_ids))
    input_ids.append(sep)
    token_type_ids = (0,) * start + (1,) * (len(input_ids) - start)
    first_ids: list[int] = []
    merge_dst: list[int] = []
    if layout.merge_layers:  # the concat row of the same items, and where its tokens merge to
        first_ids, merge_dst = [cls, *query, sep], list(range(start))
        seen: set[tuple[int, ...]] = set()
        for i in indices:
            if tuple(items[i]) in seen:  # a copy writes nothing in the concat row either
                continue
            seen.add(tuple(items[i]))
            own_places = iter(p for p, _ in written[tuple(items[i])])
            for token in items[i]:
                first_ids.append(token)
                merge_dst.append(where[token] if token in shared_tokens else next(own_places))
        first_ids.append(sep)
        merge_dst.append(len(input_ids) - 1)
    return Row(
        input_ids=tuple(input_ids),
        token_type_ids=token_type_ids,
        slots=tuple(slots),
        position_ids=tuple(position_ids),
        first_ids=tuple(first_ids),
        merge_dst=tuple(merge_dst),
    )


def build_rows(
    query: Sequence[int],
    items: Sequence[Sequence[int]],
    union_len: int,
    cls: int,
    sep: int,
    layout: Layout = UNION,
) -> list[Row]:
    """All encoder rows for one query: one per packed group (none for an empty list)."""
    shared = layout.shared_tokens(items, query)
    return [
        build_row(query, items, g, cls, sep, layout, shared)
        for g in pack_groups(items, union_len, layout, query)
    ]


def length_buckets(lengths: Sequence[int], tolerance: float) -> list[list[int]]:
    """Row indices sorted by length and cut into runs whose padding, up to each run's longest
    row, stays within ``tolerance`` times the run's real tokens.

    The encoder computes on padding, so scoring the packed rows of a list (its last group is
    usually shorter than the full ones) in one padded batch wastes work; each run is one batch.
    """
    order = sorted(range(len(lengths)), key=lambda i: (lengths[i], i))
    buckets: list[list[int]] = []
    current: list[int] = []
    real = 0
    for i in order:  # ascending: the row being added is the run's longest
        if current and lengths[i] * (len(current) + 1) > (1.0 + tolerance) * (real + lengths[i]):
            buckets.append(current)
            current, real = [], 0
        current.append(i)
        real += lengths[i]
    if current:
        buckets.append(current)
    return buckets
