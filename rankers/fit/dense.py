"""The dual encoders' training steps (DPR, ANCE): (query, positive) pairs, hard negatives mined by
BM25 or by the encoder itself, and the contrastive loss, as the :class:`~rankers.fit.loop.Trainable`
:class:`DenseSteps` that :func:`~rankers.fit.loop.train_loop` drives.

Training only, so kept out of the family module (:mod:`rankers.families.dense`, which imports it
inside ``fit``): a scoring key leaves this package out, so editing the miner or the loss re-keys
DPR's and ANCE's trained models but never a zero-shot run.

**Negatives** for a query are its *own* non-relevant candidates ranked by the miner - the
distractors a re-ranker has to push down. A query whose list holds no non-relevant candidate falls
back to the whole train collection minus its positives, ranked by the same miner. DPR's miner is
BM25 over the train collection, run once; ANCE's is the encoder being trained, run again at every
epoch start with the current weights (:data:`POOL_SCORERS`).

**The loss** is MultipleNegativesRankingLoss-style cross-entropy over [all positives of the batch +
all hard negatives of the batch], logits = ``scale * similarity`` (scale 20 on cosine =
temperature 0.05). Unlike sentence-transformers' own loss, in-batch columns that are *also
relevant* to a row's query (two pairs of one query in a batch, a shared positive) are masked out
rather than treated as negatives.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from bench.core.trained import TrainingSummary
from bench.data.model import RankingSplit, relevant
from bench.results.ranking import rank_order
from rankers.base import RankerError
from rankers.fit.loop import LoopPlan, train_loop
from rankers.fit.resume import split_key
from rankers.io.models import state_hash
from rankers.itemorder import item_texts

if TYPE_CHECKING:
    import torch
    from sentence_transformers import SentenceTransformer

#: default logit scale per similarity (MultipleNegativesRankingLoss uses 20 on cosine)
DEFAULT_SCALE: dict[str, float] = {"cosine": 20.0, "dot": 1.0}


@dataclasses.dataclass
class MiningRound:
    """One hard-negative mining pass: which weights mined it and what it chose (qid -> docids)."""

    epoch: int
    weights: str
    negatives: dict[str, list[str]]
    collection_fallback: int


@dataclasses.dataclass(frozen=True)
class Pair:
    """One training example: a query and one of its relevant candidates (texts and ids)."""

    qid: str
    query: str
    docid: str
    text: str


def training_pairs(train: RankingSplit) -> list[Pair]:
    """(query, positive) pairs: every candidate with grade >= the split's relevance level."""
    out: list[Pair] = []
    for cl in train.lists:
        pos = relevant(train.qrels, cl.query.qid, train.relevance_level)
        seen: set[str] = set()
        for c in cl.candidates:
            if c.docid in pos and c.docid not in seen:
                seen.add(c.docid)
                out.append(Pair(cl.query.qid, cl.query.text, c.docid, c.text))
    return out


# -- hard negatives ------------------------------------------------------------------------------
#: scores of each query's negative pool (docids into the collection); higher = harder
PoolScorer = Callable[[Any, Sequence[str], Sequence[Sequence[str]], dict[str, str]], list[Any]]


def bm25_pool_scores(
    ranker: Any, queries: Sequence[str], pools: Sequence[Sequence[str]], collection: dict[str, str]
) -> list[np.ndarray]:
    """DPR's miner: BM25 over the train collection."""
    from rankers.inputs.lexical import BM25Index

    bm25 = BM25Index(collection)
    return [bm25.score(q, pool) for q, pool in zip(queries, pools, strict=True)]


def encoder_pool_scores(
    ranker: Any, queries: Sequence[str], pools: Sequence[Sequence[str]], collection: dict[str, str]
) -> list[np.ndarray]:
    """ANCE's miner: the ranker's own similarity with its current weights."""
    docids = list(dict.fromkeys(d for pool in pools for d in pool))
    rows = {d: i for i, d in enumerate(docids)}
    items = ranker.encode_documents([collection[d] for d in docids])
    q = ranker.encode_queries(queries)
    sims = ranker.similarities(q, items).double().cpu().numpy()
    return [sims[i, [rows[d] for d in pool]] for i, pool in enumerate(pools)]


#: a dual encoder's ``miner`` -> how it ranks a query's negative pool
POOL_SCORERS: dict[str, PoolScorer] = {
    "bm25": bm25_pool_scores,
    "self (current encoder)": encoder_pool_scores,
}


def mine_negatives(ranker: Any, train: RankingSplit, epoch: int = 0) -> MiningRound:
    """Top ``hard_negatives`` non-relevant docids per query with positives, by ``ranker.miner``.

    Pool: the query's own non-relevant candidates; if it has none, the train collection minus the
    query's positives. Ties are broken by docid (the harness's rule).
    """
    scorer = POOL_SCORERS.get(ranker.miner)
    if scorer is None:
        raise RankerError(
            f"{ranker.name}: no negative miner {ranker.miner!r} (one of {', '.join(POOL_SCORERS)})"
        )
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
    k = ranker.config.hard_negatives
    negatives: dict[str, list[str]] = {}
    if k > 0 and qids:
        scored = scorer(ranker, queries, pools, collection)
        for qid, pool, scores in zip(qids, pools, scored, strict=True):
            negatives[qid] = [pool[i] for i in rank_order(pool, scores)[:k]]
    else:
        negatives = {q: [] for q in qids}
    return MiningRound(epoch, state_hash(ranker.model), negatives, fallback)


# -- the loss ------------------------------------------------------------------------------------
def logit_scale(ranker: Any) -> float:
    """The logit multiplier: the ``scale`` option, else the similarity's default."""
    scale = ranker.config.scale
    return scale if scale is not None else DEFAULT_SCALE[ranker.similarity]


