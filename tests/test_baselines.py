"""Tests of the baseline private CI tests (privci.baselines): PrivToT and private Kendall."""

import math
import warnings

import numpy as np
import pytest
from scipy import stats

from privci import baselines as B
from privci.baselines import kendall_statistic, private_kendall, privtot
from privci.results import PrivacyRecord, PrivateTestResult


def _categorical_null(rng, n, levels=4):
    """Categorical Z with X independent of Y given Z (both depend on Z)."""
    z = rng.integers(0, levels, size=n).astype(float)
    x = np.sin(z) + rng.normal(size=n)
    y = 0.5 * z + rng.normal(size=n)
    return x, y, z


# --------------------------------------------------------------------------- validation

@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(11)
    return _categorical_null(rng, 120)


TOT_BAD = [
    (dict(epsilon=-1.0), ValueError, "`epsilon` must be a positive finite number; got -1.0"),
    (dict(epsilon=0), ValueError, "`epsilon`"),
    (dict(epsilon=float("nan")), ValueError, "`epsilon`"),
    (dict(epsilon="2"), TypeError, "`epsilon`"),
    (dict(epsilon=1.0, n_subsets=0), ValueError, "`n_subsets` must be an integer >= 1; got 0"),
    (dict(epsilon=1.0, n_subsets=2.5), TypeError, "`n_subsets` must be an integer"),
    (dict(epsilon=1.0, alpha=1.5), ValueError, "`alpha` must be a number strictly between 0 and 1"),
    (dict(epsilon=1.0, alpha0=0.0), ValueError, "`alpha0`"),
    (dict(epsilon=1.0, alpha0=1.0), ValueError, "`alpha0` must be a number strictly between"),
    (dict(epsilon=1.0, rng="seed"), TypeError, "`rng`"),
    (dict(epsilon=1.0, n_subsets=50), ValueError, "at least 3 rows per subset"),
    (dict(epsilon=1.0, ridge_lambda=-2.0), ValueError, "`ridge_lambda`"),
]


@pytest.mark.parametrize("kwargs, exc, match", TOT_BAD)
def test_privtot_validation(data, kwargs, exc, match):
    x, y, z = data
    kwargs = dict(kwargs)
    kwargs.setdefault("ridge_lambda", 0.1)
    with pytest.raises(exc, match=match):
        privtot(x, y, z, **kwargs)


def test_privtot_data_validation(data):
    x, y, z = data
    with pytest.raises(ValueError, match="same number of rows"):
        privtot(x[:-1], y, z, epsilon=1.0)
    xn = x.copy()
    xn[3] = np.nan
    with pytest.raises(ValueError, match="`x` contains NaN"):
        privtot(xn, y, z, epsilon=1.0)
    with pytest.raises(TypeError, match="`z` must be array-like"):
        privtot(x, y, None, epsilon=1.0)


KEN_BAD = [
    (dict(epsilon=0.0), ValueError, "`epsilon` must be a positive finite number; got 0.0"),
    (dict(epsilon=1.0, n_clusters=0), ValueError, "`n_clusters` must be an integer >= 1; got 0"),
    (dict(epsilon=1.0, n_clusters=1000), ValueError, "`n_clusters` must be at most the number of rows"),
    (dict(epsilon=1.0, categorical_z="yes"), TypeError, "`categorical_z` must be True or False"),
    (dict(epsilon=1.0, alternative="two.sided"), ValueError, "`alternative` must be one of"),
    (dict(epsilon=1.0, rng=np.random.RandomState(0)), TypeError, "legacy RandomState"),
]


@pytest.mark.parametrize("kwargs, exc, match", KEN_BAD)
def test_private_kendall_validation(data, kwargs, exc, match):
    x, y, z = data
    with pytest.raises(exc, match=match):
        private_kendall(x, y, z, **kwargs)


def test_private_kendall_data_validation(data):
    x, y, z = data
    with pytest.raises(ValueError, match="`x` must be univariate"):
        private_kendall(np.c_[x, x], y, z, epsilon=1.0)
    with pytest.raises(ValueError, match="same number of rows"):
        private_kendall(x, y[:-2], z, epsilon=1.0)
    with pytest.raises(ValueError, match="every stratum has a single row"):
        private_kendall(x, y, np.arange(x.size), epsilon=1.0, categorical_z=True)


# --------------------------------------------------------------------------- results

