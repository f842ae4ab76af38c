"""How `bench latency` times: warm-up, interleaving, the host and model steps, the rows.

Every :class:`~bench.latency.plan.Entry` of one N (:mod:`bench.latency.plan` says which) is
created, ``index()``-ed on the lists, given ``warmup`` untimed calls, then timed over ``repeats``
passes with :class:`~bench.core.timing.LatencyTracker`, ``batch_queries`` lists per ``score()``
call, the rankers taking turns call by call (:func:`time_parts`) so that load from other
processes is shared fairly. A ranker with a host step (:attr:`~rankers.base.Ranker.host_step`)
is called in its two steps, ``prepare_scoring`` then ``score_prepared``, under one clock with a
mark between them, so each timed call gives the whole call, the host step and the model step,
and the record shows where the time goes. The rows (:func:`entry_rows`) are built here for the
one-process benchmark and the throughput mode over several processes
(:mod:`bench.latency.processes`) alike; after the timing, each row gets the encoder work its
calls made (:func:`encoder_work`), which the cost model predicts.

Nothing here knows a ranker by name: what differs per ranker comes from its hooks.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from bench.core.profiling import CallProfile, profile_calls
from bench.core.timing import LatencySummary, LatencyTracker, timed_call
from bench.data.model import CandidateList, RankingSplit
from bench.latency.costmodel.flops import EncoderShape
from bench.latency.costmodel.kernels import RUNTIMES, TORCH
from bench.latency.costmodel.time import compress_calls
from bench.latency.plan import ARCHS, BenchOptions, Entry, Loaded, load_entry, random_weights_note
from bench.latency.records import LatencyRow
from rankers.base import Ranker, RankerError
from rankers.compute.precision import TF32
from rankers.hooks import EncoderRun, latency_parts

if TYPE_CHECKING:
    from bench.latency.costmodel.time import Calibrations

log = logging.getLogger(__name__)


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


def parts_of(ranker: Ranker) -> tuple[str, ...]:
    """What is timed of ``ranker``'s calls: all :data:`PARTS` with a host step, else the call."""
    return PARTS if ranker.host_step is not None else ("score",)


def time_entries(
    entries: Sequence[Entry],
    split: RankingSplit,
    opts: BenchOptions,
    device: str,
    calibrations: Calibrations | None = None,
) -> list[LatencyRow]:
    """Create and index every entry and time them interleaved on one N's lists; the calls of
    an entry with a host step are timed in their two steps as well (:func:`time_parts`). With
    ``calibrations``, each entry's calibration is read (checked, measured where it must be)
    before the timing, so a bad cache or an unwritable folder shows at once."""
    loaded = [load_entry(entry, split, opts, device) for entry in entries]
    rankers = [r for _, _, r in loaded]
    if calibrations is not None:
        for ranker in rankers:
            run = encoder_run(ranker)
            if run is not None:
                shape = EncoderShape.from_config(run.config)
                calibrations.get(shape, encoder_setting(run), run.attention)
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
        if opts.profile:
            row.profile = profile_entry(ranker, split.lists, opts.batch_queries, device).to_dict()
    return rows


def profile_entry(
    ranker: Ranker, lists: Sequence[CandidateList], batch_queries: int, device: str
) -> CallProfile:
    """One profiled pass of ``ranker`` over ``lists``, called as the timing calls it
    (``batch_queries`` lists per ``score()`` call): what its calls launch and how long the
    device is busy, per query (:func:`bench.core.profiling.profile_calls`). Run after the
    timing, untimed: the profiler slows every call it watches."""
    calls = [functools.partial(ranker.score, batch) for batch in split_calls(lists, batch_queries)]
    return profile_calls(calls, len(lists), device)


def encoder_run(ranker: Ranker) -> EncoderRun | None:
    """How ``ranker``'s encoder runs (:meth:`~rankers.hooks.LatencyParts.encoder_run`), its dtype
    ``tf32`` where the ranker's ``dtype`` option asks for TF32 matmuls: float32 weights on other
    kernels than IEEE float32's, so calibrated apart (on a CUDA device, the only one with
    TF32)."""
    run = latency_parts(ranker).encoder_run()
    if run is not None and run.runtime == TORCH and getattr(ranker.config, "dtype", None) == TF32:
        return dataclasses.replace(run, dtype=TF32)
    return run


def encoder_setting(run: EncoderRun) -> dict[str, Any]:
    """What a row records of how its encoder ran: the ``dtype``; on another runtime than
    PyTorch also the ``runtime`` and its options (ONNX Runtime: ``graph``, ``int8_recipe``)."""
    if run.runtime == TORCH:
        return {"dtype": run.dtype}
    return {"dtype": run.dtype, "runtime": run.runtime, **run.options}


