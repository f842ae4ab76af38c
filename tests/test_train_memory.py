"""A training step is bounded by what it holds, not by a count of lists: option
``train_max_items`` keeps each train list's positives and a seeded sample of its negatives, so a
step holds at most ``train_batch_queries x train_max_items`` items however long the lists are."""

from __future__ import annotations

import dataclasses
import types
from pathlib import Path
from typing import Any

import pytest
import torch
from toydata import long_split

from rankers.base import RankerError
from rankers.fit.targets import cap_lists


def test_cap_keeps_positives_and_a_seeded_sample_of_negatives() -> None:
    split = long_split(3, 10)
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
    split = long_split(4, 12)
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
    32 items; with 0 (whole lists) a step holds 600, so the count sees the cap. Micro-batches
    (the default train_micro_items) then bound a pass: monoBERT's 128 pairs, CROSS-JEM's one
    whole list (its items share rows)."""
    from rankers.families.crossjem.ranker import CrossJEMRanker
    from rankers.families.monobert import MonoBERTRanker

    cls: Any = {"monobert": MonoBERTRanker, "crossjem": CrossJEMRanker}[kind]
    split = long_split(4, 300)
    largest: dict[tuple[int, int | None], int] = {}
    for cap, micro in ((16, 0), (0, 0), (0, None)):
        options = {"model": str(tiny_bert), "epochs": 1, "min_steps": 0, "train_batch_queries": 2}
        options.update(train_max_items=cap, **({} if micro is None else {"train_micro_items": 0}))
        ranker = cls(cls.Config.from_options(options), "cpu")
        prepare = ranker.prepare
        sizes: list[int] = []

        def counted(lists: Any, prepare: Any = prepare, sizes: list[int] = sizes) -> Any:
            sizes.append(sum(len(items) for _, items in lists))
            return prepare(lists)

        monkeypatch.setattr(ranker, "prepare", counted)
        ranker.fit(split)
        largest[cap, micro] = max(sizes)
    by_pass = {"monobert": 128, "crossjem": 300}[kind]
    assert largest == {(16, 0): 32, (0, 0): 600, (0, None): by_pass}


def test_cap_options_are_checked(tiny_bert: Path) -> None:
    from rankers.families.monobert import MonoBERTRanker

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
    assert line.startswith(
        "toy: largest training step: 3 sequences of up to 10 tokens in one forward/backward "
        "pass, about "
    )
    assert problem is None
    monkeypatch.setattr(memory, "available_bytes", lambda device: total - 1)
    assert memory.step_problem(ranker, [10], "cpu")[1] == (
        f"{line}, more than the 0.0 GiB free on cpu: lower train_micro_items, train_max_items "
        "or train_batch_queries (--set)"
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
    from rankers.families.crossjem.ranker import CrossJEMRanker
    from rankers.families.monobert import MonoBERTRanker

    options = {"model": str(tiny_bert), "train_batch_queries": 4}
    mono = MonoBERTRanker(MonoBERTRanker.Config.from_options({**options, "train_max_items": 16}))
    assert mono.training_step_shape([5, 300, 9]) == (4 * 16, 32 + 32 + 3)
    whole = MonoBERTRanker(MonoBERTRanker.Config.from_options({**options, "train_max_items": 0}))
    # 4 x 300 pairs in a step, 128 of them (monoBERT's train_micro_items) in one pass
    assert whole.training_step_shape([5, 300, 9]) == (128, 67)
    one_pass = {**options, "train_max_items": 0, "train_micro_items": 0}
    one = MonoBERTRanker(MonoBERTRanker.Config.from_options(one_pass))
    assert one.training_step_shape([5, 300, 9]) == (4 * 300, 67)
    jem = CrossJEMRanker(CrossJEMRanker.Config.from_options({**options, "union_len": 100}))
    # 64 items x 32 tokens, no token shared: 21 rows of 100 at most; 4 lists x 64 items fit the
    # 256 items of a pass
    assert jem.training_step_shape([5, 300]) == (4 * 21, 32 + 100 + 3)
    micro = {**options, "union_len": 100, "train_micro_items": 130}
    jem = CrossJEMRanker(CrossJEMRanker.Config.from_options(micro))
    assert jem.training_step_shape([5, 300]) == (2 * 21, 32 + 100 + 3)  # 2 whole lists a pass
    micro["train_micro_items"] = 10
    jem = CrossJEMRanker(CrossJEMRanker.Config.from_options(micro))
    assert jem.training_step_shape([5, 300]) == (21, 32 + 100 + 3)  # a list is never cut


def test_step_shapes_follow_the_list_size_and_each_familys_micro_batch_unit(
    tiny_bert: Path,
) -> None:
    """The Set-Encoder's micro-batches hold whole lists (train_micro_items=1 gave "1 sequences");
    train_list_size grows every list before train_max_items cuts it (it changed no estimate)."""
    from rankers.families.crossjem.ranker import CrossJEMRanker
    from rankers.families.monobert import MonoBERTRanker
    from rankers.families.setencoder import SetEncoderRanker

    def shape(cls: Any, lengths: list[int], **options: Any) -> tuple[int, int] | None:
        config = {"model": str(tiny_bert), "train_batch_queries": 4, **options}
        return cls(cls.Config.from_options(config)).training_step_shape(lengths)

    # one item a pass: monoBERT cuts a list into items, the Set-Encoder keeps its 64 together
    assert shape(MonoBERTRanker, [5, 300], train_micro_items=1) == (1, 67)
    assert shape(SetEncoderRanker, [5, 300], train_micro_items=1) == (64, 67)
    assert shape(SetEncoderRanker, [5, 300]) == (4 * 64, 67)  # 256 items: 512 fit a pass
    assert shape(SetEncoderRanker, [5, 300], train_micro_items=200) == (3 * 64, 67)
    grown = {"train_list_size": 3000, "train_max_items": 0}
    assert shape(SetEncoderRanker, [5, 30], **grown) == (3000, 67)  # a list of 3000 a pass
    assert shape(MonoBERTRanker, [5, 30], **grown, train_micro_items=0) == (4 * 3000, 67)
    assert shape(MonoBERTRanker, [5, 30], **grown) == (128, 67)  # its pass: 128 pairs at most
    # 3000 items x 32 tokens in rows of 100: 960 rows, one list a pass (3000 > 256 items)
    assert shape(CrossJEMRanker, [5, 30], union_len=100, **grown) == (960, 32 + 100 + 3)
    # train_list_size below the longest list given changes nothing; train_max_items cuts it
    assert shape(SetEncoderRanker, [5, 300], train_list_size=10) == (4 * 64, 67)


def test_a_grown_list_is_refused_before_work(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The plan's refusal fires for lists train_list_size grows beyond the free memory."""
    import bench.execution.memory as memory
    from rankers.families.setencoder import SetEncoderRanker

    folder = _bert_config(tmp_path / "bert", 2)
    monkeypatch.setattr(memory, "available_bytes", lambda device: 2**28)  # 0.06 and 0.76 GB
    options = {"model": str(folder), "train_max_items": 0}
    ranker = SetEncoderRanker(SetEncoderRanker.Config.from_options(options))
    line, problem = memory.step_problem(ranker, [5, 30], "cpu")
    assert line.startswith("set-encoder: largest training step: 240 sequences of up to 67")
    assert problem is None
    options["train_list_size"] = 3000
    ranker = SetEncoderRanker(SetEncoderRanker.Config.from_options(options))
    line, problem = memory.step_problem(ranker, [5, 30], "cpu")
    assert line.startswith("set-encoder: largest training step: 3000 sequences of up to 67")
    assert problem is not None and ", more than the 0.2 GiB free on cpu: lower" in problem


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
    monkeypatch.setattr("bench.execution.ranker_settings.CONFIG_DIR", folder)


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
    assert "lower train_micro_items, train_max_items or train_batch_queries" in text
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


