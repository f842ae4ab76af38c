"""Dual encoders (DPR, ANCE): query and item embedded separately, scored by their similarity.

Both rankers are one SentenceTransformer scored the same way; they differ only in where training
hard negatives come from (:meth:`DenseRanker._score_pool`):

* **DPR** - BM25 (:class:`rankers.inputs.lexical.BM25Index` over the train split's collection),
  mined once.
* **ANCE** - the encoder being trained, re-mined at the start of every epoch with the current
  weights (the original refreshes an ANN index asynchronously; per-epoch refresh is the
  synchronous equivalent at this data size).

Negatives for a query are its *own* non-relevant candidates ranked by that scorer - these are the
distractors a re-ranker has to push down. A query whose list holds no non-relevant candidate falls
back to the whole train collection minus its positives, ranked by the same scorer (for BM25 that is
``BM25Index.top_k`` with the positives excluded).

The loss is MultipleNegativesRankingLoss-style cross-entropy over [all positives of the batch + all
hard negatives of the batch], logits = ``scale * similarity`` (scale 20 on cosine = temperature
0.05). Unlike sentence-transformers' own loss, in-batch columns that are *also relevant* to a row's
query (two pairs of one query in a batch, a shared positive) are masked out rather than treated as
negatives.

Scoring modes: ``precompute=false`` encodes query and items at query time (what a re-ranker facing
unseen items pays); ``precompute=true`` embeds every distinct candidate of the split once in
:meth:`DenseRanker.index` and :meth:`DenseRanker.score` only encodes queries ("item embeddings
precomputed", the production setting of the paper's ANCE latency).
"""

from __future__ import annotations

import dataclasses
import logging
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, cast

import numpy as np

from bench.core.trained import TrainingSummary
from bench.data.model import CandidateList, RankingSplit, relevant
from bench.results.ranking import rank_order
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
from rankers.hooks import Exportable, Fits, LatencyParts, LatencyVariant
from rankers.io.models import ModelRef, resolve_model, state_hash, weights_hash
from rankers.io.persist import Persistent
from rankers.itemorder import item_texts, sort_items_option
from rankers.trainconfig import ListTrainingConfig

if TYPE_CHECKING:
    import torch
    from sentence_transformers import SentenceTransformer

    from rankers.io.export import Exported

log = logging.getLogger(__name__)

#: the SentenceTransformer folder inside a save() folder
MODEL_DIR = "model"

SIMILARITIES: tuple[str, ...] = ("cosine", "dot")
#: default logit scale per similarity (MultipleNegativesRankingLoss uses 20 on cosine)
DEFAULT_SCALE: dict[str, float] = {"cosine": 20.0, "dot": 1.0}


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
class MiningRound:
    """One hard-negative mining pass: which weights mined it and what it chose (qid -> docids)."""

    epoch: int
    weights: str
    negatives: dict[str, list[str]]
    collection_fallback: int


@dataclass(frozen=True)
class _Pair:
    qid: str
    query: str
    docid: str
    text: str


@dataclass(frozen=True)
class _FitData:
    """What one fit's training hooks read: its pairs, each query's positives and the texts."""

    split: RankingSplit
    pairs: list[_Pair]
    positives: dict[str, set[str]]
    collection: dict[str, str]


