"""Fetching the paper's two datasets when no local copy exists.

- SODQ: the Hugging Face dataset named by the card, at the card's pinned revision, converted to
  ``<root>/sodq/{split}.jsonl``. ``source.json`` next to it records the revision and the SHA-256
  of each written file, so a later load can tell a downloaded file from a user-provided one.
- MS MARCO-Titles: built by :func:`bench.data.trec.build_irds_titles` (its layout's own fetch).

Both clients are imported lazily: they are optional (``crossjem-bench[download]``).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from pathlib import Path

from bench.data.cards import DatasetCard
from bench.data.files import DOWNLOAD_EXTRA, DatasetError

log = logging.getLogger(__name__)

SOURCE_FILE = "source.json"
_OFFLINE_VARS = ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE")


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


def _drop_hub_stderr_handler() -> None:
    """huggingface_hub gives its logger a stderr handler of its own when imported, and the
    records also reach the command's handler, so each of its retry warnings (five when the Hub
    cannot be reached) printed twice, once raw; the command's handler is enough."""
    hub = logging.getLogger("huggingface_hub")
    for handler in list(hub.handlers):
        if type(handler) is logging.StreamHandler:
            hub.removeHandler(handler)


def fetch_hf(folder: Path, card: DatasetCard) -> None:
    """Download ``card.hf_id`` at ``card.hf_revision``; write each missing split as JSONL."""
    from bench.core.io import atomic_write_json, atomic_write_text

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
            f"{card.name}: downloading needs the Hugging Face `datasets` package: "
            f"{DOWNLOAD_EXTRA}. {how}"
        ) from exc
    log.info("downloading %s at revision %s", card.hf_id, card.hf_revision)
    _drop_hub_stderr_handler()
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
