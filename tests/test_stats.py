"""Holm correction, randomization and t tests, and compare() over several systems."""

from __future__ import annotations

import itertools
import re
import math
import random

import numpy as np
import pytest

from gapbench.evaluation.comparison import compare
from gapbench.schemas.comparison import Comparison
from gapbench.errors import ConfigError, GapbenchError
from gapbench.evaluation.evaluation import evaluate
from gapbench.evaluation.stats import bootstrap_ci, holm, paired_t_test, randomization_test


# ---------------------------------------------------------------- holm

def test_holm_hand_values():
    # sorted: 0.01 * 3 = 0.03; 0.03 * 2 = 0.06; 0.04 * 1 = 0.04 -> raised to the running max 0.06
    assert holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06], abs=1e-15)


def test_holm_caps_at_one_and_handles_ties():
    # 0.5 * 2 = 1.0; 0.6 * 1 = 0.6 -> 1.0
    assert holm([0.6, 0.5]) == [1.0, 1.0]
    # 0.4 * 3 = 1.2 -> capped at 1
    assert holm([0.4, 0.7, 0.9]) == [1.0, 1.0, 1.0]
    # ties: 0.02 * 2 = 0.04, 0.02 * 1 = 0.02 -> 0.04
    assert holm([0.02, 0.02]) == pytest.approx([0.04, 0.04])
    # a single p-value is unchanged
    assert holm([0.037]) == [0.037]
    assert holm([]) == []


def test_holm_hand_values_four():
    # sorted 0.001*4=0.004, 0.01*3=0.03, 0.02*2=0.04, 0.5*1=0.5
    assert holm([0.02, 0.5, 0.001, 0.01]) == pytest.approx([0.04, 0.5, 0.004, 0.03], abs=1e-15)


def _holm_reference(p):
    # textbook definition: adj_(i) = max_{j <= i} min(1, (m - j + 1) p_(j))
    m = len(p)
    order = sorted(range(m), key=lambda i: p[i])
    out = [0.0] * m
    run = 0.0
    for j, i in enumerate(order):
        run = max(run, min(1.0, (m - j) * p[i]))
        out[i] = run
    return out


def test_holm_monotone_and_matches_reference():
    rng = random.Random(5)
    for _ in range(50):
        p = [rng.random() ** 3 for _ in range(rng.randint(1, 12))]
        adj = holm(p)
        assert adj == pytest.approx(_holm_reference(p), abs=1e-15)
        assert all(a >= x - 1e-15 and a <= 1.0 for a, x in zip(adj, p))
        order = sorted(range(len(p)), key=lambda i: p[i])
        sorted_adj = [adj[i] for i in order]
        assert sorted_adj == sorted(sorted_adj)  # monotone in the raw p-values


# ---------------------------------------------------------------- randomization test

def test_randomization_identical_systems():
    a = [0.1, 0.5, 0.9, 0.3]
    assert randomization_test(a, list(a)) == 1.0


def test_randomization_constant_improvement():
    n_perm = 5000
    b = [0.1 * (i % 7) for i in range(30)]
    a = [x + 0.05 for x in b]
    p = randomization_test(a, b, n_permutations=n_perm, seed=0)
    # every flip except all-+ / all-- gives |mean| < 0.05; those two have probability 2 / 2^30, so no hit:
    # p = (0 + 1) / (n + 1)
    assert p == pytest.approx(1 / (n_perm + 1), abs=1e-15)
    assert p < 0.001


def test_randomization_reproducible_with_seed():
    rng = np.random.default_rng(1)
    a = rng.random(25)
    b = a + rng.normal(0, 0.2, 25)
    p1 = randomization_test(a, b, n_permutations=3000, seed=42)
    p2 = randomization_test(a, b, n_permutations=3000, seed=42)
    p3 = randomization_test(a, b, n_permutations=3000, seed=43)
    assert p1 == p2
    assert p1 != p3
    assert 0 < p1 <= 1