class DenseRanker(Ranker[DenseConfig], LatencyParts, Fits, Persistent, Exportable):
    """A SentenceTransformer bi-encoder; subclasses only choose how hard negatives are scored."""

    family = "dual"
    Config = DenseConfig
    pointwise = True
    trainable = True
    #: what ranks hard-negative candidates (recorded in the training summary)
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
        self.mining_rounds: list[MiningRound] = []
        self._fit: _FitData | None = None
        self._fitting = False
        from rankers.precision import CastCache

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
        from rankers.precision import scoring_dtype

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

    def _encode_documents(self, texts: Sequence[str]) -> torch.Tensor:
        """Item embeddings (no gradients): the document prefix and, for the order ablation,
        :func:`rankers.itemorder.item_texts`, in the one place scoring, indexing and ANCE mining
        encode items (:meth:`_forward_documents` is the training twin)."""
        return self._encode(item_texts(self.config, texts), self.config.document_prefix)

    def _forward_documents(self, texts: Sequence[str], module: Any = None) -> torch.Tensor:
        """Item embeddings with gradients, read as :meth:`_encode_documents` reads them."""
        return self._forward(item_texts(self.config, texts), self.config.document_prefix, module)

    def _similarities(self, queries: torch.Tensor, items: torch.Tensor) -> torch.Tensor:
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
        emb = self._encode_documents([collection[d] for d in docids])
        self._items = ({d: i for i, d in enumerate(docids)}, emb)
        log.info(
            "precomputed %d item embeddings in %.1fs", len(docids), time.perf_counter() - start
        )

    def score(self, lists: Sequence[CandidateList]) -> list[np.ndarray]:
        if self._fitting:  # dev scoring inside fit(): the weights change under any index
            return self._score(lists, use_cache=False)
        if self.config.precompute and self._items is None:
            raise RankerError(
                f"{type(self).__name__} with precompute=true: call index(split) before score()"
            )
        return self._score(lists, use_cache=self.config.precompute)

    def _score(self, lists: Sequence[CandidateList], use_cache: bool) -> list[np.ndarray]:
        if not lists:
            return []
        q_emb = self._encode([cl.query.text for cl in lists], self.config.query_prefix)
        if use_cache:
            assert self._items is not None
            rows, emb = self._items
            missing = [d for cl in lists for d in cl.docids if d not in rows]
            if missing:
                raise RankerError(
                    f"docid {missing[0]!r} has no precomputed embedding: index() saw another split"
                )
            item_emb = emb[[rows[d] for cl in lists for d in cl.docids]]
        else:
            texts = [t for cl in lists for t in cl.texts]
            item_emb = self._encode_documents(texts)
        import torch

        parts, start = [], 0
        for i, cl in enumerate(lists):
            block = item_emb[start : start + len(cl)]
            start += len(cl)
            parts.append(self._similarities(q_emb[i : i + 1], block)[0].detach().double())
        flat = torch.cat(parts).cpu().numpy()  # one device-to-host copy per call
        bounds = np.cumsum([0, *[len(cl) for cl in lists]])
        return [flat[bounds[k] : bounds[k + 1]].copy() for k in range(len(lists))]

    # -- hard negatives ------------------------------------------------------------------------
    def _score_pool(
        self, queries: Sequence[str], pools: Sequence[Sequence[str]], collection: dict[str, str]
    ) -> list[np.ndarray]:
        """Scores of each query's negative pool (docids into ``collection``); higher = harder."""
        raise NotImplementedError

    def mine_negatives(self, train: RankingSplit, epoch: int = 0) -> MiningRound:
        """Top ``hard_negatives`` non-relevant docids per query with positives, by the miner.

        Pool: the query's own non-relevant candidates; if it has none, the train collection
        minus the query's positives. Ties are broken by docid (the harness's rule).
        """
        collection = train.collection()
        qids: list[str] = []
        queries: list[str] = []
        pools: list[list[str]] = []
        fallback = 0
        for cl in train.lists:
            pos = relevant(train.qrels, cl.query.qid, train.relevance_level)
            if not pos.intersection(cl.docids):
                continue
            pool = list(dict.fromkeys(d for d in cl.docids if d not in pos))
            if not pool:
                pool = [d for d in collection if d not in pos]
                fallback += 1
            qids.append(cl.query.qid)
            queries.append(cl.query.text)
            pools.append(pool)
        k = self.config.hard_negatives
        negatives: dict[str, list[str]] = {}
        if k > 0 and qids:
            for qid, pool, scores in zip(
                qids, pools, self._score_pool(queries, pools, collection), strict=True
            ):
                negatives[qid] = [pool[i] for i in rank_order(pool, scores)[:k]]
        else:
            negatives = {q: [] for q in qids}
        return MiningRound(epoch, state_hash(self.model), negatives, fallback)

    # -- training ------------------------------------------------------------------------------
    def fit(self, train: RankingSplit, dev: RankingSplit | None = None) -> TrainingSummary:
        """Contrastive fine-tuning with in-batch + hard negatives by the shared loop
        (:mod:`rankers.fit.loop`); the best dev AP@10 epoch is kept. With :attr:`work_dir` set,
        the state (mined negatives included) is checkpointed there and an interrupted fit
        resumes from it."""
        from rankers.fit.loop import LoopPlan, train_loop
        from rankers.fit.resume import split_key

        cfg = self.config
        self._items = None  # stale once the weights change; re-indexed at the end
        pairs = _pairs(train)
        if not pairs:
            raise RankerError(
                f"train split {train.dataset}/{train.split} has no relevant candidate "
                f"(grade >= {train.relevance_level}): nothing to train on"
            )
        positives = {
            cl.query.qid: relevant(train.qrels, cl.query.qid, train.relevance_level)
            for cl in train.lists
        }
        self._fit = _FitData(train, pairs, positives, train.collection())
        self.mining_rounds = []
        plan = LoopPlan.of(
            cfg,
            warmup_ratio=cfg.warmup_ratio,
            data=split_key(train),
            describe=(
                f"{len(pairs)} pairs, {cfg.train_batch_size} a step, {self.miner} negatives x "
                f"{cfg.hard_negatives}"
            ),
        )
        self._fitting = True  # dev scoring encodes items at query time (no stale index)
        try:
            summary = train_loop(self, self, train, dev, plan)
        finally:
            self._fitting = False
        self._weights_hash, self._weights_of = summary.weights_hash, "state dict (fine-tuned)"
        self._base_model_id = self._base_model_id or self._ref.model_id
        self._reindex()
        summary.extra.update(
            {
                "train_queries": len({p.qid for p in pairs}),
                "train_pairs": len(pairs),
                "hard_negatives_per_query": cfg.hard_negatives,
                "negatives": self.miner,
                "negatives_refreshed_per_epoch": self.refresh_negatives,
                "collection_fallback_queries": self.mining_rounds[0].collection_fallback,
                "scale": self._scale(),
                "similarity": self._similarity,
            }
        )
        self.training_summary = summary
        return self.training_summary

    # -- the training protocol of rankers.fit.loop.train_loop ----------------------------------
    def training_module(self) -> SentenceTransformer:
        return self.model

    def on_epoch_start(self, epoch: int) -> None:
        """Mine hard negatives: once (DPR), or with the current weights every epoch (ANCE)."""
        if not self.mining_rounds or self.refresh_negatives:
            self.mining_rounds.append(self.mine_negatives(self._fit_data().split, epoch))

    def epoch_batches(self, train: RankingSplit, epoch: int) -> list[list[_Pair]]:
        """The (query, positive) pairs shuffled by (seed, epoch), ``train_batch_size`` a step."""
        order = list(self._fit_data().pairs)
        random.Random(self.config.seed + epoch).shuffle(order)
        size = self.config.train_batch_size
        return [order[b : b + size] for b in range(0, len(order), size)]

    def batch_loss(self, batch: Sequence[_Pair], module: Any = None) -> torch.Tensor:
        """:meth:`_loss` against the latest mining round's negatives."""
        data = self._fit_data()
        negatives = self.mining_rounds[-1].negatives
        return self._loss(batch, negatives, data.positives, data.collection, self._scale(), module)

    def training_state(self) -> dict[str, Any]:
        """The mining rounds so far: a resumed ANCE epoch trains on the negatives its start mined
        (the weights that mined them are gone by a mid-epoch checkpoint)."""
        return {"mining_rounds": [dataclasses.asdict(r) for r in self.mining_rounds]}

    def load_training_state(self, state: dict[str, Any]) -> None:
        self.mining_rounds = [MiningRound(**r) for r in state["mining_rounds"]]

    def _fit_data(self) -> _FitData:
        if self._fit is None:
            raise RankerError(f"{self.name}: training hooks called outside fit()")
        return self._fit

    def _scale(self) -> float:
        """The logit multiplier: the option, else the similarity's default."""
        cfg = self.config
        return cfg.scale if cfg.scale is not None else DEFAULT_SCALE[self.similarity]

    def _loss(
        self,
        batch: Sequence[_Pair],
        negatives: dict[str, list[str]],
        positives: dict[str, set[str]],
        collection: dict[str, str],
        scale: float,
        module: Any = None,
    ) -> torch.Tensor:
        """Cross-entropy of each query over [batch positives + batch hard negatives]; ``module``
        runs the encoder (the training loop's prepared model; default :attr:`model`)."""
        import torch
        import torch.nn.functional as F

        docids = [p.docid for p in batch] + [d for p in batch for d in negatives.get(p.qid, [])]
        texts = [p.text for p in batch] + [collection[d] for d in docids[len(batch) :]]
        q = self._forward([p.query for p in batch], self.config.query_prefix, module)
        d = self._forward_documents(texts, module)
        logits = scale * self._similarities(q, d)
        # a column relevant to the row's query is no negative for it (except its own target)
        mask = torch.tensor(
            [
                [j != i and dj in positives[p.qid] for j, dj in enumerate(docids)]
                for i, p in enumerate(batch)
            ],
            device=logits.device,
        )
        logits = logits.masked_fill(mask, torch.finfo(logits.dtype).min)
        return F.cross_entropy(logits, torch.arange(len(batch), device=logits.device))

    def _forward(self, texts: Sequence[str], prefix: str, module: Any = None) -> torch.Tensor:
        """Embeddings with gradients: tokenize, move to the model's device, forward."""
        import torch

        model = self.model
        inputs = [prefix + t for t in texts]
        prep = getattr(model, "preprocess", None) or model.tokenize
        features = {
            k: v.to(model.device) if isinstance(v, torch.Tensor) else v
            for k, v in prep(inputs).items()
        }
        return (model if module is None else module)(features)["sentence_embedding"]

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


