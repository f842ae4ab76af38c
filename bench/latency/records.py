"""What one `bench latency` run leaves behind: rows, per-N blocks and the record file.

A :class:`LatencyRecord` holds one :class:`LatencyRow` per timed configuration and N, and one
:class:`ListBlock` per N (the lists' token statistics and the CROSS-JEM speed-up). Records are
written atomically to ``results/latency/{dataset}/`` and read back tolerantly, so records written
before a field was added still load. :func:`check_records` turns the best rows into
:class:`~bench.results.records.ResultRecord` objects for ``bench check`` ratio entries.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.core.io import atomic_write_json
from bench.execution.policy import SPEEDUP_PAIRS
from bench.results.records import LATENCY_KIND, ResultRecord

log = logging.getLogger(__name__)

LATENCY_DIR = "latency"


def _known(cls: type, data: Mapping[str, Any], skip: Sequence[str] = ()) -> dict[str, Any]:
    """The entries of ``data`` that are fields of dataclass ``cls``: a record written by an
    older or newer version loads with what both know (missing fields take their defaults)."""
    names = {f.name for f in dataclasses.fields(cls)} - set(skip)
    return {k: v for k, v in data.items() if k in names}


@dataclass
class LatencyRow:
    """One configuration timed at one N.

    ``latency`` times whole ``score()`` calls. For a ranker with a host step
    (:attr:`~rankers.base.Ranker.host_step`), ``tokenisation`` times ``prepare_scoring`` alone
    and ``model_only`` times ``score_prepared`` on inputs prepared beforehand; both are None for
    rankers without one.
    """

    label: str
    ranker: str
    column: str
    family: str
    n: int
    batch_queries: int
    options: dict[str, Any]
    weights: str  # LatencyParts.weights_note(): how trained the timed weights are
    dtype: str  # LatencyParts.compute_dtype()
    latency: dict[str, Any]  # LatencySummary.to_dict() of whole score() calls
    tokenisation: dict[str, Any] | None = None  # the host step alone, with "covers"
    model_only: dict[str, Any] | None = None  # score_prepared alone
    mode: str = ""  # LatencyParts.scoring_mode(); "" in records older than the field
    best: bool = False  # fastest (p50) row of its column at this N
    ranker_info: dict[str, Any] = field(default_factory=dict)  # describe()
    #: throughput mode (several processes timed at once, :mod:`bench.latency.processes`): each
    #: rank's own summaries with their raw calls (``latency`` etc. above pool them all), and
    #: the aggregate throughput; empty / None with one process
    per_process: list[dict[str, Any]] = field(default_factory=list)
    throughput: dict[str, Any] | None = None
    #: the encoder work of the timed calls (:func:`bench.latency.protocol.encoder_work`): the
    #: scoring ``dtype``, the encoder ``shape`` and its ``calls`` over all timed lists (one
    #: pass), on ONNX Runtime also its ``runtime``, ``graph`` and ``int8_recipe``; empty for
    #: rankers without an encoder the cost model knows
    encoder: dict[str, Any] = field(default_factory=dict)
    #: per query: FLOPs, achieved GFLOP/s against the calibrated matmul peak and the
    #: predicted encoder time (:func:`bench.latency.costmodel.time.row_cost`); empty: none
    cost: dict[str, Any] = field(default_factory=dict)
    #: the precision of a run timing several (``--dtypes``: :mod:`bench.latency.plan`),
    #: whose name also tags :attr:`column` (:func:`precision_column`); "" in a one-precision run
    #: and for a ranker without a ``dtype`` option
    precision: str = ""
    #: ``--profile``: one profiled pass over the row's calls after the timing
    #: (:meth:`bench.core.profiling.CallProfile.to_dict`: kernels launched and device busy time
    #: per query, in the ``unit`` of its device); None: not profiled
    profile: dict[str, Any] | None = None

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> LatencyRow:
        return cls(**_known(cls, data))

    @property
    def base_column(self) -> str:
        """:attr:`column` without its precision tag: what the row's ranker and mode are."""
        return self.column.removesuffix(precision_column("", self.precision))


