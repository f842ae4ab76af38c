"""PyTerrier: any bench ranker, or a folder a bench ranker saved, as a re-ranking transformer.

Users with PyTerrier pipelines re-rank a result frame (``qid, query, docno, text``, e.g. the
output of ``BM25 >> get_text``) with a ranker of this project, inside their own
``pt.Experiment``: :func:`reranker` returns a ``pt.Transformer`` whose ``transform`` groups the
frame by query (in order of first appearance), builds the same :class:`CandidateList` objects
`bench run` builds from a dataset, scores them with the ranker's own ``score`` and returns the
frame with ``rank`` (0 first; ties by the harness's rule, docno ascending), ``score`` as `bench
run` writes it into its run file (N, N-1, ..., 1 down that order, so an evaluation inside
PyTerrier orders tied candidates as `bench run` does and gives its figures) and
``ranker_score``, the ranker's own score. A row whose text is missing (None or NaN, what a
failed text lookup leaves) is not scored: it is ranked last in its query, with a warning naming
it, never scored as the word "nan".

Optional: ``pip install 'crossjem-bench[pyterrier]'`` (no Java is needed for re-ranking).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench.data.model import Candidate, CandidateList, Query, RankingSplit, blank_text_notes
from bench.results.ranking import rank_order
from rankers import Ranker, open_ranker

if TYPE_CHECKING:
    import pandas as pd

log = logging.getLogger(__name__)

_EXTRA = "pip install 'crossjem-bench[pyterrier]'"
#: the columns a re-ranking input frame must have
COLUMNS = ("qid", "query", "docno", "text")


#: how many missing-text rows a warning names
NAMED_ROWS = 5


@dataclass(frozen=True)
class FrameLists:
    """A result frame as candidate lists: the rows with texts, in lists, and the rows left out
    because a text is missing (``(qid, docno)``, in frame order)."""

    lists: list[CandidateList]
    missing: list[tuple[str, str]]


def _no_text(value: object) -> bool:
    """Whether a frame cell holds no text: None, NaN or pandas' NA, what a failed text lookup
    (``pt.text.get_text`` on a docno it does not know) leaves. ``str()`` would make them the
    words "None" or "nan", which a ranker scores as text."""
    if value is None:
        return True
    import pandas as pd

    try:
        return bool(pd.isna(value))
    except (TypeError, ValueError):  # an array-like cell: not a missing scalar
        return False


def frame_lists(frame: pd.DataFrame) -> FrameLists:
    """The candidate lists of a result frame, queries in order of first appearance, candidates
    in frame order; a row whose query or candidate text is missing is left out of its list
    (:attr:`FrameLists.missing`), and a warning counts and names them. Empty texts are kept and
    counted, as `bench run` counts them (:func:`bench.data.model.blank_text_notes`)."""
    absent = [c for c in COLUMNS if c not in frame.columns]
    if absent:
        raise ValueError(
            f"the frame to re-rank lacks column(s) {', '.join(absent)} (it needs "
            f"{', '.join(COLUMNS)}; add text with pt.text.get_text)"
        )
    lists: dict[str, tuple[Query, list[Candidate]]] = {}
    missing: list[tuple[str, str]] = []
    for qid, query, docno, text in frame[list(COLUMNS)].itertuples(index=False):
        if _no_text(query) or _no_text(text):
            missing.append((str(qid), str(docno)))
            continue
        entry = lists.setdefault(str(qid), (Query(str(qid), str(query)), []))
        entry[1].append(Candidate(str(docno), str(text)))
    if missing:
        named = ", ".join(f"{q}/{d}" for q, d in missing[:NAMED_ROWS])
        more = f" and {len(missing) - NAMED_ROWS} more" if len(missing) > NAMED_ROWS else ""
        log.warning(
            "the frame to re-rank has %d row(s) without a query or candidate text (None or NaN: "
            "a failed text lookup?), qid/docno %s%s; they are not scored and are ranked last "
            "in their queries",
            len(missing),
            named,
            more,
        )
    found = [CandidateList(q, tuple(cands)) for q, cands in lists.values()]
    blank_text_notes(found, "the frame to re-rank")
    return FrameLists(found, missing)


def rerank_frame(ranker: Ranker, frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with ``ranker_score``, the harness's ``rank`` and `bench run`'s run-file
    ``score``, sorted by query (first appearance) then rank. Rows without text
    (:func:`frame_lists`) get no ``ranker_score`` (NaN) and come after the scored rows of their
    query, docno ascending."""
    import pandas as pd

    parsed = frame_lists(frame)
    lists = parsed.lists
    if frame.empty:
        empty = {"ranker_score": float, "rank": int, "score": float}
        return frame.assign(**{k: pd.Series(dtype=t) for k, t in empty.items()})
    if lists:
        ranker.index(RankingSplit(dataset="pyterrier", split="input", lists=lists, qrels={}))
    scores = ranker.score(lists) if lists else []
    ranked: dict[str, list[tuple[str, float]]] = {}
    for cl, s in zip(lists, scores, strict=True):
        ranked[cl.query.qid] = [(cl.docids[i], float(s[i])) for i in rank_order(cl.docids, s)]
    for qid, docno in sorted(parsed.missing, key=lambda row: row[1]):
        ranked.setdefault(qid, []).append((docno, math.nan))
    where: dict[tuple[str, str], tuple[float, int, float]] = {}
    for qid, rows in ranked.items():
        for rank, (docno, value) in enumerate(rows):
            where.setdefault((qid, docno), (value, rank, float(len(rows) - rank)))
    keys = list(zip(frame["qid"].astype(str), frame["docno"].astype(str), strict=True))
    out = frame.assign(
        ranker_score=[where[k][0] for k in keys],
        rank=[where[k][1] for k in keys],
        score=[where[k][2] for k in keys],
    )
    first = {qid: n for n, qid in enumerate(dict.fromkeys(q for q, _ in keys))}
    order = sorted(range(len(out)), key=lambda i: (first[keys[i][0]], out["rank"].iat[i]))
    return out.iloc[order].reset_index(drop=True)


def reranker(
    ranker: str | Path | Ranker, options: Mapping[str, Any] | None = None, device: str = "cpu"
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
