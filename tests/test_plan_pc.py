"""privci.plan.plan_pc: a whole PC run planned from public numbers (issue 24)."""

import math

import numpy as np
import pytest

from privci.plan import PCPlan, plan_pc


def test_release_plan_orders_and_class():
    pl = plan_pc(10_000, 5, 5.0)
    assert isinstance(pl, PCPlan) and pl.method == "release"
    assert [o["order"] for o in pl.orders] == [0, 1, 2, 3]
    assert pl.power_class == "adequate" and pl.resolvable_orders == (0, 1, 2, 3)
    # the linear rung (pc's default): ((V + 1/2)^2 + V) / (2 epsilon)
    assert pl.statistics == "linear" and pl.noise_scale == pytest.approx(17.625 / 5.0)
    assert "adequate" in str(pl) and pl.untested == "" and pl.smallest_epsilon is None
    add = plan_pc(10_000, 5, 5.0, statistics="additive")
    assert add.noise_scale == pytest.approx(30 / 5.0)         # (V^2 + V) / epsilon


def test_release_plan_more_epsilon_detects_smaller_correlations():
    lo = plan_pc(10_000, 8, 2.0, max_order=1)
    hi = plan_pc(10_000, 8, 10.0, max_order=1)
    for a, b in zip(lo.orders, hi.orders):
        assert b["detectable_correlation"] < a["detectable_correlation"]
        assert b["power"] >= a["power"]
    assert plan_pc(1_000, 8, 0.5).power_class == "inadequate"


def test_plan_power_rule_decides_resolvable():
    strict = plan_pc(10_000, 8, 2.0, power_rule=0.05, max_order=1)
    loose = plan_pc(10_000, 8, 2.0, power_rule=None, max_order=1)
    assert len(strict.resolvable_orders) <= len(loose.resolvable_orders)


@pytest.mark.parametrize("statistics", ["additive", "linear"])
def test_plan_agrees_with_a_release_on_independent_columns(statistics):
    import privci
    rng = np.random.default_rng(5)
    X = rng.normal(size=(10_000, 5))
    # the plan is for PC's queries: its knots or clip, and the assumption PC states
    from privci.release import DEFAULT_KNOTS
    plan = plan_pc(10_000, 5, 2.0, max_order=1, statistics=statistics)
    if statistics == "linear":
        tab = privci.release(X, epsilon=2.0, bounds=4.0, rng=1, statistics="linear",
                             clip=plan.clip)
        det = tab.test(0, 1, [2], assume_linear=True).detectable_correlation
    else:
        tab = privci.release(X, epsilon=2.0, bounds=4.0, rng=1, knots=DEFAULT_KNOTS)
        det = tab.test(0, 1, [2], assume_smooth=True).detectable_correlation
    planned = plan.orders[1]["detectable_correlation"]
    assert 0.5 < det / planned < 2.0


def test_plan_says_which_edges_stay_untested_and_what_resolves_them():
    low = plan_pc(1_000, 12, 1.0)
    assert low.power_class == "inadequate" and "complete graph" in low.untested
    assert "untested" in str(low)
    # the smallest epsilon (and n) it names is adequate, one grid step below is not
    assert plan_pc(1_000, 12, low.smallest_epsilon).power_class == "adequate"
    assert plan_pc(1_000, 12, low.smallest_epsilon / 1.25).power_class != "adequate"
    assert plan_pc(low.smallest_n, 12, 1.0).power_class == "adequate"
    part = plan_pc(10_000, 8, 2.0, statistics="additive")
    assert part.power_class == "partial" and "1 or more columns" in part.untested
    assert part.smallest_epsilon > 2.0 and part.smallest_n > 10_000


def test_sieve_and_per_test_plans():
    sv = plan_pc(10_000, 8, 5.0, method="sieve")
    assert sv.per_query_epsilon == pytest.approx(5.0 / 28, rel=1e-9)
    assert "28 rounds" in sv.details and sv.power_class == "adequate"
    pt = plan_pc(10_000, 8, 5.0, method="per-test")
    assert pt.per_query_epsilon == pytest.approx(5.0 / 7 / 28)
    assert len(pt.orders) == 1 and math.isnan(pt.noise_scale)


@pytest.mark.parametrize("kw, msg", [
    (dict(n=1), "n"), (dict(n_variables=1), "n_variables"), (dict(epsilon=0.0), "epsilon"),
    (dict(method="fci"), "method"), (dict(alpha=2.0), "alpha"), (dict(effect=1.5), "effect"),
    (dict(power_rule=2.0), "power_rule"), (dict(knots=0), "knots"),
    (dict(statistics="cubic"), "statistics"), (dict(clip=1.5), "clip"),
    (dict(max_order=-1), "max_order"), (dict(draws=0), "draws"),
])
def test_plan_pc_validates(kw, msg):
    args = dict(n=1000, n_variables=4, epsilon=1.0)
    args.update(kw)
    with pytest.raises(ValueError, match=msg):
        plan_pc(args.pop("n"), args.pop("n_variables"), args.pop("epsilon"), **args)


def test_plan_pc_docstring_examples():
    # plan_pc lives in privci.plan (its examples run here too, by name)
    import doctest

    import privci.plan as mod
    result = doctest.testmod(mod, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0
