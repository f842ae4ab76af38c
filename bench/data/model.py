"""The data model every step shares: queries, candidates, candidate lists, graded qrels.

A dataset adapter produces a :class:`RankingSplit`; rankers only ever see :class:`CandidateList`
objects, and metrics only see qrels and scores. Keeping these small and frozen is what lets the
same candidate lists be scored by every ranker.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger(__name__)

# qid -> docid -> graded relevance
Qrels = dict[str, dict[str, int]]

#: dataset card fields that describe the data without changing any metric (kept out of cache keys)
CARD_TEXT_FIELDS = frozenset({"description", "licence", "source", "card_file", "default"})

#: how a split treats queries whose every candidate is relevant (:attr:`RankingSplit.all_relevant`)
KEPT, DROPPED = "kept", "dropped"
#: what each treatment means, as records state it
ALL_RELEVANT_CONVENTIONS = {
    KEPT: "kept and scored (every ranker scores 1.0 on them)",
    DROPPED: "dropped, as sentence-transformers' RerankingEvaluator (MTEB reranking) skips them",
}


@dataclass(frozen=True)
class Query:
    qid: str
    text: str


@dataclass(frozen=True)
class Candidate:
    """One item to rank. ``score`` is the first-stage score when the dataset has one."""

    docid: str
    text: str
    score: float | None = None


@dataclass(frozen=True)
class CandidateList:
    """All candidates of one query, in first-stage order when the dataset has one."""

    query: Query
    candidates: tuple[Candidate, ...]

    def __len__(self) -> int:
        return len(self.candidates)

    @property
    def docids(self) -> list[str]:
        return [c.docid for c in self.candidates]

    @property
    def texts(self) -> list[str]:
        return [c.text for c in self.candidates]


@dataclass
class RankingSplit:
    """One split of one dataset: the candidate lists to rank and the judgements to score them by.

    ``relevance_level`` is the smallest grade that counts as relevant for binary measures
    (AP, RR, P); ``dropped`` counts queries left out by the adapter, by reason, so that results
    can say how many were dropped and why. ``card`` is the content of the dataset card the split
    was loaded with (recorded with results; its facts are part of every cache key).
    """

    dataset: str
    split: str
    lists: list[CandidateList]
    qrels: Qrels
    relevance_level: int = 1
    layout: str = ""
    source: str = ""
    checksum: str = ""
    revision: str | None = None
    dropped: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    card: dict[str, Any] = field(default_factory=dict)
    #: queries whose every candidate is relevant: :data:`KEPT` (this harness's default) or
    #: :data:`DROPPED` (the card's ``drop_all_relevant``: MTEB's convention); every ranker
    #: scores 1.0 on such a query, so keeping them lifts every AP, RR and nDCG alike
    all_relevant: str = KEPT

    def __len__(self) -> int:
        return len(self.lists)

    def __iter__(self) -> Iterator[CandidateList]:
        return iter(self.lists)

    @property
    def n_candidates(self) -> int:
        return sum(len(cl) for cl in self.lists)

    def collection(self) -> dict[str, str]:
        """Every distinct candidate of the split, docid -> text (the corpus for BM25 statistics)."""
        docs: dict[str, str] = {}
        for cl in self.lists:
            for c in cl.candidates:
                docs.setdefault(c.docid, c.text)
        return docs

    def all_relevant_qids(self) -> list[str]:
        """Queries of the split whose every candidate is relevant (no negative to rank below)."""
        out = []
        for cl in self.lists:
            grades = self.qrels.get(cl.query.qid, {})
            if len(cl) and all(grades.get(d, 0) >= self.relevance_level for d in cl.docids):
                out.append(cl.query.qid)
        return out

    def without_all_relevant(self) -> RankingSplit:
        """This split with its all-relevant queries dropped and counted in :attr:`dropped`
        (``all_relevant``), as MTEB's reranking evaluation skips them."""
        gone = set(self.all_relevant_qids())
        dropped = dict(self.dropped)
        if gone:
            dropped["all_relevant"] = dropped.get("all_relevant", 0) + len(gone)
        return dataclasses.replace(
            self,
            lists=[cl for cl in self.lists if cl.query.qid not in gone],
            qrels={q: r for q, r in self.qrels.items() if q not in gone},
            dropped=dropped,
            all_relevant=DROPPED,
        )

    def subset(self, n_queries: int) -> RankingSplit:
        """The first ``n_queries`` lists with their qrels (for smoke runs and CI)."""
        lists = self.lists[:n_queries]
        keep = {cl.query.qid for cl in lists}
        return RankingSplit(
            dataset=self.dataset,
            split=self.split,
            lists=lists,
            qrels={q: r for q, r in self.qrels.items() if q in keep},
            relevance_level=self.relevance_level,
            layout=self.layout,
            source=self.source,
            checksum=self.checksum,
            revision=self.revision,
            dropped=dict(self.dropped),
            notes=[*self.notes, f"subset: first {len(lists)} of {len(self.lists)} queries"],
            card=dict(self.card),
            all_relevant=self.all_relevant,
        )

    @property
    def is_subset(self) -> bool:
        """Whether this split is the first queries of a larger one (:meth:`subset`)."""
        return any(note.startswith("subset: ") for note in self.notes)

    def empty_reason(self) -> str:
        """Why this split has no candidate list to rank, for the error that says so: every
        query dropped, and for which reasons (a split without any positive says that no query
        has one), or a source that holds no query at all."""
        dropped = {k: n for k, n in self.dropped.items() if n and k in DROP_REASONS}
        if not dropped:
            return f"{self.source or 'its source'} holds no query"
        reasons = ", ".join(f"{n} {DROP_REASONS[k]}" for k, n in dropped.items())
        if set(dropped) <= NO_POSITIVE:
            return (
                f"no query has a positive (a candidate of grade >= {self.relevance_level}), so "
                f"every query was dropped ({reasons})"
            )
        return f"every query was dropped ({reasons})"

    def fingerprint(self) -> dict[str, Any]:
        """Everything about the data a metric depends on: the files' checksum, the relevance
        level and the card's facts (not its descriptions). Cache keys hold it, so a new card or
        relevance level is never answered with results computed under the old one."""
        facts = {k: v for k, v in self.card.items() if k not in CARD_TEXT_FIELDS}
        return {
            "checksum": self.checksum,
            "relevance_level": self.relevance_level,
            "card": facts,
        }

    def info(self) -> dict[str, object]:
        """What a result record needs to say about the data it was computed on."""
        return {
            "dataset": self.dataset,
            "split": self.split,
            "layout": self.layout,
            "queries": len(self.lists),
            "candidates": self.n_candidates,
            "relevance_level": self.relevance_level,
            "source": self.source,
            "checksum": self.checksum,
            "revision": self.revision,
            "dropped": dict(self.dropped),
            "all_relevant": self.all_relevant_summary(),
            "notes": list(self.notes),
            "card": dict(self.card),
        }

    def all_relevant_summary(self) -> dict[str, Any]:
        """How many queries have every candidate relevant and what was done with them."""
        count = (
            self.dropped.get("all_relevant", 0)
            if self.all_relevant == DROPPED
            else len(self.all_relevant_qids())
        )
        return {
            "queries": count,
            "treatment": self.all_relevant,
            "convention": ALL_RELEVANT_CONVENTIONS[self.all_relevant],
        }


