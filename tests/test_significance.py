"""bench.results.significance on inputs small enough to enumerate by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest

from bench.results.significance import (
    canonical_test,
    compare,
    holm,
    paired_ttest,
    randomisation_test,
)

EXACT = 1e-12

# d = b - a = [0.3, 0.1, 0.2, -0.1]; observed |sum| = 0.5. The 16 sign vectors give
# ±0.3 ±0.1 ±0.2 -> {±0.6, ±0.4, ±0.2, 0, 0}, then ±0.1 for the 4th:
#   +0.6 -> 0.7, 0.5     +0.2 -> 0.3, 0.1     +0.4 -> 0.5, 0.3     0 -> 0.1, -0.1
#   0    -> 0.1, -0.1    -0.4 -> -0.3, -0.5   -0.2 -> -0.1, -0.3   -0.6 -> -0.5, -0.7
# |sum| >= 0.5: 0.7, 0.5, 0.5, -0.5, -0.5, -0.7 -> 6 of 16 -> p = 0.375
A4 = [0.0, 0.0, 0.0, 0.0]
B4 = [0.3, 0.1, 0.2, -0.1]


def per_query(values: list[float], metric: str = "AP@10", start: int = 1) -> dict:
    return {f"q{i}": {metric: v} for i, v in enumerate(values, start=start)}


def test_holm_hand_values() -> None:
    # sorted: 0.01*3 = 0.03; 0.03*2 = 0.06; 0.04*1 = 0.04 -> raised to 0.06 (monotone)
    assert holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06], abs=EXACT)
    # capped at 1 and monotone: 0.5*2 = 1.0, then max(1.0, 0.6) = 1.0
    assert holm([0.6, 0.5]) == [1.0, 1.0]
    assert holm([0.02]) == [0.02]
    assert holm([]) == []


def test_randomisation_exact_enumeration() -> None:
    assert randomisation_test(A4, B4, permutations=16) == pytest.approx(6 / 16, abs=EXACT)
    # symmetric in direction
    assert randomisation_test(B4, A4, permutations=16) == pytest.approx(6 / 16, abs=EXACT)
    # all-equal differences: only the all-plus and all-minus vectors reach |mean| = 1
    assert randomisation_test(A4, [1.0] * 4, permutations=10_000) == pytest.approx(2 / 16)


def test_randomisation_samples_when_enumeration_is_too_large() -> None:
    a, b = [0.0] * 30, [1.0] * 30
    # 2^30 > 1000: sampled; only 2 of 2^30 vectors reach the observed mean, so none is drawn
    # and the estimate is (1 + 0) / (1 + 1000)
    assert randomisation_test(a, b, permutations=1000, seed=7) == pytest.approx(1 / 1001)
    # 2^4 = 16 > 15: sampled, reproducible for a seed, a multiple of 1/16 no longer
    p1 = randomisation_test(A4, B4, permutations=15, seed=3)
    assert p1 == randomisation_test(A4, B4, permutations=15, seed=3)
    assert p1 * 16 == pytest.approx(round(p1 * 16))  # (1 + count) / 16


def test_identical_vectors_give_p_one_not_nan() -> None:
    x = [0.2, 0.5, 0.1, 0.9]
    assert paired_ttest(x, x) == 1.0
    assert randomisation_test(x, x) == 1.0
    assert paired_ttest([0.4], [0.4]) == 1.0


def test_ttest_hand_value_and_constant_shift() -> None:
    # d = [1, 2, 3]: mean 2, sd 1, t = 2 / (1/sqrt 3) = sqrt 12, df = 2.
    # For df = 2, P(|T| > t) = 1 - t / sqrt(t^2 + 2) = 1 - sqrt(12/14)
    assert paired_ttest([0, 0, 0], [1, 2, 3]) == pytest.approx(1 - math.sqrt(6 / 7), abs=1e-12)
    # a constant non-zero shift (scipy alone gives NaN for these floats) is maximally significant
    assert paired_ttest([0.1, 0.2, 0.3], [0.2, 0.3, 0.4]) == 0.0
    assert not math.isnan(paired_ttest([0.1, 0.2, 0.3], [0.2, 0.3, 0.4]))


def test_compare_randomisation_holm_across_systems() -> None:
    base = per_query(A4)
    systems = {
        "a": per_query(B4),  # exact p = 6/16
        "b": per_query([1.0] * 4),  # exact p = 2/16
        "same": per_query(A4),  # p = 1
    }
    results = compare(
        base, systems, "AP@10", baseline_name="bm25", test="randomisation", permutations=16
    )
    assert [r.system for r in results] == ["a", "b", "same"]
    assert [r.p_value for r in results] == pytest.approx([0.375, 0.125, 1.0], abs=EXACT)
    # Holm: 0.125*3 = 0.375; 0.375*2 = 0.75; 1.0*1 = 1.0
    assert [r.p_adjusted for r in results] == pytest.approx([0.75, 0.375, 1.0], abs=EXACT)
    assert [r.significant for r in results] == [False, False, False]
    assert [r.delta for r in results] == pytest.approx([0.125, 1.0, 0.0], abs=EXACT)
    assert {r.baseline for r in results} == {"bm25"}
    assert {r.test for r in results} == {"randomisation"}
    assert {r.n_queries for r in results} == {4}


def test_compare_significant_with_alpha() -> None:
    # 6 queries all +1: exact p = 2/64 = 0.03125, one comparison so p_adjusted is the same
    base, better = per_query([0.0] * 6), per_query([1.0] * 6)
    [r] = compare(base, {"x": better}, "AP@10", test="randomization", permutations=64)
    assert r.p_adjusted == pytest.approx(0.03125, abs=EXACT)
    assert r.significant
    [r] = compare(base, {"x": better}, "AP@10", test="randomisation", alpha=0.01, permutations=64)
    assert not r.significant


def test_compare_pairs_on_shared_queries_only() -> None:
    base = per_query([0.0, 0.5, 0.5, 0.5])  # q1..q4
    system = per_query([1.0, 1.0, 1.0, 9.0], start=2)  # q2..q5
    [r] = compare(base, {"s": system}, "AP@10", test="ttest")
    assert r.n_queries == 3  # q2, q3, q4
    assert r.delta == pytest.approx(0.5, abs=EXACT)
    assert r.p_value == 0.0  # constant shift of 0.5 on the shared queries


def test_compare_errors_name_the_problem() -> None:
    base = per_query([0.1, 0.2])
    with pytest.raises(ValueError, match="no queries shared.*'far'"):
        compare(base, {"far": per_query([0.1], start=9)}, "AP@10")
    with pytest.raises(ValueError, match="metric 'RR@10' missing.*'s'"):
        compare(base, {"s": per_query([0.3, 0.4])}, "RR@10")
    with pytest.raises(ValueError, match="unknown significance test 'wilcoxon'"):
        compare(base, {"s": per_query([0.3, 0.4])}, "AP@10", test="wilcoxon")
    for alpha in (0.0, 1.0, 5.0, -0.1):
        with pytest.raises(ValueError, match=f"alpha must be between 0 and 1 .*got {alpha}"):
            compare(base, {"s": per_query([0.3, 0.4])}, "AP@10", alpha=alpha)
    with pytest.raises(ValueError, match="permutations must be >= 1, got 0"):
        compare(base, {"s": per_query([0.3, 0.4])}, "AP@10", test="randomisation", permutations=0)


def test_canonical_test_names() -> None:
    assert canonical_test("T-Test") == "ttest"
    assert canonical_test("randomization") == "randomisation"
    assert canonical_test("ttest") == "ttest"


def test_large_sampled_run_is_deterministic_and_bounded() -> None:
    rng = np.random.default_rng(0)
    a = rng.random(500)
    b = a + rng.normal(0.0, 0.1, 500)
    p = randomisation_test(a, b, permutations=2000, seed=1)
    assert p == randomisation_test(a, b, permutations=2000, seed=1)
    assert 1 / 2001 <= p <= 1.0