def encoder_work(
    ranker: Ranker, lists: Sequence[CandidateList], batch_queries: int
) -> dict[str, Any]:
    """What the cost model needs of ``ranker``'s timed calls (untimed, after the timing): how
    its encoder runs (:meth:`~rankers.hooks.LatencyParts.encoder_run`, :func:`encoder_setting`),
    its encoder's shape and the encoder calls of one pass over ``lists``
    (:meth:`~rankers.hooks.LatencyParts.encoder_calls` of each call's prepared inputs); empty
    for a ranker that declares none or runs on a runtime no calibration times
    (:data:`~bench.latency.costmodel.kernels.RUNTIMES`)."""
    parts = latency_parts(ranker)
    run = encoder_run(ranker)
    if run is None or run.runtime not in RUNTIMES:
        return {}
    calls = []
    for batch in split_calls(lists, batch_queries):
        found = parts.encoder_calls(parts.prepare_scoring(batch))
        if found is None:
            return {}
        calls.extend(found)
    return {
        **encoder_setting(run),
        "shape": dataclasses.asdict(EncoderShape.from_config(run.config)),
        "queries": len(lists),
        "calls": compress_calls(calls),
    }


# -- the rows ----------------------------------------------------------------------------------
def _split_summaries(
    ranker: Ranker, timed: dict[str, LatencyTracker], extra: dict[str, Any], interleaved: int
) -> tuple[LatencySummary, LatencySummary] | None:
    """(host step, model only) summaries of a ranker with a host step; None without one."""
    if "host" not in timed:
        return None
    return (
        timed["host"].summary(
            **extra,
            interleaved=interleaved,
            scope="ranker.prepare_scoring: the first step of each timed call",
            covers=ranker.host_step,
        ),
        timed["model"].summary(
            **extra,
            interleaved=interleaved,
            scope="ranker.score_prepared: the second step of each timed call",
        ),
    )


def _with_share(summary: LatencySummary, whole_mean_ms: float) -> dict[str, Any]:
    """A part's summary with its share of the whole call's mean time."""
    return {**summary.to_dict(), "share_of_mean": summary.mean_ms / whole_mean_ms}


def _weights(ranker: Ranker, checkpoint: str | None, arch: str) -> str:
    fields = {f.name for f in dataclasses.fields(type(ranker.config))}
    if ARCHS.get(arch) is not None and "model" in fields:
        return random_weights_note(arch)
    return latency_parts(ranker).weights_note(checkpoint)


def entry_rows(
    loaded: Sequence[Loaded],
    timed: Sequence[dict[str, LatencyTracker]],
    opts: BenchOptions,
    n: int,
    interleaved: int,
    **extra: Any,
) -> list[LatencyRow]:
    """One row per loaded entry from its trackers (one per timed part); ``interleaved``: how
    many entries took turns call by call; ``extra`` goes into every summary."""
    extra = {
        "batch_queries": opts.batch_queries,
        "warmup_calls": opts.warmup,
        "repeats": opts.repeats,
        "n": n,
        **extra,
    }
    rows = []
    for (entry, checkpoint, ranker), parts in zip(loaded, timed, strict=True):
        split_timing = _split_summaries(ranker, parts, extra, interleaved)
        scope = (
            "ranker.score per call (tokenisation included)"
            if split_timing is None
            else "ranker.prepare_scoring then ranker.score_prepared (its score()) per call"
        )
        latency = parts["score"].summary(**extra, interleaved=interleaved, scope=scope).to_dict()
        host, model_only = (
            (None, None)
            if split_timing is None
            else (_with_share(part, latency["mean_ms"]) for part in split_timing)
        )
        rows.append(
            LatencyRow(
                label=entry.label,
                ranker=entry.ranker,
                column=entry.column,
                family=ranker.family,
                n=n,
                batch_queries=opts.batch_queries,
                options=ranker.config.to_dict(),
                weights=_weights(ranker, checkpoint, opts.arch),
                dtype=latency_parts(ranker).compute_dtype(),
                latency=latency,
                tokenisation=host,
                model_only=model_only,
                mode=latency_parts(ranker).scoring_mode(),
                ranker_info=ranker.describe(),
                precision=entry.precision,
            )
        )
        log.info(
            "%s N=%d: p50 %.2f ms/query, mean %.2f ms, %.0f pairs/s%s",
            entry.label,
            n,
            latency["p50_ms"],
            latency["mean_ms"],
            latency["candidates_per_s"],
            f"; host step {100 * host['share_of_mean']:.0f}% of the mean" if host else "",
        )
    return rows
