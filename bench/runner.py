"""Executing one ranker on one dataset split: the `bench run` pipeline.

dataset adapter -> candidate lists -> (train or load) -> index -> warm-up -> timed scoring ->
metrics -> result record. Expensive work is cached by a hash of everything it depends on: a
trained model under ``results/models/``, a finished result under ``results/runs/``. What the
caches promise (keys that cover config, data and code; entries verified before reuse; one writer
per key) is :mod:`bench.cache`'s. Rendering tables is :mod:`bench.tables`' job; nothing here
prints.
"""

from __future__ import annotations

import contextlib
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
from bench.cache import (
    CacheKey,
    entry_lock,
    explain_miss,
    manifest_problem,
    move_aside,
    state_problem,
    write_manifest,
)
from bench.context import RunContext
from bench.data import dev_split_name, load_split
from bench.data.files import read_text
from bench.data.model import CandidateList, RankingSplit
from bench.device import device_info
from bench.latency.tracker import LatencyTracker
from bench.metrics import DEFAULT_MEASURES, build_run, evaluate
from bench.policy import DEV_BASELINE_ALPHA, DEV_BASELINES
from bench.progress import progress_bar
from bench.results import (
    RECORD,
    ResultRecord,
    atomic_write_json,
    ensure_writable,
    read_record,
    record_problem,
    run_dir,
    storage_errors,
    write_result,
)
from bench.trained import SELECTION_MEASURE, TrainingSummary
from rankers import (
    Ranker,
    RankerError,
    Role,
    canonical_name,
    config_file,
    create_ranker,
    get_ranker_class,
)
from rankers.targets import ENSEMBLE_SEPARATOR, teacher_parts

log = logging.getLogger(__name__)

#: the training summary of a trained-model folder
TRAINING_FILE = "training.json"
#: smallest value of each count option (None, where allowed, means "not set")
MINIMUMS = {
    "subset": 1,
    "train_subset": 1,
    "warmup": 0,
    "batch_queries": 1,
    "threads": 1,
    "seed": 0,
}


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

    def __post_init__(self) -> None:
        """Out-of-range counts fail here, before any data is read or any model trained (0 would
        otherwise read as "not set": ``--train-subset 0`` trained on the whole split)."""
        for name, low in MINIMUMS.items():
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or value < low):
                raise ValueError(f"--{name.replace('_', '-')} must be >= {low}, got {value}")

    def context(self) -> RunContext:
        """The run context of these options, resolved once: the device, torch's threads (set
        now), the seed and the data and results roots."""
        return RunContext.of(self)


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


def label_for(
    ranker: Ranker,
    fitted: bool,
    subset: int | None = None,
    train_subset: int | None = None,
    *,
    dataset: str | None = None,
) -> str:
    """Row label: name, model alias, options that differ from the ranker's settings for
    ``dataset`` (:func:`settings_config`; the class defaults without a dataset), fine-tuning,
    subsets.

    A default `bench run -r RANKER -d DATASET` therefore names no option, however many its
    settings file sets, and a tuned variant names exactly what was changed (what the record's
    ``overrides`` hold). Two results share a label only when they share everything a reader
    would need to tell them apart, so tables can show one row per label. A folder given as an
    option (a teacher or checkpoint) is shown by its last path component, so labels carry no
    machine's paths.
    """
    config = ranker.config.to_dict()
    defaults = (
        settings_config(ranker.name, dataset)
        if dataset is not None
        else type(ranker.config)().to_dict()
    )
    parts = [str(_label_value(config["model"]))] if config.get("model") else []
    parts += [
        f"{k}={_label_value(v)}" for k, v in config.items() if k != "model" and v != defaults.get(k)
    ]
    if fitted:
        parts.append("fine-tuned")
    if train_subset:
        parts.append(f"trained on the first {train_subset} queries")
    if subset:
        parts.append(f"first {subset} queries")
    return f"{ranker.name} ({', '.join(parts)})" if parts else ranker.name


