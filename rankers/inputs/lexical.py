"""BM25 statistics over a whole collection in flat arrays: the index the BM25 ranker scores
with, DPR mines its negatives from and the list trainer grows train lists from.

Tokenization: Unicode lower-casing, then maximal runs of word characters (``\\w+``); no stemming,
no stop-word removal.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

import numpy as np

from rankers.errors import RankerError

_TOKEN = re.compile(r"\w+", re.UNICODE)


def tokenize(text: str) -> list[str]:
    """The documented BM25 tokenization: lower-case word-character runs."""
    return _TOKEN.findall(text.lower())


#: documents tokenised per step while indexing: bounds the Python token lists held at once
CHUNK = 65536


class BM25Index:
    """rank-bm25 Okapi's scores over a collection, addressable by docid, held in flat arrays.

    rank-bm25 keeps one Python dict of term counts per document (a Python object per distinct
    token of every item: about a gigabyte at 10^6 short items); this index holds the same
    statistics as NumPy arrays - each term's postings (document rows ascending, term counts)
    end to end with offsets, and each document's length - and gives bit-identical scores:
    term ids follow rank-bm25's dictionary order (first occurrence in the collection), its idf
    (with the floor at epsilon * mean idf) is computed with the same ``math.log`` calls summed
    in the same order, and each query term adds the same float64 expression. rank-bm25's own
    ``BM25Okapi`` stays the test oracle.
    """

    def __init__(
        self,
        collection: dict[str, str],
        k1: float = 0.9,
        b: float = 0.4,
        epsilon: float = 0.25,
        chunk: int = CHUNK,
    ) -> None:
        if not collection:
            raise RankerError("BM25 needs a non-empty collection")
        self.k1, self.b = k1, b
        self.docids = list(collection)
        self.position = {d: i for i, d in enumerate(self.docids)}
        self.vocab: dict[str, int] = {}
        rows, terms, lens = [], [], []
        texts = list(collection.values())
        for start in range(0, len(texts), chunk):
            ids: list[int] = []
            for text in texts[start : start + chunk]:
                # rank-bm25 divides by zero on an empty document: a placeholder token, as before
                tokens = tokenize(text) or ["\x00"]
                lens.append(len(tokens))
                ids.extend(self.vocab.setdefault(t, len(self.vocab)) for t in tokens)
            chunk_lens = np.asarray(lens[start:], dtype=np.int64)
            rows.append(np.repeat(np.arange(start, start + len(chunk_lens)), chunk_lens))
            terms.append(np.asarray(ids, dtype=np.int64))
        self.doc_len = np.asarray(lens, dtype=np.int64)
        self.avgdl = sum(lens) / len(lens)
        n_terms = len(self.vocab)
        # one (row, term) key per token; unique keys sorted by term, then row: the postings
        keys, tf = np.unique(
            np.concatenate(terms) * len(lens) + np.concatenate(rows), return_counts=True
        )
        self.post_rows = (keys % len(lens)).astype(np.int32)
        self.post_tf = tf.astype(np.int32)
        df = np.bincount(keys // len(lens), minlength=n_terms)
        self.post_offsets = np.concatenate([[0], np.cumsum(df)])
        self.idf = self._idf(df.tolist(), len(lens), epsilon)

    @staticmethod
    def _idf(df: list[int], n_docs: int, epsilon: float) -> np.ndarray:
        """rank-bm25 Okapi's idf, term by term in its order, floored at epsilon * mean idf."""
        idf = [math.log(n_docs - freq + 0.5) - math.log(freq + 0.5) for freq in df]
        total = 0.0
        for value in idf:
            total += value
        eps = epsilon * (total / len(idf))
        return np.asarray([eps if value < 0 else value for value in idf], dtype=np.float64)

    @property
    def nbytes(self) -> int:
        """Bytes of the arrays (the term -> id and docid -> row dictionaries not counted)."""
        arrays = (self.post_rows, self.post_tf, self.post_offsets, self.idf, self.doc_len)
        return sum(a.nbytes for a in arrays)

    def _add_term(self, score: np.ndarray, term: int, rows: np.ndarray | None) -> None:
        """``score += `` one query term's contribution, as rank-bm25 computes it (``rows``:
        the documents scored, None for all)."""
        lo, hi = self.post_offsets[term], self.post_offsets[term + 1]
        post_rows, post_tf = self.post_rows[lo:hi], self.post_tf[lo:hi]
        if rows is None:
            q_freq = np.zeros(len(self.doc_len), dtype=np.int64)
            q_freq[post_rows] = post_tf
            doc_len = self.doc_len
        else:
            at = np.minimum(np.searchsorted(post_rows, rows), max(len(post_rows) - 1, 0))
            hit = post_rows[at] == rows if len(post_rows) else np.zeros(len(rows), dtype=bool)
            q_freq = np.where(hit, post_tf[at] if len(post_tf) else 0, 0).astype(np.int64)
            doc_len = self.doc_len[rows]
        k1, b = self.k1, self.b
        score += self.idf[term] * (
            q_freq * (k1 + 1) / (q_freq + k1 * (1 - b + b * doc_len / self.avgdl))
        )

    def batch_scores(self, tokens: Sequence[str], rows: Sequence[int]) -> np.ndarray:
        """Scores of the documents at ``rows`` for query ``tokens`` (rank-bm25's
        ``get_batch_scores``)."""
        idx = np.asarray(rows, dtype=np.int64)
        score = np.zeros(len(idx))
        for token in tokens:
            term = self.vocab.get(token)
            if term is not None:
                self._add_term(score, term, idx)
        return score

    def all_scores(self, tokens: Sequence[str]) -> np.ndarray:
        """Scores of every document (rank-bm25's ``get_scores``)."""
        score = np.zeros(len(self.doc_len))
        for token in tokens:
            term = self.vocab.get(token)
            if term is not None:
                self._add_term(score, term, None)
        return score

    def rows(self, docids: Sequence[str]) -> list[int]:
        """Row of each docid, or a RankerError naming the first one not in the collection."""
        missing = [d for d in docids if d not in self.position]
        if missing:
            raise RankerError(f"docid {missing[0]!r} is not in the BM25 collection")
        return [self.position[d] for d in docids]

    def score(self, query: str, docids: Sequence[str]) -> np.ndarray:
        return self.batch_scores(tokenize(query), self.rows(docids))

    def top_k(self, query: str, k: int, exclude: set[str] | None = None) -> list[str]:
        """The k best docids for ``query`` over the whole collection (hard-negative mining)."""
        scores = self.all_scores(tokenize(query))
        order = np.argsort(-scores, kind="stable")
        out: list[str] = []
        for i in order:
            d = self.docids[i]
            if exclude and d in exclude:
                continue
            out.append(d)
            if len(out) == k:
                break
        return out
