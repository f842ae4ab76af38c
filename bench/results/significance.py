"""Paired significance tests of one metric: a baseline against each other system, Holm-corrected.

The inputs are per-query values (``ResultRecord.per_query()``: qid -> metric -> value). Each
comparison uses the queries the baseline and that system share, and says how many that was, so a
system evaluated on fewer queries cannot silently be compared on a different sample. Two tests:

* ``ttest``: the paired t-test (``scipy.stats.ttest_rel``), two-sided.
* ``randomisation``: the paired randomisation (sign-flip permutation) test on the mean difference,
  two-sided; exact over all 2^n sign vectors when 2^n <= ``permutations``, otherwise
  ``permutations`` random sign vectors from a fixed seed, so a table is reproducible.

Several systems compared with one baseline are a family of tests, so p-values are adjusted with
Holm-Bonferroni (step-down, controls the family-wise error rate without independence assumptions).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

log = logging.getLogger(__name__)

PerQuery = Mapping[str, Mapping[str, float]]

TESTS: tuple[str, ...] = ("ttest", "randomisation")
_ALIASES = {"t-test": "ttest", "randomization": "randomisation", "permutation": "randomisation"}

#: Two statistics closer than this are equal (sums of the same terms in another order).
_EPS = 1e-12
#: Sign vectors per batch when sampling, bounding memory for long query lists.
_BATCH_ELEMENTS = 2_000_000


@dataclass(frozen=True)
class PairedResult:
    """One system against the baseline on one metric."""

    system: str
    metric: str
    baseline: str
    test: str
    n_queries: int
    delta: float  # mean(system) - mean(baseline) over the shared queries
    p_value: float
    p_adjusted: float  # Holm-Bonferroni across the systems compared in the same call
    significant: bool  # p_adjusted < alpha


def canonical_test(name: str) -> str:
    """'randomization' -> 'randomisation'; unknown names list the known ones."""
    key = _ALIASES.get(name.strip().lower(), name.strip().lower())
    if key not in TESTS:
        raise ValueError(f"unknown significance test {name!r}; known: {', '.join(TESTS)}")
    return key


def paired_ttest(a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray) -> float:
    """Two-sided paired t-test p-value; defined (never NaN) when the differences are constant."""
    d = np.asarray(b, dtype=np.float64) - np.asarray(a, dtype=np.float64)
    if len(d) == 0:
        raise ValueError("paired t-test needs at least one query")
    if np.all(np.abs(d - d[0]) <= _EPS):
        # zero variance: scipy gives NaN (or inf t); no difference -> 1, a constant shift -> 0
        return 1.0 if abs(d[0]) <= _EPS or len(d) < 2 else 0.0
    if len(d) < 2:
        return 1.0
    from scipy.stats import ttest_rel

    return float(ttest_rel(b, a).pvalue)


def randomisation_test(
    a: Sequence[float] | np.ndarray,
    b: Sequence[float] | np.ndarray,
    *,
    permutations: int = 10_000,
    seed: int = 0,
) -> float:
    """Two-sided paired sign-flip test of mean(b - a).

    Exact (count / 2^n over every sign vector) when 2^n <= ``permutations``; otherwise
    (1 + count) / (1 + permutations) over random sign vectors, which never returns 0.
    """
    d = np.asarray(b, dtype=np.float64) - np.asarray(a, dtype=np.float64)
    n = len(d)
    if n == 0:
        raise ValueError("randomisation test needs at least one query")
    if permutations < 1:
        raise ValueError(f"permutations must be >= 1, got {permutations}")
    observed = abs(d.mean())
    if n < 63 and 2**n <= permutations:
        codes = np.arange(2**n, dtype=np.int64)[:, None] >> np.arange(n, dtype=np.int64)
        signs = (codes & 1) * 2 - 1
        stats = np.abs(signs @ d) / n
        return float(np.count_nonzero(stats >= observed - _EPS) / 2**n)
    rng = np.random.default_rng(seed)
    batch = max(1, _BATCH_ELEMENTS // n)
    count = 0
    for start in range(0, permutations, batch):
        size = min(batch, permutations - start)
        signs = rng.integers(0, 2, size=(size, n), dtype=np.int8) * 2 - 1
        stats = np.abs(signs @ d) / n
        count += int(np.count_nonzero(stats >= observed - _EPS))
    return (1 + count) / (1 + permutations)


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm-Bonferroni adjusted p-values, in the input order.

    Sorted ascending, the i-th (0-based) of m is multiplied by (m - i), capped at 1, and made
    non-decreasing along the sorted order.
    """
    m = len(p_values)
    order = sorted(range(m), key=lambda i: p_values[i])
    adjusted = [0.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p_values[i]))
        adjusted[i] = running
    return adjusted


def _paired_vectors(
    baseline: PerQuery, system: PerQuery, metric: str, name: str
) -> tuple[np.ndarray, np.ndarray]:
    common = sorted(set(baseline) & set(system))
    if not common:
        raise ValueError(f"no queries shared by the baseline and {name!r}: cannot pair them")
    dropped = len(set(baseline) | set(system)) - len(common)
    if dropped:
        log.warning(
            "%s vs baseline on %s: %d shared queries, %d not shared and left out",
            name,
            metric,
            len(common),
            dropped,
        )
    try:
        a = np.array([baseline[q][metric] for q in common], dtype=np.float64)
        b = np.array([system[q][metric] for q in common], dtype=np.float64)
    except KeyError as exc:
        raise ValueError(
            f"metric {metric!r} missing from the per-query values of {name!r} or the baseline"
        ) from exc
    return a, b


def compare(
    baseline: PerQuery,
    systems: Mapping[str, PerQuery],
    metric: str,
    *,
    baseline_name: str = "baseline",
    test: str = "ttest",
    alpha: float = 0.05,
    permutations: int = 10_000,
    seed: int = 0,
) -> list[PairedResult]:
    """Test each of ``systems`` (name -> per-query values) against ``baseline`` on ``metric``.

    Results keep the order of ``systems``; p-values are Holm-adjusted across all of them.
    ``alpha`` must lie strictly between 0 and 1 (0 marks nothing, 1 or more marks everything).
    """
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be between 0 and 1 (exclusive), got {alpha}")
    if permutations < 1:
        raise ValueError(f"permutations must be >= 1, got {permutations}")
    test = canonical_test(test)
    raw: list[tuple[str, int, float, float]] = []
    for name, per_query in systems.items():
        a, b = _paired_vectors(baseline, per_query, metric, name)
        if test == "ttest":
            p = paired_ttest(a, b)
        else:
            p = randomisation_test(a, b, permutations=permutations, seed=seed)
        raw.append((name, len(a), float(b.mean() - a.mean()), p))
    adjusted = holm([p for *_, p in raw])
    return [
        PairedResult(
            system=name,
            metric=metric,
            baseline=baseline_name,
            test=test,
            n_queries=n,
            delta=delta,
            p_value=p,
            p_adjusted=p_adj,
            significant=p_adj < alpha,
        )
        for (name, n, delta, p), p_adj in zip(raw, adjusted, strict=True)
    ]
