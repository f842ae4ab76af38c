"""The FLOP cost model (bench.latency.costmodel.flops) on a hand-made list, with hand-computed
integers."""

from __future__ import annotations

import pytest

from bench.latency.costmodel.flops import (
    MINILM_L6,
    EncoderShape,
    crossjem_lengths,
    estimate,
    monobert_lengths,
    paper_speedup,
    sequence_flops,
    total,
    union_stats,
)

# d = 4, d_ff = 16, 2 layers: per layer 4*n*16 + 2*n*4*16 = 192 n linear, 2*n^2*4 = 8 n^2
# attention, so sequence_flops(n) = 2 * (192 n + 8 n^2) = 384 n + 16 n^2.
TINY = EncoderShape(layers=2, hidden=4, intermediate=16)

# 4 items as WordPiece ids; L_k = 3 cuts the second to [6, 7, 8].
ITEMS = [[5, 6, 7], [6, 7, 8, 9], [5, 9], [10]]


def test_sequence_flops_hand_values() -> None:
    assert sequence_flops(9, TINY) == 384 * 9 + 16 * 81 == 4752
    assert sequence_flops(12, TINY) == 4608 + 2304 == 6912
    # MiniLM-L6, one token: 6 * (12 * 384^2 + 2 * 384) = 6 * 1_770_240
    assert sequence_flops(1, MINILM_L6) == 10_621_440


def test_union_and_compression_of_a_hand_made_list() -> None:
    stats = union_stats(ITEMS, max_item_len=3)
    # cut items: [5,6,7] [6,7,8] [5,9] [10] -> 3 + 3 + 2 + 1 = 9 tokens, union {5..10} = 6 ids
    assert (stats.n_items, stats.item_tokens, stats.union) == (4, 9, 6)
    assert stats.compression == 2.0  # L_k N / |U| = 3 * 4 / 6
    assert stats.realised_compression == 1.5  # 9 / 6
    assert stats.to_dict()["compression"] == 2.0


def test_token_counts_per_model() -> None:
    # query of 3 tokens; items of lengths 3, 3, 2, 1 after the cut
    assert monobert_lengths(3, [3, 3, 2, 1]) == [9, 9, 8, 7]
    assert crossjem_lengths(3, [6]) == [12]  # one group holding the whole union
    assert crossjem_lengths(3, [4, 3]) == [10, 9]  # two packed groups


def test_estimate_tokens_flops_and_predicted_speedup() -> None:
    e = estimate(3, [3, 3, 2, 1], [6], TINY)
    assert e.monobert_tokens == 33 and e.crossjem_tokens == 12
    # monoBERT: 2 * 4752 + (384*8 + 16*64) + (384*7 + 16*49) = 9504 + 4096 + 3472
    assert e.monobert_flops == 17_072
    assert e.crossjem_flops == 6_912
    assert e.predicted_speedup == pytest.approx(17_072 / 6_912)
    assert e.token_ratio == pytest.approx(33 / 12)


def test_merged_layers_cost_the_concat_row_in_the_first_layers() -> None:
    """Token merging after 1 of 2 layers: the first layer runs over the concat row (3 + 9 + 3 =
    15 tokens), the second over the union row (3 + 6 + 3 = 12)."""
    e = estimate(3, [3, 3, 2, 1], [6], TINY, first_row_tokens=[9], first_layers=1)
    # one layer of n tokens: 192 n + 8 n^2; 12 tokens: 2304 + 1152, 15 tokens: 2880 + 1800
    assert e.crossjem_flops == 3456 + 4680 == 8136
    assert e.crossjem_tokens == 14  # layer-weighted mean row: (15 + 12) / 2 = 13.5, rounded even
    assert e.monobert_flops == 17_072  # monoBERT does not merge
    assert e.predicted_speedup == pytest.approx(17_072 / 8136)
    # merging nothing is the unmerged cost, whatever the first rows
    assert estimate(3, [3, 3, 2, 1], [6], TINY, [9], 0) == estimate(3, [3, 3, 2, 1], [6], TINY)


def test_total_is_the_ratio_of_summed_costs() -> None:
    a = estimate(3, [3, 3, 2, 1], [6], TINY)
    b = estimate(3, [3, 3, 2, 1], [4, 3], TINY)  # the same list packed in two groups
    assert b.crossjem_flops == sequence_flops(10, TINY) + sequence_flops(9, TINY) == 5440 + 4752
    both = total([a, b])
    assert both.monobert_flops == 2 * 17_072
    assert both.crossjem_flops == 6_912 + 10_192
    assert both.predicted_speedup == pytest.approx(34_144 / 17_104)


def test_paper_worked_example() -> None:
    # Paper: L_q = L_k = 24, N = 100, C = 11 -> 400 L_q^2 L against 101.8 L_q^2 L, 3.9x lower.
    assert paper_speedup(24, 24, 100, 11) == pytest.approx(400 / 101.84, rel=1e-3)
