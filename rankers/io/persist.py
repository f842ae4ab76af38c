"""One way to save and restore a ranker, so every ranker's folder has the same shape.

Every ranker's :meth:`~rankers.base.Ranker.save` and :meth:`~rankers.base.Ranker.load` run
:func:`save_ranker` and :func:`load_ranker`; a ranker says only how its *weights* are written
and read, through two hooks with a default that fits any :class:`rankers.fit.loop.Trainable`:

* ``write_weights(folder)``: default: ``training_module()``'s state dict as
  :data:`WEIGHTS_FILE` (safetensors) and, when the ranker has a ``tokenizer`` with
  ``save_pretrained``, the tokenizer in :data:`TOKENIZER_DIR`. The encoder rankers, DPR/ANCE,
  ColBERT and RankT5 keep their own formats (Hugging Face, SentenceTransformer and colbert-ai
  folders), so folders saved before this module still load.
* ``read_weights(folder, meta)``: default: ``training_module()`` (built from the restored
  config) loads :data:`WEIGHTS_FILE`.

What is the same for every ranker lives here:

* **What a folder holds**: the weights, ``ranker.json`` (``describe()``, plus the training summary
  for a ranker that keeps one in ``training_summary``) and the :data:`bench.results.cache.MANIFEST`
  of every file's SHA-256.
* **Atomic writes**: everything is written into a staging folder inside ``path`` and renamed into
  place; ``ranker.json`` and the manifest are removed first and published last, so a crash
  leaves a folder that :func:`load_ranker` refuses by name (never a mix of two saves).
* **One restore rule**: the saved options replace the ranker's own, except the ``RUNTIME`` ones
  (batch sizes, dtype, pre-tokenising: how to run, not what a score is), which stay the caller's;
  then the ranker's ``restored_options(meta, folder)`` (e.g. ``model`` pointing into the folder).
  An option the folder does not know keeps the caller's value (except one saved only when set,
  ``keyed_at_default=False``: missing, it had its default); a saved option this version no
  longer has is logged and ignored.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import shutil
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from bench.core.io import atomic_write_json
from bench.core.trained import TrainingSummary
from bench.results.cache import MANIFEST, manifest_problem, safetensors_problem, write_manifest
from rankers.errors import RankerError

log = logging.getLogger(__name__)

#: the description a ranker's save() folder carries (name, family, config, provenance)
RANKER_FILE = "ranker.json"


def read_ranker_file(meta_file: Path) -> dict[str, Any]:
    """The object a ``ranker.json`` holds. A damaged file (cut short, not UTF-8, or JSON that is
    not an object) is a :class:`RankerError` naming the file and what is wrong with it, since
    every reader of a saved folder starts here and would otherwise fail far from the cause."""
    try:
        meta = json.loads(meta_file.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise RankerError(
            f"{meta_file}: not valid JSON ({exc}); the folder was not saved whole, so save or "
            "train it again"
        ) from exc
    if not isinstance(meta, dict):
        raise RankerError(
            f"{meta_file}: holds a JSON {type(meta).__name__}, not the object a ranker's save() "
            "writes (its name, config and provenance)"
        )
    return meta


def read_saved(path: Path, name: str, *parts: str) -> dict[str, Any]:
    """The ``ranker.json`` of a save() folder, after checking it holds ``parts`` and was saved by
    ranker ``name``: loading another ranker's folder fails with a message naming both. A
    truncated weights file fails here too, naming the file (not deep inside safetensors)."""
    path = Path(path)
    meta_file = path / RANKER_FILE
    missing = [p for p in (RANKER_FILE, *parts) if not (path / p).exists()]
    if missing:
        raise RankerError(f"{path}: not a {name} checkpoint (missing {', '.join(missing)})")
    damaged = safetensors_problem(path)
    if damaged:
        raise RankerError(f"{path}: damaged {name} checkpoint: {damaged}")
    meta = read_ranker_file(meta_file)
    if meta.get("name") != name:
        raise RankerError(f"{meta_file}: saved by ranker {meta.get('name')!r}, not {name!r}")
    return meta


#: the default weights file (a safetensors state dict of ``training_module()``)
WEIGHTS_FILE = "weights.safetensors"
#: the default tokenizer folder (``save_pretrained``)
TOKENIZER_DIR = "tokenizer"
#: staging folder of a save in progress, inside the target folder
_STAGING = ".saving"


@runtime_checkable
class TrainsAModule(Protocol):
    """A ranker whose weights are one ``torch.nn.Module`` (the :class:`rankers.fit.loop.Trainable`
    ones): the default weights hooks save and load its state dict."""

    def training_module(self) -> Any: ...


def saved_meta(ranker: Any) -> dict[str, Any]:
    """What ``ranker.json`` holds: ``describe()`` and, for a ranker that keeps one, its training
    summary (under ``training``)."""
    meta = dict(ranker.describe())
    if hasattr(ranker, "training_summary"):
        summary = ranker.training_summary
        meta["training"] = summary.to_json() if isinstance(summary, TrainingSummary) else summary
    return meta


def save_ranker(ranker: Any, path: Path, weights: Any) -> None:
    """Write ``ranker`` to ``path`` (created if need be): weights (by ``weights``, the ranker as
    its :class:`rankers.hooks.Persistent` hook group), ``ranker.json``, manifest.

    Files beside the saved ones (the runner's resumable checkpoint, ``training.json``) are left
    alone; a previous save's files are replaced.
    """
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    staging = path / f"{_STAGING}-{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir()
    try:
        weights.write_weights(staging)
        # after the weights: a ranker may record their file hash in describe()
        atomic_write_json(staging / RANKER_FILE, saved_meta(ranker))
        # unpublish the previous save first: a crash from here on leaves no ranker.json
        for name in (MANIFEST, RANKER_FILE):
            (path / name).unlink(missing_ok=True)
        entries = sorted(staging.iterdir(), key=lambda p: p.name == RANKER_FILE)
        for entry in entries:
            target = path / entry.name
            if target.is_dir() and not target.is_symlink():
                shutil.rmtree(target)
            os.replace(entry, target)
        # the saved files only: a resumable state beside them is not part of the model
        write_manifest(path, only={e.name for e in entries})
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def restored_config(ranker: Any, meta: dict[str, Any], path: Path, weights: Any) -> Any:
    """The ranker's config after the one restore rule (see the module docstring); ``weights``:
    the ranker as its :class:`rankers.hooks.Persistent` hook group."""
    config = ranker.config
    fields = {f.name for f in dataclasses.fields(config)}
    runtime = config.runtime_fields()
    saved = meta.get("config")
    if not isinstance(saved, dict):
        raise RankerError(f"{path / RANKER_FILE}: no 'config' mapping")
    unknown = sorted(set(saved) - fields)
    if unknown:
        log.info("%s: ignoring saved option(s) this version lacks: %s", path, ", ".join(unknown))
    # an option left out of saved configs at its default (keyed_at_default=False) had its
    # default when it is missing, whatever the caller asks now
    unkeyed = {k: v for k, v in config.unkeyed_defaults().items() if k not in runtime}
    restored = {**unkeyed, **{k: v for k, v in saved.items() if k in fields and k not in runtime}}
    restored.update(weights.restored_options(meta, path))
    changed = {
        k: (getattr(config, k, None), v)
        for k, v in restored.items()
        if getattr(config, k, None) != v
    }
    if changed:
        log.info("%s: checkpoint %s sets %s", ranker.name, path, changed)
    try:
        return dataclasses.replace(config, **restored)
    except (TypeError, ValueError) as exc:
        raise RankerError(
            f"{path / RANKER_FILE}: config does not fit {ranker.name}: {exc}"
        ) from exc


def load_ranker(ranker: Any, path: Path, weights: Any) -> None:
    """Restore a :func:`save_ranker` folder (or one of an older version, which has the same files)
    into ``ranker``: check the manifest when there is one, check ``ranker.json`` names this ranker
    and the weights exist, apply the restore rule, then read the weights (by ``weights``, the
    ranker as its :class:`rankers.hooks.Persistent` hook group)."""
    path = Path(path)
    if (path / MANIFEST).is_file():
        problem = manifest_problem(path)
        if problem:
            raise RankerError(f"{path}: damaged {ranker.name} checkpoint: {problem}")
    meta = read_saved(path, ranker.name, *weights.saved_parts())
    ranker.config = restored_config(ranker, meta, path, weights)
    if hasattr(ranker, "training_summary"):
        saved = meta.get("training")
        ranker.training_summary = (
            TrainingSummary.from_json(saved) if isinstance(saved, dict) else None
        )
    weights.read_weights(path, meta)


# -- the default weights hooks -------------------------------------------------------------------
def write_module(ranker: Any, folder: Path) -> None:
    """``training_module()``'s state dict as :data:`WEIGHTS_FILE`, and the tokenizer, if any."""
    from safetensors.torch import save_file

    module = _module(ranker)
    state = {k: v.detach().cpu().contiguous() for k, v in module.state_dict().items()}
    save_file(state, str(folder / WEIGHTS_FILE))
    tokenizer = getattr(ranker, "tokenizer", None)
    if tokenizer is not None and hasattr(tokenizer, "save_pretrained"):
        tokenizer.save_pretrained(str(folder / TOKENIZER_DIR))


def read_module(ranker: Any, folder: Path) -> None:
    """Load :data:`WEIGHTS_FILE` into ``training_module()`` (built from the restored config)."""
    from safetensors.torch import load_file

    module = _module(ranker)
    module.load_state_dict(load_file(str(folder / WEIGHTS_FILE)))
    module.eval()


def _module(ranker: Any) -> Any:
    if not isinstance(ranker, TrainsAModule):
        raise RankerError(
            f"{ranker.name}: has no training_module(), so the default weights hooks cannot save "
            "it; give it write_weights/read_weights"
        )
    return ranker.training_module()
