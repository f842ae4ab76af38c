"""The one list-level interface every ranker implements.

A ranker receives whole candidate lists (one or more queries) and returns one score per
candidate. Listwise rankers (CROSS-JEM) need a query's full list in one call, so the harness never
splits a list unless the ranker declares itself ``pointwise``. Everything a ranker's output depends
on lives in its :class:`RankerConfig`, which is recorded with every result and hashed for caching.
"""

from __future__ import annotations

import dataclasses
import enum
import logging
import types
import typing
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar, Generic, TypeVar

import numpy as np

from bench.data.model import CandidateList, RankingSplit
from bench.results.records import FAMILIES as FAMILIES  # re-exported: rankers.base.FAMILIES
from rankers.errors import RankerError as RankerError  # re-exported: raised by every ranker
from rankers.hooks import persistent
from rankers.io.persist import load_ranker, save_ranker

log = logging.getLogger(__name__)

# FAMILIES (display names, paper order) lives in the foundation layer, beside the record field
# it labels, so that tables can group rows without importing rankers; re-exported here.


class Role(enum.Flag):
    """What changing a ranker option changes. An option may have several roles (``Role.TRAINING |
    Role.SCORE``); each is read by the code that must treat the option differently, so an option
    is classified once, where it is declared (:func:`option`), not in a list per consumer.

    * ``TRAINING``: the trained weights can differ, so the option is part of the trained-model
      cache key (:func:`bench.execution.runner.fit_or_load`) and of a resumable checkpoint's key
      (:func:`rankers.fit.resume.checkpoint_key`): changing it trains anew.
    * ``SCORE``: it defines what a score means (model, token limits, template, similarity): a
      loaded checkpoint's saved value wins over the caller's, since its weights were trained
      for it.
    * ``RUNTIME``: at scoring time it changes only speed, precision or placement (batch sizes,
      pre-tokenising, the cast dtype, where the weights are read from): the caller's value wins
      over a loaded checkpoint's.

    Precision is two options: ``dtype`` (``RUNTIME``) is the precision scoring runs in, so a model
    trained once in float32 is scored in bfloat16 or int8 without training again; ``train_dtype``
    (``TRAINING``) is the autocast dtype of CUDA training and the precision of the dev scoring that
    selects the epoch (:func:`rankers.compute.precision.training_precision`).
    Encoder rankers (:class:`rankers.families.encoder.EncoderConfig`) adopt every saved option but
    the
    runtime ones, so that their config also says how a checkpoint was trained.
    """

    TRAINING = enum.auto()
    SCORE = enum.auto()
    RUNTIME = enum.auto()

    def label(self) -> str:
        """``"training, score"``: the roles' names in declaration order."""
        return ", ".join(str(r.name).lower() for r in Role if r in self)


#: shorthands for declaring options: ``role=TRAINING | SCORE``
TRAINING, SCORE, RUNTIME = Role.TRAINING, Role.SCORE, Role.RUNTIME


#: the values of every ``train_dtype`` option and of the ``dtype`` option of rankers that score in
#: torch only (rankers.compute.precision.DTYPES maps them to torch dtypes; kept here so that configs
#: validate without importing torch)
DTYPE_NAMES: tuple[str, ...] = ("auto", "float32", "bfloat16", "float16")
#: the scoring precisions of rankers whose scoring ``dtype`` also takes ``tf32`` (the rankers
#: ``bench latency`` compares on a GPU: monoBERT, CROSS-JEM, the sentence-transformers peer):
#: float32 weights with TF32 tensor-core matmuls (10-bit mantissa inputs, float32 accumulation),
#: a CUDA mode no CPU has (rankers.compute.precision.matmul_precision)
TORCH_SCORING_DTYPE_NAMES: tuple[str, ...] = (*DTYPE_NAMES, "tf32")
#: the scoring precisions of rankers that can also run on an int8 runtime (monoBERT, CROSS-JEM)
SCORING_DTYPE_NAMES: tuple[str, ...] = (*TORCH_SCORING_DTYPE_NAMES, "int8")

