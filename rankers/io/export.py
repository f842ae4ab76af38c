"""Models out: a ranker's weights as a folder another library loads (``bench export``).

Each exporting ranker implements :meth:`rankers.hooks.Exportable.export` with the builders here, so
the format code sits in one place and each ranker says only what its model is:

* monoBERT -> a sentence-transformers ``CrossEncoder`` folder (:func:`cross_encoder_folder`):
  ``pooling=cls`` and ``mean`` as the modules Transformer -> Pooling -> Dense(1) (needs
  sentence-transformers >= 6, whose ``CrossEncoder`` is built from modules), ``pooling=pooler``
  as a ``BertForSequenceClassification``, which any ``CrossEncoder`` loads. Both keep the raw
  logit as the score (the activation is the identity), so ``predict`` gives `bench run`'s scores.
* DPR / ANCE -> a ``SentenceTransformer`` folder (:func:`sentence_transformer_folder`) with the
  ranker's prefixes as the prompts ``query`` and ``document`` and its similarity function, so
  ``encode_query`` / ``encode_document`` / ``similarity`` give `bench run`'s scores.
* CROSS-JEM -> its Hugging Face encoder folder plus ``crossjem.json`` and ``head.safetensors``;
  no library has its layout, so :func:`rankers.families.crossjem.from_exported` is the loader.

A folder is written into a staging folder beside the target and renamed into place
(:func:`staged`), so an interrupted or failed export (a full disk) leaves no half folder under
the target's name and an earlier export there as it was. Every export carries
:data:`EXPORT_FILE`, which says what was exported, from where, and how to load it; it is also
the mark of an export and lists the files it wrote: an export never deletes what it did not
write, so ``overwrite`` replaces only a folder that holds nothing but those files, and
:func:`export_target` refuses, before any model is loaded, a target that is, holds or lies
inside the model being exported or a results root.
"""

from __future__ import annotations

import contextlib
import copy
import json
import logging
import os
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, cast

from bench.core.io import current_umask, error_text, storage_errors
from bench.results.cache import holds_results
from rankers.errors import RankerError

if TYPE_CHECKING:
    import torch

log = logging.getLogger(__name__)

#: the description every exported folder carries
EXPORT_FILE = "bench-export.json"
#: the activation that leaves a CrossEncoder's logit as it is (``predict`` returns the score)
IDENTITY = "torch.nn.modules.linear.Identity"


@dataclass(frozen=True)
class Exported:
    """What :meth:`~rankers.hooks.Exportable.export` wrote."""

    #: the library and class that load the folder
    loads_with: str
    #: Python that loads it and scores; ``{folder}`` stands for the folder's path
    example: str
    #: what the exported model does differently from `bench run`, if anything
    notes: tuple[str, ...] = ()

    def example_for(self, folder: Path) -> str:
        """:attr:`example` with the folder's path in place of ``{folder}``."""
        return self.example.replace("{folder}", repr(str(folder)))

    def describe(self, folder: Path, source: dict[str, Any]) -> dict[str, Any]:
        return {
            "loads_with": self.loads_with,
            "example": self.example_for(folder),
            "notes": list(self.notes),
            "source": source,
        }


