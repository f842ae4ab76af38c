"""Latency and throughput benchmark: every ranker timed on the same BM25 top-N candidate lists.

The dataset's own lists are short (WikiQA: at most 30 items), so the benchmark builds lists of
exactly N items with a real first stage - BM25 over the split's whole candidate collection - which
keeps the token overlap between candidates realistic (CROSS-JEM's speed depends on it).

Protocol per N and ranker (:func:`run_benchmark`): create the ranker with its configured options
(trained weights optional: an untrained head costs the same), ``index()`` the lists, make
``warmup`` untimed calls, then time ``repeats`` passes over every list with
:class:`~bench.latency.LatencyTracker`, ``batch_queries`` lists per ``score()`` call, the rankers
taking turns call by call (:func:`time_interleaved`) so that load from other processes is shared
fairly. Each tokeniser is then timed alone on the same calls (:func:`tokeniser_for` says what it
covers per ranker).
monoBERT is timed at several batch sizes and a sentence-transformers ``CrossEncoder`` with the same
weights runs as a peer (:class:`STCrossEncoderPeer`), so the table's monoBERT is its best, not a
strawman. The cost model (:mod:`bench.efficiency`) predicts CROSS-JEM's speed-up from the same
lists' token counts, set beside the measured one.

Output: a :class:`LatencyRecord` written atomically to ``results/latency/{dataset}/*.json``,
:func:`build_latency_table` + :func:`render_latency` (the paper's latency table: ms per query, one
column per ranker, one row per N), and :func:`check_records` for ``bench check`` ratio entries.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import json
import logging
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from bench import efficiency, provenance
from bench.data.model import Candidate, CandidateList, RankingSplit
from bench.latency import LatencyTracker
from bench.results import ResultRecord, atomic_write_json, config_hash
from bench.runner import batches
from rankers.base import Ranker, RankerConfig, RankerError

if TYPE_CHECKING:
    from rich.table import Table

    from rankers.bm25 import BM25Index

log = logging.getLogger(__name__)

LATENCY_DIR = "latency"
#: rankers timed by default, in the paper's table order (st-crossencoder is the monoBERT peer)
DEFAULT_RANKERS: tuple[str, ...] = ("bm25", "dpr", "monobert", "st-crossencoder", "crossjem")
PEER = "st-crossencoder"
DUAL = ("dpr", "ance")
#: ``"all"``: every pair of a call in one forward pass
ALL = "all"
BatchSize = int | str
#: environment that changes CPU timings, recorded with every result. Under CPU contention
#: OpenMP's default spin-waiting can make 2-thread forward passes ~30x slower;
#: OMP_WAIT_POLICY=PASSIVE (set before torch loads) avoids that.
THREAD_ENV = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OMP_WAIT_POLICY", "TOKENIZERS_PARALLELISM")


# -- candidate lists -----------------------------------------------------------------------------
def bm25_lists(
    split: RankingSplit,
    n: int,
    *,
    index: BM25Index | None = None,
    queries: int | None = None,
) -> RankingSplit:
    """The first ``queries`` queries of ``split``, each with its BM25 top ``n`` items (BM25
    order, first-stage score kept) over the split's whole candidate collection."""
    from rankers.bm25 import BM25Index

    collection = split.collection()
    if len(collection) < n:
        raise ValueError(
            f"{split.dataset}/{split.split}: the candidate collection has {len(collection)} "
            f"distinct items, fewer than N={n}; choose N <= {len(collection)}"
        )
    if n < 1:
        raise ValueError(f"N must be >= 1, not {n}")
    index = index or BM25Index(collection)
    lists = []
    for cl in split.lists[:queries]:
        docids = index.top_k(cl.query.text, n)
        scores = index.score(cl.query.text, docids)
        cands = tuple(
            Candidate(d, collection[d], float(s)) for d, s in zip(docids, scores, strict=True)
        )
        lists.append(CandidateList(cl.query, cands))
    keep = {cl.query.qid for cl in lists}
    return dataclasses.replace(
        split,
        lists=lists,
        qrels={q: r for q, r in split.qrels.items() if q in keep},
        checksum=config_hash({"data": split.checksum, "bm25_top": n, "queries": len(lists)}),
        notes=[
            *split.notes,
            f"BM25 top {n} over the split's {len(collection)} distinct items "
            f"for the first {len(lists)} queries",
        ],
    )


@dataclass(frozen=True)
class QueryTokens:
    """WordPiece lengths of one list as the encoder rankers truncate it."""

    query_len: int  # L_q after truncation
    item_lens: tuple[int, ...]  # each item's L_k after truncation
    union: efficiency.UnionStats  # over all N items
    group_unions: tuple[int, ...]  # |U_g| of each CROSS-JEM packed group


def list_tokens(
    tokenizer: Any,
    lists: Sequence[CandidateList],
    *,
    max_query_len: int,
    max_item_len: int,
    union_len: int,
) -> list[QueryTokens]:
    """Per list: lengths, token union and CROSS-JEM's packed groups (as its ``rows()`` builds)."""
    from rankers.crossjem.inputs import pack_groups
    from rankers.encoders import token_ids

    out = []
    for cl in lists:
        q = token_ids(tokenizer, [cl.query.text], max_query_len)[0]
        items = token_ids(tokenizer, cl.texts, max_item_len)
        groups = pack_groups(items, union_len)
        out.append(
            QueryTokens(
                query_len=len(q),
                item_lens=tuple(len(ids) for ids in items),
                union=efficiency.union_stats(items, max_item_len),
                group_unions=tuple(len({t for i in g for t in items[i]}) for g in groups),
            )
        )
    return out


