"""The memory a training step needs, estimated before training.

A step's activation memory follows the sequences it holds, so the plan estimates the largest
step from the train lists' lengths and the ranker's step shape
(:meth:`rankers.hooks.Fits.training_step_shape`) and refuses one that cannot fit, before any
work, naming the options that bound it. The estimate is the activations a transformer layer
keeps for the backward pass (Korthikanti et al., 2022: ``34 s h + 5 a s^2`` bytes per sequence
in 16 bits, twice that in float32), times the layers, plus the weights, their gradients and
AdamW's two moments (16 bytes a parameter in float32). It is an estimate: it leaves out the
data, the tokenizer, the teacher and the allocator's slack, so it refuses only steps that are
far too large.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence
from typing import Any

from rankers.hooks import fits

log = logging.getLogger(__name__)

#: bytes a float32 value takes
FLOAT32 = 4


@dataclasses.dataclass(frozen=True)
class StepEstimate:
    """The largest training step of a plan and the memory it needs."""

    sequences: int
    length: int
    activation_bytes: int
    parameter_bytes: int

    @property
    def total_bytes(self) -> int:
        return self.activation_bytes + self.parameter_bytes

    def describe(self) -> str:
        return (
            f"largest training step: {self.sequences} sequences of up to {self.length} tokens "
            "in one forward/backward pass, "
            f"about {self.total_bytes / 2**30:.1f} GiB (activations "
            f"{self.activation_bytes / 2**30:.1f} GiB)"
        )


def estimate_step(
    sequences: int, length: int, layers: int, hidden: int, heads: int, parameters: int
) -> StepEstimate:
    """Float32 training memory of a step of ``sequences`` x ``length`` tokens through a
    ``layers``-layer encoder of width ``hidden`` with ``heads`` attention heads and
    ``parameters`` weights (see the module's docstring)."""
    per_sequence = 2 * (34 * length * hidden + 5 * heads * length * length)  # float32: x2
    return StepEstimate(
        sequences=sequences,
        length=length,
        activation_bytes=sequences * layers * per_sequence,
        parameter_bytes=4 * FLOAT32 * parameters,  # weights, gradients, two AdamW moments
    )


def encoder_shape(model_path: str) -> tuple[int, int, int, int]:
    """Layers, width, heads and parameter count of a BERT-style encoder, from its config."""
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(model_path)
    layers, hidden = int(config.num_hidden_layers), int(config.hidden_size)
    intermediate = int(getattr(config, "intermediate_size", 4 * hidden))
    vocab = int(getattr(config, "vocab_size", 30522))
    positions = int(getattr(config, "max_position_embeddings", 512))
    per_layer = 4 * hidden * hidden + 2 * hidden * intermediate
    return (
        layers,
        hidden,
        int(config.num_attention_heads),
        per_layer * layers + (vocab + positions) * hidden,
    )


def available_bytes(device: str) -> int | None:
    """Free memory where training runs: the GPU's free memory, or the host's MemAvailable."""
    if device.startswith("cuda"):
        import torch

        if not torch.cuda.is_available():
            return None
        free, _total = torch.cuda.mem_get_info(torch.device(device))
        return int(free)
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def step_problem(ranker: Any, list_lengths: Sequence[int], device: str) -> tuple[str, str | None]:
    """The plan's line about ``ranker``'s largest training step on lists of ``list_lengths``
    items, and why it cannot fit (None: it can, or nothing is known). ``("", None)`` for a
    ranker without a step shape."""
    shape = fits(ranker).training_step_shape(list_lengths)
    if shape is None:
        return "", None
    try:
        from rankers.io.models import resolve_model

        layers, hidden, heads, parameters = encoder_shape(resolve_model(ranker.cfg.model).path)
    except (OSError, ValueError, AttributeError) as exc:
        log.debug("no step estimate for %s: %s", ranker.name, exc)
        return "", None
    sequences, length = shape
    estimate = estimate_step(sequences, length, layers, hidden, heads, parameters)
    line = f"{ranker.name}: {estimate.describe()}"
    free = available_bytes(device)
    if free is None or estimate.total_bytes <= free:
        return line, None
    return line, (
        f"{line}, more than the {free / 2**30:.1f} GiB free on {device}: lower "
        "train_micro_items, train_max_items or train_batch_queries (--set)"
    )
