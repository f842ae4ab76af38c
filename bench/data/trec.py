"""The TREC / MS MARCO layout: ``queries.tsv``, ``collection.tsv``, ``run.*.trec``, ``qrels.txt``.

The run is the first stage: its rank order is the candidate order and its score is each
candidate's first-stage score. Qrels keep every grade (for graded nDCG); which grade counts as
relevant for binary measures comes from the dataset card. Files at the top of a dataset folder
are the card's default split; a subfolder holding the same files is another split.

MS MARCO-Titles (a card with ``irds_id``): the user supplies the first-stage run (the paper used
HDCT top-10); queries, qrels and document titles of the run's documents are taken from
ir_datasets (optional: ``crossjem-bench[download]``), imported lazily.
"""

from __future__ import annotations

import logging
import math
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from bench.data.files import (
    DOWNLOAD_EXTRA,
    DatasetError,
    files_checksum,
    iter_lines,
    read_bytes,
)
from bench.data.layouts import DatasetLayout
from bench.data.model import (
    Candidate,
    CandidateList,
    Qrels,
    Query,
    RankingSplit,
    blank_text_notes,
    relevant,
)

if TYPE_CHECKING:
    from bench.data.cards import DatasetCard

log = logging.getLogger(__name__)

LAYOUT = "trec"
QUERIES, COLLECTION, QRELS = "queries.tsv", "collection.tsv", "qrels.txt"
RUN_GLOB = "run.*.trec"


@dataclass(frozen=True)
class RunEntry:
    docid: str
    rank: int
    score: float
    line: int


def files(folder: Path) -> list[Path]:
    """The TREC files directly in ``folder``: queries, collection, qrels and run files."""
    if not folder.is_dir():
        return []
    named = [folder / n for n in (QUERIES, COLLECTION, QRELS) if (folder / n).is_file()]
    return named + sorted(folder.glob(RUN_GLOB))


def has_files(folder: Path) -> bool:
    """Whether ``folder`` holds (part of) one TREC split."""
    return bool(files(folder))


def find_splits(folder: Path, default_split: str) -> dict[str, Path]:
    """split name -> folder: the top of ``folder`` is ``default_split``, subfolders are the rest."""
    splits: dict[str, Path] = {}
    if has_files(folder):
        splits[default_split] = folder
    if folder.is_dir():
        for sub in sorted(folder.iterdir()):
            if sub.name.startswith(".") or not has_files(sub):
                continue
            if sub.name in splits:
                raise DatasetError(
                    f"{folder}: split {sub.name!r} is both the files at the top of the folder and "
                    f"the subfolder {sub.name}/; move or rename one of them"
                )
            splits[sub.name] = sub
    return splits


def find_run(folder: Path, run_file: str | None = None) -> Path:
    """The run file of a split: ``run_file`` when the card names one, else the only run.*.trec."""
    if run_file:
        path = folder / run_file
        if not path.is_file():
            raise DatasetError(f"{path}: run file named by the dataset card does not exist")
        return path
    runs = sorted(folder.glob(RUN_GLOB))
    if not runs:
        raise DatasetError(
            f"{folder}: no run file; put the first-stage run there as {RUN_GLOB} "
            "(lines: qid Q0 docid rank score tag)"
        )
    if len(runs) > 1:
        names = ", ".join(p.name for p in runs)
        raise DatasetError(
            f"{folder}: {len(runs)} run files ({names}); keep one, or name one in the dataset "
            "card as `run_file: <name>`"
        )
    return runs[0]


def read_run(path: Path, data: bytes) -> dict[str, list[RunEntry]]:
    """qid -> entries in rank order (ties in file order), queries in order of first appearance."""
    run: dict[str, list[RunEntry]] = {}
    seen: dict[tuple[str, str], int] = {}
    for lineno, line in iter_lines(path, data):
        fields = line.split()
        if len(fields) != 6:
            raise DatasetError(
                f"{path}:{lineno}: expected 6 fields 'qid Q0 docid rank score tag', "
                f"got {len(fields)}"
            )
        qid, _, docid, rank, score, _ = fields
        try:
            entry = RunEntry(docid, int(rank), float(score), lineno)
        except ValueError as exc:
            raise DatasetError(
                f"{path}:{lineno}: rank must be an integer and score a number, "
                f"got rank {rank!r} and score {score!r}"
            ) from exc
        if not math.isfinite(entry.score):
            raise DatasetError(
                f"{path}:{lineno}: score {score!r} is not a finite number; fix the run file"
            )
        if (qid, docid) in seen:
            raise DatasetError(
                f"{path}:{lineno}: docid {docid!r} is listed twice for query {qid!r} "
                f"(lines {seen[qid, docid]} and {lineno}); remove one"
            )
        seen[qid, docid] = lineno
        run.setdefault(qid, []).append(entry)
    for entries in run.values():
        entries.sort(key=lambda e: (e.rank, e.line))
    return run