def token_summary(tokens: Sequence[QueryTokens], shape: efficiency.EncoderShape) -> dict[str, Any]:
    """Means over queries of the quantities the paper's complexity analysis uses, plus the cost
    model's totals (its predicted speed-up is the ratio of mean costs)."""
    costs = [efficiency.estimate(t.query_len, t.item_lens, t.group_unions, shape) for t in tokens]
    cost = efficiency.total(costs)

    def mean(values: Sequence[float]) -> float:
        return float(np.mean(values)) if len(values) else float("nan")

    return {
        "queries": len(tokens),
        "max_item_len": tokens[0].union.max_item_len if tokens else None,
        "query_len_mean": mean([t.query_len for t in tokens]),
        "item_len_mean": mean([k for t in tokens for k in t.item_lens]),
        "item_tokens_mean": mean([t.union.item_tokens for t in tokens]),  # the paper's m
        "union_mean": mean([t.union.union for t in tokens]),  # the paper's N_u
        "union_max": max((t.union.union for t in tokens), default=0),
        "groups_mean": mean([len(t.group_unions) for t in tokens]),
        "compression_mean": mean([t.union.compression for t in tokens]),
        "realised_compression_mean": mean([t.union.realised_compression for t in tokens]),
        "monobert_tokens_per_query": cost.monobert_tokens / max(len(tokens), 1),
        "crossjem_tokens_per_query": cost.crossjem_tokens / max(len(tokens), 1),
        "encoder": dataclasses.asdict(shape),
        "cost": cost.to_dict(),
    }


# -- the sentence-transformers peer ----------------------------------------------------------------
@dataclass
class STCrossEncoderConfig(RankerConfig):
    #: alias or folder of the weights (the same as monoBERT's; the head is random: timing only)
    model: str = "minilm-l6"
    batch_size: int = 32
    #: whole-pair token limit: monoBERT's L_q + L_k + 3
    max_length: int = 67


class STCrossEncoderPeer(Ranker):
    """sentence-transformers ``CrossEncoder.predict`` over the (query, item) pairs: a widely used
    cross-encoder implementation to check that our monoBERT is not slow by construction."""

    name: ClassVar[str] = PEER
    family: ClassVar[str] = "early"
    Config: ClassVar[type[RankerConfig]] = STCrossEncoderConfig
    pointwise: ClassVar[bool] = True

    def __init__(self, config: STCrossEncoderConfig | None = None, device: str = "cpu") -> None:
        super().__init__(config, device)
        self.config: STCrossEncoderConfig
        self._model: Any = None

    @property
    def model(self) -> Any:
        if self._model is None:
            from sentence_transformers import CrossEncoder

            from rankers.models import resolve_model

            ref = resolve_model(self.config.model)
            self._model = CrossEncoder(
                ref.path, num_labels=1, max_length=self.config.max_length, device=self.device
            )
        return self._model

    @staticmethod
    def _pairs(lists: Sequence[CandidateList]) -> list[tuple[str, str]]:
        return [(cl.query.text, t) for cl in lists for t in cl.texts]

    def score(self, lists: Sequence[CandidateList]) -> list[np.ndarray]:
        flat = self.model.predict(
            self._pairs(lists),
            batch_size=self.config.batch_size,
            show_progress_bar=False,
            convert_to_numpy=True,
        )
        bounds = np.cumsum([0] + [len(cl) for cl in lists])
        return [np.asarray(flat[bounds[k] : bounds[k + 1]]) for k in range(len(lists))]

    def tokenise(self, lists: Sequence[CandidateList]) -> int:
        """``CrossEncoder.preprocess`` per batch, as ``predict`` calls it; returns tokens."""
        pairs, step, tokens = self._pairs(lists), self.config.batch_size, 0
        for start in range(0, len(pairs), step):
            features = self.model.preprocess(pairs[start : start + step])
            tokens += int(features["attention_mask"].sum())
        return tokens

    def describe(self) -> dict[str, Any]:
        from rankers.models import resolve_model, weights_hash

        ref = resolve_model(self.config.model)
        return {
            **super().describe(),
            "model_id": ref.model_id,
            "base_weights_hash": weights_hash(ref.path) if ref.local else None,
            "implementation": "sentence_transformers.CrossEncoder.predict (random head)",
        }


# -- what is timed -------------------------------------------------------------------------------
@dataclass(frozen=True)
class Entry:
    """One timed configuration: its row label, how to create it, and its table column (the
    fastest row of a column is the column's figure)."""

    label: str
    ranker: str
    options: dict[str, Any] = field(default_factory=dict)
    column: str = ""


