"""Every option of every registered ranker either changes what the ranker computes or is refused.

An option whose value changes nothing under the other options (a runtime-only option under
``runtime=torch``, an option of a runtime the ranker lacks, a teacher option without a teacher)
would still be another cache key and another row label: the same computation stored and shown
twice under a setting that did nothing. The rule is declared on the option (``needs`` /
``value_needs`` in :func:`rankers.base.option`), so the refusal comes before any work and in
``--plan``.

How "changes the computation" is checked: each ranker runs once with its default options on a
tiny input (index, score and, for a trainable ranker, one fit), its config watched for which
options the code reads. An option the code never reads under the defaults changes nothing there,
so every value of it but the default must be refused; an option it reads is consulted, so any
valid value of it may be taken.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from toydata import gold_split
from typer.testing import CliRunner

from bench.cli.main import app
from rankers import RankerError, available, get_ranker_class
from rankers.base import Ranker, RankerConfig, option_spec

#: a value other than the default for the free-text options (the config takes any string)
TEXT_VALUES = {
    "teacher": "monobert",
    "checkpoint": "/nonexistent/checkpoint",
    "model": "other-model",
    "path": "other.run",
    "name": "other",
    "query_prefix": "query: ",
    "document_prefix": "passage: ",
    "score_token": "[unused1]",
    "template": "Document: {document} Query: {query}",
}

#: options whose only effect is the row's label, which is what they are for: (ranker, option)
LABEL_ONLY = {("runfile", "name")}


def other_values(config: type[RankerConfig], field: dataclasses.Field[Any]) -> list[Any]:
    """Values of option ``field`` other than its default that pass its own range check: every
    other declared choice (also those the ranker cannot run, which must be refused), the other
    boolean, or one number in range."""
    spec = option_spec(field)
    assert spec is not None, f"{config.__name__}.{field.name} is not declared with option()"
    default = field.default
    if spec.choices is not None:
        return [c for c in spec.choices if c != default]
    hint = typing.get_type_hints(config)[field.name]
    kind = next(a for a in (*typing.get_args(hint), hint) if a in (bool, int, float, str))
    if kind is bool:
        return [not default]
    if kind is str:
        return [TEXT_VALUES[field.name]]
    base = 0 if default is None else default
    candidates = [base + 1, base + 0.5, base / 2 if base else 0.5, spec.min, 4]
    for value in candidates:
        if value is None or value == default:
            continue
        value = kind(value)
        if value != default and spec.problem(value) is None:
            return [value]
    raise AssertionError(f"{config.__name__}.{field.name}: no value in range to try")


# -- which options the computation reads ----------------------------------------------------------
class ReadLog:
    """The option names read from a watched config while :attr:`active` is true; reading inside
    ``dataclasses.asdict`` / ``replace`` (what a cache key or a copy does, reading every field
    whatever it means) is left out."""

    def __init__(self) -> None:
        self.names: set[str] = set()
        self.paused = 0

    def watch(self, config: RankerConfig) -> RankerConfig:
        """``config`` as an instance of a subclass that reports each option read here."""
        names = {f.name for f in dataclasses.fields(config)}
        log = self

        def getattribute(obj: object, name: str) -> Any:
            if not log.paused and name in names:
                log.names.add(name)
            return object.__getattribute__(obj, name)

        cls = type(config)
        watched = type(f"Watched{cls.__name__}", (cls,), {"__getattribute__": getattribute})
        copy = object.__new__(watched)
        copy.__dict__.update(config.__dict__)
        return typing.cast(RankerConfig, copy)

    def unwatched(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            self.paused += 1
            try:
                return fn(*args, **kwargs)
            finally:
                self.paused -= 1

        return call


@pytest.fixture()
def reads(monkeypatch: pytest.MonkeyPatch) -> Iterator[ReadLog]:
    log = ReadLog()
    for name in ("asdict", "replace"):
        monkeypatch.setattr(dataclasses, name, log.unwatched(getattr(dataclasses, name)))
    yield log


def _tiny_options(name: str, tiny_bert: Path, tmp_path: Path) -> dict[str, Any]:
    """What a ranker needs to run on the tiny input (a tiny model, a run file): values of options
    that every ranker reads, so they leave the other options at their defaults."""
    model = {"rankt5": f"encdec:{tiny_bert}", "runfile": None, "bm25": None, "firststage": None}
    if name == "runfile":
        test = gold_split("test", 1, n=2)
        lines = [
            f"{cl.query.qid} Q0 {c.docid} {rank + 1} {-float(rank)} toy"
            for cl in test.lists
            for rank, c in enumerate(cl.candidates)
        ]
        run = tmp_path / "toy.run"
        run.write_text("\n".join(lines) + "\n")
        return {"path": str(run)}
    path = model.get(name, str(tiny_bert))
    return {} if path is None else {"model": path}


def _read_options(ranker_name: str, tiny_bert: Path, tmp_path: Path, log: ReadLog) -> set[str]:
    """The options the ranker reads while it is built, indexes, scores the tiny test lists and
    (trainable) fits one epoch on tiny train lists, all with its default options."""
    cls: type[Ranker[Any]] = get_ranker_class(ranker_name)
    config = cls.Config.from_options(_tiny_options(ranker_name, tiny_bert, tmp_path))
    log.names.clear()
    ranker = cls(log.watch(config))
    test = gold_split("test", 1, n=2)
    if ranker_name != "firststage":  # it reads a dataset's own first-stage scores only
        ranker.index(test)
        ranker.score(test.lists)
    if cls.trainable:
        typing.cast(Any, ranker).fit(gold_split("train", 0, n=4), test)
    return set(log.names)


@pytest.mark.parametrize("ranker_name", sorted(available()))
def test_every_option_changes_the_computation_or_is_refused(
    ranker_name: str, tiny_bert: Path, tmp_path: Path, reads: ReadLog
) -> None:
    config = get_ranker_class(ranker_name).Config
    read = _read_options(ranker_name, tiny_bert, tmp_path, reads)
    silent = []
    for field in dataclasses.fields(config):
        for value in other_values(config, field):
            try:
                config.from_options({field.name: value})
            except RankerError as exc:
                assert field.name in str(exc), f"{ranker_name}: {exc} does not name the option"
                continue
            if field.name not in read and (ranker_name, field.name) not in LABEL_ONLY:
                silent.append(f"{field.name}={value}")
    assert not silent, f"{ranker_name}: accepted, yet never read under the defaults: {silent}"


def test_the_read_log_sees_the_options_that_do_nothing(
    tiny_bert: Path, tmp_path: Path, reads: ReadLog
) -> None:
    """The watch can tell: under the defaults monoBERT reads its scoring options but not the ONNX
    graph, the int8 recipe or the teacher's score mode (which are refused off their default)."""
    read = _read_options("monobert", tiny_bert, tmp_path, reads)
    assert {"batch_size", "max_item_len", "dtype", "runtime", "lr", "teacher"} <= read
    assert not {"onnx_graph", "int8_recipe", "teacher_scores"} & read


