"""Dual encoders (DPR, ANCE) on the real all-MiniLM-L6-v2 weights and tiny hand-made splits."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import torch
from crashing import Crash, die_after_checkpoint

from bench.data.model import Candidate, CandidateList, Query, RankingSplit, text_id
from rankers import create_ranker
from rankers.base import RankerError
from rankers.families.dense import ANCERanker, DenseConfig, DenseRanker, DPRRanker, state_hash
from rankers.io.models import resolve_model, weights_hash

pytestmark = pytest.mark.slow


def _split(name: str, rows: list[tuple[str, list[str], list[str]]]) -> RankingSplit:
    """(query, positives, negatives) rows -> a split; docids from the texts, so shared texts
    are one document of the collection."""
    lists, qrels = [], {}
    for i, (query, pos, neg) in enumerate(rows):
        qid = f"{name}-{i}"
        cands = tuple(Candidate(text_id(t, "d"), t) for t in [*pos, *neg])
        lists.append(CandidateList(Query(qid, query), cands))
        qrels[qid] = {text_id(t, "d"): 1 for t in pos} | {text_id(t, "d"): 0 for t in neg}
    return RankingSplit(dataset="tiny", split=name, lists=lists, qrels=qrels)


PYTHON = "python list comprehension tutorial"
BREAD = "sourdough bread recipe with a starter"

TRAIN = _split(
    "train",
    [
        (
            "how do I bake sourdough bread",
            [BREAD, "baking loaves at home with wild yeast"],
            ["bread prices rise in supermarkets", "changing a flat car tire", PYTHON],
        ),
        (
            "python list comprehension",
            [PYTHON, "building lists in python with comprehensions"],
            ["java list streams tutorial", BREAD],
        ),
        (
            "fix a flat bicycle tire",
            ["repairing a punctured bike tube", "how to patch a bicycle inner tube"],
            ["changing a flat car tire", "bicycle racing results"],
        ),
        (
            "best time to visit japan",
            ["cherry blossom season in kyoto", "japan travel seasons explained"],
            [
                "japanese grammar lessons",
                "visit the louvre in paris",
                "obedience school for horses",
            ],
        ),
        (
            "symptoms of the flu",
            ["influenza causes fever, cough and aches", "how to tell a cold from the flu"],
            ["flu shot clinic opening hours"],
        ),
        # no non-relevant candidate: negatives come from the collection
        ("puppy obedience training", ["teaching a dog the sit command"], []),
    ],
)

DEV = _split(
    "dev",
    [
        (
            "sourdough starter feeding",
            ["how often to feed a sourdough starter"],
            ["python list comprehension tutorial", "bike tire pressure guide"],
        ),
        (
            "list comprehensions in python",
            ["python comprehension syntax for lists"],
            ["sourdough bread recipe with a starter", "japan travel seasons explained"],
        ),
    ],
)

HAND = CandidateList(
    Query("h", "What is the capital of France?"),
    (
        Candidate("b", "Bananas are rich in potassium."),
        Candidate("a", "Paris is the capital of France."),
        Candidate("c", "The stock market fell sharply today."),
    ),
)

FIT = {"epochs": "2", "train_batch_size": "4", "lr": "1e-4", "hard_negatives": "1", "seed": "7"}


@pytest.fixture(scope="module")
def zero_shot() -> DPRRanker:
    return DPRRanker()


def test_zero_shot_ranks_match_first_and_scores_are_cosines(zero_shot: DPRRanker) -> None:
    (scores,) = zero_shot.score([HAND])
    assert scores.dtype == np.float64 and scores.shape == (3,)
    assert int(np.argmax(scores)) == 1
    assert np.all(scores >= -1.0) and np.all(scores <= 1.0)
    # the same numbers by an independent route: sentence-transformers' own encode + cosine
    emb = zero_shot.model.encode([HAND.query.text, *HAND.texts], convert_to_numpy=True)
    emb = emb / np.linalg.norm(emb, axis=1, keepdims=True)
    np.testing.assert_allclose(scores, emb[1:] @ emb[0], atol=1e-5)


def test_the_model_step_gives_encodes_scores_bit_for_bit(zero_shot: DPRRanker) -> None:
    """On all-MiniLM-L6-v2 (Transformer, mean Pooling, Normalize) the host and model steps
    score as ``encode`` does, bit for bit, at query time and from precomputed items, in batches
    of mixed lengths (padded) and of one text (unpadded)."""
    from rankers.families.dense_steps import plain_text_model

    assert plain_text_model(zero_shot.model)
    lists = [*TRAIN.lists, *DEV.lists]
    for options in ({"batch_size": 3}, {"batch_size": 1}, {"batch_size": 4, "precompute": True}):
        ranker = DPRRanker(DenseConfig(**options))
        ranker._model, ranker._similarity = zero_shot.model, zero_shot.similarity
        ranker.index(RankingSplit("tiny", "all", lists, {}))
        prepared = ranker.prepare_scoring(lists)
        assert prepared.queries is not None
        for a, b in zip(ranker.score_prepared(prepared), ranker.score_library(lists), strict=True):
            assert a.dtype == b.dtype == np.float64
            assert np.array_equal(a, b)


def test_describe_records_model_hash_and_similarity(zero_shot: DPRRanker) -> None:
    ref = resolve_model("minilm-l6")
    info = zero_shot.describe()
    assert info["name"] == "dpr" and info["family"] == "dual"
    assert info["model_id"] == "sentence-transformers/all-MiniLM-L6-v2"
    assert info["weights_hash"] == weights_hash(ref.path)
    # all-MiniLM-L6-v2's config names no similarity: the documented fallback
    assert info["similarity"] == "cosine"
    assert info["similarity_source"].startswith("default")
    assert info["fine_tuned"] is False and info["config"]["model"] == "minilm-l6"


def test_precomputed_items_give_the_query_time_scores(zero_shot: DPRRanker) -> None:
    pre = DPRRanker(DenseConfig(precompute=True))
    pre._model, pre._similarity = zero_shot.model, zero_shot.similarity  # share the weights
    with pytest.raises(RankerError, match="index"):
        pre.score(DEV.lists)
    pre.index(DEV)
    assert pre._items is not None and len(pre._items[0]) == len(DEV.collection())
    for a, b in zip(pre.score(DEV.lists), zero_shot.score(DEV.lists), strict=True):
        np.testing.assert_allclose(a, b, atol=1e-5)
    with pytest.raises(RankerError, match="no precomputed embedding"):
        pre.score([HAND])


def test_options_are_checked() -> None:
    with pytest.raises(RankerError, match=r"unknown option\(s\) temprature.*known: .*scale"):
        create_ranker("ance", {"temprature": "0.05"})
    with pytest.raises(RankerError, match="similarity='l2'"):
        create_ranker("dpr", {"similarity": "l2"})
    ranker = create_ranker("dpr", {"similarity": "dot", "precompute": "yes", "max_length": "32"})
    assert isinstance(ranker, DPRRanker)
    assert ranker.config == DenseConfig(similarity="dot", precompute=True, max_length=32)


def test_dot_similarity_option_is_used(zero_shot: DPRRanker) -> None:
    dot = DPRRanker(DenseConfig(similarity="dot"))
    assert dot.describe()["similarity"] == "dot"
    assert dot.describe()["similarity_source"] == "option"
    # all-MiniLM-L6-v2 ends in a Normalize module: dot and cosine agree
    np.testing.assert_allclose(dot.score([HAND])[0], zero_shot.score([HAND])[0], atol=1e-5)


def _fit(cls: type[DenseRanker], **extra: str) -> tuple[DenseRanker, dict, str]:
    ranker = cls(DenseConfig.from_options({**FIT, **extra}))
    before = state_hash(ranker.model)
    ranker.index(DEV)  # with precompute: embedded with the old weights, re-embedded after fit
    return ranker, ranker.fit(TRAIN, DEV).to_json(), before


def _check_summary(summary: dict, before: str, ranker: DenseRanker, k: int) -> None:
    # 11 (query, positive) pairs in 6 queries; batches of 4 -> 3 steps per epoch
    assert summary["train_pairs"] == 11 and summary["train_queries"] == 6
    assert summary["steps"] == 2 * math.ceil(11 / 4) == 6
    assert summary["epochs"] == 2 and len(summary["dev_AP@10"]) == 2
    assert summary["hard_negatives_per_query"] == k
    assert summary["collection_fallback_queries"] == 1
    assert summary["scale"] == 20.0 and summary["similarity"] == "cosine"
    dev = summary["dev_AP@10"]
    assert summary["best_epoch"] == 1 + int(np.argmax(dev))  # ties keep the earlier epoch
    assert all(0.0 <= v <= 1.0 for v in dev) and 0.0 <= summary["dev_AP@10_before"] <= 1.0
    # the weights moved, and the kept ones are the best epoch's
    assert summary["weights_hash"] != before
    assert summary["weights_hash"] == summary["epoch_weights_hash"][summary["best_epoch"] - 1]
    assert summary["weights_hash"] == state_hash(ranker.model)
    info = ranker.describe()
    assert info["fine_tuned"] is True and info["weights_hash"] == summary["weights_hash"]


def _check_round_trip(ranker: DenseRanker, tmp_path: Path) -> None:
    ranker.save(tmp_path / "ckpt")
    assert (tmp_path / "ckpt" / "ranker.json").is_file()
    folder_hash = weights_hash(tmp_path / "ckpt" / "model")
    assert ranker.describe()["weights_hash"] == folder_hash
    if ranker.config.precompute:  # the fine-tuned item embeddings were refreshed
        fresh = ranker._score(DEV.lists, use_cache=False)
        for a, b in zip(ranker.score(DEV.lists), fresh, strict=True):
            np.testing.assert_allclose(a, b, atol=1e-5)
    restored = type(ranker)(DenseConfig(precompute=ranker.config.precompute))
    restored.index(DEV)
    restored.load(tmp_path / "ckpt")
    for a, b in zip(restored.score(DEV.lists), ranker.score(DEV.lists), strict=True):
        np.testing.assert_array_equal(a, b)
    info = restored.describe()
    assert info["weights_hash"] == folder_hash and info["fine_tuned"] is True
    assert info["base_model_id"] == "sentence-transformers/all-MiniLM-L6-v2"
    assert restored.training_summary == ranker.training_summary


def test_dpr_fine_tunes_with_bm25_negatives(tmp_path: Path) -> None:
    ranker, summary, before = _fit(DPRRanker, precompute="true")
    _check_summary(summary, before, ranker, k=1)
    assert summary["negatives"] == "bm25" and not summary["negatives_refreshed_per_epoch"]
    # BM25 mines once; hand-checked: the only non-relevant candidate sharing a query term wins
    assert len(ranker.mining_rounds) == 1 and ranker.mining_rounds[0].weights == before
    negatives = ranker.mining_rounds[0].negatives
    assert negatives["train-0"] == [text_id("bread prices rise in supermarkets", "d")]
    assert negatives["train-2"] == [text_id("changing a flat car tire", "d")]
    assert negatives["train-1"] == [text_id("java list streams tutorial", "d")]
    # the puppy query has no candidate negative: BM25 over the collection, where one document
    # shares a term with it
    assert negatives["train-5"] == [text_id("obedience school for horses", "d")]
    _check_round_trip(ranker, tmp_path)
    with pytest.raises(RankerError, match="saved by ranker 'dpr', not 'ance'"):
        ANCERanker().load(tmp_path / "ckpt")


def _self_ranked(ranker: DenseRanker, query: str, pool: list[str], k: int) -> list[str]:
    """Independent ANCE mining for one query: sentence-transformers encode, cosine, sort."""
    texts = TRAIN.collection()
    emb = ranker.model.encode([query, *(texts[d] for d in pool)], convert_to_numpy=True)
    emb = emb / np.linalg.norm(emb, axis=1, keepdims=True)
    sims = emb[1:] @ emb[0]
    return sorted(pool, key=lambda d: (-sims[pool.index(d)], d))[:k]


def test_ance_fine_tunes_and_remines_with_current_weights(tmp_path: Path) -> None:
    ranker, summary, before = _fit(ANCERanker, hard_negatives="2")
    _check_summary(summary, before, ranker, k=2)
    assert summary["negatives_refreshed_per_epoch"] is True
    rounds = ranker.mining_rounds
    # epoch 1 mined with the base weights, epoch 2 with the weights epoch 1 ended with
    assert [r.epoch for r in rounds] == [1, 2]
    assert rounds[0].weights == before
    assert rounds[1].weights == summary["epoch_weights_hash"][0] != before
    # the mining function ranks by the weights it is given: compare with an independent ranking
    from rankers.fit.dense import mine_negatives

    mined = mine_negatives(ranker, TRAIN, epoch=3)
    assert mined.weights == state_hash(ranker.model)
    pools = {
        "train-0": [text_id(t, "d") for t in TRAIN.lists[0].texts[2:]],
        "train-3": [text_id(t, "d") for t in TRAIN.lists[3].texts[2:]],  # 3 negatives
    }
    for qid, pool in pools.items():
        query = next(cl.query.text for cl in TRAIN.lists if cl.query.qid == qid)
        assert mined.negatives[qid] == _self_ranked(ranker, query, pool, 2)
    assert len(mined.negatives["train-4"]) == 1  # only one candidate negative exists
    puppy_pos = {text_id("teaching a dog the sit command", "d")}
    fallback = [d for d in TRAIN.collection() if d not in puppy_pos]
    assert mined.negatives["train-5"] == _self_ranked(
        ranker, "puppy obedience training", fallback, 2
    )
    _check_round_trip(ranker, tmp_path)


@pytest.mark.parametrize("cls", [DPRRanker, ANCERanker], ids=["dpr", "ance"])
def test_interrupted_fit_resumes_to_identical_weights(
    cls: type[DenseRanker], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tiny_bert: Path
) -> None:
    """11 pairs, 4 a step: 3 steps per epoch, 2 epochs, checkpoints at steps 2, 3 (epoch end),
    4 and 6. The first run dies after publishing step 4 (inside epoch 2); a fresh ranker given
    the same work directory resumes there and ends where an uninterrupted run ends - dropout
    RNG, optimizer, schedule and, for ANCE, the negatives epoch 2 mined with weights that no
    checkpoint holds any more. (On the tiny BERT: four trainings, and what is checked is the
    resumed state, not what MiniLM learns.)"""
    options = {**FIT, "checkpoint_steps": "2", "model": str(tiny_bert)}
    plain_ranker = cls(DenseConfig.from_options(options))
    plain = plain_ranker.fit(TRAIN, DEV).to_json()
    assert plain["steps"] == 6 and plain["resumed_from"] is None and plain["checkpoint"] is None

    saved = die_after_checkpoint(monkeypatch, step=4)
    first = cls(DenseConfig.from_options(options))
    first.work_dir = tmp_path
    with pytest.raises(Crash):
        first.fit(TRAIN, DEV)
    assert saved == [2, 3, 4]

    resumed = cls(DenseConfig.from_options(options))
    resumed.work_dir = tmp_path
    summary = resumed.fit(TRAIN, DEV).to_json()
    assert summary["resumed_from"] == {"epoch": 1, "step": 4}
    assert saved == [2, 3, 4, 6]
    keys = ("weights_hash", "epoch_weights_hash", "loss", "dev_AP@10", "dev_AP@10_before")
    for key in (*keys, "best_epoch", "steps", "collection_fallback_queries"):
        assert summary[key] == plain[key], key
    assert state_hash(resumed.model) == plain["weights_hash"]
    assert resumed.mining_rounds == plain_ranker.mining_rounds

    monkeypatch.undo()
    other = cls(DenseConfig.from_options({**options, "lr": "2e-4"}))  # other settings
    other.work_dir = tmp_path
    assert other.fit(TRAIN, DEV).resumed_from is None


def test_loss_masks_in_batch_positives_of_the_same_query(zero_shot: DPRRanker) -> None:
    """Two pairs of one query in a batch: each pair's other positive is no negative for it."""
    from rankers.fit.dense import Pair, contrastive_loss

    texts = TRAIN.collection()
    q0, q1 = TRAIN.lists[0].query, TRAIN.lists[1].query
    bake, loaves, java = (
        BREAD,
        "baking loaves at home with wild yeast",
        "java list streams tutorial",
    )
    prices = "bread prices rise in supermarkets"
    batch = [
        Pair(q0.qid, q0.text, text_id(bake, "d"), bake),
        Pair(q0.qid, q0.text, text_id(loaves, "d"), loaves),
        Pair(q1.qid, q1.text, text_id(PYTHON, "d"), PYTHON),
    ]
    negatives = {q0.qid: [text_id(prices, "d")], q1.qid: [text_id(java, "d")]}
    positives = {q: {d for d, g in r.items() if g >= 1} for q, r in TRAIN.qrels.items()}
    loss = contrastive_loss(zero_shot, batch, negatives, positives, texts, scale=20.0)
    # expected by hand: columns [bake, loaves, python, prices, prices, java]
    emb = zero_shot.model.encode(
        [q0.text, q0.text, q1.text, bake, loaves, PYTHON, prices, prices, java]
    )
    emb = emb / np.linalg.norm(emb, axis=1, keepdims=True)
    logits = 20.0 * emb[:3] @ emb[3:].T
    logits[0, 1] = logits[1, 0] = -np.inf  # q0's other positive; BREAD stays a negative of q1
    logp = logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))
    expected = -np.mean([logp[0, 0], logp[1, 1], logp[2, 2]])
    assert float(loss.detach()) == pytest.approx(float(expected), abs=1e-4)


def test_bfloat16_encoding_casts_a_copy_once() -> None:
    low = DPRRanker(DenseConfig.from_options({"dtype": "bfloat16"}))
    ref = DPRRanker(DenseConfig())
    assert (low.compute_dtype(), ref.compute_dtype()) == ("bfloat16 weights", "float32")
    lists = [
        CandidateList(
            Query("q", "how to sort a list in python"),
            (Candidate("a", "sorting a list in python"), Candidate("b", "java arrays")),
        )
    ]
    got, want = low.score(lists)[0], ref.score(lists)[0]
    np.testing.assert_allclose(got, want, atol=0.02)
    assert not np.array_equal(got, want)  # scored through the cast copy, not in float32
    cast = low.encoding_model()
    assert cast is low.encoding_model() and cast is not low.model  # one copy, cached
    assert {p.dtype for p in cast.parameters()} == {torch.bfloat16}
    assert {p.dtype for p in low.model.parameters()} == {torch.float32}  # training weights
    assert ref.encoding_model() is ref.model  # float32: no copy
