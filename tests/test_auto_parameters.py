"""_krr_privgcm(x_bound="auto", ...): bounds and centres released with differential privacy (issue 15)."""

from fractions import Fraction

import numpy as np
import pytest

import privci


def _krr_privgcm(*args, **kw):
    """privgcm with the kernel ridge regression (the tests of the KRR path)."""
    import privci as _p
    kw.setdefault("regression", "krr")
    return _p.privgcm(*args, **kw)


def _shifted(rng, n, beta=0.0, shift=50.0):
    z = rng.normal(size=n)
    x = shift + np.sin(z) + rng.normal(size=n)
    y = shift + np.cos(z) + beta * x + rng.normal(size=n)
    return x, y, z


def test_auto_parameters_are_released_and_composed():
    rng = np.random.default_rng(1)
    x, y, z = _shifted(rng, 2000)
    res = _krr_privgcm(x, y, z, epsilon=3.0, x_bound="auto", y_bound="auto",
                         x_center="auto", y_center="auto", rng=5)
    p = res.privacy
    assert np.isfinite(res.statistic) and 0 <= res.pvalue <= 1
    assert p.epsilon == 3.0
    # released centres near the data, bounds of the order of the spread (not 1e9)
    assert abs(p.bounds["x_center"][0] - 50) < 1 and abs(p.bounds["y_center"][0] - 50) < 1
    assert 0.2 < p.bounds["x_bound"][0] < 10 and 0.2 < p.bounds["y_bound"][0] < 10
    assert "0.3 for the released bounds/centres" in p.guarantee
    assert "0.3 for the released centres" in p.guarantee and "2.4 for the" in p.guarantee
    # same seed, same result (seeded path)
    again = _krr_privgcm(x, y, z, epsilon=3.0, x_bound="auto", y_bound="auto",
                           x_center="auto", y_center="auto", rng=5)
    assert again.statistic == res.statistic and again.privacy.bounds == p.bounds


def test_auto_bound_only_keeps_public_centre_and_charges_once():
    rng = np.random.default_rng(2)
    x, y, z = _shifted(rng, 1500, shift=0.0)
    budget = privci.PrivacyBudget(epsilon=2.0)
    res = _krr_privgcm(x, y, z, epsilon=1.5, x_bound="auto", y_bound=4.0,
                         bounds_epsilon=0.5, budget=budget)
    assert res.privacy.bounds["x_center"] == (0.0,) and res.privacy.bounds["y_bound"] == (4.0,)
    assert "0.5 for the released bounds/centres (x_bound[0])" in res.privacy.guarantee
    assert Fraction(budget.spent) == Fraction(1.5)
    with pytest.raises(privci.BudgetExceededError):
        _krr_privgcm(x, y, z, epsilon=1.0, x_bound="auto", y_bound=4.0, budget=budget)
    assert Fraction(budget.spent) == Fraction(1.5)


@pytest.mark.parametrize("kwargs,match", [
    (dict(x_bound="wide"), r"`x_bound` must be a number, one per column, or 'auto'"),
    (dict(x_center="median"), r"`x_center` must be a number, one per column, or 'auto'"),
    (dict(bounds_epsilon=0.1), r"`bounds_epsilon` is only used with an 'auto'"),
    (dict(x_bound="auto", bounds_epsilon=1.0), r"`bounds_epsilon` must be smaller than"),
    (dict(x_center="auto", bounds_epsilon=0.5, center_epsilon=0.5),
     r"`center_epsilon` must be smaller than"),
])
def test_auto_bad_input(kwargs, match):
    rng = np.random.default_rng(3)
    x, y, z = _shifted(rng, 100)
    args = dict(epsilon=1.0, x_bound=4.0, y_bound=4.0, rng=0)
    args.update(kwargs)
    with pytest.raises(ValueError, match=match):
        _krr_privgcm(x, y, z, **args)


def test_auto_level_on_a_shifted_design_quick():
    """X and Y shifted by +50, no public knowledge of the range: 120 null data sets at
    n = 1000, epsilon = 2; rejection rate at most 0.12 (a correct 5% test exceeds this with
    probability below 0.2%)."""
    ss = np.random.SeedSequence(77)
    rej = 0
    for child in ss.spawn(120):
        rng = np.random.default_rng(child)
        x, y, z = _shifted(rng, 1000)
        res = _krr_privgcm(x, y, z, epsilon=2.0, x_bound="auto", y_bound="auto",
                             x_center="auto", y_center="auto", rng=rng)
        rej += res.pvalue <= 0.05
    assert rej / 120 <= 0.12


