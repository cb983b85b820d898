"""perfdash.ab: the one sequential paired A/B decision (bisect steps, confirmation, verification, confirm requests)."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
from scipy.stats import chi2

from perfdash.ab import (
    PRIOR_FIRST_LOOK,
    PRIOR_REJECT,
    SCALE_QUANTILE,
    AbPolicy,
    NoisePrior,
    _chi2_quantile,
    balanced_order,
    decide,
    noise_scale,
    run_ab,
)
from perfdash.metric_registry import Better
from perfdash.noise import robust_cv


def _simulated(rng: random.Random, a_level: float, b_level: float, draw) -> callable:  # type: ignore[valid-type]
    def measure(side: str, _index: int) -> float:
        return (a_level if side == "A" else b_level) * math.exp(draw(rng))
    return measure


def _gauss(cv: float):
    return lambda rng: rng.gauss(0.0, cv)


def _t3(cv: float):
    # Student-t, 3 degrees of freedom, scaled to that standard deviation: heavy tails (a busy machine's runs)
    return lambda rng: cv * rng.gauss(0.0, 1.0) / math.sqrt(sum(rng.gauss(0.0, 1.0) ** 2 for _ in range(3)) / 3) \
        / math.sqrt(3.0)


@pytest.mark.parametrize(("name", "draw", "boundary", "pooled", "exact"), [
    ("gauss 5%", _gauss(0.05), 5.0, 0, False),
    ("t3 5%", _t3(0.05), 5.0, 0, False),
    ("gauss 2%, 1% boundary", _gauss(0.02), 1.0, 0, False),
    ("gauss 10%, 5% boundary", _gauss(0.10), 5.0, 0, False),
    ("gauss 5%, 30 residuals pooled", _gauss(0.05), 5.0, 30, False),
    ("gauss 5%, a step: exact, 30 residuals pooled", _gauss(0.05), 5.0, 30, True),
])
def test_false_different_rate_on_a_a_data_is_at_most_one_percent(name, draw, boundary, pooled, exact):
    """1,000 sequential A/Bs of two identical builds each: "different" at most 1 % of the time (the SPRT's bound
    alpha = 0.01, with an estimated scale). The cases put a pair's spread at 1.4 to 2.8 boundaries; the last two are
    a verification's and a step's A/B (scale pooled with earlier residuals, first look at 2 pairs; a step's test is
    exact, no mixture). bench/ab_false_rate.py runs the first five 5,000 times (figures in bench/README.md)."""
    rng = random.Random(f"aa-{name}")
    policy = AbPolicy(direction=Better.LOWER, boundary_pct=boundary, alpha=0.01, start=2 if pooled else 6,
                      exact=exact)
    answers = [run_ab(_simulated(rng, 100.0, 100.0, draw), policy, rng, purpose="aa", a="x", b="x",
                      noise=[draw(rng) - draw(rng) for _ in range(pooled)]).answer
               for _ in range(1000)]
    rate = answers.count("different") / len(answers)
    assert rate <= 0.01, (name, rate)


def test_low_noise_decides_on_few_pairs_and_pooled_noise_on_fewer():
    """Cheap when the noise is low: 2 % noise against a 5 % boundary needs a handful of pairs, not Pinpoint's 10+."""
    rng = random.Random(8)
    policy = AbPolicy(boundary_pct=5.0)
    alone = [run_ab(_simulated(rng, 100.0, level, _gauss(0.02)), policy, rng, purpose="confirm", a="g", b="b")
             for level in (100.0, 105.0) for _ in range(100)]
    assert [r.answer for r in alone[:100]].count("same") >= 97 and [r.answer for r in alone[100:]].count(
        "different") >= 97
    alone_pairs = float(np.median([len(r.samples_a) for r in alone]))
    assert alone_pairs <= 12
    pooled_noise = [_gauss(0.02)(rng) - _gauss(0.02)(rng) for _ in range(30)]
    step = AbPolicy(boundary_pct=5.0, start=2)
    steps = [run_ab(_simulated(rng, 100.0, level, _gauss(0.02)), step, rng, purpose="step", a="g", b="c",
                    noise=pooled_noise) for level in (100.0, 105.0) for _ in range(100)]
    assert float(np.median([len(r.samples_a) for r in steps])) < alone_pairs
    assert steps[0].pooled_residuals == 30 and steps[0].rounds[0].residuals == 31


def _series_prior(rng: random.Random, cv: float, runs: int = 30) -> NoisePrior:
    """The prior a service request carries: the robust CV of ``runs`` nightly results of that noise."""
    return NoisePrior.of_series(robust_cv([100.0 * math.exp(rng.gauss(0.0, cv)) for _ in range(runs)]), runs)