@dataclass
class ListBlock:
    """Everything about the lists of one N that is not a ranker's timing."""

    n: int
    queries: int
    tokens: dict[str, Any]  # token_summary() and the token settings
    speedup: dict[str, Any] = field(default_factory=dict)  # speedup_summary()
    repeats: int = 0  # timed passes over the lists
    warmup: int = 0  # untimed calls before them

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ListBlock:
        return cls(**_known(cls, data))


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
    #: processes timed at once (throughput mode); 1: the one-process benchmark
    processes: int = 1
    path: Path | None = field(default=None, compare=False)

    def to_json(self) -> dict[str, Any]:
        """The record as JSON; the throughput-mode fields only when several processes made it,
        so a one-process record is written exactly as before they existed."""
        out = dataclasses.asdict(self)
        out.pop("path")
        for row in out["rows"]:  # rows without an encoder, precision or profile as before
            for name in ("encoder", "cost", "precision", "profile"):
                if not row[name]:
                    del row[name]
        if self.processes == 1:
            out.pop("processes")
            for row in out["rows"]:
                if not row["per_process"] and row["throughput"] is None:
                    del row["per_process"], row["throughput"]
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any], path: Path | None = None) -> LatencyRecord:
        return cls(
            **_known(cls, data, skip=("path", "blocks", "rows")),
            blocks=[ListBlock.from_json(b) for b in data.get("blocks", [])],
            rows=[LatencyRow.from_json(r) for r in data.get("rows", [])],
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


def _speedup(
    rows: Sequence[LatencyRow], block: ListBlock, slow: str, fast: str
) -> dict[str, Any] | None:
    pick = {
        c: [r for r in rows if r.n == block.n and r.column == c and r.best] for c in (slow, fast)
    }
    if not pick[slow] or not pick[fast]:
        return None
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
        **_predicted_time(a, b, mean),
    }


def _predicted_time(slow: LatencyRow, fast: LatencyRow, measured: float) -> dict[str, Any]:
    """The speed-up the time model predicts for the same two rows
    (:mod:`bench.latency.costmodel.time`: calibrated kernel rates), and the measured one as a
    share of it; empty without one."""
    a, b = slow.cost.get("predicted_ms"), fast.cost.get("predicted_ms")
    if not a or not b:
        return {}
    return {"predicted_time": a / b, "fraction_of_time_prediction": measured / (a / b)}


#: what joins a column (or label) and its precision in a run timing several: ``monobert @
#: bfloat16``
PRECISION_TAG = " @ "


def precision_column(column: str, precision: str) -> str:
    """``column`` as a run timing several precisions names it in ``precision`` (``monobert @
    bfloat16``); ``column`` itself for ``precision`` "" (a one-precision run)."""
    return f"{column}{PRECISION_TAG}{precision}" if precision else column


def untagged(column: str) -> str:
    """A column without its layout tag: ``crossjem {concat} (end-to-end)`` ->
    ``crossjem (end-to-end)`` (CROSS-JEM names its columns by row layout, except the paper's)."""
    return re.sub(r" \{[^}]*\}", "", column)


def _tagged(rows: Sequence[LatencyRow], n: int, column: str) -> str:
    """``column`` itself when timed at ``n``, else the one timed column that is ``column`` with a
    layout tag (the cost model's layout is the record's one CROSS-JEM configuration)."""
    have = {r.column for r in rows if r.n == n}
    if column in have:
        return column
    tagged = sorted(c for c in have if untagged(c) == column)
    return tagged[0] if len(tagged) == 1 else column


def speedup_summary(
    rows: Sequence[LatencyRow],
    block: ListBlock,
    slow: str = "monobert",
    fast: str = "crossjem",
    precision: str = "",
) -> dict[str, Any]:
    """Measured (best ``slow`` row / best ``fast`` row, mean and p50) against predicted (cost
    model FLOPs ratio) speed-up at one N, at the top level; empty when either column is missing.
    Every other pair of :data:`SPEEDUP_PAIRS` whose columns were both timed is added under its
    key (``end_to_end``: both rankers tokenising their items inside the timed call). A column
    tagged with CROSS-JEM's row layout (``crossjem {concat}``) stands for its untagged name.
    ``precision``: the columns of that precision in a run timing several (both rankers in the
    same precision)."""

    def pair(a: str, b: str) -> dict[str, Any] | None:
        tagged = _tagged(rows, block.n, precision_column(b, precision))
        return _speedup(rows, block, precision_column(a, precision), tagged)

    out = pair(slow, fast) or {}
    for key, (a, b) in SPEEDUP_PAIRS.items():
        if key and (found := pair(a, b)) is not None:
            out[key] = found
    return out


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
    ``batch_queries``, ``threads``, ``device``, ``column``, ``mode`` and ``processes`` (and
    ``precision`` in a run timing several);
    ``config`` the ranker's options (e.g. ``precompute``, ``batch_size``)::

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
                        "mode": row.mode,
                        # processes timed at once (throughput mode); the latency figures are
                        # then the pooled calls of all of them
                        "processes": rec.processes,
                        # the row's precision in a run timing several (``--dtypes``)
                        **({"precision": row.precision} if row.precision else {}),
                    },
                    config_hash=rec.config_hash,
                    data=rec.data,
                    provenance={},
                    created=rec.created,
                    kind=LATENCY_KIND,
                    path=rec.path,
                )
            )
    return out
