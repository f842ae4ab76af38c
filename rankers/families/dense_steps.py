"""sentence-transformers' ``encode`` taken apart into a host step and a model step.

``SentenceTransformer.encode`` tokenises each batch, copies it to the device and calls the
model with the tokenizer's 2D attention mask, which transformers inspects on the device (a
``padding_mask.all()`` read on every encoder call: the host waits for the GPU, and the call
cannot be captured in a CUDA graph). :func:`host_batches` does on the host what ``encode`` does
before the model: its length order (``_input_length``, longest first), its batches of
``batch_size`` texts, and its tokenisation (``preprocess``), as one id matrix in that order
whose rows each batch slices, cut to the batch's longest text: the same ids, padded to the same
width, as ``encode``'s batches. :func:`encode_batches` runs the model's own modules on those
slices (the first, the ``Transformer``, with the attention mask chosen on the host,
:func:`~rankers.inputs.masks.encoder_mask`; pooling and any later module as ``encode`` runs
them) and puts the embeddings back in the texts' order on the device. Same batches, same
modules, same inputs: ``encode``'s embeddings bit for bit (tests/test_host_reads.py holds it).

A model whose ``encode`` does more than this (a prompt or truncation it adds, a router, a
flattened batch without padding, left padding, inputs other than per-token ids) is not taken
apart: :func:`plain_text_model` says so and the ranker calls ``encode`` itself.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer
    from torch import Tensor

#: the feature that holds each row's real-token count on the device (the mask is built there)
LENGTH = "length"
#: the feature that maps a text to its row in encode's order
RESTORE = "restore"


@dataclasses.dataclass
class HostBatches:
    """One ``encode`` call prepared on the host: per-token features (``input_ids``,
    ``token_type_ids``...) in ``encode``'s order with each row's ``length`` and each text's row
    (``restore``), to be uploaded; each batch's ``(start, end, width, full)`` (``full``: no
    row of the batch is padded); the features ``encode`` passes on unchanged (``modality``)."""

    arrays: dict[str, np.ndarray]
    batches: list[tuple[int, int, int, bool]]
    passed: dict[str, Any]


@dataclasses.dataclass
class DeviceBatches:
    """:class:`HostBatches` after the upload: its arrays as tensors on the device."""

    tensors: dict[str, Tensor]
    batches: list[tuple[int, int, int, bool]]
    passed: dict[str, Any]

    @classmethod
    def of(cls, host: HostBatches, tensors: dict[str, Tensor]) -> DeviceBatches:
        return cls(tensors, host.batches, host.passed)


def plain_text_model(model: SentenceTransformer) -> bool:
    """Whether ``encode`` on ``model`` is what :func:`host_batches` and :func:`encode_batches`
    do: a ``Transformer`` first (text through its Hugging Face model's ``forward``), no router,
    no prompt or truncation of ``encode``'s own, padded batches (no flattening) padded on the
    right."""
    from sentence_transformers.base.modules.router import Router
    from sentence_transformers.base.modules.transformer import Transformer

    modules = list(model)
    if not modules or not isinstance(modules[0], Transformer):
        return False
    text = modules[0].modality_config.get("text") or {}
    tokenizer = getattr(modules[0], "tokenizer", None)
    return (
        text.get("method") == "forward"
        and not any(isinstance(m, Router) for m in modules)
        and getattr(tokenizer, "padding_side", None) == "right"
        and not model._can_flatten_inputs()
        and model._resolve_prompt(None, None) is None
        and model.truncate_dim is None
    )


def host_batches(
    model: SentenceTransformer, texts: Sequence[str], batch_size: int
) -> HostBatches | None:
    """``texts`` tokenised and batched as ``encode`` would, for one upload; None when the
    features are not per-token rows padded on the right (then ``encode`` runs as it is)."""
    n = len(texts)
    order = np.argsort([-model._input_length(t) for t in texts])  # encode's sort
    features = model.preprocess(list(texts)) if n else {}
    arrays: dict[str, np.ndarray] = {}
    passed: dict[str, Any] = {}
    for name, value in features.items():
        if hasattr(value, "numpy"):
            arrays[name] = value.numpy()
        else:
            passed[name] = value
    mask = arrays.pop("attention_mask", None)
    if n and (mask is None or any(a.shape != mask.shape for a in arrays.values())):
        return None
    width = mask.shape[1] if mask is not None else 0
    length = mask.sum(axis=1) if mask is not None else np.zeros(0, dtype=np.int64)
    if mask is not None and not np.array_equal(mask, np.arange(width)[None, :] < length[:, None]):
        return None  # padding on the left or inside a row
    length = length[order]
    batches = []
    for start in range(0, n, batch_size):
        end = min(start + batch_size, n)
        widest = int(length[start:end].max())
        batches.append((start, end, widest, bool(length[start:end].min() == widest)))
    out = {name: a[order] for name, a in arrays.items()}
    out[LENGTH] = length
    out[RESTORE] = np.argsort(order)
    return HostBatches(out, batches, passed)


def encode_batches(model: SentenceTransformer, prepared: DeviceBatches) -> Tensor:
    """The embeddings (texts' order, float32, on the device) of the texts of ``prepared`` (at
    least one), computed as ``encode`` computes them; nothing is read back from the device.
    Call inside inference mode with ``model`` in eval mode."""
    import torch

    from rankers.inputs.masks import encoder_mask

    modules = list(model)
    first, rest, encoder = modules[0], modules[1:], modules[0].model
    t = prepared.tensors
    tokens = [name for name in t if name not in (LENGTH, RESTORE)]
    parts = []
    for start, end, width, full in prepared.batches:
        positions = torch.arange(width, device=t[LENGTH].device)[None, :]
        valid = positions < t[LENGTH][start:end, None]
        features: dict[str, Any] = {name: t[name][start:end, :width] for name in tokens}
        features.update(prepared.passed, attention_mask=valid.long())
        # the encoder gets the host's choice; pooling keeps the 2D mask encode gives it
        features = first(features, attention_mask=encoder_mask(encoder, valid, full))
        for module in rest:
            features = module(features)
        parts.append(features["sentence_embedding"])
    return torch.cat(parts)[t[RESTORE]].float()
