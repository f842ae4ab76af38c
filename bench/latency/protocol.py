"""The timing protocol of `bench latency`: what is timed and how.

Per N and ranker (:func:`bench.latency.benchmark.run_benchmark` drives it): each ranker of
``--rankers`` is created with its resolved options and asked for its
:meth:`~rankers.hooks.LatencyParts.latency_variants` (batch sizes, scoring modes); every variant is
one :class:`Entry`, created, ``index()``-ed on the lists, given ``warmup`` untimed calls, then
timed over ``repeats`` passes with
:class:`~bench.core.timing.LatencyTracker`, ``batch_queries`` lists per ``score()`` call, the
rankers taking turns call by call (:func:`time_interleaved`) so that load from other processes is
shared fairly. A ranker with a host step (:attr:`~rankers.base.Ranker.host_step`) is called in
its two steps, ``prepare_scoring`` then ``score_prepared``, under one clock with a mark between
them, so each timed call gives the whole call, the host step and the model step, and the record
shows where the time goes (:func:`time_parts`).

Nothing here knows a ranker by name: what differs per ranker comes from its hooks. The one
exception is the cost model's configuration (CROSS-JEM's L_q, L_k, L_u in
:func:`~bench.latency.lists.token_settings`), which is what the paper's prediction is about.

``--arch`` times paper-size encoders: a BERT of the preset's size with random weights is written
once under ``results/models/random/`` and given as ``model`` to every ranker that has one.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.core.timing import LatencyTracker, timed_call
from bench.data.model import CandidateList, RankingSplit
from bench.execution.context import RunContext
from bench.execution.policy import ALL, DEFAULT_BATCH_SIZES, DEFAULT_RANKERS, BatchSize
from bench.latency.arch import ARCHS, DEFAULT_ARCH
from bench.latency.precisions import (
    PrecisionPlan,
    check_no_precision_options,
    plan_precisions,
    precision_free,
    precision_options,
    tag_entry,
)
from bench.latency.records import (
    LatencyRow,
)
from bench.latency.rows import entry_rows
from rankers.base import Ranker, RankerConfig, RankerError
from rankers.hooks import latency_parts

log = logging.getLogger(__name__)

#: environment that changes CPU timings, recorded with every result. Under CPU contention
#: OpenMP's default spin-waiting can make 2-thread forward passes ~30x slower;
#: OMP_WAIT_POLICY=PASSIVE (set before torch loads) avoids that.


@dataclass
class BenchOptions:
    """Everything `bench latency` takes; :meth:`validate` checks it before any work."""

    dataset: str
    split: str | None = None
    n_values: Sequence[int] = (30, 100)
    rankers: Sequence[str] = DEFAULT_RANKERS
    batch_queries: int = 1
    #: lists timed per N: the first ``queries`` queries of the split (None: all)
    queries: int | None = 20
    repeats: int = 3
    warmup: int = 3
    device: str = "cpu"
    threads: int | None = 2
    seed: int = 0
    #: ranker name -> batch sizes to time (``"all"``: a call's pairs in one pass), given to the
    #: ranker's latency_variants(); a ranker without an entry gets latency_variants(None)
    batch_sizes: Mapping[str, Sequence[BatchSize]] = field(
        default_factory=lambda: dict(DEFAULT_BATCH_SIZES)
    )
    #: encoder to time: a key of :data:`ARCHS`
    arch: str = DEFAULT_ARCH
    #: ranker name -> save() folder of trained weights (latency needs none)
    checkpoints: Mapping[str, str] = field(default_factory=dict)
    #: ranker name -> option overrides (like `bench run --set`)
    options: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    data_dir: str | Path | None = None
    results_dir: str | Path | None = None
    #: measure the kernel rates of the time model anew (:mod:`bench.latency.calibration`)
    #: instead of reading the cached calibration
    calibrate: bool = False
    #: ``--dtypes``: precisions (``DTYPE`` or ``DTYPE@RUNTIME``) timed interleaved in this one
    #: run (:mod:`bench.latency.precisions`); empty: each ranker in its own ``dtype`` option
    dtypes: Sequence[str] = ()

    def context(self) -> RunContext:
        """The run context of these options, resolved once (device, threads set now, seed,
        roots)."""
        return RunContext.of(self)

    def validate(self) -> None:
        """Raise ValueError (RankerError for an unknown ranker) naming the bad option."""
        from rankers import canonical_name

        if not self.n_values:
            raise ValueError("--n-items: give at least one list size N")
        for n in self.n_values:
            if isinstance(n, bool) or not isinstance(n, int) or n < 1:
                raise ValueError(f"--n-items: list sizes must be integers >= 1, not {n!r}")
        for name, value, low in (
            ("--batch-queries", self.batch_queries, 1),
            ("--queries", self.queries, 1),
            ("--repeats", self.repeats, 1),
            ("--warmup", self.warmup, 0),
            ("--threads", self.threads, 1),
        ):
            if value is not None and value < low:
                raise ValueError(f"{name} must be >= {low}, not {value}")
        if self.arch not in ARCHS:
            raise ValueError(f"--arch {self.arch!r} is unknown; known: {', '.join(ARCHS)}")
        trained = self.checkpoints or any("checkpoint" in o for o in self.options.values())
        if ARCHS[self.arch] is not None and trained:
            raise ValueError(
                f"--arch {self.arch} times random weights; it cannot be combined with "
                "trained checkpoints"
            )
        if not self.rankers:
            raise ValueError("--rankers: name at least one ranker")
        for name in [*self.rankers, *self.batch_sizes, *self.options, *self.checkpoints]:
            canonical_name(name)
        from bench.execution.ranker_settings import ranker_options
        from rankers import get_ranker_class

        for name in self.rankers:
            untimed = get_ranker_class(canonical_name(name)).untimed
            if untimed:
                raise ValueError(f"--rankers {name}: bench latency cannot time it: {untimed}")

        for name, overrides in self.options.items():
            several = str(overrides.get("dtype", "")).split(",")
            if len(several) > 1:
                raise ValueError(
                    f"--set {name}.dtype={overrides['dtype']}: one dtype per --set; time several "
                    f"precisions in one run with --dtypes {','.join(several)}"
                )
        if self.dtypes:
            check_no_precision_options(canonical_keys(self.options))
        for name, overrides in self.options.items():  # bad values fail here, not mid-benchmark
            key = canonical_name(name)
            if self.dtypes:  # options that need one precision are checked in it (the plan)
                overrides = precision_free(key, overrides)
            get_ranker_class(key).Config.from_options(ranker_options(key, self.dataset, overrides))
        for name, sizes in self.batch_sizes.items():
            resolve_batch_sizes(sizes, 1, owner=name)
        self.precision_plan()

    def precision_plan(self) -> PrecisionPlan | None:
        """Which ranker is timed in which precision of :attr:`dtypes` (None without them),
        checked without loading anything: :func:`bench.latency.precisions.plan_precisions`."""
        if not self.dtypes:
            return None
        from bench.core.device import resolve_device

        device = resolve_device(self.device)
        options = canonical_keys(self.options)
        return plan_precisions(self.dtypes, self.rankers, self.dataset, options, device)


def options_per_ranker(
    sets: Mapping[str, str], rankers: Sequence[str]
) -> dict[str, dict[str, str]]:
    """``--set`` pairs of `bench latency` as option overrides per ranker: ``RANKER.KEY`` sets
    that ranker's option, a bare ``KEY`` every timed ranker whose config declares it (e.g.
    ``order=concat`` times CROSS-JEM in that layout). A key no timed ranker has is an error
    naming it, before any work."""
    from rankers import canonical_name, get_ranker_class

    timed = [canonical_name(r) for r in rankers]
    out: dict[str, dict[str, str]] = {}
    for key, value in sets.items():
        name, dot, option = key.rpartition(".")
        owners = [canonical_name(name)] if dot else timed
        takers = [r for r in owners if option in config_fields(get_ranker_class(r).Config)]
        if not takers:
            where = f"ranker {owners[0]}" if dot else f"the timed rankers ({', '.join(timed)})"
            raise ValueError(f"--set {key}={value}: no option {option!r} in {where}")
        for r in takers:
            out.setdefault(r, {})[option] = value
    return out


def resolve_batch_sizes(sizes: Sequence[BatchSize], everything: int, owner: str = "") -> list[int]:
    """Batch sizes as integers, ``"all"`` replaced by ``everything`` (the pairs of one call),
    duplicates dropped in order."""
    out = []
    for bs in sizes:
        if bs == ALL:
            out.append(everything)
            continue
        try:
            value = int(bs)
        except (TypeError, ValueError):
            value = 0
        if isinstance(bs, bool) or value < 1:
            where = f" for {owner}" if owner else ""
            raise ValueError(f"batch size{where} must be an integer >= 1 or {ALL!r}, not {bs!r}")
        out.append(value)
    return list(dict.fromkeys(out))


def config_fields(config_cls: type[RankerConfig]) -> set[str]:
    return {f.name for f in dataclasses.fields(config_cls)}


def canonical_keys(mapping: Mapping[str, Any]) -> dict[str, Any]:
    from rankers import canonical_name

    return {canonical_name(k): v for k, v in mapping.items()}


# -- what is timed -------------------------------------------------------------------------------
@dataclass(frozen=True)
class Entry:
    """One timed configuration: its row label, the registered ranker and the options that make
    it, and its table column (the fastest row of a column is the column's figure); in a run
    timing several precisions, the precision's name (:mod:`bench.latency.precisions`)."""

    label: str
    ranker: str
    options: dict[str, Any] = field(default_factory=dict)
    column: str = ""
    precision: str = ""


def entries_for(
    rankers: Sequence[str],
    dataset: str,
    n: int,
    batch_queries: int,
    *,
    batch_sizes: Mapping[str, Sequence[BatchSize]] | None = None,
    options: Mapping[str, Mapping[str, Any]] | None = None,
) -> list[Entry]:
    """The rows to time at list size ``n``: for each ranker, its resolved options (config file,
    then ``options``; ``batch_queries`` when its config has that field) and one entry per
    :meth:`~rankers.hooks.LatencyParts.latency_variants` (creating a ranker loads nothing)."""
    from bench.execution.ranker_settings import ranker_options
    from rankers import canonical_name, get_ranker_class

    options = canonical_keys(options or {})
    sizes = canonical_keys(batch_sizes or {})
    out: list[Entry] = []
    for key in dict.fromkeys(canonical_name(name) for name in rankers):
        cls = get_ranker_class(key)
        base = ranker_options(key, dataset, options.get(key))
        if "batch_queries" in config_fields(cls.Config):
            base["batch_queries"] = batch_queries
        ranker = cls(cls.Config.from_options(base), device="cpu")
        wanted = resolve_batch_sizes(sizes[key], n * batch_queries, key) if key in sizes else None
        for variant in latency_parts(ranker).latency_variants(wanted):
            out.append(Entry(variant.label, key, {**base, **variant.options}, variant.column))
    return out


def precision_entries(
    plan: PrecisionPlan,
    dataset: str,
    n: int,
    batch_queries: int,
    *,
    batch_sizes: Mapping[str, Sequence[BatchSize]] | None = None,
    options: Mapping[str, Mapping[str, Any]] | None = None,
) -> list[Entry]:
    """The entries of a ``--dtypes`` run at list size ``n``: the rankers without a dtype once,
    then per precision (in ``--dtypes`` order) the entries of every ranker that runs it
    (:func:`~bench.latency.protocol.entries_for` with the precision's options), tagged."""
    options = canonical_keys(options or {})
    out = entries_for(
        plan.untyped, dataset, n, batch_queries, batch_sizes=batch_sizes, options=options
    )
    for p in plan.precisions:
        takers = plan.takers[p.name]
        chosen = {r: precision_options(r, options.get(r), p) for r in takers}
        found = entries_for(
            takers, dataset, n, batch_queries, batch_sizes=batch_sizes, options=chosen
        )
        out += [tag_entry(e, p.name) for e in found]
    return out


def checkpoint_for(ranker: str, checkpoints: Mapping[str, str]) -> str | None:
    """The ranker's own checkpoint, else that of the ranker whose weights it declares it can
    borrow (``borrows_checkpoint_of``: the sentence-transformers peer takes monoBERT's encoder)."""
    from rankers import get_ranker_class

    checkpoints = canonical_keys(checkpoints)
    own = checkpoints.get(ranker)
    if own:
        return own
    source = get_ranker_class(ranker).borrows_checkpoint_of
    return checkpoints.get(source) if source else None


def create_entry(entry: Entry, device: str, checkpoint: str | None = None) -> Ranker:
    """The ranker of ``entry``; ``checkpoint`` (a ``save()`` folder) loads trained weights,
    through the config's ``checkpoint`` option where it has one, else :meth:`Ranker.load`."""
    from rankers import create_ranker, get_ranker_class

    options = dict(entry.options)
    takes_checkpoint = "checkpoint" in config_fields(get_ranker_class(entry.ranker).Config)
    if checkpoint and takes_checkpoint:
        options["checkpoint"] = checkpoint
    ranker = create_ranker(entry.ranker, options, device=device)
    if checkpoint and not takes_checkpoint:
        ranker.load(Path(checkpoint))
    return ranker


def column_for(ranker: str, config: Mapping[str, Any]) -> str:
    """The latency-table column a ranker configured with ``config`` is timed in: that of its
    first latency variant whose options ``config`` agrees with (e.g. a DPR run with
    ``precompute=true`` -> ``dpr (precomputed)``); the ranker's name when none does or the
    config no longer fits the ranker."""
    from rankers import get_ranker_class

    try:
        cls = get_ranker_class(ranker)
        probe = cls(cls.Config.from_options(dict(config)), device="cpu")
    except (RankerError, TypeError, ValueError) as exc:
        log.debug("column of %s: %s", ranker, exc)
        return ranker
    resolved = probe.config.to_dict()
    for variant in latency_parts(probe).latency_variants(None):
        if all(resolved.get(k) == v for k, v in variant.options.items()):
            return variant.column
    return ranker


# -- timing --------------------------------------------------------------------------------------
def _check_scores(ranker: Ranker, out: Sequence[Any], batch: Sequence[CandidateList]) -> None:
    if [len(s) for s in out] != [len(cl) for cl in batch]:
        raise RankerError(f"{ranker.name} returned scores that do not match its lists")


def split_calls(lists: Sequence[CandidateList], batch_queries: int) -> list[list[CandidateList]]:
    from bench.data.batching import batches

    calls = list(batches(lists, batch_queries))
    if not calls:
        raise ValueError("no candidate lists to time")
    return calls


def _volume(batch: Sequence[CandidateList]) -> dict[str, int]:
    return {"queries": len(batch), "candidates": sum(len(cl) for cl in batch)}


#: the figures a timed call gives: the whole call, its host step (``prepare_scoring``) and its
#: model step (``score_prepared``)
PARTS = ("score", "host", "model")


def _call(
    ranker: Ranker,
    names: Sequence[str],
    batch: list[CandidateList],
    trackers: dict[str, LatencyTracker] | None,
) -> None:
    """One call of ``ranker`` on ``batch``, recorded in ``trackers`` (None: a warm-up call) for
    each of ``names`` (:data:`PARTS`); in its two steps under one clock when a step is asked."""
    in_steps = "host" in names or "model" in names
    parts = latency_parts(ranker)  # before the clock starts: a protocol check reads attributes
    with timed_call(ranker.device) as clock:
        if in_steps:
            prepared = parts.prepare_scoring(batch)
            clock.mark()
            out = parts.score_prepared(prepared)
        else:
            out = ranker.score(batch)
    _check_scores(ranker, out, batch)
    if trackers is None:
        return
    wall, device = clock.segments_s, clock.device_segments_s
    figures = {"score": (clock.total_s, clock.device_total_s)}
    if in_steps:
        for i, part in enumerate(("host", "model")):
            figures[part] = (wall[i], device[i] if device is not None else None)
    for part in names:
        seconds, device_seconds = figures[part]
        trackers[part].record(seconds, device_seconds=device_seconds, **_volume(batch))


def warm_up(
    rankers: Sequence[Ranker],
    parts: Sequence[Sequence[str]],
    calls: Sequence[list[CandidateList]],
    warmup: int,
) -> None:
    """``warmup`` untimed calls per ranker, cycling through ``calls``, made as the timed calls
    will be (in steps when ``parts`` asks for a step)."""
    for ranker, names in zip(rankers, parts, strict=True):
        for i in range(warmup):
            _call(ranker, names, calls[i % len(calls)], None)


def time_parts(
    rankers: Sequence[Ranker],
    lists: Sequence[CandidateList],
    parts: Sequence[Sequence[str]],
    *,
    batch_queries: int = 1,
    warmup: int = 3,
    repeats: int = 3,
) -> list[dict[str, LatencyTracker]]:
    """Time ``parts[k]`` (:data:`PARTS`) of ranker ``k``: ``warmup`` untimed calls per ranker,
    then ``repeats`` timed passes over ``lists`` (``batch_queries`` lists per call); one tracker
    per ranker and part, timed calls only.

    A ranker timed with only ``score`` is timed on whole ``score()`` calls. A ranker timed with
    ``host`` or ``model`` is called as ``score_prepared(prepare_scoring(batch))`` (what its
    ``score()`` is) under one clock with a mark between the two steps: each call gives the
    whole call and both steps, so host + model = whole on every call, and neither step's
    percentiles can exceed the whole call's. (Timing the steps in calls of their own, as
    records written before this did, gives other samples of a noisy machine: the model step's
    p50 then came out above the whole call's.)

    The rankers take turns call by call (the order rotating), so a burst of load from other
    processes on a shared machine falls on every ranker alike rather than on whichever ran
    then. On CUDA each boundary synchronises (a step's queued copies count in that step), and
    CUDA events give device time too.
    """
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, not {repeats}")
    for names in parts:
        unknown = [p for p in names if p not in PARTS]
        if unknown:
            raise ValueError(f"part must be one of {', '.join(PARTS)}, not {unknown[0]!r}")
    calls = split_calls(lists, batch_queries)
    warm_up(rankers, parts, calls, warmup)
    trackers = [
        {part: LatencyTracker(r.device) for part in names}
        for r, names in zip(rankers, parts, strict=True)
    ]
    turn = 0
    for _ in range(repeats):
        for batch in calls:
            order = [(turn + k) % len(rankers) for k in range(len(rankers))]
            turn += 1
            for k in order:
                _call(rankers[k], parts[k], batch, trackers[k])
    return trackers


def time_interleaved(
    rankers: Sequence[Ranker],
    lists: Sequence[CandidateList],
    *,
    batch_queries: int = 1,
    warmup: int = 3,
    repeats: int = 3,
    part: str = "score",
) -> list[LatencyTracker]:
    """:func:`time_parts` with the same single ``part`` for every ranker."""
    timed = time_parts(
        rankers,
        lists,
        [(part,)] * len(rankers),
        batch_queries=batch_queries,
        warmup=warmup,
        repeats=repeats,
    )
    return [t[part] for t in timed]


def time_scoring(
    ranker: Ranker,
    lists: Sequence[CandidateList],
    *,
    batch_queries: int = 1,
    warmup: int = 3,
    repeats: int = 3,
) -> LatencyTracker:
    """:func:`time_interleaved` for one ranker."""
    return time_interleaved(
        [ranker], lists, batch_queries=batch_queries, warmup=warmup, repeats=repeats
    )[0]


def time_part(
    ranker: Ranker,
    lists: Sequence[CandidateList],
    part: str,
    *,
    batch_queries: int = 1,
    repeats: int = 3,
) -> LatencyTracker:
    """One :data:`PARTS` entry of ``ranker`` alone on the same calls (one untimed call first):
    ``host`` is the ``prepare_scoring`` step and ``model`` the ``score_prepared`` step of calls
    timed in two steps (:func:`time_parts`)."""
    return time_interleaved(
        [ranker], lists, batch_queries=batch_queries, warmup=1, repeats=repeats, part=part
    )[0]


#: a created and indexed entry: the entry, the checkpoint it loaded (None: none) and its ranker
Loaded = tuple[Entry, str | None, Ranker]


def load_entry(entry: Entry, split: RankingSplit, opts: BenchOptions, device: str) -> Loaded:
    """Create ``entry``'s ranker (with its checkpoint, if any) and index it on ``split``."""
    checkpoint = checkpoint_for(entry.ranker, opts.checkpoints)
    ranker = create_entry(entry, device, checkpoint)
    ranker.index(split)
    return entry, checkpoint, ranker


def parts_of(ranker: Ranker) -> tuple[str, ...]:
    """What is timed of ``ranker``'s calls: all :data:`PARTS` with a host step, else the call."""
    return PARTS if ranker.host_step is not None else ("score",)


def time_entries(
    entries: Sequence[Entry], split: RankingSplit, opts: BenchOptions, device: str
) -> list[LatencyRow]:
    """Create and index every entry and time them interleaved on one N's lists; the calls of
    an entry with a host step are timed in their two steps as well (:func:`time_parts`)."""
    loaded = [load_entry(entry, split, opts, device) for entry in entries]
    rankers = [r for _, _, r in loaded]
    timed = time_parts(
        rankers,
        split.lists,
        [parts_of(r) for r in rankers],
        batch_queries=opts.batch_queries,
        warmup=opts.warmup,
        repeats=opts.repeats,
    )
    rows = entry_rows(loaded, timed, opts, len(split.lists[0]), interleaved=len(loaded))
    for row, (_, _, ranker) in zip(rows, loaded, strict=True):
        row.encoder = encoder_work(ranker, split.lists, opts.batch_queries)
    return rows


def encoder_work(
    ranker: Ranker, lists: Sequence[CandidateList], batch_queries: int
) -> dict[str, Any]:
    """What the cost model needs of ``ranker``'s timed calls (untimed, after the timing): its
    scoring dtype, its encoder's shape and the encoder calls of one pass over ``lists``
    (:meth:`~rankers.hooks.LatencyParts.encoder_calls` of each call's prepared inputs), and on
    ONNX Runtime the runtime, its graph and int8 recipe (:func:`runtime_work`); empty for a ranker
    that declares none or runs on a runtime no calibration times (OpenVINO)."""
    from bench.latency.efficiency import EncoderShape
    from bench.latency.timemodel import compress_calls
    from rankers.families.encoder import EncoderRanker

    if not isinstance(ranker, EncoderRanker):
        return {}
    work = runtime_work(ranker)
    if work is None:
        return {}
    calls = []
    for batch in split_calls(lists, batch_queries):
        found = ranker.encoder_calls(ranker.prepare_scoring(batch))  # an EncoderRanker
        if found is None:
            return {}
        calls.extend(found)
    return {
        **work,
        "shape": dataclasses.asdict(EncoderShape.from_config(ranker.encoder_config())),
        "queries": len(lists),
        "calls": compress_calls(calls),
    }


def runtime_work(ranker: Any) -> dict[str, Any] | None:
    """What runs an encoder ranker's encoder, as its time model reads it: on PyTorch the scoring
    ``dtype``; on ONNX Runtime the ``runtime``, the precision it runs (``dtype``: float32 or
    int8), the ``graph`` (option ``onnx_graph``) and, for int8, the ``int8_recipe``. None on a
    runtime no calibration times."""
    from rankers.precision import INT8, scoring_dtype
    from rankers.runtimes import runtime_precision

    cfg = ranker.cfg
    runtime = getattr(cfg, "runtime", "torch") or "torch"
    if runtime == "torch":
        dtype = scoring_dtype(str(cfg.dtype), ranker.device)
        return {"dtype": str(dtype).removeprefix("torch.")}
    if runtime != "onnxruntime":
        return None
    precision = runtime_precision(runtime, str(cfg.dtype))
    recipe = {"int8_recipe": cfg.int8_recipe} if precision == INT8 else {}
    return {"dtype": precision, "runtime": runtime, "graph": cfg.onnx_graph, **recipe}
