"""The training job: train one ranker on a train split (dev selects the epoch) into the model
cache, or load the model cached for the same key; and the comparison of the kept epoch with the
rankers that need no training (their dev runs are the job's inputs, scored by their own jobs).

The job's values (config with teachers resolved to their folders, splits, key) are fixed when the
plan is made (:mod:`bench.execution.runner`); the executor (:mod:`bench.execution.plan`) calls
:meth:`TrainJob.run`. Its import closure is part of every training key
(:mod:`bench.execution.keys`).
"""

from __future__ import annotations

import contextlib
import json
import logging
import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.core.io import atomic_write_json, storage_errors
from bench.core.trained import SELECTION_MEASURE, TrainingSummary
from bench.data.model import RankingSplit
from bench.execution.policy import DEV_BASELINE_ALPHA
from bench.results.cache import (
    MANIFEST,
    CacheKey,
    entry_lock,
    explain_miss,
    manifest_problem,
    move_aside,
    state_problem,
    write_manifest,
)
from bench.results.records import ResultRecord
from rankers import Ranker, RankerError
from rankers.hooks import fits

log = logging.getLogger(__name__)

#: the training summary of a trained-model folder
TRAINING_FILE = "training.json"


@dataclass
class TrainJob:
    """Everything one training job needs, resolved when the plan is made. ``ranker`` holds the
    config with named teachers already replaced by their model folders (a new value; the config
    as asked, ``config``, is what the key and the summary record)."""

    ranker: Ranker
    dataset: str
    train: RankingSplit
    dev: RankingSplit | None
    model_dir: Path
    key: CacheKey
    code: dict[str, Any]
    config: dict[str, Any]
    teacher_key: str | None = None
    force: bool = False

    def run(
        self, baselines: Callable[[], Mapping[str, ResultRecord | None]]
    ) -> tuple[Ranker, dict[str, Any]]:
        """Load the model cached for this key into :attr:`ranker`, or train it; returns the
        ranker and its training summary. The entry is locked while it is checked and trained,
        so a second identical training waits and then loads. Training writes into
        ``<key>.tmp`` (where a resumable trainer keeps its checkpoints, checked before it is
        resumed) and renames it when done, with a manifest of checksums; a folder that fails
        it, or fails to load, is moved aside and retrained."""
        ranker = self.ranker
        main, wait = _process_role()
        what = f"{ranker.name} trained on {self.dataset}"
        with entry_lock(self.model_dir, what) if main else contextlib.nullcontext():
            wait()  # the other processes go on once the main one holds the lock
            if not self.force:
                summary = _load_trained(ranker, self.model_dir, main, wait)
                if summary is not None:
                    return ranker, summary
                why = explain_miss(
                    self.key, self.model_dir, TRAINING_FILE, lambda d: d.get("code"), self.code
                )
                if why and main:
                    log.info("training %s anew: %s", ranker.name, why)
            return ranker, _train(self, baselines)


def model_cached(model_dir: Path) -> bool:
    """Whether ``model_dir`` looks like a finished model entry (its files are checked when it
    is loaded): what a plan shows before any work."""
    return (model_dir / MANIFEST).is_file() and (model_dir / TRAINING_FILE).is_file()


def _load_errors() -> tuple[type[BaseException], ...]:
    """What loading a damaged model folder raises, beyond what the manifest catches first."""
    import pickle
    import zipfile

    errors: tuple[type[BaseException], ...] = (
        OSError,
        ValueError,
        EOFError,
        RankerError,
        pickle.UnpicklingError,
        zipfile.BadZipFile,
    )
    try:
        from safetensors import SafetensorError
    except ImportError:  # pragma: no cover - a transformers dependency
        return errors
    return (*errors, SafetensorError)


def _load_trained(
    ranker: Ranker, model_dir: Path, main: bool, wait: Callable[[], None]
) -> dict[str, Any] | None:
    """The summary of the trained model in ``model_dir``, loaded into ``ranker``; None when there
    is none. A folder whose files fail the manifest or that cannot be loaded is moved aside."""
    if not model_dir.exists():
        return None
    problem = manifest_problem(model_dir)
    if problem is None:
        try:
            summary = json.loads((model_dir / TRAINING_FILE).read_text(encoding="utf-8"))
            log.info("loading trained %s from %s", ranker.name, model_dir)
            ranker.load(model_dir)
            return dict(summary)
        except _load_errors() as exc:
            problem = f"it cannot be loaded ({type(exc).__name__}: {exc})"
    wait()  # every process has looked at the folder before it moves
    if main:
        move_aside(model_dir, problem)
    wait()
    return None