def export_files(folder: Path) -> frozenset[str]:
    """The files the export in ``folder`` wrote, as its :data:`EXPORT_FILE` (the marker every
    export carries) lists them; a :class:`RankerError` naming the marker and what is wrong when
    it is missing or is not an export's description: a JSON object that says how the folder
    loads (``loads_with``) and lists the files written (``files``)."""
    marker = folder / EXPORT_FILE
    if not marker.is_file():
        raise RankerError(f"{folder}: no {EXPORT_FILE}")
    try:
        described = json.loads(marker.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise RankerError(f"{marker}: not valid JSON ({exc})") from exc
    except OSError as exc:
        raise RankerError(f"{marker}: cannot be read ({error_text(exc)})") from exc
    if not isinstance(described, dict):
        kind = type(described).__name__
        raise RankerError(f"{marker}: holds a JSON {kind}, not an export's description")
    if not isinstance(described.get("loads_with"), str):
        raise RankerError(f"{marker}: damaged (no 'loads_with', which says how the folder loads)")
    files = described.get("files")
    if not isinstance(files, list) or not all(isinstance(f, str) for f in files):
        raise RankerError(
            f"{marker}: damaged or written by an older bench (no 'files': the list of the files "
            "the export wrote)"
        )
    return frozenset(files)


def _written(folder: Path) -> list[str]:
    """Every file under ``folder`` (symbolic links as files), relative, in POSIX form."""
    found = []
    for top, dirs, names in os.walk(folder):
        here = Path(top)
        linked = [d for d in dirs if (here / d).is_symlink()]
        dirs[:] = [d for d in dirs if d not in linked]
        found += [(here / n).relative_to(folder).as_posix() for n in [*names, *linked]]
    return sorted(found)


def _foreign(folder: Path, listed: frozenset[str]) -> list[str]:
    """What ``folder`` holds that its export did not write: files not in ``listed`` (nor the
    marker) and folders that hold none of the listed files."""
    parents = {parent.as_posix() for name in listed for parent in Path(name).parents}
    foreign = [f for f in _written(folder) if f != EXPORT_FILE and f not in listed]
    for top, dirs, _ in os.walk(folder):
        for name in dirs:
            rel = (Path(top) / name).relative_to(folder).as_posix()
            if rel not in parents and not any(f.startswith(rel + "/") for f in foreign):
                foreign.append(rel + "/")
    return sorted(foreign)


def _refuse(target: Path, why: str) -> NoReturn:
    raise RankerError(
        f"{target}: {why}; export into a new or empty folder (or, with --overwrite, over an "
        "earlier export)"
    )


def _guarded(source: Path, results_roots: Sequence[Path], target: Path) -> list[tuple[str, Path]]:
    """The folders an export must not be, hold or lie inside: the model folder being exported
    and every results root: the configured ones and any folder above ``target`` or ``source``
    that holds results (:func:`bench.results.cache.holds_results`)."""
    guarded = [("the model folder being exported", source)]
    guarded += [("the results root", Path(root).expanduser().resolve()) for root in results_roots]
    above = (target, *target.parents, *source.parents)
    guarded += [("the results root", folder) for folder in above if holds_results(folder)]
    return guarded


def export_target(
    out: Path, source: Path, results_roots: Sequence[Path] = (), overwrite: bool = False
) -> Path:
    """``out`` as an absolute path, once an export there can lose nothing but an earlier export;
    else a :class:`RankerError` naming the folder and why. Checked before any model is loaded.

    Refused: the filesystem root, the current folder and any folder above it (a rename would
    pull the folder from under the shell); a folder that is, holds or lies inside ``source`` or
    a results root (:func:`_guarded`); a file; a folder with files that is not an earlier export
    (:func:`export_files`), or one that holds files its export did not write; an earlier
    export unless ``overwrite``.
    """
    target = Path(out).expanduser().resolve()
    source = Path(source).expanduser().resolve()
    if target == Path(target.anchor):
        _refuse(target, "is the filesystem root")
    cwd = Path.cwd().resolve()
    if cwd.is_relative_to(target):
        _refuse(target, "is the current folder" if cwd == target else "holds the current folder")
    for what, folder in _guarded(source, results_roots, target):
        if target == folder:
            _refuse(target, f"is {what}")
        if folder.is_relative_to(target):
            _refuse(target, f"holds {what} {folder}")
        if target.is_relative_to(folder):
            _refuse(target, f"lies inside {what} {folder}")
    _check_replaceable(target, overwrite)
    return target


def _check_replaceable(target: Path, overwrite: bool) -> None:
    """``target`` is new, an empty folder, or an earlier export that ``overwrite`` replaces."""
    if target.exists() and not target.is_dir():
        _refuse(target, "is a file, not a folder")
    if not target.is_dir() or not any(target.iterdir()):
        return
    if not (target / EXPORT_FILE).is_file():
        _refuse(target, f"exists, is not empty and is not an earlier export (no {EXPORT_FILE})")
    try:
        listed = export_files(target)
    except RankerError as exc:
        _refuse(target, f"is not an earlier export: {exc}")
    foreign = _foreign(target, listed)
    if foreign:
        more = f" and {len(foreign) - 10} more" if len(foreign) > 10 else ""
        _refuse(
            target,
            f"holds what the earlier export there did not write ({', '.join(foreign[:10])}{more}),"
            " which an export never deletes; move it away first",
        )
    if not overwrite:
        raise RankerError(
            f"{target}: exists and is not empty: it holds an earlier export (pass --overwrite "
            "to replace it)"
        )


def _write_errors() -> tuple[type[BaseException], ...]:
    """What a failed write raises: an OS error, or safetensors' own error for the same (a full
    disk under ``save_pretrained``)."""
    try:
        from safetensors import SafetensorError
    except ImportError:  # pragma: no cover - a transformers dependency
        return (OSError,)
    return (OSError, SafetensorError)


@contextlib.contextmanager
def staged(target: Path, overwrite: bool = False) -> Iterator[Path]:
    """A fresh folder beside ``target`` to write the export into; renamed to ``target`` when the
    block ends without error (removed otherwise). ``target`` must be new, empty or, with
    ``overwrite``, an earlier export (:func:`export_target` checks the rest first). A failed
    write (a full disk) is a :class:`RankerError` naming ``target``, which is left as it was."""
    target = Path(target).expanduser().resolve()
    _check_replaceable(target, overwrite)
    with storage_errors(target.parent):
        target.parent.mkdir(parents=True, exist_ok=True)
        stage = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}.export-"))
        os.chmod(stage, 0o777 & ~current_umask())  # a plain folder's mode, not mkdtemp's 0700
    try:
        yield stage
    except _write_errors() as exc:
        shutil.rmtree(stage, ignore_errors=True)
        raise RankerError(
            f"{target}: the export was not written ({error_text(exc)}); {_left(target)}"
        ) from exc
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        raise
    _publish(stage, target)


