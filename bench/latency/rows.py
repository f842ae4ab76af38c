"""The rows of a `bench latency` record from the trackers of its timed entries.

Apart from :mod:`bench.latency.protocol` (which times) so that the one-process benchmark and the
throughput mode over several processes (:mod:`bench.latency.processes`) build their rows alike.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from bench.core.timing import LatencySummary, LatencyTracker
from bench.latency.arch import ARCHS, random_weights_note
from bench.latency.records import LatencyRow
from rankers.base import Ranker
from rankers.hooks import latency_parts

if TYPE_CHECKING:
    from bench.latency.protocol import BenchOptions, Loaded

log = logging.getLogger(__name__)


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
