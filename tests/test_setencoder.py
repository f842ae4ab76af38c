"""Set-Encoder: permutation invariance, the fast layer against the oracle, a list of one as
monoBERT, options, checkpoints and the cost model's calls."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from bench.data.model import Candidate, CandidateList, Query
from rankers import canonical_name, create_ranker
from rankers.base import RankerError
from rankers.families.monobert import MonoBERTModule, MonoBERTRanker
from rankers.families.setencoder import SetEncoderModule, SetEncoderRanker

TEXTS = [
    "sorting a list in python",
    "python",
    "how do i sort a dictionary by value and then by key in python 3",
    "",
    "java arrays sort",
    "sort a list of tuples by the second element of each tuple",
    "list.sort() sorts in place; sorted() returns a new list",
]
OTHER = ["what is a tuple", "tuples are immutable sequences", "a list is mutable", "tuple"]


def _ranker(model: Path | str, **options: object) -> SetEncoderRanker:
    ranker = create_ranker("set-encoder", {"model": str(model), **options})
    assert isinstance(ranker, SetEncoderRanker)
    # a trained head is not zero-mean: scores then differ between candidates
    with torch.no_grad():
        module = ranker.module
        assert isinstance(module, SetEncoderModule)
        module.classifier.weight.normal_(generator=torch.Generator().manual_seed(1))
    return ranker


def _list(texts: list[str], qid: str = "q1", query: str = "how to sort a list in python"):
    return CandidateList(
        Query(qid, query), tuple(Candidate(f"d{i}", t) for i, t in enumerate(texts))
    )


def test_the_name_and_its_alias_resolve() -> None:
    assert canonical_name("setencoder") == canonical_name("Set-Encoder") == "set-encoder"


def test_permuting_the_candidates_permutes_the_scores(tiny_bert: Path) -> None:
    ranker = _ranker(tiny_bert, batch_size=3)
    base = ranker.score([_list(TEXTS), _list(OTHER, "q2", "tuple")])
    for seed in range(3):
        perm = np.random.default_rng(seed).permutation(len(TEXTS))
        got = ranker.score([_list([TEXTS[i] for i in perm]), _list(OTHER, "q2", "tuple")])
        np.testing.assert_allclose(got[0], base[0][perm], rtol=0, atol=1e-5)
        np.testing.assert_allclose(got[1], base[1], rtol=0, atol=1e-5)
    # and the other candidates matter: a list without the last item scores its items otherwise
    fewer = ranker.score([_list(TEXTS[:-1])])[0]
    assert np.abs(fewer - base[0][:-1]).max() > 1e-4


@pytest.mark.parametrize("batch_size", [1, 3, 64])
def test_the_fast_layers_equal_the_oracle(tiny_bert: Path, batch_size: int) -> None:
    ranker = _ranker(tiny_bert, batch_size=batch_size)
    lists = [("how to sort a list in python", TEXTS), ("tuple", OTHER), ("one", ["alone"])]
    batch = ranker.prepare(lists)
    assert len(batch.chunks) == -(-sum(len(t) for _, t in lists) // batch_size)
    module = ranker.module
    assert isinstance(module, SetEncoderModule)
    with torch.no_grad():
        fast, simple = module(batch), module.simple(batch)
    np.testing.assert_allclose(fast.numpy(), simple.numpy(), rtol=0, atol=1e-5)
    assert fast.std() > 1e-3


def test_a_list_of_one_is_scored_as_monobert_scores_its_pair(tiny_bert: Path) -> None:
    ranker = _ranker(tiny_bert)
    module = ranker.module
    assert isinstance(module, SetEncoderModule)
    mono = MonoBERTRanker(MonoBERTRanker.Config.from_options({"model": str(tiny_bert)}))
    mono_module = mono.module
    assert isinstance(mono_module, MonoBERTModule)
    mono_module.classifier.load_state_dict(module.classifier.state_dict())
    singles = [_list([t], f"q{i}") for i, t in enumerate(TEXTS)]
    got = np.concatenate(ranker.score(singles))
    want = np.concatenate(mono.score(singles))
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-5)
    # in one list the same pairs score otherwise
    together = ranker.score([_list(TEXTS)])[0]
    assert np.abs(together - want).max() > 1e-4


def test_training_forward_equals_scoring(tiny_bert: Path) -> None:
    ranker = _ranker(tiny_bert, batch_size=4)
    lists = [_list(TEXTS), _list(OTHER, "q2", "tuple")]
    scores = ranker.score(lists)
    with ranker.inference():
        logits, mask = ranker.forward(ranker.prepare([(cl.query.text, cl.texts) for cl in lists]))
    assert mask.sum(dim=1).tolist() == [len(TEXTS), len(OTHER)]
    np.testing.assert_allclose(logits[0].numpy(), scores[0], rtol=0, atol=1e-6)
    np.testing.assert_allclose(logits[1, : len(OTHER)].numpy(), scores[1], rtol=0, atol=1e-6)


def test_empty_lists_score_empty(tiny_bert: Path) -> None:
    ranker = _ranker(tiny_bert)
    out = ranker.score([_list([]), _list(OTHER), _list([], "q3")])
    assert [len(s) for s in out] == [0, len(OTHER), 0]


def test_encoder_calls_are_the_chunks(tiny_bert: Path) -> None:
    ranker = _ranker(tiny_bert, batch_size=4, max_query_len=4, max_item_len=3)
    prepared = ranker.prepare_scoring([_list(TEXTS)])
    calls = ranker.encoder_calls(prepared)
    # rows [CLS] 4 [SEP] item [SEP]: item lengths 3 1 3 0 3 3 3 -> sorted 7 8 10 10 10 10 10
    assert [(c.rows, c.width, c.layers, c.masked) for c in calls] == [
        (4, 10, 2, True),
        (3, 10, 2, False),
    ]


def test_a_saved_model_scores_the_same(tiny_bert: Path, tmp_path: Path) -> None:
    ranker = _ranker(tiny_bert)
    want = ranker.score([_list(TEXTS)])[0]
    ranker.save(tmp_path / "m")
    loaded = create_ranker("set-encoder", {"checkpoint": str(tmp_path / "m")})
    np.testing.assert_allclose(loaded.score([_list(TEXTS)])[0], want, rtol=0, atol=1e-6)


def test_other_runtimes_are_refused_naming_the_option() -> None:
    with pytest.raises(RankerError, match="runtime"):
        create_ranker("set-encoder", {"runtime": "onnxruntime"})


def test_the_fast_layers_give_the_oracles_gradients(tiny_bert: Path) -> None:
    """Training runs the fast layers: their gradients are the oracle's, and item 0's score
    sends gradient to a word only item 1 holds (inter-passage attention is trained)."""
    ranker = _ranker(tiny_bert, batch_size=1)
    module = ranker.module
    assert isinstance(module, SetEncoderModule)
    batch = ranker.prepare([("query", ["first item", "second zebra"])])
    row0 = int(np.flatnonzero(batch.order == 0)[0])
    zebra = ranker.tokenizer.convert_tokens_to_ids("zebra")
    grads = []
    for run in (module.forward, module.simple):
        module.zero_grad()
        run(batch)[row0].backward()
        words = module.encoder.embeddings.word_embeddings.weight.grad
        assert words is not None and words[zebra].abs().sum() > 0
        grads.append(
            torch.cat([p.grad.reshape(-1) for p in module.parameters() if p.grad is not None])
        )
    np.testing.assert_allclose(grads[0].numpy(), grads[1].numpy(), rtol=0, atol=1e-5)


def test_an_exported_folder_scores_the_same(tiny_bert: Path, tmp_path: Path) -> None:
    ranker = _ranker(tiny_bert)
    want = ranker.score([_list(TEXTS)])[0]
    exported = ranker.export(tmp_path / "out")
    assert exported.loads_with == "rankers.families.setencoder.SetEncoderRanker.from_exported"
    loaded = SetEncoderRanker.from_exported(tmp_path / "out")
    np.testing.assert_allclose(loaded.score([_list(TEXTS)])[0], want, rtol=0, atol=1e-6)


def test_scoring_runs_without_any_dropout(tiny_bert: Path, tmp_path: Path) -> None:
    """Scoring is dropout-free in every part (the chunks' attention, the first tokens' joint
    attention, the hidden states, the head): the tiny BERT with every dropout at 0.5 (and the
    head's at 0.5) scores bit for bit as the same weights with none (the same operations on the
    same numbers). Exact, as the random head is nearly flat: dropout at 0.5 in the chunks'
    attention alone moved these scores by 7e-5 at most."""
    dropping = tmp_path / "dropping"
    shutil.copytree(tiny_bert, dropping)
    config = json.loads((dropping / "config.json").read_text())
    config.update(hidden_dropout_prob=0.5, attention_probs_dropout_prob=0.5)
    (dropping / "config.json").write_text(json.dumps(config))
    lists = [_list(TEXTS), _list(OTHER, "q2", "tuple")]
    plain = _ranker(tiny_bert, dropout=0.0, batch_size=3).score(lists)
    ranker = _ranker(dropping, dropout=0.5, batch_size=3)
    assert ranker.module.encoder.config.attention_probs_dropout_prob == 0.5
    for got, want in zip(ranker.score(lists), plain, strict=True):
        np.testing.assert_array_equal(got, want)
