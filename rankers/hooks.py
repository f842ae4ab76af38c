"""The optional parts of a ranker, in groups, each a protocol with its defaults.

A ranker must give only what :class:`rankers.base.Ranker` requires (``name``, ``family``,
``Config`` and ``score``). Everything else the harness may ask of it comes in groups, declared
here as :func:`~typing.runtime_checkable` protocols whose bodies are the defaults:

* :class:`LatencyParts`: how ``bench latency`` times it (host step and model step apart, the
  encoder passes the time model predicts, the configurations timed, the dtype and weights named);
* :class:`InputChecks`: what planning and records learn of its inputs (the model's own limits,
  files the scores are read from, what it cuts);
* :class:`Fits`: training (``fit``, which weights start untrained, the largest training step);
* :class:`Exportable`: a format another library loads (``bench export``);
* :class:`Persistent`: how its weights are saved and read (the rest of a save is the same for
  every ranker: :mod:`rankers.io.persist`).

A ranker takes a group's defaults by naming the protocol among its bases (the built-in families
do) and overrides what it needs; mypy then checks its signatures against the group. The harness
never asks the ranker directly: it asks :func:`latency_parts`, :func:`input_checks`,
:func:`fits` or :func:`persistent` (:func:`view_as` for any group), which give the ranker itself
when it implements the whole group, else a view of it that adds the defaults to the methods it
does define. So a ranker written against an older layout, with some of these methods and without
the protocols, keeps working unchanged.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, runtime_checkable

import numpy as np

from bench.data.model import CandidateList, RankingSplit
from rankers.errors import RankerError
from rankers.io.persist import WEIGHTS_FILE, TrainsAModule, read_module, write_module

if TYPE_CHECKING:
    from bench.core.trained import TrainingSummary
    from rankers.io.export import Exported


@dataclasses.dataclass(frozen=True)
class LatencyVariant:
    """One configuration of a ranker that ``bench latency`` times: its row label, the option
    overrides that make it, and the table column it competes in (the fastest row of a column is
    the column's figure, e.g. monoBERT's best batch size)."""

    label: str
    options: dict[str, Any]
    column: str


@dataclasses.dataclass(frozen=True)
class EncoderCall:
    """One transformer encoder forward pass a scoring call makes, as shapes only: ``rows``
    sequences padded to ``width`` tokens through ``layers`` layers. ``masked``: the attention
    gets a padding mask (some row is shorter than ``width``), which changes the kernel's speed;
    ``attention``: which attention implementation runs (a name the latency cost model
    calibrates, :data:`bench.latency.costmodel.probes.ATTENTIONS`). The latency cost model predicts
    time from these, so it times exactly the batches the ranker runs."""

    rows: int
    width: int
    layers: int
    masked: bool
    attention: str = "sdpa"


@dataclasses.dataclass(frozen=True)
class EncoderRun:
    """How a ranker runs its transformer encoder, as the latency cost model reads it: the
    encoder's Hugging Face ``config`` (its sizes), the ``dtype`` it computes in (``float32``,
    ``bfloat16``, ``float16``, ``int8``: resolved, never ``auto``), the ``runtime`` that runs it,
    that runtime's ``options`` that change its kernels (ONNX Runtime: ``graph``, ``int8_recipe``)
    and the ``attention`` its calls run (:attr:`EncoderCall.attention`)."""

    config: Any
    dtype: str
    runtime: str = "torch"
    options: dict[str, Any] = dataclasses.field(default_factory=dict)
    attention: str = "sdpa"


@dataclasses.dataclass(frozen=True)
class RowLengths:
    """The encoder rows a ranker packs one list into, as token counts for the paper's FLOP model:
    each row's length, and in a layout whose first layers run other rows (CROSS-JEM's merged
    layouts) each of those rows' length and how many layers run them."""

    rows: tuple[int, ...]
    first_rows: tuple[int, ...] = ()
    first_layers: int = 0


