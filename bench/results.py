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
import os
import stat
import tempfile
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from bench.ranking import Run

log = logging.getLogger(__name__)

RECORD = "record.json"
RUN_FILE = "run.trec"
PER_QUERY = "perquery.tsv"
#: a cache entry moved aside because it was damaged: ``<entry>.damaged-<time>``
DAMAGED_MARK = ".damaged-"


class StorageError(RuntimeError):
    """The results or models folder cannot be written; the message names the path and why."""


#: Ranker families (:attr:`ResultRecord.family`, ``Ranker.family``) -> display name, in the order
#: of the paper's main table. Here, in the foundation layer, so that ``bench.tables`` and the CLI
#: group and title rows without importing ``rankers``; a family not listed is shown by its own
#: name, after these, so a new ranker needs no entry.
FAMILIES: dict[str, str] = {
    "firststage": "First stage",
    "sparse": "Sparse",
    "early": "Early interaction",
    "late": "Late interaction",
    "dual": "Dual encoders",
    "seq2seq": "Seq2Seq",
    "joint": "Joint ranking",
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


# -- storage errors ------------------------------------------------------------------------------
def describe_os_error(exc: OSError, path: Path | str) -> str:
    """``cannot write PATH: No space left on device``: the path that failed and the reason."""
    where = exc.filename if exc.filename else path
    return f"cannot write {where}: {exc.strerror or exc}"


@contextlib.contextmanager
def storage_errors(path: Path | str) -> Iterator[None]:
    """Turn an OS error raised inside into a :class:`StorageError` naming ``path``."""
    try:
        yield
    except StorageError:
        raise
    except OSError as exc:
        raise StorageError(describe_os_error(exc, path)) from exc


#: what ensure_writable suggests for the results and models folders
RESULTS_HINT = "choose another with --results-dir or $BENCH_RESULTS_DIR"


def ensure_writable(folder: Path, what: str = "results", hint: str = RESULTS_HINT) -> None:
    """Create ``folder`` and write a probe file in it, before any expensive work.

    Permissions, a read-only mount or a parent that is a file then fail at once with the path
    and ``hint`` (what to do instead), instead of after an hour of training."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(dir=folder, prefix=".write-test-")
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise StorageError(
            f"the {what} folder {folder} is not writable: {describe_os_error(exc, folder)} ({hint})"
        ) from exc


def writable_problem(folder: Path, what: str = "results", hint: str = RESULTS_HINT) -> str | None:
    """Why :func:`ensure_writable` would fail on ``folder``, found without writing anything:
    the folder, or the closest existing folder above it, must be a writable directory."""
    probe = folder
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    reason = None
    if not probe.is_dir():
        reason = f"{probe} is not a folder"
    elif not os.access(probe, os.W_OK | os.X_OK):
        reason = f"{probe} is not writable"
    if reason is None:
        return None
    return f"the {what} folder {folder} is not writable: {reason} ({hint})"


def check_file_writable(path: Path, hint: str) -> int | None:
    """The mode of ``path`` (None: it does not exist yet), or a :class:`StorageError` naming it
    when it is read-only. The mode bits count even for root, whom the kernel lets write
    anything: a file made read-only is meant to stay as it is, and an atomic rename would
    replace it regardless."""
    try:
        mode = stat.S_IMODE(path.stat().st_mode)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise StorageError(describe_os_error(exc, path)) from exc
    if not mode & 0o222 or not os.access(path, os.W_OK):
        raise StorageError(f"{path} is read-only (mode {mode:04o}): {hint}")
    return mode


def current_umask() -> int:
    """The process umask, read without changing it where /proc allows (threads share it)."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


# -- atomic writes -------------------------------------------------------------------------------
def atomic_write_text(path: Path, text: str, mode: int | None = None) -> None:
    """Write to a temporary file in the same folder, fsync, then rename over ``path``.

    The file gets ``mode``, else the mode a plain ``open()`` would give (0666 less the umask),
    not mkstemp's 0600. The rename replaces ``path`` whatever its own mode, so a caller that
    must respect a file's permissions checks them first (:func:`check_file_writable`). An OS
    error (full disk, read-only folder) is a :class:`StorageError` naming ``path``.
    """
    with storage_errors(path):
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        try:
            os.fchmod(fd, 0o666 & ~current_umask() if mode is None else mode)
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
    """The first of ``files`` (relative name -> SHA-256) that is missing or changed, in words."""
    for name, want in sorted(files.items()):
        path = folder / name
        if not path.is_file():
            return f"{path} is missing"
        if file_sha256(path) != want:
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
