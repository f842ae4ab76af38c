"""ColBERT's training steps: colbert-ai's objective on (query, positive, negatives) triples, as the
:class:`~rankers.fit.loop.Trainable` :class:`ColBERTSteps` that
:func:`~rankers.fit.loop.train_loop` drives.

``ColBERT.forward`` scores each query against its [positive, ``nway - 1`` negatives] - the
``nway``-way softmax cross-entropy, plus colbert-ai's in-batch loss when ``use_ib_negatives`` - in
a small loop of our own (colbert-ai's ``Trainer`` wants its own file formats and launcher).
Training only, so kept out of the family module (:mod:`rankers.families.colbert`, which imports it
inside ``fit``): a scoring key leaves this package out, so editing the triples or the objective
re-keys ColBERT's trained models but never a run of a colbert-ai checkpoint as it is.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from bench.core.trained import TrainingSummary
from bench.data.model import RankingSplit, relevant
from rankers.base import RankerError
from rankers.fit.loop import LoopPlan, train_loop
from rankers.fit.resume import split_key

if TYPE_CHECKING:
    import torch
    from colbert.modeling.colbert import ColBERT


@dataclasses.dataclass(frozen=True)
class Triple:
    """One training example: a query, a positive and ``nway - 1`` negatives (texts)."""

    qid: str
    query: str
    positive: str
    negatives: tuple[str, ...]


@dataclasses.dataclass(frozen=True)
class QueryGroup:
    """A train query with its relevant and non-relevant candidate texts."""

    qid: str
    query: str
    positives: tuple[str, ...]
    negatives: tuple[str, ...]


def query_groups(split: RankingSplit) -> list[QueryGroup]:
    """Queries with at least one relevant and one non-relevant candidate (texts, list order)."""
    out: list[QueryGroup] = []
    for cl in split.lists:
        rel = relevant(split.qrels, cl.query.qid, split.relevance_level)
        pos = tuple(dict.fromkeys(c.text for c in cl.candidates if c.docid in rel))
        neg = tuple(dict.fromkeys(c.text for c in cl.candidates if c.docid not in rel))
        if pos and neg:
            out.append(QueryGroup(cl.query.qid, cl.query.text, pos, neg))
    return out


class ColBERTSteps:
    """The :class:`~rankers.fit.loop.Trainable` of a :class:`~rankers.families.colbert.
    ColBERTRanker`: triples sampled per (seed, epoch) and colbert-ai's objective on them."""

    def __init__(self, ranker: Any) -> None:
        self.ranker = ranker

    def triples(self, split: RankingSplit, rng: random.Random | None = None) -> list[Triple]:
        """One triple per (query, relevant candidate): ``nway - 1`` negatives from the query's
        non-relevant candidates - sampled with ``rng`` (without replacement while there are
        enough), else the first ones in list order, cycled when the list has too few."""
        k = self.ranker.cfg.nway - 1
        out: list[Triple] = []
        for g in query_groups(split):
            for pos in g.positives:
                if rng is None:
                    negs = [g.negatives[i % len(g.negatives)] for i in range(k)]
                elif len(g.negatives) >= k:
                    negs = rng.sample(g.negatives, k)
                else:
                    negs = [rng.choice(g.negatives) for _ in range(k)]
                out.append(Triple(g.qid, g.query, pos, tuple(negs)))
        return out

    def epoch_triples(self, train: RankingSplit, epoch: int) -> list[Triple]:
        """Epoch ``epoch``'s training order: negatives sampled and triples shuffled by a generator
        seeded with (seed, epoch), so a resumed epoch sees the same batches again."""
        rng = random.Random(self.ranker.cfg.seed * 100_003 + epoch)
        triples = self.triples(train, rng)
        rng.shuffle(triples)
        return triples

    def training_module(self) -> ColBERT:
        return self.ranker.colbert

    def epoch_batches(self, train: RankingSplit, epoch: int) -> list[list[Triple]]:
        """:meth:`epoch_triples` cut into ``train_batch_size`` triples a step."""
        triples, size = self.epoch_triples(train, epoch), self.ranker.cfg.train_batch_size
        return [triples[b : b + size] for b in range(0, len(triples), size)]

    def batch_loss(self, batch: Sequence[Triple], module: Any = None) -> torch.Tensor:
        """colbert-ai's objective on ``batch``: ``ColBERT.forward`` scores each query against its
        [positive, negatives], cross-entropy with the positive as target (+ in-batch loss).
        ``module``: the model to run (the training loop's prepared one; default the ranker's)."""
        import torch
        import torch.nn.functional as F

        ranker, cfg = self.ranker, self.ranker.cfg
        model = ranker.colbert if module is None else module
        Q = ranker.query_tokenizer.tensorize([t.query for t in batch])
        D = ranker.tensorize_documents([d for t in batch for d in (t.positive, *t.negatives)])
        out = model(Q, D)
        scores, ib_loss = out if cfg.use_ib_negatives else (out, None)
        scores = scores.view(-1, cfg.nway).float()
        labels = torch.zeros(scores.size(0), dtype=torch.long, device=scores.device)
        loss = F.cross_entropy(scores, labels)
        return loss + ib_loss if ib_loss is not None else loss

    def training_loss(self, split: RankingSplit) -> float:
        """Mean objective over ``split``'s deterministic triples (eval mode, no sampling)."""
        triples = self.triples(split)
        if not triples:
            raise RankerError(f"{split.dataset}/{split.split}: no (positive, negative) triple")
        total, step = 0.0, self.ranker.cfg.train_batch_size
        with self.ranker.inference():
            for i in range(0, len(triples), step):
                batch = triples[i : i + step]
                total += float(self.batch_loss(batch)) * len(batch)
        return total / len(triples)


def fit_colbert(ranker: Any, train: RankingSplit, dev: RankingSplit | None) -> TrainingSummary:
    """Fine-tune ``ranker`` in place with colbert-ai's objective by the shared loop; the epoch with
    the best dev AP@10 is kept, and with ``ranker.work_dir`` set the state is checkpointed there
    and an interrupted fit resumes from it."""
    cfg = ranker.cfg
    groups = query_groups(train)
    if not groups:
        raise RankerError(
            f"{train.dataset}/{train.split}: no query has both a relevant (grade >= "
            f"{train.relevance_level}) and a non-relevant candidate: nothing to train on"
        )
    n_triples = sum(len(g.positives) for g in groups)
    plan = LoopPlan.of(
        cfg,
        # colbert-ai: linear warm-up and decay when warmup is set, else a constant lr; its
        # AdamW decays every weight (biases and LayerNorm too)
        schedule="linear" if cfg.warmup_steps else "constant",
        warmup_steps=cfg.warmup_steps,
        no_decay=(),
        max_steps=cfg.max_steps,
        data=split_key(train),
        describe=(
            f"{len(groups)} queries, {n_triples} triples/epoch, nway {cfg.nway}, lr {cfg.lr:g}"
        ),
    )
    summary = train_loop(ranker, ColBERTSteps(ranker), train, dev, plan)
    summary.skipped_queries = len(train.lists) - len(groups)
    summary.extra.update(
        {
            "objective": (
                f"colbert-ai ColBERT.forward: {cfg.nway}-way softmax CE (positive + "
                f"{cfg.nway - 1} list negatives)"
                + (" + in-batch negatives CE" if cfg.use_ib_negatives else "")
            ),
            "train_queries": len(groups),
            "triples_per_epoch": n_triples,
        }
    )
    return summary
