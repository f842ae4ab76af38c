"""Fetching the paper's two datasets when no local copy exists.

- SODQ: the Hugging Face dataset named by the card, at the card's pinned revision, converted to
  ``<root>/sodq/{split}.jsonl``. ``source.json`` next to it records the revision and the SHA-256
  of each written file, so a later load can tell a downloaded file from a user-provided one.
- MS MARCO-Titles: the user supplies the first-stage run (the paper used HDCT top-10); queries,
  qrels and document titles of the run's documents are taken from ir_datasets.

Both clients are imported lazily: they are optional (``crossjem-bench[download]``).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from pathlib import Path

from bench.data import trec
from bench.data.cards import DatasetCard
from bench.data.files import DatasetError

log = logging.getLogger(__name__)

SOURCE_FILE = "source.json"
_OFFLINE_VARS = ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE")
_EXTRA = "pip install 'crossjem-bench[download]'"


def recorded_revision(path: Path) -> str | None:
    """The revision the downloader recorded for ``path``, if the file is unchanged since."""
    source = path.parent / SOURCE_FILE
    if not source.is_file():
        return None
    entry = json.loads(source.read_text(encoding="utf-8")).get(path.name, {})
    if entry.get("sha256") != hashlib.sha256(path.read_bytes()).hexdigest():
        return None
    return entry.get("revision")


def _hf_instructions(folder: Path, card: DatasetCard) -> str:
    names = " and ".join(f"{s}.jsonl" for s in card.splits)
    return (
        f"To use a local copy instead, put {names} (or .jsonl.gz) in {folder}/, one JSON object "
        'per line with fields "query" (string), "positive" and "negative" (lists of strings), '
        f"as in {card.hf_id} at revision {card.hf_revision}."
    )


def fetch_hf(folder: Path, card: DatasetCard) -> None:
    """Download ``card.hf_id`` at ``card.hf_revision``; write each missing split as JSONL."""
    from bench.results import atomic_write_json, atomic_write_text

    how = _hf_instructions(folder, card)
    offline = [v for v in _OFFLINE_VARS if os.environ.get(v, "").strip() not in ("", "0")]
    if offline:
        raise DatasetError(
            f"{card.name}: no local copy in {folder} and downloads are off "
            f"({', '.join(offline)} is set). {how}"
        )
    try:
        from datasets import load_dataset
    except ImportError as exc:
        raise DatasetError(
            f"{card.name}: downloading needs the Hugging Face `datasets` package: {_EXTRA}. {how}"
        ) from exc
    log.info("downloading %s at revision %s", card.hf_id, card.hf_revision)
    try:
        dsd = load_dataset(card.hf_id, revision=card.hf_revision)
    except Exception as exc:  # network, hub or cache errors all end the same way
        raise DatasetError(
            f"{card.name}: could not download {card.hf_id}@{card.hf_revision} ({exc}). {how}"
        ) from exc

    source_path = folder / SOURCE_FILE
    record = json.loads(source_path.read_text(encoding="utf-8")) if source_path.is_file() else {}
    for split in card.splits:
        path = folder / f"{split}.jsonl"
        if path.exists() or path.with_name(path.name + ".gz").exists():
            continue  # a local copy wins
        if split not in dsd:
            raise DatasetError(
                f"{card.hf_id}@{card.hf_revision} has no split {split!r} "
                f"(it has {', '.join(dsd)}); fix `splits` in the {card.name} card"
            )
        text = "".join(
            json.dumps(
                {
                    "query": r["query"],
                    "positive": list(r["positive"]),
                    "negative": list(r["negative"]),
                },
                ensure_ascii=False,
            )
            + "\n"
            for r in dsd[split]
        )
        atomic_write_text(path, text)
        record[path.name] = {
            "hf_id": card.hf_id,
            "revision": card.hf_revision,
            "sha256": hashlib.sha256(text.encode("utf-8")).hexdigest(),
        }
        log.info("wrote %s (%d queries)", path, len(dsd[split]))
    atomic_write_json(source_path, record)


def _irds_instructions(folder: Path, irds_id: str) -> str:
    return (
        f"Put a first-stage run for the {irds_id} queries in {folder}/ as run.<name>.trec "
        "(qid Q0 docid rank score tag, MS MARCO document ids; the paper used HDCT top-10). "
        f"With network access and {_EXTRA}, queries.tsv, qrels.txt and collection.tsv (titles) "
        f"are then built from ir_datasets {irds_id}; otherwise put them there too (queries.tsv: "
        "qid<TAB>text, collection.tsv: docid<TAB>title, qrels.txt: qid 0 docid grade)."
    )


def build_irds_titles(folder: Path, card: DatasetCard, split: str) -> None:
    """Write the missing queries.tsv, qrels.txt and collection.tsv (titles) of the run's queries."""
    from bench.results import atomic_write_text

    irds_id = (card.irds_id or "").format(split=split)
    how = _irds_instructions(folder, irds_id)
    if not card.run_file and not any(folder.glob(trec.RUN_GLOB)):
        raise DatasetError(f"{card.name} ({split}): no run file in {folder}. {how}")
    run_path = trec.find_run(folder, card.run_file)
    run = trec.read_run(run_path, run_path.read_bytes())
    qids = set(run)
    docids = sorted({e.docid for entries in run.values() for e in entries})
    try:
        import ir_datasets
    except ImportError as exc:
        raise DatasetError(f"{card.name}: building needs ir_datasets: {_EXTRA}. {how}") from exc
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
        trec.QUERIES: "".join(f"{q}\t{clean(t)}\n" for q, t in queries.items()),
        trec.QRELS: "".join(f"{q.query_id} 0 {q.doc_id} {q.relevance}\n" for q in qrels),
        trec.COLLECTION: "".join(f"{d}\t{clean(docs[d].title)}\n" for d in docids),
    }
    for name, text in files.items():
        if not (folder / name).exists():  # a local file wins
            atomic_write_text(folder / name, text)
