"""CROSS-JEM: input building, packing, pooling arithmetic, order invariance, checkpoints."""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest
import torch
from scipy.stats import kendalltau
from toydata import gold_split

from bench.data.model import Candidate, CandidateList, Query, RankingSplit
from rankers.base import RankerError
from rankers.compute.losses import get_loss
from rankers.families.crossjem.inputs import build_row, pack_groups
from rankers.families.crossjem.model import sinusoids
from rankers.families.crossjem.ranker import CrossJEMRanker

CLS, SEP = 101, 102

ITEMS = [
    "sorting a list in python",
    "python list sort method",
    "how do i sort a dictionary by value",
    "java arrays sort",
    "sort a list of tuples by the second element",
    "",
    "python python python",
    "reverse a list in python",
    "list comprehension with if else",
    "python list sort method",  # a duplicate of item 1
]


def _ranker(model: Path | str, **options: object) -> CrossJEMRanker:
    ranker = CrossJEMRanker(CrossJEMRanker.Config.from_options({"model": str(model), **options}))
    assert isinstance(ranker, CrossJEMRanker)
    return ranker


def _list(texts: list[str], qid: str = "q1", query: str = "how to sort a list in python"):
    cands = tuple(Candidate(f"d{i}", t) for i, t in enumerate(texts))
    return CandidateList(Query(qid, query), cands)


# -- inputs (pure Python) ------------------------------------------------------------------------
def test_build_row_layout_pool_and_offsets() -> None:
    # query [5, 6]; item 0 = [9, 7, 9] (9 repeats), item 1 = [7, 8]; union sorted = [7, 8, 9]
    row = build_row([5, 6], [[9, 7, 9], [7, 8]], [0, 1], CLS, SEP)
    # positions:      0    1  2  3    4  5  6  7
    assert row.input_ids == (CLS, 5, 6, SEP, 7, 8, 9, SEP)
    assert row.token_type_ids == (0, 0, 0, 0, 1, 1, 1, 1)
    item0, item1 = row.slots
    # query tokens (1, 2) and the first [SEP] (3), never [CLS] (0) or the final [SEP] (7);
    # item 0 holds 7 (position 4) and 9 (position 6), each once
    assert item0.item == 0 and item0.pool == (1, 2, 3, 4, 6)
    # item positions aligned with the union part of pool: 7 is at item position 1, 9 first at 0
    assert item0.offsets == (1, 0)
    assert item1.item == 1 and item1.pool == (1, 2, 3, 4, 5)
    assert item1.offsets == (0, 1)


def test_pack_groups_hand_example() -> None:
    # canonical order: [1,2] (2), [1,2,3] (0), [3,4,5] (1), [6,7,8] (3); union_len 5
    # {1,2} -> +3 = {1,2,3} -> +4,5 = 5 tokens (fits) -> [6,7,8] would make 8: new group
    items = [[1, 2, 3], [3, 4, 5], [1, 2], [6, 7, 8]]
    assert pack_groups(items, 5) == [[2, 0, 1], [3]]
    assert pack_groups(items, 8) == [[2, 0, 1, 3]]


def test_pack_groups_is_next_fit_in_canonical_order() -> None:
    # canonical order [1,2,3] (0), [4,5,6,7] (1), [6,7] (2); union_len 6: [4,5,6,7] would make
    # 7 tokens and opens group 1; [6,7] joins the current group (it adds nothing there), groups
    # are runs of the canonical order, never revisited
    assert pack_groups([[1, 2, 3], [4, 5, 6, 7], [6, 7]], 6) == [[0], [1, 2]]
    # [1,2] (3) sorts before [1,2,9] (0) and [3,4] (1): shorter prefix first; an empty item
    # sorts first and adds nothing
    assert pack_groups([[1, 2, 9], [3, 4], [5, 6, 7], [1, 2], []], 4) == [[4, 3, 0], [1], [2]]