#: the reasons an adapter drops a query (keys of :attr:`RankingSplit.dropped`), in words
DROP_REASONS: dict[str, str] = {
    "no_positive": "without a positive candidate",
    "no_relevant_judgement": "without a relevant judgement",
    "empty": "without candidates",
    "not_in_run": "judged but not in the run file",
}
#: the reasons that mean "no positive": a split dropped for these alone has no positive at all
NO_POSITIVE = frozenset({"no_positive", "no_relevant_judgement"})


def blank_text_notes(lists: list[CandidateList], source: str) -> list[str]:
    """Notes counting the empty or whitespace-only query and candidate texts of ``lists``, each
    also a warning naming ``source`` (the file or folder read).

    They are ranked as given (a dataset may mean them), but a ranker can only tie or guess on
    them, so every result says how many there were, as it does for merged duplicates."""
    queries = sum(not cl.query.text.strip() for cl in lists)
    candidates = sum(not c.text.strip() for cl in lists for c in cl.candidates)
    notes = []
    if queries:
        notes.append(f"empty or whitespace-only query texts, ranked as given: {queries}")
    if candidates:
        notes.append(f"empty or whitespace-only candidate texts, ranked as given: {candidates}")
    for note in notes:
        warn_once(source, note)
    return notes


#: (source, note) pairs already warned about in this process
_WARNED: set[tuple[str, str]] = set()


def warn_once(source: str, note: str) -> None:
    """Log ``note`` about ``source`` (a file or folder read) as a warning the first time in this
    process and at debug level after. A command reads a split again for every ranker and job
    (`bench demo` read semeval16b's test file a dozen times, each time repeating its notes), so
    the repeats are quieted; every split and record still carries its notes."""
    key = (source, note)
    log.log(logging.DEBUG if key in _WARNED else logging.WARNING, "%s: %s", source, note)
    _WARNED.add(key)


def text_id(text: str, prefix: str) -> str:
    """A stable id for a text that carries none (MTEB files): a prefix and 12 hex of its SHA-1."""
    return prefix + hashlib.sha1(text.encode("utf-8")).hexdigest()[:12]


def relevant(qrels: Qrels, qid: str, level: int) -> set[str]:
    return {d for d, g in qrels.get(qid, {}).items() if g >= level}