def entries_for(
    rankers: Sequence[str],
    dataset: str,
    n: int,
    batch_queries: int,
    *,
    monobert_batch_sizes: Sequence[BatchSize] = (32, 64, 128, ALL),
    peer_batch_sizes: Sequence[BatchSize] = (32, 64, 128),
    options: Mapping[str, Mapping[str, Any]] | None = None,
) -> list[Entry]:
    """The rows to time at list size ``n``: dual encoders in both scoring modes, monoBERT and
    its peer at each batch size (``"all"`` = every pair of a call), the rest once each."""
    from bench.runner import ranker_options
    from rankers import canonical_name, get_ranker_class

    options = options or {}
    everything = n * batch_queries

    def size(bs: BatchSize) -> int:
        if bs == ALL:
            return everything
        if int(bs) < 1:
            raise ValueError(f"batch size must be >= 1 or {ALL!r}, not {bs!r}")
        return int(bs)

    out: list[Entry] = []
    for name in rankers:
        if name == PEER:
            base = dict(options.get(PEER, {}))
            for bs in dict.fromkeys(size(b) for b in peer_batch_sizes):
                out.append(
                    Entry(f"{PEER} (batch_size={bs})", PEER, {**base, "batch_size": bs}, PEER)
                )
            continue
        key = canonical_name(name)
        base = ranker_options(key, dataset, options.get(key))
        if "batch_queries" in {f.name for f in dataclasses.fields(get_ranker_class(key).Config)}:
            base["batch_queries"] = batch_queries
        if key in DUAL:
            for precompute, mode in ((True, "precomputed"), (False, "query time")):
                label = f"{key} ({mode})"
                out.append(Entry(label, key, {**base, "precompute": precompute}, label))
        elif key == "monobert":
            for bs in dict.fromkeys(size(b) for b in monobert_batch_sizes):
                out.append(
                    Entry(f"monobert (batch_size={bs})", key, {**base, "batch_size": bs}, key)
                )
        else:
            out.append(Entry(key, key, base, key))
    return out


def create_entry(entry: Entry, device: str, checkpoint: str | None = None) -> Ranker:
    """The ranker of ``entry``; ``checkpoint`` (a ``save()`` folder) loads trained weights."""
    from rankers import create_ranker

    options = dict(entry.options)
    if entry.ranker == PEER:
        config = STCrossEncoderConfig.from_options(
            {**options, **({"model": str(Path(checkpoint) / "encoder")} if checkpoint else {})}
        )
        return STCrossEncoderPeer(config, device=device)  # type: ignore[arg-type]
    takes_checkpoint = "checkpoint" in options or _has_field(entry.ranker, "checkpoint")
    if checkpoint and takes_checkpoint:
        options["checkpoint"] = checkpoint
    ranker = create_ranker(entry.ranker, options, device=device)
    if checkpoint and not takes_checkpoint:
        ranker.load(Path(checkpoint))
    return ranker


def _has_field(name: str, key: str) -> bool:
    from rankers import get_ranker_class

    return key in {f.name for f in dataclasses.fields(get_ranker_class(name).Config)}


#: what the timed tokeniser covers and the callable (lists -> tokens it produced)
Tokeniser = tuple[str, Callable[[Sequence[CandidateList]], int]]


def tokeniser_for(ranker: Ranker) -> Tokeniser | None:
    """The host-side input preparation of ``ranker``'s ``score()``, to time on its own.

    * bm25: lower-casing + ``\\w+`` split of the query (items were tokenised in ``index()``);
    * dpr/ance: the SentenceTransformer tokenizer on what is encoded at query time - the
      queries (precomputed items) or queries and items - in chunks of ``batch_size``;
    * monobert: ``MonoBERTRanker.pairs`` - WordPiece of query and items and the
      ``[CLS] q [SEP] k [SEP]`` id lists (per-batch padding into tensors is not included);
    * crossjem: ``CrossJEMRanker.scoring_passes`` - WordPiece, token union, group packing,
      length buckets, pooling masks and padding into tensors on the device (everything before
      the encoder);
    * st-crossencoder: ``CrossEncoder.preprocess`` per batch (tokenizer with padding).

    Returns None for rankers without a known split (they get no tokenisation figure).
    """
    from rankers.bm25 import BM25Ranker, tokenize

    if isinstance(ranker, STCrossEncoderPeer):
        return "CrossEncoder.preprocess per batch (WordPiece + padding)", ranker.tokenise
    if isinstance(ranker, BM25Ranker):
        return "query: lower-case + \\w+ split (items tokenised in index())", (
            lambda lists: sum(len(tokenize(cl.query.text)) for cl in lists)
        )
    name = ranker.name
    if name in ("monobert", "crossjem"):
        return _encoder_tokeniser(ranker)
    if name in DUAL:
        return _dense_tokeniser(ranker)
    return None


def _encoder_tokeniser(ranker: Any) -> Tokeniser:
    if ranker.name == "monobert":

        def pairs(lists: Sequence[CandidateList]) -> int:
            return sum(len(ids) for cl in lists for ids, _ in ranker.pairs(cl.query.text, cl.texts))

        return "MonoBERTRanker.pairs: WordPiece + [CLS] q [SEP] k [SEP] ids (no padding)", pairs

    def passes(lists: Sequence[CandidateList]) -> int:
        tokens, step = 0, ranker.cfg.batch_queries
        for start in range(0, len(lists), step):
            chunk = lists[start : start + step]
            for p in ranker.scoring_passes([(cl.query.text, cl.texts) for cl in chunk]):
                tokens += int(p.batch.attention_mask.sum())
        return tokens

    return (
        "CrossJEMRanker.scoring_passes: WordPiece, union, packing, length buckets, pooling "
        "masks, padded tensors",
        passes,
    )


