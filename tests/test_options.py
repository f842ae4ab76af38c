"""Ranker options declared once (rankers.base.option): roles, ranges, choices and `bench rankers`.

The role sets are written out literally: the training set is the config part of every
trained-model and resumable-checkpoint key, the score set what a loaded checkpoint restores, the
runtime set what it never overrides. A refactor that moves an option between them would silently
retrain or, worse, reuse a model trained with other settings; here it fails instead.
"""

from __future__ import annotations

import dataclasses

import pytest
from typer.testing import CliRunner

from bench.cli.main import app
from rankers import RankerError, Role, available, get_ranker_class
from rankers.base import DTYPE_NAMES, RankerConfig, option_spec

ENCODER_TRAINING = {
    "model",
    "checkpoint",
    "max_query_len",
    "max_item_len",
    "dropout",
    "seed",
    "train_dtype",
    "loss",
    "teacher",
    "teacher_scores",
    "train_list_size",
    "train_max_items",
    "epochs",
    "min_steps",
    "patience",
    "lr",
    "weight_decay",
    "warmup_ratio",
    "max_grad_norm",
    "train_batch_queries",
    "train_micro_items",
}
DENSE = {
    Role.TRAINING: {
        "model",
        "similarity",
        "max_length",
        "query_prefix",
        "document_prefix",
        "train_dtype",
        "lr",
        "weight_decay",
        "epochs",
        "train_batch_size",
        "warmup_ratio",
        "scale",
        "hard_negatives",
        "max_grad_norm",
        "min_steps",
        "patience",
        "seed",
        "sort_item_tokens",
    },
    Role.SCORE: {
        "similarity",
        "query_prefix",
        "document_prefix",
        "max_length",
        "sort_item_tokens",
    },
    Role.RUNTIME: {"batch_size", "precompute", "dtype", "checkpoint_steps"},
}
EXPECTED: dict[str, dict[Role, set[str]]] = {
    "firststage": {Role.TRAINING: set(), Role.SCORE: set(), Role.RUNTIME: set()},
    "bm25": {Role.TRAINING: set(), Role.SCORE: {"k1", "b"}, Role.RUNTIME: set()},
    "runfile": {Role.TRAINING: set(), Role.SCORE: {"path", "name"}, Role.RUNTIME: set()},
    "st-crossencoder": {
        Role.TRAINING: set(),
        Role.SCORE: {"model", "checkpoint", "max_length"},
        Role.RUNTIME: {"batch_size", "dtype"},
    },
    "dpr": DENSE,
    "ance": DENSE,
    "monobert": {
        Role.TRAINING: ENCODER_TRAINING | {"pooling", "sort_item_tokens"},
        Role.SCORE: {"model", "max_query_len", "max_item_len", "pooling", "sort_item_tokens"},
        Role.RUNTIME: {
            "checkpoint",
            "dtype",
            "runtime",
            "onnx_graph",
            "cuda_graphs",
            "int8_recipe",
            "pretokenise",
            "checkpoint_steps",
            "batch_size",
        },
    },
    "crossjem": {
        Role.TRAINING: ENCODER_TRAINING
        | {"union_len", "item_positions", "order", "share_min", "positions", "merge_layers"}
        | {"share", "content_share_min", "query_pool", "share_frac"},
        Role.SCORE: {
            "model",
            "max_query_len",
            "max_item_len",
            "union_len",
            "item_positions",
            "order",
            "share_min",
            "share_frac",
            "positions",
            "merge_layers",
            "share",
            "content_share_min",
            "query_pool",
        },
        Role.RUNTIME: {
            "checkpoint",
            "dtype",
            "runtime",
            "onnx_graph",
            "cuda_graphs",
            "int8_recipe",
            "pretokenise",
            "checkpoint_steps",
            "batch_queries",
            "pad_tolerance",
        },
    },
    "set-encoder": {
        Role.TRAINING: ENCODER_TRAINING,
        Role.SCORE: {"model", "max_query_len", "max_item_len"},
        Role.RUNTIME: {
            "checkpoint",
            "dtype",
            "runtime",
            "onnx_graph",
            "cuda_graphs",
            "pretokenise",
            "checkpoint_steps",
            "batch_size",
            "batch_queries",
            "int8_recipe",
        },
    },
    "colbert": {
        Role.TRAINING: {
            "model",
            "dim",
            "query_maxlen",
            "doc_maxlen",
            "similarity",
            "mask_punctuation",
            "attend_to_mask_tokens",
            "train_dtype",
            "lr",
            "train_batch_size",
            "nway",
            "use_ib_negatives",
            "epochs",
            "max_steps",
            "warmup_steps",
            "weight_decay",
            "max_grad_norm",
            "min_steps",
            "patience",
            "seed",
            "sort_item_tokens",
        },
        Role.SCORE: {
            "model",
            "dim",
            "query_maxlen",
            "doc_maxlen",
            "similarity",
            "mask_punctuation",
            "attend_to_mask_tokens",
            "sort_item_tokens",
        },
        Role.RUNTIME: {"batch_size", "dtype", "checkpoint_steps"},
    },
    "rankt5": {
        Role.TRAINING: {
            "model",
            "score_token",
            "template",
            "max_length",
            "train_dtype",
            "seed",
            "loss",
            "teacher",
            "list_size",
            "epochs",
            "lr",
            "weight_decay",
            "warmup_ratio",
            "max_grad_norm",
            "min_steps",
            "patience",
            "train_batch_queries",
            "train_micro_items",
            "sort_item_tokens",
        },
        Role.SCORE: {"model", "score_token", "template", "max_length", "sort_item_tokens"},
        Role.RUNTIME: {"batch_size", "dtype", "checkpoint_steps"},
    },
}


