"""A training step is bounded by what it holds, not by a count of lists (issue 31): option
``train_max_items`` keeps each train list's positives and a seeded sample of its negatives, so a
step holds at most ``train_batch_queries x train_max_items`` items however long the lists are."""

from __future__ import annotations

import dataclasses
import random
import types
from pathlib import Path
from typing import Any

import pytest
from toydata import WORDS

from bench.data.model import Candidate, CandidateList, Query, RankingSplit
from rankers.base import RankerError
from rankers.targets import cap_lists


def _long_split(n_queries: int, n_items: int, seed: int = 0) -> RankingSplit:
    """Lists of ``n_items`` three-word items; item 3 and item ``n_items - 2`` are relevant."""
    rng = random.Random(seed)
    lists, qrels = [], {}
    for q in range(n_queries):
        cands = tuple(Candidate(f"d{i}", " ".join(rng.sample(WORDS, 3))) for i in range(n_items))
        qid = f"q{q}"
        lists.append(CandidateList(Query(qid, WORDS[q % len(WORDS)]), cands))
        qrels[qid] = {"d3": 1, f"d{n_items - 2}": 2, "d5": 0}
    return RankingSplit(dataset="long", split="train", lists=lists, qrels=qrels, checksum="long")


def test_cap_keeps_positives_and_a_seeded_sample_of_negatives() -> None:
    split = _long_split(3, 10)
    capped = cap_lists(split.lists, split.qrels, 4, seed=0)
    for before, after in zip(split.lists, capped, strict=True):
        ids = after.docids
        assert len(ids) == 4 and {"d3", "d8"} <= set(ids)  # both positives kept
        assert list(ids) == [d for d in before.docids if d in ids]  # the list's own order
    assert cap_lists(split.lists, split.qrels, 4, seed=0) == capped  # same seed, same lists
    other = cap_lists(split.lists, split.qrels, 4, seed=1)
    assert [cl.docids for cl in other] != [cl.docids for cl in capped]
    assert cap_lists(split.lists, split.qrels, 10, seed=0) == split.lists  # short lists stay
    # more positives than the cap: the first ones, no negative
    (one,) = cap_lists(split.lists[:1], split.qrels, 1, seed=0)
    assert one.docids == ["d3"]


def test_each_query_draws_its_own_negatives_and_always_the_same() -> None:
    """The draw is seeded with the seed and the query id: four lists of the same shape (12
    items, positives d3 and d10) keep different negatives, and a query keeps the same ones
    whatever lists come before it or whether it is capped alone."""
    split = _long_split(4, 12)
    capped = cap_lists(split.lists, split.qrels, 5, seed=0)
    assert {cl.query.qid: cl.docids for cl in capped} == {
        "q0": ["d1", "d2", "d3", "d10", "d11"],
        "q1": ["d0", "d2", "d3", "d4", "d10"],
        "q2": ["d0", "d2", "d3", "d7", "d10"],
        "q3": ["d0", "d3", "d4", "d7", "d10"],
    }
    assert cap_lists(split.lists[::-1], split.qrels, 5, seed=0) == capped[::-1]
    for one, alone in zip(split.lists, capped, strict=True):
        assert cap_lists([one], split.qrels, 5, seed=0) == [alone]


