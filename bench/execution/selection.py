"""Which result records the readers show: those of the computation `bench run` would reuse now.

A results folder keeps every record ever written: one per cache key, so a record of data that
was edited and restored, of a dataset card changed since, or of older code stays on disk. Picking
rows by the newest ``created`` then shows figures of inputs that no longer exist (delete lines of
a split, run, restore the file, run again: the second run reuses the first record, which is now
older than the record of the deleted data). Instead, a record is **current** when the cache-key
components that do not come from its own options match what they are now
(:func:`record_problem`):

* ``data``: the split's checksum, relevance level and card facts
  (:meth:`~bench.data.model.RankingSplit.fingerprint`, the same for every ``--subset``);
* ``code``: the scoring job's code fingerprint for the record's ranker, by the same rule as
  `bench run` (:func:`bench.execution.keys.scoring_code`: the sources the job imports, the ranker's
  settings file, the scoring packages' versions), and the metrics' evaluation stamp
  (:func:`bench.execution.keys.evaluation_stamp`: a run whose measures' code changed shows metrics
  `bench run` would compute again);
* for a trained model, its own ``data`` and ``code`` components (the train and dev splits; the
  training code, :func:`bench.execution.keys.training_code`), and for a distilled one its teachers'
  code (:func:`teachers_current`).

* the files the scores were read from (a run file: :attr:`ResultRecord.inputs`, each file's
  SHA-256): `bench run` keys on their bytes, so a record whose file was edited or deleted is
  one it would compute again; each such record is named in a warning with the file.

The ``config`` component is the record's own options, and the ``model`` one follows from the
model's config, data and code, so with these equal `bench run` with the record's options would
compute the same key and reuse the record. Every reader (`bench compare`, `bench check`, `bench
plot`) calls :func:`select_records`; what it leaves out is counted and said
(:meth:`Selection.summary`), and ``--all-records`` shows every record instead. Each split is read
once per command (:class:`CurrentInputs`).
"""

from __future__ import annotations

import copy
import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.data.splits import Dataset
from bench.results.cache import component_hash
from bench.results.records import RUN_KIND, ResultRecord, files_problem, load_records

log = logging.getLogger(__name__)

#: why a record is left out -> the words of the summary ("2 records of other data")
OTHER_DATA = "other data"
OTHER_CODE = "other code"
UNREADABLE_DATA = "data that cannot be read now"
UNKNOWN_INPUTS = "unrecorded inputs"
CHANGED_INPUTS = "changed input files"
ALL_RECORDS_HINT = "--all-records shows them"


