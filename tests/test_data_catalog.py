"""Cards, the dataset catalogue, fetch fallbacks (offline only) and split statistics."""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
from pathlib import Path
from typing import Any

import pytest

from bench.core.settings import PROJECT_ROOT
from bench.data.cards import get_card, list_datasets, read_card
from bench.data.files import DatasetError
from bench.data.splits import dataset_splits, load_split
from bench.data.stats import split_stats


def test_paper_cards() -> None:
    sodq = get_card("sodq")
    assert (sodq.layout, sodq.default_split, sodq.splits) == ("mteb", "test", ("train", "test"))
    assert sodq.hf_id == "mteb/stackoverflowdupquestions-reranking"
    assert sodq.hf_revision == "e185fbe320c72810689fc5848eb6114e1ef5ec69"
    titles = get_card("msmarco-titles")
    assert (titles.layout, titles.default_split, titles.relevance_level) == ("trec", "dev", 1)
    assert titles.irds_id == "msmarco-document/{split}"
    assert not sodq.default and sodq.licence and titles.source


def test_shared_cards() -> None:
    dl19 = get_card("trec-dl19-passage")
    assert (dl19.layout, dl19.relevance_level, dl19.run_file) == ("trec", 2, "run.bm25.trec")
    for name in ("wikiqa", "semeval16b"):
        card = get_card(name)
        assert (card.layout, card.relevance_level, card.default_split) == ("mteb", 1, "test")


def test_every_card_file_parses() -> None:
    names = sorted(p.stem for p in (PROJECT_ROOT / "datasets" / "cards").glob("*.yaml"))
    assert names == ["msmarco-titles", "semeval16b", "sodq", "trec-dl19-passage", "wikiqa"]
    for name in names:
        assert get_card(name).name == name


def test_datasets_folder_is_not_a_python_package() -> None:
    assert not (PROJECT_ROOT / "datasets" / "__init__.py").exists()
    import datasets  # Hugging Face, not the repo's data folder

    assert hasattr(datasets, "load_dataset")


def test_default_card_for_a_folder_without_card(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "train.jsonl").write_text("")
    (tmp_path / "mine" / "test.jsonl.gz").write_bytes(b"")
    with caplog.at_level(logging.INFO, logger="bench.data.cards"):
        card = get_card("mine", tmp_path)
        again = get_card("mine", tmp_path)
    assert (card.layout, card.relevance_level, card.default_split) == ("mteb", 1, "test")
    assert card.default and again == card
    (record,) = caplog.records  # a warning (-q shows it), once per folder and process
    assert record.levelno == logging.WARNING
    card_file = tmp_path / "mine" / "card.yaml"
    assert record.getMessage().startswith(
        "mine: no dataset card, so binary measures (AP, RR, P) count grade >= 1 as relevant "
        f"(layout mteb, default split test); to change that, write {card_file}"
    )
    # binary data's positives have grade 1, so the suggested relevance level keeps them
    assert record.getMessage().endswith(
        "with e.g. `layout: mteb` and `relevance_level: 1` (the highest level that keeps a "
        "relevant item for every query: its positives have grade 1)"
    )
    assert "relevance_level: 2" not in record.getMessage()


@pytest.mark.parametrize(("grades", "level"), [((0, 1, 1), 1), ((0, 1, 3), 1), ((2, 3, 3), 2)])
def test_no_card_suggestion_keeps_every_querys_positives(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, grades: tuple[int, ...], level: int
) -> None:
    """A TREC folder without a card: the suggested level keeps a relevant item for every query
    with one (the lowest of the queries' best grades), and at most 2 (TREC's usual level)."""
    folder = tmp_path / "graded"
    folder.mkdir()
    (folder / "queries.tsv").write_text("q1\ta\nq2\tb\nq3\tc\n")
    (folder / "collection.tsv").write_text("d1\tx\nd2\ty\n")
    (folder / "run.bm25.trec").write_text("q1 Q0 d1 1 1.0 bm25\n")
    (folder / "qrels.txt").write_text(
        "".join(f"q{i + 1} 0 d1 {g}\nq{i + 1} 0 d2 0\n" for i, g in enumerate(grades))
    )
    with caplog.at_level(logging.WARNING, logger="bench.data.cards"):
        get_card("graded", tmp_path)
    (record,) = caplog.records
    assert (
        f"`layout: trec` and `relevance_level: {level}` (the highest level that keeps a "
        f"relevant item for every query: its queries' best grades are "
        f"{', '.join(str(g) for g in sorted(set(grades)) if g > 0)})"
    ) in record.getMessage()