@pytest.mark.parametrize("kind", ["monobert", "crossjem"])
def test_a_step_on_lists_of_hundreds_holds_at_most_the_cap(
    kind: str, tiny_bert: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """300 candidates a list, 2 lists a step: with train_max_items=16 no step prepares more than
    32 items; with 0 (whole lists) a step holds 600, so the count sees the cap."""
    from rankers.crossjem import CrossJEMRanker
    from rankers.monobert import MonoBERTRanker

    cls: Any = {"monobert": MonoBERTRanker, "crossjem": CrossJEMRanker}[kind]
    split = _long_split(4, 300)
    largest: dict[int, int] = {}
    for cap in (16, 0):
        options = {"model": str(tiny_bert), "epochs": 1, "min_steps": 0, "train_batch_queries": 2}
        ranker = cls(cls.Config.from_options({**options, "train_max_items": cap}), "cpu")
        prepare = ranker.prepare
        sizes: list[int] = []

        def counted(lists: Any, prepare: Any = prepare, sizes: list[int] = sizes) -> Any:
            sizes.append(sum(len(items) for _, items in lists))
            return prepare(lists)

        monkeypatch.setattr(ranker, "prepare", counted)
        ranker.fit(split)
        largest[cap] = max(sizes)
    assert largest == {16: 32, 0: 600}


def test_cap_options_are_checked(tiny_bert: Path) -> None:
    from rankers.monobert import MonoBERTRanker

    with pytest.raises(RankerError, match="train_max_items=1 leaves a list one item"):
        MonoBERTRanker.Config.from_options({"train_max_items": 1})
    with pytest.raises(RankerError, match="train_list_size=100 grows lists beyond"):
        MonoBERTRanker.Config.from_options({"train_list_size": 100, "train_max_items": 64})


def test_step_estimate_hand_computed() -> None:
    from bench.execution.memory import estimate_step

    # 2 x (34 s h + 5 a s^2) bytes per sequence and layer in float32; 16 bytes a parameter
    e = estimate_step(sequences=3, length=10, layers=2, hidden=8, heads=2, parameters=100)
    assert e.activation_bytes == 3 * 2 * 2 * (34 * 10 * 8 + 5 * 2 * 10 * 10)
    assert e.parameter_bytes == 1600 and e.total_bytes == e.activation_bytes + 1600


def _bert_config(folder: Path, layers: int) -> Path:
    """A BERT config.json (no weights: the estimate reads only the config): width 8, 2 heads,
    feed-forward 32, 100 words, 16 positions, ``layers`` layers."""
    import json

    folder.mkdir(parents=True)
    config = {
        "model_type": "bert",
        "num_hidden_layers": layers,
        "hidden_size": 8,
        "num_attention_heads": 2,
        "intermediate_size": 32,
        "vocab_size": 100,
        "max_position_embeddings": 16,
    }
    (folder / "config.json").write_text(json.dumps(config))
    return folder


@dataclasses.dataclass
class _StepRanker:
    """What :func:`step_problem` reads of a ranker: its name, model and step shape."""

    cfg: Any
    name: str = "toy"

    def training_step_shape(self, list_lengths: Any) -> tuple[int, int]:
        return 3, 10  # 3 sequences of 10 tokens


@pytest.mark.parametrize(
    ("layers", "parameters", "total"),
    [
        # a layer: 4 x 8 x 8 + 2 x 8 x 32 = 768 weights; embeddings (100 + 16) x 8 = 928;
        # activations 3 x layers x 2 x (34 x 10 x 8 + 5 x 2 x 10 x 10) = 22320 x layers bytes
        (2, 2 * 768 + 928, 2 * 22320 + 16 * (2 * 768 + 928)),
        (4, 4 * 768 + 928, 4 * 22320 + 16 * (4 * 768 + 928)),
    ],
)
def test_the_step_estimate_scales_with_the_layers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, layers: int, parameters: int, total: int
) -> None:
    """Activations and weights both grow with the encoder's layers: the estimate the plan
    compares with the free memory, hand-computed, is refused one byte below it and not at it."""
    import bench.execution.memory as memory

    folder = _bert_config(tmp_path / "bert", layers)
    assert memory.encoder_shape(str(folder)) == (layers, 8, 2, parameters)
    ranker = _StepRanker(types.SimpleNamespace(model=str(folder)))
    monkeypatch.setattr(memory, "available_bytes", lambda device: total)
    line, problem = memory.step_problem(ranker, [10], "cpu")
    assert line.startswith("toy: largest training step: 3 sequences of up to 10 tokens, about ")
    assert problem is None
    monkeypatch.setattr(memory, "available_bytes", lambda device: total - 1)
    assert memory.step_problem(ranker, [10], "cpu")[1] == (
        f"{line}, more than the 0.0 GiB free on cpu: lower train_max_items or "
        "train_batch_queries (--set)"
    )


MEMINFO = """MemTotal:       16318412 kB
MemFree:          812344 kB
MemAvailable:    9876543 kB
Buffers:          123456 kB
"""


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (MEMINFO, 9876543 * 1024),  # kB as the kernel writes it, in bytes
        ("MemTotal: 100 kB\nMemFree: 50 kB\n", None),  # an old kernel: no MemAvailable
        ("MemAvailable: lots kB\n", None),
        ("MemAvailable:\n", None),
        (None, None),  # no such file (not Linux)
    ],
)
def test_the_free_memory_reader_reads_mem_available(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str | None, expected: int | None
) -> None:
    """:func:`available_bytes` on a CPU reads MemAvailable from /proc/meminfo (here a fake
    file in its place); what it cannot read is None (nothing known), never an error."""
    import builtins

    import bench.execution.memory as memory

    fake = tmp_path / "meminfo"
    if text is not None:
        fake.write_text(text, encoding="ascii")
    real_open = builtins.open

    def fake_open(file: Any, *args: Any, **kwargs: Any) -> Any:
        return real_open(fake if file == "/proc/meminfo" else file, *args, **kwargs)

    monkeypatch.setattr(memory, "open", fake_open, raising=False)
    assert memory.available_bytes("cpu") == expected