def _train(
    job: TrainJob, baselines: Callable[[], Mapping[str, ResultRecord | None]]
) -> dict[str, Any]:
    """Fit into ``<model_dir>.tmp`` (resuming a sound checkpoint there), save with a manifest,
    then rename into place. ``baselines``: the dev runs of the rankers that need no training,
    asked for once the kept epoch is known."""
    ranker, train, dev, model_dir, key = job.ranker, job.train, job.dev, job.model_dir, job.key
    from rankers.fit.resume import CHECKPOINT_DIR

    log.info(
        "training %s on %s/train (%d queries)%s",
        ranker.name,
        job.dataset,
        len(train),
        f", selecting on {dev.split} ({len(dev)} queries)" if dev else ", no dev split",
    )
    main, wait = _process_role()
    work = model_dir.with_name(model_dir.name + ".tmp")
    if main:
        if job.force:
            shutil.rmtree(work, ignore_errors=True)
        state = work / CHECKPOINT_DIR
        problem = _resumable_state_problem(state)
        if problem:
            move_aside(state, f"{problem}; training starts from scratch", stem=work)
        with storage_errors(work):
            work.mkdir(parents=True, exist_ok=True)
    wait()
    ranker.work_dir = work  # a resumable trainer keeps its checkpoints here
    fitted = TrainingSummary.of(fits(ranker).fit(train, dev))
    summary = fitted.to_json()
    # every process takes part (the baselines' runs and the dev scores are sharded); main keeps it
    verdict = dev_baselines(ranker, fitted, job.dataset, dev, baselines)
    if main:
        summary["dev_baselines"] = verdict
    summary.update(
        key=key.digest,
        key_parts=key.parts,
        code=job.code,
        model_dir=str(model_dir),
        config=job.config,
        teacher_key=job.teacher_key,
        train=train.info(),
        dev=dev.info() if dev else None,
    )
    if "checkpoint" in summary:
        # the resumable state is deleted once the model is saved; do not point at it
        summary["checkpoint"] = None
    if main:
        with storage_errors(work):
            ranker.save(work)
            atomic_write_json(work / TRAINING_FILE, summary)
            # the resumable state (optimizer, RNG) is no longer needed once the model is saved
            shutil.rmtree(work / CHECKPOINT_DIR, ignore_errors=True)
            write_manifest(work)
            shutil.rmtree(model_dir, ignore_errors=True)
            work.rename(model_dir)
    wait()
    return summary


def dev_baselines(
    ranker: Ranker,
    summary: TrainingSummary,
    dataset: str,
    dev: RankingSplit | None,
    baselines: Callable[[], Mapping[str, ResultRecord | None]],
) -> dict[str, Any] | None:
    """The kept epoch's dev AP@10 against the rankers that need no training, on the same dev
    split (``baselines``: their dev runs, scored by their own jobs), judged by
    :func:`baseline_verdict`; its warnings go to the log. None without a dev split or dev score.

    ``ranker`` holds the kept epoch's weights; it scores dev once more for the per-query values.
    Called on every process of a multi-process command (the baselines' runs and that scoring
    are sharded); the main one gets the verdict, the others None.
    """
    from bench.core.shard import current_role, from_main
    from rankers.fit.loop import sharded_dev_per_query

    kept = summary.kept_dev_score()
    if dev is None or kept is None:
        return None
    main = current_role().main
    found: dict[str, tuple[float, dict[str, float]]] = {}
    for baseline, record in baselines().items():
        if record is None or not main:  # another rank holds no metrics, only main decides
            continue
        per_query = {q: v[SELECTION_MEASURE] for q, v in record.per_query().items()}
        found[baseline] = (record.metrics[SELECTION_MEASURE], per_query)
    if not from_main(bool(found)):
        return baseline_verdict(kept, {}, {}) if main else None
    own = sharded_dev_per_query(ranker, dev)
    if own is None:
        return None
    verdict = baseline_verdict(kept, own, found)
    scores_of, p_of = verdict["scores"], verdict["p_values"]
    parts = []
    if verdict["below"]:
        parts.append("below " + ", ".join(f"{b} ({scores_of[b]:.4f})" for b in verdict["below"]))
    if verdict["not_significantly_above"]:
        parts.append(
            "above "
            + ", ".join(
                f"{b} ({scores_of[b]:.4f}, p={p_of[b]:.2f})"
                for b in verdict["not_significantly_above"]
            )
            + f" but not significantly on {len(own)} dev queries (paired t-test, p >= "
            f"{DEV_BASELINE_ALPHA:.2f}), so on test it may score below them"
        )
    if parts:
        log.warning(
            "%s trained on %s: the kept epoch %d scores dev %s %.4f, %s; those rankers need no "
            "training here; %s",
            ranker.name,
            dataset,
            summary.best_epoch,
            SELECTION_MEASURE,
            kept,
            "; ".join(parts),
            training_advice(summary, getattr(ranker.config, "patience", 0)),
        )
    return verdict


