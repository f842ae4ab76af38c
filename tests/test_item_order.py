"""The order ablation: items' words sorted (option ``sort_item_tokens``), ``bench ablate --what
item-order`` and the paper's table (b) figures (item tokens per list, union, their ratio)."""

from __future__ import annotations

import dataclasses
import itertools
from pathlib import Path

import numpy as np
import pytest
from toydata import write_toy_mteb
from typer.testing import CliRunner

from bench.cli.main import app
from bench.data.model import Candidate, CandidateList, Query, RankingSplit
from bench.data.splits import load_split
from bench.data.stats import split_stats
from bench.execution.runner import RunOptions, run
from bench.experiments.ablate import ABLATIONS, check_ranker, run_ablation
from bench.reporting.reports import wordpiece_tokenizer
from rankers import available, get_ranker_class
from rankers.base import SCORE, TRAINING
from rankers.families.monobert import MonoBERTRanker
from rankers.itemorder import OPTION, item_texts, sort_words, supports

LIST = CandidateList(
    Query("q", "how do i sort a list in python"),
    (
        Candidate("a", "Sorting lists in Python: the sorted() builtin"),
        Candidate("b", "unbelievably playing   Zebra apple"),
        Candidate("c", ""),
        Candidate("d", "sort sort Sort"),
    ),
)


def _split(*lists: CandidateList) -> RankingSplit:
    return RankingSplit(dataset="t", split="test", lists=list(lists), qrels={}, checksum="t")


def _presorted(cl: CandidateList) -> CandidateList:
    """``cl`` with every item's text replaced by its sorted words (a sorted copy of the data)."""
    return dataclasses.replace(
        cl, candidates=tuple(Candidate(c.docid, sort_words(c.text)) for c in cl.candidates)
    )


# -- the helper -----------------------------------------------------------------------------------
def test_sort_words_on_hand_made_items() -> None:
    assert sort_words("the quick Brown fox, playing! apple") == (
        "apple Brown fox, playing! quick the"
    )
    # case-folded order, ties by the word as written; whitespace collapses to single spaces
    assert sort_words("sort Sort  sort\tSORT") == "SORT Sort sort sort"
    assert sort_words("") == "" and sort_words("   ") == ""
    # words stay whole, so a tokenizer still sees them: "unbelievably" is not torn into pieces
    assert sort_words("unbelievably playing Zebra apple") == "apple playing unbelievably Zebra"


def test_sort_words_is_idempotent_and_order_invariant() -> None:
    words = ["Python:", "the", "sorted()", "builtin", "lists", "in", "Sorting"]
    once = sort_words(" ".join(words))
    assert sort_words(once) == once
    assert {sort_words(" ".join(p)) for p in itertools.permutations(words)} == {once}


def test_word_pieces_stay_together(tiny_bert: Path) -> None:
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_bert)
    text = "unbelievably playing zebras apple"
    pieces = {w: tok.tokenize(w) for w in text.split()}
    assert any(len(p) > 1 for p in pieces.values())  # some word is several pieces
    # the sorted text's tokens are the words' pieces, word after word, each word's unbroken
    expected = [p for w in sorted(text.split()) for p in pieces[w]]
    assert tok.tokenize(sort_words(text)) == expected


def test_item_texts_applies_only_when_the_config_sets_the_option() -> None:
    on = MonoBERTRanker.Config(sort_item_tokens=True)
    off = MonoBERTRanker.Config()
    texts = ["b a", "d c"]
    assert list(item_texts(on, texts)) == ["a b", "c d"]
    assert list(item_texts(off, texts)) == texts
    bm25 = get_ranker_class("bm25").Config()
    assert not supports(bm25) and list(item_texts(bm25, texts)) == texts


def test_the_option_is_declared_once_with_training_and_score_roles() -> None:
    holders = [n for n in available() if supports(get_ranker_class(n).Config)]
    assert sorted(holders) == ["ance", "colbert", "dpr", "monobert", "rankt5"]
    for name in holders:
        (info,) = [o for o in get_ranker_class(name).Config.describe_options() if o.name == OPTION]
        assert info.role == TRAINING | SCORE and info.default is False
        assert "sorted alphabetically" in info.help and "before tokenisation" in info.help
    # CROSS-JEM's input is the sorted union already: it does not declare the item sort
    assert not supports(get_ranker_class("crossjem").Config)