@runtime_checkable
class LatencyParts(Protocol):
    """How ``bench latency`` times a ranker. ``prepare_scoring``/``score_prepared`` split
    ``score()`` where the host step (:attr:`rankers.base.Ranker.host_step`) ends, so that
    ``score(lists) == score_prepared(prepare_scoring(lists))`` always holds."""

    name: ClassVar[str]
    config: Any
    device: str

    def score(self, lists: Sequence[CandidateList]) -> list[np.ndarray]: ...

    def prepare_scoring(self, lists: Sequence[CandidateList]) -> Any:
        """The host-side half of ``score``: everything before the model runs. Default: nothing
        to prepare."""
        return lists

    def score_prepared(self, prepared: Any) -> list[np.ndarray]:
        """The model half of ``score``, on what :meth:`prepare_scoring` returned."""
        return self.score(prepared)

    def encoder_calls(self, prepared: Any) -> list[EncoderCall] | None:
        """The encoder forward passes :meth:`score_prepared` makes on ``prepared`` (the latency
        cost model predicts their time); None: the ranker runs no transformer encoder the model
        knows, so no time is predicted for it."""
        return None

    def encoder_run(self) -> EncoderRun | None:
        """How the encoder :meth:`encoder_calls` declares runs (runtime, precision, sizes), for
        the latency cost model's kernel rates; None: no transformer encoder the model knows."""
        return None

    def cost_model_settings(self) -> dict[str, Any] | None:
        """The options the paper's FLOP model reads of this ranker (``model``,
        ``max_query_len``, ``max_item_len``, ``union_len`` and its row layout), recorded beside
        the token statistics; None: the model is not about this ranker."""
        return None

    def chosen_options(self, lists: Sequence[CandidateList]) -> dict[str, Any]:
        """Options this ranker's config leaves to be chosen from the lists it will score
        (CROSS-JEM's ``union_len=auto``), with their values chosen for ``lists``; ``bench
        latency`` times and records each N with them. Default: nothing to choose."""
        return {}

    def row_lengths(
        self, tokenizer: Any, query: Sequence[int], items: Sequence[Sequence[int]]
    ) -> RowLengths | None:
        """The rows this ranker packs the list of token ids ``query`` and ``items`` into (the
        paper's FLOP model counts them); None: not a ranker the model is about."""
        return None

    def latency_variants(self, batch_sizes: Sequence[int] | None = None) -> list[LatencyVariant]:
        """The configurations ``bench latency`` times. ``batch_sizes``: those asked for this
        ranker (``--batch-sizes``). Default: one row per batch size when the config has
        ``batch_size``, else one row."""
        fields = {f.name for f in dataclasses.fields(self.config)}
        if batch_sizes and "batch_size" in fields:
            return [
                LatencyVariant(f"{self.name} (batch_size={bs})", {"batch_size": bs}, self.name)
                for bs in dict.fromkeys(batch_sizes)
            ]
        return [LatencyVariant(self.name, {}, self.name)]

    def scoring_mode(self) -> str:
        """``pre-tokenised`` when ``index`` tokenised the items so that scoring only tokenises
        the query (as a production ranker holds its items), else ``end-to-end``."""
        return "end-to-end"

    def compute_dtype(self) -> str:
        """The dtype the scoring computation runs in: a config's ``dtype`` option as latency
        records name it (:func:`rankers.compute.precision.dtype_label`), 'n/a' without one."""
        dtype = getattr(self.config, "dtype", None)
        if dtype is None:
            return "n/a"
        from rankers.compute.precision import dtype_label

        return dtype_label(str(dtype), self.device)

    def weights_note(self, checkpoint: str | None) -> str:
        """How trained the scoring weights are, for latency records (timing does not depend on
        it, but a reader must know what was timed)."""
        return f"trained ({checkpoint})" if checkpoint else "n/a"

    def warmup(self, lists: Sequence[CandidateList]) -> None:
        """Scoring calls whose time is not recorded (lazy init, kernels, caches)."""
        for cl in lists:
            self.score([cl])


@runtime_checkable
class InputChecks(Protocol):
    """What planning and result records learn of a ranker's inputs."""

    def check_model(self) -> None:
        """Check the options against the model's own config (its layer count, its positions),
        read without loading weights: called while planning, so a value the model cannot take
        stops the command and ``--plan`` before any work. Default: nothing to check."""

    def input_fingerprint(self) -> dict[str, Any] | None:
        """What the scores depend on beyond the options, as checksums (a run file's SHA-256):
        part of the scoring key, so a changed input is scored anew. None: nothing."""
        return None

    def input_files(self) -> dict[str, str]:
        """The files the scores are read from (absolute path -> SHA-256 of the bytes read), kept
        in the result record so that readers count it current only while each file still has
        those bytes. Empty: the scores depend on no file of the user's."""
        return {}

    def input_report(self, lists: Sequence[CandidateList]) -> dict[str, Any]:
        """What the ranker does to ``lists`` before its model sees them (text cut to a length
        limit, lists split over several encoder rows), with counts, so a run never changes its
        inputs silently. Default: nothing (every text read whole)."""
        return {}