#: the key of an option's :class:`OptionSpec` in its dataclass field's metadata
_SPEC = "option"


class _Given:
    """The type of :data:`GIVEN`."""

    def __repr__(self) -> str:
        return "GIVEN"


#: in ``needs``: the other option must have a value, any value but None (``teacher_scores``
#: needs a ``teacher``)
GIVEN = _Given()
#: what an option needs of another: the values it must have, or :data:`GIVEN`
Allowed = tuple[Any, ...] | _Given
#: one declared dependency: (other option, what it must be)
Need = tuple[str, Allowed]


def _meets(actual: Any, allowed: Allowed) -> bool:
    """Whether another option's value ``actual`` is what a dependency asks for."""
    return actual is not None if isinstance(allowed, _Given) else actual in allowed


def _wanted(other: str, allowed: Allowed) -> str:
    """A dependency in words: ``order=hybrid or order=concat``, ``a value of teacher``."""
    if isinstance(allowed, _Given):
        return f"a value of {other}"
    return " or ".join(f"{other}={v}" for v in allowed)


@dataclasses.dataclass(frozen=True)
class OptionSpec:
    """What :func:`option` declares about a config field: its role, help and valid values.

    ``min`` and ``max`` are inclusive bounds, ``below`` an exclusive upper bound; ``choices`` the
    only values allowed. None (for an optional field) is always allowed: it means "the model's own
    setting" or "none", never a value to range-check."""

    role: Role
    help: str
    min: float | None = None
    max: float | None = None
    below: float | None = None
    choices: tuple[str, ...] | None = None
    #: where the option means something: other option -> the values it must have (or
    #: :data:`GIVEN`); a value other than the default elsewhere does nothing, so it is refused
    #: (:meth:`RankerConfig.option_problem`)
    needs: tuple[Need, ...] = ()
    #: False for an option added after results were keyed: at its default it is left out of
    #: :meth:`RankerConfig.to_dict`, so every key made before it existed stays the same
    keyed_at_default: bool = True
    #: what one value needs beyond :attr:`needs` (``dtype=int8`` runs on ``runtime=onnxruntime``)
    value_needs: tuple[tuple[Any, tuple[Need, ...]], ...] = ()

    def requirements(self, value: Any, default: Any) -> tuple[Need, ...]:
        """What ``value`` needs of the other options: nothing at the default; else
        :attr:`needs` and what :attr:`value_needs` declares for this value."""
        if value == default:
            return ()
        own = tuple(need for v, needs in self.value_needs if v == value for need in needs)
        return (*self.needs, *own)

    #: words allowed beside a numeric range (``union_len``: ``auto``)
    words: tuple[str, ...] = ()

    def unused(self, name: str, value: Any, default: Any, config: Any) -> str | None:
        """Why ``name=value`` does nothing in ``config`` (the first of its
        :meth:`requirements` that another option does not meet), else None; the default is
        always allowed. A setting that does nothing would still be another cache key: the same
        model trained again under it."""
        for other, allowed in self.requirements(value, default):
            actual = getattr(config, other)
            if not _meets(actual, allowed):
                wanted = _wanted(other, allowed)
                own = any(v == value for v, _ in self.value_needs)
                effect = "is not available with" if own else "has no effect under"
                return (
                    f"option {name}={value} {effect} {other}={actual} "
                    f"({name}={value} needs {wanted}); leave {name} at its default, {default}"
                )
        return None

    def problem(self, value: Any) -> str | None:
        """Why ``value`` is not valid (``must be >= 1``, ``expected one of a, b``), else None."""
        if self.choices is not None:
            return None if value in self.choices else f"expected one of {', '.join(self.choices)}"
        if isinstance(value, str) and self.words:
            return None if value in self.words else f"expected a number {self.range()}"
        # written so that NaN fails every bound
        if (
            (self.min is None or value >= self.min)
            and (self.max is None or value <= self.max)
            and (self.below is None or value < self.below)
        ):
            return None
        if self.min is not None and self.max is not None:
            return f"must be between {self.min:g} and {self.max:g}"
        return f"must be {self.range()}"

    def range(self) -> str:
        """The valid values in a few characters: ``>= 1``, ``[0, 1)``, ``auto, float32``."""
        if self.choices is not None:
            return ", ".join(self.choices)
        if self.words:
            return " or ".join((dataclasses.replace(self, words=()).range(), *self.words))
        if self.min is not None and (self.max is not None or self.below is not None):
            top, bracket = (self.max, "]") if self.max is not None else (self.below, ")")
            return f"in [{self.min:g}, {top:g}{bracket}"
        if self.min is not None:
            return f">= {self.min:g}"
        if self.max is not None:
            return f"<= {self.max:g}"
        return f"< {self.below:g}" if self.below is not None else ""