def _dense_tokeniser(ranker: Any) -> Tokeniser:
    def tokenise(lists: Sequence[CandidateList]) -> int:
        cfg, model = ranker.config, ranker.model
        prep = getattr(model, "preprocess", None) or model.tokenize
        texts = [cfg.query_prefix + cl.query.text for cl in lists]
        if not cfg.precompute:
            texts += [cfg.document_prefix + t for cl in lists for t in cl.texts]
        tokens = 0
        for start in range(0, len(texts), cfg.batch_size):
            tokens += int(prep(texts[start : start + cfg.batch_size])["attention_mask"].sum())
        return tokens

    scope = "queries" if ranker.config.precompute else "queries and items"
    return f"SentenceTransformer tokenizer on the {scope} (chunks of batch_size)", tokenise


def effective_dtype(ranker: Ranker) -> str:
    """The dtype the ranker computes in: its parameters', or the autocast dtype on CUDA."""
    from rankers.encoders import DTYPES, EncoderRanker

    module = None
    if isinstance(ranker, EncoderRanker):
        autocast = DTYPES[ranker.cfg.dtype]
        if ranker.device.startswith("cuda") and autocast is not None:
            return f"autocast {str(autocast).removeprefix('torch.')}"
        module = ranker.module
    else:
        module = getattr(ranker, "model", None)
    params = getattr(module, "parameters", None)
    if params is None:
        return "n/a"
    first = next(iter(params()), None)
    return str(first.dtype).removeprefix("torch.") if first is not None else "n/a"


def weights_state(ranker: Ranker, checkpoint: str | None) -> str:
    """How trained the scoring weights are: what the latency figure does (not) depend on."""
    if ranker.name == "bm25":
        return "n/a"
    if checkpoint:
        return f"trained ({checkpoint})"
    if ranker.name in DUAL:
        return "pre-trained encoder, not fine-tuned"
    return "untrained head on the pre-trained encoder (same cost as trained)"


# -- timing --------------------------------------------------------------------------------------
def time_interleaved(
    rankers: Sequence[Ranker],
    lists: Sequence[CandidateList],
    *,
    batch_queries: int = 1,
    warmup: int = 3,
    repeats: int = 3,
) -> list[LatencyTracker]:
    """``warmup`` untimed calls per ranker, then ``repeats`` timed passes over ``lists``
    (``batch_queries`` lists per ``score()`` call); one tracker per ranker, timed calls only.

    The rankers take turns call by call (the order rotating), so a burst of load from other
    processes on a shared machine falls on all of them alike rather than on whichever ran then.
    """
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, not {repeats}")
    calls = list(batches(lists, batch_queries))
    if not calls:
        raise ValueError("no candidate lists to time")
    for ranker in rankers:
        for i in range(warmup):
            ranker.score(calls[i % len(calls)])
    trackers = [LatencyTracker(r.device) for r in rankers]
    turn = 0
    for _ in range(repeats):
        for batch in calls:
            order = [(turn + k) % len(rankers) for k in range(len(rankers))]
            turn += 1
            for k in order:
                ranker = rankers[k]
                with trackers[k].track(queries=len(batch), candidates=sum(map(len, batch))):
                    out = ranker.score(batch)
                if [len(s) for s in out] != [len(cl) for cl in batch]:
                    raise RankerError(f"{ranker.name} returned scores that do not match its lists")
    return trackers


def time_scoring(
    ranker: Ranker,
    lists: Sequence[CandidateList],
    *,
    batch_queries: int = 1,
    warmup: int = 3,
    repeats: int = 3,
) -> LatencyTracker:
    """:func:`time_interleaved` for one ranker."""
    return time_interleaved(
        [ranker], lists, batch_queries=batch_queries, warmup=warmup, repeats=repeats
    )[0]


def time_tokeniser(
    tokenise: Callable[[Sequence[CandidateList]], int],
    lists: Sequence[CandidateList],
    *,
    batch_queries: int = 1,
    repeats: int = 3,
    device: str = "cpu",
) -> tuple[LatencyTracker, float]:
    """The tokeniser alone on the same calls (one untimed call first); also returns the mean
    tokens it produced per query."""
    calls = list(batches(lists, batch_queries))
    tokenise(calls[0])
    tracker = LatencyTracker(device)
    tokens = 0
    for rep in range(repeats):
        for batch in calls:
            with tracker.track(queries=len(batch), candidates=sum(len(cl) for cl in batch)):
                produced = tokenise(batch)
            if rep == 0:
                tokens += produced
    return tracker, tokens / len(lists)


# -- records -------------------------------------------------------------------------------------
@dataclass
class LatencyRow:
    """One entry timed at one N."""

    label: str
    ranker: str
    column: str
    family: str
    n: int
    batch_queries: int
    options: dict[str, Any]
    weights: str
    dtype: str
    latency: dict[str, Any]  # LatencySummary.to_dict() of end-to-end score() calls
    tokenisation: dict[str, Any] | None  # the tokeniser alone, with "covers"
    tokens: dict[str, Any]  # the N block's token statistics + this ranker's tokens per query
    best: bool = False  # fastest (p50) row of its column at this N
    ranker_info: dict[str, Any] = field(default_factory=dict)  # describe()


@dataclass
class ListBlock:
    """Everything about the lists of one N that is not a ranker's timing."""

    n: int
    queries: int
    tokens: dict[str, Any]  # token_summary()
    speedup: dict[str, Any] = field(default_factory=dict)  # speedup_summary()
    repeats: int = 0  # timed passes over the lists
    warmup: int = 0  # untimed calls before them


