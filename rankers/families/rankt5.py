"""RankT5 (Zhuang et al., 2023): an encoder-decoder scoring a pair by one output logit.

Input ``"Query: {query} Document: {document}"``; the decoder gets only its start token, and the
score is the logit of a designated vocabulary token at that first decoding step (the
``Soyoung97/RankT5-base`` port uses ``<extra_id_10>``). Trained with a listwise loss over each
query's candidates - by default the paper's softmax cross-entropy, all positives of a list sharing
the target mass - through the shared list trainer :func:`rankers.fit.lists.fit_lists`.

Backbones: any Hugging Face seq2seq LM (T5, or a saved folder) by id or path. Offline there are no
T5 weights, so the default ``minilm-l6-encdec`` is an ``EncoderDecoderModel`` built from
all-MiniLM-L6-v2 on both sides: the decoder's cross-attention and LM-head transform are new
(seeded) weights, and the score token defaults to ``[unused0]``. Any ``encdec:<model>`` builds the
same from another BERT. :meth:`RankT5Ranker.describe` records the backbone class and ``is_t5``, so
such a row is never reported as T5.

Checkpoint layout (``save(path)``): ``path/model/`` (``save_pretrained`` weights + tokenizer) and
``path/ranker.json`` (describe() and the training summary).
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import random
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from bench.core.device import resolve_device
from bench.core.trained import TrainingSummary
from bench.data.model import Candidate, CandidateList, RankingSplit, relevant
from rankers.base import (
    DTYPE_NAMES,
    RUNTIME,
    SCORE,
    TRAINING,
    Ranker,
    RankerError,
    TrainingConfig,
    inherit_option,
    option,
)
from rankers.hooks import Fits, LatencyParts, Persistent
from rankers.io.models import expected_new_weights, resolve_model, weights_hash
from rankers.itemorder import item_texts, sort_items_option
from rankers.trainconfig import ListTrainingConfig

if TYPE_CHECKING:
    import torch
    from transformers import PreTrainedModel

log = logging.getLogger(__name__)

#: build an EncoderDecoderModel from this BERT (alias, path or id) on both sides
ENCDEC_PREFIX = "encdec:"
MODEL_ALIASES: dict[str, str] = {"minilm-l6-encdec": "encdec:minilm-l6"}
#: score_token=None picks the first of these the vocabulary has (T5 port, then BERT)
DEFAULT_SCORE_TOKENS: tuple[str, ...] = ("<extra_id_10>", "[unused0]")
TEMPLATE = "Query: {query} Document: {document}"
MODEL_DIR = "model"
T5_TYPES = ("t5", "mt5", "umt5")


@dataclasses.dataclass
class RankT5Config(ListTrainingConfig):
    """The shared training options (:class:`~rankers.base.TrainingConfig`), scoring options, then
    the list trainer's options (field names shared with the encoder rankers, as
    :func:`rankers.fit.lists.fit_lists` reads them). A loaded checkpoint restores the score
    options (:attr:`Role.SCORE <rankers.base.Role.SCORE>`)."""

    dtype: str = inherit_option(ListTrainingConfig, "dtype", "auto", choices=DTYPE_NAMES)
    model: str = option(
        "minilm-l6-encdec",
        role=TRAINING | SCORE,
        help="minilm-l6-encdec | encdec:<BERT alias/path/id> | seq2seq LM alias, folder or id",
    )
    score_token: str | None = option(
        None,
        role=TRAINING | SCORE,
        help="token whose first-step logit is the score (none: <extra_id_10> or [unused0])",
    )
    template: str = option(
        TEMPLATE,
        role=TRAINING | SCORE,
        help="encoder input; must contain {query} and {document}",
    )
    max_length: int = option(
        256, role=TRAINING | SCORE, min=1, help="tokens per encoder input (the document end is cut)"
    )
    batch_size: int = option(32, role=RUNTIME, min=1, help="pairs per scoring forward pass")
    sort_item_tokens: bool = sort_items_option()
    seed: int = inherit_option(
        TrainingConfig, "seed", 0, help="new weights' initialisation, list cuts and training order"
    )
    loss: str = inherit_option(
        ListTrainingConfig,
        "loss",
        "ce",
        help="rankers.compute.losses name; ce: the paper's listwise softmax cross-entropy",
    )
    list_size: int | None = option(
        32,
        role=TRAINING,
        min=2,
        help="training lists cut once to this many (positives that fit, sampled negatives)",
    )
    epochs: int = inherit_option(TrainingConfig, "epochs", 1, help="passes over the train lists")
    train_batch_queries: int = inherit_option(
        ListTrainingConfig, "train_batch_queries", 4, help="candidate lists per optimisation step"
    )
    # an encoder-decoder pass per pair: a default step of 4 lists x 32 pairs peaked at 4.3 GB in
    # one pass, 3.4 GB in micro-batches of 64 pairs
    train_micro_items: int = inherit_option(
        ListTrainingConfig,
        "train_micro_items",
        64,
        help="most (query, document) pairs one forward/backward pass of a training step holds: "
        "a larger step is split into micro-batches whose gradients add up (a long list in "
        "chunks, scored first), which bounds its memory (0: the whole step at once)",
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        if "{query}" not in self.template or "{document}" not in self.template:
            raise RankerError(
                f"option template={self.template!r}: must contain {{query}} and {{document}}"
            )


class RankT5Ranker(Ranker[RankT5Config], LatencyParts, Fits, Persistent):
    """Pointwise seq2seq scorer (one pair per encoder pass), trained listwise."""

    name: ClassVar[str] = "rankt5"
    family: ClassVar[str] = "seq2seq"
    Config = RankT5Config
    pointwise: ClassVar[bool] = True
    trainable: ClassVar[bool] = True
    #: the list trainer (:func:`rankers.fit.lists.fit_lists`) splits every batch over processes
    distributed_training: ClassVar[bool] = True

    def __init__(self, config: RankT5Config | None = None, device: str = "cpu") -> None:
        super().__init__(config, device)
        self.device = resolve_device(device)
        self._module: PreTrainedModel | None = None
        self._tokenizer: Any = None
        self._score_id = -1
        self._start_id = -1
        self._info: dict[str, Any] = {}
        self.training_summary: TrainingSummary | None = None
        from rankers.compute.precision import CastCache

        # the LM head stays float32: the score-token logit is not rounded to bf16
        self._cast: CastCache[PreTrainedModel] = CastCache(lambda m: [m.get_output_embeddings()])

    # -- model ---------------------------------------------------------------------------------
    @property
    def module(self) -> PreTrainedModel:
        """The seq2seq LM, loaded on first use (eval mode, on ``device``)."""
        if self._module is None:
            self._build(self.cfg.model)
        assert self._module is not None
        return self._module

    def untrained_weights(self) -> str | None:
        if self.training_summary is not None or self._info.get("checkpoint"):
            return None
        spec = MODEL_ALIASES.get(self.cfg.model.strip().lower(), self.cfg.model.strip())
        return (
            "the decoder's cross-attention and LM head" if spec.startswith(ENCDEC_PREFIX) else None
        )

    @property
    def tokenizer(self) -> Any:
        _ = self.module
        return self._tokenizer

    @property
    def score_token_id(self) -> int:
        _ = self.module
        return self._score_id

    @property
    def decoder_start_token_id(self) -> int:
        _ = self.module
        return self._start_id

    def _build(self, spec: str) -> None:
        """Load a seq2seq LM (or build the BERT encoder-decoder) and resolve the score token."""
        import torch
        from transformers import (
            AutoConfig,
            AutoModelForSeq2SeqLM,
            AutoTokenizer,
            EncoderDecoderModel,
        )

        spec = MODEL_ALIASES.get(spec.strip().lower(), spec.strip())
        try:
            if spec.startswith(ENCDEC_PREFIX):
                ref = resolve_model(spec[len(ENCDEC_PREFIX) :])
                tokenizer = AutoTokenizer.from_pretrained(ref.path)
                # new cross-attention and LM-head transform: seeded, independent of prior RNG use
                with (
                    torch.random.fork_rng(devices=[]),
                    expected_new_weights("rankt5 decoder cross-attention and LM head"),
                ):
                    torch.manual_seed(self.cfg.seed)
                    model = EncoderDecoderModel.from_encoder_decoder_pretrained(ref.path, ref.path)
                # the BERT2BERT convention: the decoder starts from [CLS]
                model.config.decoder_start_token_id = tokenizer.cls_token_id
                model.config.pad_token_id = tokenizer.pad_token_id
                model_id, new_weights = ENCDEC_PREFIX + ref.model_id, "cross-attention, LM head"
            else:
                ref = resolve_model(spec)
                if not AutoConfig.from_pretrained(ref.path).is_encoder_decoder:
                    raise RankerError(
                        f"rankt5: {spec!r} is not an encoder-decoder model; use a T5 or "
                        f"'{ENCDEC_PREFIX}<bert>'"
                    )
                tokenizer = AutoTokenizer.from_pretrained(ref.path)
                model = AutoModelForSeq2SeqLM.from_pretrained(ref.path)
                model_id, new_weights = ref.model_id, None
        except (OSError, ValueError) as exc:  # missing folder, offline hub id, bad config
            raise RankerError(f"rankt5: cannot load model {spec!r}: {exc}") from exc
        model = model.float()  # a float16 checkpoint too: see EncoderRanker._build
        start = model.config.decoder_start_token_id
        if start is None:
            raise RankerError(f"rankt5: model {spec!r} has no decoder_start_token_id")
        self._score_id = _score_token_id(tokenizer, self.cfg.score_token, spec)
        vocab = int(model.get_output_embeddings().weight.shape[0])
        if self._score_id >= vocab:
            raise RankerError(
                f"rankt5: score token id {self._score_id} outside the model's {vocab} logits"
            )
        self._start_id = int(start)
        self._module = model.to(self.device).eval()
        self._tokenizer = tokenizer
        if not self._info:  # a loaded checkpoint keeps the provenance of its base
            self._info = {
                "model_id": model_id,
                "base_weights_hash": weights_hash(ref.path) if ref.local else None,
                "new_weights": new_weights,
            }
        log.info("rankt5: loaded %s (%s) on %s", spec, type(model).__name__, self.device)

    def inference(self) -> contextlib.AbstractContextManager[None]:
        """eval mode and no autograd (the dtype is the scoring module's: :meth:`scoring_module`)."""
        from rankers.compute.precision import evaluating  # torch, imported when first scoring

        return evaluating(self.module)

    def scoring_module(self) -> Any:
        """:attr:`module`, or its copy cast once to the scoring dtype (see ``dtype``)."""
        from rankers.compute.precision import scoring_dtype

        return self._cast.get(self.module, scoring_dtype(self.cfg.dtype, self.device))

    def weights_note(self, checkpoint: str | None) -> str:
        if checkpoint:
            return f"trained ({checkpoint})"
        if self.untrained_weights():
            return "untrained cross-attention on the pre-trained encoder (same cost as trained)"
        return "pre-trained weights"

    # -- inputs and forward --------------------------------------------------------------------
    def pair_ids(self, query: str, documents: Sequence[str]) -> list[list[int]]:
        """Token ids of the template for each document, cut at ``max_length``."""
        if not documents:
            return []
        docs = item_texts(self.cfg, documents)  # the order ablation, training and scoring alike
        texts = [self.cfg.template.format(query=query, document=d) for d in docs]
        enc = self.tokenizer(texts, truncation=True, max_length=self.cfg.max_length)
        return [list(ids) for ids in enc["input_ids"]]

    def logits(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        module: Any = None,
        full: bool | None = None,
    ) -> torch.Tensor:
        """(P,) score-token logits at the first decoding step, decoder input = start token.

        ``module``: a wrapper of :attr:`module` to call instead (the trainer's DDP model);
        ``full``: whether no pair is padded, known on the host
        (:func:`~rankers.inputs.masks.encoder_mask`: the model then reads nothing back)."""
        import torch

        from rankers.inputs.masks import encoder_mask

        start = torch.full(
            (input_ids.shape[0], 1), self._start_id, dtype=torch.long, device=input_ids.device
        )
        model = module if module is not None else self.module
        out = model(
            input_ids=input_ids,
            attention_mask=encoder_mask(model, attention_mask, full),
            decoder_input_ids=start,
            use_cache=False,
        )
        return out.logits[:, 0, self._score_id]

    def _pad(self, rows: Sequence[Sequence[int]]) -> tuple[torch.Tensor, torch.Tensor, bool]:
        """Ids and mask of ``rows`` on the device, and whether no row is padded (host)."""
        from rankers.inputs.batching import pad_rows

        ids = pad_rows(rows, int(self.tokenizer.pad_token_id)).to(self.device)
        mask = pad_rows([[1] * len(r) for r in rows], 0).to(self.device)
        return ids, mask, len({len(r) for r in rows}) <= 1

    def prepare(self, lists: Sequence[tuple[str, Sequence[str]]]) -> dict[str, Any]:
        """All pairs of several (query, documents) lists as one padded batch (training): ids,
        mask and scatter indices reach the device in one :func:`~rankers.inputs.transfer.upload`
        copy."""
        from rankers.inputs.batching import list_arrays, pad_array
        from rankers.inputs.transfer import upload

        rows = [pair for query, docs in lists for pair in self.pair_ids(query, docs)]
        n_items = [len(docs) for _, docs in lists]
        arrays = {
            "input_ids": pad_array(rows, int(self.tokenizer.pad_token_id)),
            "attention_mask": pad_array([[1] * len(r) for r in rows], 0),
            **list_arrays(n_items),
        }
        tensors = upload(arrays, self.device)
        return {**tensors, "n_items": n_items}

    def forward(
        self, batch: dict[str, Any], module: Any = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Logits (B, N_max) and item mask: the interface of :func:`rankers.fit.lists.fit_lists`."""
        from rankers.inputs.batching import scatter_to_lists

        values = self.logits(batch["input_ids"], batch["attention_mask"], module).float()
        return scatter_to_lists(
            values, batch["list_index"], batch["item_index"], batch["n_items"], batch.get("lengths")
        )

    # -- scoring -------------------------------------------------------------------------------
    def score(self, lists: Sequence[CandidateList]) -> list[np.ndarray]:
        """Score-token logits; all pairs of the call length-sorted into ``batch_size`` batches."""
        from rankers.inputs.batching import bucketed_scores

        rows = [ids for cl in lists for ids in self.pair_ids(cl.query.text, cl.texts)]
        module = self.scoring_module()

        def score_batch(batch: list[list[int]]) -> torch.Tensor:
            ids, mask, full = self._pad(batch)
            return self.logits(ids, mask, module, full)

        with self.inference():
            return bucketed_scores(
                rows, [len(cl) for cl in lists], self.cfg.batch_size, score_batch
            )

    # -- training ------------------------------------------------------------------------------
    def training_lists(self, split: RankingSplit, rng: random.Random | None = None) -> RankingSplit:
        """``split`` with each list cut to ``list_size`` (see the option); ``rng`` samples the
        negatives, None keeps the first ones in list order."""
        size = self.cfg.list_size
        if size is None:
            return split
        lists = []
        for cl in split.lists:
            rel = relevant(split.qrels, cl.query.qid, split.relevance_level)
            pos = [c for c in cl.candidates if c.docid in rel]
            neg = [c for c in cl.candidates if c.docid not in rel]
            lists.append(CandidateList(cl.query, _cut(pos, neg, size, rng)))
        return dataclasses.replace(
            split, lists=lists, notes=[*split.notes, f"rankt5: lists cut to {size} candidates"]
        )

    def fit(self, train: RankingSplit, dev: RankingSplit | None = None) -> TrainingSummary:
        """Listwise fine-tuning with ``loss`` (softmax CE) by the shared list trainer."""
        from rankers.fit.lists import fit_lists

        cut = self.training_lists(train, random.Random(self.cfg.seed))
        summary = fit_lists(self, cut, dev)
        summary.extra.update(list_size=self.cfg.list_size, train_candidates=cut.n_candidates)
        self.training_summary = summary
        return summary

    def training_loss(self, split: RankingSplit) -> float:
        """Mean ``loss`` over ``split``'s lists (cut without sampling), eval mode, no autograd."""
        from rankers.compute.losses import get_loss
        from rankers.fit.lists import pad_targets
        from rankers.fit.targets import grade_targets

        cut = self.training_lists(split)
        lists = [cl for cl in cut.lists if len(cl)]
        targets, _ = pad_targets(grade_targets(lists, cut.qrels))
        with self.inference():
            logits, mask = self.forward(self.prepare([(cl.query.text, cl.texts) for cl in lists]))
            return float(get_loss(self.cfg.loss)(logits, targets.to(logits.device), mask))

    # -- persistence ---------------------------------------------------------------------------
    def saved_parts(self) -> tuple[str, ...]:
        return (MODEL_DIR,)

    def write_weights(self, folder: Path) -> None:
        """``folder/model``: save_pretrained weights + tokenizer."""
        self.module.save_pretrained(str(folder / MODEL_DIR))
        self.tokenizer.save_pretrained(str(folder / MODEL_DIR))

    def restored_options(self, meta: dict[str, Any], folder: Path) -> dict[str, Any]:
        # the token actually used (the option may have been none: the model's default)
        return {"score_token": meta.get("score_token", meta["config"].get("score_token"))}

    def read_weights(self, folder: Path, meta: dict[str, Any]) -> None:
        self._info = {
            "model_id": meta.get("model_id"),
            "base_weights_hash": meta.get("base_weights_hash"),
            "new_weights": meta.get("new_weights"),
            "checkpoint": str(folder),
        }
        self._build(str(folder / MODEL_DIR))

    # -- provenance ----------------------------------------------------------------------------
    def describe(self) -> dict[str, Any]:
        from rankers.io.models import state_hash

        model = self.module
        config = model.config
        parts = [config.encoder, config.decoder] if config.model_type == "encoder-decoder" else []
        return {
            **super().describe(),
            **self._info,
            "weights_hash": state_hash(model),
            "backbone": type(model).__name__,
            "backbone_parts": [p.model_type for p in parts] or [config.model_type],
            "is_t5": config.model_type in T5_TYPES,
            "score_token": self.tokenizer.convert_ids_to_tokens(self._score_id),
            "score_token_id": self._score_id,
            "decoder_start_token_id": self._start_id,
            "fine_tuned": self.training_summary is not None,
        }


def _score_token_id(tokenizer: Any, token: str | None, spec: str) -> int:
    """Vocabulary id of ``token`` (or of the first default the vocabulary has); never [UNK]."""
    vocab = tokenizer.get_vocab()
    if token is None:
        found = next((t for t in DEFAULT_SCORE_TOKENS if t in vocab), None)
        if found is None:
            raise RankerError(
                f"rankt5: the tokenizer of {spec!r} has none of {DEFAULT_SCORE_TOKENS}; "
                "set option score_token"
            )
        return int(vocab[found])
    if token not in vocab:
        raise RankerError(f"rankt5: score_token {token!r} is not in the vocabulary of {spec!r}")
    return int(vocab[token])


def _cut(
    pos: Sequence[Candidate], neg: Sequence[Candidate], size: int, rng: random.Random | None
) -> tuple[Candidate, ...]:
    """At most ``size`` candidates: up to ``size - 1`` negatives, positives filling the rest."""
    if len(pos) + len(neg) <= size:
        return (*pos, *neg)
    n_neg = min(len(neg), size - 1) if pos else min(len(neg), size)
    n_pos = min(len(pos), size - n_neg)
    if rng is None:
        return (*pos[:n_pos], *neg[:n_neg])
    return (*rng.sample(list(pos), n_pos), *rng.sample(list(neg), n_neg))


__all__ = ["RankT5Config", "RankT5Ranker"]
