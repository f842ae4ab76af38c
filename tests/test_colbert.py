"""ColBERT via colbert-ai: MaxSim, query augmentation, punctuation masking, projection, training,
checkpoints. A tiny random BERT (with the real MiniLM WordPiece vocabulary) keeps it fast; one test
loads the real all-MiniLM-L6-v2 weights."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
from crashing import Crash, die_after_checkpoint

from bench.data.model import Candidate, CandidateList, Query, RankingSplit
from rankers.base import RankerError
from rankers.families.colbert import ColBERTRanker, ColBERTRankerConfig, _no_cpp_extension
from rankers.fit.colbert import ColBERTSteps
from rankers.io.models import resolve_model, state_hash

# bert-base-uncased vocabulary ids (MiniLM's): colbert-ai's markers are [unused0]/[unused1]
CLS, SEP, MASK, PAD, Q_MARK, D_MARK = 101, 102, 103, 0, 1, 2
# "what is a cat?" -> what is a cat ?
CAT_QUERY_IDS = [2054, 2003, 1037, 4937, 1029]
DOT = 1012  # "."

HAND = CandidateList(
    Query("h", "what is a cat?"),
    (
        Candidate("a", "a cat is a small domesticated animal."),
        Candidate("b", "stock markets fell sharply today"),
        Candidate("c", "!!!"),
        Candidate("d", "cats, lions and tigers are felines; the cat purrs."),
    ),
)


def _ranker(path: Path, **options: object) -> ColBERTRanker:
    return ColBERTRanker(ColBERTRankerConfig(model=str(path), **options))  # type: ignore[arg-type]


# -- MaxSim ----------------------------------------------------------------------------------------
def test_colbert_score_is_maxsim_on_hand_made_embeddings() -> None:
    from colbert.infra import ColBERTConfig
    from colbert.modeling.colbert import colbert_score

    config = ColBERTConfig()
    config.total_visible_gpus = 0
    Q = torch.tensor([[[1.0, 0.0], [0.0, 1.0]]])  # one query, two vectors
    D = torch.tensor(
        [
            [[0.6, 0.8], [1.0, 0.0], [0.0, 0.0]],  # q1 -> 1.0, q2 -> 0.8        = 1.8
            [[0.8, 0.6], [0.0, -1.0], [5.0, 5.0]],  # masked [5,5] must not win: 0.8 + 0.6 = 1.4
            [[-0.6, -0.8], [-0.8, -0.6], [0.0, 0.0]],  # masked zero must not give 0: -1.2
        ]
    )
    mask = torch.tensor([[True, True, False], [True, True, False], [True, True, False]])
    scores = colbert_score(Q, D, mask[..., None], config=config)
    torch.testing.assert_close(scores, torch.tensor([1.8, 1.4, -1.2]))


def test_ranker_scores_equal_maxsim_of_its_own_embeddings(tiny_bert: Path) -> None:
    # batch_size 2: several length buckets, each cut to its own longest document
    ranker = _ranker(tiny_bert, batch_size=2)
    (scores,) = ranker.score([HAND])
    Q = ranker.encode_queries([HAND.query.text])[0]
    expected = []
    for text in HAND.texts:  # one document at a time: no padding at all
        D, mask = ranker.encode_documents([text])
        sims = Q @ D[0][mask[0]].T  # (query tokens, unmasked document tokens)
        expected.append(float(sims.max(dim=1).values.sum()))
    np.testing.assert_allclose(scores, expected, rtol=1e-5, atol=1e-5)
    # several lists in one call: scores do not depend on the company
    two = ranker.score([HAND, CandidateList(Query("x", "dogs"), HAND.candidates[:2])])
    np.testing.assert_allclose(two[0], scores, rtol=1e-5, atol=1e-5)
    assert [len(s) for s in two] == [4, 2]
    assert ranker.score([]) == []
    assert len(ranker.score([CandidateList(Query("e", "empty"), ())])[0]) == 0


# -- query and document encoding -------------------------------------------------------------------
def test_query_is_padded_with_mask_tokens_that_are_not_attended_to(tiny_bert: Path) -> None:
    ranker = _ranker(tiny_bert)
    ids, att = ranker.query_tokenizer.tensorize(["what is a cat?"])
    real = [CLS, Q_MARK, *CAT_QUERY_IDS, SEP]
    assert ids[0].tolist() == real + [MASK] * (32 - len(real))
    # colbert-ai default attend_to_mask_tokens=False: [MASK]s are keys no token attends to ...
    assert att[0].tolist() == [1] * len(real) + [0] * (32 - len(real))
    Q = ranker.encode_queries(["what is a cat?"])
    # ... but they still get output vectors, all kept for MaxSim (query augmentation)
    assert Q.shape == (1, 32, 128)
    torch.testing.assert_close(Q[0].norm(dim=-1), torch.ones(32))
    # unattended: the real tokens' vectors do not depend on how many [MASK]s follow
    short = _ranker(tiny_bert, query_maxlen=16).encode_queries(["what is a cat?"])
    assert short.shape == (1, 16, 128)
    torch.testing.assert_close(short[0, : len(real)], Q[0, : len(real)], atol=1e-5, rtol=1e-5)

    attending = _ranker(tiny_bert, attend_to_mask_tokens=True)
    ids2, att2 = attending.query_tokenizer.tensorize(["what is a cat?"])
    assert ids2.tolist() == ids.tolist() and att2[0].tolist() == [1] * 32
    moved = attending.encode_queries(["what is a cat?"])
    assert not torch.allclose(moved[0, : len(real)], Q[0, : len(real)], atol=1e-4)


def test_documents_get_the_d_marker_and_punctuation_is_masked(tiny_bert: Path) -> None:
    ranker = _ranker(tiny_bert)
    ids, att = ranker.doc_tokenizer.tensorize(["a cat.", "cat"])
    assert ids.tolist() == [[CLS, D_MARK, 1037, 4937, DOT, SEP], [CLS, D_MARK, 4937, SEP, PAD, PAD]]
    D, mask = ranker.encode_documents(["a cat.", "cat"])
    assert mask.tolist() == [[True] * 4 + [False, True], [True] * 4 + [False, False]]
    assert torch.all(D[0, 4] == 0) and torch.all(D[1, 4:] == 0)
    unmasked = _ranker(tiny_bert, mask_punctuation=False).encode_documents(["a cat."])[1]
    assert unmasked.tolist() == [[True] * 6]
    # doc_maxlen counts [CLS] [D] ... [SEP]
    cut, _ = _ranker(tiny_bert, doc_maxlen=5).doc_tokenizer.tensorize(["a cat is here"])
    assert cut.tolist() == [[CLS, D_MARK, 1037, 4937, SEP]]


def test_projection_is_applied_and_matters(tiny_bert: Path) -> None:
    ranker = _ranker(tiny_bert, dim=24)
    assert ranker.colbert.bert.config.hidden_size == 32
    assert tuple(ranker.colbert.linear.weight.shape) == (24, 32)
    assert ranker.colbert.linear.bias is None
    assert ranker.encode_queries(["cat"]).shape == (1, 32, 24)
    info = ranker.describe()
    assert info["dim"] == 24 and info["hidden_size"] == 32 and info["projection"] == "new (seed 0)"
    before = ranker.score([HAND])[0]
    with torch.no_grad():
        ranker.colbert.linear.weight.add_(
            torch.randn(24, 32, generator=torch.Generator().manual_seed(1))
        )
    after = ranker.score([HAND])[0]
    assert np.abs(after - before).max() > 0.1
    # a new projection is seeded: the same seed gives the same weights, another seed others
    assert _ranker(tiny_bert, dim=24).describe()["weights_hash"] == state_hash(
        _ranker(tiny_bert, dim=24).colbert
    )
    assert (
        _ranker(tiny_bert, dim=24).describe()["weights_hash"]
        != _ranker(tiny_bert, dim=24, seed=1).describe()["weights_hash"]
    )


@pytest.mark.slow
def test_real_minilm_base_gets_a_128_dim_projection() -> None:
    from safetensors.torch import load_file

    ranker = ColBERTRanker()  # default model: minilm-l6
    model = ranker.colbert
    assert model.bert.config.hidden_size == 384
    assert tuple(model.linear.weight.shape) == (128, 384)
    # the BERT is MiniLM's (loaded, not random); only the projection is new
    ref = resolve_model("minilm-l6")
    weights = load_file(str(Path(ref.path) / "model.safetensors"))
    key = next(k for k in weights if k.endswith("embeddings.word_embeddings.weight"))
    torch.testing.assert_close(model.bert.embeddings.word_embeddings.weight.detach(), weights[key])
    Q = ranker.encode_queries(["what is a cat?"])
    assert Q.shape == (1, 32, 128)
    (scores,) = ranker.score([HAND])
    assert scores.shape == (4,) and np.all(np.isfinite(scores))
    # cosine MaxSim: each of the 32 query vectors contributes at most 1
    assert np.all(scores <= 32.0 + 1e-4)
    info = ranker.describe()
    assert info["model_id"] == "sentence-transformers/all-MiniLM-L6-v2"
    assert info["base_weights_hash"] is not None and info["projection"] == "new (seed 0)"


# -- training --------------------------------------------------------------------------------------
def _split(name: str, rows: list[tuple[str, list[str], list[str]]], level: int = 1) -> RankingSplit:
    lists, qrels = [], {}
    for i, (query, pos, neg) in enumerate(rows):
        qid = f"{name}{i}"
        cands = [Candidate(f"{qid}p{j}", t) for j, t in enumerate(pos)]
        cands += [Candidate(f"{qid}n{j}", t) for j, t in enumerate(neg)]
        lists.append(CandidateList(Query(qid, query), tuple(cands)))
        qrels[qid] = {f"{qid}p{j}": level for j in range(len(pos))}
        qrels[qid] |= {f"{qid}n{j}": 0 for j in range(len(neg))}
    return RankingSplit(dataset="tiny", split=name, lists=lists, qrels=qrels, relevance_level=1)


TRAIN = _split(
    "t",
    [
        ("bake sourdough bread", ["sourdough loaf with starter"], ["car tire repair", "stocks"]),
        ("python list comprehension", ["python lists built inline"], ["java streams", "bread"]),
        ("fix a flat bike tire", ["patch a bicycle tube", "bike tube repair"], ["racing news"]),
        ("visit japan in spring", ["cherry blossoms in kyoto"], ["grammar lessons", "paris"]),
        ("flu symptoms", ["fever and cough"], ["flu clinic hours", "weather today"]),
    ],
)


def test_triples_take_negatives_from_the_list_and_respect_the_relevance_level(
    tiny_bert: Path,
) -> None:
    ranker = _ranker(tiny_bert, nway=3)
    triples = ColBERTSteps(ranker).triples(TRAIN)
    assert len(triples) == 6  # one per (query, relevant candidate)
    bike = [t for t in triples if t.qid == "t2"]
    # one negative in the list: cycled to fill nway - 1 = 2
    assert [t.negatives for t in bike] == [("racing news", "racing news")] * 2
    assert triples[0].negatives == ("car tire repair", "stocks")
    graded = _split("g", [("q", ["grade one"], ["grade zero"])])
    graded.qrels["g0"]["g0p0"] = 1
    graded.relevance_level = 2  # grade 1 no longer counts: no positive, no triple
    assert ColBERTSteps(ranker).triples(graded) == []
    with pytest.raises(RankerError, match="nothing to train on"):
        ranker.fit(graded)


def test_fit_changes_weights_lowers_the_loss_and_round_trips(
    tiny_bert: Path, tmp_path: Path
) -> None:
    options = {"lr": 1e-3, "epochs": 3, "train_batch_size": 3, "doc_maxlen": 16, "seed": 3}
    ranker = _ranker(tiny_bert, **options)
    assert ranker.untrained_weights() == "the ColBERT projection on a bare BERT"
    before_hash = ranker.describe()["weights_hash"]
    before_loss = ColBERTSteps(ranker).training_loss(TRAIN)
    summary = ranker.fit(TRAIN, dev=TRAIN).to_json()
    after_loss = ColBERTSteps(ranker).training_loss(TRAIN)
    assert after_loss < before_loss - 0.05
    assert summary["weights_hash"] != before_hash
    assert summary["weights_hash"] == ranker.describe()["weights_hash"]
    assert summary["steps"] == 3 * 2 and summary["triples_per_epoch"] == 6  # 6 triples, 3 a step
    assert summary["train_queries"] == 5 and summary["skipped_queries"] == 0
    assert summary["best_epoch"] == 1 + int(np.argmax(summary["dev_AP@10"]))
    assert ranker.describe()["fine_tuned"] is True

    ranker.save(tmp_path / "ckpt")
    assert (tmp_path / "ckpt" / "colbert" / "artifact.metadata").is_file()
    restored = ColBERTRanker(ColBERTRankerConfig(doc_maxlen=180, model="unused"))
    assert ranker.untrained_weights() is None
    restored.load(tmp_path / "ckpt")
    assert restored.cfg.doc_maxlen == 16 and restored.cfg.model == str(tiny_bert)
    assert restored.untrained_weights() is None
    # a colbert-ai checkpoint folder (with its projection) scores as it is
    assert _ranker(tmp_path / "ckpt" / "colbert").untrained_weights() is None
    for a, b in zip(restored.score(TRAIN.lists), ranker.score(TRAIN.lists), strict=True):
        np.testing.assert_array_equal(a, b)
    info = restored.describe()
    assert info["weights_hash"] == summary["weights_hash"] and info["fine_tuned"] is True
    assert info["projection"] == "from checkpoint"


def test_interrupted_fit_resumes_to_identical_weights(
    tiny_bert: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """6 triples, 2 a step: 3 steps per epoch, 2 epochs, checkpoints at steps 2, 3 (epoch end),
    4 and 6. The first run dies after publishing step 4 (inside epoch 2); a fresh ranker given
    the same work directory resumes there and ends where an uninterrupted run ends."""
    options = {
        "lr": 1e-3,
        "epochs": 2,
        "train_batch_size": 2,
        "doc_maxlen": 16,
        "checkpoint_steps": 2,
    }
    plain = _ranker(tiny_bert, **options).fit(TRAIN, dev=TRAIN).to_json()
    assert plain["steps"] == 6 and plain["resumed_from"] is None and plain["checkpoint"] is None

    saved = die_after_checkpoint(monkeypatch, step=4)
    first = _ranker(tiny_bert, **options)
    first.work_dir = tmp_path
    with pytest.raises(Crash):
        first.fit(TRAIN, dev=TRAIN)
    assert saved == [2, 3, 4]

    resumed = _ranker(tiny_bert, **options)
    resumed.work_dir = tmp_path
    summary = resumed.fit(TRAIN, dev=TRAIN).to_json()
    assert summary["resumed_from"] == {"epoch": 1, "step": 4}
    assert saved == [2, 3, 4, 6]
    for key in ("weights_hash", "loss", "dev_AP@10", "dev_AP@10_before", "best_epoch", "steps"):
        assert summary[key] == plain[key], key
    assert state_hash(resumed.colbert) == plain["weights_hash"]

    monkeypatch.undo()
    other = _ranker(tiny_bert, **{**options, "lr": 2e-3})  # other settings: not resumed
    other.work_dir = tmp_path
    assert other.fit(TRAIN, dev=TRAIN).resumed_from is None


def test_saved_folder_is_a_colbert_ai_checkpoint(tiny_bert: Path, tmp_path: Path) -> None:
    """colbert-ai's own inference path (Checkpoint + colbert_score) gives the ranker's scores."""
    from colbert.infra import ColBERTConfig
    from colbert.modeling.checkpoint import Checkpoint
    from colbert.modeling.colbert import colbert_score

    ranker = _ranker(tiny_bert, doc_maxlen=20)
    ranker.save(tmp_path / "ckpt")
    with _no_cpp_extension(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # colbert-ai's CUDA amp manager on a CPU machine
        ckpt = Checkpoint(str(tmp_path / "ckpt" / "colbert"), ColBERTConfig(), verbose=0)
        Q = ckpt.queryFromText([HAND.query.text])
        ids, mask = ckpt.doc_tokenizer.tensorize(HAND.texts)
        D, D_mask = ckpt.doc(ids, mask, keep_dims="return_mask")
    assert ckpt.colbert_config.doc_maxlen == 20 and ckpt.colbert_config.dim == 128
    expected = colbert_score(Q, D, D_mask, config=ckpt.colbert_config)
    # colbert-ai scores on cuda:0 when a GPU is visible
    np.testing.assert_allclose(
        ranker.score([HAND])[0], expected.cpu().numpy(), rtol=1e-5, atol=1e-5
    )


# -- options and errors ----------------------------------------------------------------------------
def test_options_are_validated(tmp_path: Path) -> None:
    with pytest.raises(RankerError, match="similarity='l2'"):
        ColBERTRankerConfig.from_options({"similarity": "l2"})
    with pytest.raises(RankerError, match="nway=1"):
        ColBERTRankerConfig.from_options({"nway": "1"})
    with pytest.raises(RankerError, match="query_maxlen"):
        ColBERTRankerConfig.from_options({"query_maxlen": "3"})
    cfg = ColBERTRankerConfig.from_options({"dim": "64", "use_ib_negatives": "yes"})
    assert cfg.dim == 64 and cfg.use_ib_negatives is True
    with pytest.raises(RankerError, match="not a colbert checkpoint"):
        ColBERTRanker().load(tmp_path)
    with pytest.raises(RankerError, match="cannot load"):
        _ranker(tmp_path / "missing-model").score([HAND])


def test_bfloat16_scoring_casts_a_copy_once(tiny_bert: Path) -> None:
    low, ref = _ranker(tiny_bert, dtype="bfloat16"), _ranker(tiny_bert)
    assert (low.compute_dtype(), ref.compute_dtype()) == ("bfloat16 weights", "float32")
    got, want = low.score([HAND])[0], ref.score([HAND])[0]
    np.testing.assert_allclose(got, want, atol=0.1)
    assert not np.array_equal(got, want)  # scored through the cast copy, not in float32
    cast = low.scoring_model()
    assert cast is low.scoring_model() and cast is not low.colbert  # one copy, cached
    # the encoder is bf16; the projection head stays float32 so the vectors are not bf16-rounded
    dtypes = {name: p.dtype for name, p in cast.named_parameters()}
    head = {n for n in dtypes if n.endswith("linear.weight")}
    assert head and {dtypes[n] for n in head} == {torch.float32}
    assert {d for n, d in dtypes.items() if n not in head} == {torch.bfloat16}
    assert {p.dtype for p in low.colbert.parameters()} == {torch.float32}  # training weights
    assert ref.scoring_model() is ref.colbert  # float32: no copy
    with pytest.raises(RankerError, match="dtype='fp8'"):
        ColBERTRankerConfig.from_options({"dtype": "fp8"})