def test_randomization_symmetric():
    rng = np.random.default_rng(2)
    a, b = rng.random(20), rng.random(20)
    assert randomization_test(a, b, 2000, seed=3) == randomization_test(b, a, 2000, seed=3)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_randomization_close_to_exact_enumeration(seed):
    rng = np.random.default_rng(100 + seed)
    d = rng.normal(0.3, 1.0, 8)
    b = rng.random(8)
    a = b + d
    observed = abs(d.mean())
    hits = sum(
        1 for signs in itertools.product((-1, 1), repeat=8) if abs((np.array(signs) * d).mean()) >= observed - 1e-12
    )
    exact = hits / 2**8
    p = randomization_test(a, b, n_permutations=20_000, seed=seed)
    assert abs(p - exact) < 0.02, (p, exact)


def test_randomization_empty_is_nan():
    assert math.isnan(randomization_test([], []))


# ---------------------------------------------------------------- t test

def test_paired_t_test_matches_scipy():
    from scipy import stats

    rng = np.random.default_rng(9)
    for n in (3, 10, 50):
        a = rng.random(n)
        b = a - rng.normal(0.05, 0.1, n)
        want = stats.ttest_rel(a, b).pvalue
        assert paired_t_test(a, b) == pytest.approx(float(want), rel=1e-12, abs=1e-15)


def test_paired_t_test_degenerate():
    assert paired_t_test([0.5, 0.2, 0.1], [0.5, 0.2, 0.1]) == 1.0  # zero differences
    assert paired_t_test([0.6, 0.3, 0.2], [0.5, 0.2, 0.1]) == 0.0  # constant non-zero differences
    assert math.isnan(paired_t_test([0.5], [0.1]))  # one pair has no variance estimate


# ---------------------------------------------------------------- bootstrap

def test_bootstrap_constant_values():
    assert bootstrap_ci([0.25] * 10) == (0.25, 0.25)
    lo, hi = bootstrap_ci([])
    assert math.isnan(lo) and math.isnan(hi)


# ---------------------------------------------------------------- compare

N_Q = 30


def _three_runs():
    # q_i has one relevant document "rel". System "good" ranks it 1st everywhere (RR 1);
    # "mid" ranks it 1st on even queries and 2nd on odd ones (RR 1 or 1/2); "bad" ranks it 3rd (RR 1/3).
    qrels = {f"q{i}": {"rel": 1} for i in range(N_Q)}
    good = {q: {"rel": 3.0, "x": 2.0, "y": 1.0} for q in qrels}
    mid = {q: ({"rel": 3.0, "x": 2.0, "y": 1.0} if i % 2 == 0 else {"x": 3.0, "rel": 2.0, "y": 1.0}) for i, q in enumerate(qrels)}
    bad = {q: {"x": 3.0, "y": 2.0, "rel": 1.0} for q in qrels}
    from gapbench.types import Run

    return [Run(good, "good"), Run(mid, "mid"), Run(bad, "bad")], qrels


@pytest.fixture(scope="module")
def comparison() -> Comparison:
    runs, qrels = _three_runs()
    return compare(runs, qrels, ["RR", "P@1"], n_permutations=2000, seed=0)


def test_compare_structure_and_deltas(comparison):
    assert comparison.names == ["good", "mid", "bad"]
    assert len(comparison.tests) == 2 * 3  # 3 pairs for each of 2 measures
    # means of RR: good 1, mid (15 * 1 + 15 * 0.5) / 30 = 0.75, bad 1/3
    t = comparison.test("RR", "good", "mid")
    assert (t.a, t.b) == ("good", "mid")
    assert t.delta == pytest.approx(1 - 0.75)
    assert comparison.test("RR", "mid", "good") is t  # order-free lookup
    assert comparison.test("RR", "good", "bad").delta == pytest.approx(1 - 1 / 3)
    assert comparison.test("P@1", "mid", "bad").delta == pytest.approx(0.5 - 0.0)
    with pytest.raises(GapbenchError, match="nobody"):
        comparison.test("RR", "good", "nobody")
    with pytest.raises(GapbenchError):
        comparison.test("AP", "good", "mid")