def test_step_shapes_follow_the_options(tiny_bert: Path) -> None:
    from rankers.crossjem import CrossJEMRanker
    from rankers.monobert import MonoBERTRanker

    options = {"model": str(tiny_bert), "train_batch_queries": 4}
    mono = MonoBERTRanker(MonoBERTRanker.Config.from_options({**options, "train_max_items": 16}))
    assert mono.training_step_shape([5, 300, 9]) == (4 * 16, 32 + 32 + 3)
    whole = MonoBERTRanker(MonoBERTRanker.Config.from_options({**options, "train_max_items": 0}))
    assert whole.training_step_shape([5, 300, 9]) == (4 * 300, 67)
    jem = CrossJEMRanker(CrossJEMRanker.Config.from_options({**options, "union_len": 100}))
    # 64 items x 32 tokens, no token shared: 21 rows of 100 at most
    assert jem.training_step_shape([5, 300]) == (4 * 21, 32 + 100 + 3)


def _toy_monobert(tmp_path: Path, tiny_bert: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The toy dataset as the data root and a one-epoch monoBERT on the tiny BERT."""
    from toydata import write_toy_mteb

    write_toy_mteb(tmp_path / "data" / "toy")
    monkeypatch.setenv("BENCH_DATA_DIR", str(tmp_path / "data"))
    folder = tmp_path / "configs"
    folder.mkdir()
    (folder / "monobert.yaml").write_text(
        f"default:\n  model: {tiny_bert}\n  epochs: 1\n  min_steps: 0\n  loss: bce\n"
    )
    monkeypatch.setattr("bench.execution.runner.CONFIG_DIR", folder)


def test_a_step_that_cannot_fit_is_refused_before_any_work(
    tmp_path: Path, tiny_bert: Path, results_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The plan says the largest step and its memory; one larger than the free memory stops
    the command before the first job (exit 2, one line naming the options), and --plan says it
    would."""
    from typer.testing import CliRunner

    import bench.execution.memory
    from bench.cli.main import app

    _toy_monobert(tmp_path, tiny_bert, monkeypatch)
    monkeypatch.setattr(bench.execution.memory, "available_bytes", lambda device: 1000)
    runner = CliRunner()
    plan = runner.invoke(app, ["-q", "run", "-r", "monobert", "-d", "toy", "--plan"])
    text = " ".join(plan.output.split())
    assert plan.exit_code == 0, text
    assert "monobert: largest training step: " in text
    assert "would stop before the first job: monobert: largest training step" in text
    result = runner.invoke(app, ["-q", "run", "-r", "monobert", "-d", "toy"])
    text = " ".join(result.output.split())
    assert result.exit_code == 2 and "more than the 0.0 GiB free on cpu" in text
    assert "lower train_max_items or train_batch_queries" in text
    assert not results_dir.exists()  # nothing trained, scored or written


def test_a_step_shared_by_every_variant_is_said_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tiny_bert: Path, results_dir: Path
) -> None:
    """An ablation's variants share their step's shape: the plan says it once, not per variant."""
    from typer.testing import CliRunner

    from bench.cli.main import app

    _toy_monobert(tmp_path, tiny_bert, monkeypatch)
    args = ["-q", "ablate", "-d", "toy", "--what", "loss", "-r", "monobert", "--plan"]
    plan = CliRunner().invoke(app, args)
    text = " ".join(plan.output.split())
    assert plan.exit_code == 0, text
    assert text.count("monobert: largest training step: ") == 1


def test_a_sweep_refuses_a_later_combinations_step_before_its_first_job(
    tmp_path: Path, tiny_bert: Path, results_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A sweep runs its combinations one by one; the second one's step does not fit (8 of the
    toy's lists of 3 items per step, more than the free memory), so the sweep stops before it
    trains or scores the first, as its --plan says."""
    from typer.testing import CliRunner

    import bench.execution.memory
    from bench.cli.main import app
    from bench.execution.memory import encoder_shape, estimate_step

    _toy_monobert(tmp_path, tiny_bert, monkeypatch)
    # free memory between the estimates of one and of eight lists per step
    shape = encoder_shape(str(tiny_bert))
    one, eight = (estimate_step(n * 3, 67, *shape).total_bytes for n in (1, 8))
    monkeypatch.setattr(bench.execution.memory, "available_bytes", lambda d: (one + eight) // 2)
    sweep = ["-q", "sweep", "-r", "monobert", "-d", "toy", "--set", "train_batch_queries=1,8"]
    runner = CliRunner()
    plan = " ".join(runner.invoke(app, [*sweep, "--plan"]).output.split())
    assert "would stop before the first job: monobert: largest training step" in plan
    result = runner.invoke(app, [*sweep, "--no-write"])
    text = " ".join(result.output.split())
    assert result.exit_code == 2, text
    assert "monobert: largest training step: 24 sequences" in text and "free on cpu" in text
    assert not list(results_dir.rglob("training.json")) and not list(results_dir.rglob("*.trec"))
