"""Result records: what one `bench run` produced, written atomically and found again.

Layout: ``results/runs/{dataset}/{ranker}/{split}-{confighash}/`` holding ``record.json`` (metrics,
latency, config, provenance), ``run.trec`` (the ranking) and ``perquery.tsv`` (per-query metrics,
which significance tests need). A directory is complete only once ``record.json`` exists, and
that file is written last, so an interrupted run never leaves a record that looks finished. The
record lists the SHA-256 of the other files, so a later reuse can prove they are still whole.

Writes keep the umask's permissions (other users and CI steps read results), and an OS error
while writing becomes a :class:`StorageError` that names the path.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import logging
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from bench.core.io import (
    StorageError,
    atomic_write_json,
    atomic_write_text,
    storage_errors,
)
from bench.results.ranking import Run

log = logging.getLogger(__name__)

RECORD = "record.json"
RUN_FILE = "run.trec"
PER_QUERY = "perquery.tsv"
#: a cache entry moved aside because it was damaged: ``<entry>.damaged-<time>``
DAMAGED_MARK = ".damaged-"


#: Ranker families (:attr:`ResultRecord.family`, ``Ranker.family``) -> display name, in the order
#: of the paper's main table. Here, in the foundation layer, so that ``bench.reporting.tables`` and
#: the CLI group and title rows without importing ``rankers``; a family not listed is shown by its
#: own name, after these, so a new ranker needs no entry.
FAMILIES: dict[str, str] = {
    "firststage": "First stage",
    "sparse": "Sparse",
    "early": "Early interaction",
    "late": "Late interaction",
    "dual": "Dual encoders",
    "seq2seq": "Seq2Seq",
    "joint": "Joint ranking",
    "external": "External runs",
}

#: :attr:`ResultRecord.kind` of a `bench run` result (every record under ``results/runs``)
RUN_KIND = "run"
#: :attr:`ResultRecord.kind` of a `bench latency` row seen as a record (for ``bench check``
#: ratio entries): it has latency figures but no metrics, and is no run of the ranker
LATENCY_KIND = "latency"


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
    #: file name -> SHA-256 of the entry's other files (run.trec, perquery.tsv)
    files: dict[str, str] = dataclasses.field(default_factory=dict)
    #: the cache key's components (config, data, model, code), each a hash
    key_parts: dict[str, str] | None = None
    #: what differs from a plain `bench run -r RANKER -d DATASET` (options that differ from the
    #: config file's settings for the dataset, subset, train_subset, an explicit --fit, the
    #: seed); None for records written before it was recorded
    overrides: dict[str, Any] | None = None
    #: what made the record: :data:`RUN_KIND` (`bench run`) or :data:`LATENCY_KIND` (a row of a
    #: `bench latency` record); readers match by it, so a latency row never stands for a run
    kind: str = RUN_KIND
    #: the files the scores were read from (absolute path -> SHA-256 of the bytes scored; a run
    #: file): readers count the record current only while each still has those bytes
    #: (:func:`bench.execution.selection.record_problem`); None for rankers that read none
    inputs: dict[str, str] | None = None
    path: Path | None = dataclasses.field(default=None, compare=False)

    def to_json(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out.pop("path")
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any], path: Path | None = None) -> ResultRecord:
        names = {f.name for f in dataclasses.fields(cls)} - {"path"}
        return cls(**{k: v for k, v in data.items() if k in names}, path=path)

    def per_query_file(self) -> PerQueryFile:
        """:meth:`read_per_query_file`, its problem (a file missing or edited) a warning."""
        read = self.read_per_query_file()
        if read.problem is not None:
            log.warning("%s; its values are not used", read.problem)
        return read

    def read_per_query_file(self) -> PerQueryFile:
        """The entry's ``perquery.tsv`` read by :func:`checked_per_query` against the SHA-256
        this record lists (a record read from nowhere has none)."""
        if self.path is None:
            return PerQueryFile(Path(PER_QUERY), {}, None)
        want = self.files.get(PER_QUERY)
        return checked_per_query(self.path / PER_QUERY, want, self.path / RECORD)

    def per_query(self) -> dict[str, dict[str, float]]:
        """Per-query metric values from ``perquery.tsv``, only while it holds the bytes this
        record lists (empty when it has none, or is missing or edited: a warning names it)."""
        return self.per_query_file().values


def supervision(training: Mapping[str, Any] | None) -> str:
    """What a result's ranker was trained on, from its training summary, so a comparison can
    separate the architecture from the supervision: ``labels, bce``, ``teacher monobert (logits),
    listnet``, ``teacher monobert+colbert, listnet, lists of 30``; ``not trained here`` for
    rankers used as they come (BM25, a zero-shot or downloaded model)."""
    if not training:
        return "not trained here"
    teacher = training.get("teacher")
    if isinstance(teacher, Mapping) and teacher.get("name"):
        source = f"teacher {teacher['name']}"
        if teacher.get("scores") and teacher["scores"] != "sigmoid":
            source += f" ({teacher['scores']})"
    else:
        source = "labels"
    parts = [source]
    if training.get("loss_name"):
        parts.append(str(training["loss_name"]))
    items, given, lists = (
        training.get("train_items"),
        training.get("train_items_given"),
        training.get("train_queries"),
    )
    if items and given and lists and items > given:
        parts.append(f"lists of {items / lists:.0f}")
    return ", ".join(parts)


def config_hash(payload: Mapping[str, Any]) -> str:
    """12 hex of the SHA-256 of the canonical JSON of everything the result depends on."""
    text = json.dumps(payload, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def run_dir(root: Path, dataset: str, ranker: str, split: str, chash: str) -> Path:
    return root / "runs" / dataset / ranker / f"{split}-{chash}"


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


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


@dataclasses.dataclass(frozen=True)
class PerQueryFile:
    """A record's per-query values as :func:`checked_per_query` read them."""

    path: Path
    #: qid -> metric -> value; empty when none are kept or they cannot be trusted
    values: dict[str, dict[str, float]]
    #: why the file's values are not the run's (missing, edited, unreadable), naming the file;
    #: None when they are, or when the record keeps none
    problem: str | None = None