def test_privtot_result_and_record(data):
    x, y, z = data
    res = privtot(x, y, z, epsilon=2.0, rng=5, ridge_lambda=0.1)
    assert isinstance(res, PrivateTestResult) and isinstance(res.privacy, PrivacyRecord)
    assert res.method.startswith("Baseline: PrivToT")
    p = res.privacy
    assert (p.epsilon, p.sensitivity, p.noise_scale, p.hardened) == (2.0, 1.0, 0.5, False)
    assert p.ridge_lambda is None and p.kernel_sigma is None and p.bounds == {}
    assert any("not hardened" in c for c in p.caveats)
    assert 0.0 <= res.pvalue <= 1.0 and res.n == x.size
    # same seed, same release
    assert privtot(x, y, z, epsilon=2.0, rng=5, ridge_lambda=0.1).statistic == res.statistic
    assert "Baseline" in repr(res)


def test_privtot_hardened_path(data):
    x, y, z = data
    res = privtot(x, y, z, epsilon=1.0, ridge_lambda=0.1)
    assert res.privacy.hardened and "OpenDP" in res.privacy.mechanism
    assert res.privacy.noise_scale >= 1.0 and not any("not hardened" in c for c in res.privacy.caveats)


def test_private_kendall_result_and_record(data):
    x, y, z = data
    res = private_kendall(x, y, z, epsilon=2.0, categorical_z=True, rng=2)
    stat, sens = kendall_statistic(x, y, z)
    p = res.privacy
    assert res.method.startswith("Baseline: private conditional Kendall")
    assert p.sensitivity == pytest.approx(sens) and p.noise_scale == pytest.approx(sens / 2.0)
    assert p.ridge_lambda is None and p.kernel_sigma is None and p.bounds == {}
    assert not any("k-means" in c for c in p.caveats)
    res_km = private_kendall(x, y, z, epsilon=2.0, n_clusters=4, rng=2)
    assert any("k-means clustering of z is computed on the private data" in c
               for c in res_km.privacy.caveats)
    hard = private_kendall(x, y, z, epsilon=2.0, categorical_z=True)
    assert hard.privacy.hardened and hard.privacy.noise_scale >= sens / 2.0 * (1 - 1e-12)


# --------------------------------------------------------------------------- the statistics

def _naive_kendall(x, y, labels):
    num = W = 0.0
    for lab in np.unique(labels):
        xs, ys = x[labels == lab], y[labels == lab]
        m = xs.size
        if m < 2:
            continue
        S = sum(np.sign(xs[i] - xs[j]) * np.sign(ys[i] - ys[j])
                for i in range(m) for j in range(i + 1, m))
        tau = 2 * S / (m * (m - 1))
        w = 1.0 / ((4 * m + 10) / (9 * m * (m - 1)))
        num += w * tau
        W += w
    return num / math.sqrt(W)


def test_kendall_statistic_matches_naive_and_scipy():
    rng = np.random.default_rng(3)
    x = rng.normal(size=90)
    y = 0.3 * x + rng.normal(size=90)
    labels = rng.integers(0, 5, size=90)
    labels[:1] = 7                                   # a singleton stratum (weight 0)
    xt = np.round(x, 1)                              # with ties
    for xx in (x, xt):
        stat, _ = kendall_statistic(xx, y, labels)
        assert stat == pytest.approx(_naive_kendall(xx, y, labels), rel=1e-12, abs=1e-12)
    # one stratum, no ties: T = tau * sqrt(9 n (n-1) / (4 n + 10)) with scipy's tau
    stat, _ = kendall_statistic(x, y, np.zeros(90))
    tau = stats.kendalltau(x, y).statistic
    assert stat == pytest.approx(tau * math.sqrt(9 * 90 * 89 / (4 * 90 + 10)), rel=1e-12)


def test_tulap_cdf_against_monte_carlo():
    rng = np.random.default_rng(7)
    N = 400_000
    for eps in (0.5, 2.0):
        p = -math.expm1(-eps)
        noise = rng.geometric(p, N) - rng.geometric(p, N) + rng.uniform(-0.5, 0.5, N)
        for t in (-2.3, -0.5, 0.0, 0.2, 1.7):
            # tolerance: 5 binomial standard errors (sd <= 0.5 / sqrt(N) = 8e-4)
            assert B._tulap_cdf(t, eps) == pytest.approx(np.mean(noise <= t), abs=4e-3)