@dataclass
class LatencyRecord:
    dataset: str
    split: str
    created: str
    config: dict[str, Any]
    config_hash: str
    device: str
    threads: int
    batch_queries: int
    blocks: list[ListBlock]
    rows: list[LatencyRow]
    data: dict[str, Any]
    provenance: dict[str, Any]
    path: Path | None = field(default=None, compare=False)

    def to_json(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out.pop("path")
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any], path: Path | None = None) -> LatencyRecord:
        names = {f.name for f in dataclasses.fields(cls)} - {"path", "blocks", "rows"}
        return cls(
            **{k: v for k, v in data.items() if k in names},
            blocks=[ListBlock(**b) for b in data.get("blocks", [])],
            rows=[LatencyRow(**r) for r in data.get("rows", [])],
            path=path,
        )

    def block(self, n: int) -> ListBlock:
        for b in self.blocks:
            if b.n == n:
                return b
        raise KeyError(f"no N={n} in {self.path}; have {[b.n for b in self.blocks]}")

    def best(self, n: int, column: str) -> LatencyRow | None:
        rows = [r for r in self.rows if r.n == n and r.column == column and r.best]
        return rows[0] if rows else None


def mark_best(rows: Sequence[LatencyRow]) -> None:
    """Flag the lowest-p50 row of each (N, column): monoBERT's best batch size, etc."""
    groups: dict[tuple[int, str], list[LatencyRow]] = {}
    for row in rows:
        groups.setdefault((row.n, row.column), []).append(row)
    for group in groups.values():
        fastest = min(group, key=lambda r: r.latency["p50_ms"])
        for row in group:
            row.best = row is fastest


def speedup_summary(
    rows: Sequence[LatencyRow], block: ListBlock, slow: str = "monobert", fast: str = "crossjem"
) -> dict[str, Any]:
    """Measured (best ``slow`` row / best ``fast`` row, mean and p50) against predicted (cost
    model FLOPs ratio) speed-up at one N; empty when either column is missing."""
    pick = {
        c: [r for r in rows if r.n == block.n and r.column == c and r.best] for c in (slow, fast)
    }
    if not pick[slow] or not pick[fast]:
        return {}
    a, b = pick[slow][0], pick[fast][0]
    predicted = block.tokens["cost"]["predicted_speedup"]
    mean = a.latency["mean_ms"] / b.latency["mean_ms"]
    return {
        "baseline": a.label,
        "model": b.label,
        "measured_mean": mean,
        "measured_p50": a.latency["p50_ms"] / b.latency["p50_ms"],
        "predicted_flops": predicted,
        "predicted_tokens": block.tokens["cost"]["token_ratio"],
        "fraction_of_prediction": mean / predicted if predicted else None,
    }


def latency_dir(root: Path, dataset: str) -> Path:
    return root / LATENCY_DIR / dataset


def write_latency_record(record: LatencyRecord, root: Path) -> Path:
    """``results/latency/{dataset}/{split}-bq{B}-{created}-{hash}.json``, written atomically."""
    stamp = record.created.replace(":", "").replace("-", "").split("+")[0]
    path = latency_dir(root, record.dataset) / (
        f"{record.split}-bq{record.batch_queries}-{stamp}-{record.config_hash}.json"
    )
    atomic_write_json(path, record.to_json())
    record.path = path
    return path


def load_latency_records(
    root: Path, dataset: str | None = None, split: str | None = None
) -> list[LatencyRecord]:
    """Every latency record under ``root/latency``, oldest first; unreadable ones are skipped."""
    out = []
    for path in sorted((root / LATENCY_DIR).glob(f"{dataset or '*'}/*.json")):
        try:
            rec = LatencyRecord.from_json(json.loads(path.read_text(encoding="utf-8")), path)
        except (ValueError, TypeError, KeyError) as exc:
            log.warning("skipping %s: %s", path, exc)
            continue
        if split is None or rec.split == split:
            out.append(rec)
    return sorted(out, key=lambda r: r.created)


def check_records(records: Sequence[LatencyRecord]) -> list[ResultRecord]:
    """The best row of each column at each N as a :class:`ResultRecord`, so ``bench check``
    ratio entries can use benchmark figures. ``run_config`` holds ``benchmark: latency``, ``n``,
    ``batch_queries``, ``threads``, ``device`` and ``column``; ``config`` the ranker's options
    (e.g. ``precompute``, ``batch_size``)::

        - kind: ratio
          dataset: wikiqa
          numerator: {ranker: monobert, field: mean_ms, config: {benchmark: latency, n: 100}}
          denominator: {ranker: crossjem, field: mean_ms, config: {benchmark: latency, n: 100}}
          min: 4.0
    """
    out = []
    for rec in records:
        for row in rec.rows:
            if not row.best:
                continue
            out.append(
                ResultRecord(
                    ranker=row.ranker,
                    dataset=rec.dataset,
                    split=rec.split,
                    family=row.family,
                    label=f"{row.label} N={row.n}",
                    metrics={},
                    latency=dict(row.latency),
                    config=dict(row.options),
                    run_config={
                        "benchmark": "latency",
                        "n": row.n,
                        "batch_queries": row.batch_queries,
                        "threads": rec.threads,
                        "device": rec.device,
                        "column": row.column,
                    },
                    config_hash=rec.config_hash,
                    data=rec.data,
                    provenance={},
                    created=rec.created,
                    path=rec.path,
                )
            )
    return out


