"""The scoring job: rank one split with one ranker under the latency tracker, evaluate, write the
result entry; and the evaluation of a stored run again when the measures or their code change.

The job's values are resolved when the plan is made (:mod:`bench.execution.runner`); the executor
(:mod:`bench.execution.plan`) calls :meth:`ScoreJob.run`. This module's import closure is part of
every scoring key (:mod:`bench.execution.keys`), so it imports no application module beyond the
latency tracker: the run file it writes depends on this code and the ranker's, never on the CLI or
tables.
"""

from __future__ import annotations

import datetime as _dt
import logging
from collections.abc import Callable, Mapping, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from bench.core import provenance
from bench.core.device import device_info
from bench.core.progress import progress_bar
from bench.core.shard import current_role, from_main, gather_to_main, score_sharded
from bench.core.timing import LatencyTracker
from bench.data.batching import batches
from bench.data.model import CandidateList, RankingSplit
from bench.results.cache import CacheKey, entry_lock, explain_miss, move_aside
from bench.results.metrics import evaluate
from bench.results.ranking import build_run
from bench.results.records import (
    RECORD,
    RUN_FILE,
    ResultRecord,
    read_record,
    record_problem,
    write_result,
)
from rankers import Ranker, RankerError
from rankers.hooks import input_checks, latency_parts

log = logging.getLogger(__name__)


def input_notes(report: Mapping[str, Any]) -> list[str]:
    """Lines that say what :meth:`~rankers.hooks.InputChecks.input_report` counted: texts cut to the
    length limit (and the share of tokens lost), lists split over several encoder rows."""
    out = []
    for what, key in (("queries", "queries_cut"), ("items", "items_cut")):
        cut = report.get(key)
        if cut and cut["cut"]:
            out.append(
                f"{cut['cut']} of {cut['texts']} distinct {what} ({cut['cut'] / cut['texts']:.0%}) "
                f"cut to {cut['max_len']} WordPiece tokens, {cut['share_lost']:.1%} of their "
                "tokens lost"
            )
    rows = report.get("rows")
    if rows and rows["lists"]:
        out.append(
            f"encoder rows per list ({rows['layout']}, union_len {rows['union_len']}): mean "
            f"{rows['mean']:.2f}, max {rows['max']}; {rows['split']} of {rows['lists']} lists "
            "split over several rows (their items do not attend to each other)"
        )
    return out


def score_split(
    ranker: Ranker,
    split: RankingSplit,
    *,
    batch_queries: int = 1,
    warmup: int = 5,
    progress: bool = True,
) -> tuple[list[np.ndarray], LatencyTracker]:
    """Warm up on the first lists (untimed), then score every list under the latency tracker."""
    if warmup:
        latency_parts(ranker).warmup(split.lists[:warmup])
    tracker = LatencyTracker(ranker.device)
    scores: list[np.ndarray] = []
    bar = progress_bar(
        len(split.lists), f"{ranker.name} on {split.dataset}/{split.split}", "q", enabled=progress
    )
    with bar:
        for batch in batches(split.lists, batch_queries):
            with tracker.track(queries=len(batch), candidates=sum(len(cl) for cl in batch)):
                out = ranker.score(batch)
            if len(out) != len(batch):
                raise RankerError(
                    f"{ranker.name} returned {len(out)} score arrays for {len(batch)}"
                )
            for cl, s in zip(batch, out, strict=True):
                if len(s) != len(cl):
                    raise RankerError(
                        f"{ranker.name} returned {len(s)} scores for {len(cl)} candidates "
                        f"of query {cl.query.qid}"
                    )
            scores.extend(np.asarray(s, dtype=np.float64) for s in out)
            bar.update(len(batch))
    return scores, tracker


def reusable(out_dir: Path) -> ResultRecord | None:
    """The finished record in ``out_dir`` if its files are whole; a damaged entry is moved
    aside (with a warning) so it is recomputed. An unfinished one (no record) is overwritten."""
    if not (out_dir / RECORD).exists():
        return None
    problem = record_problem(out_dir)
    if problem is None:
        return read_record(out_dir)
    move_aside(out_dir, problem)
    return None


def read_run(path: Path) -> dict[str, dict[str, float]]:
    """A TREC run file as written by :func:`bench.results.records.write_result` (qid -> docid ->
    score)."""
    run: dict[str, dict[str, float]] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        qid, _, docid, _, score, *_ = line.split()
        run.setdefault(qid, {})[docid] = float(score)
    return run


def evaluation_current(record: ResultRecord, stamp: Mapping[str, Any]) -> bool:
    """Whether ``record``'s metrics were computed with the measures and code of ``stamp``."""
    return (record.provenance or {}).get("evaluation") == dict(stamp)


def evaluate_entry(
    record: ResultRecord, split: RankingSplit, measures: Sequence[str], stamp: Mapping[str, Any]
) -> ResultRecord:
    """The evaluate job: ``record`` as it is when its stamp is ``stamp``, else its stored run
    evaluated again (new measures, or their code changed): the run file, the latency and the
    key stay; metrics, per-query values and the stamp are rewritten, under the entry's lock."""
    if evaluation_current(record, stamp) or record.path is None or not current_role().main:
        return record
    with entry_lock(record.path, f"evaluating {record.path.name}"):
        return _reevaluate(record, split, measures, stamp)