def test_pack_groups_is_order_independent_and_rejects_oversized_items() -> None:
    rng = random.Random(0)
    items = [[rng.randrange(40) for _ in range(rng.randrange(1, 6))] for _ in range(30)]
    groups = pack_groups(items, 12)
    assert len(groups) > 1 and sorted(i for g in groups for i in g) == list(range(30))
    for g in groups:
        assert len({t for i in g for t in items[i]}) <= 12
    as_sets = sorted(sorted(tuple(items[i]) for i in g) for g in groups)
    perm = list(range(30))
    rng.shuffle(perm)
    shuffled = [items[p] for p in perm]
    as_sets_shuffled = sorted(
        sorted(tuple(shuffled[i]) for i in g) for g in pack_groups(shuffled, 12)
    )
    assert as_sets == as_sets_shuffled
    with pytest.raises(ValueError, match="more than union_len=2"):
        pack_groups([[1, 2, 3]], 2)


def test_config_rejects_item_longer_than_union() -> None:
    with pytest.raises(RankerError, match="max_item_len=40 exceeds union_len=32"):
        CrossJEMRanker.Config.from_options({"max_item_len": "40", "union_len": "32"})


# -- model ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("item_positions", [False, True])
def test_logits_equal_hand_pooled_classifier(tiny_bert: Path, item_positions: bool) -> None:
    """logit_j = w . (sum of E over P_qk [+ PE at item positions]) / |P_qk| + b, row by row."""
    ranker = _ranker(tiny_bert, item_positions=item_positions)
    texts = ITEMS[:5]
    module = ranker.module
    with ranker.inference():
        logits, mask = ranker.forward(ranker.prepare([("how to sort a list in python", texts)]))
        (row,) = ranker.rows("how to sort a list in python", texts)
        ids = torch.tensor([row.input_ids])
        hidden = module.encoder(
            input_ids=ids,
            attention_mask=torch.ones_like(ids),
            token_type_ids=torch.tensor([row.token_type_ids]),
        ).last_hidden_state[0]
        table = sinusoids(ranker.cfg.max_item_len, hidden.shape[-1])
        w, b = module.classifier.weight[0], module.classifier.bias[0]
        for slot in row.slots:
            total = hidden[list(slot.pool)].sum(dim=0)
            if item_positions:
                total = total + table[list(slot.offsets)].sum(dim=0)
            expected = float(w @ (total / len(slot.pool)) + b)
            assert logits[0, slot.item].item() == pytest.approx(expected, abs=1e-5)
    assert mask.tolist() == [[True] * 5]


def _random_lists(rng: random.Random, n_lists: int) -> list[tuple[str, list[str]]]:
    words = [
        "python",
        "list",
        "sort",
        "java",
        "dict",
        "value",
        "tuple",
        "reverse",
        "key",
        "map",
        "set",
        "the",
        "a",
        "of",
        "in",
        "by",
    ]

    def text(k: int) -> str:
        return " ".join(rng.choice(words) for _ in range(k))

    return [
        (
            text(rng.randrange(1, 5)),
            [text(rng.randrange(0, 9)) for _ in range(rng.randrange(0, 25))],
        )
        for _ in range(n_lists)
    ]


@pytest.mark.parametrize("union_len", [8, 12, 40])
def test_packed_inputs_equal_the_simple_implementation(tiny_bert: Path, union_len: int) -> None:
    """The array-built rows, pooling sets and item positions are exactly the oracle's."""
    from rankers.families.crossjem.model import collate

    ranker = _ranker(tiny_bert, union_len=union_len, max_item_len=8)
    rng = random.Random(union_len)
    for _ in range(5):
        lists = _random_lists(rng, 3)
        fast = ranker.pack(lists)
        simple = collate([ranker.rows(q, items) for q, items in lists])
        for name in fast.ARRAYS:
            np.testing.assert_array_equal(getattr(fast, name), getattr(simple, name), name)
        assert fast.n_items == simple.n_items


def test_packed_inputs_use_the_index_time_token_store(tiny_bert: Path) -> None:
    ranker = _ranker(tiny_bert, union_len=16, max_item_len=8)
    lists = [_list(ITEMS)]
    before = ranker.score(lists)[0]
    ranker.index(RankingSplit("toy", "test", lists, {}))
    assert len(ranker.item_tokens) == len(set(ITEMS))
    np.testing.assert_array_equal(ranker.score(lists)[0], before)  # same scores, bit for bit
    off = _ranker(tiny_bert, union_len=16, max_item_len=8, pretokenise=False)
    off.index(RankingSplit("toy", "test", lists, {}))
    assert len(off.item_tokens) == 0
    np.testing.assert_array_equal(off.score(lists)[0], before)


