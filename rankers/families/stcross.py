"""sentence-transformers ``CrossEncoder`` as a ranker: a widely used cross-encoder implementation
beside our monoBERT, so the latency benchmark shows monoBERT is not slow by construction.

Scoring is ``CrossEncoder.predict`` taken apart at its one seam: :meth:`prepare_scoring` does what
``predict`` does before the model (its length sort, then ``CrossEncoder.preprocess`` per batch -
WordPiece, padding - and the copy to the device) and :meth:`score_prepared` runs the model and the
activation on those batches and restores the order. The scores are ``predict``'s, bit for bit
(sentence-transformers 5; a test holds it to that).

Weights: a folder (or hub id) with a trained sequence-classification head scores as trained. A
plain encoder (MiniLM-L6, or the ``encoder/`` of a monoBERT checkpoint) gets a new, random head:
fine for timing (same cost as trained), meaningless for ranking. This ranker cannot train, so
:meth:`untrained_weights` reports that head and ``bench run`` refuses instead of scoring noise.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from bench.data.model import CandidateList
from rankers.base import (
    RUNTIME,
    SCORE,
    TORCH_SCORING_DTYPE_NAMES,
    Ranker,
    RankerConfig,
    RankerError,
    option,
)
from rankers.hooks import Fits, LatencyParts
from rankers.io.models import ModelRef, resolve_model

log = logging.getLogger(__name__)

#: the precisions the peer runs in: torch's (``dtype`` of the encoder rankers, int8 aside)
PEER_DTYPES = TORCH_SCORING_DTYPE_NAMES

#: where a ranker's save() folder keeps its encoder (rankers.families.encoder's checkpoint layout)
ENCODER_DIR = "encoder"


@dataclass
class STCrossEncoderConfig(RankerConfig):
    model: str = option(
        "minilm-l6",
        role=SCORE,
        help="alias, Hugging Face id or folder: a trained cross-encoder, or an encoder (new head)",
    )
    checkpoint: str | None = option(
        None,
        role=SCORE,
        help="a save() folder with an encoder/ (monoBERT's): its encoder replaces model; "
        "the head stays new",
    )
    batch_size: int = option(32, role=RUNTIME, min=1, help="pairs per forward pass (predict's)")
    max_length: int = option(
        67, role=SCORE, min=1, help="whole-pair token limit: monoBERT's L_q + L_k + 3"
    )
    dtype: str = option(
        "auto",
        role=RUNTIME,
        choices=PEER_DTYPES,
        help="the CrossEncoder's precision, weights cast once after loading, as a user of "
        "sentence-transformers would (auto: float32 on CPU, bf16 or fp16 on a GPU; tf32: float32 "
        "weights, TF32 matmuls, CUDA only); no int8: "
        "its quantized backends need optimum, which transformers 5 does not admit",
    )


@dataclass(frozen=True)
class PreparedPairs:
    """``predict``'s batches of one call: each batch's pair positions and model features
    (on the device), and the list sizes to split the scores by."""

    batches: list[tuple[np.ndarray, dict[str, Any]]]
    list_sizes: list[int]


def _has_trained_head(ref: ModelRef) -> bool | None:
    """Whether the model's config names a sequence-classification architecture; None when the
    config cannot be read without loading (a hub id that is not cached)."""
    if ref.local:
        config_file = Path(ref.path) / "config.json"
        if not config_file.is_file():
            return None
        architectures = json.loads(config_file.read_text(encoding="utf-8")).get("architectures")
    else:
        try:
            from transformers import AutoConfig

            architectures = AutoConfig.from_pretrained(ref.path).architectures
        except (OSError, ValueError):
            return None
    return any(str(a).endswith("ForSequenceClassification") for a in architectures or [])


class STCrossEncoderRanker(Ranker[STCrossEncoderConfig], LatencyParts, Fits):
    """``CrossEncoder.predict`` over the (query, item) pairs of each call."""

    name: ClassVar[str] = "st-crossencoder"
    family: ClassVar[str] = "early"
    Config = STCrossEncoderConfig
    pointwise: ClassVar[bool] = True
    host_step: ClassVar[str | None] = (
        "CrossEncoder.predict's length sort, then CrossEncoder.preprocess per batch "
        "(WordPiece, padding) and the copy to the device"
    )
    #: the ranker whose checkpoint's encoder this one can time (the latency benchmark gives it
    #: that checkpoint when it has none of its own)
    borrows_checkpoint_of: ClassVar[str | None] = "monobert"

    def __init__(self, config: STCrossEncoderConfig | None = None, device: str = "cpu") -> None:
        super().__init__(config, device)
        from rankers.compute.precision import check_dtype_device

        check_dtype_device(self.config.dtype, device)
        self._model: Any = None

    @property
    def ref(self) -> ModelRef:
        """What is loaded: the checkpoint's encoder when one is given, else ``model``."""
        if self.config.checkpoint:
            folder = Path(self.config.checkpoint) / ENCODER_DIR
            if not folder.is_dir():
                raise RankerError(
                    f"{self.name}: checkpoint {self.config.checkpoint} has no {ENCODER_DIR}/ "
                    "folder (a monobert save() folder has one)"
                )
            return resolve_model(str(folder))
        return resolve_model(self.config.model)

    def untrained_weights(self) -> str | None:
        if self.config.checkpoint is None and _has_trained_head(self.ref) is not False:
            return None
        return f"a new sequence-classification head on {self.ref.model_id}"

    @property
    def model(self) -> Any:
        """The CrossEncoder, loaded on first use (quietly when its head is new by design)."""
        if self._model is None:
            import contextlib

            from sentence_transformers import CrossEncoder

            from rankers.io.models import expected_new_weights

            untrained = self.untrained_weights()
            quiet = expected_new_weights(untrained) if untrained else contextlib.nullcontext()
            ref = self.ref
            try:
                with quiet:
                    self._model = CrossEncoder(
                        ref.path,
                        num_labels=1,
                        max_length=self.config.max_length,
                        device=self.device,
                    )
            except (OSError, ValueError) as exc:
                raise RankerError(f"{self.name}: cannot load {ref.path!r}: {exc}") from exc
            from rankers.compute.precision import scoring_dtype

            dtype = scoring_dtype(self.config.dtype, self.device)
            if dtype != next(self._model.parameters()).dtype:
                self._model.to(dtype)  # the whole model, head included, as .to() does for users
            self._model.eval()
        return self._model

    # -- scoring -------------------------------------------------------------------------------
    def prepare_scoring(self, lists: Sequence[CandidateList]) -> PreparedPairs:
        from sentence_transformers.util import batch_to_device

        model = self.model
        pairs = [(cl.query.text, t) for cl in lists for t in cl.texts]
        # predict's order: longest first by its own length estimate, interleaved only when the
        # model flattens inputs (no padding); batches are then consecutive runs of that order
        order = np.argsort([-model._input_length(p) for p in pairs])
        if model._can_flatten_inputs():
            order = model._interleave_sorted_indices(order)
        step = self.config.batch_size
        batches = []
        for start in range(0, len(order), step):
            idx = order[start : start + step]
            features = _host_mask(model, model.preprocess([pairs[i] for i in idx]))
            batches.append((idx, batch_to_device(features, model.device)))
        return PreparedPairs(batches, [len(cl) for cl in lists])

    def score_prepared(self, prepared: PreparedPairs) -> list[np.ndarray]:
        import torch

        from rankers.compute.precision import matmul_precision

        model = self.model
        flat = np.zeros(sum(prepared.list_sizes), dtype=np.float32)
        parts = []
        with torch.inference_mode(), matmul_precision(self.config.dtype, self.device):
            for _, features in prepared.batches:
                scores = model(features)["scores"]
                if model.activation_fn is not None:
                    scores = model.activation_fn(scores)
                if model.num_labels == 1 and scores.ndim > 1:
                    scores = scores.squeeze(-1)
                parts.append(scores.float())
        if parts:  # one device-to-host copy per call
            flat[np.concatenate([idx for idx, _ in prepared.batches])] = (
                torch.cat(parts).cpu().numpy()
            )
        bounds = np.cumsum([0, *prepared.list_sizes])
        return [flat[bounds[k] : bounds[k + 1]].copy() for k in range(len(prepared.list_sizes))]

    def score(self, lists: Sequence[CandidateList]) -> list[np.ndarray]:
        return self.score_prepared(self.prepare_scoring(lists))

    # -- latency hooks -------------------------------------------------------------------------
    def compute_dtype(self) -> str:
        from rankers.compute.precision import dtype_label

        return dtype_label(self.config.dtype, self.device)

    def weights_note(self, checkpoint: str | None) -> str:
        if self.untrained_weights() is None:
            return f"trained ({self.ref.model_id})"
        encoder = f"the encoder of {checkpoint}" if checkpoint else "the pre-trained encoder"
        return f"untrained head on {encoder} (same cost as trained)"

    # -- provenance ----------------------------------------------------------------------------
    def describe(self) -> dict[str, Any]:
        from rankers.io.models import state_hash, weights_hash

        ref = self.ref
        head = "trained head" if self.untrained_weights() is None else "random head"
        return {
            **super().describe(),
            "model_id": ref.model_id,
            "base_weights_hash": weights_hash(ref.path) if ref.local else None,
            "weights_hash": state_hash(self.model),
            "implementation": f"sentence_transformers.CrossEncoder.predict ({head})",
        }


def _host_mask(model: Any, features: dict[str, Any]) -> dict[str, Any]:
    """``features`` with the attention mask chosen on the host while it is still there
    (:func:`rankers.inputs.masks.encoder_mask`: none for an unpadded batch, a 4D boolean one
    otherwise), so the model step reads nothing back from the device; only for a cross-encoder
    that is one ``Transformer`` module (no other module reads the 2D mask)."""
    from rankers.inputs.masks import encoder_mask

    modules = list(model)
    mask = features.get("attention_mask")
    inner = getattr(modules[0], "model", None) if len(modules) == 1 else None
    if inner is None or mask is None or mask.device.type != "cpu" or mask.dim() != 2:
        return features
    features["attention_mask"] = encoder_mask(inner, mask, bool(mask.all()))
    return features