def _config(name: str) -> type[RankerConfig]:
    return get_ranker_class(name).Config


def test_every_registered_ranker_has_pinned_role_sets() -> None:
    assert set(EXPECTED) == set(available())


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_role_sets_are_the_pinned_ones(name: str) -> None:
    config = _config(name)
    for role, expected in EXPECTED[name].items():
        assert config.fields_with_role(role) == expected, f"{name}: {role.label()}"


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_every_option_is_declared_with_a_role_and_help(name: str) -> None:
    # a plain field would have no role, so it would be left out of the trained-model key
    for field in dataclasses.fields(_config(name)):
        spec = option_spec(field)
        assert spec is not None and spec.role and spec.help, f"{name}.{field.name}"


def test_training_keys_hold_exactly_the_training_options() -> None:
    from rankers.families.monobert import MonoBERTConfig

    key = MonoBERTConfig(batch_size=7, pretokenise=False).to_dict(Role.TRAINING)
    assert set(key) == EXPECTED["monobert"][Role.TRAINING]
    assert key == MonoBERTConfig().to_dict(Role.TRAINING)  # runtime options make no new model
    assert list(key) == [k for k in MonoBERTConfig().to_dict() if k in key]  # field order


def test_dtype_names_are_the_torch_mapping_keys() -> None:
    from rankers.compute.precision import DTYPES

    assert tuple(DTYPES) == DTYPE_NAMES


@pytest.mark.parametrize(
    ("name", "options", "message"),
    [
        ("crossjem", {"batch_queries": "0"}, "option batch_queries=0: must be >= 1"),
        ("crossjem", {"union_len": "0"}, "option union_len=0: must be >= 1 or auto"),
        (
            "crossjem",
            {"union_len": "long"},
            "option union_len='long': expected a number >= 1 or auto",
        ),
        ("crossjem", {"pad_tolerance": "-1"}, "option pad_tolerance=-1.0: must be >= 0 or none"),
        ("monobert", {"dropout": "1"}, "option dropout=1.0: must be in [0, 1)"),
        ("colbert", {"query_maxlen": "3"}, "option query_maxlen=3: must be >= 4"),
        ("rankt5", {"list_size": "1"}, "option list_size=1: must be >= 2 or none"),
        ("bm25", {"b": "2"}, "option b=2.0: must be between 0 and 1"),
        ("bm25", {"k1": "nan"}, "option k1=nan: must be >= 0"),
        (
            "monobert",
            {"dtype": "fp8"},
            "option dtype='fp8': expected one of auto, float32, bfloat16, float16, tf32, int8",
        ),
        (
            "crossjem",
            {"loss": "hinge"},
            "option loss='hinge': expected one of bce, ce, listnet, rpl, rpl-self, pl",
        ),
        (
            "dpr",
            {"similarity": "l2"},
            "option similarity='l2': expected one of cosine, dot or none",
        ),
    ],
)
def test_out_of_range_values_and_bad_choices_name_the_option(
    name: str, options: dict[str, str], message: str
) -> None:
    with pytest.raises(RankerError) as err:
        _config(name).from_options(options)
    assert str(err.value) == message


