"""A command as a plan of jobs: `bench run` and `bench train` (and, run by run, the main job,
ablations and sweeps).

:func:`plan_run` and :func:`plan_training` resolve everything first - settings (the ranker's
settings file, then the command line), data, teachers (each member checked, then planned as a
training job of its own), the dev baselines a training compares with, cache keys (config, data,
the trained model's or teachers' keys, and the code each job imports, :mod:`bench.execution.keys`) -
into a :class:`bench.execution.plan.Plan`; :func:`execute` runs it. The jobs are
:mod:`bench.execution.scoring`'s and :mod:`bench.execution.fitting`'s and never call back into this
module. What the caches promise is :mod:`bench.results.cache`'s; rendering is
:mod:`bench.reporting.tables`' and :mod:`bench.reporting.reports`'; nothing here prints.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, cast

from bench.core.io import RESULTS_HINT
from bench.data.model import RankingSplit
from bench.data.splits import Dataset
from bench.execution.context import RunContext
from bench.execution.fitting import TRAINING_FILE, TrainJob, model_cached
from bench.execution.keys import autocast_part, evaluation_stamp, scoring_code, training_code
from bench.execution.memory import step_problem
from bench.execution.plan import BASELINE, EVALUATE, SCORE, TEACHER, TRAIN, Executor, Job, Plan
from bench.execution.policy import dev_baselines
from bench.execution.ranker_settings import ranker_options, settings_config, settings_file
from bench.execution.scoring import ScoreJob, evaluate_entry, evaluation_current, reusable_now
from bench.results.cache import CacheKey, component_hash, explain_miss
from bench.results.labels import RowKey, input_digest, show
from bench.results.metrics import DEFAULT_MEASURES
from bench.results.records import RECORD, ResultRecord, read_record, run_dir
from rankers import (
    Ranker,
    RankerError,
    Role,
    canonical_name,
    create_ranker,
    get_ranker_class,
    module_of,
)
from rankers.fit.targets import ENSEMBLE_SEPARATOR, teacher_parts
from rankers.hooks import fits, input_checks

log = logging.getLogger(__name__)

#: smallest value of each count option (None, where allowed, means "not set")
MINIMUMS = {
    "subset": 1,
    "train_subset": 1,
    "warmup": 0,
    "batch_queries": 1,
    "threads": 1,
    "train_processes": 1,
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
    #: the processes of ``--processes N`` have just computed every entry of this command (with
    #: or without --force): the report reads them, and says so instead of "reusing"
    written_by: int = 0
    data_dir: str | Path | None = None
    results_dir: str | Path | None = None
    measures: Sequence[str] = DEFAULT_MEASURES
    progress: bool = True
    #: how many processes train a list trainer (the launch's size under torchrun or accelerate
    #: launch, else 1): data-parallel training is another model (each process draws its own
    #: dropout masks), so more than one is part of the training key
    train_processes: int = 1

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
    machine's paths; a ranker that reads a file of the user's (a run file) adds the first hex of
    its SHA-256, so files of one name from different systems are different rows.
    """
    config = ranker.config.to_dict()
    defaults = (
        settings_config(ranker.name, dataset)
        if dataset is not None
        else type(ranker.config)().to_dict()
    )
    options = [("model", show(_label_value(config["model"])))] if config.get("model") else []
    options += [
        (k, show(_label_value(v)))
        for k, v in config.items()
        if k != "model" and v != defaults.get(k)
    ]
    digest = input_digest(input_checks(ranker).input_files())
    return RowKey(ranker.name, tuple(options), fitted, train_subset, subset, digest).label()


def _load_splits_for_fit(
    opts: RunOptions, dataset: Dataset
) -> tuple[RankingSplit, RankingSplit | None]:
    """The train split and the development split (``dev``, ``validation`` or ``val``) that
    selects the epoch; a dataset without one gets a warning, not a silent omission."""
    from bench.data.splits import DEV_SPLITS

    splits = dataset.splits
    if "train" not in splits:
        raise RankerError(
            f"dataset {opts.dataset!r} has no train split to fit on (has {list(splits)})"
        )
    train = dataset.load("train")
    if opts.train_subset:
        train = train.subset(opts.train_subset)
    dev_name = dataset.dev_split()
    if dev_name is None:
        log.warning(
            "%s has no development split (none of %s among %s): no epoch is selected on dev, "
            "training keeps its last epoch",
            opts.dataset,
            "/".join(DEV_SPLITS),
            ", ".join(splits),
        )
        return train, None
    return train, dataset.load(dev_name)