# -- the protocol --------------------------------------------------------------------------------
@dataclass
class BenchOptions:
    """Everything `bench latency` takes."""

    dataset: str
    split: str | None = None
    n_values: Sequence[int] = (30, 100)
    rankers: Sequence[str] = DEFAULT_RANKERS
    batch_queries: int = 1
    #: lists timed per N: the first ``queries`` queries of the split (None: all)
    queries: int | None = 20
    repeats: int = 3
    warmup: int = 3
    device: str = "cpu"
    threads: int | None = 2
    seed: int = 0
    monobert_batch_sizes: Sequence[BatchSize] = (32, 64, 128, ALL)
    peer_batch_sizes: Sequence[BatchSize] = (32, 64, 128)
    #: ranker name -> save() folder of trained weights (latency needs none)
    checkpoints: Mapping[str, str] = field(default_factory=dict)
    #: ranker name -> option overrides (like `bench run --set`)
    options: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    data_dir: str | Path | None = None
    results_dir: str | Path | None = None


def _token_settings(dataset: str, options: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """L_q, L_k, L_u and model of CROSS-JEM's configuration (monoBERT shares L_q, L_k)."""
    from bench.runner import ranker_options
    from rankers.crossjem import CrossJEMConfig

    cfg = CrossJEMConfig.from_options(ranker_options("crossjem", dataset, options.get("crossjem")))
    assert isinstance(cfg, CrossJEMConfig)
    return {
        "model": cfg.model,
        "max_query_len": cfg.max_query_len,
        "max_item_len": cfg.max_item_len,
        "union_len": cfg.union_len,
    }


def _encoder_shape_and_tokenizer(model: str) -> tuple[efficiency.EncoderShape, Any]:
    from transformers import AutoConfig, AutoTokenizer

    from rankers.models import resolve_model

    path = resolve_model(model).path
    shape = efficiency.EncoderShape.from_config(AutoConfig.from_pretrained(path))
    return shape, AutoTokenizer.from_pretrained(path)


def time_entries(
    entries: Sequence[Entry],
    split: RankingSplit,
    tokens: dict[str, Any],
    opts: BenchOptions,
    device: str,
) -> list[LatencyRow]:
    """Create and index every entry, time them interleaved on one N's lists, then time each
    one's tokeniser alone."""
    loaded = []
    for entry in entries:
        checkpoint = opts.checkpoints.get(entry.ranker) or (
            opts.checkpoints.get("monobert") if entry.ranker == PEER else None
        )
        ranker = create_entry(entry, device, checkpoint)
        ranker.index(split)
        loaded.append((entry, checkpoint, ranker))
    trackers = time_interleaved(
        [r for _, _, r in loaded],
        split.lists,
        batch_queries=opts.batch_queries,
        warmup=opts.warmup,
        repeats=opts.repeats,
    )
    n = len(split.lists[0])
    extra = {
        "batch_queries": opts.batch_queries,
        "warmup_calls": opts.warmup,
        "repeats": opts.repeats,
        "n": n,
        "interleaved": len(loaded),
        "scope": "ranker.score per call (tokenisation included)",
    }
    rows = []
    for (entry, checkpoint, ranker), tracker in zip(loaded, trackers, strict=True):
        latency = tracker.summary(**extra).to_dict()
        tokenisation, per_query = None, None
        step = tokeniser_for(ranker)
        if step is not None:
            covers, fn = step
            tok, per_query = time_tokeniser(
                fn,
                split.lists,
                batch_queries=opts.batch_queries,
                repeats=opts.repeats,
                device=ranker.device,
            )
            tokenisation = {
                **tok.summary(**extra).to_dict(),
                "covers": covers,
                "share_of_mean": tok.summary().mean_ms / latency["mean_ms"],
            }
        rows.append(
            LatencyRow(
                label=entry.label,
                ranker=entry.ranker,
                column=entry.column,
                family=ranker.family,
                n=n,
                batch_queries=opts.batch_queries,
                options=ranker.config.to_dict(),
                weights=weights_state(ranker, checkpoint),
                dtype=effective_dtype(ranker),
                latency=latency,
                tokenisation=tokenisation,
                tokens={
                    **{k: v for k, v in tokens.items() if k not in ("cost", "encoder")},
                    "tokens_per_query": per_query,
                },
                ranker_info=ranker.describe(),
            )
        )
        log.info(
            "%s N=%d: p50 %.2f ms/query, mean %.2f ms",
            entry.label,
            n,
            latency["p50_ms"],
            latency["mean_ms"],
        )
    return rows


def run_benchmark(opts: BenchOptions) -> LatencyRecord:
    """Time every ranker of ``opts`` at every N on BM25 top-N lists; write and return the record.

    Raises ValueError when the split's collection has fewer than N items.
    """
    from bench.data import load_split
    from bench.device import device_info, resolve_device, seed_everything, set_threads
    from bench.settings import results_root
    from rankers.bm25 import BM25Index

    if opts.batch_queries < 1:
        raise ValueError(f"batch_queries must be >= 1, not {opts.batch_queries}")
    root = results_root(opts.results_dir)
    device = resolve_device(opts.device)
    seed_everything(opts.seed)
    threads = set_threads(opts.threads)
    split = load_split(opts.dataset, opts.split, opts.data_dir)
    collection = split.collection()
    too_big = [n for n in opts.n_values if n > len(collection)]
    if too_big:
        raise ValueError(
            f"{split.dataset}/{split.split}: the candidate collection has {len(collection)} "
            f"distinct items, fewer than N={too_big[0]}; choose N <= {len(collection)}"
        )
    settings = _token_settings(split.dataset, opts.options)
    shape, tokenizer = _encoder_shape_and_tokenizer(settings["model"])
    index = BM25Index(collection)
    blocks: list[ListBlock] = []
    rows: list[LatencyRow] = []
    for n in opts.n_values:
        lists = bm25_lists(split, n, index=index, queries=opts.queries)
        summary = token_summary(
            list_tokens(
                tokenizer,
                lists.lists,
                max_query_len=settings["max_query_len"],
                max_item_len=settings["max_item_len"],
                union_len=settings["union_len"],
            ),
            shape,
        )
        block = ListBlock(
            n=n,
            queries=len(lists),
            tokens={**summary, **settings},
            repeats=opts.repeats,
            warmup=opts.warmup,
        )
        entries = entries_for(
            opts.rankers,
            split.dataset,
            n,
            opts.batch_queries,
            monobert_batch_sizes=opts.monobert_batch_sizes,
            peer_batch_sizes=opts.peer_batch_sizes,
            options=opts.options,
        )
        rows.extend(time_entries(entries, lists, block.tokens, opts, device))
        mark_best(rows)
        block.speedup = speedup_summary(rows, block)
        blocks.append(block)
    config = {
        "n_values": list(opts.n_values),
        "rankers": list(opts.rankers),
        "batch_queries": opts.batch_queries,
        "queries": opts.queries,
        "repeats": opts.repeats,
        "warmup": opts.warmup,
        "seed": opts.seed,
        "monobert_batch_sizes": list(opts.monobert_batch_sizes),
        "peer_batch_sizes": list(opts.peer_batch_sizes),
        "checkpoints": dict(opts.checkpoints),
        "options": {k: dict(v) for k, v in opts.options.items()},
        "first_stage": "bm25 (k1=0.9, b=0.4) over the split's candidate collection",
    }
    record = LatencyRecord(
        dataset=split.dataset,
        split=split.split,
        created=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        config=config,
        config_hash=config_hash(
            {"config": config, "data": split.checksum, "device": device, "threads": threads}
        ),
        device=device,
        threads=threads,
        batch_queries=opts.batch_queries,
        blocks=blocks,
        rows=rows,
        data={**split.info(), "collection": len(collection)},
        provenance={
            **provenance.collect(),
            "device": device_info(device),
            "env": {k: os.environ.get(k) for k in THREAD_ENV},
        },
    )
    write_latency_record(record, root)
    log.info("wrote %s", record.path)
    return record


# -- the table -----------------------------------------------------------------------------------
#: column order: the paper's latency table (first stage, dual, late, early, seq2seq, joint)
_COLUMN_FAMILY_ORDER = ("firststage", "sparse", "dual", "late", "early", "seq2seq", "joint")


@dataclass
class LatencyTable:
    """ms per query: one row per N, one column per ranker (its fastest configuration), then the
    CROSS-JEM speed-up over monoBERT measured and predicted, and the compression factor C."""

    title: str
    stat: str
    columns: list[str]
    n_values: list[int]
    cells: dict[int, dict[str, float | None]]
    speedups: dict[int, dict[str, Any]]
    compression: dict[int, float]
    notes: list[str]

    def header(self) -> list[str]:
        return ["N", *self.columns, "speed-up measured", "speed-up predicted", "C"]

    def text_rows(self, bold: Callable[[str], str] = str, missing: str = "–") -> list[list[str]]:
        """Cell texts; the fastest ranker of each N in ``bold``."""
        out = []
        for n in self.n_values:
            values = self.cells[n]
            present = [v for v in values.values() if v is not None]
            fastest = min(present) if present else None
            texts = [str(n)]
            for col in self.columns:
                v = values.get(col)
                text = missing if v is None else f"{v:,.2f}"
                texts.append(bold(text) if v is not None and v == fastest else text)
            sp = self.speedups.get(n) or {}
            texts.append(f"{sp['measured_mean']:.2f}x" if sp else missing)
            texts.append(f"{sp['predicted_flops']:.2f}x" if sp else missing)
            texts.append(f"{self.compression[n]:.1f}" if n in self.compression else missing)
            out.append(texts)
        return out


def _column_order(record: LatencyRecord) -> list[str]:
    family = {r.column: r.family for r in record.rows}
    first = {c: i for i, c in enumerate(dict.fromkeys(r.column for r in record.rows))}

    def key(col: str) -> tuple[int, int]:
        fam = family[col]
        rank = _COLUMN_FAMILY_ORDER.index(fam) if fam in _COLUMN_FAMILY_ORDER else 99
        return rank, first[col]

    return sorted(first, key=key)


def merge_records(records: Sequence[LatencyRecord]) -> LatencyRecord:
    """One record from several runs of one setting (e.g. N=700 timed with fewer queries): their
    N blocks side by side; an N present in several comes from the newest."""
    if not records:
        raise ValueError("no latency records to merge")
    records = sorted(records, key=lambda r: r.created)
    keys = {(r.dataset, r.split, r.device, r.threads, r.batch_queries) for r in records}
    if len(keys) > 1:
        found = "; ".join(
            f"{d}/{s} {dev} threads={t} batch_queries={b}" for d, s, dev, t, b in sorted(keys)
        )
        raise ValueError(f"latency records of different settings cannot share a table: {found}")
    blocks: dict[int, tuple[ListBlock, list[LatencyRow]]] = {}
    for rec in records:
        for b in rec.blocks:
            blocks[b.n] = (b, [r for r in rec.rows if r.n == b.n])
    newest = records[-1]
    ordered = sorted(blocks)
    return dataclasses.replace(
        newest,
        blocks=[blocks[n][0] for n in ordered],
        rows=[r for n in ordered for r in blocks[n][1]],
        config={**newest.config, "merged": [str(r.path) for r in records]},
    )


def build_latency_table(
    records: LatencyRecord | Sequence[LatencyRecord], stat: str = "p50_ms"
) -> LatencyTable:
    """The table model of one latency record, or of several merged (:func:`merge_records`);
    ``stat`` is a latency field (p50_ms, mean_ms, ...)."""
    record = records if isinstance(records, LatencyRecord) else merge_records(records)
    columns = _column_order(record)
    n_values = [b.n for b in record.blocks]
    cells: dict[int, dict[str, float | None]] = {}
    for n in n_values:
        cells[n] = {}
        for col in columns:
            row = record.best(n, col)
            cells[n][col] = None if row is None else float(row.latency[stat])
    rows = record.rows
    protocol = "; ".join(
        f"N={b.n}: {b.queries} queries x {b.repeats} repeats after {b.warmup} untimed calls"
        for b in record.blocks
    )
    notes = [
        f"ms per query ({stat}) on {record.device}, {record.threads} threads, "
        f"{record.batch_queries} list(s) per score() call, tokenisation included ({protocol}).",
        "Lists: BM25 top N over the split's whole candidate collection. Bold: fastest at N.",
    ]
    if rows:
        dtypes = sorted({r.dtype for r in rows if r.dtype != "n/a"})
        notes.append(
            f"dtype: {', '.join(dtypes) or 'n/a'}; weights: "
            + "; ".join(sorted({f"{r.column}: {r.weights}" for r in rows if r.weights != "n/a"}))
            + "."
        )
    for col in columns:
        variants = [r for r in rows if r.column == col]
        if len(variants) > len(n_values):
            for n in n_values:
                parts = [
                    f"{r.label.split('(')[-1].rstrip(')')}: {r.latency[stat]:,.2f}"
                    for r in variants
                    if r.n == n
                ]
                notes.append(
                    f"{col} at N={n}, each configuration (best shown): " + ", ".join(parts) + "."
                )
    notes.append(
        "Speed-up: best monoBERT / CROSS-JEM mean latency; predicted: ratio of the "
        "cost model's encoder FLOPs (bench.efficiency) on the same lists. "
        "C = L_k N / |U| (mean over queries)."
    )
    return LatencyTable(
        title=f"Latency: {record.dataset} / {record.split}",
        stat=stat,
        columns=columns,
        n_values=n_values,
        cells=cells,
        speedups={b.n: b.speedup for b in record.blocks},
        compression={b.n: b.tokens["compression_mean"] for b in record.blocks},
        notes=notes,
    )


LATENCY_FORMATS = ("table", "markdown", "json")


def render_latency(table: LatencyTable, fmt: str = "table") -> str | Table:
    """``table``: a rich Table (print with a Console); ``markdown`` and ``json``: text."""
    from bench.tables import _json_safe

    if fmt == "table":
        from rich.markup import escape
        from rich.table import Table

        out = Table(
            title=escape(table.title), caption=escape(" ".join(table.notes)), caption_justify="left"
        )
        for i, title in enumerate(table.header()):
            out.add_column(escape(title), justify="left" if i == 0 else "right")
        for texts in table.text_rows(bold=lambda s: f"[bold]{s}[/bold]"):
            out.add_row(*texts)
        return out
    if fmt == "markdown":
        header = table.header()
        lines = [
            f"**{table.title}**",
            "",
            "| " + " | ".join(h.replace("|", "\\|") for h in header) + " |",
            "|" + "|".join([":---"] + ["---:"] * (len(header) - 1)) + "|",
        ]
        lines += ["| " + " | ".join(t) + " |" for t in table.text_rows(bold=lambda s: f"**{s}**")]
        return "\n".join([*lines, "", *(f"{note}  " for note in table.notes)]) + "\n"
    if fmt == "json":
        rows = [
            {
                "n": n,
                "ms_per_query": {c: _json_safe(v) for c, v in table.cells[n].items()},
                "speedup": table.speedups.get(n) or None,
                "compression": table.compression.get(n),
            }
            for n in table.n_values
        ]
        return (
            json.dumps(
                {"title": table.title, "stat": table.stat, "rows": rows, "notes": table.notes},
                indent=2,
            )
            + "\n"
        )
    raise ValueError(f"unknown latency table format {fmt!r}; known: {', '.join(LATENCY_FORMATS)}")


__all__ = [
    "ALL",
    "DEFAULT_RANKERS",
    "BenchOptions",
    "Entry",
    "LatencyRecord",
    "LatencyRow",
    "LatencyTable",
    "ListBlock",
    "STCrossEncoderPeer",
    "bm25_lists",
    "build_latency_table",
    "check_records",
    "entries_for",
    "list_tokens",
    "load_latency_records",
    "merge_records",
    "render_latency",
    "run_benchmark",
    "time_entries",
    "time_interleaved",
    "time_scoring",
    "time_tokeniser",
    "token_summary",
]
