"""Dual encoders (DPR, ANCE): query and item embedded separately, scored by their similarity.

Both rankers are one SentenceTransformer scored the same way; they differ only in where training
hard negatives come from (:attr:`DenseRanker.miner`):

* **DPR** - BM25 (:class:`rankers.inputs.lexical.BM25Index` over the train split's collection),
  mined once.
* **ANCE** - the encoder being trained, re-mined at the start of every epoch with the current
  weights (the original refreshes an ANN index asynchronously; per-epoch refresh is the
  synchronous equivalent at this data size).

Training (pairs, mining, the in-batch contrastive loss) is :class:`rankers.fit.dense.DenseSteps`,
imported only inside :meth:`DenseRanker.fit`, so a zero-shot run's key leaves it out.

Scoring modes: ``precompute=false`` encodes query and items at query time (what a re-ranker facing
unseen items pays); ``precompute=true`` embeds every distinct candidate of the split once in
:meth:`DenseRanker.index` and :meth:`DenseRanker.score` only encodes queries ("item embeddings
precomputed", the production setting of the paper's ANCE latency).

Scoring is ``encode`` taken apart (:mod:`rankers.families.dense_steps`): the host step tokenises
in ``encode``'s order and batches and uploads once, the model step runs the model's own modules
with the attention mask chosen on the host and reads nothing back until the scores; the same
embeddings as ``encode``, bit for bit. ``encode`` itself (:meth:`DenseRanker.score_library`) stays
as the oracle and scores inside :meth:`DenseRanker.fit` and for models ``encode`` does more for.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, cast

import numpy as np

from bench.core.trained import TrainingSummary
from bench.data.model import CandidateList, RankingSplit
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
from rankers.hooks import Exportable, Fits, LatencyParts, LatencyVariant, Persistent
from rankers.io.models import ModelRef, resolve_model, state_hash, weights_hash
from rankers.itemorder import item_texts, sort_items_option
from rankers.trainconfig import ListTrainingConfig

if TYPE_CHECKING:
    import torch
    from sentence_transformers import SentenceTransformer

    from rankers.families.dense_steps import DeviceBatches
    from rankers.fit.dense import MiningRound
    from rankers.io.export import Exported

log = logging.getLogger(__name__)

#: the SentenceTransformer folder inside a save() folder
MODEL_DIR = "model"

SIMILARITIES: tuple[str, ...] = ("cosine", "dot")


@dataclass
class DenseConfig(TrainingConfig):
    """The shared training options (:class:`~rankers.base.TrainingConfig`), scoring options, then
    the other fine-tuning options (training options are used by :meth:`DenseRanker.fit` only).
    A loaded checkpoint restores the score options (:attr:`Role.SCORE <rankers.base.Role.SCORE>`)
    and its own folder becomes ``model``."""

    model: str = option(
        "minilm-l6",
        role=TRAINING,
        help="alias, Hugging Face id or SentenceTransformer folder (a loaded checkpoint's own)",
    )
    similarity: str | None = option(
        None,
        role=TRAINING | SCORE,
        choices=SIMILARITIES,
        help="none: what the model's own config says, else cosine",
    )
    batch_size: int = option(
        64, role=RUNTIME, min=1, help="encoding batch size (scoring, indexing, ANCE mining)"
    )
    max_length: int | None = option(
        None, role=TRAINING | SCORE, min=1, help="token limit (none: the model's max_seq_length)"
    )
    query_prefix: str = option("", role=TRAINING | SCORE, help="text put before every query")
    document_prefix: str = option("", role=TRAINING | SCORE, help="text put before every item")
    sort_item_tokens: bool = sort_items_option()
    precompute: bool = option(
        False,
        role=RUNTIME,
        help="embed the split's items once in index(); score() then only encodes queries",
    )
    dtype: str = inherit_option(
        ListTrainingConfig,
        "dtype",
        "auto",
        help="encoding precision, not part of the trained model: weights cast once to it (auto: "
        "bf16 on a GPU with native bf16, else fp16; fp32 on CPU)",
        choices=DTYPE_NAMES,
    )
    train_dtype: str = inherit_option(
        ListTrainingConfig,
        "train_dtype",
        "auto",
        help="fine-tuning runs float32; dev scoring in this precision selects the epoch (auto: "
        "float32 on CPU)",
    )
    lr: float = inherit_option(TrainingConfig, "lr", 2e-5)
    epochs: int = inherit_option(TrainingConfig, "epochs", 1, help="passes over the training pairs")
    train_batch_size: int = option(
        32, role=TRAINING, min=1, help="(query, positive) pairs per step"
    )
    warmup_ratio: float = inherit_option(ListTrainingConfig, "warmup_ratio", 0.1)
    scale: float | None = option(
        None,
        role=TRAINING,
        help="logit multiplier (1 / temperature); none: 20 for cosine, 1 for dot",
    )
    hard_negatives: int = option(
        1, role=TRAINING, min=0, help="hard negatives per (query, positive) pair"
    )
    seed: int = inherit_option(TrainingConfig, "seed", 42, help="shuffling and dropout")


@dataclass
class PreparedDense:
    """One scoring call after the host step: the lists, whether items come from the index, their
    sizes; the uploaded query batches and either the item batches (query time) or the items'
    rows among the precomputed embeddings. ``queries`` None: ``encode`` scores ``lists``."""

    lists: Sequence[CandidateList]
    use_cache: bool
    n_items: list[int]
    queries: DeviceBatches | None = None
    items: DeviceBatches | None = None
    rows: torch.Tensor | None = None


class DenseRanker(Ranker[DenseConfig], LatencyParts, Fits, Persistent, Exportable):
    """A SentenceTransformer bi-encoder; subclasses only choose how hard negatives are mined."""

    family = "dual"
    Config = DenseConfig
    pointwise = True
    trainable = True
    #: what ranks hard-negative candidates, a key of :data:`rankers.fit.dense.POOL_SCORERS`
    #: (recorded in the training summary)
    miner: ClassVar[str] = ""
    #: re-mine with the current weights at every epoch start (ANCE)
    refresh_negatives: ClassVar[bool] = False

    def __init__(self, config: DenseConfig | None = None, device: str = "cpu") -> None:
        super().__init__(config, device)
        self._ref: ModelRef = resolve_model(self.config.model)
        self._model: SentenceTransformer | None = None
        self._similarity = ""
        self._similarity_source = ""
        self._weights_hash: str | None = None
        self._weights_of = ""
        self._base_model_id: str | None = None
        self._items: tuple[dict[str, int], torch.Tensor] | None = None
        self._indexed: RankingSplit | None = None
        self.training_summary: TrainingSummary | None = None
        #: the hard negatives the last fit trained on, a record like :attr:`training_summary`
        self.mining_rounds: list[MiningRound] = []
        self._fitting = False
        from rankers.compute.precision import CastCache

        # pooling (and any Dense/Normalize after it) stays float32 over a bf16 transformer
        self._cast: CastCache[SentenceTransformer] = CastCache(lambda m: list(m)[1:])

    # -- model ---------------------------------------------------------------------------------
    @property
    def model(self) -> SentenceTransformer:
        """The encoder, loaded on first use on ``self.device`` in eval mode."""
        if self._model is None:
            self._load_model()
        assert self._model is not None
        return self._model

    @property
    def similarity(self) -> str:
        """The similarity in use ("cosine" or "dot"); loads the model to read its config."""
        _ = self.model
        return self._similarity

    def _load_model(self) -> None:
        from sentence_transformers import SentenceTransformer

        ref = self._ref
        log.info("loading %s from %s on %s", ref.model_id, ref.path, self.device)
        try:
            model = SentenceTransformer(ref.path, device=self.device)
        except (OSError, ValueError) as exc:
            raise RankerError(
                f"cannot load SentenceTransformer {self.config.model!r} from {ref.path}: {exc}"
            ) from exc
        if self.config.max_length is not None:
            model.max_seq_length = self.config.max_length
        # the private attribute is None when the model's config names no similarity; the public
        # property would silently turn that into "cosine"
        own = getattr(model, "_similarity_fn_name", None)
        if self.config.similarity is not None:
            self._similarity, self._similarity_source = self.config.similarity, "option"
        elif own is not None:
            if own not in SIMILARITIES:
                raise RankerError(
                    f"model {ref.model_id!r} asks for similarity {own!r}; "
                    f"set option similarity to one of {', '.join(SIMILARITIES)}"
                )
            self._similarity, self._similarity_source = own, "model config"
        else:
            self._similarity, self._similarity_source = "cosine", "default (model config has none)"
        # typed as a Literal by sentence-transformers 6; the value is checked above
        cast(Any, model).similarity_fn_name = self._similarity
        model.eval()
        self._model = model
        if ref.local and (h := weights_hash(ref.path)) is not None:
            self._weights_hash, self._weights_of = h, f"files in {ref.path}"
        else:
            self._weights_hash, self._weights_of = state_hash(model), "state dict"

    def encoding_model(self) -> SentenceTransformer:
        """:attr:`model`, or its copy cast once to the scoring dtype (see ``dtype``)."""
        from rankers.compute.precision import scoring_dtype

        return self._cast.get(self.model, scoring_dtype(self.config.dtype, self.device))

    def _encode(self, texts: Sequence[str], prefix: str) -> torch.Tensor:
        """Embeddings (on the model's device) without gradients, in eval mode; float32 out."""
        return (
            self.encoding_model()
            .encode(
                [prefix + t for t in texts],
                batch_size=self.config.batch_size,
                convert_to_tensor=True,
                convert_to_numpy=False,
                show_progress_bar=False,
                device=self.device,
            )
            .float()
        )

    def encode_queries(self, queries: Sequence[str]) -> torch.Tensor:
        """Query embeddings (no gradients) after the query prefix."""
        return self._encode(queries, self.config.query_prefix)

    def encode_documents(self, texts: Sequence[str]) -> torch.Tensor:
        """Item embeddings (no gradients): the document prefix and, for the order ablation,
        :func:`rankers.itemorder.item_texts`, in the one place scoring, indexing and ANCE mining
        encode items (:func:`rankers.fit.dense.contrastive_loss` reads them alike)."""
        return self._encode(item_texts(self.config, texts), self.config.document_prefix)

    def similarities(self, queries: torch.Tensor, items: torch.Tensor) -> torch.Tensor:
        """[n_queries, n_items] similarity matrix (differentiable: training uses it too)."""
        import torch.nn.functional as F

        if self._similarity == "cosine":
            queries, items = F.normalize(queries, dim=-1), F.normalize(items, dim=-1)
        return queries @ items.T

    # -- scoring -------------------------------------------------------------------------------
    def index(self, split: RankingSplit) -> None:
        """With ``precompute``, embed every distinct candidate of ``split`` once."""
        self._indexed = split
        if not self.config.precompute:
            return
        collection = split.collection()
        docids = list(collection)
        start = time.perf_counter()
        emb = self.encode_documents([collection[d] for d in docids])
        self._items = ({d: i for i, d in enumerate(docids)}, emb)
        log.info(
            "precomputed %d item embeddings in %.1fs", len(docids), time.perf_counter() - start
        )

    host_step: ClassVar[str | None] = (
        "query tokenisation (items too when scoring at query time) with the encoder's "
        "tokenizer, in encode's length order and batches; ids, lengths and precomputed item "
        "rows in one host-to-device copy per call"
    )

    def _use_cache(self) -> bool:
        """Whether scoring reads the item embeddings of :meth:`index`: with ``precompute``,
        except inside :meth:`fit` (the weights change under any index)."""
        if self._fitting:
            return False
        if self.config.precompute and self._items is None:
            raise RankerError(
                f"{type(self).__name__} with precompute=true: call index(split) before score()"
            )
        return self.config.precompute

    def _item_rows(self, lists: Sequence[CandidateList]) -> list[int]:
        """Each candidate's row among the embeddings of :meth:`index`."""
        assert self._items is not None
        rows = self._items[0]
        missing = [d for cl in lists for d in cl.docids if d not in rows]
        if missing:
            raise RankerError(
                f"docid {missing[0]!r} has no precomputed embedding: index() saw another split"
            )
        return [rows[d] for cl in lists for d in cl.docids]

    def score(self, lists: Sequence[CandidateList]) -> list[np.ndarray]:
        return self.score_prepared(self.prepare_scoring(lists))

    def prepare_scoring(self, lists: Sequence[CandidateList]) -> PreparedDense:
        """The host step of ``encode`` (:func:`~rankers.families.dense_steps.host_batches`) for
        the queries and, at query time, the items; one upload. Inside :meth:`fit`, and for a
        model ``encode`` does more for (:func:`~rankers.families.dense_steps.plain_text_model`),
        nothing: :meth:`score_prepared` then calls ``encode`` (:meth:`_score`)."""
        from rankers.families.dense_steps import DeviceBatches, host_batches, plain_text_model
        from rankers.inputs.transfer import upload

        use_cache = self._use_cache()
        n_items = [len(cl) for cl in lists]
        library = PreparedDense(lists, use_cache, n_items)
        if self._fitting or not sum(n_items):
            return library
        model, cfg = self.encoding_model(), self.config
        if not plain_text_model(model):
            return library
        queries = host_batches(
            model, [cfg.query_prefix + cl.query.text for cl in lists], cfg.batch_size
        )
        arrays: dict[str, np.ndarray] = {}
        items = None
        if use_cache:
            arrays["rows"] = np.asarray(self._item_rows(lists), dtype=np.int64)
        else:
            texts = item_texts(cfg, [t for cl in lists for t in cl.texts])
            items = host_batches(model, [cfg.document_prefix + t for t in texts], cfg.batch_size)
            if items is None:
                return library
        if queries is None:
            return library
        arrays.update({"q." + k: v for k, v in queries.arrays.items()})
        arrays.update({"d." + k: v for k, v in (items.arrays if items else {}).items()})
        tensors = upload(arrays, self.device)  # the call's one host-to-device copy

        def part(prefix: str) -> dict[str, torch.Tensor]:
            return {k[len(prefix) :]: v for k, v in tensors.items() if k.startswith(prefix)}

        return PreparedDense(
            lists,
            use_cache,
            n_items,
            DeviceBatches.of(queries, part("q.")),
            DeviceBatches.of(items, part("d.")) if items else None,
            tensors.get("rows"),
        )

    def score_prepared(self, prepared: PreparedDense) -> list[np.ndarray]:
        """The model step: the encoder on the uploaded batches
        (:func:`~rankers.families.dense_steps.encode_batches`), the similarities on the device,
        one copy of the scores back."""
        from rankers.compute.precision import evaluating
        from rankers.families.dense_steps import encode_batches

        if prepared.queries is None:
            return self._score(prepared.lists, prepared.use_cache)
        model = self.encoding_model()
        with evaluating(model):
            q_emb = encode_batches(model, prepared.queries)
            if prepared.rows is not None:
                assert self._items is not None
                item_emb = self._items[1][prepared.rows]
            else:
                assert prepared.items is not None
                item_emb = encode_batches(model, prepared.items)
            return self._list_scores(q_emb, item_emb, prepared.n_items)

    def score_library(self, lists: Sequence[CandidateList]) -> list[np.ndarray]:
        """:meth:`score` through sentence-transformers' ``encode`` (the simple implementation,
        kept as the oracle of :meth:`score_prepared`; transformers reads each batch's mask back
        from the device)."""
        return self._score(lists, self._use_cache())

    def _score(self, lists: Sequence[CandidateList], use_cache: bool) -> list[np.ndarray]:
        """Scores with ``encode`` (:meth:`score_library`), items from the index or not."""
        if not lists:
            return []
        q_emb = self.encode_queries([cl.query.text for cl in lists])
        if use_cache:
            assert self._items is not None
            item_emb = self._items[1][self._item_rows(lists)]
        else:
            texts = [t for cl in lists for t in cl.texts]
            item_emb = self.encode_documents(texts)
        return self._list_scores(q_emb, item_emb, [len(cl) for cl in lists])

    def _list_scores(
        self, q_emb: torch.Tensor, item_emb: torch.Tensor, n_items: Sequence[int]
    ) -> list[np.ndarray]:
        """Each list's similarities of its query (row of ``q_emb``) with its items (the next
        ``n_items`` rows of ``item_emb``), float64, in one device-to-host copy per call."""
        import torch

        parts, start = [], 0
        for i, n in enumerate(n_items):
            block = item_emb[start : start + n]
            start += n
            parts.append(self.similarities(q_emb[i : i + 1], block)[0].detach().double())
        flat = torch.cat(parts).cpu().numpy()  # one device-to-host copy per call
        bounds = np.cumsum([0, *n_items])
        return [flat[bounds[k] : bounds[k + 1]].copy() for k in range(len(n_items))]

    # -- training ------------------------------------------------------------------------------
    def fit(self, train: RankingSplit, dev: RankingSplit | None = None) -> TrainingSummary:
        """Contrastive fine-tuning with in-batch + hard negatives by the shared loop
        (:func:`rankers.fit.dense.fit_dense`); the best dev AP@10 epoch is kept. With
        :attr:`work_dir` set, the state (mined negatives included) is checkpointed there and an
        interrupted fit resumes from it."""
        from rankers.fit.dense import fit_dense

        self._items = None  # stale once the weights change; re-indexed at the end
        self._fitting = True  # dev scoring encodes items at query time (no stale index)
        try:
            summary, self.mining_rounds = fit_dense(self, train, dev)
        finally:
            self._fitting = False
        self._weights_hash, self._weights_of = summary.weights_hash, "state dict (fine-tuned)"
        self._base_model_id = self._base_model_id or self._ref.model_id
        self._reindex()
        self.training_summary = summary
        return summary

    # -- export ------------------------------------------------------------------------------
    def export(self, folder: Path) -> Exported:
        """A ``SentenceTransformer`` folder: the prefixes are its prompts ``query`` and
        ``document`` and the similarity its own, so ``encode_query``, ``encode_document`` and
        ``similarity`` give this ranker's scores."""
        from rankers.io.export import Exported, refuse_sorted_items, sentence_transformer_folder

        refuse_sorted_items(self.name, self.config.sort_item_tokens)
        cfg = self.config
        sentence_transformer_folder(
            folder,
            self.model,
            cfg.query_prefix,
            cfg.document_prefix,
            self.similarity,
            cfg.max_length,
        )
        return Exported(
            loads_with="sentence_transformers.SentenceTransformer",
            example=(
                "from sentence_transformers import SentenceTransformer\n"
                "model = SentenceTransformer({folder})\n"
                "scores = model.similarity(model.encode_query([query]), "
                "model.encode_document(items))[0]"
            ),
        )

    # -- persistence ---------------------------------------------------------------------------
    def saved_parts(self) -> tuple[str, ...]:
        return (MODEL_DIR,)

    def write_weights(self, folder: Path) -> None:
        """``folder/model``: a SentenceTransformer folder."""
        target = folder / MODEL_DIR
        self.model.save(str(target), create_model_card=False)
        # the weights now exist as files: record their file hash, as for any local model
        self._base_model_id = self._base_model_id or self._ref.model_id
        self._weights_hash, self._weights_of = weights_hash(target), f"files in {MODEL_DIR}/"

    def restored_options(self, meta: dict[str, Any], folder: Path) -> dict[str, Any]:
        # similarity: an explicit saved option; otherwise the saved folder's own config names it
        return {"model": str((folder / MODEL_DIR).resolve())}

    def read_weights(self, folder: Path, meta: dict[str, Any]) -> None:
        self._ref = resolve_model(self.config.model)
        self._model, self._items = None, None
        self._base_model_id = meta.get("base_model_id") or meta.get("model_id")
        self._load_model()
        self._reindex()

    def _reindex(self) -> None:
        """New weights: re-embed the split indexed before, so score() stays query-only."""
        if self._indexed is not None:
            self.index(self._indexed)

    # -- latency hooks -------------------------------------------------------------------------
    def latency_variants(self, batch_sizes: Sequence[int] | None = None) -> list[LatencyVariant]:
        """Both scoring modes, each its own column: item embeddings precomputed in index() (the
        production setting) and everything encoded at query time; times each batch size."""
        out = []
        for precompute, mode in ((True, "precomputed"), (False, "query time")):
            column = f"{self.name} ({mode})"
            options: dict[str, Any] = {"precompute": precompute}
            if not batch_sizes:
                out.append(LatencyVariant(column, options, column))
            for bs in dict.fromkeys(batch_sizes or ()):
                label = f"{self.name} ({mode}, batch_size={bs})"
                out.append(LatencyVariant(label, {**options, "batch_size": bs}, column))
        return out

    def scoring_mode(self) -> str:
        return "items pre-encoded" if self.config.precompute else "end-to-end"

    def weights_note(self, checkpoint: str | None) -> str:
        if checkpoint:
            return f"trained ({checkpoint})"
        if self.training_summary is not None:
            return "fine-tuned in this process"
        return "pre-trained encoder, not fine-tuned"

    # -- provenance ----------------------------------------------------------------------------
    def describe(self) -> dict[str, Any]:
        _ = self.model
        return {
            **super().describe(),
            "model_id": self._ref.model_id,
            "base_model_id": self._base_model_id,
            "weights_hash": self._weights_hash,
            "weights_hash_of": self._weights_of,
            "similarity": self._similarity,
            "similarity_source": self._similarity_source,
            "fine_tuned": self.training_summary is not None,
            "scoring": "item embeddings precomputed" if self.config.precompute else "query time",
        }


class DPRRanker(DenseRanker):
    """DPR: in-batch negatives plus BM25 hard negatives, mined once before training."""

    name = "dpr"
    miner = "bm25"
    refresh_negatives = False


class ANCERanker(DenseRanker):
    """ANCE: hard negatives ranked by the encoder itself, re-mined every epoch (current weights)."""

    name = "ance"
    miner = "self (current encoder)"
    refresh_negatives = True


__all__ = [
    "ANCERanker",
    "DPRRanker",
    "DenseConfig",
    "DenseRanker",
    "state_hash",
]
