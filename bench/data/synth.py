"""A synthetic re-ranking data set anyone can generate offline (``bench datasets synth``).

Cost grows with the number of queries, the candidates per query (N) and the size of the
collection the token store indexes (M); measuring that growth should not need a download. This
module writes a folder in either layout :mod:`bench.data` reads (TREC files or MTEB JSONL) with a
dataset card, deterministic for a seed, whose texts have the length distributions of the real
short-text sets this harness ships with:

* ``titles``: word counts of SemEval-2016 3B question subjects (``semeval16b``);
* ``sentences``: word counts of WikiQA answer sentences (``wikiqa``, cut at 40 tokens upstream).

Words are drawn from a Zipfian vocabulary with the exponent fitted on the same set: pseudo-words
(syllables; no file needed, but WordPiece cuts most of them in two or more pieces, so items have
about twice as many WordPiece tokens as words, and lists share more pieces than real ones do), or
the words of a word list (``--vocab``, e.g. MiniLM's ``vocab.txt``: one WordPiece token per
word, in the vocabulary's own frequency order). Each query is written from one collection item
(its grade-2 judgement): about half its words are taken from that item, the rest drawn from the
vocabulary; other candidates sharing at least two of the query's non-common words are judged
grade 1, the rest grade 0 (binary in the MTEB layout: grade >= 1 is positive). The first-stage
run orders each query's N candidates by their word overlap with the query plus Gaussian noise,
so BM25 and the metrics are defined and non-trivial, but the texts mean nothing: figures on this
data measure cost, never quality.
"""

from __future__ import annotations

import json
import logging
import re
import shutil
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import yaml

from bench.core.io import current_umask, storage_errors
from bench.data import mteb, trec
from bench.data.cards import CARD_FILE
from bench.data.files import DatasetError, read_text, sha256_16

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LengthModel:
    """Word count ~ round(exp(Normal(mu, sigma))), clipped to [lo, hi]."""

    mu: float
    sigma: float
    lo: int
    hi: int

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        raw = np.rint(np.exp(rng.normal(self.mu, self.sigma, n)))
        return np.clip(raw, self.lo, self.hi).astype(np.int64)


@dataclass(frozen=True)
class TextModel:
    query: LengthModel
    item: LengthModel
    #: Zipf exponent s of the vocabulary (word of rank r has weight r^-s)
    zipf: float


# Fitted on the shared data (data README: semeval16b and wikiqa, all splits, whitespace words)
# over the queries and over the distinct candidate texts: lo/hi are the observed minimum and
# maximum (wikiqa's 40 is its upstream cut), and mu/sigma were found by Nelder-Mead (scipy, from
# the mean and sd of log(word count)) so that round(exp(mu + sigma * z)) clipped to [lo, hi]
# matches the real mean and standard deviation (400,000 normal draws, seed 0); the fit then
# matches the real p50 and p95 too. zipf is minus the slope of a least-squares line through
# log(frequency) against log(rank) of the 1000 most frequent words of queries and candidates.
# Measured: semeval16b queries 270, mean 5.519 words, sd 3.135, p50 5, p95 12; candidates 1733,
# mean 5.261, sd 2.722, p50 5, p95 10; 3730 distinct words, s 0.851. wikiqa queries 1242, mean
# 6.461, sd 2.093, p50 6, p95 10; candidates 11406, mean 24.093, sd 10.030, p50 23, p95 40;
# 25358 distinct words, s 0.919.
LENGTHS: dict[str, TextModel] = {
    "titles": TextModel(
        query=LengthModel(1.5634, 0.5467, 1, 18),
        item=LengthModel(1.5417, 0.4872, 1, 22),
        zipf=0.851,
    ),
    "sentences": TextModel(
        query=LengthModel(1.8162, 0.3135, 3, 22),
        item=LengthModel(3.1206, 0.5247, 1, 40),
        zipf=0.919,
    ),
}
#: the measured targets above (mean and sd of whitespace words), which the tests hold the
#: generated data to
TARGETS: dict[str, dict[str, tuple[float, float]]] = {
    "titles": {"query": (5.519, 3.135), "item": (5.261, 2.722)},
    "sentences": {"query": (6.461, 2.093), "item": (24.093, 10.030)},
}
LAYOUTS = (trec.LAYOUT, mteb.LAYOUT)
#: vocabulary size: more distinct words than either real set shows, so the tail stays open
VOCAB = 50_000
#: words of rank below this are "common": sharing them does not make a candidate relevant
COMMON = 100
#: chance that a query word is copied from its source item rather than drawn from the vocabulary
OVERLAP = 0.5
RUN_NAME = "run.synth.trec"
_ONSETS = [*"bdfghklmnprstvz", "ch", "st", "tr", "br", "pl"]
_VOWELS = ["a", "e", "i", "o", "u", "ai", "ou"]
_WORD = re.compile(r"[a-z]{2,}")


