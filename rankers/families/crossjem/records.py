"""The records of CROSS-JEM's packed inputs: what :func:`~rankers.families.crossjem.packed.
pack_lists` returns and the model uploads (kept apart from the code that builds them)."""

from __future__ import annotations

import dataclasses

import numpy as np


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
    #: merged layouts: columns of the first (concat) rows of this call
    first_width: int = 0


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
    #: position id of every token, None when every row numbers its tokens 0, 1, 2, ... (the
    #: encoder's default); set only by ``positions="item"`` layouts
    position_ids: np.ndarray | None = None
    #: merged layouts (``merge_layers`` > 0): the concat rows the first layers run over, their
    #: lengths, and for each of their positions its position in ``input_ids`` (-1: padding)
    first_ids: np.ndarray | None = None
    first_len: np.ndarray | None = None
    merge_dst: np.ndarray | None = None

    #: the optional array fields of merged layouts
    MERGE_ARRAYS = ("first_ids", "first_len", "merge_dst")

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


def drop_default_positions(position_ids: np.ndarray) -> np.ndarray | None:
    """None when every row is numbered ``0 .. width - 1`` (the encoder then numbers it itself),
    else the matrix: the simple and the fast path agree on when position ids are passed."""
    default = np.arange(position_ids.shape[1])[None, :]
    return None if bool((position_ids == default).all()) else position_ids