def test_compare_holm_at_least_raw(comparison):
    for t in comparison.tests:
        assert t.p_randomization_holm >= t.p_randomization
        assert t.p_ttest_holm >= t.p_ttest
        assert t.p_randomization_holm <= 1.0
    for m in ("RR", "P@1"):
        tests = [t for t in comparison.tests if t.measure == m]
        assert [t.p_randomization_holm for t in tests] == holm([t.p_randomization for t in tests])


def test_compare_p_values(comparison):
    # good vs bad: constant difference 2/3 on all 30 queries -> no sign flip other than all-same reaches it
    t = comparison.test("RR", "good", "bad")
    assert t.p_randomization == pytest.approx(1 / 2001)
    assert t.p_ttest == 0.0  # constant non-zero differences
    # good vs mid: differences 0.5 on 15 queries, 0 on 15; a flip reaches |mean| 0.25 only if all 15 agree
    # (probability 2 / 2^15 each, about 0.12 expected hits in 2000 permutations)
    assert comparison.test("RR", "good", "mid").p_randomization <= 3 / 2001
    assert comparison.test("RR", "good", "mid").significant(0.05)


def test_compare_str(comparison):
    text = str(comparison)
    for name in ("(a) good", "(b) mid", "(c) bad", "RR", "P@1", "30 queries", "Holm-corrected over 3 comparisons"):
        assert name in text
    # good is significantly better than mid (b) and bad (c) on RR
    good_line = next(line for line in text.splitlines() if line.startswith("(a) good"))
    assert "bc" in good_line
    bad_line = next(line for line in text.splitlines() if line.startswith("(c) bad"))
    assert re.search(r"\][a-c]", bad_line) is None  # bad beats nobody


def test_compare_json(comparison):
    d = comparison.model_dump(mode="json", exclude_unset=True)  # gapbench compare --json
    assert d["correction"] == "holm"
    assert [s["system"] for s in d["systems"]] == ["good", "mid", "bad"]
    assert len(d["tests"]) == 6


def test_compare_results_objects_equals_runs():
    runs, qrels = _three_runs()
    results = [evaluate(r, qrels, ["RR"], seed=0) for r in runs]
    a = compare(results, n_permutations=500, seed=4)
    b = compare(runs, qrels, ["RR"], n_permutations=500, seed=4)
    assert a.tests == b.tests


def test_compare_mismatched_queries():
    runs, qrels = _three_runs()
    r1 = evaluate(runs[0], qrels, ["RR"])
    fewer = {q: d for q, d in qrels.items() if q != "q0"}
    r2 = evaluate(runs[1], fewer, ["RR"])
    with pytest.raises(GapbenchError, match="same queries"):
        compare([r1, r2])


def test_compare_needs_two_distinct_systems():
    runs, qrels = _three_runs()
    with pytest.raises(GapbenchError, match="at least two"):
        compare([runs[0]], qrels)
    with pytest.raises(GapbenchError, match="both named"):
        compare([runs[0], runs[0]], qrels, ["RR"])
    with pytest.raises(GapbenchError, match="qrels"):
        compare(runs)


# ---------------------------------------------------------------- parameters and values are checked