def test_none_and_boundary_values_are_valid() -> None:
    assert _config("crossjem").from_options({"pad_tolerance": "none", "union_len": "32"})
    assert _config("dpr").from_options({"similarity": "none", "warmup_ratio": "0"})
    assert _config("bm25").from_options({"k1": "0", "b": "1"})


def test_a_subclass_default_keeps_the_declaration() -> None:
    (loss,) = (o for o in _config("crossjem").describe_options() if o.name == "loss")
    assert (loss.default, loss.role, loss.range) == (
        "listnet",
        Role.TRAINING,
        "bce, ce, listnet, rpl, rpl-self, pl",
    )


def test_describe_options_gives_type_default_role_help_and_range() -> None:
    rows = {o.name: o for o in _config("crossjem").describe_options()}
    union = rows["union_len"]
    assert (union.type, union.default, union.role, union.range) == (
        "int | str",
        242,
        Role.TRAINING | Role.SCORE,
        ">= 1 or auto",
    )
    assert union.help.startswith("L_u: most item tokens per encoder row")
    assert rows["pad_tolerance"].range == ">= 0 or none"
    # precision: scoring's is runtime only (no retraining), training's is in the model's key
    assert rows["dtype"].role.label() == "runtime"
    assert rows["train_dtype"].role.label() == "training"


def test_bench_rankers_shows_role_range_and_help() -> None:
    result = CliRunner().invoke(app, ["rankers"])
    assert result.exit_code == 0, result.output
    (row,) = [line for line in result.output.splitlines() if "│ union_len " in line]
    for part in ("242", "training, score", ">= 1 or auto", "L_u: most item tokens"):
        assert part in row
    assert "crossjem (Joint ranking, trainable)" in result.output
    assert "firststage (First stage): no options" in result.output
    assert "[CLS] [Q] and [SEP]" in result.output  # help text is not read as rich markup


# -- the list-training options are declared once (ListTrainingConfig): every trainer checks alike
@pytest.mark.parametrize("ranker", ["monobert", "crossjem", "rankt5", "dpr"])
def test_warmup_ratio_is_range_checked_in_every_config(ranker: str) -> None:
    config = get_ranker_class(ranker).Config
    with pytest.raises(RankerError, match=r"option warmup_ratio=1\.5: must be in \[0, 1\)"):
        config.from_options({"warmup_ratio": "1.5"})


def test_shared_list_training_options_have_one_declaration() -> None:
    """dtype, train_dtype, warmup_ratio, loss, teacher, train_batch_queries and
    train_micro_items: one spec (role and valid values) in rankers.trainconfig.ListTrainingConfig,
    whatever default or help a ranker gives; the rankers without an int8 runtime take every
    scoring dtype but int8."""
    from rankers.base import DTYPE_NAMES
    from rankers.trainconfig import ListTrainingConfig

    def spec(config: type, name: str) -> tuple[object, ...]:
        (field,) = (f for f in dataclasses.fields(config) if f.name == name)
        s = option_spec(field)
        assert s is not None
        return (s.role, s.min, s.max, s.below, s.choices)

    shared = ("dtype", "train_dtype", "warmup_ratio", "loss", "teacher", "train_batch_queries")
    for name in (*shared, "train_micro_items"):
        for ranker in ("monobert", "crossjem"):
            assert spec(get_ranker_class(ranker).Config, name) == spec(ListTrainingConfig, name)
    rankt5 = get_ranker_class("rankt5").Config
    assert spec(rankt5, "train_micro_items") == spec(ListTrainingConfig, "train_micro_items")
    for ranker in ("dpr", "colbert", "rankt5"):
        config = get_ranker_class(ranker).Config
        assert spec(config, "train_dtype") == spec(ListTrainingConfig, "train_dtype")
        assert spec(config, "dtype")[:4] == spec(ListTrainingConfig, "dtype")[:4]
        assert spec(config, "dtype")[4] == DTYPE_NAMES
        with pytest.raises(RankerError, match=r"option dtype='int8': expected one of"):
            config.from_options({"dtype": "int8"})
