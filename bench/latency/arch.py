"""The encoder sizes `bench latency --arch` times: presets of BERT shapes built with random
weights (a forward pass costs the same whatever the weights, so timing at the paper's sizes needs
no download; records made so say so with :func:`random_weights_note`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class ArchPreset:
    """A BERT shape to time with random weights (timing does not depend on the weights)."""

    layers: int
    hidden: int
    heads: int
    intermediate: int


DEFAULT_ARCH = "minilm-l6"
#: ``--arch`` presets; None: the rankers' configured (real, pre-trained) weights
ARCHS: dict[str, ArchPreset | None] = {
    "minilm-l6": None,
    "distilbert-6l": ArchPreset(layers=6, hidden=768, heads=12, intermediate=3072),
    "bert-base": ArchPreset(layers=12, hidden=768, heads=12, intermediate=3072),
}


def random_weights_note(arch: str) -> str:
    return f"random weights, timing only ({arch})"


def arch_model(arch: str, seed: int, root: Path) -> Path | None:
    """The folder of ``arch``'s random-weight BERT (written on first use), or None for the
    rankers' configured weights. Vocabulary and tokenizer are MiniLM-L6's."""
    preset = ARCHS[arch]
    if preset is None:
        return None
    from rankers.io.models import write_random_bert

    return write_random_bert(
        root / "models" / "random" / f"{arch}-seed{seed}",
        hidden=preset.hidden,
        layers=preset.layers,
        heads=preset.heads,
        intermediate=preset.intermediate,
        seed=seed,
    )
