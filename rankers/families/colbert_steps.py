"""colbert-ai's scoring taken apart into a host step and a model step, with no read in between.

colbert-ai's ``ColBERT.query``/``ColBERT.doc`` read the ids back from the device to mask
punctuation and padding (``ColBERT.mask``: ``input_ids.cpu().tolist()``), call the BERT with the
tokenizer's 2D attention mask (which transformers inspects on the device), and ``colbert_score``
masks the document side by boolean indexing (``scores[D_padding] = -9999``, a read of the
mask's nonzero entries on a GPU). Here the ids never leave the host before the call:
:func:`keep_mask` is ``ColBERT.mask`` on the host's ids, :func:`vectors` is ``query``/``doc``
(``keep_dims="return_mask"``) on the uploaded ids with that mask and the attention mask chosen on
the host (:func:`~rankers.inputs.masks.encoder_mask`), and :func:`maxsim` is ``colbert_score``'s
cosine MaxSim with ``masked_fill`` for the boolean index. Same modules, same operations, same
values: colbert-ai's scores bit for bit (tests/test_host_reads.py holds it).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import torch
from torch import Tensor

from rankers.inputs.masks import encoder_mask

#: the value colbert-ai gives the similarities of masked document vectors before the max
MASKED = -9999


def keep_mask(ids: np.ndarray, pad: int, skiplist: Mapping[Any, Any]) -> np.ndarray:
    """``ColBERT.mask`` on the host: whether each token's vector is kept (not padding, not in
    ``skiplist``, whose integer keys are the punctuation's token ids)."""
    skipped = [k for k in skiplist if isinstance(k, int)]
    return (ids != pad) & ~np.isin(ids, skipped)


def vectors(model: Any, ids: Tensor, attention: Tensor, keep: Tensor, full: bool) -> Tensor:
    """``ColBERT.query``/``ColBERT.doc`` on ids already on the device: BERT (``full``: no row
    has an unattended token, known on the host), the projection, the vectors ``keep`` masks
    zeroed, L2-normalised."""
    hidden = model.bert(ids, attention_mask=encoder_mask(model.bert, attention, full))[0]
    projected = model.linear(hidden) * keep.unsqueeze(2).float()
    return torch.nn.functional.normalize(projected, p=2, dim=2)


def maxsim(queries: Tensor, docs: Tensor, keep: Tensor) -> Tensor:
    """``colbert_score`` (cosine, ``colbert`` interaction) of each document with its query row:
    for each query vector the best kept document vector, summed."""
    scores = docs @ queries.to(dtype=docs.dtype).permute(0, 2, 1)
    return scores.masked_fill(~keep.bool()[:, :, None], MASKED).max(1).values.sum(-1)
