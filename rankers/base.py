"""The one list-level interface every ranker implements.

A ranker receives whole candidate lists (one or more queries) and returns one score per
candidate. Listwise rankers (CROSS-JEM) need a query's full list in one call, so the harness never
splits a list unless the ranker declares itself ``pointwise``. Everything a ranker's output depends
on lives in its :class:`RankerConfig`, which is recorded with every result and hashed for caching.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import types
import typing
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from bench.data.model import CandidateList, RankingSplit

log = logging.getLogger(__name__)

#: Families in the order of the paper's main table.
FAMILIES: dict[str, str] = {
    "firststage": "First stage",
    "sparse": "Sparse",
    "early": "Early interaction",
    "late": "Late interaction",
    "dual": "Dual encoders",
    "seq2seq": "Seq2Seq",
    "joint": "Joint ranking",
}


class RankerError(RuntimeError):
    """A ranker cannot do what was asked (bad option, missing checkpoint, untrainable...)."""


#: the description a ranker's save() folder carries (name, family, config, provenance)
RANKER_FILE = "ranker.json"


def read_saved(path: Path, name: str, *parts: str) -> dict[str, Any]:
    """The ``ranker.json`` of a save() folder, after checking it holds ``parts`` and was saved by
    ranker ``name``: loading another ranker's folder fails with a message naming both. A
    truncated weights file fails here too, naming the file (not deep inside safetensors)."""
    from bench.cache import safetensors_problem

    path = Path(path)
    meta_file = path / RANKER_FILE
    missing = [p for p in (RANKER_FILE, *parts) if not (path / p).exists()]
    if missing:
        raise RankerError(f"{path}: not a {name} checkpoint (missing {', '.join(missing)})")
    damaged = safetensors_problem(path)
    if damaged:
        raise RankerError(f"{path}: damaged {name} checkpoint: {damaged}")
    try:
        meta = json.loads(meta_file.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise RankerError(f"{meta_file}: not valid JSON ({exc})") from exc
    if meta.get("name") != name:
        raise RankerError(f"{meta_file}: saved by ranker {meta.get('name')!r}, not {name!r}")
    return meta


@dataclasses.dataclass
class RankerConfig:
    """Base for per-ranker settings. Subclasses add fields with defaults."""

    @classmethod
    def from_options(cls, options: Mapping[str, Any] | None = None) -> RankerConfig:
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

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def _convert(name: str, value: Any, hint: Any) -> Any:
    """Convert a CLI string to the field's type (bool, int, float, str, optional, list)."""
    if not isinstance(value, str):
        return value
    origin = typing.get_origin(hint)
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    if origin in (typing.Union, types.UnionType):
        if value.lower() in ("none", "null", ""):
            return None
        hint = args[0]
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


@dataclasses.dataclass(frozen=True)
class LatencyVariant:
    """One configuration of a ranker that ``bench latency`` times: its row label, the option
    overrides that make it, and the table column it competes in (the fastest row of a column is
    the column's figure, e.g. monoBERT's best batch size)."""

    label: str
    options: dict[str, Any]
    column: str