def _pairs(train: RankingSplit) -> list[_Pair]:
    """(query, positive) pairs: every candidate with grade >= the split's relevance level."""
    out: list[_Pair] = []
    for cl in train.lists:
        pos = relevant(train.qrels, cl.query.qid, train.relevance_level)
        seen: set[str] = set()
        for c in cl.candidates:
            if c.docid in pos and c.docid not in seen:
                seen.add(c.docid)
                out.append(_Pair(cl.query.qid, cl.query.text, c.docid, c.text))
    return out


class DPRRanker(DenseRanker):
    """DPR: in-batch negatives plus BM25 hard negatives, mined once before training."""

    name = "dpr"
    miner = "bm25"
    refresh_negatives = False

    def _score_pool(
        self, queries: Sequence[str], pools: Sequence[Sequence[str]], collection: dict[str, str]
    ) -> list[np.ndarray]:
        from rankers.inputs.lexical import BM25Index  # key: training (mines negatives in fit)

        bm25 = BM25Index(collection)
        return [bm25.score(q, pool) for q, pool in zip(queries, pools, strict=True)]


class ANCERanker(DenseRanker):
    """ANCE: hard negatives ranked by the encoder itself, re-mined every epoch (current weights)."""

    name = "ance"
    miner = "self (current encoder)"
    refresh_negatives = True

    def _score_pool(
        self, queries: Sequence[str], pools: Sequence[Sequence[str]], collection: dict[str, str]
    ) -> list[np.ndarray]:
        docids = list(dict.fromkeys(d for pool in pools for d in pool))
        rows = {d: i for i, d in enumerate(docids)}
        items = self._encode_documents([collection[d] for d in docids])
        q = self._encode(queries, self.config.query_prefix)
        sims = self._similarities(q, items).double().cpu().numpy()
        return [sims[i, [rows[d] for d in pool]] for i, pool in enumerate(pools)]


__all__ = [
    "ANCERanker",
    "DPRRanker",
    "DenseConfig",
    "DenseRanker",
    "MiningRound",
    "state_hash",
]