@pytest.mark.parametrize(("name", "true_cv", "prior_cv"), [
    ("gauss 5%, the series' own estimate", 0.05, None),
    ("gauss 5%, a history 4x quieter than the A/B", 0.05, 0.0125),
])
def test_a_noise_prior_keeps_the_false_different_rate_at_most_one_percent(name, true_cv, prior_cv):
    """The series' noise as a prior (first look at PRIOR_FIRST_LOOK pairs, as perfbisect's confirmation): A/A stays
    at <= 1 % "different" when the prior is the series' own estimate, and when the history is 4x quieter than the
    pairs (they overrule it: without that rule, 5.5 % from 2 pairs)."""
    rng = random.Random(f"aa-prior-{name}")
    answers = []
    for _ in range(1000):
        prior = _series_prior(rng, true_cv) if prior_cv is None else NoisePrior.of_series(prior_cv, 30)
        policy = AbPolicy(boundary_pct=5.0, start=PRIOR_FIRST_LOOK, prior=prior)
        answers.append(run_ab(_simulated(rng, 100.0, 100.0, _gauss(true_cv)), policy, rng, purpose="aa", a="x",
                              b="x").answer)
    assert answers.count("different") / len(answers) <= 0.01, (name, answers.count("different"))


def test_a_noise_prior_is_pooled_with_the_pairs_and_overruled_by_noisier_ones():
    prior = NoisePrior.of_series(0.02, 30)
    assert prior.scale == pytest.approx(0.02 * math.sqrt(2)) and prior.weight == pytest.approx(0.368 * 30)
    assert NoisePrior.of_series(0.02, 1000).weight == 20.0  # capped: the pairs take over
    assert NoisePrior.of_series(0.0, 30).scale == pytest.approx(0.005 * math.sqrt(2))  # a flat history: the floor
    # before any pair: the prior alone; without one, nothing to go on
    assert noise_scale([], prior) is not None and noise_scale([]) is None and noise_scale([0.01]) is None
    quiet = [0.028, -0.028, 0.028, -0.028]  # the prior's own spread: the bound comes down with the prior
    assert noise_scale(quiet, prior) < noise_scale(quiet)
    loud = [0.2, -0.2, 0.2, -0.2]  # ten times it: the pairs overrule the prior, the scale is theirs alone
    assert noise_scale(loud, prior) == noise_scale(loud)


def test_a_noise_prior_decides_a_clear_case_on_fewer_pairs():
    """A 10 % slowdown in 2 % noise, boundary 5 %: with the series' noise known, the A/B looks at PRIOR_FIRST_LOOK
    pairs and decides there; without it, its first look is at 6 and its scale rests on its own few residuals."""
    rng = random.Random(12)
    pairs = {}
    for known in (False, True):
        records = [run_ab(_simulated(rng, 100.0, 110.0, _gauss(0.02)),
                          AbPolicy(boundary_pct=5.0, start=PRIOR_FIRST_LOOK if known else 6,
                                   prior=_series_prior(rng, 0.02) if known else None),
                          rng, purpose="confirm", a="g", b="b") for _ in range(100)]
        assert all(r.answer == "different" for r in records)
        assert all((r.prior_scale_pct is not None) == known for r in records)
        pairs[known] = float(np.median([len(r.samples_a) for r in records]))
    assert pairs[True] < pairs[False], pairs


def test_one_outlier_cannot_decide_and_a_huge_change_decides_at_once():
    """Each pair's evidence is bounded (the t ratio, clipped at its peak): a 30 % outlier run on B among A/A pairs
    is not "different" by itself; a 45-fold slowdown (clipped, not discounted) is "different" at the first look."""
    policy = AbPolicy(boundary_pct=5.0, start=2)
    noise = [0.02 * z for z in (1.1, -0.4, 0.8, -1.3, 0.2, -0.9, 1.6, -0.1, 0.5, -0.7) * 3]
    assert decide([100.0, 100.0], [130.0, 100.5], policy, noise=noise).answer == "unknown"
    huge = decide([10.0, 10.1, 9.9, 10.0], [450.0, 452.0, 449.0, 451.0], AbPolicy(boundary_pct=5.0))
    assert huge.answer == "different" and huge.p_different is not None and huge.p_different <= 0.01


def test_balanced_random_order():
    rng = random.Random(3)
    for pairs in (10, 11, 40):
        order = balanced_order(pairs, rng)
        a_first = sum(p == ("A", "B") for p in order)
        assert len(order) == pairs and abs(a_first - (pairs - a_first)) <= 1
        assert all(sorted(p) == ["A", "B"] for p in order)
    # random, not alternating: two draws of the same size differ
    assert balanced_order(40, random.Random(1)) != balanced_order(40, random.Random(2))


def test_a_real_regression_is_different_and_no_change_is_same():
    rng = random.Random(4)
    policy = AbPolicy(direction="lower", boundary_pct=5.0)
    slower = run_ab(_simulated(rng, 100.0, 110.0, _gauss(0.02)), policy, rng, purpose="confirm", a="g", b="b")
    # decided on a few pairs: the change is "different", its size only roughly known (a pair's spread is 2.8 %)
    assert slower.answer == "different" and slower.rounds[-1].change_pct == pytest.approx(10, abs=6)
    assert len(slower.samples_a) == len(slower.samples_b) == slower.rounds[-1].pairs
    assert sorted(slower.order) == sorted("AB" * slower.rounds[-1].pairs)
    same = run_ab(_simulated(rng, 100.0, 100.0, _gauss(0.02)), policy, rng, purpose="confirm", a="g", b="b")
    assert same.answer == "same" and not same.capped
    # a speedup (higher is better) that grows is no regression
    faster = run_ab(_simulated(rng, 1.0, 1.1, _gauss(0.02)), AbPolicy(direction="higher", boundary_pct=5.0), rng,
                    purpose="confirm", a="g", b="b")
    assert faster.answer == "same"