def test_normal_laplace_tail_against_monte_carlo():
    rng = np.random.default_rng(8)
    N = 400_000
    for b in (0.02, 0.5, 2.0):
        v = rng.normal(size=N) + rng.laplace(0, b, N)
        for t in (-1.0, 0.0, 1.96, 3.0):
            assert B._normal_laplace_sf(t, b) == pytest.approx(np.mean(v >= t), abs=4e-3)
    assert B._normal_laplace_sf(1.96, 1e-4) == pytest.approx(stats.norm.sf(1.96), rel=1e-3)


def test_tot_pvalue_uniform_under_exact_binomial():
    # If each subset test has exact level alpha0, the ToT p-value is exactly uniform.
    rng = np.random.default_rng(9)
    m, a0, eps, reps = 10, 0.135, 2.0, 4000
    p = -math.expm1(-eps)
    counts = rng.binomial(m, a0, reps)
    released = counts + rng.geometric(p, reps) - rng.geometric(p, reps) + rng.uniform(-.5, .5, reps)
    pv = np.array([B._tot_pvalue(r, m, a0, eps) for r in released])
    # KS test at level 1e-3 (fails by chance once in a thousand runs; seeded here)
    assert stats.kstest(pv, "uniform").pvalue > 1e-3
    assert abs(np.mean(pv <= 0.05) - 0.05) < 4 * math.sqrt(0.05 * 0.95 / reps)


def test_default_alpha0_is_public_and_sensible():
    a = B.tot_default_alpha0(10, 2.0)
    assert 0.05 < a < 0.5
    assert B.tot_default_alpha0(10, 2.0, 0.05) == a          # cached, deterministic
    res = privtot(*_categorical_null(np.random.default_rng(1), 90), epsilon=2.0, rng=1,
                  ridge_lambda=0.1)
    assert f"alpha0 = {a:g}" in res.method


# --------------------------------------------------------------------------- sensitivity audits

def _tot_count(x, y, z, labels, m, alpha0=0.135, seed=0, **kw):
    kw.setdefault("ridge_lambda", 0.1)
    gens = np.random.default_rng(seed).spawn(m)
    xa, ya, za = (np.asarray(v, float).reshape(len(v), -1) for v in (x, y, z))
    return B._tot_count(xa, ya, za, labels, m, alpha0, kw, gens)


def test_privtot_count_sensitivity_audit():
    """The noised quantity (rejection count) changes by at most 1 between neighbours."""
    rng = np.random.default_rng(21)
    n, m = 300, 10
    z = rng.normal(size=n)
    x = z + 0.3 * rng.normal(size=n)
    y = z + 0.3 * rng.normal(size=n) + 0.15 * x          # mild dependence: p-values near alpha0
    labels = rng.permutation(np.arange(n) % m)
    base = _tot_count(x, y, z, labels, m)
    changes = []
    for trial in range(40):
        i = int(rng.integers(n))
        x2, y2, z2 = x.copy(), y.copy(), z.copy()
        if trial % 2 == 0:                     # random replacement row
            x2[i], y2[i], z2[i] = rng.normal(scale=3, size=3)
        else:                                  # adversarial: extreme aligned / opposed outlier
            sgn = 1 if trial % 4 == 1 else -1
            x2[i], y2[i], z2[i] = 50.0, sgn * 50.0, z[i]
        changes.append(abs(_tot_count(x2, y2, z2, labels, m) - base))
    assert max(changes) <= 1
    assert max(changes) == 1     # the bound is attained: a single row can flip one decision