@pytest.mark.parametrize(
    ("ranker_name", "options", "message"),
    [
        (
            "monobert",
            {"onnx_graph": "fused"},
            "option onnx_graph=fused has no effect under runtime=torch (onnx_graph=fused needs "
            "runtime=onnxruntime); leave onnx_graph at its default, plain",
        ),
        (
            "crossjem",
            {"teacher_scores": "logits"},
            "option teacher_scores=logits has no effect under teacher=None (teacher_scores=logits "
            "needs a value of teacher); leave teacher_scores at its default, sigmoid",
        ),
        (
            "set-encoder",
            {"onnx_graph": "plain"},
            "option onnx_graph='plain' does nothing for this ranker (onnx_graph=plain needs "
            "runtime=onnxruntime, and runtime here takes only torch); leave onnx_graph at its "
            "default, fused",
        ),
        (
            "set-encoder",
            {"dtype": "int8"},
            "option dtype='int8': expected one of auto, float32, bfloat16, float16, tf32 "
            "(dtype=int8 needs runtime=onnxruntime, and runtime here takes only torch)",
        ),
        (
            "set-encoder",
            {"int8_recipe": "all"},
            "option int8_recipe='all' does nothing for this ranker (int8_recipe=all needs "
            "dtype=int8, and dtype here takes only auto, float32, bfloat16, float16, tf32); leave "
            "int8_recipe at its default, ffn-float",
        ),
        (
            "monobert",
            {"dtype": "int8", "runtime": "openvino"},
            "option dtype=int8 is not available with runtime=openvino (dtype=int8 needs "
            "runtime=onnxruntime); leave dtype at its default, auto",
        ),
    ],
)
def test_an_option_that_does_nothing_is_refused_by_name(
    ranker_name: str, options: dict[str, str], message: str
) -> None:
    with pytest.raises(RankerError) as err:
        get_ranker_class(ranker_name).Config.from_options(options)
    assert str(err.value) == message


def test_options_at_their_defaults_keep_every_key() -> None:
    """Declaring what an option needs adds no field and changes no default: the saved config
    (the source of every cache key) is the one from before, in the same order."""
    from rankers.families.setencoder import SetEncoderConfig

    saved = SetEncoderConfig().to_dict()
    assert list(saved)[8:12] == ["dtype", "train_dtype", "warmup_ratio", "loss"]
    assert {k: saved[k] for k in ("dtype", "runtime", "onnx_graph", "int8_recipe")} == {
        "dtype": "auto",
        "runtime": "torch",
        "onnx_graph": "fused",
        "int8_recipe": "ffn-float",
    }
    assert saved["teacher_scores"] == "sigmoid" and saved["teacher"] is None


def test_bench_rankers_lists_only_what_each_ranker_runs() -> None:
    """The Set-Encoder runs on torch only: its dtype lists no int8 and its ONNX options are not
    shown; monoBERT, which has the ONNX runtime, lists all of them."""
    from rankers.families.monobert import MonoBERTConfig
    from rankers.families.setencoder import SetEncoderConfig

    shown = {o.name: o.range for o in SetEncoderConfig.describe_options()}
    assert shown["dtype"] == "auto, float32, bfloat16, float16, tf32"
    assert "onnx_graph" not in shown and "int8_recipe" not in shown and "runtime" not in shown
    mono = {o.name: o.range for o in MonoBERTConfig.describe_options()}
    assert mono["dtype"] == "auto, float32, bfloat16, float16, tf32, int8"
    assert mono["onnx_graph"] == "fused, plain" and "int8_recipe" in mono
    result = CliRunner().invoke(app, ["rankers"])
    assert result.exit_code == 0, result.output
    block = result.output.split("set-encoder (")[1].split("st-crossencoder")[0]
    assert "onnx_graph" not in block and "int8_recipe" not in block and "int8" not in block
