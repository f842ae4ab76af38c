"""Executing one ranker on one dataset split: the `bench run` pipeline.

dataset adapter -> candidate lists -> (train or load) -> index -> warm-up -> timed scoring ->
metrics -> result record. Expensive work is cached by a hash of everything it depends on: a
trained model under ``results/models/``, a finished result under ``results/runs/``. Rendering
tables is :mod:`bench.tables`' job; nothing here prints.
"""

from __future__ import annotations

import datetime as _dt
import json
import logging
import shutil
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from bench import provenance
from bench.data import load_split
from bench.data.model import CandidateList, RankingSplit
from bench.device import device_info, resolve_device, seed_everything, set_threads
from bench.latency import LatencyTracker
from bench.metrics import DEFAULT_MEASURES, build_run, evaluate
from bench.progress import progress_bar
from bench.results import (
    ResultRecord,
    atomic_write_json,
    config_hash,
    read_record,
    run_dir,
    write_result,
)
from bench.settings import results_root
from rankers import Ranker, RankerError, canonical_name, create_ranker

log = logging.getLogger(__name__)


@dataclass
class RunOptions:
    """Everything `bench run` takes; all of it that can change a result goes into the hash."""

    ranker: str
    dataset: str
    split: str | None = None
    options: dict[str, Any] = field(default_factory=dict)
    device: str = "auto"
    seed: int = 0
    threads: int | None = None
    batch_queries: int = 1
    warmup: int = 5
    subset: int | None = None
    fit: bool = False
    train_subset: int | None = None
    force: bool = False
    data_dir: str | Path | None = None
    results_dir: str | Path | None = None
    measures: Sequence[str] = DEFAULT_MEASURES
    progress: bool = True


def batches(lists: Sequence[CandidateList], size: int) -> Iterator[list[CandidateList]]:
    """Whole candidate lists, ``size`` queries at a time (a list is never split)."""
    if size < 1:
        raise ValueError(f"batch size must be >= 1, not {size}")
    for i in range(0, len(lists), size):
        yield list(lists[i : i + size])


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
        ranker.warmup(split.lists[:warmup])
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


def label_for(ranker: Ranker, fitted: bool, subset: int | None = None) -> str:
    """Row label: name, model alias, options that differ from the defaults, fine-tuning, subset.

    Two results share a label only when they share everything a reader would need to tell
    them apart, so tables can show one row per label.
    """
    config = ranker.config.to_dict()
    defaults = type(ranker.config)().to_dict()
    parts = [str(config["model"])] if config.get("model") else []
    parts += [f"{k}={v}" for k, v in config.items() if k != "model" and v != defaults.get(k)]
    if fitted:
        parts.append("fine-tuned")
    if subset:
        parts.append(f"first {subset} queries")
    return f"{ranker.name} ({', '.join(parts)})" if parts else ranker.name


CONFIG_DIR = Path(__file__).resolve().parent.parent / "rankers" / "configs"
#: ranker options that change speed or placement, never the trained weights
NON_TRAINING_FIELDS = frozenset(
    {
        "batch_size",
        "batch_queries",
        "checkpoint_steps",
        "precompute",
        "pretokenise",
        "pad_tolerance",
    }
)


def ranker_options(
    name: str, dataset: str, overrides: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """Settings for ``name`` on ``dataset``: config file ``default``, then its ``datasets.<name>``
    section, then ``overrides`` (the command line). Rankers without a file use their defaults."""
    path = CONFIG_DIR / f"{name}.yaml"
    options: dict[str, Any] = {}
    if path.exists():
        try:
            data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        except yaml.YAMLError as exc:
            raise RankerError(f"{path}: not valid YAML ({exc})") from exc
        unknown = set(data) - {"default", "datasets"}
        if unknown or not isinstance(data.get("default", {}), dict):
            raise RankerError(f"{path}: expected keys 'default' and 'datasets' (mappings)")
        options.update(data.get("default") or {})
        options.update((data.get("datasets") or {}).get(dataset) or {})
    options.update(overrides or {})
    return options


def _load_splits_for_fit(opts: RunOptions) -> tuple[RankingSplit, RankingSplit | None]:
    from bench.data import dataset_splits

    splits = dataset_splits(opts.dataset, opts.data_dir)
    if "train" not in splits:
        raise RankerError(f"dataset {opts.dataset!r} has no train split to fit on (has {splits})")
    train = load_split(opts.dataset, "train", opts.data_dir)
    if opts.train_subset:
        train = train.subset(opts.train_subset)
    dev = load_split(opts.dataset, "dev", opts.data_dir) if "dev" in splits else None
    return train, dev


def _resolve_teacher(ranker: Ranker, opts: RunOptions, root: Path) -> str | None:
    """A teacher named by ranker name is trained (or loaded) on the same data first; the student
    then distils from its saved folder. Returns the teacher's model key (None: no named teacher)."""
    teacher = getattr(ranker.config, "teacher", None)
    if not teacher or Path(str(teacher)).exists():
        return None
    teacher_name = canonical_name(str(teacher))
    if teacher_name == ranker.name:
        raise RankerError(f"{ranker.name}: a ranker cannot be its own teacher")
    options = ranker_options(teacher_name, opts.dataset)
    teacher_ranker = create_ranker(teacher_name, options, device=ranker.device)
    log.info("teacher for %s: %s trained on %s", ranker.name, teacher_name, opts.dataset)
    summary = fit_or_load(teacher_ranker, replace(opts, ranker=teacher_name, options=options), root)
    ranker.config.teacher = summary["model_dir"]  # type: ignore[attr-defined]
    return summary["key"]


def fit_or_load(ranker: Ranker, opts: RunOptions, root: Path) -> dict[str, Any]:
    """Train on the train split (dev selects), or load the model cached for this config.

    The cache key covers the ranker config, the train and dev data, the seed, the subset and the
    teacher's own key, so changing any of them trains anew. Training writes into ``<key>.tmp``
    (where a resumable trainer keeps its checkpoints) and renames it when done.
    """
    if not ranker.trainable:
        raise RankerError(f"ranker {ranker.name!r} is not trainable; drop --fit")
    train, dev = _load_splits_for_fit(opts)
    config = ranker.config.to_dict()
    teacher_key = _resolve_teacher(ranker, opts, root)
    key = config_hash(
        {
            "ranker": ranker.name,
            # settings that change speed, not weights, do not make a new model
            "config": {k: v for k, v in config.items() if k not in NON_TRAINING_FIELDS},
            "teacher": teacher_key,
            "train": train.checksum,
            "dev": dev.checksum if dev else None,
            "train_subset": opts.train_subset,
            "seed": opts.seed,
        }
    )
    model_dir = root / "models" / opts.dataset / ranker.name / key
    summary_file = model_dir / "training.json"
    if summary_file.exists() and not opts.force:
        log.info("loading trained %s from %s", ranker.name, model_dir)
        ranker.load(model_dir)
        return json.loads(summary_file.read_text())
    log.info(
        "training %s on %s/train (%d queries)%s",
        ranker.name,
        opts.dataset,
        len(train),
        f", selecting on dev ({len(dev)} queries)" if dev else "",
    )
    work = model_dir.with_name(model_dir.name + ".tmp")
    if opts.force:
        shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True, exist_ok=True)
    ranker.work_dir = work  # a resumable trainer keeps its checkpoints here
    summary = dict(ranker.fit(train, dev))
    summary.update(
        key=key,
        model_dir=str(model_dir),
        config=config,
        teacher_key=teacher_key,
        train=train.info(),
        dev=dev.info() if dev else None,
    )
    main, wait = _process_role()
    if main:
        ranker.save(work)
        atomic_write_json(work / "training.json", summary)
        # the resumable state (optimizer, RNG) is no longer needed once the model is saved
        shutil.rmtree(work / "checkpoint", ignore_errors=True)
        shutil.rmtree(model_dir, ignore_errors=True)
        work.rename(model_dir)
    wait()
    return summary