@pytest.mark.parametrize("union_len", [242, 12])
def test_scores_equal_the_simple_implementation(tiny_bert: Path, union_len: int) -> None:
    """score() (packed inputs, length buckets, index pooling) against the oracle's rows."""
    ranker = _ranker(tiny_bert, union_len=union_len, max_item_len=8, item_positions=True)
    lists = [_list(ITEMS, "q1"), _list(ITEMS[2:7], "q2", query="java sort"), _list([], "q3")]
    with ranker.inference():
        logits, _ = ranker.forward(
            ranker.prepare_simple([(cl.query.text, cl.texts) for cl in lists])
        )
    for b, (cl, s) in enumerate(zip(lists, ranker.score(lists), strict=True)):
        np.testing.assert_allclose(s, logits[b, : len(cl)].numpy(), atol=1e-5)


def test_bfloat16_scoring_casts_the_weights_once(tiny_bert: Path) -> None:
    ranker = _ranker(tiny_bert, dtype="bfloat16", union_len=16, max_item_len=8)
    fp32 = _ranker(tiny_bert, union_len=16, max_item_len=8)
    lists = [_list(ITEMS)]
    low, ref = ranker.score(lists)[0], fp32.score(lists)[0]
    assert ranker.compute_dtype() == "bfloat16 weights" and fp32.compute_dtype() == "float32"
    cast = ranker.scoring_module()
    assert cast is ranker.scoring_module()  # cached: not re-cast per call
    assert next(cast.parameters()).dtype == torch.bfloat16
    assert next(ranker.module.parameters()).dtype == torch.float32  # training weights untouched
    # a random head's scores span about 0.6: an absolute 0.05 would be 8% of it. bfloat16 keeps
    # 8 bits of mantissa (relative error ~0.4% per rounding), so 2% of each score, and the order
    assert not np.array_equal(low, ref)  # scored through the cast copy
    np.testing.assert_allclose(low, ref, rtol=0.02, atol=0)
    assert np.abs(low - ref).max() <= 0.02 * (ref.max() - ref.min())
    assert np.argmax(low) == np.argmax(ref) and kendalltau(low, ref).statistic >= 0.95
    with torch.no_grad():  # a weight update invalidates the cast copy
        next(ranker.module.parameters()).add_(1.0)
    assert ranker.scoring_module() is not cast


def test_item_positions_cannot_see_word_order(tiny_bert: Path) -> None:
    """Mean pooling and the classifier are linear, so adding PE before pooling adds only the mean
    of the item's PE rows: it depends on which positions the item has, not on which token sits
    where. Pinned, because the paper presents the variant as restoring word order."""
    texts = ["python sort list", "list sort python", "java"]
    bag = _ranker(tiny_bert).score([_list(texts)])[0]
    assert bag[0] == pytest.approx(bag[1], abs=1e-6)  # same token set: same pooled tokens
    ordered = _ranker(tiny_bert, item_positions=True).score([_list(texts)])[0]
    assert ordered[0] == pytest.approx(ordered[1], abs=1e-6)
    assert abs(ordered[0] - bag[0]) > 1e-4  # the encodings do change the scores


@pytest.mark.parametrize("union_len", [242, 16])
def test_scores_permute_with_candidates(tiny_bert: Path, union_len: int) -> None:
    ranker = _ranker(tiny_bert, union_len=union_len, max_item_len=8)
    cl = _list(ITEMS)
    rows = ranker.rows(cl.query.text, cl.texts)
    assert (len(rows) > 1) == (union_len == 16)
    base = ranker.score([cl])[0]
    assert base[1] == base[9]  # identical items, identical scores
    rng = random.Random(1)
    for _ in range(3):
        perm = list(range(len(ITEMS)))
        rng.shuffle(perm)
        shuffled = ranker.score([_list([ITEMS[p] for p in perm])])[0]
        np.testing.assert_allclose(shuffled, base[perm], atol=1e-5)


def test_batching_queries_does_not_change_scores(tiny_bert: Path) -> None:
    lists = [
        _list(ITEMS, "q1"),
        _list(ITEMS[2:6], "q2", query="java sort"),
        _list([], "q3"),
        _list(ITEMS[::-1], "q4", query="reverse a list"),
    ]
    together = _ranker(tiny_bert, batch_queries=4, union_len=20, max_item_len=8).score(lists)
    alone = _ranker(tiny_bert, batch_queries=1, union_len=20, max_item_len=8).score(lists)
    assert [len(s) for s in together] == [10, 4, 0, 10]
    for a, b in zip(together, alone, strict=True):
        np.testing.assert_allclose(a, b, atol=1e-5)