def _label_value(value: Any) -> Any:
    """``value`` for a label: each folder of a (``+``-joined) path value by its last component."""
    if not isinstance(value, str) or not _looks_like_path(value):
        return value
    return ENSEMBLE_SEPARATOR.join(
        Path(p).name if _looks_like_path(p) else p for p in teacher_parts(value)
    )


def _looks_like_path(value: str) -> bool:
    return "/" in value or "\\" in value or value.startswith((".", "~"))


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


# -- the plan ------------------------------------------------------------------------------------
def _code_root(ranker: Ranker) -> str:
    """The module a ranker's code key starts from: its registered module, else its class's."""
    try:
        return module_of(ranker.name)
    except RankerError:
        return type(ranker).__module__


def _why(
    key: CacheKey, entry: Path, meta: str, code_of: Any, code: Mapping[str, Any], force: bool
) -> str:
    """Why ``entry`` must be computed, for the plan table."""
    if force:
        return "--force"
    return explain_miss(key, entry, meta, code_of, code) or "no entry with this config yet"


def plan_training(
    ranker: Ranker,
    opts: RunOptions,
    plan: Plan,
    ctx: RunContext,
    kind: str = TRAIN,
    students: tuple[str, ...] = (),
) -> str:
    """Add the jobs that train ``ranker`` on ``opts.dataset`` (dev selects) to ``plan``: each
    named teacher member's training (all members checked before any is planned), the dev
    baselines' runs, and the training itself; returns the training job's id.

    The key covers the ranker's training options as asked (a named teacher by its name, with
    the teachers' own keys as the ``teacher`` component), the train and dev data, the seed,
    the subset and the training code (:func:`bench.execution.keys.training_code`). The ranker that
    trains is a new one whose config names the teachers' model folders (their keys fix them).
    ``students``: the teachers above this one, each trained with its settings file's options,
    so a cycle of settings files (A's teacher B, B's teacher A) is an error, not an endless
    plan (a ranker may still name its own kind, trained as its settings file says)."""
    if not ranker.trainable:
        raise RankerError(f"ranker {ranker.name!r} is not trainable; drop --fit")
    root = ctx.results_root
    plan.writes_into(root / "models", "models", RESULTS_HINT)
    opts = replace(opts, results_dir=root)
    train, dev = _load_splits_for_fit(opts, ctx.dataset(opts.dataset))
    config = ranker.config.to_dict()
    training_config = ranker.config.to_dict(Role.TRAINING)
    teacher = getattr(ranker.config, "teacher", None)
    deps: list[str] = []
    folders: list[str] = []
    keys: list[str] = []
    for part, name in check_teacher(ranker.name, str(teacher), opts.dataset) if teacher else []:
        if name is None:
            folders.append(part)
            continue
        options = ranker_options(name, opts.dataset)
        member = create_ranker(name, options, device=ranker.device)
        member_opts = replace(opts, ranker=name, options=options)
        if name in students:
            cycle = " -> ".join((*students[students.index(name) :], name))
            raise RankerError(f"teachers form a cycle ({cycle}): no ranker can teach itself")
        lineage = (*students, name)
        job = plan.jobs[plan_training(member, member_opts, plan, ctx, TEACHER, lineage)]
        deps.append(job.id)
        folders.append(job.id)
        keys.append(job.key)
    if folders:
        resolved = replace(ranker.config, teacher=ENSEMBLE_SEPARATOR.join(folders))
        ranker = type(ranker)(resolved, device=ranker.device)
    teacher_key = ENSEMBLE_SEPARATOR.join(keys) if keys else None
    code = training_code(_code_root(ranker), settings_file(ranker.name))
    key = CacheKey.of(
        config={
            "ranker": ranker.name,
            "config": training_config,
            "train_subset": opts.train_subset,
            "seed": opts.seed,
            # only when data-parallel (a one-process key stays as it always was)
            **(
                {"processes": opts.train_processes}
                if ranker.distributed_training and opts.train_processes > 1
                else {}
            ),
            # only under CUDA autocast: train_dtype=auto trains float32 on CPU but bf16 autocast
            # on a GPU that has it, and those are not the same weights
            **autocast_part(ranker),
        },
        data={"train": train.fingerprint(), "dev": dev.fingerprint() if dev else None},
        teacher=teacher_key,
        code=code,
    )
    model_dir = root / "models" / opts.dataset / ranker.name / key.digest
    baselines = _plan_baselines(ranker.name, opts, dev, plan, ctx) if dev is not None else {}
    spec = TrainJob(
        ranker, opts.dataset, train, dev, model_dir, key, code, config, teacher_key, opts.force
    )
    cached = not opts.force and model_cached(model_dir)
    if not cached:  # the largest step it will take, and whether it can fit (bench.execution.memory)
        line, problem = step_problem(ranker, [len(cl) for cl in train.lists], ranker.device)
        if line and line not in plan.notes:  # said once, however many variants share it
            log.info("%s", line)
            plan.notes.append(line)
        if problem and problem not in plan.refusals:
            plan.refusals.append(problem)
    return plan.add(
        Job(
            id=str(model_dir),
            kind=kind,
            what=f"{ranker.name} on {opts.dataset}/train",
            key=key.digest,
            run=lambda inputs: spec.run(lambda: {b: inputs(i) for b, i in baselines.items()}),
            deps=(*deps, *baselines.values()),
            cached=cached,
            why=""
            if cached
            else _why(key, model_dir, TRAINING_FILE, _summary_code, code, opts.force),
            entry=model_dir,
            single_process=not ranker.distributed_training,
        )
    )