# -- micro-batches -------------------------------------------------------------------------------
def test_micro_batches_hold_whole_lists_and_cut_only_pointwise_long_lists() -> None:
    from rankers.fit.lists import micro_batches

    assert micro_batches([6, 6, 6], 0, True) == [[(0, 0, 6), (1, 0, 6), (2, 0, 6)]]
    assert micro_batches([6, 6, 6], 18, False) == [[(0, 0, 6), (1, 0, 6), (2, 0, 6)]]
    assert micro_batches([6, 6, 6], 13, False) == [[(0, 0, 6), (1, 0, 6)], [(2, 0, 6)]]
    # a list longer than a micro-batch: in chunks for a pointwise ranker, else alone and whole
    assert micro_batches([3, 10, 2], 4, True) == [
        [(0, 0, 3)],
        [(1, 0, 4)],
        [(1, 4, 8)],
        [(1, 8, 10)],
        [(2, 0, 2)],
    ]
    assert micro_batches([3, 10, 2], 4, False) == [[(0, 0, 3)], [(1, 0, 10)], [(2, 0, 2)]]


def _step_gradients(ranker: Any, loss: str, batch: list[int]) -> tuple[float, dict[str, Any], bool]:
    """The loss and gradients of one list-trainer step on ``batch`` of eight 6-item lists, and
    whether it ran in micro-batches."""
    from rankers.compute.losses import get_loss
    from rankers.fit.lists import ListSteps
    from rankers.fit.targets import Targets, grade_targets

    split = long_split(8, 6)
    targets = Targets(grade_targets(split.lists, split.qrels), "qrels grades")
    steps = ListSteps(ranker, split.lists, targets, get_loss(loss), 1)
    ranker.module.train()
    result = steps.batch_loss(batch, ranker.module)
    if result.backward is None:
        result.loss.backward()
    else:
        result.backward(1.0, lambda surrogate: surrogate.backward())
    grads = {n: p.grad.clone() for n, p in ranker.module.named_parameters() if p.grad is not None}
    return float(result.loss.detach()), grads, result.backward is not None


