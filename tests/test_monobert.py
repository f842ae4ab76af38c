"""monoBERT: pair layout, length bucketing, list-level forward, checkpoints."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from bench.data.model import Candidate, CandidateList, Query
from rankers.base import RankerError
from rankers.families.monobert import MonoBERTRanker

TEXTS = [
    "sorting a list in python",
    "python",
    "how do i sort a dictionary by value and then by key in python 3",
    "",
    "java arrays sort",
    "sort a list of tuples by the second element of each tuple",
]


def _ranker(model: Path | str, **options: object) -> MonoBERTRanker:
    ranker = MonoBERTRanker(MonoBERTRanker.Config.from_options({"model": str(model), **options}))
    assert isinstance(ranker, MonoBERTRanker)
    return ranker


def _list(texts: list[str], qid: str = "q1", query: str = "how to sort a list in python"):
    return CandidateList(
        Query(qid, query), tuple(Candidate(f"d{i}", t) for i, t in enumerate(texts))
    )


def test_pair_layout(tiny_bert: Path) -> None:
    ranker = _ranker(tiny_bert, max_query_len=4, max_item_len=2)
    # "how to sort a list in python" -> 2129 2000 4066 1037 2862 1999 18750, cut to 4;
    # "java arrays sort" -> 9262 27448 4066, cut to 2
    ((ids, types),) = ranker.pairs("how to sort a list in python", ["java arrays sort"])
    assert ids == [101, 2129, 2000, 4066, 1037, 102, 9262, 27448, 102]
    assert types == [0] * 6 + [1] * 3


@pytest.mark.parametrize("pooling", ["cls", "mean", "pooler"])
def test_bucketing_restores_order(tiny_bert: Path, pooling: str) -> None:
    lists = [_list(TEXTS), _list(TEXTS[::-1][:4], "q2", query="java"), _list([], "q3")]
    bucketed = _ranker(tiny_bert, pooling=pooling, batch_size=3).score(lists)
    single = _ranker(tiny_bert, pooling=pooling, batch_size=1)
    assert [len(s) for s in bucketed] == [6, 4, 0]
    for cl, scores in zip(lists, bucketed, strict=True):
        one_by_one = [single.score([_list([t], query=cl.query.text)])[0][0] for t in cl.texts]
        np.testing.assert_allclose(scores, one_by_one, atol=1e-5)
    assert len(set(np.round(bucketed[0], 6))) == 6  # the scores do differ between items


def test_forward_matches_score(tiny_bert: Path) -> None:
    ranker = _ranker(tiny_bert)
    lists = [_list(TEXTS), _list(TEXTS[:2], "q2", query="java")]
    with ranker.inference():
        logits, mask = ranker.forward(ranker.prepare([(cl.query.text, cl.texts) for cl in lists]))
    assert logits.shape == (2, 6)
    assert mask.tolist() == [[True] * 6, [True, True] + [False] * 4]
    for b, scores in enumerate(ranker.score(lists)):
        np.testing.assert_allclose(logits[b, : len(scores)].numpy(), scores, atol=1e-5)
    assert torch.equal(logits[1, 2:], torch.zeros(4))


def test_save_load_round_trip(tiny_bert: Path, tmp_path: Path) -> None:
    ranker = _ranker(tiny_bert, pooling="mean", max_item_len=8, seed=5)
    lists = [_list(TEXTS)]
    before = ranker.score(lists)[0]
    ranker.save(tmp_path / "ckpt")
    loaded = _ranker("minilm-l6", batch_size=2)
    loaded.load(tmp_path / "ckpt")
    assert (loaded.cfg.pooling, loaded.cfg.max_item_len, loaded.cfg.batch_size) == ("mean", 8, 2)
    np.testing.assert_allclose(loaded.score(lists)[0], before, atol=1e-6)
    assert loaded.describe()["weights_hash"] == ranker.describe()["weights_hash"]
    info = ranker.describe()
    assert (info["name"], info["family"], info["config"]["pooling"]) == (
        "monobert",
        "early",
        "mean",
    )


def test_options_are_validated() -> None:
    with pytest.raises(RankerError, match="pooling='max'"):
        MonoBERTRanker.Config.from_options({"pooling": "max"})
    with pytest.raises(RankerError, match="dtype='fp8'"):
        MonoBERTRanker.Config.from_options({"dtype": "fp8"})
    with pytest.raises(RankerError, match="cannot load encoder"):
        _ = _ranker("/nonexistent/model-dir").module


@pytest.mark.parametrize("pretokenise", [True, False])
def test_pair_matrix_scores_equal_the_simple_pairs(tiny_bert: Path, pretokenise: bool) -> None:
    """score() (pair matrix from stored ids, one copy, sliced batches) against pairs()."""
    from bench.data.model import RankingSplit

    ranker = _ranker(tiny_bert, batch_size=4, pretokenise=pretokenise)
    lists = [_list(TEXTS), _list(TEXTS[::-1], "q2", query="java"), _list([], "q3")]
    ranker.index(RankingSplit("toy", "test", lists[:1], {}))
    assert len(ranker.item_tokens) == (len(TEXTS) if pretokenise else 0)
    assert ranker.scoring_mode() == ("pre-tokenised" if pretokenise else "end-to-end")
    prepared = ranker.prepare_scoring(lists)
    pairs = [p for cl in lists for p in ranker.pairs(cl.query.text, cl.texts)]
    for k, i in enumerate(prepared.order.tolist()):  # same ids, sorted by length
        ids, types = pairs[i]
        length = int(prepared.length[k])
        assert prepared.input_ids[k, :length].tolist() == ids
        assert int(prepared.query_end[k]) == types.index(1)
    with ranker.inference():
        expected = ranker.module(*ranker._pad(pairs)).numpy()
    got = np.concatenate(ranker.score(lists))
    np.testing.assert_allclose(got, expected, atol=1e-5)


def test_bfloat16_scoring_is_close_and_keeps_float32_weights(tiny_bert: Path) -> None:
    low, ref = _ranker(tiny_bert, dtype="bfloat16"), _ranker(tiny_bert)
    assert (low.compute_dtype(), ref.compute_dtype()) == ("bfloat16 weights", "float32")
    np.testing.assert_allclose(
        low.score([_list(TEXTS)])[0], ref.score([_list(TEXTS)])[0], atol=0.05
    )
    assert next(low.module.parameters()).dtype == torch.float32


def test_latency_variants_time_both_scoring_modes(tiny_bert: Path) -> None:
    variants = _ranker(tiny_bert).latency_variants([32, 64])
    assert [(v.column, v.options) for v in variants] == [
        ("monobert", {"batch_size": 32, "pretokenise": True}),
        ("monobert", {"batch_size": 64, "pretokenise": True}),
        ("monobert (end-to-end)", {"batch_size": 32, "pretokenise": False}),
        ("monobert (end-to-end)", {"batch_size": 64, "pretokenise": False}),
    ]
