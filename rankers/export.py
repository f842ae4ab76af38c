"""Models out: a ranker's weights as a folder another library loads (``bench export``).

Each exporting ranker implements :meth:`rankers.base.Ranker.export` with the builders here, so
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
  no library has its layout, so :func:`rankers.crossjem.from_exported` is the loader.

A folder is written into a staging folder beside the target and renamed into place
(:func:`staged`), so an interrupted export leaves no half folder under the target's name; an
existing target is refused unless ``overwrite``. Every export carries :data:`EXPORT_FILE`, which
says what was exported, from where, and how to load it.
"""

from __future__ import annotations

import contextlib
import copy
import json
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from rankers.errors import RankerError

if TYPE_CHECKING:
    import torch

#: the description every exported folder carries
EXPORT_FILE = "bench-export.json"
#: the activation that leaves a CrossEncoder's logit as it is (``predict`` returns the score)
IDENTITY = "torch.nn.modules.linear.Identity"


@dataclass(frozen=True)
class Exported:
    """What :meth:`~rankers.base.Ranker.export` wrote."""

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


@contextlib.contextmanager
def staged(target: Path, overwrite: bool = False) -> Iterator[Path]:
    """A fresh folder to write the export into; renamed to ``target`` when the block ends
    without error (removed otherwise)."""
    target = Path(target)
    if target.exists() and (not target.is_dir() or any(target.iterdir())) and not overwrite:
        raise RankerError(f"{target}: exists and is not empty (pass --overwrite to replace it)")
    stage = target.with_name(f".{target.name}.export-tmp")
    shutil.rmtree(stage, ignore_errors=True)
    stage.mkdir(parents=True)
    try:
        yield stage
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        raise
    old = target.with_name(f".{target.name}.export-old")
    if target.exists():  # --overwrite: the old folder goes only once the new one is in place
        shutil.rmtree(old, ignore_errors=True)
        target.rename(old)
    stage.rename(target)
    if old.is_dir():
        shutil.rmtree(old)
    elif old.exists():
        old.unlink()


def write_description(
    stage: Path, target: Path, exported: Exported, source: dict[str, Any]
) -> None:
    """:data:`EXPORT_FILE` in ``stage``: what was exported (the ranker's ``describe()``) and how
    to load it from ``target``, where the folder ends up."""
    text = json.dumps(exported.describe(target, source), indent=2, sort_keys=True, default=str)
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
