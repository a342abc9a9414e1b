"""Unconditional tests (z=None): PC's order-0 tests (issue 14, item 1).

Without conditioning there is no regression: the residuals are the clipped, scaled data,
and one row moves only its own product (by at most 2) or its own term of T (by at most 2).
"""

import numpy as np
import pytest

import privci


def test_sensitivity_audit_without_z():
    """Definitional check: replacing any row by extreme values moves the products by at most
    the stated sensitivity 2 (L1), and each T_j by at most 2."""
    rng = np.random.default_rng(1)
    n = 40
    x, y = rng.normal(size=n), rng.normal(size=n)
    a = privci.residual_products(x, y, None, x_bound=1.5, y_bound=2.0)
    assert a.sensitivity == 2.0
    mx = privci.GaussianModelX(np.zeros(n), 1.0)
    xr = rng.normal(size=(5, n))
    ca = privci.crt_statistics(x, y, None, model_x=mx, x_resamples=xr, y_bound=2.0,
                               x_residual_bound=1.5)
    assert ca.sensitivity == 2.0
    worst_p = worst_t = 0.0
    for i in range(n):
        for new in [(1e308, -1e308), (-3.0, 3.0), (0.0, 0.0), (5e-324, -0.0)]:
            x2, y2 = x.copy(), y.copy()
            x2[i], y2[i] = new
            b = privci.residual_products(x2, y2, None, x_bound=1.5, y_bound=2.0)
            worst_p = max(worst_p, np.abs(a.products - b.products).sum() / a.sensitivity)
            xr2 = xr.copy()
            xr2[:, i] = new[0]
            cb = privci.crt_statistics(x2, y2, None, model_x=mx, x_resamples=xr2, y_bound=2.0,
                                       x_residual_bound=1.5)
            worst_t = max(worst_t, np.max(np.abs(ca.statistics - cb.statistics)) / 2.0)
    assert worst_p <= 1.0 + 1e-12 and worst_t <= 1.0 + 1e-12
    assert worst_p > 0.5   # the bound is nearly attained by sign flips at the bounds


@pytest.mark.parametrize("test", ["privgcm", "privcrt"])
def test_level_without_z_quick(test):
    """X independent of Y (no Z): 200 data sets, n = 400, epsilon = 1; the rejection rate at
    0.05 lies in [0.01, 0.10] (a correct test fails with probability about 0.3%)."""
    ss = np.random.SeedSequence(2024 if test == "privgcm" else 2025)
    rej = 0
    for child in ss.spawn(200):
        rng = np.random.default_rng(child)
        x, y = rng.normal(size=400), rng.normal(size=400)
        if test == "privgcm":
            res = privci.privgcm(x, y, None, epsilon=1.0, x_bound=3, y_bound=3, rng=rng)
        else:
            res = privci.privcrt(x, y, None, epsilon=1.0,
                                 model_x=privci.GaussianModelX(lambda zz: np.zeros(len(zz)), 1.0),
                                 y_bound=3, x_residual_bound=3, rng=rng)
        rej += res.pvalue <= 0.05
    assert 0.01 <= rej / 200 <= 0.10


def test_power_without_z():
    """A clear dependence is found: n = 2000, Y = 0.5 X + noise, epsilon = 1."""
    rng = np.random.default_rng(7)
    x = rng.normal(size=2000)
    y = 0.5 * x + rng.normal(size=2000)
    res = privci.privgcm(x, y, None, epsilon=1.0, x_bound=3, y_bound=3, rng=1)
    assert res.pvalue < 1e-3 and res.privacy.n_blocks == 20
    assert "without conditioning" in res.method
    assert "(x_i, y_i)" in res.privacy.guarantee and "z_i" not in res.privacy.guarantee