@runtime_checkable
class Fits(Protocol):
    """Training: a ranker with ``trainable = True`` implements :meth:`fit` (through the one
    loop, :func:`rankers.fit.loop.train_loop`)."""

    name: ClassVar[str]

    def fit(self, train: RankingSplit, dev: RankingSplit | None = None) -> TrainingSummary:
        """Train on ``train``, select on ``dev``; returns a summary recorded with results."""
        raise RankerError(f"ranker {self.name!r} is not trainable")

    def untrained_weights(self) -> str | None:
        """Which weights would start untrained (a fresh head, projection, cross-attention), so
        scores mean nothing yet and `bench run` trains first; None when the model can score as
        configured. Decided from the configuration, without loading the model."""
        return None

    def training_step_shape(self, list_lengths: Sequence[int]) -> tuple[int, int] | None:
        """The largest training step on train lists of ``list_lengths`` items, as (encoder
        sequences, tokens each, an upper bound) for the step-memory estimate of the plan
        (:mod:`bench.execution.memory`); None: not an encoder trained on whole lists."""
        return None


@runtime_checkable
class Exportable(Protocol):
    """A ranker whose model ``bench export`` writes in a format another library loads (a
    sentence-transformers ``CrossEncoder``, a ``SentenceTransformer``...)."""

    def export(self, folder: Any) -> Exported:
        """Write the model into the empty ``folder``; returns how to load it."""
        ...


@runtime_checkable
class Persistent(Protocol):
    """How a ranker's weights are written and read (the hook group of persistence; the rest of a
    save is the same for every ranker). The bodies are the defaults: a :class:`TrainsAModule`
    ranker's state dict and tokenizer, nothing for a stateless one. A ranker with its own format
    (a Hugging Face folder) overrides :meth:`write_weights` and :meth:`read_weights`, never
    ``save``/``load``."""

    name: ClassVar[str]

    def saved_parts(self) -> tuple[str, ...]:
        """The files and folders a saved folder must hold besides ``ranker.json``."""
        return (WEIGHTS_FILE,) if isinstance(self, TrainsAModule) else ()

    def write_weights(self, folder: Path) -> None:
        """Write the weights into ``folder`` (default: :func:`write_module`)."""
        if isinstance(self, TrainsAModule):
            write_module(self, folder)

    def read_weights(self, folder: Path, meta: dict[str, Any]) -> None:
        """Read what :meth:`write_weights` wrote (the config is restored already); ``meta`` is
        the folder's ``ranker.json``."""
        if isinstance(self, TrainsAModule):
            read_module(self, folder)

    def restored_options(self, meta: dict[str, Any], folder: Path) -> dict[str, Any]:
        """Options a loaded folder sets beyond its saved config (e.g. ``model`` pointing into
        the folder): applied after the restore rule. Default: none."""
        return {}


class _View:
    """A ranker seen through one hook group: the methods the ranker defines, then the group's
    defaults (the protocol's bodies, which the view class inherits); any other attribute
    (``config``, ``name``, ``score``...) is the ranker's."""

    def __init__(self, ranker: object, group: type) -> None:
        self.__dict__["_ranker"] = ranker
        # the protocol's own stub of ``score`` would shadow the ranker's
        if callable(score := getattr(ranker, "score", None)):
            self.__dict__["score"] = score
        for member in _members(group):
            if callable(getattr(type(ranker), member, None)):
                self.__dict__[member] = getattr(ranker, member)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.__dict__["_ranker"], name)


def _members(group: type) -> tuple[str, ...]:
    """The methods a hook group declares (its public callables, the shared ``score`` aside)."""
    return tuple(
        name
        for name, value in vars(group).items()
        if callable(value) and not name.startswith("_") and name != "score"
    )


@functools.cache
def _view_class(group: type) -> type:
    return type(f"{group.__name__}View", (_View, group), {})


def view_as(ranker: object, group: Any) -> Any:
    """``ranker`` as hook group ``group`` (a protocol of this module): the ranker itself when it
    implements the whole group, else a view that adds the group's defaults to the methods it does
    define. Ask once per ranker and task, outside anything timed (a protocol check reads every
    member)."""
    if isinstance(ranker, group):
        return ranker
    return _view_class(group)(ranker, group)


def latency_parts(ranker: object) -> LatencyParts:
    """``ranker`` as :class:`LatencyParts`."""
    parts: LatencyParts = view_as(ranker, LatencyParts)
    return parts


def input_checks(ranker: object) -> InputChecks:
    """``ranker`` as :class:`InputChecks`."""
    checks: InputChecks = view_as(ranker, InputChecks)
    return checks


def fits(ranker: object) -> Fits:
    """``ranker`` as :class:`Fits`."""
    fitting: Fits = view_as(ranker, Fits)
    return fitting


def persistent(ranker: object) -> Persistent:
    """``ranker`` as :class:`Persistent`."""
    weights: Persistent = view_as(ranker, Persistent)
    return weights