def test_forward_trains_with_a_ranking_loss(tiny_bert: Path) -> None:
    ranker = _ranker(tiny_bert, dropout=0.0)
    batch = ranker.prepare([("sort a list", ITEMS[:4]), ("java", ITEMS[3:5])])
    targets = torch.tensor([[0.9, 0.6, 0.2, 0.1], [0.8, 0.3, 0.0, 0.0]])
    module = ranker.module.train()
    optimizer = torch.optim.AdamW(module.parameters(), lr=1e-3)
    logits, mask = ranker.forward(batch)
    assert logits.shape == (2, 4) and mask.tolist() == [[True] * 4, [True, True, False, False]]
    loss = get_loss("listnet")(logits, targets, mask)
    loss.backward()
    optimizer.step()
    after, _ = ranker.forward(batch)
    assert get_loss("listnet")(after, targets, mask).item() < loss.item()


# -- checkpoints and provenance ------------------------------------------------------------------
def test_save_load_round_trip(tiny_bert: Path, tmp_path: Path) -> None:
    ranker = _ranker(tiny_bert, union_len=20, max_item_len=8, item_positions=True, seed=3)
    lists = [_list(ITEMS), _list(ITEMS[:3], "q2", query="java")]
    before = ranker.score(lists)
    ranker.save(tmp_path / "ckpt")
    saved = json.loads((tmp_path / "ckpt" / "ranker.json").read_text())
    assert saved["name"] == "crossjem" and saved["config"]["union_len"] == 20

    # a default-configured ranker adopts the checkpoint's settings (not its batch size)
    loaded = _ranker("minilm-l6", batch_queries=1)
    loaded.load(tmp_path / "ckpt")
    cfg = loaded.cfg
    assert (cfg.union_len, cfg.item_positions, cfg.batch_queries) == (20, True, 1)
    via_option = _ranker("minilm-l6", checkpoint=str(tmp_path / "ckpt"))
    for other in (loaded, via_option):
        for a, b in zip(before, other.score(lists), strict=True):
            np.testing.assert_allclose(a, b, atol=1e-6)
        assert other.describe()["weights_hash"] == ranker.describe()["weights_hash"]
    info = via_option.describe()
    assert info["model_id"] == str(tiny_bert.resolve())
    assert info["base_weights_hash"] == ranker.describe()["base_weights_hash"] is not None


def test_load_rejects_other_rankers_and_missing_files(tiny_bert: Path, tmp_path: Path) -> None:
    with pytest.raises(RankerError, match="not a crossjem checkpoint"):
        _ranker(tiny_bert).load(tmp_path)
    ranker = _ranker(tiny_bert)
    ranker.save(tmp_path / "ckpt")
    meta = tmp_path / "ckpt" / "ranker.json"
    meta.write_text(meta.read_text().replace('"crossjem"', '"monobert"'))
    # the save's manifest catches the edit first
    with pytest.raises(RankerError, match="ranker.json does not match its recorded checksum"):
        _ranker(tiny_bert).load(tmp_path / "ckpt")
    (tmp_path / "ckpt" / "manifest.json").unlink()  # a folder without one: the name is checked
    with pytest.raises(RankerError, match="saved by ranker .monobert."):
        _ranker(tiny_bert).load(tmp_path / "ckpt")


def test_seed_fixes_the_untrained_head(tiny_bert: Path) -> None:
    cl = _list(ITEMS[:4])
    a, b, c = (_ranker(tiny_bert, seed=s).score([cl])[0] for s in (0, 0, 1))
    np.testing.assert_array_equal(a, b)
    assert not np.allclose(a, c)


@pytest.mark.slow
def test_real_minilm_scores_wikiqa_list(shared_data: Path) -> None:
    line = (shared_data / "wikiqa" / "test.jsonl").read_text().splitlines()[0]
    record = json.loads(line)
    texts = record["positive"] + record["negative"]
    ranker = _ranker("minilm-l6", union_len=64)
    cl = _list(texts, record["qid"], record["query"])
    assert len(ranker.rows(cl.query.text, cl.texts)) > 1
    scores = ranker.score([cl])[0]
    assert scores.shape == (len(texts),) and np.isfinite(scores).all()
    perm = list(range(len(texts)))[::-1]
    reversed_list = _list([texts[p] for p in perm], record["qid"], record["query"])
    np.testing.assert_allclose(ranker.score([reversed_list])[0], scores[perm], atol=1e-5)
    assert ranker.describe()["model_id"] == "sentence-transformers/all-MiniLM-L6-v2"