class CurrentInputs:
    """The key components of the inputs as they are now, each computed once per command: one
    split's fingerprint per (dataset, split), one code fingerprint per (job, ranker)."""

    def __init__(self, data_dir: str | Path | None = None) -> None:
        self.data_dir = data_dir
        self._data: dict[tuple[str, str], str | None] = {}
        self._datasets: dict[str, Dataset] = {}
        self._code: dict[tuple[str, str], str | None] = {}

    def dataset(self, name: str) -> Dataset:
        """Dataset ``name`` as it is now, resolved once per command."""
        if name not in self._datasets:
            self._datasets[name] = Dataset.resolve(name, self.data_dir)
        return self._datasets[name]

    def code(self, ranker: str, job: str = "score") -> str | None:
        """The ``code`` component a ``job`` (``score`` or ``train``) of ``ranker`` would have
        now (None: the ranker is not registered now)."""
        if (job, ranker) not in self._code:
            from bench.execution.keys import scoring_code, training_code
            from bench.execution.ranker_settings import settings_file
            from rankers import RankerError, module_of

            try:
                module = module_of(ranker)
            except RankerError:
                self._code[job, ranker] = None
            else:
                of = scoring_code if job == "score" else training_code
                self._code[job, ranker] = component_hash("code", of(module, settings_file(ranker)))
        return self._code[job, ranker]

    def evaluation(self, measures: Sequence[str]) -> dict[str, Any]:
        """The evaluation stamp of ``measures`` now."""
        from bench.execution.keys import evaluation_stamp

        return evaluation_stamp(measures)

    def fingerprint(self, dataset: str, split: str) -> dict[str, Any] | None:
        """The split's fingerprint now; None (logged) when it cannot be read or is not on disk
        (a reader never downloads or builds a split, as loading a card's missing split would)."""
        from bench.data.files import DatasetError

        try:
            resolved = self.dataset(dataset)
            if split not in resolved.local:
                log.info("%s/%s is not under the data root now", dataset, split)
                return None
            return resolved.load(split).fingerprint()
        except (DatasetError, OSError, ValueError) as exc:
            log.info("%s/%s cannot be read now (%s)", dataset, split, exc)
            return None

    def data(self, dataset: str, split: str) -> str | None:
        """The ``data`` component a run on ``dataset``/``split`` would have now."""
        if (dataset, split) not in self._data:
            fp = self.fingerprint(dataset, split)
            self._data[dataset, split] = None if fp is None else component_hash("data", fp)
        return self._data[dataset, split]

    def training_data(self, dataset: str) -> str | None:
        """The ``data`` component of a model trained on ``dataset`` now (train and dev)."""
        key = (dataset, "\0training")
        if key not in self._data:
            try:
                dev_name = self.dataset(dataset).dev_split()
            except (OSError, ValueError) as exc:
                log.info("%s cannot be read now (%s)", dataset, exc)
                dev_name = None
            train = self.fingerprint(dataset, "train")
            dev = self.fingerprint(dataset, dev_name) if dev_name else None
            ok = train is not None and (dev_name is None or dev is not None)
            value = {"train": train, "dev": dev}
            self._data[key] = component_hash("data", value) if ok else None
        return self._data[key]


def record_problem(record: ResultRecord, inputs: CurrentInputs) -> str | None:
    """Why `bench run` with ``record``'s options would not reuse it now (one of
    :data:`OTHER_DATA`, :data:`OTHER_CODE`, :data:`UNREADABLE_DATA`, :data:`UNKNOWN_INPUTS`,
    :data:`CHANGED_INPUTS`), or None when it would."""
    parts = record.key_parts or {}
    if not parts.get("data") or not parts.get("code"):
        return UNKNOWN_INPUTS
    if record.inputs and (changed := files_problem(Path(), record.inputs)):
        log.warning(
            "%s (%s): %s; bench run would score it again, so this is no current row",
            record.label or record.ranker,
            record.path,
            changed,
        )
        return CHANGED_INPUTS
    data = inputs.data(record.dataset, record.split)
    if data is None:
        return UNREADABLE_DATA
    if parts["data"] != data:
        return OTHER_DATA
    if parts["code"] != inputs.code(record.ranker):
        return OTHER_CODE
    stamp = (record.provenance or {}).get("evaluation")
    measures = (record.run_config or {}).get("measures") or []
    if stamp is None or stamp != inputs.evaluation(measures):
        return OTHER_CODE
    model_parts = (record.training or {}).get("key_parts")
    if isinstance(model_parts, dict) and model_parts.get("data"):
        trained_on = inputs.training_data(record.dataset)
        if trained_on is None:
            return UNREADABLE_DATA
        if model_parts["data"] != trained_on:
            return OTHER_DATA
        code = model_parts.get("code")
        if code != inputs.code(record.ranker, "train") or not teachers_current(record, inputs):
            return OTHER_CODE
    return None