@pytest.mark.parametrize(
    ("name", "loss", "micro"),
    [
        ("monobert", "bce", 4),  # every list in chunks of 4 + 2 items, scored first
        ("monobert", "listnet", 4),
        ("monobert", "ce", 13),  # two whole lists a micro-batch
        ("crossjem", "listnet", 4),  # CROSS-JEM's items share rows: whole lists only
        ("crossjem", "ce", 13),
    ],
)
def test_micro_batched_gradients_equal_one_pass(
    tiny_bert_no_dropout: Path, name: str, loss: str, micro: int
) -> None:
    """Micro-batches give the one-pass loss and gradients up to summation order (no dropout,
    so both passes see the same function). The last list is a padding list (zero weight)."""
    from rankers import get_ranker_class

    cls = get_ranker_class(name)
    batch = [0, 1, 2, -1 - 3]
    options = {"model": str(tiny_bert_no_dropout), "dropout": 0.0, "loss": loss}
    one_loss, one, one_split = _step_gradients(
        cls(cls.Config.from_options({**options, "train_micro_items": 0})), loss, batch
    )
    split = cls(cls.Config.from_options({**options, "train_micro_items": micro}))
    micro_loss, grads, was_split = _step_gradients(split, loss, batch)
    assert (one_split, was_split) == (False, True)
    assert micro_loss == pytest.approx(one_loss, rel=1e-6)
    assert grads.keys() == one.keys() and len(grads) > 10
    for key, grad in one.items():
        torch.testing.assert_close(grads[key], grad, rtol=1e-5, atol=1e-7, msg=key)


@pytest.mark.parametrize(
    ("name", "micro"), [("monobert", 4), ("crossjem", 13), ("set-encoder", 13)]
)
def test_micro_batch_backward_draws_the_dropout_of_its_scoring_pass(
    tiny_bert: Path, name: str, micro: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With dropout on (the tiny BERT's own and the head's), a micro-batched step runs each
    micro-batch twice: scored without a graph for the loss, then again with one for its
    backward. The second pass must draw the same dropout masks (the scoring pass's random state
    restored), or the gradient is that of other scores than the loss was taken on: the logits of
    the two passes are equal bit for bit. Dropout is really on: the first micro-batch scored
    once more, from the random state the step left, gives other logits."""
    from rankers import get_ranker_class
    from rankers.fit import lists

    passes: list[tuple[Any, torch.Tensor]] = []
    real = lists._forward

    def recording(ranker: Any, model: Any, module: Any) -> Any:
        forward = real(ranker, model, module)

        def call(inputs: Any) -> Any:
            logits, mask = forward(inputs)
            passes.append((inputs, logits.detach().clone()))
            return logits, mask

        return call

    monkeypatch.setattr(lists, "_forward", recording)
    cls = get_ranker_class(name)
    options = {"model": str(tiny_bert), "dropout": 0.1, "loss": "listnet"}
    ranker = cls(cls.Config.from_options({**options, "train_micro_items": micro}))
    torch.manual_seed(0)
    _, grads, was_split = _step_gradients(ranker, "listnet", [0, 1, 2, -1 - 3])
    assert was_split and len(grads) > 10
    half = len(passes) // 2
    assert len(passes) == 2 * half >= 4
    for n, ((_, scored), (_, again)) in enumerate(zip(passes[:half], passes[half:], strict=True)):
        assert torch.equal(scored, again), f"micro-batch {n}: backward saw other dropout masks"
    with torch.no_grad():
        other, _ = ranker.forward(passes[0][0])
    assert not torch.equal(other, passes[0][1])
