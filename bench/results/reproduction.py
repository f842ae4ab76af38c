"""How far the seeds of a group reproduce one another, measured with ``repro-eval``.

``repro-eval`` (Breuer et al., SIGIR 2020) quantifies how far a re-run reproduces a run: the
document order (Kendall's tau Union and rank-biased overlap per query, averaged) and the
per-query effectiveness (root mean square error of each measure over the queries). Here every
pair of members is one comparison, the lower seed taken as the original: a pair whose members
rank alike has tau Union and RBO near 1 and RMSE near 0. The measures are the library's own, not
computed here; it is an optional extra (``crossjem-bench[repro]``), imported only when asked.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

#: how to install what this module needs
EXTRA = "crossjem-bench[repro]"


def _library() -> tuple[Any, Any, Any]:
    """repro-eval's KTU, RBO and RMSE, or an ImportError that names the extra to install."""
    try:
        from repro_eval.measure.document_order import KTU, RBO
        from repro_eval.measure.effectiveness import RMSE
    except ImportError as exc:
        raise ImportError(
            f"measuring how far seeds reproduce one another needs repro-eval ({exc}); "
            f"install it with: pip install '{EXTRA}'"
        ) from None
    return KTU, RBO, RMSE


@dataclasses.dataclass(frozen=True)
class Agreement:
    """One pair of members: ``original`` and ``rerun`` seeds, the mean Kendall's tau Union and
    rank-biased overlap (``p`` 0.95, to the depth of each query's list) over the shared
    queries, and the RMSE of each measure."""

    original: int
    rerun: int
    queries: int
    ktu: float
    rbo: float
    rmse: dict[str, float]


def read_run(path: Path) -> dict[str, dict[str, float]]:
    """A TREC run file as ``repro-eval`` reads one (qid -> docid -> score, in file order: the
    ranks the file gives)."""
    _library()  # the extra's name when it is missing
    from repro_eval.util import load_run

    return dict(load_run(str(path)))


def _defined_mean(values: Iterable[float]) -> float:
    """The mean over the queries where tau is defined: a list of one candidate has no order to
    agree on (NaN from the library), which would make the whole mean NaN."""
    defined = [v for v in map(float, values) if not math.isnan(v)]
    return statistics.fmean(defined) if defined else math.nan


def agreement(
    original: tuple[int, Mapping[str, Mapping[str, float]], Mapping[str, Mapping[str, float]]],
    rerun: tuple[int, Mapping[str, Mapping[str, float]], Mapping[str, Mapping[str, float]]],
) -> Agreement:
    """``repro-eval``'s measures between two members, each ``(seed, run, per-query values)``,
    over the queries both ranked (and both have per-query values of)."""
    ktu, rbo, rmse = _library()
    (seed_a, run_a, pq_a), (seed_b, run_b, pq_b) = original, rerun
    shared = [q for q in run_a if q in run_b and q in pq_a and q in pq_b]
    if not shared:
        raise ValueError(f"seeds {seed_a} and {seed_b} share no ranked query")
    # the library pairs queries by the rerun's keys and ranks by key order: both in one order
    a = {q: dict(run_a[q]) for q in shared}
    b = {q: dict(run_b[q]) for q in shared}
    names = [m for m in pq_a[shared[0]] if all(m in pq_a[q] and m in pq_b[q] for q in shared)]
    scores_a = {q: {m: pq_a[q][m] for m in names} for q in shared}
    scores_b = {q: {m: pq_b[q][m] for m in names} for q in shared}
    from repro_eval import RBO_P, RUN_LENGTH

    return Agreement(
        seed_a,
        seed_b,
        len(shared),
        _defined_mean(ktu(a, b, trim_thresh=RUN_LENGTH, per_topic=True).values()),
        statistics.fmean(
            # depth: the query's list (a deeper one would count identical short lists apart)
            rbo(
                {q: a[q]},
                {q: b[q]},
                p=RBO_P,
                depth=max(len(a[q]), len(b[q])),
                pbar=False,
                per_topic=False,
            )
            for q in shared
        ),
        {k: float(v) for k, v in rmse(scores_a, scores_b).items()},
    )


def pairwise(
    members: Sequence[tuple[int, Path, Mapping[str, Mapping[str, float]]]],
) -> list[Agreement]:
    """Every pair of ``members`` (seed, run file, per-query values), the lower seed first."""
    runs = [(seed, read_run(path), pq) for seed, path, pq in sorted(members, key=lambda m: m[0])]
    return [agreement(a, b) for a, b in itertools.combinations(runs, 2)]


def summary(pairs: Sequence[Agreement], measure: str) -> dict[str, float]:
    """The mean over the pairs: tau Union, RBO and the RMSE of ``measure``."""
    return {
        "ktu": statistics.fmean(p.ktu for p in pairs),
        "rbo": statistics.fmean(p.rbo for p in pairs),
        f"rmse {measure}": statistics.fmean(p.rmse[measure] for p in pairs),
    }
