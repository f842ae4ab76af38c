"""The synthetic data set (``bench datasets synth``): deterministic for a seed,
read by the normal adapters, lengths as measured on the real sets, bad options refused."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml
from typer.testing import CliRunner

from bench.cli.main import app
from bench.data.files import DatasetError
from bench.data.splits import load_split
from bench.data.synth import (
    LENGTHS,
    TARGETS,
    SynthSpec,
    generate,
    load_vocabulary,
    vocabulary,
    write_synth,
)


def _files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


@pytest.mark.parametrize("layout", ["trec", "mteb"])
def test_same_seed_same_files_other_seed_other_files(tmp_path: Path, layout: str) -> None:
    spec = SynthSpec(queries=12, items=20, collection=300, layout=layout, seed=7)
    first = _files(write_synth(spec, tmp_path / "a"))
    again = _files(write_synth(spec, tmp_path / "b"))
    other = _files(write_synth(SynthSpec(12, 20, 300, layout, seed=8), tmp_path / "c"))
    # the card names the folder; every data file is the same byte for byte
    assert set(first) == set(again) and first.pop("card.yaml") != again.pop("card.yaml")
    assert first == again
    other.pop("card.yaml")
    assert all(first[name] != other[name] for name in first)


@pytest.mark.parametrize(("layout", "length"), [("trec", "titles"), ("mteb", "sentences")])
def test_folder_loads_through_the_dataset_adapter(tmp_path: Path, layout: str, length: str) -> None:
    write_synth(SynthSpec(15, 25, 400, layout, length, seed=3), tmp_path / "synthetic")
    split = load_split("synthetic", data_dir=tmp_path)
    assert (split.dataset, split.split, split.layout) == ("synthetic", "test", layout)
    assert split.card["card_file"].endswith("synthetic/card.yaml")  # its own card, not a default
    assert len(split) == 15 and [len(cl) for cl in split] == [25] * 15
    assert split.dropped == {}
    # every query has its grade-2 source item (binary 1 in the MTEB layout) among its candidates
    top = 2 if layout == "trec" else 1
    assert all(max(split.qrels[cl.query.qid].values()) == top for cl in split)
    assert all(len(set(cl.docids)) == 25 for cl in split)
    if layout == "trec":
        # the first stage's order is the run's: scores fall along each list
        scores = [c.score for c in split.lists[0].candidates]
        assert scores == sorted(scores, reverse=True)
        collection = (tmp_path / "synthetic" / "collection.tsv").read_text().splitlines()
        assert len(collection) == 400  # the whole collection, not only the candidates


@pytest.mark.parametrize("length", sorted(LENGTHS))
def test_length_statistics_match_the_measured_targets(length: str) -> None:
    data = generate(SynthSpec(queries=3000, items=1, collection=20_000, length=length, seed=0))
    for what, texts in (("query", data.queries), ("item", data.items)):
        words = np.array([len(t.split()) for t in texts])
        mean, sd = TARGETS[length][what]
        assert words.mean() == pytest.approx(mean, rel=0.03), (what, words.mean())
        assert words.std() == pytest.approx(sd, rel=0.06), (what, words.std())
        model = getattr(LENGTHS[length], what)
        assert words.min() >= model.lo and words.max() <= model.hi


def test_vocabulary_is_zipfian_and_frequent_words_are_short() -> None:
    words = vocabulary()
    assert len(set(words)) == len(words) == 50_000
    assert len(words[0]) <= 2 < len(words[-1])
    data = generate(SynthSpec(queries=1, items=1, collection=20_000, seed=0))
    counts: dict[str, int] = {}
    for text in data.items:
        for w in text.split():
            counts[w] = counts.get(w, 0) + 1
    rank = {w: r for r, w in enumerate(words, 1)}
    top = sorted(counts, key=counts.__getitem__, reverse=True)[:50]
    assert [rank[w] for w in top[:3]] == [1, 2, 3]
    # frequency of rank r ~ r^-s: rank 1 is about 10^s times as frequent as rank 10
    assert counts[words[0]] / counts[words[9]] == pytest.approx(10**0.851, rel=0.15)


@pytest.mark.parametrize(
    ("spec", "option"),
    [
        (SynthSpec(0, 5, 10), "--queries"),
        (SynthSpec(3, 0, 10), "--items"),
        (SynthSpec(3, 5, 0), "--collection must be a whole number >= 1, got 0"),
        (SynthSpec(3, 11, 10), "--items 11 exceeds --collection 10"),
        (SynthSpec(11, 5, 10), "--queries 11 exceeds --collection 10"),
        (SynthSpec(3, 5, 10, layout="csv"), "--layout must be one of trec, mteb"),
        (SynthSpec(3, 5, 10, length="words"), "--length must be one of titles, sentences"),
        (SynthSpec(3, 5, 10, seed=-1), "--seed"),
    ],
)
def test_bad_options_are_refused_naming_the_option(
    tmp_path: Path, spec: SynthSpec, option: str
) -> None:
    with pytest.raises(DatasetError, match=option):
        write_synth(spec, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_cli_writes_refuses_bad_values_and_never_overwrites(tmp_path: Path) -> None:
    runner = CliRunner()
    base = ["datasets", "synth", "--queries", "4", "--items", "6", "--collection", "30"]
    ok = runner.invoke(app, [*base, "--layout", "mteb", "--out", str(tmp_path / "s")])
    assert ok.exit_code == 0, ok.output
    assert sorted(p.name for p in (tmp_path / "s").iterdir()) == ["card.yaml", "test.jsonl"]
    before = _files(tmp_path / "s")
    again = runner.invoke(app, [*base, "--seed", "1", "--out", str(tmp_path / "s")])
    assert (
        again.exit_code == 2 and "--out" in again.output and "not an empty folder" in again.output
    )
    assert _files(tmp_path / "s") == before
    bad = runner.invoke(app, [*base[:-1], "3", "--out", str(tmp_path / "t")])
    assert bad.exit_code == 2 and "--items 6 exceeds --collection 3" in bad.output
    assert not (tmp_path / "t").exists()
    assert list(tmp_path.iterdir()) == [tmp_path / "s"]  # no temporary folder left behind


def test_a_full_disk_and_a_file_in_the_path_are_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import errno

    import bench.data.synth

    runner = CliRunner()
    base = ["datasets", "synth", "--queries", "4", "--items", "6", "--collection", "30"]

    def full(*_args: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(bench.data.synth, "_write_trec", full)
    result = runner.invoke(app, [*base, "--out", str(tmp_path / "s")])
    assert (
        result.exit_code == 2
        and result.exception is None
        or isinstance(result.exception, SystemExit)
    )
    text = " ".join(result.output.split())
    assert f"cannot write {tmp_path / 's'}: No space left on device" in text
    assert list(tmp_path.iterdir()) == []  # nothing half-written left
    (tmp_path / "plain").write_text("a file\n")
    result = runner.invoke(app, [*base, "--out", str(tmp_path / "plain" / "deeper" / "s")])
    assert result.exit_code == 2
    assert f"{tmp_path / 'plain'} is a file, not a folder" in " ".join(result.output.split())


def _word_list(path: Path, n: int) -> Path:
    letters = "abcdefghijklmnopqrstuvwxyz"
    words = [letters[i // 26 % 26] + letters[i % 26] + letters[i // 676 % 26] for i in range(n)]
    path.write_text("[PAD]\n##ing\n7\nx\nThe\n" + "\n".join(words) + "\naaa\n")
    return path


def test_vocab_file_words_in_file_order_deterministic(tmp_path: Path) -> None:
    vocab = _word_list(tmp_path / "vocab.txt", 1200)
    words = load_vocabulary(vocab)
    # special tokens, continuations, digits, single letters, capitals and repeats left out
    assert len(words) == 1200 and words[:3] == ["aaa", "aba", "aca"]
    spec = SynthSpec(5, 10, 200, seed=4, vocab=str(vocab))
    data = generate(spec)
    assert {w for t in data.items for w in t.split()} <= set(words)
    assert generate(spec).items == data.items
    card = yaml.safe_load((write_synth(spec, tmp_path / "v") / "card.yaml").read_text())
    assert "items of words of vocab.txt (sha256" in card["description"]
    assert f"--vocab {vocab} --out v" in card["source"]


def test_vocab_file_too_short_or_missing_is_refused(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match=r"--vocab .*short.txt: 999 usable words"):
        generate(SynthSpec(1, 1, 10, vocab=str(_word_list(tmp_path / "short.txt", 999))))
    with pytest.raises(DatasetError, match=r"--vocab .*nothing.txt: .*cannot read"):
        generate(SynthSpec(1, 1, 10, vocab=str(tmp_path / "nothing.txt")))