def read_tsv(path: Path, data: bytes, key: str) -> tuple[dict[str, str], dict[str, int]]:
    """``id<TAB>text`` lines -> (id -> text, id -> line); ``key`` names the id in messages."""
    texts: dict[str, str] = {}
    lines: dict[str, int] = {}
    for lineno, line in iter_lines(path, data):
        ident, tab, text = line.partition("\t")
        if not tab or not ident.strip():
            raise DatasetError(f"{path}:{lineno}: expected '{key}<TAB>text'")
        ident = ident.strip()
        if ident in texts:
            raise DatasetError(
                f"{path}:{lineno}: {key} {ident!r} already defined at line {lines[ident]}; "
                "remove one of the two lines"
            )
        texts[ident], lines[ident] = text, lineno
    return texts, lines


def read_qrels(path: Path, data: bytes) -> Qrels:
    qrels: Qrels = {}
    seen: dict[tuple[str, str], int] = {}
    for lineno, line in iter_lines(path, data):
        fields = line.split()
        if len(fields) != 4:
            raise DatasetError(
                f"{path}:{lineno}: expected 4 fields 'qid 0 docid grade', got {len(fields)}"
            )
        qid, _, docid, grade = fields
        try:
            value = int(grade)
        except ValueError as exc:
            raise DatasetError(f"{path}:{lineno}: grade must be an integer, got {grade!r}") from exc
        if (qid, docid) in seen:
            raise DatasetError(
                f"{path}:{lineno}: query {qid!r} judges docid {docid!r} twice "
                f"(lines {seen[qid, docid]} and {lineno}); keep one judgement"
            )
        seen[qid, docid] = lineno
        qrels.setdefault(qid, {})[docid] = value
    return qrels


def load_trec(
    folder: Path,
    dataset: str,
    split: str,
    relevance_level: int = 1,
    run_file: str | None = None,
) -> RankingSplit:
    """Candidate lists from the run, texts from queries.tsv / collection.tsv, grades from qrels."""
    run_path = find_run(folder, run_file)
    paths = {QUERIES: folder / QUERIES, COLLECTION: folder / COLLECTION, run_path.name: run_path}
    paths[QRELS] = folder / QRELS
    for path in paths.values():
        if not path.is_file():
            raise DatasetError(
                f"{path} is missing: a TREC dataset folder needs {QUERIES} (qid<TAB>text), "
                f"{COLLECTION} (docid<TAB>text), {QRELS} (qid 0 docid grade) and one {RUN_GLOB}"
            )
    blobs = {name: read_bytes(path) for name, path in paths.items()}
    queries, _ = read_tsv(paths[QUERIES], blobs[QUERIES], "qid")
    docs, _ = read_tsv(paths[COLLECTION], blobs[COLLECTION], "docid")
    run = read_run(run_path, blobs[run_path.name])
    all_qrels = read_qrels(paths[QRELS], blobs[QRELS])

    lists: list[CandidateList] = []
    qrels: Qrels = {}
    dropped: Counter[str] = Counter()
    for qid, entries in run.items():
        if qid not in queries:
            raise DatasetError(
                f"{run_path}:{entries[0].line}: query {qid!r} is not in {paths[QUERIES]}; "
                "add its text there (qid<TAB>text) or remove its run lines"
            )
        for e in entries:
            if e.docid not in docs:
                raise DatasetError(
                    f"{run_path}:{e.line}: docid {e.docid!r} is not in {paths[COLLECTION]}; "
                    "add its text there (docid<TAB>text) or remove the run line"
                )
        if not relevant(all_qrels, qid, relevance_level):
            dropped["no_relevant_judgement"] += 1
            continue
        candidates = tuple(Candidate(e.docid, docs[e.docid], e.score) for e in entries)
        lists.append(CandidateList(Query(qid, queries[qid]), candidates))
        qrels[qid] = dict(all_qrels[qid])
    unranked = [q for q in all_qrels if q not in run and relevant(all_qrels, q, relevance_level)]
    if unranked:
        dropped["not_in_run"] = len(unranked)

    return RankingSplit(
        dataset=dataset,
        split=split,
        lists=lists,
        qrels=qrels,
        relevance_level=relevance_level,
        layout=LAYOUT,
        source=str(folder),
        checksum=files_checksum(blobs),
        dropped=dict(dropped),
        notes=[f"candidates from run file {run_path.name}", *blank_text_notes(lists, str(folder))],
    )