@pytest.mark.parametrize("n, message", [
    (0, "n_permutations is 0; give a whole number from 1 to 10,000,000"),
    (-5, "n_permutations is -5"),
    (10**12, "n_permutations is 1,000,000,000,000"),
    (2.0, "n_permutations must be a whole number"),
    (True, "n_permutations must be a whole number"),
    ("100", "n_permutations must be a whole number"),
])
def test_randomization_rejects_bad_permutation_counts(n, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        randomization_test([0.1, 0.2], [0.3, 0.1], n_permutations=n)


def test_randomization_accepts_the_bounds():
    # One permutation: p = (hits + 1) / 2, and a constant difference of 30 queries is never reached by a random flip.
    assert randomization_test([0.5] * 30, [0.0] * 30, n_permutations=1, seed=0) == 0.5
    assert randomization_test([0.5] * 30, [0.0] * 30, n_permutations=np.int64(3), seed=np.int64(2)) == 0.25


@pytest.mark.parametrize("a, b, message", [
    ([0.1, float("nan")], [0.2, 0.3], r"a\[1\] is nan"),
    ([0.1, 0.2], [float("inf"), 0.3], r"b\[0\] is inf"),
    ([0.5], [0.1, 0.2, 0.3], "a has 1 values and b has 3"),  # numpy would have broadcast the single value
    ([[0.1, 0.2]], [[0.3, 0.4]], "flat list"),
    (["x", "y"], [0.1, 0.2], "list of numbers"),
])
def test_paired_tests_reject_bad_values(a, b, message):
    with pytest.raises(GapbenchError, match=message):
        randomization_test(a, b, n_permutations=100)
    with pytest.raises(GapbenchError, match=message):
        paired_t_test(a, b)


@pytest.mark.parametrize("seed", [-1, 1.5, None, "0"])
def test_seeds_are_whole_numbers_of_zero_or_more(seed):
    with pytest.raises(ConfigError, match="seed must be a whole number of 0 or more"):
        randomization_test([0.1, 0.2], [0.3, 0.1], seed=seed)
    with pytest.raises(ConfigError, match="seed must be a whole number of 0 or more"):
        bootstrap_ci([0.1, 0.2], seed=seed)


@pytest.mark.parametrize("kwargs, message", [
    ({"n_resamples": 0}, "n_resamples is 0"),
    ({"n_resamples": -10}, "n_resamples is -10"),
    ({"n_resamples": 10**9}, "n_resamples is 1,000,000,000; give a whole number from 1 to 1,000,000"),
    ({"n_resamples": 100.0}, "n_resamples must be a whole number"),
    ({"confidence": 0.0}, "confidence is 0.0"),
    ({"confidence": 1.0}, "confidence is 1.0"),
    ({"confidence": 95}, "confidence is 95"),
    ({"confidence": float("nan")}, "confidence is nan"),
])
def test_bootstrap_rejects_bad_parameters(kwargs, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        bootstrap_ci([0.1, 0.2, 0.3], **kwargs)


def test_bootstrap_rejects_non_finite_values_and_unequal_lists():
    from gapbench.evaluation.stats import bootstrap_cis

    with pytest.raises(GapbenchError, match=r"values\['x'\]\[2\] is nan"):
        bootstrap_cis({"x": [0.1, 0.2, float("nan")]})
    with pytest.raises(GapbenchError, match=r"the same queries for every measure, got \[2, 3\]"):
        bootstrap_cis({"x": [0.1, 0.2, 0.3], "y": [0.1, 0.2]})


def test_bootstrap_one_resample_is_one_resampled_mean():
    # With one resample both quantiles are that resample's mean; the indices come from default_rng(seed).
    vals = [0.0, 1.0, 0.25, 0.5]
    idx = np.random.default_rng(3).integers(0, 4, size=(1, 4))
    want = float(np.asarray(vals)[idx].mean())
    assert bootstrap_ci(vals, n_resamples=1, seed=3) == (want, want)


@pytest.mark.parametrize("p, message", [
    ([0.01, float("nan")], r"p_values\[1\] is nan"),
    ([0.01, 1.5], r"p_values\[1\] is 1.5; p-values lie between 0 and 1"),
    ([-0.1], r"p_values\[0\] is -0.1"),
])
def test_holm_rejects_values_that_are_not_p_values(p, message):
    with pytest.raises(GapbenchError, match=message):
        holm(p)


def test_compare_rejects_bad_alpha_and_permutations():
    runs, qrels = _three_runs()
    # CompareOptions: gapbench.contract's Alpha and Permutations, worded as every options class words them
    for alpha, problem in ((float("nan"), "a finite number, got nan"), (0.0, "strictly between 0 and 1 (e.g. 0.05), "
                           "got 0.0"), (1.0, "strictly between 0 and 1 (e.g. 0.05), got 1.0"),
                           (-1.0, "strictly between 0 and 1 (e.g. 0.05), got -1.0")):
        with pytest.raises(ConfigError) as caught:
            compare(runs, qrels, ["RR"], alpha=alpha)
        assert str(caught.value) == f"CompareOptions: alpha must be {problem}."
    with pytest.raises(ConfigError, match=r"^CompareOptions: n_permutations must be greater than or equal to 1, "
                                          r"got 0\.$"):
        compare(runs, qrels, ["RR"], n_permutations=0)