def training_advice(summary: TrainingSummary, patience: int) -> str:
    """What may help a trained model that did not beat the rankers needing no training, from
    how its training ended: when ``patience`` stopped it, more steps (``min_steps``) change
    nothing, so the advice names patience and the step it stopped at."""
    if summary.stopped_early and patience:
        epochs = "epoch" if patience == 1 else "epochs"
        planned = "?" if summary.steps_planned is None else summary.steps_planned
        return (
            f"patience stopped training at step {summary.steps} of "
            f"{planned} (no better dev {SELECTION_MEASURE} for "
            f"{patience} {epochs} after epoch {summary.best_epoch}), so more steps "
            "(min_steps) would change nothing; more train queries, a larger patience (--set "
            "patience=N) or another learning rate may help"
        )
    return "more train queries, more steps (--set min_steps=N) or another learning rate may help"


def baseline_verdict(
    kept: float,
    own: Mapping[str, float],
    baselines: Mapping[str, tuple[float, Mapping[str, float]]],
    alpha: float = DEV_BASELINE_ALPHA,
) -> dict[str, Any]:
    """Where a trained model's kept dev score stands against rankers that need no training.

    ``own`` and each baseline's second element are per-query values of the selection measure;
    ``kept`` and each baseline's first element the aggregates. A baseline is ``below`` (the model
    scores less than it) or ``not_significantly_above`` (the model leads, but the paired t-test
    over the shared queries gives p >= ``alpha``: with a small train set a dev lead of a point
    or two often turns into a loss on test). The dict is what the record keeps.
    """
    from bench.results.significance import paired_ttest

    values = {b: float(v) for b, (v, _) in baselines.items()}
    p_values: dict[str, float] = {}
    for b, (_, theirs) in baselines.items():
        shared = sorted(set(own) & set(theirs))
        p_values[b] = (
            paired_ttest([theirs[q] for q in shared], [own[q] for q in shared]) if shared else 1.0
        )
    return {
        "measure": SELECTION_MEASURE,
        "kept": kept,
        "scores": values,
        "p_values": p_values,
        "alpha": alpha,
        "below": [b for b, v in values.items() if kept < v],
        "not_significantly_above": [
            b for b, v in values.items() if kept >= v and p_values[b] >= alpha
        ],
    }


def _resumable_state_problem(folder: Path) -> str | None:
    """What is wrong with the published state of a resumable checkpoint folder (None: nothing
    to resume, or it is sound). A missing or unreadable ``latest.json`` is the trainer's to
    report; here the state's files are checked, so a truncated one is not loaded."""
    from rankers.fit.resume import LATEST_FILE

    try:
        meta = json.loads((folder / LATEST_FILE).read_text(encoding="utf-8"))
        state = folder / str(meta["state"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return state_problem(state) if state.is_dir() else None


def _process_role() -> tuple[bool, Callable[[], None]]:
    """(is this the main process, barrier): in a multi-process command (a launcher or
    ``--processes``) only the main one writes. Read from the process group
    (:func:`bench.core.shard.current_role`), not from Accelerate's state: that is made later, by the
    trainer, with the options (``cpu=True``) that let it see the processes at all."""
    from bench.core.shard import current_role

    role = current_role()
    if role.world == 1:
        return True, lambda: None
    import torch.distributed as dist

    return role.main, dist.barrier