def checked_per_query(path: Path, want: str | None, record: Path | str) -> PerQueryFile:
    """The one reader of per-query files, for every table and test that uses them (``bench
    compare``'s significance marks, the README tables' p-values, a trained run's comparison
    with its baselines): ``path``'s values once its SHA-256 is ``want``, the one ``record``
    lists. A missing, edited or unreadable file gives no values and a problem naming it, for the
    caller to warn or refuse: values that are not the run's would mark a difference the run
    never showed (or hide one). No file and no ``want``: the record keeps none, no problem."""
    problem = _per_query_problem(path, want, record)
    if problem is None and want is None:
        return PerQueryFile(path, {})
    if problem is None:
        try:
            return PerQueryFile(path, read_per_query(path))
        except (OSError, UnicodeDecodeError, ValueError, IndexError) as exc:
            problem = f"{path} cannot be read as a per-query table ({exc})"
    return PerQueryFile(path, {}, problem)


def _per_query_problem(path: Path, want: str | None, record: Path | str) -> str | None:
    if want is None:
        if not path.exists():
            return None
        return (
            f"{path}: record {record} lists no SHA-256 of it, so it cannot be shown to be the "
            "run's per-query file"
        )
    if not path.is_file():
        return f"{path} is missing (record {record} lists its SHA-256)"
    try:
        have = file_sha256(path)
    except OSError as exc:
        return f"{path} cannot be read ({exc.strerror or exc})"
    if have != want:
        return (
            f"{path} was changed since its run (SHA-256 {have[:12]}..., record {record} lists "
            f"{want[:12]}...)"
        )
    return None


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
    """Write run, per-query metrics, then the record (last: its presence marks completion).

    The record lists the SHA-256 of the files written before it, so reuse can verify them."""
    created = not directory.exists()
    with storage_errors(directory):
        directory.mkdir(parents=True, exist_ok=True)
    texts = {
        RUN_FILE: format_trec_run(run, record.ranker),
        PER_QUERY: format_per_query(per_query, record.metrics),
    }
    try:
        for name, text in texts.items():
            atomic_write_text(directory / name, text)
        record.files = {n: hashlib.sha256(t.encode("utf-8")).hexdigest() for n, t in texts.items()}
        atomic_write_json(directory / RECORD, record.to_json())
    except StorageError:
        # a failed write (a full disk) leaves no entry folder it made: its files are gone (each
        # write is atomic), so an empty folder would only say an entry exists. The entry's
        # .lock file beside it stays, as after every run: it is never held once a process ends
        if created:
            with contextlib.suppress(OSError):
                for leftover in directory.iterdir():
                    leftover.unlink()
                directory.rmdir()
        raise
    record.path = directory
    return record


def read_record(directory: Path) -> ResultRecord:
    path = directory / RECORD
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path}: not valid JSON ({exc})") from exc
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a JSON object, got {type(data).__name__}")
    return ResultRecord.from_json(data, path=directory)


def record_problem(directory: Path) -> str | None:
    """Why the entry in ``directory`` cannot be reused (None: it is whole).

    The record must parse and list its files; each must exist with its recorded SHA-256."""
    try:
        record = read_record(directory)
    except (OSError, ValueError, TypeError) as exc:
        return str(exc)
    if not record.files:
        return f"{directory / RECORD} lists no file checksums (written by an older version)"
    return files_problem(directory, record.files)


def files_problem(folder: Path, files: Mapping[str, str]) -> str | None:
    """The first of ``files`` (name relative to ``folder``, or an absolute path -> SHA-256)
    that is missing or changed, in words."""
    for name, want in sorted(files.items()):
        path = folder / name
        if not path.is_file():
            return f"{path} is missing"
        try:
            digest = file_sha256(path)
        except OSError as exc:
            return f"{path} cannot be read ({exc.strerror or exc})"
        if digest != want:
            return f"{path} does not match its recorded checksum (changed or truncated)"
    return None


def load_records(
    root: Path,
    dataset: str | None = None,
    split: str | None = None,
    ranker: str | None = None,
) -> list[ResultRecord]:
    """Every complete record under ``root/runs``, filtered; unreadable ones and entries moved
    aside as damaged are skipped."""
    records = []
    for path in sorted((root / "runs").glob(f"{dataset or '*'}/{ranker or '*'}/*/{RECORD}")):
        if DAMAGED_MARK in path.parent.name:
            continue
        try:
            rec = read_record(path.parent)
        except (ValueError, TypeError) as exc:
            log.warning("skipping %s: %s", path, exc)
            continue
        if split is None or rec.split == split:
            records.append(rec)
    return records