def _process_role() -> tuple[bool, Callable[[], None]]:
    """(is this the main process, barrier): under `accelerate launch` only the main one writes."""
    try:
        from accelerate import PartialState
    except ImportError:
        return True, lambda: None
    from rankers.training import wait_for_everyone

    state = PartialState()
    return state.is_main_process, lambda: wait_for_everyone(state)


def run(opts: RunOptions) -> ResultRecord:
    """Run (or reuse) one ranker on one dataset split and write its result record."""
    root = results_root(opts.results_dir)
    device = resolve_device(opts.device)
    seed_everything(opts.seed)
    threads = set_threads(opts.threads)
    name = canonical_name(opts.ranker)

    split = load_split(opts.dataset, opts.split, opts.data_dir)
    if opts.subset:
        split = split.subset(opts.subset)
    if not split.lists:
        raise RankerError(f"{split.dataset}/{split.split} has no candidate lists to rank")
    ranker = create_ranker(name, ranker_options(name, split.dataset, opts.options), device=device)
    untrained = ranker.untrained_weights()
    fit = opts.fit or untrained is not None
    if fit and not opts.fit:
        log.info(
            "%s: %s would be untrained, so it is trained first (or load trained weights with "
            "--model or --set checkpoint=DIR)",
            name,
            untrained,
        )
    label = label_for(ranker, fit, opts.subset)
    config = ranker.config.to_dict()
    training = fit_or_load(ranker, replace(opts, fit=True), root) if fit else None

    run_config = {
        "seed": opts.seed,
        "device": device,
        "threads": threads,
        "batch_queries": opts.batch_queries,
        "warmup": opts.warmup,
        "subset": opts.subset,
        "fit": fit,
        "train_subset": opts.train_subset if fit else None,
        "measures": list(opts.measures),
    }
    chash = config_hash(
        {
            "ranker": name,
            "config": config,
            "model": training["key"] if training else None,
            "run": run_config,
            "data": split.checksum,
            "split": split.split,
        }
    )
    out_dir = run_dir(root, split.dataset, name, split.split, chash)
    if (out_dir / "record.json").exists() and not opts.force:
        log.info("reusing %s (same config; --force to recompute)", out_dir)
        return read_record(out_dir)

    log.info("indexing %s/%s for %s", split.dataset, split.split, name)
    ranker.index(split)
    scores, tracker = score_split(
        ranker,
        split,
        batch_queries=opts.batch_queries,
        warmup=min(opts.warmup, len(split.lists)),
        progress=opts.progress,
    )
    result_run = build_run(split.lists, scores)
    ev = evaluate(split.qrels, result_run, split.relevance_level, opts.measures)
    latency = tracker.summary(
        batch_queries=opts.batch_queries,
        warmup_queries=min(opts.warmup, len(split.lists)),
        device=device,
        threads=threads,
        scope="ranker.score per call (tokenisation included)",
    ).to_dict()
    record = ResultRecord(
        ranker=name,
        dataset=split.dataset,
        split=split.split,
        family=ranker.family,
        label=label,
        metrics=ev.aggregate,
        latency=latency,
        config=config,
        run_config=run_config,
        config_hash=chash,
        data=split.info(),
        provenance={
            **provenance.collect(),
            "device": device_info(device),
            "ranker": ranker.describe(),
        },
        training=training,
        created=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
    )
    write_result(record, result_run, ev.per_query, out_dir)
    log.info("wrote %s", out_dir)
    return record
