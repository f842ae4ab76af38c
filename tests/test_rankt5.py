"""RankT5: the score is one vocabulary logit at the first decoding step; listwise training; saving.

No T5 weights or SentencePiece model are available offline, so the T5 tests use a tiny random
``T5ForConditionalGeneration`` with the MiniLM WordPiece tokenizer plus an added ``<extra_id_10>``
token (the score token of the RankT5-base port). The default backbone (an EncoderDecoderModel built
from all-MiniLM-L6-v2) gets one test with the real weights.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from bench.data.model import Candidate, CandidateList, Query, RankingSplit
from rankers.base import RankerError
from rankers.families.rankt5 import RankT5Config, RankT5Ranker, _cut
from rankers.io.models import resolve_model

CLS, SEP, UNUSED0 = 101, 102, 1

HAND = CandidateList(
    Query("h", "what is a cat?"),
    (
        Candidate("a", "a cat is a small domesticated animal"),
        Candidate("b", "stock markets fell"),
        Candidate("c", "cats, lions and tigers are felines; the domestic cat purrs when content"),
        Candidate("d", "x"),
    ),
)


@pytest.fixture(scope="module")
def tiny_t5(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 2-layer T5 (d_model 32) over the MiniLM vocabulary plus <extra_id_10>."""
    from transformers import AutoTokenizer, T5Config, T5ForConditionalGeneration

    path = tmp_path_factory.mktemp("rankt5") / "tiny-t5"
    tokenizer = AutoTokenizer.from_pretrained(resolve_model("minilm-l6").path)
    tokenizer.add_special_tokens({"additional_special_tokens": ["<extra_id_10>"]})
    config = T5Config(
        vocab_size=len(tokenizer),
        d_model=32,
        d_kv=8,
        d_ff=64,
        num_layers=2,
        num_decoder_layers=2,
        num_heads=4,
        decoder_start_token_id=tokenizer.pad_token_id,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.sep_token_id,
    )
    torch.manual_seed(0)
    T5ForConditionalGeneration(config).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def _ranker(model: Path | str, **options: object) -> RankT5Ranker:
    return RankT5Ranker(RankT5Config(model=str(model), **options))  # type: ignore[arg-type]


def _manual_t5_logits(model: torch.nn.Module, ids: list[int], token_id: int) -> float:
    """Encoder, one decoder step from the start token, LM head: without T5's own forward."""
    with torch.no_grad():
        x = torch.tensor([ids])
        enc = model.encoder(input_ids=x).last_hidden_state
        start = torch.tensor([[model.config.decoder_start_token_id]])
        dec = model.decoder(input_ids=start, encoder_hidden_states=enc).last_hidden_state
        if model.config.tie_word_embeddings:  # T5 rescales before its tied LM head
            dec = dec * model.config.d_model**-0.5
        return float(model.lm_head(dec)[0, 0, token_id])


# -- the score token -------------------------------------------------------------------------------
def test_score_is_the_first_step_logit_of_the_score_token(tiny_t5: Path) -> None:
    ranker = _ranker(tiny_t5)
    extra = ranker.tokenizer.convert_tokens_to_ids("<extra_id_10>")
    assert extra == 30522  # the added token; T5's own vocabulary has it too, as id 32089
    assert ranker.score_token_id == extra and ranker.decoder_start_token_id == 0
    ids = ranker.pair_ids(HAND.query.text, HAND.texts)
    # the paper's template, tokenised as one text
    assert (
        ids[0] == ranker.tokenizer("Query: what is a cat? Document: " + HAND.texts[0])["input_ids"]
    )
    assert ids[3] == [CLS, 23032, 1024, 2054, 2003, 1037, 4937, 1029, 6254, 1024, 1060, SEP]
    (scores,) = ranker.score([HAND])
    expected = [_manual_t5_logits(ranker.module, row, extra) for row in ids]
    np.testing.assert_allclose(scores, expected, rtol=1e-5, atol=1e-5)
    # another score token: another vocabulary row of the same first decoding step
    other = _ranker(tiny_t5, score_token="[unused0]")
    assert other.score_token_id == UNUSED0
    expected = [_manual_t5_logits(other.module, row, UNUSED0) for row in ids]
    np.testing.assert_allclose(other.score([HAND])[0], expected, rtol=1e-5, atol=1e-5)
    info = ranker.describe()
    assert info["backbone"] == "T5ForConditionalGeneration" and info["is_t5"] is True
    assert info["score_token"] == "<extra_id_10>" and info["score_token_id"] == extra