def load_card_split(folder: Path, split: str, card: DatasetCard) -> RankingSplit:
    """One split of a dataset in this layout (the top of ``folder`` is the card's default split,
    a subfolder another), built first from ir_datasets when files are missing and the card names
    an ``irds_id``."""
    local = find_splits(folder, card.default_split)
    split_dir = local.get(split, folder if split == card.default_split else folder / split)
    if card.irds_id and not all((split_dir / n).is_file() for n in (QUERIES, QRELS, COLLECTION)):
        build_irds_titles(split_dir, card, split)
    return load_trec(split_dir, card.name, split, card.relevance_level, card.run_file)


#: the usual relevance level of graded (TREC-style) judgements, the most a suggestion names
GRADED_LEVEL = 2


def suggested_level(split_path: Path | None) -> tuple[int, str]:
    """The relevance level the no-card warning suggests, and why: one that keeps a relevant
    item for every query that has one (a level above a query's best grade drops the query), at
    most :data:`GRADED_LEVEL`; the qrels are read for each query's best grade."""
    try:
        qrels_path = (split_path or Path()) / QRELS
        qrels = read_qrels(qrels_path, qrels_path.read_bytes())
    except (OSError, DatasetError):
        return 1, "its qrels could not be read"
    best = sorted({max(grades.values()) for grades in qrels.values() if grades} - {0})
    if not best:
        return 1, "its qrels have no positive grade"
    return min(best[0], GRADED_LEVEL), f"its queries' best grades are {', '.join(map(str, best))}"


def _file_names(folder: Path, splits: dict[str, Path]) -> list[str]:
    return [p.relative_to(folder).as_posix() for d in splits.values() for p in files(d)]


#: this layout in the registry of :mod:`bench.data.layouts`
LAYOUT_SPEC = DatasetLayout(
    name=LAYOUT,
    files=f"{QUERIES}, {COLLECTION}, {QRELS} and {RUN_GLOB}",
    label="TREC files",
    find_splits=find_splits,
    load=load_card_split,
    file_names=_file_names,
    suggested_level=suggested_level,
)


def _irds_instructions(folder: Path, irds_id: str) -> str:
    return (
        f"Put a first-stage run for the {irds_id} queries in {folder}/ as run.<name>.trec "
        "(qid Q0 docid rank score tag, MS MARCO document ids; the paper used HDCT top-10). "
        f"With network access and {DOWNLOAD_EXTRA}, queries.tsv, qrels.txt and collection.tsv "
        "(titles) "
        f"are then built from ir_datasets {irds_id}; otherwise put them there too (queries.tsv: "
        "qid<TAB>text, collection.tsv: docid<TAB>title, qrels.txt: qid 0 docid grade)."
    )


def build_irds_titles(folder: Path, card: DatasetCard, split: str) -> None:
    """Write the missing queries.tsv, qrels.txt and collection.tsv (titles) of the run's queries."""
    from bench.core.io import atomic_write_text

    irds_id = (card.irds_id or "").format(split=split)
    how = _irds_instructions(folder, irds_id)
    if not card.run_file and not any(folder.glob(RUN_GLOB)):
        raise DatasetError(f"{card.name} ({split}): no run file in {folder}. {how}")
    run_path = find_run(folder, card.run_file)
    run = read_run(run_path, run_path.read_bytes())
    qids = set(run)
    docids = sorted({e.docid for entries in run.values() for e in entries})
    try:
        import ir_datasets
    except ImportError as exc:
        raise DatasetError(
            f"{card.name}: building needs ir_datasets: {DOWNLOAD_EXTRA}. {how}"
        ) from exc
    log.info(
        "building %s from ir_datasets %s (%d queries, %d docs)",
        folder,
        irds_id,
        len(qids),
        len(docids),
    )
    try:
        ds = ir_datasets.load(irds_id)
        queries = {q.query_id: q.text for q in ds.queries_iter() if q.query_id in qids}
        qrels = [q for q in ds.qrels_iter() if q.query_id in qids]
        docs = ds.docs_store().get_many(docids)
    except Exception as exc:  # download or index errors inside ir_datasets
        raise DatasetError(
            f"{card.name}: could not read ir_datasets {irds_id} ({exc}). {how}"
        ) from exc
    missing = [d for d in docids if d not in docs]
    if missing:
        raise DatasetError(
            f"{run_path}: {len(missing)} docids are not in {irds_id} (first: {missing[0]!r}); "
            "the run must use MS MARCO document ids"
        )

    def clean(text: str) -> str:
        return " ".join(text.split())

    files = {
        QUERIES: "".join(f"{q}\t{clean(t)}\n" for q, t in queries.items()),
        QRELS: "".join(f"{q.query_id} 0 {q.doc_id} {q.relevance}\n" for q in qrels),
        COLLECTION: "".join(f"{d}\t{clean(docs[d].title)}\n" for d in docids),
    }
    for name, text in files.items():
        if not (folder / name).exists():  # a local file wins
            atomic_write_text(folder / name, text)