def test_card_in_the_data_folder_wins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    checkout = tmp_path / "cards"
    checkout.mkdir()
    (checkout / "mine.yaml").write_text("layout: trec\nrelevance_level: 3\n")
    monkeypatch.setattr("bench.data.cards.cards_dir", lambda: checkout)
    (tmp_path / "data" / "mine").mkdir(parents=True)
    assert get_card("mine", tmp_path / "data").relevance_level == 3
    local = tmp_path / "data" / "mine" / "card.yaml"
    local.write_text("layout: trec\nrelevance_level: 2\n")
    card = get_card("mine", tmp_path / "data")
    assert (card.name, card.relevance_level, card.card_file) == ("mine", 2, str(local))
    assert card.to_dict()["relevance_level"] == 2
    local.write_text("name: yours\nlayout: trec\n")
    with pytest.raises(DatasetError, match="name 'yours' must match the dataset folder's name"):
        get_card("mine", tmp_path / "data")
    local.write_text("layout: trec\nrelevance_level: 0\n")
    with pytest.raises(DatasetError, match="relevance_level must be >= 1"):
        get_card("mine", tmp_path / "data")


def test_read_card_rejects_bad_cards(tmp_path: Path) -> None:
    path = tmp_path / "x.yaml"
    path.write_text("layout: mteb\nrelevance: 2\n")
    with pytest.raises(DatasetError, match=r"x.yaml: unknown card field\(s\) relevance"):
        read_card(path)
    path.write_text("layout: jsonl\n")
    with pytest.raises(DatasetError, match="layout must be one of"):
        read_card(path)
    path.write_text("layout: trec\nrelevance_level: two\n")
    with pytest.raises(DatasetError, match="relevance_level must be an integer, got 'two'"):
        read_card(path)
    path.write_text("name: y\nlayout: trec\n")
    with pytest.raises(DatasetError, match="name 'y' must match the file name 'x'"):
        read_card(path)
    path.write_text("layout: mteb\ndrop_all_relevant: yes please\n")
    with pytest.raises(DatasetError, match="drop_all_relevant must be true or false, got 'yes"):
        read_card(path)


