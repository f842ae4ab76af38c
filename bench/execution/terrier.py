"""PyTerrier: any bench ranker, or a folder a bench ranker saved, as a re-ranking transformer.

Users with PyTerrier pipelines re-rank a result frame (``qid, query, docno, text``, e.g. the
output of ``BM25 >> get_text``) with a ranker of this project, inside their own
``pt.Experiment``: :func:`reranker` returns a ``pt.Transformer`` whose ``transform`` groups the
frame by query (in order of first appearance), builds the same :class:`CandidateList` objects
`bench run` builds from a dataset, scores them with the ranker's own ``score`` and returns the
frame with ``rank`` (0 first; ties by the harness's rule, docno ascending), ``score`` as `bench
run` writes it into its run file (N, N-1, ..., 1 down that order, so an evaluation inside
PyTerrier orders tied candidates as `bench run` does and gives its figures) and
``ranker_score``, the ranker's own score.

Optional: ``pip install 'crossjem-bench[pyterrier]'`` (no Java is needed for re-ranking).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench.data.model import Candidate, CandidateList, Query, RankingSplit
from bench.results.ranking import rank_order
from rankers import Ranker, open_ranker

if TYPE_CHECKING:
    import pandas as pd

log = logging.getLogger(__name__)

_EXTRA = "pip install 'crossjem-bench[pyterrier]'"
#: the columns a re-ranking input frame must have
COLUMNS = ("qid", "query", "docno", "text")


def frame_lists(frame: pd.DataFrame) -> list[CandidateList]:
    """The candidate lists of a result frame, queries in order of first appearance, candidates
    in frame order."""
    missing = [c for c in COLUMNS if c not in frame.columns]
    if missing:
        raise ValueError(
            f"the frame to re-rank lacks column(s) {', '.join(missing)} (it needs "
            f"{', '.join(COLUMNS)}; add text with pt.text.get_text)"
        )
    lists: dict[str, tuple[Query, list[Candidate]]] = {}
    for qid, query, docno, text in frame[list(COLUMNS)].itertuples(index=False):
        entry = lists.setdefault(str(qid), (Query(str(qid), str(query)), []))
        entry[1].append(Candidate(str(docno), str(text)))
    return [CandidateList(q, tuple(cands)) for q, cands in lists.values()]


def rerank_frame(ranker: Ranker, frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with ``ranker_score``, the harness's ``rank`` and `bench run`'s run-file
    ``score``, sorted by query (first appearance) then rank."""
    import pandas as pd

    lists = frame_lists(frame)
    if not lists:
        empty = {"ranker_score": float, "rank": int, "score": float}
        return frame.assign(**{k: pd.Series(dtype=t) for k, t in empty.items()})
    ranker.index(RankingSplit(dataset="pyterrier", split="input", lists=lists, qrels={}))
    scores = ranker.score(lists)
    where: dict[tuple[str, str], tuple[float, int, float]] = {}
    for cl, s in zip(lists, scores, strict=True):
        order = rank_order(cl.docids, s)
        for rank, i in enumerate(order):
            run_score = float(len(order) - rank)
            where.setdefault((cl.query.qid, cl.docids[i]), (float(s[i]), rank, run_score))
    keys = list(zip(frame["qid"].astype(str), frame["docno"].astype(str), strict=True))
    out = frame.assign(
        ranker_score=[where[k][0] for k in keys],
        rank=[where[k][1] for k in keys],
        score=[where[k][2] for k in keys],
    )
    first = {cl.query.qid: n for n, cl in enumerate(lists)}
    order = sorted(range(len(out)), key=lambda i: (first[keys[i][0]], out["rank"].iat[i]))
    return out.iloc[order].reset_index(drop=True)


def reranker(
    ranker: str | Path | Ranker,
    options: Mapping[str, Any] | None = None,
    device: str = "cpu",
) -> Any:
    """A ``pt.Transformer`` that re-ranks with ``ranker`` (see :func:`open_ranker`)."""
    try:
        import pyterrier as pt
    except ImportError as exc:
        raise ImportError(f"the PyTerrier transformer needs pyterrier: {_EXTRA}") from exc

    opened = open_ranker(ranker, options, device)

    class BenchReranker(pt.Transformer):
        """Re-ranks a result frame with a crossjem-bench ranker."""

        def __init__(self) -> None:
            super().__init__()
            self.ranker = opened

        def transform(self, inp: pd.DataFrame) -> pd.DataFrame:
            return rerank_frame(self.ranker, inp)

        def __repr__(self) -> str:
            return f"BenchReranker({self.ranker.name})"

    return BenchReranker()
