"""The training summary as a typed record.

Every trainer returns a :class:`TrainingSummary` (the one loop of :mod:`rankers.fit.loop` fills
the shared fields, the list trainer :class:`ListTraining`, a ranker its own ``extra``); the
runner writes it to ``training.json`` and result records, and readers get it back with
:meth:`TrainingSummary.from_json`. The JSON has exactly the fields the untyped dict had (flat:
``dev_AP@10``, ``loss_name``, a ranker's own fields beside the shared ones), so records written
before this module still read and reference tables do not change.

A foundation module: rankers import it (the layer rule of ``bench/__init__.py``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

#: dev measure used to select the epoch (the trainers and the runner's dev checks)
SELECTION_MEASURE = "AP@10"
#: JSON names of the dev scores per epoch and before training
DEV_KEY = f"dev_{SELECTION_MEASURE}"
DEV_BEFORE_KEY = f"{DEV_KEY}_before"


@dataclasses.dataclass
class ListTraining:
    """What the list trainer (:func:`rankers.fit.lists.fit_lists`) adds: loss, targets and the
    lists trained on."""

    loss_name: str
    #: "qrels grades" or "teacher <weights hash>[ (logits)]"
    targets: str
    #: the teacher (name, weights hash, path, score cache; an ensemble's members); None: qrels
    teacher: dict[str, Any] | None
    train_queries: int
    #: candidates trained on, and as given (more when lists were grown with BM25 negatives)
    train_items: int
    train_items_given: int
    train_batch_queries: int


@dataclasses.dataclass
class TrainingSummary:
    """What one training run did: epochs and steps, the kept epoch and its dev scores, losses,
    resume, optimiser, processes and weight hashes (every trainer), then the list trainer's
    fields and a ranker's own (``extra``)."""

    epochs: int = 0
    epochs_planned: int = 0
    stopped_early: bool = False
    steps: int = 0
    steps_planned: int | None = None
    #: the epoch whose weights were kept (1-based; the best dev score, else the last)
    best_epoch: int | None = None
    #: dev :data:`SELECTION_MEASURE` after each epoch (JSON ``dev_AP@10``)
    dev_scores: list[float | None] = dataclasses.field(default_factory=list)
    #: dev score of the weights before training (JSON ``dev_AP@10_before``)
    dev_before: float | None = None
    loss: list[float] = dataclasses.field(default_factory=list)
    resumed_from: dict[str, int] | None = None
    checkpoint: str | None = None
    seconds: float | None = None
    optimizer: dict[str, Any] = dataclasses.field(default_factory=dict)
    #: queries without signal, summed over epochs
    skipped_queries: int = 0
    processes: int = 1
    mixed_precision: str = "no"
    epoch_weights_hash: list[str] = dataclasses.field(default_factory=list)
    weights_hash: str | None = None
    lists: ListTraining | None = None
    #: a ranker's own fields (ColBERT's objective, DPR's negatives, RankT5's list size...) and,
    #: read back from a record, the runner's (key, model_dir, dev_baselines...)
    extra: dict[str, Any] = dataclasses.field(default_factory=dict)

    def kept_dev_score(self) -> float | None:
        """The kept epoch's dev score; None without a dev split or kept epoch."""
        best, scores = self.best_epoch, self.dev_scores
        if not best or best > len(scores) or scores[best - 1] is None:
            return None
        return float(scores[best - 1])  # type: ignore[arg-type]

    def to_json(self) -> dict[str, Any]:
        """The flat JSON fields (the same names as before the summary was typed)."""
        data: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            if f.name in ("lists", "extra"):
                continue
            data[_JSON_NAMES.get(f.name, f.name)] = getattr(self, f.name)
        if self.lists is not None:
            data.update(dataclasses.asdict(self.lists))
        data.update(self.extra)
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> TrainingSummary:
        """A summary from its JSON (unknown fields go to ``extra``, missing ones default)."""
        own = {_FIELD_NAMES.get(k, k): v for k, v in data.items()}
        names = {f.name for f in dataclasses.fields(cls)} - {"lists", "extra"}
        list_names = [f.name for f in dataclasses.fields(ListTraining)]
        lists = None
        if "loss_name" in own and all(n in own for n in list_names):
            lists = ListTraining(**{n: own[n] for n in list_names})
        taken = names | (set(list_names) if lists is not None else set())
        return cls(
            **{k: v for k, v in own.items() if k in names},
            lists=lists,
            extra={k: data[k] for k in data if _FIELD_NAMES.get(k, k) not in taken},
        )

    @classmethod
    def of(cls, value: TrainingSummary | Mapping[str, Any]) -> TrainingSummary:
        """``value`` as a summary (a trainer outside this repository may still return a dict)."""
        return value if isinstance(value, TrainingSummary) else cls.from_json(value)


#: field name -> JSON name, where they differ
_JSON_NAMES = {"dev_scores": DEV_KEY, "dev_before": DEV_BEFORE_KEY}
_FIELD_NAMES = {v: k for k, v in _JSON_NAMES.items()}