def option(
    default: Any = dataclasses.MISSING,
    *,
    role: Role,
    help: str,
    min: float | None = None,
    max: float | None = None,
    below: float | None = None,
    choices: Sequence[str] | None = None,
    default_factory: Callable[[], Any] | None = None,
    needs: Mapping[str, Sequence[Any] | _Given] | None = None,
    keyed_at_default: bool = True,
    value_needs: Mapping[Any, Mapping[str, Sequence[Any] | _Given]] | None = None,
    words: Sequence[str] = (),
) -> Any:
    """A :class:`RankerConfig` field with its role, one-line help and valid values declared once
    (in the manner of ir-measures' declared measure parameters). Every consumer reads them from
    here: the cache keys and checkpoint loading (:meth:`RankerConfig.fields_with_role`),
    validation (:meth:`RankerConfig.__post_init__`) and ``bench rankers``
    (:meth:`RankerConfig.describe_options`). ``needs`` declares where a value other than the
    default means something (``needs={"order": ("hybrid",)}``; :data:`GIVEN`: any value but
    None): elsewhere it is refused before any work, as a value out of range is; ``value_needs``
    the same for one value (``{"int8": {"runtime": ("onnxruntime",)}}``). A value whose needs no
    value this ranker takes can meet is not one of its choices (:meth:`RankerConfig.runnable`).
    ``keyed_at_default=False`` (for an option added to a ranker whose results are already keyed):
    the option is left out of the config's cache keys, labels and saved config while it has its
    default, so adding it changes no existing key.
    ``words``: values allowed beside the numeric range (a field typed ``int | str``)."""
    if max is not None and below is not None:
        raise ValueError("option(): give max (inclusive) or below (exclusive), not both")
    spec = OptionSpec(
        role,
        help,
        min,
        max,
        below,
        tuple(choices) if choices is not None else None,
        _need_tuple(needs),
        keyed_at_default,
        tuple((v, _need_tuple(n)) for v, n in (value_needs or {}).items()),
        tuple(words),
    )
    metadata = {_SPEC: spec}
    if default_factory is not None:
        return dataclasses.field(default_factory=default_factory, metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


def _need_tuple(needs: Mapping[str, Sequence[Any] | _Given] | None) -> tuple[Need, ...]:
    """``needs`` as :attr:`OptionSpec.needs` holds it (hashable, in declaration order)."""
    return tuple((k, v if isinstance(v, _Given) else tuple(v)) for k, v in (needs or {}).items())


def inherit_option(
    config: type[RankerConfig],
    name: str,
    default: Any,
    *,
    help: str | None = None,
    choices: tuple[str, ...] | None = None,
    value_needs: Mapping[Any, Mapping[str, Sequence[Any] | _Given]] | None = None,
) -> Any:
    """Option ``name`` of ``config`` with another default (and, with ``help``, a help text that
    says what it means for this ranker; with ``choices``, fewer valid values; with
    ``value_needs``, what some values need of other options), for a subclass that keeps the
    option's role and range (a plain ``name: str = "x"`` would drop the declared role, help and
    range)."""
    (field,) = (f for f in dataclasses.fields(config) if f.name == name)
    metadata: Mapping[str, Any] = field.metadata
    needed = tuple((v, _need_tuple(n)) for v, n in value_needs.items()) if value_needs else None
    changes = {
        k: v
        for k, v in (("help", help), ("choices", choices), ("value_needs", needed))
        if v is not None
    }
    if changes:
        metadata = {**metadata, _SPEC: dataclasses.replace(metadata[_SPEC], **changes)}
    return dataclasses.field(default=default, metadata=metadata)


def option_spec(field: dataclasses.Field[Any]) -> OptionSpec | None:
    """The declaration of a field made with :func:`option` (None for a plain field)."""
    return field.metadata.get(_SPEC)


@dataclasses.dataclass(frozen=True)
class OptionInfo:
    """One row of ``bench rankers``: an option as :meth:`RankerConfig.describe_options` shows it."""

    name: str
    type: str
    default: Any
    role: Role | None
    help: str
    #: the valid values (``>= 1``, ``in [0, 1)``, ``auto, float32``, ``... or none``); "" for any
    range: str


#: a ranker's config class: ``class BM25Ranker(Ranker[BM25Config])`` types ``self.config``
C = TypeVar("C", bound="RankerConfig")


@dataclasses.dataclass
class RankerConfig:
    """Base for per-ranker settings. Subclasses add fields with :func:`option`, declaring each
    one's role, help and valid values; a subclass adds a ``__post_init__`` (calling this one
    first) only for checks across fields."""

    def __post_init__(self) -> None:
        """Check every declared range and choice, so a bad value stops before any work (and a
        checkpoint's config is checked as it is restored)."""
        optional = _optional_fields(type(self))
        for f in dataclasses.fields(self):
            spec = option_spec(f)
            value = getattr(self, f.name)
            if spec is None or (value is None and f.name in optional):
                continue
            problem = spec.problem(value)
            if problem:
                none = " or none" if f.name in optional else ""
                raise RankerError(f"option {f.name}={value!r}: {problem}{none}")
            problem = type(self).unrunnable(f.name, value)
            if problem:
                raise RankerError(problem)
        for f in dataclasses.fields(self):
            spec = option_spec(f)
            if spec is not None and (spec.needs or spec.value_needs):
                unused = spec.unused(f.name, getattr(self, f.name), f.default, self)
                if unused:
                    raise RankerError(unused)

    @classmethod
    def unmet(cls, name: str, value: Any, seen: frozenset[str] = frozenset()) -> Need | None:
        """The first declared need of ``name=value`` that no value this config takes can meet
        (``onnx_graph=plain`` needs ``runtime=onnxruntime``, which the Set-Encoder's ``runtime``
        does not take), followed through the other options' own needs; None: some setting of
        the other options runs it. :data:`ANY_OTHER` stands for any value but the default."""
        declared = _declared(cls)
        spec, default = declared[name]
        for other, allowed in spec.requirements(value, default):
            if other not in declared:
                return other, allowed
            choices = declared[other][0].choices
            if isinstance(allowed, _Given) or choices is None or other in seen:
                continue
            if not any(
                v in choices and cls.unmet(other, v, seen | {name}) is None for v in allowed
            ):
                return other, allowed
        return None

    @classmethod
    def runnable(cls, name: str) -> tuple[str, ...] | None:
        """The choices of option ``name`` that this config can run (its declared choices less
        those :meth:`unmet` refuses); None for an option without choices."""
        choices = _declared(cls)[name][0].choices
        return None if choices is None else tuple(c for c in choices if cls.unmet(name, c) is None)

    @classmethod
    def settable(cls, name: str) -> bool:
        """Whether option ``name`` can take any value but its default in this config (an
        option of a runtime the ranker lacks cannot): ``bench rankers`` lists only these."""
        choices = cls.runnable(name)
        if choices is not None:
            return len(choices) > 1
        return cls.unmet(name, ANY_OTHER) is None

    @classmethod
    def unrunnable(cls, name: str, value: Any) -> str | None:
        """Why ``name=value`` cannot run in this config whatever the other options (a need no
        value they take meets), naming the option, the need and what the other option takes;
        else None."""
        if name not in _declared(cls):
            return None
        need = cls.unmet(name, value)
        if need is None:
            return None
        other, allowed = need
        declared = _declared(cls)
        if other in declared:
            takes = cls.runnable(other)
            why = f"{other} here takes only {', '.join(map(str, takes or ()))}"
        else:
            why = f"this ranker has no option {other}"
        reason = f"{name}={value} needs {_wanted(other, allowed)}, and {why}"
        choices = cls.runnable(name)
        if choices is not None and len(choices) > 1:
            return f"option {name}={value!r}: expected one of {', '.join(choices)} ({reason})"
        default = declared[name][1]
        return (
            f"option {name}={value!r} does nothing for this ranker ({reason}); leave {name} at "
            f"its default, {default}"
        )

    @classmethod
    def from_options(cls: type[C], options: Mapping[str, Any] | None = None) -> C:
        """Build from ``key -> value`` options; CLI strings are converted by field type."""
        options = dict(options or {})
        fields = {f.name: f for f in dataclasses.fields(cls)}
        unknown = sorted(set(options) - set(fields))
        if unknown:
            raise RankerError(
                f"unknown option(s) {', '.join(unknown)} for {cls.__qualname__}; "
                f"known: {', '.join(sorted(fields)) or '(none)'}"
            )
        hints = typing.get_type_hints(cls)
        values = {k: _convert(k, v, hints[k]) for k, v in options.items()}
        return cls(**values)

    def to_dict(self, role: Role | None = None) -> dict[str, Any]:
        """The options and their values (with ``role``: only the options that have it, e.g. the
        config part of a trained-model key), in field order."""
        unkeyed = self.unkeyed_defaults()
        values = {
            k: v for k, v in dataclasses.asdict(self).items() if k not in unkeyed or v != unkeyed[k]
        }
        if role is None:
            return values
        keep = self.fields_with_role(role)
        return {k: v for k, v in values.items() if k in keep}

    @classmethod
    def unkeyed_defaults(cls) -> dict[str, Any]:
        """The options declared ``keyed_at_default=False`` and their defaults: :meth:`to_dict`
        leaves them out at these values, and a saved config without them had these values."""
        return {
            f.name: f.default
            for f in dataclasses.fields(cls)
            if (spec := option_spec(f)) is not None and not spec.keyed_at_default
        }

    @classmethod
    def fields_with_role(cls, role: Role) -> frozenset[str]:
        """The options whose declared roles include ``role``: ``Role.TRAINING`` gives what the
        trained-model keys hold, ``Role.SCORE`` what a loaded checkpoint restores."""
        return frozenset(
            f.name
            for f in dataclasses.fields(cls)
            if (spec := option_spec(f)) is not None and role in spec.role
        )

    @classmethod
    def runtime_fields(cls) -> frozenset[str]:
        """The ``RUNTIME`` options: a loaded checkpoint keeps the caller's values of these
        (:func:`rankers.io.persist.restored_config`)."""
        return cls.fields_with_role(Role.RUNTIME)

    @classmethod
    def describe_options(cls) -> list[OptionInfo]:
        """Every option with its type, default, role, help and valid values, in field order:
        only the values this config can run (:meth:`runnable`), and no option that can take
        none but its default (:meth:`settable`)."""
        optional = _optional_fields(cls)
        rows = []
        for f in dataclasses.fields(cls):
            spec = option_spec(f)
            if spec is not None and not cls.settable(f.name):
                continue  # no other value runs here (an option of a runtime the ranker lacks)
            if f.default_factory is not dataclasses.MISSING:
                default = f.default_factory()
            else:
                default = f.default
            valid = spec.range() if spec is not None else ""
            choices = cls.runnable(f.name) if spec is not None else None
            if choices is not None:
                valid = ", ".join(choices)
            if valid and f.name in optional:
                valid += " or none"
            rows.append(
                OptionInfo(
                    name=f.name,
                    type=f.type if isinstance(f.type, str) else getattr(f.type, "__name__", "?"),
                    default=default,
                    role=spec.role if spec is not None else None,
                    help=spec.help if spec is not None else "",
                    range=valid,
                )
            )
        return rows


@dataclasses.dataclass
class TrainingConfig(RankerConfig):
    """The options every trainable ranker's config shares (its ``Config`` subclasses this): what
    :meth:`rankers.fit.loop.LoopPlan.of` reads for the one training loop. A ranker gives its own
    default or help with :func:`inherit_option`. Being inherited, these fields come first in a
    subclass's field order."""

    lr: float = option(1e-4, role=TRAINING, help="peak AdamW learning rate")
    epochs: int = option(1, role=TRAINING, min=1, help="passes over the training data")
    weight_decay: float = option(0.01, role=TRAINING, help="AdamW weight decay")
    max_grad_norm: float = option(1.0, role=TRAINING, help="gradient clipping norm")
    seed: int = option(0, role=TRAINING, help="initialisation of new weights and training order")
    min_steps: int = option(
        0,
        role=TRAINING,
        min=0,
        help="at least this many optimizer steps: small train sets get more epochs (0: off)",
    )
    patience: int = option(
        0,
        role=TRAINING,
        min=0,
        help="stop after N epochs without a better dev AP@10 (0: run every epoch)",
    )
    checkpoint_steps: int = option(
        0,
        role=RUNTIME,
        min=0,
        help="also save a resumable checkpoint every N steps (0: at epoch ends only; needs a "
        "work directory)",
    )


_OPTIONAL: dict[type[RankerConfig], frozenset[str]] = {}
_DECLARED: dict[type[RankerConfig], dict[str, tuple[OptionSpec, Any]]] = {}


class _AnyOther:
    """The type of :data:`ANY_OTHER`."""

    def __eq__(self, other: object) -> bool:
        return other is self

    def __hash__(self) -> int:
        return id(self)

    def __repr__(self) -> str:
        return "ANY_OTHER"


#: for :meth:`RankerConfig.unmet`: a value equal to no default and to no value of ``value_needs``
ANY_OTHER = _AnyOther()


def _declared(cls: type[RankerConfig]) -> dict[str, tuple[OptionSpec, Any]]:
    """Every declared option of ``cls``: name -> (spec, default); computed once per class."""
    if cls not in _DECLARED:
        _DECLARED[cls] = {
            f.name: (spec, f.default)
            for f in dataclasses.fields(cls)
            if (spec := option_spec(f)) is not None
        }
    return _DECLARED[cls]


def _optional_fields(cls: type[RankerConfig]) -> frozenset[str]:
    """The fields whose type admits None (then None needs no range check); computed once."""
    if cls not in _OPTIONAL:
        hints = typing.get_type_hints(cls)
        _OPTIONAL[cls] = frozenset(
            name for name, hint in hints.items() if type(None) in typing.get_args(hint)
        )
    return _OPTIONAL[cls]


def _convert(name: str, value: Any, hint: Any) -> Any:
    """Convert a CLI string to the field's type (bool, int, float, str, optional, list)."""
    if not isinstance(value, str):
        return value
    origin = typing.get_origin(hint)
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    if origin in (typing.Union, types.UnionType):
        if type(None) in typing.get_args(hint) and value.lower() in ("none", "null", ""):
            return None
        for other in args[:-1]:  # int | str: a number where it reads as one, else the word
            try:
                return _convert(name, value, other)
            except RankerError:
                continue
        hint = args[-1]
        origin = typing.get_origin(hint)
    try:
        if hint is bool:
            if value.lower() in ("1", "true", "yes", "on"):
                return True
            if value.lower() in ("0", "false", "no", "off"):
                return False
            raise ValueError(value)
        if hint is int:
            return int(value)
        if hint is float:
            return float(value)
        if origin in (list, tuple):
            return [_convert(name, v.strip(), typing.get_args(hint)[0]) for v in value.split(",")]
    except ValueError as exc:
        expected = getattr(hint, "__name__", hint)
        raise RankerError(f"option {name}={value!r}: expected {expected}") from exc
    return value


class Ranker(ABC, Generic[C]):
    """Scores candidate lists. Subclasses set ``name``, ``family`` and ``Config``, give the config
    class as the type parameter, so that :attr:`config` (alias :attr:`cfg`) has its type, and
    implement :meth:`score`. That is all a ranker must give; the optional parts (latency parts,
    input checks, training, export, persistence) are hook groups with defaults
    (:mod:`rankers.hooks`), which a family takes by naming the protocol among its bases."""

    name: ClassVar[str]
    family: ClassVar[str]
    #: the options class; a ranker without options keeps this default (a class-level default
    #: of a type-variable attribute cannot be typed, hence the ignore)
    Config: type[C] = RankerConfig  # type: ignore[assignment]
    #: True when scores of one candidate never depend on the others (lists may then be split).
    pointwise: ClassVar[bool] = False
    #: True when ``fit`` (:class:`rankers.hooks.Fits`) trains something.
    trainable: ClassVar[bool] = False
    #: True when ``fit`` runs on every process of a launch (DDP, each process a slice of
    #: every batch); False: it trains in one process, so a multi-process command trains it
    #: before the processes start (``bench run --processes``) or refuses (under a launcher).
    distributed_training: ClassVar[bool] = False
    #: what ``prepare_scoring`` (:class:`rankers.hooks.LatencyParts`) does on the host before
    #: the model runs (tokenisation, packing, copies to the device); None: no separate host
    #: step, so latency reports only whole ``score()`` calls for this ranker.
    host_step: ClassVar[str | None] = None
    #: another ranker whose trained checkpoint this one scores with in ``bench latency`` (the
    #: sentence-transformers peer times monoBERT's encoder); None: its own checkpoint only
    borrows_checkpoint_of: ClassVar[str | None] = None
    #: why ``bench latency`` cannot time this ranker (it computes nothing, or only on lists of
    #: its own); None: it can. Said before any work, in place of an error from inside a timing
    untimed: ClassVar[str | None] = None
    #: option values ``bench latency`` times untrained weights with where ``--set`` gives none
    #: (over the settings file, whose values may serve a trained model's accuracy):
    #: CROSS-JEM's ``union_len=auto``; a value chosen from the lists is recorded, not the word
    latency_defaults: ClassVar[Mapping[str, Any]] = {}

    def __init__(self, config: C | None = None, device: str = "cpu") -> None:
        self.config: C = config if config is not None else self.Config()
        self.device = device
        #: where ``fit`` may keep resumable checkpoints (set by the runner; None: nowhere)
        self.work_dir: Path | None = None

    @property
    def cfg(self) -> C:
        """:attr:`config`, typed as this ranker's config class."""
        return self.config

    # -- scoring -------------------------------------------------------------------------------
    def index(self, split: RankingSplit) -> None:  # noqa: B027 - optional hook
        """Called once before scoring a split (collection statistics, item embeddings...)."""

    @abstractmethod
    def score(self, lists: Sequence[CandidateList]) -> list[np.ndarray]:
        """One float array per list, aligned with ``list.candidates``; higher is more relevant."""

    def score_texts(self, query: str, items: Sequence[str]) -> np.ndarray:
        """:meth:`score` of one list given as texts (item ids are their positions): the call for
        a user holding a query and its candidates, outside any dataset."""
        from bench.data.model import Candidate, Query

        candidates = tuple(Candidate(str(i), text) for i, text in enumerate(items))
        return self.score([CandidateList(Query("0", query), candidates)])[0]

    # -- persistence (one helper for every ranker: rankers.io.persist) ----------------------------
    def save(self, path: Path) -> None:
        """Persist what :meth:`load` needs: weights (the hook group
        :class:`rankers.hooks.Persistent`), ``ranker.json`` and the manifest, written
        atomically by :func:`rankers.io.persist.save_ranker`."""
        save_ranker(self, Path(path), persistent(self))

    def load(self, path: Path) -> None:
        """Restore a :meth:`save` folder into this (already configured) ranker by the one restore
        rule of :func:`rankers.io.persist.load_ranker`, then reads the weights."""
        load_ranker(self, Path(path), persistent(self))

    def describe(self) -> dict[str, Any]:
        """Name, family and config; model-backed rankers add model id and weight hash."""
        return {"name": self.name, "family": self.family, "config": self.config.to_dict()}
