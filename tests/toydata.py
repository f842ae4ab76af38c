"""Shared toy data for the training tests: lists where the relevant item is easy to learn."""

from __future__ import annotations

import random

from bench.data.model import Candidate, CandidateList, Query, RankingSplit

WORDS = ["apple", "banana", "cherry", "grape", "lemon", "mango", "olive", "peach", "pear", "plum"]


def gold_split(name: str, seed: int, n: int = 12) -> RankingSplit:
    """Query 'w', six items of three random words; the relevant one holds w and 'gold'."""
    rng = random.Random(seed)
    lists, qrels = [], {}
    for q in range(n):
        word = WORDS[q % len(WORDS)]
        others = [w for w in WORDS if w != word]
        texts = [" ".join(rng.sample(others, 3)) for _ in range(5)]
        pos = rng.randrange(6)
        texts.insert(pos, " ".join([*rng.sample(others, 2), word, "gold"]))
        qid = f"{name}{q}"
        cands = tuple(Candidate(f"d{i}", t) for i, t in enumerate(texts))
        lists.append(CandidateList(Query(qid, word), cands))
        qrels[qid] = {f"d{pos}": 1}
    return RankingSplit(dataset="toy", split=name, lists=lists, qrels=qrels, checksum=f"toy-{name}")