# -- training (rankers.fit.loop) -----------------------------------------------------------------


def test_fit_learns_and_keeps_the_best_dev_epoch(tiny_bert: Path) -> None:
    ranker = _ranker(tiny_bert, lr=2e-3, epochs=4, train_batch_queries=4, dropout=0.0)
    summary = ranker.fit(gold_split("train", 0), gold_split("dev", 1)).to_json()
    dev = summary["dev_AP@10"]
    assert len(dev) == 4 and summary["loss_name"] == "listnet"
    assert summary["best_epoch"] == 1 + int(np.argmax(dev))
    assert max(dev) > summary["dev_AP@10_before"] + 0.2
    assert summary["weights_hash"] == summary["epoch_weights_hash"][summary["best_epoch"] - 1]
    assert ranker.describe()["weights_hash"] == summary["weights_hash"]


def test_rpl_on_binary_qrels_is_an_error(tiny_bert: Path) -> None:
    ranker = _ranker(tiny_bert, loss="rpl", epochs=1)
    with pytest.raises(RankerError, match="RPL needs graded or teacher scores"):
        ranker.fit(gold_split("train", 0))


def test_rpl_trains_on_a_saved_teacher(
    tiny_bert: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import rankers

    # the teacher is found through the registry by the name in its ranker.json
    monkeypatch.setitem(rankers._REGISTRY, "monobert", "rankers.families.monobert:MonoBERTRanker")
    from rankers.families.monobert import MonoBERTRanker

    teacher = MonoBERTRanker(MonoBERTRanker.Config.from_options({"model": str(tiny_bert)}))
    teacher.fit(gold_split("train", 0))
    teacher.save(tmp_path / "teacher")
    student = _ranker(tiny_bert, loss="rpl", epochs=3, teacher=str(tmp_path / "teacher"))
    untrained = _ranker(tiny_bert).module.encoder.state_dict()  # the encoder fit starts from
    summary = student.fit(gold_split("train", 0)).to_json()
    assert summary["targets"] == f"teacher {teacher.describe()['weights_hash']}"
    assert summary["skipped_queries"] == 0 and len(summary["loss"]) == 3
    assert np.isfinite(summary["loss"]).all()
    # training lowered the loss (by ~5% here; without optimizer steps it moves ~0.1%) ...
    assert summary["loss"][-1] < 0.99 * summary["loss"][0]
    trained = student.module.encoder.state_dict()
    assert trained.keys() == untrained.keys()
    changed = [k for k in trained if not torch.equal(trained[k], untrained[k])]
    assert len(changed) > len(trained) // 2  # ... by changing the encoder's weights


def test_length_buckets_hand_example() -> None:
    from rankers.families.crossjem.inputs import length_buckets

    # sorted 150 | 270 275 280 284: adding 270 to [150] would pad 540 tokens for 420 real (> 5%)
    assert length_buckets([284, 150, 280, 270, 275], 0.05) == [[1], [3, 4, 2, 0]]
    assert length_buckets([10, 10], 0.0) == [[0, 1]]
    assert length_buckets([], 0.05) == []


def test_length_bucketed_scoring_equals_one_padded_batch(tiny_bert: Path) -> None:
    ranker = _ranker(tiny_bert, union_len=16, max_item_len=8, batch_queries=2)
    lists = [_list(ITEMS, "q1"), _list(ITEMS[2:7], "q2", query="java sort")]
    (batch,) = ranker.prepare_scoring(lists)
    assert len(batch.buckets) > 1  # rows of different lengths were not padded together
    with ranker.inference():
        logits, _ = ranker.forward(ranker.prepare([(cl.query.text, cl.texts) for cl in lists]))
    for b, (cl, s) in enumerate(zip(lists, ranker.score(lists), strict=True)):
        np.testing.assert_allclose(s, logits[b, : len(cl)].numpy(), atol=1e-5)
