"""Shared toy data for the tests: lists where the relevant item is easy to learn."""

from __future__ import annotations

import json
import random
from pathlib import Path

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


def long_split(n_queries: int, n_items: int, seed: int = 0) -> RankingSplit:
    """Lists of ``n_items`` three-word items; item 3 and item ``n_items - 2`` are relevant."""
    rng = random.Random(seed)
    lists, qrels = [], {}
    for q in range(n_queries):
        cands = tuple(Candidate(f"d{i}", " ".join(rng.sample(WORDS, 3))) for i in range(n_items))
        qid = f"q{q}"
        lists.append(CandidateList(Query(qid, WORDS[q % len(WORDS)]), cands))
        qrels[qid] = {"d3": 1, f"d{n_items - 2}": 2, "d5": 0}
    return RankingSplit(dataset="long", split="train", lists=lists, qrels=qrels, checksum="long")


#: words of the toy MTEB dataset folders
NATO = [
    "alpha",
    "bravo",
    "charlie",
    "delta",
    "echo",
    "foxtrot",
    "golf",
    "hotel",
    "india",
    "juliet",
    "kilo",
    "lima",
    "mike",
]


def write_toy_mteb(
    folder: Path, splits: tuple[tuple[str, int], ...] = (("train", 8), ("dev", 4), ("test", 4))
) -> Path:
    """A tiny MTEB-layout dataset folder: each query's positive shares its two words."""
    folder.mkdir(parents=True)
    for split, n in splits:
        lines = []
        for i in range(n):
            a, b = NATO[i % len(NATO)], NATO[(i + 3) % len(NATO)]
            others = [w for w in NATO if w not in (a, b)]
            lines.append(
                json.dumps(
                    {
                        "query": f"{split} {a} {b}",
                        "positive": [f"{a} {b} {split}"],
                        "negative": [f"{others[i]} {others[i + 1]}", f"{others[i + 2]} {a}"],
                    }
                )
            )
        (folder / f"{split}.jsonl").write_text("\n".join(lines) + "\n")
    return folder


def write_tiny_settings(folder: Path, model: Path, defaults: str = "") -> Path:
    """Settings files in ``folder``: monoBERT on labels and CROSS-JEM distilled from it, both on
    ``model`` for one epoch (``defaults``: more ``default:`` lines, e.g. ``min_steps: 0``)."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, extra in (
        ("monobert", "loss: bce"),
        ("crossjem", "loss: listnet\n  teacher: monobert"),
    ):
        (folder / f"{name}.yaml").write_text(
            f"default:\n  model: {model}\n  epochs: 1\n  {defaults}{extra}\n"
            "datasets:\n  toy: {max_item_len: 8}\n"
        )
    return folder