def _left(target: Path) -> str:
    return "the earlier export there is as it was" if target.exists() else "nothing was written"


def _publish(stage: Path, target: Path) -> None:
    """Rename ``stage`` to ``target``. An earlier export there is moved aside first, removed
    once the new one is in place and moved back if the rename fails."""
    old: Path | None = None
    moved = False
    try:
        if target.exists():
            old = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}.export-old-"))
            target.rename(old)  # a rename onto the empty folder mkdtemp made
            moved = True
        stage.rename(target)
    except OSError as exc:
        if moved and old is not None:
            old.rename(target)
        elif old is not None:
            old.rmdir()
        shutil.rmtree(stage, ignore_errors=True)
        raise RankerError(
            f"{target}: the export was not put in place ({error_text(exc)}); {_left(target)}"
        ) from exc
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
        if old.exists():
            log.warning("%s: could not remove the earlier export moved to %s", target, old)


def write_description(
    stage: Path, target: Path, exported: Exported, source: dict[str, Any]
) -> None:
    """:data:`EXPORT_FILE` in ``stage``: what was exported (the ranker's ``describe()``) and how
    to load it from ``target``, where the folder ends up."""
    described = exported.describe(target, source)
    described["files"] = [*_written(stage), EXPORT_FILE]
    text = json.dumps(described, indent=2, sort_keys=True, default=str)
    (stage / EXPORT_FILE).write_text(text + "\n", encoding="utf-8")


