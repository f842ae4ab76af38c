"""The MTEB re-ranking JSONL layout: ``{split}.jsonl[.gz]``, one query per line.

Each line is ``{"query": str, "positive": [str, ...], "negative": [str, ...]}`` with an optional
``"qid"`` (the MTEB files have none). Texts carry no ids, so ids are hashes of the text: the same
text is the same document in every list and in every run of the harness. There is no first-stage
ranking, so candidates keep file order (positives, then negatives) and have no score.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench.data.files import DatasetError, iter_lines, read_bytes, sha256_16
from bench.data.layouts import DatasetLayout
from bench.data.model import (
    Candidate,
    CandidateList,
    Qrels,
    Query,
    RankingSplit,
    blank_text_notes,
    text_id,
    warn_once,
)

if TYPE_CHECKING:
    from bench.data.cards import DatasetCard


LAYOUT = "mteb"
SUFFIXES = (".jsonl", ".jsonl.gz")
_FORMAT = 'one JSON object per line: {"query": str, "positive": [str, ...], "negative": [str, ...]}'


def find_splits(folder: Path) -> dict[str, Path]:
    """split name -> file, for every ``{split}.jsonl`` / ``{split}.jsonl.gz`` in ``folder``."""
    splits: dict[str, Path] = {}
    if not folder.is_dir():
        return splits
    for path in sorted(folder.iterdir()):
        suffix = next((s for s in SUFFIXES if path.name.endswith(s)), None)
        if suffix is None or path.name.startswith(".") or not path.is_file():
            continue
        split = path.name[: -len(suffix)]
        if split in splits:
            raise DatasetError(
                f"{folder}: split {split!r} is in both {splits[split].name} and {path.name}; "
                "remove one of them"
            )
        splits[split] = path
    return splits


def load_mteb(path: Path, dataset: str, split: str, relevance_level: int = 1) -> RankingSplit:
    """Parse one split file; positives get grade 1, negatives 0."""
    data = read_bytes(path)
    lists: list[CandidateList] = []
    qrels: Qrels = {}
    dropped: Counter[str] = Counter()
    qid_lines: dict[str, int] = {}
    merged = conflicting = 0
    for lineno, line in iter_lines(path, data):
        qid, query, positive, negative = _parse_line(path, lineno, line)
        if qid is None:
            qid = _fresh_qid(text_id(query, "q"), qid_lines)
        elif qid in qid_lines:
            raise DatasetError(
                f"{path}:{lineno}: qid {qid!r} is already used at line {qid_lines[qid]}; "
                "every line needs its own qid - renumber or remove one of the two lines"
            )
        qid_lines[qid] = lineno

        grades: dict[str, int] = {}
        candidates: list[Candidate] = []
        for text, grade in [(t, 1) for t in positive] + [(t, 0) for t in negative]:
            docid = text_id(text, "d")
            if docid in grades:  # positives come first, so a text in both lists stays positive
                if grades[docid] == grade:
                    merged += 1
                else:
                    conflicting += 1
                continue
            grades[docid] = grade
            candidates.append(Candidate(docid=docid, text=text))
        if not candidates:
            dropped["empty"] += 1
        elif not any(g >= relevance_level for g in grades.values()):
            dropped["no_positive"] += 1
        else:
            lists.append(CandidateList(Query(qid, query), tuple(candidates)))
            qrels[qid] = grades

    notes = blank_text_notes(lists, str(path))
    changed = []  # what is scored differs from the file: said as loudly as empty texts
    if merged:
        changed.append(f"duplicate candidate texts merged within a list: {merged}")
    if conflicting:
        changed.append(
            f"candidate texts both positive and negative, kept as positive: {conflicting}"
        )
    for note in changed:
        warn_once(str(path), note)
    notes += changed
    return RankingSplit(
        dataset=dataset,
        split=split,
        lists=lists,
        qrels=qrels,
        relevance_level=relevance_level,
        layout=LAYOUT,
        source=str(path),
        checksum=sha256_16(data),
        dropped=dict(dropped),
        notes=notes,
    )


def _fresh_qid(base: str, taken: dict[str, int]) -> str:
    """``base``, or ``base-2``, ``base-3``... when the same query text occurs on several lines."""
    qid, n = base, 1
    while qid in taken:
        n += 1
        qid = f"{base}-{n}"
    return qid


def _parse_line(path: Path, lineno: int, line: str) -> tuple[str | None, str, list[str], list[str]]:
    where = f"{path}:{lineno}"
    try:
        row: Any = json.loads(line)
    except json.JSONDecodeError as exc:
        raise DatasetError(
            f"{where}: not valid JSON ({exc.msg} at column {exc.colno}); expected {_FORMAT}"
        ) from exc
    if not isinstance(row, dict):
        raise DatasetError(f"{where}: expected a JSON object, got {type(row).__name__}; {_FORMAT}")
    for key in ("query", "positive", "negative"):
        if key not in row:
            raise DatasetError(f"{where}: missing field {key!r}; expected {_FORMAT}")
    if not isinstance(row["query"], str):
        raise DatasetError(
            f"{where}: field 'query' must be a string, got {type(row['query']).__name__}"
        )
    for key in ("positive", "negative"):
        value = row[key]
        if not isinstance(value, list) or not all(isinstance(t, str) for t in value):
            raise DatasetError(
                f"{where}: field {key!r} must be a list of strings, got {_describe(value)}"
            )
    qid = row.get("qid")
    if qid is not None and (isinstance(qid, bool) or not isinstance(qid, (str, int))):
        raise DatasetError(f"{where}: field 'qid' must be a string or integer, got {qid!r}")
    return (None if qid is None else str(qid)), row["query"], row["positive"], row["negative"]


def _describe(value: Any) -> str:
    if isinstance(value, list):
        bad = next(v for v in value if not isinstance(v, str))
        return f"a list holding {type(bad).__name__} {bad!r}"
    return f"{type(value).__name__} {value!r}"[:80]


def load_card_split(folder: Path, split: str, card: DatasetCard) -> RankingSplit:
    """One split of a dataset in this layout, downloaded first when it is missing and the card
    names a Hugging Face source; the revision the downloader recorded is kept."""
    from bench.data import sources

    local = find_splits(folder)
    if split not in local and card.hf_id:
        sources.fetch_hf(folder, card)
        local = find_splits(folder)
    path = local[split]
    result = load_mteb(path, card.name, split, card.relevance_level)
    result.revision = sources.recorded_revision(path)
    if result.revision is None and card.hf_id:
        result.notes.append(
            f"local copy {path.name} not written by the downloader: revision unknown"
        )
    return result


#: this layout in the registry of :mod:`bench.data.layouts`
LAYOUT_SPEC = DatasetLayout(
    name=LAYOUT,
    files="{split}.jsonl or {split}.jsonl.gz files",
    label="MTEB split files",
    find_splits=lambda folder, default_split: find_splits(folder),
    load=load_card_split,
    file_names=lambda folder, splits: [p.name for p in splits.values()],
    # the files are binary: positives are grade 1
    suggested_level=lambda split_path: (1, "its positives have grade 1"),
)
