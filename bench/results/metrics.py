"""Metrics through ir-measures, with the harness's two rules made explicit.

1. Every qrels query counts: a query the run does not rank scores 0 (trec_eval would skip it).
2. Ties are broken deterministically - score descending, then docid ascending - by turning scores
   into rank-based scores before evaluation, so results never depend on the evaluator's own
   tie order.

Binary measures (AP, RR, P) use the dataset's relevance level (``rel=``); nDCG uses the grades.
The names are ir-measures' own: AP@10 is the paper's MAP@10 averaged over queries.

Turning scores into a run (:func:`build_run`, :func:`rank_order`) is :mod:`bench.results.ranking`'s
(re- exported here): a run file is cached by what scored it, and the measures are computed again
from it, so a new or changed measure here never re-scores (:mod:`bench.execution.keys`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import ir_measures

from bench.data.model import Qrels
from bench.results.ranking import Run, build_run, rank_order

__all__ = ["DEFAULT_MEASURES", "Evaluation", "Run", "build_run", "evaluate", "parse", "rank_order"]

DEFAULT_MEASURES: tuple[str, ...] = ("AP@5", "AP@10", "AP", "RR@5", "RR@10", "nDCG@10", "P@1")

_GRADED = ("nDCG",)


@dataclass
class Evaluation:
    """Mean over all qrels queries, and the per-query values that feed significance tests."""

    aggregate: dict[str, float]
    per_query: dict[str, dict[str, float]] = field(default_factory=dict)


def _rank_scores(docs: dict[str, float]) -> dict[str, float]:
    """docid -> N, N-1, ..., 1 in the harness's tie order (a no-op on build_run output)."""
    docids = list(docs)
    order = rank_order(docids, [docs[d] for d in docids])
    return {docids[i]: float(len(order) - rank) for rank, i in enumerate(order)}


def parse(name: str, relevance_level: int) -> ir_measures.Measure:
    """'AP@10' -> AP(rel=2)@10 when the dataset's relevance level is 2; graded measures as is."""
    measure = ir_measures.parse_measure(name)
    if relevance_level != 1 and not name.startswith(_GRADED) and "rel" in measure.SUPPORTED_PARAMS:
        measure = measure(rel=relevance_level)
    return measure


def evaluate(
    qrels: Qrels,
    run: Run,
    relevance_level: int = 1,
    measures: Sequence[str] = DEFAULT_MEASURES,
) -> Evaluation:
    """Per-query and mean values of ``measures`` over every query in ``qrels``."""
    parsed = {parse(m, relevance_level): m for m in measures}
    qrels_list = [
        ir_measures.Qrel(q, d, int(g)) for q, docs in qrels.items() for d, g in docs.items()
    ]
    # Re-encode every run (not only build_run's) as rank scores: raw ties would otherwise be broken
    # by each provider's own rule (pytrec_eval: docid descending, msmarco RR: ascending).
    run_list = [
        ir_measures.ScoredDoc(q, d, s)
        for q, docs in run.items()
        if q in qrels
        for d, s in _rank_scores(docs).items()
    ]
    per_query: dict[str, dict[str, float]] = {q: dict.fromkeys(measures, 0.0) for q in qrels}
    if run_list:
        for metric in ir_measures.iter_calc(list(parsed), qrels_list, run_list):
            per_query[metric.query_id][parsed[metric.measure]] = float(metric.value)
    n = len(per_query)
    aggregate = {m: (sum(v[m] for v in per_query.values()) / n if n else 0.0) for m in measures}
    return Evaluation(aggregate=aggregate, per_query=per_query)