def refuse_sorted_items(ranker: str, sort_item_tokens: bool) -> None:
    """The order ablation's ``sort_item_tokens`` rewrites item texts before encoding; no
    exported format can say so, so such a model is not exported."""
    if sort_item_tokens:
        raise RankerError(
            f"{ranker}: a model trained with sort_item_tokens=true reads items with sorted "
            "tokens, which an exported folder cannot express; export one trained without it"
        )


def _st_major() -> int:
    import sentence_transformers

    return int(sentence_transformers.__version__.split(".", 1)[0])


def cross_encoder_folder(
    folder: Path,
    encoder: Any,
    tokenizer: Any,
    classifier: torch.nn.Linear,
    pooling: str,
    max_length: int,
) -> str:
    """A sentence-transformers ``CrossEncoder`` in ``folder`` whose ``predict`` is the logit of
    ``classifier`` on ``pooling`` of ``encoder`` (a BERT-style ``PreTrainedModel``); returns the
    class the folder loads with."""
    import torch
    from transformers import AutoModelForSequenceClassification

    weight = classifier.weight.detach().float().cpu()
    bias = classifier.bias.detach().float().cpu()
    if pooling == "pooler":
        # BertForSequenceClassification is exactly classifier(pooler(cls)): one folder any
        # CrossEncoder (sentence-transformers 3 onwards) loads as it loads any reranker
        config = copy.deepcopy(encoder.config)
        config.num_labels = 1
        config.architectures = None
        model = AutoModelForSequenceClassification.from_config(config)
        getattr(model, model.base_model_prefix).load_state_dict(encoder.state_dict())
        head = model.classifier
        with torch.no_grad():
            head.weight.copy_(weight)
            head.bias.copy_(bias)
        model.config.sentence_transformers = {"activation_fn": IDENTITY}
        model.save_pretrained(folder)
        tokenizer = copy.deepcopy(tokenizer)  # the ranker's own keeps its settings
        tokenizer.model_max_length = max_length
        tokenizer.save_pretrained(folder)
        return "sentence_transformers.CrossEncoder"
    if _st_major() < 6:
        raise RankerError(
            f"monobert: pooling={pooling} exports as a CrossEncoder built from modules, which "
            "needs sentence-transformers >= 6 (installed: "
            f"{__import__('sentence_transformers').__version__}); pooling=pooler exports on any"
        )
    from sentence_transformers import CrossEncoder
    from sentence_transformers.base.modules import Dense, Transformer
    from sentence_transformers.sentence_transformer.modules import Pooling

    encoder.save_pretrained(folder / "_encoder")
    tokenizer.save_pretrained(folder / "_encoder")
    transformer = Transformer(str(folder / "_encoder"), max_seq_length=max_length)
    size = int(encoder.config.hidden_size)
    pool = Pooling(size, pooling_mode=pooling)
    dense = Dense(
        size,
        1,
        activation_function=torch.nn.Identity(),
        init_weight=weight.clone(),
        init_bias=bias.clone(),
        module_output_name="scores",
    )
    model = CrossEncoder(modules=[transformer, pool, dense], activation_fn=torch.nn.Identity())
    model.save(str(folder))
    shutil.rmtree(folder / "_encoder")
    return "sentence_transformers.CrossEncoder"


def sentence_transformer_folder(
    folder: Path,
    model: Any,
    query_prefix: str,
    document_prefix: str,
    similarity: str,
    max_length: int | None,
) -> None:
    """A copy of the dual encoder's ``SentenceTransformer`` in ``folder`` with its prefixes as
    the prompts ``query`` / ``document`` and its similarity (``cosine`` or ``dot``) saved."""
    from sentence_transformers import SentenceTransformer

    model.save(str(folder))
    out = SentenceTransformer(str(folder), device="cpu")  # a copy: the ranker's own is untouched
    out.prompts = {"query": query_prefix, "document": document_prefix}
    cast(Any, out).similarity_fn_name = {"cosine": "cosine", "dot": "dot"}[similarity]
    if max_length is not None:
        out.max_seq_length = max_length
    out.save(str(folder))
