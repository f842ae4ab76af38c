"""The attention mask an encoder call passes, chosen on the host so the call reads nothing back.

transformers turns a 2D padding mask into its attention mask inside the encoder's forward and
first asks whether any token is padding (``padding_mask.all()`` as a Python bool): a
device-to-host read on every encoder call, which stalls the GPU's queue and forbids capturing the
call in a CUDA graph. The scorers know on the host whether a batch has padding (its rows'
lengths are host arrays), so they pass what transformers would build: no mask for a batch
without padding, and the padding mask as a 4D boolean ``(rows, 1, 1, width)``, which
transformers passes through unchanged, for a padded one; the same hidden states, no read.
"""

from __future__ import annotations

from typing import Any

from torch import Tensor


def takes_row_mask(encoder: Any) -> bool:
    """Whether ``encoder`` takes a 4D boolean row mask (or None) as its ``attention_mask``: a
    Hugging Face encoder whose attention runs ``scaled_dot_product_attention`` (its default),
    or a stand-in that declares ``TAKES_ROW_MASK``. The classic (eager) attention would add a
    boolean mask to its scores, and a runtime's exported graph takes the 2D mask."""
    declared = getattr(encoder, "TAKES_ROW_MASK", None)
    if declared is not None:
        return bool(declared)
    config = getattr(encoder, "config", None)
    return bool(getattr(encoder, "_supports_sdpa", False)) and (
        getattr(config, "_attn_implementation", None) == "sdpa"
    )


def encoder_mask(encoder: Any, valid: Tensor, full: bool | None) -> Tensor | None:
    """The ``attention_mask`` to call ``encoder`` with for rows whose real tokens are ``valid``
    (rows, width; bool or 0/1 integers). ``full``: whether no row has padding, known on the
    host (None: not known, the 2D mask as before, which transformers inspects on the device).
    An encoder that does not take a row mask (:func:`takes_row_mask`) gets the 2D mask."""
    if full is None or not takes_row_mask(encoder):
        return valid.long()
    return None if full else valid.bool()[:, None, None, :]