def test_length_bucketing_keeps_order_and_values(tiny_t5: Path) -> None:
    one = _ranker(tiny_t5, batch_size=1)
    many = _ranker(tiny_t5, batch_size=3)
    second = CandidateList(Query("q2", HAND.query.text), HAND.candidates[::-1])
    a = one.score([HAND, second])
    b = many.score([HAND, second])
    assert [len(s) for s in b] == [4, 4]
    for x, y in zip(a, b, strict=True):
        np.testing.assert_allclose(x, y, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(b[1], b[0][::-1], rtol=1e-5, atol=1e-5)  # pointwise
    assert many.score([]) == []
    assert len(many.score([CandidateList(Query("e", "empty"), ())])[0]) == 0


def test_max_length_cuts_the_document_end(tiny_t5: Path) -> None:
    ranker = _ranker(tiny_t5, max_length=8)
    (ids,) = ranker.pair_ids("what is a cat?", ["a long document about cats"])
    assert ids == [CLS, 23032, 1024, 2054, 2003, 1037, 4937, SEP]


@pytest.mark.slow
def test_default_backbone_is_a_minilm_encoder_decoder_not_t5() -> None:
    from safetensors.torch import load_file

    ranker = RankT5Ranker()
    model = ranker.module
    info = ranker.describe()
    assert info["backbone"] == "EncoderDecoderModel" and info["is_t5"] is False
    assert info["backbone_parts"] == ["bert", "bert"]
    assert info["model_id"] == "encdec:sentence-transformers/all-MiniLM-L6-v2"
    assert info["score_token"] == "[unused0]" and info["decoder_start_token_id"] == CLS
    assert info["base_weights_hash"] is not None
    # the encoder is MiniLM (loaded, not random)
    weights = load_file(str(Path(resolve_model("minilm-l6").path) / "model.safetensors"))
    key = next(k for k in weights if k.endswith("embeddings.word_embeddings.weight"))
    torch.testing.assert_close(
        model.encoder.embeddings.word_embeddings.weight.detach(), weights[key]
    )
    # the score is the decoder's logit of [unused0] after [CLS], computed here step by step
    (ids,) = ranker.pair_ids(HAND.query.text, HAND.texts[:1])
    with torch.no_grad():
        x = torch.tensor([ids])
        enc = model.encoder(input_ids=x).last_hidden_state
        dec = model.decoder(input_ids=torch.tensor([[CLS]]), encoder_hidden_states=enc)
        expected = float(dec.logits[0, 0, UNUSED0])
    assert ranker.score([CandidateList(HAND.query, HAND.candidates[:1])])[0][0] == pytest.approx(
        expected, abs=1e-4
    )


# -- training --------------------------------------------------------------------------------------
def _split(rows: list[tuple[str, list[str], list[str]]]) -> RankingSplit:
    lists, qrels = [], {}
    for i, (query, pos, neg) in enumerate(rows):
        qid = f"q{i}"
        cands = [Candidate(f"{qid}p{j}", t) for j, t in enumerate(pos)]
        cands += [Candidate(f"{qid}n{j}", t) for j, t in enumerate(neg)]
        lists.append(CandidateList(Query(qid, query), tuple(cands)))
        qrels[qid] = {f"{qid}p{j}": 1 for j in range(len(pos))}
        qrels[qid] |= {f"{qid}n{j}": 0 for j in range(len(neg))}
    return RankingSplit(dataset="tiny", split="train", lists=lists, qrels=qrels)


TRAIN = _split(
    [
        ("bake sourdough bread", ["sourdough loaf with starter"], ["car tire repair", "stocks"]),
        ("python list comprehension", ["python lists built inline"], ["java streams", "bread"]),
        ("fix a flat bike tire", ["patch a bicycle tube", "bike tube repair"], ["racing news"]),
        ("visit japan in spring", ["cherry blossoms in kyoto"], ["grammar", "paris", "rome"]),
        ("flu symptoms", ["fever and cough"], ["flu clinic hours", "weather today"]),
    ]
)


def test_lists_are_cut_to_list_size() -> None:
    p = [Candidate(f"p{i}", "") for i in range(3)]
    n = [Candidate(f"n{i}", "") for i in range(5)]
    ids = lambda cands: [c.docid for c in cands]  # noqa: E731
    assert ids(_cut(p, n, 4, None)) == ["p0", "n0", "n1", "n2"]  # negatives first, >= 1 positive
    assert ids(_cut(p, n[:1], 3, None)) == ["p0", "p1", "n0"]  # room left: more positives
    assert ids(_cut(p[:1], n[:2], 4, None)) == ["p0", "n0", "n1"]  # short lists stay whole
    assert ids(_cut([], n, 2, None)) == ["n0", "n1"]
    import random

    sampled = ids(_cut(p, n, 4, random.Random(0)))
    assert len(sampled) == 4 and sum(d.startswith("p") for d in sampled) == 1


def test_fit_lowers_the_listwise_loss_and_round_trips(tiny_t5: Path, tmp_path: Path) -> None:
    options = {"lr": 3e-3, "epochs": 4, "train_batch_queries": 2, "list_size": 3, "seed": 1}
    ranker = _ranker(tiny_t5, **options)
    before_hash = ranker.describe()["weights_hash"]
    before = ranker.training_loss(TRAIN)
    summary = ranker.fit(TRAIN, dev=TRAIN).to_json()
    after = ranker.training_loss(TRAIN)
    assert after < before - 0.05
    assert summary["weights_hash"] != before_hash
    assert summary["weights_hash"] == ranker.describe()["weights_hash"]
    assert summary["steps"] == 4 * 3 and summary["loss_name"] == "ce"
    assert summary["list_size"] == 3 and summary["train_candidates"] == 15
    assert summary["best_epoch"] == 1 + int(np.argmax(summary["dev_AP@10"]))

    ranker.save(tmp_path / "ckpt")
    restored = _ranker("unused", max_length=9, score_token="[unused0]")
    restored.load(tmp_path / "ckpt")
    assert restored.cfg.max_length == 256 and restored.cfg.score_token == "<extra_id_10>"
    for a, b in zip(restored.score(TRAIN.lists), ranker.score(TRAIN.lists), strict=True):
        np.testing.assert_array_equal(a, b)
    info = restored.describe()
    assert info["weights_hash"] == summary["weights_hash"] and info["fine_tuned"] is True
    assert info["model_id"] == str(tiny_t5) and info["checkpoint"] == str(tmp_path / "ckpt")


def test_encoder_decoder_from_a_bert_round_trips(
    tiny_bert: Path, tiny_t5: Path, tmp_path: Path
) -> None:
    ranker = _ranker(f"encdec:{tiny_bert}", seed=5)
    assert ranker.untrained_weights() == "the decoder's cross-attention and LM head"
    assert _ranker(tiny_t5).untrained_weights() is None  # a seq2seq LM as is
    info = ranker.describe()
    assert info["backbone"] == "EncoderDecoderModel" and info["is_t5"] is False
    assert info["new_weights"] == "cross-attention, LM head"
    # the new weights are seeded
    assert _ranker(f"encdec:{tiny_bert}", seed=5).describe()["weights_hash"] == info["weights_hash"]
    assert _ranker(f"encdec:{tiny_bert}", seed=6).describe()["weights_hash"] != info["weights_hash"]
    ranker.save(tmp_path / "ckpt")
    restored = RankT5Ranker()
    restored.load(tmp_path / "ckpt")
    assert restored.cfg.model == f"encdec:{tiny_bert}"
    assert restored.untrained_weights() is None  # its saved weights are what it scores with
    np.testing.assert_array_equal(restored.score([HAND])[0], ranker.score([HAND])[0])
    again = restored.describe()
    assert again["weights_hash"] == info["weights_hash"] and again["is_t5"] is False
    assert again["model_id"] == info["model_id"] == f"encdec:{tiny_bert}"


# -- options and errors ----------------------------------------------------------------------------
def test_options_and_errors(tiny_t5: Path, tiny_bert: Path, tmp_path: Path) -> None:
    with pytest.raises(RankerError, match="template"):
        RankT5Config.from_options({"template": "Query: {query}"})
    with pytest.raises(RankerError, match="loss='hinge'"):
        RankT5Config.from_options({"loss": "hinge"})
    with pytest.raises(RankerError, match="list_size=1"):
        RankT5Config.from_options({"list_size": "1"})
    assert RankT5Config.from_options({"list_size": "none"}).list_size is None
    with pytest.raises(RankerError, match="'<extra_id_99>' is not in the vocabulary"):
        _ranker(tiny_t5, score_token="<extra_id_99>").score([HAND])
    with pytest.raises(RankerError, match="not an encoder-decoder"):
        _ranker(tiny_bert).score([HAND])
    with pytest.raises(RankerError, match="cannot load"):
        _ranker(tmp_path / "missing").score([HAND])
    with pytest.raises(RankerError, match="not a rankt5 checkpoint"):
        RankT5Ranker().load(tmp_path)


def test_bfloat16_scoring_casts_a_copy_once(tiny_t5: Path) -> None:
    low, ref = _ranker(tiny_t5, dtype="bfloat16"), _ranker(tiny_t5)
    assert (low.compute_dtype(), ref.compute_dtype()) == ("bfloat16 weights", "float32")
    np.testing.assert_allclose(low.score([HAND])[0], ref.score([HAND])[0], atol=0.1)
    assert low.scoring_module() is low.scoring_module()
    assert next(low.module.parameters()).dtype == torch.float32