def test_undecided_at_the_cap_is_unknown_and_says_so():
    rng = random.Random(5)
    policy = AbPolicy(boundary_pct=5.0, start=4, cap=8)
    # 2.5 % is halfway between the two levels: neither can be shown with 8 pairs of 30 % noise
    record = run_ab(_simulated(rng, 100.0, 102.5, _gauss(0.30)), policy, rng, purpose="step", a="g", b="c")
    assert record.answer == "unknown" and record.capped and record.cap == 8
    assert [r.pairs for r in record.rounds] == [4, 5, 6, 7, 8] and "at the cap" in record.rounds[-1].reason
    assert all(r.llr is not None and r.scale_pct is not None for r in record.rounds)


def test_always_valid_p_values_follow_the_likelihood_ratio():
    rng = random.Random(6)
    record = run_ab(_simulated(rng, 100.0, 110.0, _gauss(0.05)), AbPolicy(boundary_pct=5.0), rng, purpose="confirm",
                    a="g", b="b")
    last = record.last
    assert record.answer == "different" and last.llr is not None and last.llr >= record.llr_bound
    assert last.p_different == pytest.approx(math.exp(-last.llr)) and last.p_same == 1.0


def test_statuses_compare_failure_rates():
    policy = AbPolicy(start=4)
    assert decide(["pass"] * 4, ["fail_accuracy"] * 4, policy).answer == "different"
    assert decide(["pass"] * 4, ["pass"] * 4, policy).answer == "same"
    assert decide(["pass"] * 4, ["pass", "pass", "crash", "pass"], policy).answer == "unknown"


def test_the_scale_bound_takes_scipy_s_chi_squared_quantile_to_the_last_bit():
    """noise_scale calls the special function behind scipy.stats.chi2.ppf directly (for speed): the same numbers, so
    a scipy that computes the quantile another way fails here rather than moving decisions unnoticed."""
    for q in (SCALE_QUANTILE, PRIOR_REJECT):
        for dof in (0.368, 2, 5.5, 11.04, 31, 180):
            assert _chi2_quantile(q, dof) == float(chi2.ppf(q, dof)), (q, dof)


def test_samples_must_pair_up_and_be_positive():
    with pytest.raises(ValueError):
        decide([1.0, 2.0], [1.0], AbPolicy())
    with pytest.raises(ValueError):
        decide([1.0, -2.0], [1.0, 1.0], AbPolicy())
    assert np.isfinite(AbPolicy().alpha_per_look)


def test_a_deterministic_status_change_is_decided_on_one_pair():
    rng = random.Random(7)
    record = run_ab(lambda side, _i: "pass" if side == "A" else "fail_accuracy", AbPolicy(start=1), rng,
                    purpose="confirm", a="g", b="b")
    assert record.answer == "different" and len(record.rounds) == 1 and record.samples_b == ["fail_accuracy"]


def test_a_continuation_starts_from_the_pairs_it_carries_and_measures_only_new_ones():
    """A verification that continues a step of the same sides: the step's pairs come first, unmeasured; its first
    look is on them plus the new ones; only the same two sides can be continued."""
    rng = random.Random(11)
    step = run_ab(_simulated(rng, 100.0, 105.0, _gauss(0.02)), AbPolicy(boundary_pct=5.0, exact=True), rng,
                  purpose="step", a="p", b="c")
    assert step.answer == "different"
    measured: list[tuple[str, int]] = []
    noisy = _simulated(rng, 100.0, 105.0, _gauss(0.02))

    def measure(side, index):
        measured.append((side, index))
        return noisy(side, index)

    carried = len(step.samples_a)
    policy = AbPolicy(boundary_pct=5.0, alpha=0.001, start=carried + 2)
    verify = run_ab(measure, policy, rng, purpose="verify", a="p", b="c", carried=step)
    assert verify.carried_pairs == carried and verify.order.startswith(step.order)
    assert verify.samples_a[:carried] == step.samples_a and verify.samples_b[:carried] == step.samples_b
    assert verify.rounds[0].pairs == carried + 2  # the first look: the carried pairs and two new ones
    assert sorted(measured) == sorted((side, i) for side in "AB" for i in range(carried, len(verify.samples_a)))
    assert verify.answer == "different" and verify.last.llr >= math.log(1000)
    with pytest.raises(ValueError, match="same two sides"):
        run_ab(measure, policy, rng, purpose="verify", a="q", b="c", carried=step)