class Ranker(ABC):
    """Scores candidate lists. Subclasses set ``name``, ``family`` and ``Config``."""

    name: ClassVar[str]
    family: ClassVar[str]
    Config: ClassVar[type[RankerConfig]] = RankerConfig
    #: True when scores of one candidate never depend on the others (lists may then be split).
    pointwise: ClassVar[bool] = False
    #: True when :meth:`fit` trains something.
    trainable: ClassVar[bool] = False
    #: what :meth:`prepare_scoring` does on the host before the model runs (tokenisation,
    #: packing, copies to the device); None: no separate host step, so latency reports only
    #: whole ``score()`` calls for this ranker.
    host_step: ClassVar[str | None] = None
    #: another ranker whose trained checkpoint this one scores with in ``bench latency`` (the
    #: sentence-transformers peer times monoBERT's encoder); None: its own checkpoint only
    borrows_checkpoint_of: ClassVar[str | None] = None

    def __init__(self, config: RankerConfig | None = None, device: str = "cpu") -> None:
        self.config = config if config is not None else self.Config()
        self.device = device
        #: where :meth:`fit` may keep resumable checkpoints (set by the runner; None: nowhere)
        self.work_dir: Path | None = None

    def untrained_weights(self) -> str | None:
        """Which weights would start untrained (a fresh head, projection, cross-attention), so
        scores mean nothing yet and `bench run` trains first; None when the model can score as
        configured. Decided from the configuration, without loading the model."""
        return None

    # -- scoring -------------------------------------------------------------------------------
    def index(self, split: RankingSplit) -> None:  # noqa: B027 - optional hook
        """Called once before scoring a split (collection statistics, item embeddings...)."""

    @abstractmethod
    def score(self, lists: Sequence[CandidateList]) -> list[np.ndarray]:
        """One float array per list, aligned with ``list.candidates``; higher is more relevant."""

    def prepare_scoring(self, lists: Sequence[CandidateList]) -> Any:
        """The host-side half of :meth:`score` (see :attr:`host_step`): everything before the
        model runs. ``score(lists) == score_prepared(prepare_scoring(lists))`` always holds, so
        the latency benchmark can time the two halves apart. Default: nothing to prepare."""
        return lists

    def score_prepared(self, prepared: Any) -> list[np.ndarray]:
        """The model half of :meth:`score`, on what :meth:`prepare_scoring` returned."""
        return self.score(prepared)

    # -- latency benchmark hooks ---------------------------------------------------------------
    def latency_variants(self, batch_sizes: Sequence[int] | None = None) -> list[LatencyVariant]:
        """The configurations ``bench latency`` times for this ranker. ``batch_sizes``: the
        batch sizes asked for this ranker (``--batch-sizes``), for rankers with ``batch_size``.
        Default: one row per batch size when the config has ``batch_size``, else one row."""
        fields = {f.name for f in dataclasses.fields(self.config)}
        if batch_sizes and "batch_size" in fields:
            return [
                LatencyVariant(f"{self.name} (batch_size={bs})", {"batch_size": bs}, self.name)
                for bs in dict.fromkeys(batch_sizes)
            ]
        return [LatencyVariant(self.name, {}, self.name)]

    def scoring_mode(self) -> str:
        """``pre-tokenised`` when :meth:`index` tokenised the items so that scoring only
        tokenises the query (as a production ranker holds its items), else ``end-to-end``
        (texts in, all tokenisation inside the timed call)."""
        return "end-to-end"

    def compute_dtype(self) -> str:
        """The dtype the scoring computation runs in ('n/a' without a neural model)."""
        return "n/a"

    def weights_note(self, checkpoint: str | None) -> str:
        """How trained the scoring weights are, for latency records (timing does not depend
        on it, but a reader must know what was timed)."""
        if checkpoint:
            return f"trained ({checkpoint})"
        return "n/a"

    # -- training ------------------------------------------------------------------------------
    def fit(self, train: RankingSplit, dev: RankingSplit | None = None) -> dict[str, Any]:
        """Train on ``train``, select on ``dev``; returns a summary recorded with results."""
        raise RankerError(f"ranker {self.name!r} is not trainable")

    def save(self, path: Path) -> None:
        """Persist what :meth:`load` needs. Default: the config only (stateless rankers)."""
        path.mkdir(parents=True, exist_ok=True)
        (path / RANKER_FILE).write_text(json.dumps(self.describe(), indent=2, sort_keys=True))

    def load(self, path: Path) -> None:  # noqa: B027 - stateless default
        """Restore state written by :meth:`save` into this (already configured) ranker."""

    # -- provenance ----------------------------------------------------------------------------
    def describe(self) -> dict[str, Any]:
        """Name, family and config; model-backed rankers add model id and weight hash."""
        return {"name": self.name, "family": self.family, "config": self.config.to_dict()}

    def warmup(self, lists: Sequence[CandidateList]) -> None:
        """Run a few scoring calls whose time is not recorded (lazy init, kernels, caches)."""
        for cl in lists:
            self.score([cl])