def test_card_drops_all_relevant_queries_as_mteb_does(
    shared_data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """wikiqa test has 6 queries whose every candidate is relevant: every ranker scores 1.0 on
    them. Kept (the default), they lift AP by (1 - AP) * 6 / 243 over MTEB's figure, which
    skips them; ``drop_all_relevant: true`` drops and counts them, and the record says so."""
    from bench.results.metrics import build_run, evaluate
    from rankers.inputs.lexical import BM25Index

    kept = load_split("wikiqa", "test", shared_data)
    assert kept.all_relevant == "kept" and len(kept) == 243 and "all_relevant" not in kept.dropped
    assert len(kept.all_relevant_qids()) == 6
    assert kept.info()["all_relevant"]["queries"] == 6
    cards = tmp_path / "cards"
    cards.mkdir()
    card = (PROJECT_ROOT / "datasets" / "cards" / "wikiqa.yaml").read_text()
    (cards / "wikiqa.yaml").write_text(card + "drop_all_relevant: true\n")
    monkeypatch.setattr("bench.data.cards.cards_dir", lambda: cards)
    mteb = load_split("wikiqa", "test", shared_data)
    assert len(mteb) == 237 and set(mteb.qrels) == {cl.query.qid for cl in mteb.lists}
    assert not set(mteb.qrels) & set(kept.all_relevant_qids())
    assert mteb.dropped == {"all_relevant": 6} and mteb.all_relevant_qids() == []
    assert mteb.info()["all_relevant"] == {
        "queries": 6,
        "treatment": "dropped",
        "convention": "dropped, as sentence-transformers' RerankingEvaluator (MTEB reranking) "
        "skips them",
    }
    assert mteb.card["drop_all_relevant"] is True
    assert mteb.fingerprint() != kept.fingerprint()  # a cached result is not reused across
    assert mteb.subset(10).all_relevant == "dropped"
    # same scores: on the other 237 queries both agree, and the 6 add 1.0 each when kept
    index = BM25Index(kept.collection())
    scores = [index.score(cl.query.text, cl.docids) for cl in kept.lists]
    full = evaluate(kept.qrels, build_run(kept.lists, scores))
    skipped = evaluate(mteb.qrels, build_run(kept.lists, scores))
    for m in ("AP", "RR@10", "nDCG@10"):
        assert full.aggregate[m] * 243 == pytest.approx(skipped.aggregate[m] * 237 + 6, abs=1e-9)
        assert full.aggregate[m] > skipped.aggregate[m]


def test_list_datasets(fixtures_dir: Path, shared_data: Path, tmp_path: Path) -> None:
    assert list_datasets(tmp_path / "nowhere") == ["msmarco-titles", "sodq"]
    assert list_datasets(fixtures_dir) == ["msmarco-titles", "sodq"]
    assert list_datasets(shared_data) == [
        "msmarco-titles",
        "semeval16b",
        "sodq",
        "trec-dl19-passage",
        "wikiqa",
    ]
    (tmp_path / "notes").mkdir()  # a folder in neither layout is not a dataset
    (tmp_path / "notes" / "readme.txt").write_text("hi")
    assert list_datasets(tmp_path) == ["msmarco-titles", "sodq"]
    (tmp_path / "declared").mkdir()  # a card alone declares a dataset (data to come)
    (tmp_path / "declared" / "card.yaml").write_text("layout: mteb\n")
    (tmp_path / "both").mkdir()  # both layouts: listed, so its error can be shown
    (tmp_path / "both" / "test.jsonl").write_text("")
    (tmp_path / "both" / "qrels.txt").write_text("")
    assert list_datasets(tmp_path) == ["both", "declared", "msmarco-titles", "sodq"]
    with pytest.raises(DatasetError, match=r"both layouts: MTEB split files \(test.jsonl\) and "):
        get_card("both", tmp_path)


def test_dataset_splits(fixtures_dir: Path, shared_data: Path, tmp_path: Path) -> None:
    assert dataset_splits("sodq", fixtures_dir) == ["test", "train"]
    assert dataset_splits("sodq", tmp_path) == ["test", "train"]  # downloadable
    assert dataset_splits("sodq", tmp_path, local_only=True) == []
    assert dataset_splits("msmarco-titles", tmp_path) == ["dev"]
    assert dataset_splits("msmarco-titles", fixtures_dir, local_only=True) == ["dev"]
    assert dataset_splits("wikiqa", shared_data) == ["dev", "test", "train"]
    assert dataset_splits("trec-dl19-passage", shared_data) == ["test"]


def test_unknown_dataset_lists_available(shared_data: Path) -> None:
    with pytest.raises(DatasetError, match="unknown dataset 'wikiqb'") as err:
        load_split("wikiqb", data_dir=shared_data)
    assert "available: msmarco-titles, semeval16b, sodq, trec-dl19-passage, wikiqa" in str(
        err.value
    )


def test_carded_dataset_without_data(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match="'wikiqa' has a card but no data in"):
        load_split("wikiqa", data_dir=tmp_path)


def test_unknown_split_lists_splits(shared_data: Path, fixtures_dir: Path) -> None:
    with pytest.raises(DatasetError, match=r"unknown split 'val' .* available: dev, test, train"):
        load_split("semeval16b", "val", shared_data)
    with pytest.raises(DatasetError, match=r"unknown split 'dev' of dataset 'sodq'"):
        load_split("sodq", "dev", fixtures_dir)


def test_sodq_offline_without_local_copy_says_where_to_put_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # conftest sets it too; never download in tests
    with pytest.raises(DatasetError, match="HF_HUB_OFFLINE") as err:
        load_split("sodq", data_dir=tmp_path)
    message = str(err.value)
    assert f"put train.jsonl and test.jsonl (or .jsonl.gz) in {tmp_path / 'sodq'}/" in message
    assert "e185fbe320c72810689fc5848eb6114e1ef5ec69" in message
    assert not (tmp_path / "sodq").exists()


def test_msmarco_titles_without_run_says_where_to_put_files(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match="no run file") as err:
        load_split("msmarco-titles", data_dir=tmp_path)
    message = str(err.value)
    assert f"in {tmp_path / 'msmarco-titles'}/ as run.<name>.trec" in message
    assert "ir_datasets msmarco-document/dev" in message


def test_downloaded_copy_records_its_revision(fixtures_dir: Path, tmp_path: Path) -> None:
    folder = tmp_path / "sodq"
    shutil.copytree(fixtures_dir / "sodq", folder)
    data = (folder / "test.jsonl").read_bytes()
    record = {"hf_id": "x", "revision": "abc123", "sha256": hashlib.sha256(data).hexdigest()}
    (folder / "source.json").write_text(json.dumps({"test.jsonl": record}))
    assert load_split("sodq", "test", tmp_path).revision == "abc123"
    assert load_split("sodq", "train", tmp_path).revision is None  # not in source.json
    (folder / "test.jsonl").write_bytes(data + b"\n")  # edited since: revision no longer known
    assert load_split("sodq", "test", tmp_path).revision is None


def test_split_stats(fixtures_dir: Path) -> None:
    split = load_split("sodq", "test", fixtures_dir)
    stats = split_stats(split, tokenizer=lambda text: text.lower().split(), unit="lower")
    assert stats["queries"] == 3 and stats["candidates"] == 8
    assert stats["candidates_per_query"] == {"min": 1, "mean": pytest.approx(8 / 3), "max": 4}
    assert stats["positives_per_query"] == {"mean": pytest.approx(4 / 3)}  # 2, 1, 1
    assert stats["dropped"] == {"no_positive": 1, "empty": 1}
    # the one-candidate list's candidate is relevant: kept, and counted
    assert stats["all_relevant"] == {
        "queries": 1,
        "treatment": "kept",
        "convention": "kept and scored (every ranker scores 1.0 on them)",
    }
    # queries: 7, 6, 7 words
    query = {"mean": pytest.approx(20 / 3), "p50": 7.0, "p95": 7.0, "max": 7}
    assert stats["query_length"] == {"words": query, "lower": query}
    # candidates: 5 8 7 5 | 11 5 6 | 5 words
    words = stats["candidate_length"]["words"]
    assert (words["mean"], words["p50"], words["max"]) == (6.5, 5.5, 11)
    # distinct words per list: 17, 17, 5 as written; 16, 16, 5 lower-cased
    assert stats["union_length"]["words"]["max"] == 17
    assert stats["union_length"]["lower"] == {
        "mean": pytest.approx(37 / 3),
        "p50": 16.0,
        "p95": 16.0,
        "max": 16,
    }
    assert list(split_stats(split)["union_length"]) == ["words"]
    # 6 distinct candidates of 42 words (8, 7, 11 and three of 16 together) cut at 6: 8, 7, 11 are
    # cut, losing 2 + 1 + 5 = 8 of 42 tokens
    cut = split_stats(split, item_limit=6)["item_cut"]["words"]
    assert cut == {"limit": 6, "cut": 3, "of": 6, "tokens_lost_share": pytest.approx(8 / 42)}


def test_datasets_without_wordpiece_say_the_cut_is_counted_in_words(tmp_path: Path) -> None:
    """Without a tokenizer (`bench datasets --no-wordpiece`) the cut is counted in words: its
    column, cells and legend say so, and none claims the encoders' WordPiece limit."""
    from rich.console import Console
    from toydata import write_toy_mteb

    from bench.reporting.reports import datasets_table

    folder = write_toy_mteb(tmp_path / "toy", (("test", 4),))
    lines = (folder / "test.jsonl").read_text().splitlines()
    first = json.loads(lines[0])
    first["negative"].append(" ".join(["word"] * 40))  # 40 words: over 32, so cut in words
    lines[0] = json.dumps(first)
    (folder / "test.jsonl").write_text("\n".join(lines) + "\n")
    table = datasets_table(tmp_path, None)
    console = Console(width=2000, record=True)
    console.print(table)
    shown = console.export_text()
    text = " ".join(shown.split())
    assert [c.header for c in table.columns][11] == "cut (words)"
    (row,) = [line for line in shown.splitlines() if "│ toy" in line]
    # 13 distinct candidates of 68 words; the cut at 32 words drops 8 of the long one's 40
    assert "1 of 13 (8%), 11.8% of words" in row
    assert "of tokens" not in text and "max_item_len (32)" not in text
    assert "cut (words): distinct candidates longer than 32 words" in text
    assert "rows/list: '-' (it needs WordPiece tokens)" in text
    assert "union/list: their distinct words" in text


def test_datasets_reports_cut_items_and_rows_per_layout(shared_data: Path) -> None:
    """The wikiqa test figures docs/results.md reports: 32% of items cut at 32 WordPiece tokens,
    10.7% of their tokens lost; lists over several rows: union 9, concat 73, hybrid 10."""
    from bench.reporting.reports import _cut_cell, _rows_cell, wordpiece_tokenizer

    tokenizer = wordpiece_tokenizer()
    split = load_split("wikiqa", "test", shared_data)
    stats = split_stats(split, tokenizer=tokenizer)
    assert _cut_cell(stats["item_cut"]["wordpiece"]) == "738 of 2309 (32%), 10.7% of tokens"
    assert _rows_cell(split, tokenizer) == (
        "L_u 272: union 1.04 (9) / concat 1.37 (73) / hybrid 1.04 (10)"
    )


def test_datasets_asks_the_registered_ranker_that_packs_rows(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The rows/list cell is what the registered ranker with ``rows_per_list`` says of the split,
    given its settings for the dataset; '-' without one or without a tokenizer (bench names no
    ranker for it)."""
    from types import SimpleNamespace

    import rankers
    from bench.reporting.reports import _rows_cell

    class Packs:
        @classmethod
        def rows_per_list(cls, split: SimpleNamespace, tokenize: Any, options: dict) -> str:
            return f"{split.dataset}: {tokenize('a b')} {options}"

    classes: dict[str, type] = {"plain": object, "packs": Packs}
    monkeypatch.setattr(rankers, "available", lambda: sorted(classes))
    monkeypatch.setattr(rankers, "get_ranker_class", classes.__getitem__)
    monkeypatch.setattr(
        "bench.execution.ranker_settings.ranker_options", lambda name, dataset, o: {"of": name}
    )
    split = SimpleNamespace(dataset="d", lists=[1])
    assert _rows_cell(split, str.split) == "d: ['a', 'b'] {'of': 'packs'}"
    assert _rows_cell(split, None) == "-"
    del classes["packs"]
    assert _rows_cell(split, str.split) == "-"
