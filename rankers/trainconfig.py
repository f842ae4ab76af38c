"""The options every list-trained ranker shares (:class:`ListTrainingConfig`), declared once.

Kept apart from the list trainer (:mod:`rankers.fit.lists`) because every ranker imports its
config at module level while the trainer runs only in ``fit``: a scoring job's cache key covers
the modules its ranker imports (:mod:`bench.execution.keys`), so the training loop stays out of it.
"""

from __future__ import annotations

import dataclasses

from rankers.base import (
    DTYPE_NAMES,
    RUNTIME,
    SCORING_DTYPE_NAMES,
    TRAINING,
    Ranker,
    RankerError,
    TrainingConfig,
    option,
)
from rankers.compute.losses import LOSSES


@dataclasses.dataclass
class ListTrainingConfig(TrainingConfig):
    """The options the list trainer reads (:func:`rankers.fit.lists.fit_lists`), declared once with
    their roles, ranges and help: monoBERT, CROSS-JEM
    (:class:`rankers.families.encoder.EncoderConfig`) and RankT5 subclass it and give their own
    defaults with :func:`~rankers.base.inherit_option`; the other
    trainable rankers take ``dtype`` and ``warmup_ratio`` from here the same way, so every
    ``dtype`` accepts the same values and every ``warmup_ratio`` is range-checked."""

    dtype: str = option(
        "auto",
        role=RUNTIME,
        choices=SCORING_DTYPE_NAMES,
        help="scoring precision, not part of the trained model: weights cast once to it (auto: "
        "bf16 on a GPU with native bf16, else fp16; fp32 on CPU); tf32: float32 weights, TF32 "
        "tensor-core matmuls (CUDA only); int8: the encoder's linear layers quantized on an "
        "int8 runtime",
    )
    train_dtype: str = option(
        "auto",
        role=TRAINING,
        choices=DTYPE_NAMES,
        help="fine-tuning precision: on CUDA the autocast dtype over float32 master weights "
        "(auto: bf16 where native, else fp32; CPU trains float32); also the precision of the dev "
        "scoring that selects the epoch (auto: float32 on CPU)",
    )
    warmup_ratio: float = option(
        0.1, role=TRAINING, min=0, below=1, help="share of steps warming the lr up"
    )
    loss: str = option(
        "bce",
        role=TRAINING,
        choices=tuple(LOSSES),
        help="rankers.compute.losses name (rpl needs graded or teacher scores)",
    )
    teacher: str | None = option(
        None,
        role=TRAINING,
        help="ranker name or save() folder whose sigmoid(scores) are the targets (else qrels)",
    )
    train_batch_queries: int = option(
        8,
        role=TRAINING,
        min=1,
        help="candidate lists per step (split across processes under `accelerate launch`)",
    )
    train_micro_items: int = option(
        256,
        role=TRAINING,
        min=0,
        help="most items one forward/backward pass of a training step holds: a larger step is "
        "split into micro-batches whose gradients add up (whole lists; a pointwise ranker's "
        "longer list in chunks, scored first), which bounds its memory (0: the whole step at once)",
    )


def list_config(ranker: Ranker) -> ListTrainingConfig:
    """The ranker's config as the list trainer reads it; a clear error for a config that does not
    declare the list-training options."""
    cfg = ranker.config
    if not isinstance(cfg, ListTrainingConfig):
        raise RankerError(
            f"{ranker.name}: the list trainer needs a config derived from ListTrainingConfig "
            f"(rankers.trainconfig), not {type(cfg).__name__}"
        )
    return cfg