def _reevaluate(
    record: ResultRecord, split: RankingSplit, measures: Sequence[str], stamp: Mapping[str, Any]
) -> ResultRecord:
    assert record.path is not None
    log.info(
        "evaluating %s again from its run file (measures or their code changed; not re-scored)",
        record.path,
    )
    run = read_run(record.path / RUN_FILE)
    ev = evaluate(split.qrels, run, split.relevance_level, measures)
    record.metrics = ev.aggregate
    record.run_config = {**record.run_config, "measures": list(measures)}
    record.provenance = {**record.provenance, "evaluation": dict(stamp)}
    return write_result(record, run, ev.per_query, record.path)


@dataclass
class ScoreJob:
    """Everything one scoring job needs, resolved when the plan is made. ``ranker``: the
    ranker to score with when nothing is trained; a fine-tuned one comes from the training job
    (the ``model`` input of :meth:`run`)."""

    ranker: Ranker
    split: RankingSplit
    out_dir: Path
    key: CacheKey
    code: dict[str, Any]
    record: ResultRecord
    measures: Sequence[str]
    stamp: dict[str, Any]
    batch_queries: int = 1
    warmup: int = 5
    progress: bool = True
    force: bool = False
    #: processes that have just written this entry (``--processes N``'s report reads it)
    written_by: int = 0

    @property
    def what(self) -> str:
        return f"{self.record.ranker} on {self.split.dataset}/{self.split.split}"

    def run(self, model: Callable[[], tuple[Ranker, Mapping[str, Any]]] | None) -> ResultRecord:
        """Reuse the entry (evaluating it again when its stamp is old), or score and write it.
        ``model``: the training job's result (the trained ranker and its summary), asked for
        only when the entry must be computed."""
        role = current_role()
        # only the main process takes the entry's lock and decides whether the entry is
        # reused; the decision is broadcast, so every rank then makes the same calls
        with entry_lock(self.out_dir, self.what) if role.main else nullcontext():
            cached = None if self.force or not role.main else reusable(self.out_dir)
            if from_main(cached is not None, role):
                if cached is None:  # another rank: the main process reuses the entry
                    return self.record
                if self.written_by:
                    log.info(
                        "reading %s, which the %d processes computed or reused above",
                        self.out_dir,
                        self.written_by,
                    )
                else:
                    log.info(
                        "reusing %s (same config, data and code; --force to recompute)",
                        self.out_dir,
                    )
                return cached
            if role.main:
                self._log_miss()
            ranker = self.ranker
            if model is not None:
                ranker, summary = model()
                self.record.training = dict(summary)
            return self.score_and_write(ranker)

    def _log_miss(self) -> None:
        """Say why the entry is computed (what changed since the closest entry)."""
        why = explain_miss(
            self.key,
            self.out_dir,
            RECORD,
            lambda data: data.get("provenance", {}).get("code"),
            self.code,
        )
        if why:
            log.info("computing %s anew: %s", self.out_dir.name, why)

    def score_and_write(self, ranker: Ranker) -> ResultRecord:
        """Index, warm up, score under the latency tracker, evaluate; fill in the record's
        metrics, latency and provenance and write the entry."""
        split, record = self.split, self.record
        device, threads = record.run_config["device"], record.run_config["threads"]
        role = current_role()
        log.info("indexing %s/%s for %s", split.dataset, split.split, ranker.name)
        ranker.index(split)  # the whole split on every rank: scores must not depend on shards
        trackers: list[LatencyTracker] = []

        def score_shard(lists: list[CandidateList]) -> list[np.ndarray]:
            scores, tracker = score_split(
                ranker,
                replace(split, lists=lists),
                batch_queries=self.batch_queries,
                warmup=min(self.warmup, len(lists)),
                progress=self.progress and role.main,
            )
            trackers.append(tracker)
            return scores

        merged = score_sharded(split.lists, [len(cl) for cl in split.lists], score_shard, role)
        shard_trackers = gather_to_main(trackers[0], role)
        if merged is None or shard_trackers is None:  # another rank: the main one writes
            return record
        scores, tracker = merged, pooled(shard_trackers, device)
        warmup = min(self.warmup, len(split.lists))
        result_run = build_run(split.lists, scores)
        ev = evaluate(split.qrels, result_run, split.relevance_level, self.measures)
        record.metrics = ev.aggregate
        record.latency = tracker.summary(
            batch_queries=self.batch_queries,
            warmup_queries=warmup,
            device=device,
            threads=threads,
            scope="ranker.score per call (tokenisation included)",
            mode=latency_parts(ranker).scoring_mode(),
            dtype=latency_parts(ranker).compute_dtype(),
        ).to_dict()
        record.provenance = {
            **provenance.collect(),
            "code": self.code,
            "evaluation": dict(self.stamp),
            "device": device_info(device),
            "ranker": ranker.describe(),
            # how many processes scored it (not in the key: any count gives the same run file)
            "processes": role.world,
            # texts cut and lists split over encoder rows (bench.reporting.reports.input_notes)
            "inputs": input_checks(ranker).input_report(split.lists),
        }
        for note in input_notes(record.provenance["inputs"]):
            log.info("%s on %s/%s: %s", ranker.name, split.dataset, split.split, note)
        record.created = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
        write_result(record, result_run, ev.per_query, self.out_dir)
        log.info("wrote %s", self.out_dir)
        return record


def pooled(trackers: Sequence[LatencyTracker], device: str) -> LatencyTracker:
    """One tracker holding every rank's calls, as if one process had made them in turn."""
    out = LatencyTracker(device)
    for tracker in trackers:
        out.call_s += tracker.call_s
        out.device_s += tracker.device_s
        out.queries += tracker.queries
        out.candidates += tracker.candidates
    return out


def reusable_now(out_dir: Path) -> bool:
    """Whether ``out_dir`` holds a whole finished record (what a plan shows before any work)."""
    return (out_dir / RECORD).is_file() and record_problem(out_dir) is None