# -- rankers: the option scores exactly as a sorted copy of the data ----------------------------
@pytest.mark.parametrize("pretokenise", [True, False])
def test_monobert_with_the_option_scores_as_on_presorted_items(
    tiny_bert: Path, pretokenise: bool
) -> None:
    def ranker(sort: bool) -> MonoBERTRanker:
        options = {"model": str(tiny_bert), "pretokenise": pretokenise, OPTION: sort}
        return MonoBERTRanker(MonoBERTRanker.Config.from_options(options))

    sorting, plain = ranker(True), ranker(False)
    sorting.index(_split(LIST))
    plain.index(_split(_presorted(LIST)))
    if pretokenise:  # index() kept the sorted texts, so scoring finds them in the store
        assert sorting.item_tokens.add(_presorted(LIST).texts) == 0
    (got,) = sorting.score([LIST])
    (want,) = plain.score([_presorted(LIST)])
    np.testing.assert_array_equal(got, want)
    (unsorted,) = plain.score([LIST])
    assert not np.array_equal(got, unsorted)  # the sort changes scores
    # the training path reads items the same way
    assert sorting.pairs(LIST.query.text, LIST.texts) == plain.pairs(
        LIST.query.text, _presorted(LIST).texts
    )
    assert sorting.pairs(LIST.query.text, LIST.texts) != plain.pairs(LIST.query.text, LIST.texts)


def test_colbert_with_the_option_scores_as_on_presorted_items(tiny_bert: Path) -> None:
    from rankers.families.colbert import ColBERTRanker, ColBERTRankerConfig
    from rankers.fit.colbert import ColBERTSteps, Triple

    def ranker(sort: bool) -> ColBERTRanker:
        return ColBERTRanker(ColBERTRankerConfig(model=str(tiny_bert), sort_item_tokens=sort))

    sorting, plain = ranker(True), ranker(False)
    (got,) = sorting.score([LIST])
    (want,) = plain.score([_presorted(LIST)])
    np.testing.assert_array_equal(got, want)
    assert not np.array_equal(got, plain.score([LIST])[0])
    # training batches tokenise documents through the same place
    docs = list(LIST.texts)
    for a, b in zip(
        sorting.tensorize_documents(docs),
        plain.tensorize_documents([sort_words(d) for d in docs]),
        strict=True,
    ):
        assert a.equal(b)
    triple = Triple("q", LIST.query.text, docs[0], (docs[1],))
    presorted = Triple("q", LIST.query.text, sort_words(docs[0]), (sort_words(docs[1]),))
    got_loss = ColBERTSteps(sorting).batch_loss([triple]).item()
    assert got_loss == ColBERTSteps(plain).batch_loss([presorted]).item()


def test_rankt5_with_the_option_scores_as_on_presorted_items(tiny_bert: Path) -> None:
    from rankers.families.rankt5 import RankT5Config, RankT5Ranker

    def ranker(sort: bool) -> RankT5Ranker:
        return RankT5Ranker(RankT5Config(model=f"encdec:{tiny_bert}", sort_item_tokens=sort))

    sorting, plain = ranker(True), ranker(False)
    (got,) = sorting.score([LIST])
    (want,) = plain.score([_presorted(LIST)])
    np.testing.assert_array_equal(got, want)
    assert not np.array_equal(got, plain.score([LIST])[0])
    # the training batches are built from pair_ids too
    q = LIST.query.text
    assert sorting.pair_ids(q, LIST.texts) == plain.pair_ids(q, _presorted(LIST).texts)


@pytest.mark.parametrize("name", ["dpr", "ance"])
def test_dual_encoders_with_the_option_score_as_on_presorted_items(name: str) -> None:
    def ranker(sort: bool, precompute: bool = False):  # noqa: ANN202 - a DenseRanker
        cls = get_ranker_class(name)
        return cls(cls.Config(sort_item_tokens=sort, precompute=precompute))

    sorting, plain = ranker(True), ranker(False)
    (got,) = sorting.score([LIST])
    (want,) = plain.score([_presorted(LIST)])
    np.testing.assert_array_equal(got, want)
    assert not np.array_equal(got, plain.score([LIST])[0])
    # precomputed item embeddings (index time) read items the same way
    indexed = ranker(True, precompute=True)
    indexed.index(_split(LIST))
    np.testing.assert_array_equal(indexed.score([LIST])[0], got)
    # and so does training (the embeddings the contrastive loss compares)
    from rankers.fit.dense import embed_documents

    docs = list(LIST.texts)
    a = embed_documents(sorting, docs)
    b = embed_documents(plain, [sort_words(d) for d in docs])
    assert a.equal(b)