def test_privcrt_auto_bounds_are_released_and_composed():
    rng = np.random.default_rng(5)
    n = 2000
    z = rng.normal(size=n)
    x = np.sin(z) + rng.normal(size=n)
    y = 30 + 2 * (x - np.sin(z)) + rng.normal(size=n)
    mx = privci.GaussianModelX(lambda zz: np.sin(zz[:, 0]), 1.0)
    res = privci.privcrt(x, y, z, epsilon=2.0, model_x=mx, y_bound="auto",
                         x_residual_bound="auto", y_center="auto", rng=1)
    b = res.privacy.bounds
    assert abs(b["y_center"] - 30) < 1 and 0.5 < b["x_residual_bound"] < 5
    assert 0.5 < b["y_bound"] < 10
    assert "0.2 for the released bounds/centres" in res.privacy.guarantee
    assert "1.8 for the rank" in res.privacy.guarantee
    assert res.pvalue == 0.05          # a strong dependence is found
    with pytest.raises(ValueError, match="need a privacy budget"):
        privci.crt_statistics(x, y, z, model_x=mx, y_bound="auto", x_residual_bound=4)
    with pytest.raises(ValueError, match="`y_bound` must be a number or 'auto'"):
        privci.privcrt(x, y, z, epsilon=2.0, model_x=mx, y_bound="wide", x_residual_bound=4)


def test_privcrt_auto_level_quick():
    """Null with Y shifted by +30: 100 data sets, n = 1000, epsilon = 2, m = 19; rejection rate
    at most 0.12 (a correct 5% test exceeds it with probability below 1%)."""
    mx = privci.GaussianModelX(lambda zz: np.sin(zz[:, 0]), 1.0)
    rej = 0
    for child in np.random.SeedSequence(31).spawn(100):
        rng = np.random.default_rng(child)
        z = rng.normal(size=1000)
        x = np.sin(z) + rng.normal(size=1000)
        y = 30 + np.cos(z) + rng.normal(size=1000)
        rej += privci.privcrt(x, y, z, epsilon=2.0, model_x=mx, y_bound="auto",
                              x_residual_bound="auto", y_center="auto", rng=rng).pvalue <= 0.05
    assert rej / 100 <= 0.12


def test_z_scale_public_and_private():
    """z_scale: a public per-column scale equals dividing z by hand; 'auto' releases private
    scales (part of bounds_epsilon, stated in the guarantee) near the columns' sds."""
    rng = np.random.default_rng(8)
    n = 1500
    z = rng.normal(size=(n, 2)) * [100.0, 0.01]
    x = np.sin(z[:, 0] / 100) + rng.normal(size=n)
    y = np.cos(z[:, 0] / 100) + rng.normal(size=n)
    a = _krr_privgcm(x, y, z, epsilon=2.0, x_bound=4, y_bound=4, z_scale=[100, 0.01], rng=3)
    b = _krr_privgcm(x, y, z / [100, 0.01], epsilon=2.0, x_bound=4, y_bound=4, rng=3)
    assert a.statistic == pytest.approx(b.statistic, rel=1e-12)
    c = _krr_privgcm(x, y, z, epsilon=2.0, x_bound=4, y_bound=4, z_scale="auto", rng=3)
    s = c.privacy.bounds["z_scale"]
    assert 70 < s[0] < 140 and 0.007 < s[1] < 0.014
    assert "0.2 for the released scales of z" in c.privacy.guarantee
    with pytest.raises(ValueError, match="`z_scale` must be None, a positive number"):
        _krr_privgcm(x, y, z, epsilon=2.0, x_bound=4, y_bound=4, z_scale="sd")
    with pytest.raises(ValueError, match="`z_scale` needs z"):
        _krr_privgcm(x, y, None, epsilon=2.0, x_bound=4, y_bound=4, z_scale=2.0)


def test_guarantee_says_when_bounds_were_released():
    rng = np.random.default_rng(12)
    x, y, z = _shifted(rng, 500)
    auto = _krr_privgcm(x, y, z, epsilon=2.0, x_bound="auto", y_bound=4.0, x_center=50.0,
                          y_center=50.0, rng=1)
    public = _krr_privgcm(x, y, z, epsilon=2.0, x_bound=4.0, y_bound=4.0, x_center=50.0,
                            y_center=50.0, rng=1)
    assert "released within this epsilon" in auto.privacy.guarantee
    assert "given the public bounds" in public.privacy.guarantee
    assert "released" not in public.privacy.guarantee
    # the products' epsilon is stated next to the products' mechanism
    assert auto.privacy.mechanism.split(";")[0].endswith("(epsilon 1.8)")
