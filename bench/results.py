"""Result records: what one `bench run` produced, written atomically and found again.

Layout: ``results/runs/{dataset}/{ranker}/{split}-{confighash}/`` holding ``record.json`` (metrics,
latency, config, provenance), ``run.trec`` (the ranking) and ``perquery.tsv`` (per-query metrics,
which significance tests need). A directory is complete only once ``record.json`` exists, and
that file is written last, so an interrupted run never leaves a record that looks finished.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from bench.metrics import Run

log = logging.getLogger(__name__)

RECORD = "record.json"
RUN_FILE = "run.trec"
PER_QUERY = "perquery.tsv"


@dataclasses.dataclass
class ResultRecord:
    """One ranker on one dataset split under one configuration."""

    ranker: str
    dataset: str
    split: str
    family: str
    label: str
    metrics: dict[str, float]
    latency: dict[str, Any]
    config: dict[str, Any]
    run_config: dict[str, Any]
    config_hash: str
    data: dict[str, Any]
    provenance: dict[str, Any]
    training: dict[str, Any] | None = None
    created: str = ""
    path: Path | None = dataclasses.field(default=None, compare=False)

    def to_json(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out.pop("path")
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any], path: Path | None = None) -> ResultRecord:
        names = {f.name for f in dataclasses.fields(cls)} - {"path"}
        return cls(**{k: v for k, v in data.items() if k in names}, path=path)

    def per_query(self) -> dict[str, dict[str, float]]:
        """Per-query metric values from ``perquery.tsv`` (empty when the file is absent)."""
        if self.path is None or not (self.path / PER_QUERY).exists():
            return {}
        return read_per_query(self.path / PER_QUERY)


def config_hash(payload: Mapping[str, Any]) -> str:
    """12 hex of the SHA-256 of the canonical JSON of everything the result depends on."""
    text = json.dumps(payload, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def run_dir(root: Path, dataset: str, ranker: str, split: str, chash: str) -> Path:
    return root / "runs" / dataset / ranker / f"{split}-{chash}"


# -- atomic writes -------------------------------------------------------------------------------
def atomic_write_text(path: Path, text: str) -> None:
    """Write to a temporary file in the same folder, fsync, then rename over ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_json(path: Path, data: Any) -> None:
    atomic_write_text(path, json.dumps(data, indent=2, sort_keys=True, default=str) + "\n")


def format_trec_run(run: Run, tag: str) -> str:
    lines = []
    for qid, docs in run.items():
        ranked = sorted(docs.items(), key=lambda kv: (-kv[1], kv[0]))
        for rank, (docid, score) in enumerate(ranked, start=1):
            lines.append(f"{qid} Q0 {docid} {rank} {score:.6f} {tag}")
    return "\n".join(lines) + "\n"


def format_per_query(per_query: Mapping[str, Mapping[str, float]], measures: Iterable[str]) -> str:
    measures = list(measures)
    rows = ["qid\t" + "\t".join(measures)]
    for qid, values in per_query.items():
        rows.append(qid + "\t" + "\t".join(f"{values[m]:.6f}" for m in measures))
    return "\n".join(rows) + "\n"


def read_per_query(path: Path) -> dict[str, dict[str, float]]:
    lines = path.read_text(encoding="utf-8").splitlines()
    header = lines[0].split("\t")[1:]
    out: dict[str, dict[str, float]] = {}
    for line in lines[1:]:
        qid, *vals = line.split("\t")
        out[qid] = {m: float(v) for m, v in zip(header, vals, strict=True)}
    return out


def write_result(
    record: ResultRecord,
    run: Run,
    per_query: Mapping[str, Mapping[str, float]],
    directory: Path,
) -> ResultRecord:
    """Write run, per-query metrics, then the record (last: its presence marks completion)."""
    directory.mkdir(parents=True, exist_ok=True)
    atomic_write_text(directory / RUN_FILE, format_trec_run(run, record.ranker))
    atomic_write_text(directory / PER_QUERY, format_per_query(per_query, record.metrics))
    atomic_write_json(directory / RECORD, record.to_json())
    record.path = directory
    return record


def read_record(directory: Path) -> ResultRecord:
    path = directory / RECORD
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: not valid JSON ({exc})") from exc
    return ResultRecord.from_json(data, path=directory)


def load_records(
    root: Path,
    dataset: str | None = None,
    split: str | None = None,
    ranker: str | None = None,
) -> list[ResultRecord]:
    """Every complete record under ``root/runs``, filtered; unreadable ones are skipped."""
    records = []
    for path in sorted((root / "runs").glob(f"{dataset or '*'}/{ranker or '*'}/*/{RECORD}")):
        try:
            rec = read_record(path.parent)
        except (ValueError, TypeError) as exc:
            log.warning("skipping %s: %s", path, exc)
            continue
        if split is None or rec.split == split:
            records.append(rec)
    return records
