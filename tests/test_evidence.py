"""The one rule for thin evidence (gapbench.evidence) and the minimum detectable effect (gapbench.evaluation.stats):
the reasons in words with their counts, the signals analysis' warnings following the same thresholds, the MDE against
G*Power's published power and a seeded simulation, its pooling over pairs and tasks by hand, and compare's output."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from gapbench.analyses.signals.evidence import gate_warnings, signal_warnings
from gapbench.evaluation.comparison import compare
from gapbench.evaluation.stats import averaged_mde, detectable_effect, paired_mde, t_test_power
from gapbench.evidence import (
    HELD_OUT_MIN_PER_CLASS,
    MIN_PER_CLASS,
    class_shortfall,
    interval_reason,
    reaches_chance,
    separation_evidence,
)
from gapbench.types import Run

# ---------------------------------------------------------------- the evidence rule


def test_a_class_below_the_minimum_is_named_with_its_count():
    assert class_shortfall(1, 43) == "too few weak retrievals (1 of 43)"
    assert class_shortfall(40, 43) == "too few good retrievals (3 of 43)"
    assert class_shortfall(5, 12) == "too few weak retrievals (5 of 12) and good retrievals (7 of 12)"
    assert class_shortfall(1, 43, ("miss", "hit")) == "too few misses (1 of 43)"
    assert class_shortfall(0, 1500) == "too few weak retrievals (0 of 1,500)"
    # the bar is MIN_PER_CLASS of each: 10 and 10 pass, 9 does not
    assert MIN_PER_CLASS == 10
    assert class_shortfall(10, 20) is None and class_shortfall(9, 20) is not None


def test_an_interval_as_wide_as_the_distance_from_chance_is_not_a_finding():
    assert reaches_chance(0.62, 0.45, 0.80)  # width 0.35 >= 0.12
    assert not reaches_chance(0.90, 0.85, 0.95)  # width 0.10 < 0.40
    assert reaches_chance(0.75, 0.60, 0.85)  # width 0.25 == effect 0.25: as wide
    assert interval_reason(0.62, 0.45, 0.80) == ("its 95% interval 0.450-0.800 is as wide as its distance from "
                                                 "chance (0.620 - 0.5 = 0.120)")
    assert interval_reason(0.90, 0.85, 0.95) is None


def test_a_separation_is_judged_on_its_counts_first_then_its_interval():
    # the cell: 1.000 [1.000, 1.000] from one weak retrieval among 43 queries
    assert separation_evidence(43, 1, 1.0, (1.0, 1.0)) == "too few weak retrievals (1 of 43)"
    assert separation_evidence(100, 40, 0.62, (0.45, 0.80)).startswith("its 95% interval 0.450-0.800")
    assert separation_evidence(100, 40, 0.90, (0.85, 0.95)) is None
    assert separation_evidence(100, 40, 0.90, None) is None  # no interval to judge: the counts alone


def test_the_signals_warnings_follow_the_same_thresholds():
    for n_weak in range(1, 43):
        warned = any(w.startswith("only ") for w in signal_warnings(43, n_weak, {}))
        assert warned == (class_shortfall(n_weak, 43) is not None), n_weak
    sig = {"max_score": {"available": True, "separation": 0.62, "ci95": [0.45, 0.80]}}
    assert any(w.startswith("max_score: its 95% interval 0.450-0.800") for w in signal_warnings(100, 40, sig))
    assert reaches_chance(0.62, 0.45, 0.80)
    assert HELD_OUT_MIN_PER_CLASS == 5

    def held(n, n_weak):
        return {"held_out": {"n": n, "n_weak": n_weak, "youden_j": 0.5, "catch_rate": 0.7, "false_alarm_rate": 0.2}}

    assert gate_warnings(held(20, 4)) and not gate_warnings(held(20, 5)) and gate_warnings(held(20, 16))


# ---------------------------------------------------------------- the minimum detectable effect


def test_the_power_equation_gives_g_power_s_published_value():
    # G*Power 3.1, t tests - means: difference between two dependent means (matched pairs), a priori: d_z = 0.5,
    # alpha 0.05 two-tailed, power 0.80 -> total sample size 34, actual power 0.8077775
    assert t_test_power(0.5, 1 / math.sqrt(34), 33) == pytest.approx(0.8077775, abs=1e-6)
    # hence 34 pairs detect slightly less than d_z = 0.5 at power 0.8, and 33 slightly more
    assert detectable_effect(1 / math.sqrt(34), 33) < 0.5 < detectable_effect(1 / math.sqrt(33), 32)
    assert t_test_power(detectable_effect(0.1, 20), 0.1, 20) == pytest.approx(0.8, abs=1e-9)


def test_for_many_queries_it_is_the_normal_formula():
    z = stats.norm.ppf(0.975) + stats.norm.ppf(0.8)  # 1.95996 + 0.84162 = 2.80158
    assert z == pytest.approx(2.80158, abs=1e-5)
    assert detectable_effect(0.01, 1e6) == pytest.approx(z * 0.01, rel=1e-5)


def test_a_simulation_rejects_at_the_mde_with_power_0_8():
    """Paired normal differences whose true mean is the MDE: the two-sided t-test at 0.05 rejects in 80% of the
    samples. 20,000 seeded samples of 30 queries: the binomial standard error of the rate is sqrt(0.8 * 0.2 / 20,000)
    = 0.0028, so the rate must fall within 4 of them (0.0113) of 0.8; at no difference it falls within 4 standard
    errors (0.0062) of alpha."""
    n, sd, reps = 30, 0.25, 20_000
    mde = detectable_effect(sd / math.sqrt(n), n - 1)
    rng = np.random.default_rng(2024)
    crit = stats.t.ppf(0.975, n - 1)
    for mean, expected in ((mde, 0.8), (0.0, 0.05)):
        d = rng.normal(mean, sd, size=(reps, n))
        t = d.mean(axis=1) / (d.std(axis=1, ddof=1) / math.sqrt(n))
        rate = float(np.mean(np.abs(t) > crit))
        se = math.sqrt(expected * (1 - expected) / reps)
        assert abs(rate - expected) < 4 * se, (mean, rate)


def test_the_spread_is_pooled_over_pairs():
    # pair 1: 1 2 3 4 (variance 5/3); pair 2: 0 0 2 2 (variance 4/3); pooled variance 3/2
    out = paired_mde([[1, 2, 3, 4], [0, 0, 2, 2]])
    assert out["sd_diff"] == pytest.approx(math.sqrt(1.5), abs=1e-12)
    assert out["se"] == pytest.approx(math.sqrt(1.5) / 2, abs=1e-12)
    assert (out["df"], out["n"], out["n_pairs"], out["reason"]) == (3.0, 4, 2, None)
    assert out["mde"] == pytest.approx(detectable_effect(math.sqrt(1.5) / 2, 3), abs=1e-12)
    assert paired_mde([])["reason"] == "fewer than two ranked systems: no pair to compare"
    assert paired_mde([[0.3]])["reason"] == "1 query: a spread of differences needs at least 2"
    flat = paired_mde([[0.5, 0.5, 0.5]])
    assert flat["mde"] is None and flat["reason"].startswith("the per-query differences do not vary")


def test_the_average_over_tasks_adds_the_tasks_variances():
    parts = [{"se": 0.1, "df": 9.0, "n": 10, "n_pairs": 3, "reason": None},
             {"se": 0.2, "df": 19.0, "n": 20, "n_pairs": 3, "reason": None}]
    out = averaged_mde(parts)
    se = math.sqrt(0.1 ** 2 + 0.2 ** 2) / 2  # 0.111803
    df = (0.01 + 0.04) ** 2 / (0.01 ** 2 / 9 + 0.04 ** 2 / 19)  # Welch-Satterthwaite: 26.227
    assert out["se"] == pytest.approx(se, abs=1e-12) and out["df"] == pytest.approx(df, abs=1e-9)
    assert df == pytest.approx(26.227, abs=1e-3)
    assert (out["n"], out["n_pairs"]) == (30, 3)
    assert out["mde"] == pytest.approx(detectable_effect(se, df), abs=1e-12)
    missing = averaged_mde([parts[0], {"se": None, "df": None, "n": 5, "n_pairs": 0, "reason": "why"}])
    assert missing["mde"] is None and missing["reason"] == "why"


# ---------------------------------------------------------------- compare prints it


def _runs():
    """30 queries with one relevant document each: "good" ranks it 1st (RR 1), "mid" 1st on even queries and 2nd on
    odd ones, "mid2" as mid but 1st on query 1 too, "bad" 3rd (RR 1/3)."""
    qrels = {f"q{i}": {"rel": 1} for i in range(30)}
    first, second, third = {"rel": 3.0, "x": 2.0, "y": 1.0}, {"x": 3.0, "rel": 2.0, "y": 1.0}, \
        {"x": 3.0, "y": 2.0, "rel": 1.0}
    good = {q: first for q in qrels}
    mid = {q: first if i % 2 == 0 else second for i, q in enumerate(qrels)}
    mid2 = {q: first if i % 2 == 0 or i == 1 else second for i, q in enumerate(qrels)}
    bad = {q: third for q in qrels}
    return [Run(good, "good"), Run(mid, "mid"), Run(mid2, "mid2"), Run(bad, "bad")], qrels


def test_compare_gives_the_mde_of_each_measure_and_the_pairs_below_it():
    runs, qrels = _runs()
    cmp = compare(runs, qrels, ["RR"], n_permutations=2000, seed=0)
    rr = {r.system: np.array([r.per_query["RR"][f"q{i}"] for i in range(30)]) for r in cmp.systems}
    names = ["good", "mid", "mid2", "bad"]
    variances = [np.var(rr[a] - rr[b], ddof=1) for i, a in enumerate(names) for b in names[i + 1:]]
    (m,) = cmp.mde
    sd = math.sqrt(sum(variances) / 6)
    assert (m.measure, m.n, m.n_pairs, m.df, m.power) == ("RR", 30, 6, 29.0, 0.8)
    assert m.sd_diff == pytest.approx(sd, abs=1e-12)
    assert m.mde == pytest.approx(detectable_effect(sd / math.sqrt(30), 29), abs=1e-12)
    assert 0.05 < m.mde < 0.15
    text = str(cmp)
    assert (f"Minimum detectable effect (paired t-test, alpha=0.05, power 0.8, 30 queries, spread pooled over 6 "
            f"pairs): RR {m.mde:.4f}.") in text
    # mid2 - mid = 0.5 on one query of 30: +0.0167, far below the MDE and not separated
    assert "Closer than it and not separated, so indistinguishable on these queries: mid2 vs mid on RR (+0.0167)." \
        in text
    assert "good vs" not in text.split("Closer than it")[1]
    d = cmp.model_dump(mode="json", exclude_unset=True)
    assert d["mde"][0]["mde"] == pytest.approx(m.mde) and d["mde"][0]["reason"] is None