def teachers_current(record: ResultRecord, inputs: CurrentInputs) -> bool:
    """Whether the teachers a record's model was distilled from were trained by the training
    code of now (a student's key holds its teachers' keys, so `bench run` retrains it when a
    teacher's code changes). Each named teacher's model folder sits beside the student's,
    ``models/DATASET/TEACHER/KEY``; one that cannot be read counts as other code."""
    training = record.training or {}
    keys = str(training.get("teacher_key") or "")
    if not keys or record.path is None:
        return True
    from rankers.fit.targets import ENSEMBLE_SEPARATOR, teacher_parts

    names = [
        p
        for p in teacher_parts(str((record.config or {}).get("teacher") or ""))
        if "/" not in p and "\\" not in p
    ]
    models = record.path.parents[3] / "models" / record.dataset
    for name, key in zip(names, keys.split(ENSEMBLE_SEPARATOR), strict=False):
        try:
            summary = json.loads((models / name / key / "training.json").read_text("utf-8"))
            code = summary["key_parts"]["code"]
        except (OSError, ValueError, KeyError, TypeError):
            return False
        if code != inputs.code(name, "train"):
            return False
    return True


@dataclass
class Selection:
    """The records a reader shows, and those it left out by reason."""

    records: list[ResultRecord]
    left_out: dict[str, list[ResultRecord]] = field(default_factory=dict)

    @property
    def n_left_out(self) -> int:
        return sum(len(recs) for recs in self.left_out.values())

    def summary(self) -> str | None:
        """``2 records of other data left out; --all-records shows them`` (None: none left
        out); several reasons: ``3 records left out (1 of other data, 2 of other code); ...``."""
        n = self.n_left_out
        if not n:
            return None
        noun = "record" if n == 1 else "records"
        reasons = [(why, len(recs)) for why, recs in sorted(self.left_out.items()) if recs]
        if len(reasons) == 1:
            text = f"{n} {noun} of {reasons[0][0]} left out"
        else:
            text = f"{n} {noun} left out (" + ", ".join(f"{k} of {w}" for w, k in reasons) + ")"
        return f"{text}; {ALL_RECORDS_HINT}"


def select_records(
    records: Sequence[ResultRecord],
    data_dir: str | Path | None = None,
    *,
    all_records: bool = False,
    inputs: CurrentInputs | None = None,
) -> Selection:
    """The current records among ``records`` (`bench run` records; other kinds pass through),
    in their order; ``all_records`` keeps every one and leaves nothing out."""
    inputs = inputs or CurrentInputs(data_dir)
    kept: list[ResultRecord] = []
    left_out: dict[str, list[ResultRecord]] = {}
    for record in records:
        problem = None if record.kind != RUN_KIND else record_problem(record, inputs)
        if problem is None:
            kept.append(record)
        elif all_records:  # shown, but never as an ordinary row: its label says what it is
            kept.append(stale(record, problem))
        else:
            log.debug("left out %s: %s", record.path, problem)
            left_out.setdefault(problem, []).append(record)
    return Selection(kept, left_out)


def stale(record: ResultRecord, problem: str) -> ResultRecord:
    """A copy of ``record`` whose label ends ``(STALE: other data)`` (``problem``), so a table
    of ``--all-records`` shows it on a row of its own, beside the current record of the same
    settings, never in its place."""
    marked = copy.copy(record)
    marked.label = f"{record.label or record.ranker} (STALE: {problem})"
    return marked


def newest_per_row(records: Sequence[ResultRecord]) -> list[ResultRecord]:
    """One record per table row (ranker and label): the newest (``created``) of those given.
    Among current records several can share a row (settings a label does not show, such as the
    thread count); with ``--all-records`` this is the old newest-wins view."""
    newest: dict[tuple[str, str], ResultRecord] = {}
    for rec in records:
        key = (rec.ranker, rec.label or rec.ranker)
        old = newest.get(key)
        if old is None or rec.created >= old.created:
            if old is not None and old.config_hash != rec.config_hash:
                log.info(
                    "%s %r: newer record %s replaces config %s", *key, rec.created, old.config_hash
                )
            newest[key] = rec
    return list(newest.values())


def load_selected(
    root: Path,
    data_dir: str | Path | None = None,
    *,
    dataset: str | None = None,
    split: str | None = None,
    all_records: bool = False,
) -> Selection:
    """:func:`bench.results.records.load_records` under ``root``, then :func:`select_records`."""
    records = load_records(root, dataset=dataset, split=split)
    return select_records(records, data_dir, all_records=all_records)