@dataclass(frozen=True)
class SynthSpec:
    """What ``bench datasets synth`` generates; every field is recorded in the card."""

    queries: int
    items: int
    collection: int
    layout: str = trec.LAYOUT
    length: str = "titles"
    seed: int = 0
    #: a word list (one per line, most frequent first, e.g. a BERT ``vocab.txt``) instead of
    #: pseudo-words; "" for pseudo-words
    vocab: str = ""

    def check(self) -> None:
        """A DatasetError naming the option for any value that cannot make a data set."""
        for option, value in (
            ("--queries", self.queries),
            ("--items", self.items),
            ("--collection", self.collection),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise DatasetError(f"{option} must be a whole number >= 1, got {value!r}")
        if self.items > self.collection:
            raise DatasetError(
                f"--items {self.items} exceeds --collection {self.collection}: each query's "
                "candidates are distinct items of the collection"
            )
        if self.queries > self.collection:
            raise DatasetError(
                f"--queries {self.queries} exceeds --collection {self.collection}: each query is "
                "written from its own collection item"
            )
        if self.layout not in LAYOUTS:
            raise DatasetError(f"--layout must be one of {', '.join(LAYOUTS)}, got {self.layout!r}")
        if self.length not in LENGTHS:
            raise DatasetError(f"--length must be one of {', '.join(LENGTHS)}, got {self.length!r}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            raise DatasetError(f"--seed must be a whole number >= 0, got {self.seed!r}")
        if self.vocab:
            load_vocabulary(Path(self.vocab))


#: fewest words a --vocab file must give (a Zipfian vocabulary needs a long tail)
MIN_WORDS = 1000


def load_vocabulary(path: Path) -> list[str]:
    """The words of a word list, in file order (rank 1 first): lines that are lower-case
    alphabetic words of two letters or more, each once. A BERT WordPiece ``vocab.txt`` lists its
    whole words roughly by corpus frequency after its special tokens and characters, which this
    keeps (``[PAD]``, ``##ing``, digits and single characters are dropped), so every word is one
    WordPiece token of that tokenizer, as most words of real titles are."""
    try:
        lines = read_text(path).splitlines()
    except DatasetError as exc:
        raise DatasetError(f"--vocab {path}: {exc}") from exc
    words = list(dict.fromkeys(w.strip() for w in lines if _WORD.fullmatch(w.strip())))
    if len(words) < MIN_WORDS:
        raise DatasetError(
            f"--vocab {path}: {len(words)} usable words (lower-case letters, two or more), need "
            f"at least {MIN_WORDS}; give a word list such as a BERT vocab.txt"
        )
    return words


def vocabulary(size: int = VOCAB) -> list[str]:
    """``size`` distinct pseudo-words, shortest first (rank 0 is the most frequent word): each
    rank written in base len(syllables), one syllable per digit, so frequent words are short."""
    syllables = [o + v for o in _ONSETS for v in _VOWELS]
    base = len(syllables)
    words = []
    for rank in range(size):
        digits, r = [], rank
        while True:
            digits.append(syllables[r % base])
            r = r // base - 1
            if r < 0:
                break
        words.append("".join(reversed(digits)))
    return words


def _zipf_cdf(size: int, s: float) -> np.ndarray:
    weights = np.arange(1, size + 1, dtype=np.float64) ** -s
    cdf = np.cumsum(weights)
    return cdf / cdf[-1]


def _word_ids(rng: np.random.Generator, cdf: np.ndarray, lengths: np.ndarray) -> list[np.ndarray]:
    """One array of vocabulary ranks per length (one vectorised draw for all of them)."""
    flat = np.searchsorted(cdf, rng.random(int(lengths.sum())), side="right")
    return np.split(flat, np.cumsum(lengths)[:-1])


@dataclass
class SynthData:
    """The generated texts, judgements and first-stage run (docids ``d<index>``, qids
    ``q<index>``), before they are written in one layout."""

    items: list[str]
    queries: list[str]
    #: per query: candidate item indices in first-stage order, their scores and grades
    candidates: list[np.ndarray]
    scores: list[np.ndarray]
    grades: list[np.ndarray]


def generate(spec: SynthSpec) -> SynthData:
    """The data set ``spec`` describes; the same spec gives the same data on any machine."""
    spec.check()
    model = LENGTHS[spec.length]
    rng = np.random.default_rng(spec.seed)
    words = np.array(
        load_vocabulary(Path(spec.vocab)) if spec.vocab else vocabulary(), dtype=object
    )
    cdf = _zipf_cdf(len(words), model.zipf)
    item_ids = _word_ids(rng, cdf, model.item.sample(rng, spec.collection))
    items = [" ".join(words[ids]) for ids in item_ids]
    # the MTEB layout names a text by its hash: a repeated text would merge two candidates
    seen: dict[str, int] = {}
    for i, text in enumerate(items):
        while text in seen:
            item_ids[i] = _word_ids(rng, cdf, model.item.sample(rng, 1))[0]
            text = " ".join(words[item_ids[i]])
        seen[text] = i
        items[i] = text

    sources = rng.choice(spec.collection, size=spec.queries, replace=False)
    query_lengths = model.query.sample(rng, spec.queries)
    queries: list[str] = []
    candidates, scores, grades = [], [], []
    for q, source in enumerate(sources.tolist()):
        own = item_ids[source]
        noise = _word_ids(rng, cdf, query_lengths[q : q + 1])[0]
        copied = rng.random(len(noise)) < OVERLAP
        q_ids = np.where(copied, own[rng.integers(0, len(own), len(noise))], noise)
        queries.append(" ".join(words[q_ids]))
        picked = rng.choice(spec.collection, size=spec.items, replace=False)
        if source not in picked:
            picked[rng.integers(0, spec.items)] = source
        rare = set(q_ids[q_ids >= COMMON].tolist())
        q_set = set(q_ids.tolist())
        overlap = np.array([len(q_set.intersection(item_ids[i].tolist())) for i in picked.tolist()])
        shared_rare = np.array([len(rare.intersection(item_ids[i].tolist())) for i in picked])
        grade = np.where(shared_rare >= 2, 1, 0)
        grade[picked == source] = 2
        score = overlap + rng.normal(0.0, 1.0, spec.items)
        order = np.argsort(-score, kind="stable")
        candidates.append(picked[order])
        scores.append(score[order])
        grades.append(grade[order])
    return SynthData(items, queries, candidates, scores, grades)


def _card(spec: SynthSpec, name: str) -> str:
    options = " ".join(
        f"--{k} {v}" for k, v in asdict(spec).items() if k in ("queries", "items", "collection")
    )
    command = (
        f"bench datasets synth {options} --layout {spec.layout} --length {spec.length} "
        f"--seed {spec.seed}" + (f" --vocab {spec.vocab}" if spec.vocab else "") + f" --out {name}"
    )
    words = (
        f"words of {Path(spec.vocab).name} (sha256 {sha256_16(Path(spec.vocab).read_bytes())})"
        if spec.vocab
        else "pseudo-words"
    )
    card = {
        "name": name,
        "layout": spec.layout,
        "relevance_level": 1,
        "default_split": "test",
        "description": (
            f"Synthetic {spec.length}: {spec.queries} queries x {spec.items} candidates from a "
            f"collection of {spec.collection} items of {words} (seed {spec.seed}); lengths "
            "and Zipf exponent fitted on semeval16b (titles) or wikiqa (sentences). For "
            "measuring cost; its texts mean nothing, so its quality figures mean nothing."
        ),
        "licence": "generated by crossjem-bench; no restrictions",
        "source": command,
    }
    return yaml.safe_dump(card, sort_keys=False, width=100)


def _write_trec(data: SynthData, folder: Path) -> None:
    with open(folder / trec.COLLECTION, "w", encoding="utf-8") as out:
        out.writelines(f"d{i}\t{text}\n" for i, text in enumerate(data.items))
    with open(folder / trec.QUERIES, "w", encoding="utf-8") as out:
        out.writelines(f"q{q}\t{text}\n" for q, text in enumerate(data.queries))
    with open(folder / RUN_NAME, "w", encoding="utf-8") as out:
        for q, (cands, score) in enumerate(zip(data.candidates, data.scores, strict=True)):
            out.writelines(
                f"q{q} Q0 d{d} {r} {s:.6f} synth\n"
                for r, (d, s) in enumerate(zip(cands.tolist(), score.tolist(), strict=True), 1)
            )
    with open(folder / trec.QRELS, "w", encoding="utf-8") as out:
        for q, (cands, grade) in enumerate(zip(data.candidates, data.grades, strict=True)):
            out.writelines(
                f"q{q} 0 d{d} {g}\n" for d, g in zip(cands.tolist(), grade.tolist(), strict=True)
            )


def _write_mteb(data: SynthData, folder: Path) -> None:
    with open(folder / "test.jsonl", "w", encoding="utf-8") as out:
        for q, (cands, grade) in enumerate(zip(data.candidates, data.grades, strict=True)):
            texts = [data.items[i] for i in cands.tolist()]
            line = {
                "qid": f"q{q}",
                "query": data.queries[q],
                "positive": [t for t, g in zip(texts, grade.tolist(), strict=True) if g >= 1],
                "negative": [t for t, g in zip(texts, grade.tolist(), strict=True) if g == 0],
            }
            out.write(json.dumps(line) + "\n")


def write_synth(spec: SynthSpec, out: Path) -> Path:
    """Generate ``spec`` and write it to ``out`` (a new or empty folder, named like a dataset),
    all files at once: they are written to a temporary folder beside it and renamed into place,
    so an interrupted run leaves no half data set and an existing one is never overwritten."""
    spec.check()
    out = Path(out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise DatasetError(
            f"--out {out} exists and is not an empty folder; give a new folder (nothing is "
            "overwritten)"
        )
    if not out.name or out.name.startswith("."):
        raise DatasetError(f"--out {out}: the folder name is the dataset name; give a plain name")
    above = next((p for p in out.parents if p.exists()), None)
    if above is not None and not above.is_dir():
        raise DatasetError(f"--out {out}: {above} is a file, not a folder; give a folder path")
    data = generate(spec)
    with storage_errors(out.parent):
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}.", suffix=".tmp"))
    try:
        # an OS error (a full disk) names the data set being written, and nothing of it is left
        with storage_errors(out):
            tmp.chmod(0o777 & ~current_umask())  # mkdtemp's 0700 is not what mkdir gives
            (_write_trec if spec.layout == trec.LAYOUT else _write_mteb)(data, tmp)
            (tmp / CARD_FILE).write_text(_card(spec, out.name), encoding="utf-8")
            if out.exists():
                out.rmdir()
            tmp.rename(out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    log.info("wrote %s (%s layout, %s)", out, spec.layout, spec.length)
    return out
