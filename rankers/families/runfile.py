"""A TREC run file from another system as a ranker row: ``--ranker runfile --set path=FILE``.

Users compare systems this project does not implement (a SPLADE run, a production ranker's
scores) on the same candidate lists as the harness's rankers: the file's scores become the
row's scores, so metrics, significance against the other rows, ``compare``, ``check`` and
``plot`` treat it like any other ranker. The file's SHA-256 is part of the scoring key
(:meth:`RunFileRanker.input_fingerprint`), so a changed file is scored anew and an unchanged one
reused; the record keeps the file's path and SHA-256 (:meth:`RunFileRanker.input_files`), so
``compare``, ``check`` and ``plot`` leave its row out once the file changes or is gone, and the
row's label shows the first hex of the SHA-256, so two files of one name are two rows.

The file must score exactly the candidates of every ranked list: a query the dataset does not
have, a list's candidate the run leaves out or a document it adds that the list does not hold
is an error naming the file, the line (or query) and the fix; the TREC reader
(:func:`bench.data.trec.read_run`) already refuses a wrong column count, a non-numeric or
non-finite score and a document listed twice for a query. Queries of the dataset left out by
``--subset`` may stay in the file.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from bench.data.files import DatasetError, read_bytes
from bench.data.model import CandidateList, RankingSplit
from bench.data.trec import RunEntry, read_run
from rankers.base import SCORE, Ranker, RankerConfig, RankerError, option
from rankers.hooks import InputChecks


@dataclass
class RunFileConfig(RankerConfig):
    path: str | None = option(
        None,
        role=SCORE,
        help="TREC run file (qid Q0 docid rank score tag) scoring every candidate of every list",
    )
    name: str | None = option(
        None, role=SCORE, help="what the row is called (default: the file's name)"
    )


class RunFileRanker(Ranker[RunFileConfig], InputChecks):
    """Scores read from a run file; higher is more relevant, as in TREC runs."""

    name = "runfile"
    family = "external"
    Config = RunFileConfig
    pointwise = True
    untimed = (
        "its scores are read from a run file, not computed, so there is nothing to time; "
        "and bench latency times BM25 top-N lists of its own, which the file does not score. "
        "Compare its metrics with bench compare after bench run -r runfile --set path=FILE"
    )

    def __init__(self, config: RunFileConfig | None = None, device: str = "cpu") -> None:
        super().__init__(config, device)
        self._run: dict[str, list[RunEntry]] | None = None
        self._digest: str | None = None

    @property
    def file(self) -> Path:
        return Path(self.cfg.path or "").expanduser()

    def _load(self) -> dict[str, list[RunEntry]]:
        if not self.cfg.path:
            raise RankerError(
                "ranker runfile needs the run file: --set path=FILE (TREC format: qid Q0 docid "
                "rank score tag)"
            )
        if self._run is None:
            data = read_bytes(self.file)
            self._digest = hashlib.sha256(data).hexdigest()
            self._run = read_run(self.file, data)
            if not self._run:
                raise DatasetError(f"{self.file}: the run file holds no entries")
        return self._run

    def input_fingerprint(self) -> dict[str, Any]:
        """The run file's SHA-256 (and the name it was read as): the scores depend on its bytes,
        not on its path."""
        self._load()
        return {"run_file": {"name": self.file.name, "sha256": self._digest}}

    def input_files(self) -> dict[str, str]:
        """The run file, by its absolute path (a reader may run from another folder)."""
        self._load()
        assert self._digest is not None
        return {str(self.file.resolve()): self._digest}

    def index(self, split: RankingSplit) -> None:
        """A query the run scores must be one the split has (a run for another dataset or split
        fails here); queries left out by ``--subset`` are allowed."""
        run = self._load()
        known = {cl.query.qid for cl in split.lists}
        unknown = [q for q in run if q not in known]
        if unknown and not split.is_subset:
            entry = run[unknown[0]][0]
            raise DatasetError(
                f"{self.file}:{entry.line}: query {unknown[0]!r} is not a query of "
                f"{split.dataset}/{split.split} ({len(unknown)} such queries); a run file must "
                "score the dataset's own candidate lists"
            )

    def score(self, lists: Sequence[CandidateList]) -> list[np.ndarray]:
        run = self._load()
        out = []
        for cl in lists:
            entries = run.get(cl.query.qid)
            if entries is None:
                raise DatasetError(
                    f"{self.file}: query {cl.query.qid!r} has no entries; the run must score "
                    f"every candidate of every ranked query ({len(cl)} here)"
                )
            scores = {e.docid: e.score for e in entries}
            candidates = set(cl.docids)
            added = [e for e in entries if e.docid not in candidates]
            if added:
                raise DatasetError(
                    f"{self.file}:{added[0].line}: docid {added[0].docid!r} is not a candidate "
                    f"of query {cl.query.qid!r} ({len(added)} such entries); score the dataset's "
                    "candidate lists, not a new retrieval"
                )
            missing = [d for d in cl.docids if d not in scores]
            if missing:
                raise DatasetError(
                    f"{self.file}: query {cl.query.qid!r} leaves out {len(missing)} of its "
                    f"{len(cl)} candidates (first: {missing[0]!r}); the run must score every one"
                )
            out.append(np.array([scores[d] for d in cl.docids], dtype=np.float64))
        return out