# -- caching, the ablation and its table -------------------------------------------------------
@pytest.fixture()
def toy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tiny_bert: Path) -> Path:
    """A toy dataset and a monobert settings file on the tiny BERT, one epoch; the data root."""
    data = tmp_path / "data"
    write_toy_mteb(data / "toy")
    folder = tmp_path / "configs"
    folder.mkdir()
    (folder / "monobert.yaml").write_text(
        f"default:\n  model: {tiny_bert}\n  epochs: 1\n  loss: bce\n"
    )
    monkeypatch.setattr("bench.execution.ranker_settings.CONFIG_DIR", folder)
    return data


def test_sorted_and_plain_runs_share_neither_model_nor_run(toy: Path, results_dir: Path) -> None:
    base = RunOptions(
        ranker="monobert", dataset="toy", data_dir=toy, warmup=0, progress=False, device="cpu"
    )
    records = run_ablation("item-order", base)
    plain, sorting = records
    assert plain.path != sorting.path
    assert plain.training["model_dir"] != sorting.training["model_dir"]
    assert plain.config[OPTION] is False and sorting.config[OPTION] is True
    assert [r.label for r in records] == [
        "monobert items as written",
        "monobert item words sorted",
    ]
    # both are reused on a second ablation: nothing is trained or scored again
    again = run_ablation("item-order", base)
    assert [r.path for r in again] == [r.path for r in records]
    assert [r.created for r in again] == [r.created for r in records]
    # an explicit value of the varied option is refused, naming it (it used to be dropped)
    forced = dataclasses.replace(base, options={OPTION: True})
    with pytest.raises(ValueError, match="--set sort_item_tokens=True: the item-order ablation"):
        run_ablation("item-order", forced)
    assert run(dataclasses.replace(base, options={OPTION: True})).path == sorting.path


def test_a_ranker_without_the_option_is_refused_before_any_work(
    toy: Path, results_dir: Path
) -> None:
    with pytest.raises(ValueError, match="ranker 'bm25' has no option 'sort_item_tokens'"):
        check_ranker("item-order", "bm25")
    base = RunOptions(ranker="bm25", dataset="toy", data_dir=toy, progress=False, device="cpu")
    with pytest.raises(ValueError, match="cannot run the item-order ablation"):
        run_ablation("item-order", base)
    assert not results_dir.exists()
    with pytest.raises(ValueError, match="--what must be one of"):
        check_ranker("nonsense", "monobert")
    assert ABLATIONS["item-order"].ranker == "monobert" and ABLATIONS["loss"].ranker == "crossjem"


def test_ablate_item_order_command_prints_the_paired_table_and_list_figures(
    toy: Path, results_dir: Path
) -> None:
    cli = CliRunner()
    args = ["-q", "ablate", "-d", "toy", "--what", "item-order", "--data-dir", str(toy)]
    refused = cli.invoke(app, [*args, "-r", "bm25"])
    assert refused.exit_code == 2 and "has no option 'sort_item_tokens'" in refused.output
    assert not results_dir.exists()
    result = cli.invoke(app, args)  # the item-order ablation's own ranker: monobert
    assert result.exit_code == 0, result.output + str(result.exception)
    out = result.output
    assert "monobert items as written" in out and "monobert item words sorted" in out
    assert "item tokens/list (m)" in out and "m/N_u" in out
    tokenizer = wordpiece_tokenizer()
    assert tokenizer is not None
    stats = split_stats(load_split("toy", "test", toy), tokenizer=tokenizer)
    figures = (
        f"{stats['list_tokens']['wordpiece']['mean']:.1f}",
        f"{stats['union_length']['wordpiece']['mean']:.1f}",
        f"{stats['compression']['wordpiece']:.2f}",
    )
    assert all(f in out for f in figures), (figures, out)


def test_split_stats_report_item_tokens_union_and_their_ratio() -> None:
    lists = [
        CandidateList(Query("1", "q"), (Candidate("a", "x y z"), Candidate("b", "x y"))),
        CandidateList(Query("2", "q"), (Candidate("c", "u v"), Candidate("d", "w"))),
    ]
    s = split_stats(_split(*lists))
    # list 1: 5 item tokens, union {x, y, z} = 3; list 2: 3 tokens, union 3
    assert s["list_tokens"]["words"]["mean"] == 4.0
    assert s["union_length"]["words"]["mean"] == 3.0
    assert s["compression"]["words"] == pytest.approx(4.0 / 3.0)