def _summary_code(data: Mapping[str, Any]) -> Any:
    return data.get("code")


def _record_code(data: Mapping[str, Any]) -> Any:
    return data.get("provenance", {}).get("code")


def _plan_baselines(
    name: str, opts: RunOptions, dev: RankingSplit, plan: Plan, ctx: RunContext
) -> dict[str, str]:
    """The dev runs of the dev baselines (:func:`bench.execution.policy.dev_baselines`, other
    than ``name``) a training compares its kept epoch with, as optional jobs: baseline -> job
    id. One that cannot be planned is left out with a warning, as one that fails to run is.
    They run in the command's context ``ctx`` (its dataset already resolved, its results root),
    not one of their own."""
    out: dict[str, str] = {}
    for baseline in dev_baselines():
        if baseline == name:
            continue
        base = replace(
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
        try:
            out[baseline] = plan_run(base, ctx, plan, kind=BASELINE)
        except (RankerError, OSError, ValueError) as exc:
            log.warning("%s: no %s baseline on %s (%s)", name, baseline, dev.split, exc)
    return out


def plan_run(
    opts: RunOptions, ctx: RunContext, plan: Plan | None = None, kind: str = EVALUATE
) -> str:
    """Add the jobs of one `bench run` to ``plan`` (a new one when None): training when the
    ranker needs it (with its teachers and dev baselines), scoring the split, evaluating the
    run; returns the id of the last (the evaluate job), whose result is the record. ``kind``
    names the scoring job in the table (``dev baseline`` for a training's comparison runs).

    Everything is checked here, before any work: options, model, data, then (through
    :func:`plan_training`) teachers; the folders the jobs write are noted in the plan, which
    checks them before its first job. One function per decision: the ranker and whether it must
    be trained (:func:`_run_ranker`), the split (:func:`_run_split`), the key and the record
    (:func:`_score_job`), the scoring and evaluate jobs (:func:`_add_run_jobs`)."""
    plan = plan if plan is not None else Plan()
    root = ctx.results_root
    plan.writes_into(root / "runs", "results", RESULTS_HINT)
    name = canonical_name(opts.ranker)
    ranker, untrained = _run_ranker(name, opts, ctx.device)
    fit = opts.fit or untrained is not None
    if fit:
        plan.writes_into(root / "models", "models", RESULTS_HINT)
    split = _run_split(opts, ctx)
    if fit and not opts.fit:
        log.info(
            "%s: %s would be untrained, so it is trained first (or load trained weights with "
            "--model or --set checkpoint=DIR)",
            name,
            untrained,
        )
    train_id = plan_training(ranker, replace(opts, fit=True), plan, ctx) if fit else None
    model_key = plan.jobs[train_id].key if train_id else None
    score = _score_job(ranker, split, opts, ctx, fit, untrained is not None, model_key)
    return _add_run_jobs(plan, score, kind, train_id)


def _run_ranker(name: str, opts: RunOptions, device: str) -> tuple[Ranker, str | None]:
    """The ranker of a run, its options resolved (settings file, then the command line) and
    checked before any data is read, with what it would score with untrained (None: it has
    trained weights, or needs none). A ranker that would score untrained weights and cannot be
    trained is refused here: its run would be meaningless, and the user can name a model."""
    ranker = create_ranker(name, ranker_options(name, opts.dataset, opts.options), device=device)
    input_checks(ranker).check_model()
    untrained = fits(ranker).untrained_weights()
    if untrained is not None and not ranker.trainable:
        raise RankerError(
            f"{name} would score with {untrained}, and the harness cannot train it: give a "
            "trained model with --model or --set checkpoint=DIR"
        )
    return ranker, untrained


def _run_split(opts: RunOptions, ctx: RunContext) -> RankingSplit:
    """The split a run ranks (``--subset``'s first queries when given); one with no candidate
    lists is refused, saying why it has none, since every metric of it would be empty."""
    split = ctx.dataset(opts.dataset).load(opts.split)
    if opts.subset:
        split = split.subset(opts.subset)
    if not split.lists:
        raise RankerError(
            f"{split.dataset}/{split.split} has no candidate lists to rank: {split.empty_reason()}"
        )
    return split


def _score_job(
    ranker: Ranker,
    split: RankingSplit,
    opts: RunOptions,
    ctx: RunContext,
    fit: bool,
    needs_training: bool,
    model_key: str | None,
) -> ScoreJob:
    """The scoring job of a run: its key (the ranker's config, the run settings, the split's
    data, the trained model's key, the scoring code), its entry folder and the record it
    writes, all fixed now so that the plan shows them and nothing changes while it runs."""
    name = ranker.name
    label = label_for(ranker, fit, opts.subset, opts.train_subset, dataset=opts.dataset)
    config = ranker.config.to_dict()
    overrides = _overrides(name, config, opts, fit, needs_training)
    run_config = {
        "seed": opts.seed,
        "device": ctx.device,
        "threads": ctx.threads,
        "batch_queries": opts.batch_queries,
        "warmup": opts.warmup,
        "subset": opts.subset,
        "fit": fit,
        "train_subset": opts.train_subset if fit else None,
    }
    code = scoring_code(_code_root(ranker), settings_file(name))
    inputs = input_checks(ranker).input_fingerprint()
    key = CacheKey.of(
        # the measures are not in the key: a stored run is evaluated again (bench.execution.keys)
        config={
            "ranker": name,
            "config": config,
            "run": run_config,
            "split": split.split,
            # only where a ranker reads inputs of its own, so every other key stays as it was
            **({"inputs": inputs} if inputs else {}),
        },
        data=split.fingerprint(),
        model=model_key,
        code=code,
    )
    record = ResultRecord(
        ranker=name,
        dataset=split.dataset,
        split=split.split,
        family=ranker.family,
        label=label,
        metrics={},
        latency={},
        config=config,
        run_config={**run_config, "measures": list(opts.measures)},
        config_hash=key.digest,
        data=split.info(),
        provenance={},
        key_parts=key.parts,
        overrides=overrides,
        inputs=input_checks(ranker).input_files() or None,
    )
    out_dir = run_dir(ctx.results_root, split.dataset, name, split.split, key.digest)
    return ScoreJob(
        ranker, split, out_dir, key, code, record, opts.measures,
        evaluation_stamp(opts.measures), opts.batch_queries, opts.warmup, opts.progress,
        opts.force, opts.written_by,
    )  # fmt: skip


def _add_run_jobs(plan: Plan, score: ScoreJob, kind: str, train_id: str | None) -> str:
    """Add a run's scoring job (after ``train_id``'s training when there is one) and its
    evaluate job to ``plan``; returns the evaluate job's id. Two jobs, so that a cached run
    whose measures changed is evaluated again from its run file without scoring; a dev
    baseline's (``kind`` BASELINE) are optional and run only when a training asks."""
    out_dir, key, stamp = score.out_dir, score.key, score.stamp
    cached = not score.force and reusable_now(out_dir)
    baseline = kind == BASELINE
    score_id = plan.add(
        Job(
            id=str(out_dir),
            kind=SCORE if kind == EVALUATE else kind,
            what=score.what,
            key=key.digest,
            run=lambda inputs: score.run(
                (lambda: inputs(train_id)) if train_id is not None else None
            ),
            deps=(train_id,) if train_id else (),
            cached=cached,
            why="" if cached else _why(key, out_dir, RECORD, _record_code, score.code, score.force),
            optional=baseline,
            entry=out_dir,
            on_demand=baseline,
        )
    )
    evaluated = cached and evaluation_current(read_record(out_dir), stamp)
    measures = evaluation_why(out_dir, stamp) if cached and not evaluated else "with the scores"
    return plan.add(
        Job(
            id=f"{out_dir}#evaluate",
            kind=EVALUATE,
            what=f"{score.what}: {', '.join(score.measures)}",
            key=component_hash("evaluation", stamp),
            run=lambda inputs: evaluate_entry(inputs(score_id), score.split, score.measures, stamp),
            deps=(score_id,),
            cached=evaluated,
            why=measures,
            optional=baseline,
            entry=out_dir,
            reads_inputs=True,
            on_demand=baseline,
        )
    )


def evaluation_why(out_dir: Path, stamp: Mapping[str, Any]) -> str:
    """Why a cached run's metrics are computed again: measures added or dropped, or the
    measures' code changed."""
    old = (read_record(out_dir).provenance or {}).get("evaluation") or {}
    before, now = list(old.get("measures") or []), list(stamp["measures"])
    parts = []
    if added := [m for m in now if m not in before]:
        parts.append("measures added: " + ", ".join(added))
    if dropped := [m for m in before if m not in now]:
        parts.append("measures dropped: " + ", ".join(dropped))
    if old.get("code") != stamp["code"]:
        parts.append("the measures' code changed (bench/results/metrics.py)")
    return "; ".join(parts) or "the record has no evaluation stamp"


def execute(plan: Plan, ctx: RunContext) -> list[Any]:
    """Run ``plan``'s needed jobs (:class:`bench.execution.plan.Executor`), seeding before each."""
    return Executor(plan, before_job=ctx.seed_everything).execute()


def run(opts: RunOptions, ctx: RunContext | None = None) -> ResultRecord:
    """Run (or reuse) one ranker on one dataset split and write its result record: the plan of
    :func:`plan_run`, executed.

    ``ctx``: the command's run context (:meth:`RunOptions.context` when not given)."""
    ctx = ctx or opts.context()
    ctx.seed_everything()
    plan = Plan()
    plan.target(plan_run(opts, ctx, plan))
    (record,) = execute(plan, ctx)
    return cast(ResultRecord, record)


def plan_train(opts: RunOptions, ctx: RunContext, plan: Plan | None = None) -> Plan:
    """The plan of `bench train`: the training job of ``opts.ranker`` (settings resolved as for
    :func:`run`) and what it needs, as the target."""
    plan = plan if plan is not None else Plan()
    name = canonical_name(opts.ranker)
    ranker = create_ranker(
        name, ranker_options(name, opts.dataset, opts.options), device=ctx.device
    )
    input_checks(ranker).check_model()
    if not ranker.trainable:
        raise RankerError(
            f"ranker {ranker.name!r} is not trainable, so `bench train` has nothing to do "
            "(`bench rankers` shows which are)"
        )
    plan.target(plan_training(ranker, replace(opts, fit=True), plan, ctx))
    return plan


def train(opts: RunOptions, ctx: RunContext | None = None) -> dict[str, Any]:
    """Train one ranker on ``opts.dataset``'s train split (dev selects the epoch), or load the
    model cached for the same settings; returns the training summary.

    ``ctx``: the command's run context (:meth:`RunOptions.context` when not given)."""
    ctx = ctx or opts.context()
    ctx.seed_everything()
    ((_, summary),) = execute(plan_train(opts, ctx), ctx)
    return cast(dict[str, Any], summary)


def fit_or_load(ranker: Ranker, opts: RunOptions, root: Path) -> dict[str, Any]:
    """Train ``ranker`` (this instance: it ends up holding the weights) or load its cached
    model; the training summary. The plan of :func:`plan_training`, executed."""
    ctx = replace(opts, results_dir=root).context()
    plan = Plan()
    plan.target(plan_training(ranker, opts, plan, ctx))
    ((_, summary),) = execute(plan, ctx)
    return cast(dict[str, Any], summary)


def plan_runs(runs: Sequence[RunOptions], ctx: RunContext) -> Plan:
    """One plan for several runs (a demo, an ablation, a sweep): shared jobs appear once."""
    plan = Plan()
    for opts in runs:
        plan.target(plan_run(opts, ctx, plan))
    return plan


def check_runs(runs: Sequence[RunOptions], ctx: RunContext) -> None:
    """Plan ``runs`` together and stop now with the first reason the plan must not run (a
    training step that cannot fit, a folder that cannot be written): a command of many runs (a
    sweep, an ablation, the main job) runs them one by one, so without this it would train and
    score its first runs before a later run's refusal, where its ``--plan`` says it would stop
    before the first job."""
    problems = plan_runs(runs, ctx).folder_problems()
    if problems:
        raise ValueError(problems[0])