CONFIG_DIR = Path(__file__).resolve().parent.parent / "rankers" / "configs"


def settings_file(name: str) -> Path:
    """The settings file of ranker ``name`` (it need not exist): the one the ranker was
    registered with, else ``CONFIG_DIR/<name>.yaml``."""
    return config_file(name) or CONFIG_DIR / f"{name}.yaml"


def ranker_options(
    name: str, dataset: str, overrides: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """Settings for ``name`` on ``dataset``: config file ``default``, then its ``datasets.<name>``
    section, then ``overrides`` (the command line). Rankers without a file use their defaults.
    The file is ``CONFIG_DIR/<name>.yaml``, or the one the ranker was registered with
    (:func:`rankers.register`), so that a ranker kept outside this repository brings its own."""
    path = settings_file(name)
    options: dict[str, Any] = {}
    if path.exists():
        try:
            data = yaml.safe_load(read_text(path)) or {}
        except yaml.YAMLError as exc:
            raise RankerError(f"{path}: not valid YAML ({exc})") from exc
        unknown = set(data) - {"default", "datasets"}
        if unknown or not isinstance(data.get("default", {}), dict):
            raise RankerError(f"{path}: expected keys 'default' and 'datasets' (mappings)")
        options.update(data.get("default") or {})
        options.update((data.get("datasets") or {}).get(dataset) or {})
    options.update(overrides or {})
    return options


def settings_config(name: str, dataset: str) -> dict[str, Any]:
    """The full config a plain ``bench run -r NAME -d DATASET`` uses: the settings file's
    ``default`` and ``datasets.DATASET`` sections over the class defaults. Labels and
    ``overrides`` name what a run changes from it."""
    return get_ranker_class(name).Config.from_options(ranker_options(name, dataset)).to_dict()


def _load_splits_for_fit(opts: RunOptions) -> tuple[RankingSplit, RankingSplit | None]:
    """The train split and the development split (``dev``, ``validation`` or ``val``) that
    selects the epoch; a dataset without one gets a warning, not a silent omission."""
    from bench.data import DEV_SPLITS, dataset_splits

    splits = dataset_splits(opts.dataset, opts.data_dir)
    if "train" not in splits:
        raise RankerError(f"dataset {opts.dataset!r} has no train split to fit on (has {splits})")
    train = load_split(opts.dataset, "train", opts.data_dir)
    if opts.train_subset:
        train = train.subset(opts.train_subset)
    dev_name = dev_split_name(splits)
    if dev_name is None:
        log.warning(
            "%s has no development split (none of %s among %s): no epoch is selected on dev, "
            "training keeps its last epoch",
            opts.dataset,
            "/".join(DEV_SPLITS),
            ", ".join(splits),
        )
        return train, None
    return train, load_split(opts.dataset, dev_name, opts.data_dir)


def _label_value(value: Any) -> Any:
    """``value`` for a label: each folder of a (``+``-joined) path value by its last component."""
    if not isinstance(value, str) or not _looks_like_path(value):
        return value
    return ENSEMBLE_SEPARATOR.join(
        Path(p).name if _looks_like_path(p) else p for p in teacher_parts(value)
    )


def _looks_like_path(value: str) -> bool:
    return "/" in value or "\\" in value or value.startswith((".", "~"))


def _resolve_teacher(ranker: Ranker, opts: RunOptions, root: Path) -> str | None:
    """A teacher named by ranker name is trained (or loaded) on the same data first; the student
    then distils from its saved folder. An ensemble (``monobert+colbert``) resolves each member.
    Returns the teachers' model keys joined by ``+`` (None: no named teacher).

    Every member is checked (:func:`check_teacher`) before the first is trained, so a bad second
    member fails at once, not after the first member's training."""
    teacher = getattr(ranker.config, "teacher", None)
    if not teacher:
        return None
    folders, keys = [], []
    for part, teacher_name in check_teacher(ranker.name, str(teacher), opts.dataset):
        folder, key = _resolve_member(ranker, part, teacher_name, opts, root)
        folders.append(folder)
        if key:
            keys.append(key)
    ranker.config.teacher = ENSEMBLE_SEPARATOR.join(folders)
    return ENSEMBLE_SEPARATOR.join(keys) if keys else None


def check_teacher(student: str, teacher: str, dataset: str) -> list[tuple[str, str | None]]:
    """Each member of ``teacher`` (``+``-joined) with the ranker to train for it (None: an
    existing folder), all checked before any training.

    A member is a trainable ranker's name or an existing folder; anything else is a RankerError
    saying which of the two it is not. A ranker may name its own kind as teacher (monoBERT
    distilled from monoBERT, for the same supervision as a student's): the teacher is then
    trained with the settings file's options, so it must not name itself again."""
    how = (
        "a teacher is the name of a trainable ranker such as monobert, a folder saved by "
        "`bench train`, or several of these joined by '+'"
    )
    if Path(teacher).exists():
        return [(teacher, None)]
    members: list[tuple[str, str | None]] = []
    for part in teacher_parts(teacher):
        if Path(part).exists():
            members.append((part, None))
            continue
        if _looks_like_path(part):
            raise RankerError(f"{student}: teacher folder {part} does not exist ({how})")
        try:
            teacher_name = canonical_name(part)
        except RankerError as exc:
            raise RankerError(
                f"{student}: teacher {part!r} is neither a ranker nor an existing folder "
                f"({how}); {exc}"
            ) from None
        if not get_ranker_class(teacher_name).trainable:
            raise RankerError(
                f"{student}: teacher {teacher_name!r} is not a trainable ranker, so there is no "
                f"trained model to distil from ({how})"
            )
        own = ranker_options(teacher_name, dataset).get("teacher")
        if own and teacher_name in (
            canonical_name(p) for p in teacher_parts(str(own)) if not _looks_like_path(p)
        ):
            raise RankerError(
                f"{student}: teacher {teacher_name} would be trained with teacher={own} from its "
                "settings file, which names itself: no ranker can be its own teacher"
            )
        members.append((part, teacher_name))
    return members


def _resolve_member(
    ranker: Ranker, teacher: str, teacher_name: str | None, opts: RunOptions, root: Path
) -> tuple[str, str]:
    """One checked teacher: an existing folder as it is (no key), or ranker ``teacher_name``
    trained on the data (or loaded from the cache) with its settings file's options."""
    if teacher_name is None:
        return teacher, ""
    options = ranker_options(teacher_name, opts.dataset)
    teacher_ranker = create_ranker(teacher_name, options, device=ranker.device)
    log.info("teacher for %s: %s trained on %s", ranker.name, teacher_name, opts.dataset)
    summary = fit_or_load(teacher_ranker, replace(opts, ranker=teacher_name, options=options), root)
    return str(summary["model_dir"]), str(summary["key"])


def fit_or_load(ranker: Ranker, opts: RunOptions, root: Path) -> dict[str, Any]:
    """Train on the train split (dev selects), or load the model cached for this config.

    The cache key covers the ranker config, the train and dev data (with relevance level and
    card), the seed, the subset, the teacher's own key and the code, so changing any of them
    trains anew. The entry is locked while it is checked and trained, so a second identical
    training waits and then loads. Training writes into ``<key>.tmp`` (where a resumable trainer
    keeps its checkpoints, checked before it is resumed) and renames it when done, with a
    manifest of checksums; a folder that fails it, or fails to load, is moved aside and retrained.
    """
    if not ranker.trainable:
        raise RankerError(f"ranker {ranker.name!r} is not trainable; drop --fit")
    ensure_writable(root / "models", "models")
    # what training runs itself (teachers, the dev baselines) writes under the same root
    opts = replace(opts, results_dir=root)
    train, dev = _load_splits_for_fit(opts)
    config = ranker.config.to_dict()
    # the training options as asked, before the teacher is resolved to its folder below;
    # options that change only speed or placement make no new model
    training_config = ranker.config.to_dict(Role.TRAINING)
    teacher_key = _resolve_teacher(ranker, opts, root)
    key = CacheKey.of(
        config={
            "ranker": ranker.name,
            "config": training_config,
            "train_subset": opts.train_subset,
            "seed": opts.seed,
        },
        data={"train": train.fingerprint(), "dev": dev.fingerprint() if dev else None},
        teacher=teacher_key,
        code=provenance.code_fingerprint(),
    )
    model_dir = root / "models" / opts.dataset / ranker.name / key.digest
    main, wait = _process_role()
    what = f"{ranker.name} trained on {opts.dataset}"
    with entry_lock(model_dir, what) if main else contextlib.nullcontext():
        wait()  # the other processes go on once the main one holds the lock
        if not opts.force:
            summary = _load_trained(ranker, model_dir, main, wait)
            if summary is not None:
                return summary
            why = explain_miss(key, model_dir, TRAINING_FILE, lambda data: data.get("code"))
            if why and main:
                log.info("training %s anew: %s", ranker.name, why)
        return _train(ranker, opts, train, dev, model_dir, key, teacher_key, config)


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
            return summary
        except _load_errors() as exc:
            problem = f"it cannot be loaded ({type(exc).__name__}: {exc})"
    wait()  # every process has looked at the folder before it moves
    if main:
        move_aside(model_dir, problem)
    wait()
    return None


def _train(
    ranker: Ranker,
    opts: RunOptions,
    train: RankingSplit,
    dev: RankingSplit | None,
    model_dir: Path,
    key: CacheKey,
    teacher_key: str | None,
    config: dict[str, Any],
) -> dict[str, Any]:
    """Fit into ``<model_dir>.tmp`` (resuming a sound checkpoint there), save with a manifest,
    then rename into place."""
    from rankers.resume import CHECKPOINT_DIR

    log.info(
        "training %s on %s/train (%d queries)%s",
        ranker.name,
        opts.dataset,
        len(train),
        f", selecting on {dev.split} ({len(dev)} queries)" if dev else ", no dev split",
    )
    main, wait = _process_role()
    work = model_dir.with_name(model_dir.name + ".tmp")
    if main:
        if opts.force:
            shutil.rmtree(work, ignore_errors=True)
        state = work / CHECKPOINT_DIR
        problem = _resumable_state_problem(state)
        if problem:
            move_aside(state, f"{problem}; training starts from scratch", stem=work)
        with storage_errors(work):
            work.mkdir(parents=True, exist_ok=True)
    wait()
    ranker.work_dir = work  # a resumable trainer keeps its checkpoints here
    fitted = TrainingSummary.of(ranker.fit(train, dev))
    summary = fitted.to_json()
    if main:
        summary["dev_baselines"] = dev_baselines(ranker, fitted, opts, dev)
    summary.update(
        key=key.digest,
        key_parts=key.parts,
        code=provenance.code_fingerprint(),
        model_dir=str(model_dir),
        config=config,
        teacher_key=teacher_key,
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
    ranker: Ranker, summary: TrainingSummary, opts: RunOptions, dev: RankingSplit | None
) -> dict[str, Any] | None:
    """The kept epoch's dev AP@10 against :data:`DEV_BASELINES` on the same dev split (their
    runs are cached like any other), judged by :func:`baseline_verdict`; its warnings go to the
    log. None without a dev split or dev score.

    ``ranker`` holds the kept epoch's weights; it scores dev once more for the per-query values.
    """
    from rankers.training import dev_per_query

    kept = summary.kept_dev_score()
    if dev is None or kept is None:
        return None
    baselines: dict[str, tuple[float, dict[str, float]]] = {}
    for baseline in DEV_BASELINES:
        if baseline == ranker.name:
            continue
        try:
            record = run(
                replace(
                    opts,
                    ranker=baseline,
                    split=dev.split,
                    options={},
                    subset=None,
                    fit=False,
                    train_subset=None,
                    force=False,
                    progress=False,
                    measures=DEFAULT_MEASURES,
                )
            )
        except (RankerError, OSError, ValueError) as exc:
            log.warning("%s: no %s baseline on %s (%s)", ranker.name, baseline, dev.split, exc)
            continue
        per_query = {q: v[SELECTION_MEASURE] for q, v in record.per_query().items()}
        baselines[baseline] = (record.metrics[SELECTION_MEASURE], per_query)
    if not baselines:
        return baseline_verdict(kept, {}, {})
    own = dev_per_query(ranker, dev) or {}
    verdict = baseline_verdict(kept, own, baselines)
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
            opts.dataset,
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
    from bench.significance import paired_ttest

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
    from rankers.resume import LATEST_FILE

    try:
        meta = json.loads((folder / LATEST_FILE).read_text(encoding="utf-8"))
        state = folder / str(meta["state"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return state_problem(state) if state.is_dir() else None


def _process_role() -> tuple[bool, Callable[[], None]]:
    """(is this the main process, barrier): under `accelerate launch` only the main one writes."""
    try:
        from accelerate import PartialState
    except ImportError:
        return True, lambda: None
    from rankers.resume import wait_for_everyone

    state = PartialState()
    return state.is_main_process, lambda: wait_for_everyone(state)


def _overrides(
    name: str, config: Mapping[str, Any], opts: RunOptions, fit: bool, needs_training: bool
) -> dict[str, Any]:
    """What makes this run differ from a plain ``bench run -r NAME -d DATASET``: options that
    differ from the config file's settings for the dataset, a subset, a train subset, an
    explicit ``--fit`` and a non-default seed. ``bench check`` matches an expectation only to
    records whose overrides it names, so smoke runs never stand in for full runs."""
    default_config = settings_config(name, opts.dataset)
    out = {k: v for k, v in config.items() if default_config.get(k) != v}
    run_level = {
        "subset": opts.subset,
        "train_subset": opts.train_subset if fit else None,
        "fit": True if opts.fit and not needs_training else None,
        "seed": opts.seed or None,
    }
    out.update({k: v for k, v in run_level.items() if v is not None})
    return out


def _reusable(out_dir: Path) -> ResultRecord | None:
    """The finished record in ``out_dir`` if its files are whole; a damaged entry is moved
    aside (with a warning) so it is recomputed. An unfinished one (no record) is overwritten."""
    if not (out_dir / RECORD).exists():
        return None
    problem = record_problem(out_dir)
    if problem is None:
        return read_record(out_dir)
    move_aside(out_dir, problem)
    return None


def run(opts: RunOptions, ctx: RunContext | None = None) -> ResultRecord:
    """Run (or reuse) one ranker on one dataset split and write its result record.

    ``ctx``: the command's run context (:meth:`RunOptions.context` when not given)."""
    ctx = ctx or opts.context()
    root, device, threads = ctx.results_root, ctx.device, ctx.threads
    ensure_writable(root / "runs")
    ctx.seed_everything()
    name = canonical_name(opts.ranker)
    # the ranker's options are checked before any data is read
    ranker = create_ranker(name, ranker_options(name, opts.dataset, opts.options), device=device)
    untrained = ranker.untrained_weights()
    if untrained is not None and not ranker.trainable:
        raise RankerError(
            f"{name} would score with {untrained}, and the harness cannot train it: give a "
            "trained model with --model or --set checkpoint=DIR"
        )
    fit = opts.fit or untrained is not None
    if fit:
        ensure_writable(root / "models", "models")

    split = load_split(opts.dataset, opts.split, ctx.data_root)
    if opts.subset:
        split = split.subset(opts.subset)
    if not split.lists:
        raise RankerError(
            f"{split.dataset}/{split.split} has no candidate lists to rank: {split.empty_reason()}"
        )
    if fit and not opts.fit:
        log.info(
            "%s: %s would be untrained, so it is trained first (or load trained weights with "
            "--model or --set checkpoint=DIR)",
            name,
            untrained,
        )
    label = label_for(ranker, fit, opts.subset, opts.train_subset, dataset=opts.dataset)
    config = ranker.config.to_dict()
    overrides = _overrides(name, config, opts, fit, untrained is not None)
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
    key = CacheKey.of(
        config={"ranker": name, "config": config, "run": run_config, "split": split.split},
        data=split.fingerprint(),
        model=training["key"] if training else None,
        code=provenance.code_fingerprint(),
    )
    out_dir = run_dir(root, split.dataset, name, split.split, key.digest)
    with entry_lock(out_dir, f"{name} on {split.dataset}/{split.split}"):
        cached = None if opts.force else _reusable(out_dir)
        if cached is not None:
            log.info("reusing %s (same config, data and code; --force to recompute)", out_dir)
            return cached
        why = explain_miss(
            key, out_dir, RECORD, lambda data: data.get("provenance", {}).get("code")
        )
        if why:
            log.info("computing %s anew: %s", out_dir.name, why)
        record = ResultRecord(
            ranker=name,
            dataset=split.dataset,
            split=split.split,
            family=ranker.family,
            label=label,
            metrics={},
            latency={},
            config=config,
            run_config=run_config,
            config_hash=key.digest,
            data=split.info(),
            provenance={},
            training=training,
            key_parts=key.parts,
            overrides=overrides,
        )
        return _score_and_write(ranker, split, opts, record, out_dir)


def train(opts: RunOptions, ctx: RunContext | None = None) -> dict[str, Any]:
    """Train one ranker on ``opts.dataset``'s train split (dev selects the epoch), or load the
    model cached for the same settings; returns the training summary. Settings are resolved as
    for :func:`run`: the ranker's config file, then ``opts.options``.

    ``ctx``: the command's run context (:meth:`RunOptions.context` when not given)."""
    ctx = ctx or opts.context()
    ctx.seed_everything()
    name = canonical_name(opts.ranker)
    ranker = create_ranker(
        name, ranker_options(name, opts.dataset, opts.options), device=ctx.device
    )
    if not ranker.trainable:
        raise RankerError(
            f"ranker {ranker.name!r} is not trainable, so `bench train` has nothing to do "
            "(`bench rankers` shows which are)"
        )
    return fit_or_load(ranker, replace(opts, fit=True), ctx.results_root)


def _score_and_write(
    ranker: Ranker, split: RankingSplit, opts: RunOptions, record: ResultRecord, out_dir: Path
) -> ResultRecord:
    """Index, warm up, score under the latency tracker, evaluate; fill in ``record``'s metrics,
    latency and provenance and write the entry."""
    device, threads = record.run_config["device"], record.run_config["threads"]
    log.info("indexing %s/%s for %s", split.dataset, split.split, ranker.name)
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
    record.metrics = ev.aggregate
    record.latency = tracker.summary(
        batch_queries=opts.batch_queries,
        warmup_queries=min(opts.warmup, len(split.lists)),
        device=device,
        threads=threads,
        scope="ranker.score per call (tokenisation included)",
        mode=ranker.scoring_mode(),
        dtype=ranker.compute_dtype(),
    ).to_dict()
    record.provenance = {
        **provenance.collect(),
        "device": device_info(device),
        "ranker": ranker.describe(),
    }
    record.created = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    write_result(record, result_run, ev.per_query, out_dir)
    log.info("wrote %s", out_dir)
    return record
