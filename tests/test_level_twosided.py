"""Two-sided level checks of PrivGCM (issue 21): the rejection rate under a null must be
neither too high (an anti-conservative test) nor too low (a broken eigenvalue floor or
variance term makes the test conservative, and a one-sided check would not see it).

Tolerated error.  With R seeded replications and a test of exact level alpha, the number
of rejections is Binomial(R, alpha); the accepted interval [lo, hi] has
P(X < lo) <= 5e-4 and P(X > hi) <= 5e-4, so a test of exact level fails with probability
at most 1e-3 (the seeds are fixed, so the outcome is reproducible).  For R = 200 and
alpha = 0.1 the interval is [8, 35] rejections (4% to 17.5%).  The designs are simple
nulls on which the test's level is asymptotically exact (x, y and z independent, or x
and y smooth additive functions of z plus independent noise).

The default run has one small cell per path (200 replications at n = 500, a few seconds
each); the ``slow`` versions (``--runslow``) cover a grid of n and epsilon with 1000
replications.
"""

import numpy as np
import pytest
from scipy import stats

import privci

from test_ledger import _one_thread  # noqa: F401  (one BLAS / numba thread, autouse)

ALPHA = 0.1
TAIL = 5e-4


def binomial_interval(reps, alpha=ALPHA, tail=TAIL):
    """[lo, hi] with P(X < lo) <= tail and P(X > hi) <= tail for X ~ Binomial(reps, alpha)."""
    lo = int(stats.binom.ppf(tail, reps, alpha))
    if stats.binom.cdf(lo - 1, reps, alpha) > tail:   # pragma: no cover - ppf's definition
        lo -= 1
    hi = int(stats.binom.isf(tail, reps, alpha))
    return lo, hi


def test_binomial_interval_is_stated_one():
    assert binomial_interval(200) == (8, 35)
    lo, hi = binomial_interval(200)
    assert stats.binom.cdf(lo - 1, 200, ALPHA) <= TAIL
    assert stats.binom.sf(hi, 200, ALPHA) <= TAIL


def _null_spline(g, n):
    z = g.normal(size=n)
    x = np.sin(z) + 0.5 * g.normal(size=n)
    y = np.cos(z) + z / 2 + 0.5 * g.normal(size=n)
    return x, y, z


def _independent(g, n):
    return g.normal(size=n), g.normal(size=n), None


def rejections(design, n, reps, seed, **kw):
    count = 0
    pvals = []
    for r in range(reps):
        g = np.random.default_rng([seed, r])
        x, y, z = design(g, n)
        res = privci.privgcm(x, y, z, rng=g, **kw)
        pvals.append(res.pvalue)
        count += bool(res.pvalue < ALPHA)
    return count, np.asarray(pvals)


def _check(count, reps, label):
    lo, hi = binomial_interval(reps)
    assert lo <= count <= hi, (f"{label}: {count} rejections of {reps} at alpha = {ALPHA}, "
                               f"outside [{lo}, {hi}] (a test of exact level fails this with "
                               f"probability <= {2 * TAIL:g})")


SPLINE_CONSERVATIVE = (
    "by design since the level work (issue 23): the released spline path adds a bias "
    "allowance (debiased nested-fit estimates plus two noise standard deviations) to the "
    "variance and returns p = 1 where its public rule cannot resolve the fit (n = 500, "
    "epsilon = 1 is such a design), so it is conservative on simple nulls; the variance "
    "terms themselves are checked two-sided by "
    "test_spline_variance_terms_are_two_sided")


def test_spline_variance_terms_are_two_sided(monkeypatch):
    """The block spread and the delta-method shift variance V, without the allowance, on a
    null whose regressions the test basis represents (x, y independent of z and of each
    other) at a resolvable design (n = 2000, epsilon = 2, where V matters): 200
    replications at alpha = 0.1 must give [8, 35] rejections.  A broken floor, V or block
    variance fails one side (V on the un-shrunk Gram: 3 of 200)."""
    from privci import _spline as S
    assert S.choose_design(2000, 1, 1, 1, 2.0).certified
    real = S._shift_and_allowance

    def no_allowance(*a, **kw):
        v, b2, e2 = real(*a, **kw)
        return v, 0.0 * b2, e2

    monkeypatch.setattr(S, "_shift_and_allowance", no_allowance)

    def design(g, n):
        return g.normal(size=n), g.normal(size=n), g.normal(size=n)

    count, pv = rejections(design, 2000, 200, 23, epsilon=2.0, x_bound=3.0, y_bound=3.0,
                           z_center=0.0, z_scale=1.0)
    _check(count, 200, "privgcm spline without the allowance")


@pytest.mark.xfail(strict=True, reason=SPLINE_CONSERVATIVE)
def test_spline_default_level_is_two_sided():
    """PrivGCM's default (released spline fit, private z centre and scale) at n = 500,
    epsilon = 1, 200 replications: rejections at alpha = 0.1 within [8, 35]."""
    count, _ = rejections(_null_spline, 500, 200, 21, epsilon=1.0, x_bound=3.0, y_bound=3.0)
    _check(count, 200, "privgcm default (spline)")


def test_unconditional_level_is_two_sided():
    """Unconditional PrivGCM (20 noisy block sums, t on 19 degrees of freedom) at n = 500,
    epsilon = 1, 200 replications: rejections at alpha = 0.1 within [8, 35]."""
    count, pv = rejections(_independent, 500, 200, 22, epsilon=1.0, x_bound=3.0, y_bound=3.0)
    _check(count, 200, "privgcm unconditional")
    # and the p-values are not piled up at 1 (a conservative test's signature)
    assert np.mean(pv > 0.9) < 0.2


@pytest.mark.slow
@pytest.mark.xfail(strict=False, reason=SPLINE_CONSERVATIVE)
@pytest.mark.parametrize("n,eps", [(500, 0.5), (500, 4.0), (2000, 1.0), (2000, 8.0)])
def test_spline_default_level_grid_slow(n, eps):
    count, _ = rejections(_null_spline, n, 1000, 31, epsilon=eps, x_bound=3.0, y_bound=3.0)
    _check(count, 1000, f"privgcm default (spline), n = {n}, epsilon = {eps}")


@pytest.mark.slow
@pytest.mark.parametrize("n,eps", [(200, 0.5), (2000, 1.0), (2000, 8.0)])
def test_unconditional_level_grid_slow(n, eps):
    count, _ = rejections(_independent, n, 1000, 32, epsilon=eps, x_bound=3.0, y_bound=3.0)
    _check(count, 1000, f"privgcm unconditional, n = {n}, epsilon = {eps}")


@pytest.mark.slow
@pytest.mark.parametrize("n,eps", [(500, 1.0), (2000, 4.0)])
def test_krr_blocks_independent_level_slow(n, eps):
    """KRR path with 25 blocks where the regression has nothing to fit (x, y independent of
    z): the level is exact there, so both sides are checked."""
    def design(g, m):
        return g.normal(size=m), g.normal(size=m), g.normal(size=m)
    count, _ = rejections(design, n, 1000, 33, epsilon=eps, x_bound=3.0, y_bound=3.0,
                          regression="krr", n_blocks=25)
    _check(count, 1000, f"privgcm krr 25 blocks, n = {n}, epsilon = {eps}")