def test_kendall_sensitivity_audit():
    """|T - T'| <= claimed sensitivity for neighbours differing in one row's (x, y)."""
    rng = np.random.default_rng(22)
    n = 400
    labels = np.r_[np.zeros(250), rng.integers(1, 6, size=150)]     # unbalanced strata
    x = rng.normal(size=n)
    y = 0.2 * x + rng.normal(size=n)
    T, sens = kendall_statistic(x, y, labels)
    sizes = np.unique(labels, return_counts=True)[1]
    W = np.sum(9 * sizes * (sizes - 1) / (4 * sizes + 10))
    exact = 36 * (sizes.max() - 1) / ((4 * sizes.max() + 10) * math.sqrt(W))
    assert sens == pytest.approx(max(exact, 6 / math.sqrt(n)))
    assert exact > 6 / math.sqrt(n)                  # Wang et al.'s 6/sqrt(n) alone is too small here
    worst = 0.0
    for trial in range(60):
        i = int(rng.integers(n))
        x2, y2 = x.copy(), y.copy()
        x2[i], y2[i] = rng.normal(scale=2, size=2)
        worst = max(worst, abs(kendall_statistic(x2, y2, labels)[0] - T))
    # adversarial pair of neighbours: a row in the largest stratum concordant with every
    # other row of its stratum, versus discordant with every one
    i = 0
    xa, ya, xb, yb = x.copy(), y.copy(), x.copy(), y.copy()
    xa[i], ya[i] = 100.0, 100.0
    xb[i], yb[i] = 100.0, -100.0
    adv = abs(kendall_statistic(xa, ya, labels)[0] - kendall_statistic(xb, yb, labels)[0])
    assert max(worst, adv) <= sens * (1 + 1e-12)
    assert adv == pytest.approx(exact, rel=1e-9)      # the bound is attained

    # balanced strata: the exact bound is below 6/sqrt(n), which is then used
    lab_bal = np.repeat(np.arange(4), 100)
    _, sens_bal = kendall_statistic(x, y, lab_bal)
    assert sens_bal == pytest.approx(6 / math.sqrt(n))


# --------------------------------------------------------------------------- noise

def test_discrete_laplace_distribution_numpy_and_opendp():
    eps = 1.0
    b = math.exp(-eps)
    p0 = (1 - b) / (1 + b)
    rng = np.random.default_rng(4)
    draws = np.array([B._discrete_laplace(eps, rng)[0] for _ in range(20000)])
    # P(L = 0) and E|L| = 2 b / (1 - b^2); tolerance ~5 standard errors
    assert np.mean(draws == 0) == pytest.approx(p0, abs=0.02)
    assert np.mean(np.abs(draws)) == pytest.approx(2 * b / (1 - b * b), abs=0.05)
    hard = np.array([B._discrete_laplace(eps, None)[0] for _ in range(1000)])
    assert np.all(hard == np.round(hard))
    # OpenDP draws are not seeded: tolerance 0.06 is ~3.8 standard errors (sd 0.016)
    assert np.mean(hard == 0) == pytest.approx(p0, abs=0.06)
    _, scale, hardened, _ = B._discrete_laplace(eps, None)
    assert hardened and scale == pytest.approx(1.0 / eps, rel=1e-9)


def test_kendall_noise_scale_empirical():
    rng = np.random.default_rng(5)
    x, y, z = _categorical_null(rng, 300)
    T, sens = kendall_statistic(x, y, z)
    eps = 0.5
    noise = np.array([private_kendall(x, y, z, epsilon=eps, categorical_z=True, rng=s).statistic
                      for s in range(1500)]) - T
    # Laplace(b): E|noise| = b; sd of the mean of |noise| is b / sqrt(1500)
    assert np.mean(np.abs(noise)) == pytest.approx(sens / eps, rel=0.1)
    assert abs(np.median(noise)) < 0.1 * sens / eps


# --------------------------------------------------------------------------- type-I error

def _level(n, reps, seed, **tot_kw):
    rng = np.random.default_rng(seed)
    rej_tot = rej_ken = 0
    for r in range(reps):
        x, y, z = _categorical_null(rng, n)
        rej_tot += privtot(x, y, z, epsilon=2.0, rng=rng, ridge_lambda=0.01, **tot_kw).pvalue <= 0.05
        rej_ken += private_kendall(x, y, z, epsilon=2.0, categorical_z=True, rng=rng).pvalue <= 0.05
    return rej_tot / reps, rej_ken / reps


def test_type1_categorical_fast():
    # n = 1000, 60 replications.  Tolerance 0.15: a test with true level 0.05 exceeds it
    # with probability about 0.001 (Binomial(60, 0.05) > 9).
    tot, ken = _level(1000, 60, seed=31)
    assert tot <= 0.15 and ken <= 0.15


@pytest.mark.slow
def test_type1_categorical_n2000():
    # n = 2000, 400 replications each; rejection rate at most 0.08 (a level-0.05 test exceeds
    # it with probability about 0.002).
    tot, ken = _level(2000, 400, seed=32)
    assert tot <= 0.08 and ken <= 0.08