def embed(ranker: Any, texts: Sequence[str], prefix: str, module: Any = None) -> torch.Tensor:
    """Embeddings with gradients: tokenize, move to the model's device, forward through
    ``module`` (the loop's prepared model; default the ranker's own)."""
    import torch

    model: SentenceTransformer = ranker.model
    inputs = [prefix + t for t in texts]
    prep = getattr(model, "preprocess", None) or model.tokenize
    features = {
        k: v.to(model.device) if isinstance(v, torch.Tensor) else v for k, v in prep(inputs).items()
    }
    return (model if module is None else module)(features)["sentence_embedding"]


def embed_documents(ranker: Any, texts: Sequence[str], module: Any = None) -> torch.Tensor:
    """Item embeddings with gradients, read as scoring reads them
    (:meth:`~rankers.families.dense.DenseRanker.encode_documents`: the document prefix and
    :func:`rankers.itemorder.item_texts`)."""
    cfg = ranker.config
    return embed(ranker, item_texts(cfg, texts), cfg.document_prefix, module)


def contrastive_loss(
    ranker: Any,
    batch: Sequence[Pair],
    negatives: dict[str, list[str]],
    positives: dict[str, set[str]],
    collection: dict[str, str],
    scale: float,
    module: Any = None,
) -> torch.Tensor:
    """Cross-entropy of each query over [batch positives + batch hard negatives]; ``module`` runs
    the encoder (the training loop's prepared model; default the ranker's own)."""
    import torch
    import torch.nn.functional as F

    docids = [p.docid for p in batch] + [d for p in batch for d in negatives.get(p.qid, [])]
    texts = [p.text for p in batch] + [collection[d] for d in docids[len(batch) :]]
    q = embed(ranker, [p.query for p in batch], ranker.config.query_prefix, module)
    d = embed_documents(ranker, texts, module)
    logits = scale * ranker.similarities(q, d)
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


# -- the steps -----------------------------------------------------------------------------------
class DenseSteps:
    """The :class:`~rankers.fit.loop.Trainable` of a dual encoder on one train split: its pairs,
    the mining rounds so far (saved with every checkpoint) and the contrastive loss."""

    def __init__(self, ranker: Any, train: RankingSplit) -> None:
        self.pairs = training_pairs(train)
        if not self.pairs:
            raise RankerError(
                f"train split {train.dataset}/{train.split} has no relevant candidate "
                f"(grade >= {train.relevance_level}): nothing to train on"
            )
        self.ranker, self.train = ranker, train
        self.positives = {
            cl.query.qid: relevant(train.qrels, cl.query.qid, train.relevance_level)
            for cl in train.lists
        }
        self.collection = train.collection()
        self.mining_rounds: list[MiningRound] = []

    def training_module(self) -> SentenceTransformer:
        return self.ranker.model

    def on_epoch_start(self, epoch: int) -> None:
        """Mine hard negatives: once (DPR), or with the current weights every epoch (ANCE)."""
        if not self.mining_rounds or self.ranker.refresh_negatives:
            self.mining_rounds.append(mine_negatives(self.ranker, self.train, epoch))

    def epoch_batches(self, train: RankingSplit, epoch: int) -> list[list[Pair]]:
        """The (query, positive) pairs shuffled by (seed, epoch), ``train_batch_size`` a step."""
        order = list(self.pairs)
        random.Random(self.ranker.config.seed + epoch).shuffle(order)
        size = self.ranker.config.train_batch_size
        return [order[b : b + size] for b in range(0, len(order), size)]

    def batch_loss(self, batch: Sequence[Pair], module: Any = None) -> torch.Tensor:
        """:func:`contrastive_loss` against the latest mining round's negatives."""
        negatives = self.mining_rounds[-1].negatives
        scale = logit_scale(self.ranker)
        return contrastive_loss(
            self.ranker, batch, negatives, self.positives, self.collection, scale, module
        )

    def training_state(self) -> dict[str, Any]:
        """The mining rounds so far: a resumed ANCE epoch trains on the negatives its start mined
        (the weights that mined them are gone by a mid-epoch checkpoint)."""
        return {"mining_rounds": [dataclasses.asdict(r) for r in self.mining_rounds]}

    def load_training_state(self, state: dict[str, Any]) -> None:
        self.mining_rounds = [MiningRound(**r) for r in state["mining_rounds"]]


def fit_dense(
    ranker: Any, train: RankingSplit, dev: RankingSplit | None
) -> tuple[TrainingSummary, list[MiningRound]]:
    """Contrastive fine-tuning of ``ranker`` in place by the shared loop (the best dev AP@10 epoch
    kept; checkpoints and resume in ``ranker.work_dir`` when set); returns the training summary
    and the mining rounds it trained on."""
    cfg = ranker.config
    steps = DenseSteps(ranker, train)
    plan = LoopPlan.of(
        cfg,
        warmup_ratio=cfg.warmup_ratio,
        data=split_key(train),
        describe=(
            f"{len(steps.pairs)} pairs, {cfg.train_batch_size} a step, {ranker.miner} negatives "
            f"x {cfg.hard_negatives}"
        ),
    )
    summary = train_loop(ranker, steps, train, dev, plan)
    summary.extra.update(
        {
            "train_queries": len({p.qid for p in steps.pairs}),
            "train_pairs": len(steps.pairs),
            "hard_negatives_per_query": cfg.hard_negatives,
            "negatives": ranker.miner,
            "negatives_refreshed_per_epoch": ranker.refresh_negatives,
            "collection_fallback_queries": steps.mining_rounds[0].collection_fallback,
            "scale": logit_scale(ranker),
            "similarity": ranker.similarity,
        }
    )
    return summary, steps.mining_rounds
