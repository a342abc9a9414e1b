"""PrivCRT and the non-private CRT: lemma, sensitivity audit, exact p-values, calibration."""

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st, target
from scipy import stats

import naive
import privci
from privci import _kernels, mechanisms

AUDIT = {"max_ratio": 0.0}


def fs(z, s=2.0):
    return np.exp(-s ** 2 / 2) * np.sin(s * z)


MX = privci.GaussianModelX(lambda z: fs(z[:, 0]), 1.0)


# --------------------------------------------------------------------------- lemma

@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(-100, 100), min_size=2, max_size=30), st.floats(0.01, 10),
       st.integers(0, 2**31 - 1))
def test_lemma_sorted_values_and_scores_move_little(values, delta, seed):
    """Perturb each T_j by at most Delta_T: every sorted value moves by at most Delta_T and
    every score by at most 1 (the paper's Lemma 'Sensitivity of the score function')."""
    T = np.array(values)
    rng = np.random.default_rng(seed)
    T2 = T + rng.uniform(-delta, delta, size=T.size) * rng.choice([0.0, 1.0, 1.0], size=T.size)
    Q, Q2 = np.sort(T)[::-1], np.sort(T2)[::-1]
    assert np.all(np.abs(Q - Q2) <= delta * (1 + 1e-12))
    s, s2 = _kernels.rank_scores(T, delta), _kernels.rank_scores(T2, delta)
    target(float(np.max(np.abs(s - s2))))
    assert np.all(np.abs(s - s2) <= 1 + 1e-9)


# --------------------------------------------------------------------------- sensitivity of T

def _stats(x, y, z, xr, lam, sigma=1.0):
    return privci.crt_statistics(x, y, z, model_x=MX, x_resamples=xr, y_bound=3.0,
                                 x_residual_bound=2.0, ridge_lambda=lam, kernel_sigma=sigma)


def _audit(x, y, z, xr, i, newx, newxr, newy, newz, lam, sigma=1.0):
    a = _stats(x, y, z, xr, lam, sigma)
    x2, y2, z2, xr2 = x.copy(), y.copy(), z.copy(), xr.copy()
    x2[i], y2[i], z2[i], xr2[:, i] = newx, newy, newz, newxr
    b = _stats(x2, y2, z2, xr2, lam, sigma)
    ratio = np.max(np.abs(a.statistics - b.statistics)) / a.sensitivity
    AUDIT["max_ratio"] = max(AUDIT["max_ratio"], ratio)
    return ratio


@pytest.mark.parametrize("lam", [0.05, 0.5, 5.0, 50.0])
def test_sensitivity_audit_T(lam):
    rng = np.random.default_rng(int(lam * 100))
    m = 7
    for n, d in [(4, 1), (50, 1), (40, 3)]:
        z = rng.normal(scale=2, size=(n, d))
        x = fs(z[:, 0]) + rng.normal(size=n)
        xr = MX.sample(z, m, rng)
        y = -fs(z[:, 0]) + rng.normal(size=n)
        for _ in range(5):
            i = int(rng.integers(n))
            cases = [
                (rng.normal(), rng.normal(size=m), rng.normal(), rng.normal(size=d)),
                (50.0, np.full(m, -50.0), 3.0, z[i]),                  # x and resamples clipped
                (-50.0, np.full(m, 50.0), -3.0, np.full(d, 1e3)),      # far out in z
                (x[i], xr[:, i], 99.0, z[i]),                          # only y changes
                (x[i], xr[:, i], y[i], z[(i + 1) % n]),                # only z changes
                (2.0, -2.0 * np.ones(m), -3.0, z[i] + 1e-4),
            ]
            for newx, newxr, newy, newz in cases:
                assert _audit(x, y, z, xr, i, newx, newxr, newy, newz, lam) <= 1.0 + 1e-12


@settings(max_examples=60, deadline=None)
@given(n=st.integers(2, 20), lam=st.sampled_from([0.01, 0.1, 1.0, 5.0]),
       sigma=st.sampled_from([0.1, 1.0, 10.0]), seed=st.integers(0, 2**31 - 1),
       newx=st.floats(-5, 5), newy=st.floats(-5, 5), newz=st.floats(-100, 100))
def test_sensitivity_audit_T_hypothesis(n, lam, sigma, seed, newx, newy, newz):
    rng = np.random.default_rng(seed)
    z = rng.normal(size=(n, 1))
    y = np.clip(rng.normal(size=n) * 3, -3, 3)
    x = fs(z[:, 0]) + np.sign(y) * 2
    xr = MX.sample(z, 3, rng)
    i = int(rng.integers(n))
    r = _audit(x, y, z, xr, i, newx, np.full(3, -newx), newy, newz, lam, sigma)
    target(r)
    assert r <= 1.0 + 1e-12


def test_report_audit_ratio():
    print(f"\nlargest |T_j - T_j'| / Delta_T seen: {AUDIT['max_ratio']:.4f}")
    assert 0.0 < AUDIT["max_ratio"] <= 1.0


def test_crt_statistics_match_naive():
    rng = np.random.default_rng(3)
    n, m = 60, 5
    z = rng.normal(size=(n, 2))
    x, y = rng.normal(size=n) * 3, rng.normal(size=n) * 4
    xr = rng.normal(size=(m, n)) * 3
    cs = privci.crt_statistics(x, y, z, model_x=MX, x_resamples=xr, y_bound=3,
                               x_residual_bound=2, ridge_lambda=0.7, kernel_sigma=0.3)
    mu = fs(z[:, 0])
    rx = np.clip((np.vstack([x, xr]) - mu) / 2, -1, 1)
    ry = naive.krr_residuals(z, np.clip(y, -3, 3) / 3, 0.3, 0.7)
    np.testing.assert_allclose(cs.statistics, rx @ ry, rtol=1e-10, atol=1e-12)
    assert cs.sensitivity == pytest.approx(naive.crt_sensitivity(0.7))
    cp = privci.crt_statistics(x, y, z, model_x=MX, x_resamples=xr, y_bound=3,
                               x_residual_bound=2, ridge_lambda=0.7, kernel_sigma=0.3,
                               sensitivity="paper")
    assert cp.sensitivity == pytest.approx(naive.crt_sensitivity(0.7, "paper"))


def test_conditional_means_array_with_resamples():
    rng = np.random.default_rng(4)
    n = 30
    z = rng.normal(size=(n, 1))
    x, y = rng.normal(size=n), rng.normal(size=n)
    xr = rng.normal(size=(4, n))
    a = privci.crt_statistics(x, y, z, model_x=MX, x_resamples=xr, y_bound=3, x_residual_bound=2)
    b = privci.crt_statistics(x, y, z, model_x=fs(z[:, 0]), x_resamples=xr, y_bound=3,
                              x_residual_bound=2)
    np.testing.assert_array_equal(a.statistics, b.statistics)


# --------------------------------------------------------------------------- non-private CRT

def _first(x, y, z):
    return x[0]


@pytest.mark.parametrize("alternative,expected", [
    ("greater", (1 + 3) / 6),      # T0 = 3 vs [5, 3, 1, 3, 2]: 5, 3, 3 >= 3
    ("less", (1 + 4) / 6),         # -T: 3, 1, 3, 2 <= 3
    ("two-sided", (1 + 4) / 6),    # |T| with resamples [5, -3, 1, 3, -4]: 5, 3, 3... see below
])
def test_crt_exact_pvalue_hand_made(alternative, expected):
    n = 3
    z = np.zeros((n, 1))
    y = np.zeros(n)
    x = np.array([3.0, 0, 0])
    first = [5.0, 3.0, 1.0, 3.0, 2.0] if alternative != "two-sided" else [5.0, -3.0, 1.0, 3.0, -4.0]
    xr = np.zeros((5, n))
    xr[:, 0] = first
    res = privci.crt(x, y, z, model_x=np.zeros(n), x_resamples=xr, statistic=_first,
                     alternative=alternative)
    assert res.pvalue == pytest.approx(expected, abs=1e-15)
    assert res.statistic == 3.0 and res.n_resamples == 5


def test_crt_all_ties_gives_pvalue_one():
    n = 4
    res = privci.crt(np.ones(n), np.zeros(n), np.zeros((n, 1)), model_x=np.zeros(n),
                     x_resamples=np.ones((9, n)), statistic=_first, alternative="greater")
    assert res.pvalue == 1.0


def test_crt_default_statistic_matches_naive():
    rng = np.random.default_rng(8)
    n = 80
    z = rng.normal(scale=2, size=(n, 1))
    x = fs(z[:, 0]) + rng.normal(size=n)
    y = rng.normal(size=n) + 0.5 * x
    res = privci.crt(x, y, z, model_x=MX, n_resamples=49, rng=3, alternative="greater")
    xr = MX.sample(z, 49, np.random.default_rng(3))
    ry = naive.krr_residuals(z, y, 1.0, 5.0)
    T = (np.vstack([x, xr]) - fs(z[:, 0])) @ ry
    assert res.statistic == pytest.approx(T[0], rel=1e-10)
    assert res.pvalue == (1 + np.sum(T[1:] >= T[0])) / 50


# --------------------------------------------------------------------------- PrivCRT

def test_privcrt_seeded_matches_manual_rnm():
    rng = np.random.default_rng(9)
    n, m = 100, 19
    z = rng.normal(scale=2, size=(n, 1))
    x = fs(z[:, 0]) + rng.normal(size=n)
    y = rng.normal(size=n)
    xr = MX.sample(z, m, rng)
    for alt, orient in [("greater", lambda t: t), ("less", lambda t: -t), ("two-sided", np.abs)]:
        res = privci.privcrt(x, y, z, epsilon=2.0, model_x=MX, x_resamples=xr, y_bound=4,
                             x_residual_bound=4, rng=11, alternative=alt)
        cs = privci.crt_statistics(x, y, z, model_x=MX, x_resamples=xr, y_bound=4, x_residual_bound=4)
        s = naive.rank_scores(orient(cs.statistics), cs.sensitivity)
        c = int(np.argmax(s + np.random.default_rng(11).exponential(1.0, size=m + 1)))
        assert res.statistic == c and res.pvalue == (1 + c) / (m + 1)
        assert res.privacy.noise_scale == 1.0 and not res.privacy.hardened


def test_privcrt_hardened_record_and_opendp_epsilon():
    for eps in [0.125, 0.5, 2.0, 8.0, 1 / 3]:
        meas, scale, spent = mechanisms._opendp_noisy_max(eps)
        assert meas.map(1.0) <= eps and spent == pytest.approx(eps, rel=1e-12)
        assert scale == pytest.approx(2 / eps, rel=1e-12)
    rng = np.random.default_rng(10)
    n = 60
    z = rng.normal(scale=2, size=(n, 1))
    x, y = fs(z[:, 0]) + rng.normal(size=n), rng.normal(size=n)
    res = privci.privcrt(x, y, z, epsilon=2.0, model_x=MX, y_bound=4, x_residual_bound=4)
    assert res.privacy.hardened and "OpenDP" in res.privacy.mechanism
    assert res.statistic_name == "rank" and res.n_resamples == 19
    assert res.pvalue in {(c + 1) / 20 for c in range(20)}
    for f in dataclasses.fields(res):
        assert not isinstance(getattr(res, f.name), np.ndarray)


def test_report_noisy_max_selection_distribution():
    """Seeded RNM with scores (0, -1, -1): P(index 0) matches the exponential-noise law
    (computed by a large independent simulation); two-sided binomial at 1e-4."""
    scores = np.array([0.0, -1.0, -1.0])
    rng = np.random.default_rng(12)
    picks = np.array([mechanisms.report_noisy_max(scores, 1.0, rng)[0] for _ in range(4000)])
    ref_rng = np.random.default_rng(13)
    noise = ref_rng.exponential(2.0, size=(400000, 3))
    p0 = np.mean(np.argmax(scores + noise, axis=1) == 0)
    assert stats.binomtest(int(np.sum(picks == 0)), 4000, p0).pvalue > 1e-4


X = np.linspace(-1, 1, 20)
Z = np.sin(np.arange(20.0))


@pytest.mark.parametrize("kwargs,exc,match", [
    (dict(model_x=object()), TypeError, r"`model_x` must follow the model-X protocol"),
    (dict(model_x=None), TypeError, r"`model_x` must follow"),
    (dict(x_resamples=np.ones((3, 19))), ValueError, r"`x_resamples` must have shape \(m, n\) = \(m, 20\).*\(3, 19\)"),
    (dict(x_resamples=np.ones(20)), ValueError, r"`x_resamples` must have shape"),
    (dict(n_resamples=0), ValueError, r"`n_resamples` must be an integer >= 1; got 0"),
    (dict(epsilon=0.0), ValueError, r"`epsilon`.*got 0.0"),
    (dict(epsilon=-2), ValueError, r"`epsilon`.*got -2"),
    (dict(y_bound=None), TypeError, r"`y_bound`"),
    (dict(x_residual_bound=0), ValueError, r"`x_residual_bound`.*got 0"),
    (dict(x=np.ones((20, 2))), ValueError, r"`x` must be univariate"),
    (dict(y=np.where(X > 0, np.nan, X)), ValueError, r"`y` contains NaN"),
    (dict(z=Z[:10]), ValueError, r"same number of rows"),
    (dict(alternative="up"), ValueError, r"`alternative`"),
])
def test_privcrt_bad_input(kwargs, exc, match):
    args = dict(x=X, y=X ** 2, z=Z, epsilon=1.0, model_x=MX, y_bound=1.0, x_residual_bound=1.0)
    args.update(kwargs)
    x, y, z = args.pop("x"), args.pop("y"), args.pop("z")
    with pytest.raises(exc, match=match):
        privci.privcrt(x, y, z, rng=0, **args)


def test_gaussian_model_x_bad_input():
    with pytest.raises(ValueError, match="`scale` must be a positive finite number; got -1"):
        privci.GaussianModelX(np.zeros(3), -1)
    with pytest.raises(ValueError, match="conditional mean has 3 entries but z has 5"):
        privci.GaussianModelX(np.zeros(3), 1.0).sample(np.zeros((5, 1)), 2, np.random.default_rng(0))


# --------------------------------------------------------------------------- calibration

def sim(rng, n, beta, m):
    x, y, z = naive.paper_data(rng, n, d=1, beta=beta)
    return x, y, z


def run_null(reps, n, seed, beta=0.0, eps=2.0, m=19):
    ss = np.random.SeedSequence(seed)
    yb = 4 * np.sqrt(1 + beta ** 2 + 0.01)
    p_priv, p_crt = [], []
    for child in ss.spawn(reps):
        rng = np.random.default_rng(child)
        x, y, z = naive.paper_data(rng, n, d=1, beta=beta)
        xr = MX.sample(z, m, rng)
        p_priv.append(privci.privcrt(x, y, z, epsilon=eps, model_x=MX, x_resamples=xr, y_bound=yb,
                                     x_residual_bound=4.0, rng=rng, alternative="greater").pvalue)
        p_crt.append(privci.crt(x, y, z, model_x=MX, x_resamples=xr, alternative="greater").pvalue)
    return np.array(p_priv), np.array(p_crt)


def _chisq_uniform(p, m=19):
    counts = np.bincount(np.rint(p * (m + 1)).astype(int) - 1, minlength=m + 1)
    return stats.chisquare(counts).pvalue, counts


def test_null_calibration_quick():
    """150 null replications at n = 300: PrivCRT rejection rate <= 0.12 (binomial tail
    probability < 1% for a level-0.05 test) and CRT p-values uniform (chi-square at 0.001)."""
    pp, pc = run_null(150, 300, seed=5)
    assert np.mean(pp <= 0.05) <= 0.12
    assert _chisq_uniform(pc)[0] > 1e-3


@pytest.mark.slow
def test_null_calibration_paper_setting():
    """beta = 0, n = 1000, m = 19, epsilon = 2, 400 replications: PrivCRT rejection rate at
    alpha = 0.05 at most 0.08 (a level-0.05 test exceeds it with probability < 0.5%); CRT
    p-values uniform on {1/20, ..., 1} (chi-square not rejecting at 0.001)."""
    pp, pc = run_null(400, 1000, seed=2023)
    chi_priv, counts_priv = _chisq_uniform(pp)
    chi_crt, counts_crt = _chisq_uniform(pc)
    print(f"\nPrivCRT null rejection {np.mean(pp <= 0.05):.4f}; histogram {counts_priv.tolist()} "
          f"(chi-square p {chi_priv:.3g}); CRT rejection {np.mean(pc <= 0.05):.4f}, "
          f"histogram {counts_crt.tolist()} (chi-square p {chi_crt:.3g})")
    assert np.mean(pp <= 0.05) <= 0.08
    assert chi_crt > 1e-3


@pytest.mark.slow
def test_power_report():
    """beta = 1.5, n = 1000, epsilon = 2, m = 19 (200 replications): both tests have power
    well above the level (>= 0.5: the paper's figure shows both near 1), CRT at least PrivCRT."""
    pp, pc = run_null(200, 1000, seed=99, beta=1.5)
    print(f"\npower beta=1.5: PrivCRT {np.mean(pp <= 0.05):.3f}, CRT {np.mean(pc <= 0.05):.3f}")
    assert np.mean(pp <= 0.05) >= 0.5
    assert np.mean(pc <= 0.05) >= np.mean(pp <= 0.05)


@pytest.mark.slow
def test_default_resample_count_keeps_the_most_power():
    """privcrt's docstring table (issue 37, item 5): on the README's design at beta = 0.4,
    epsilon = 1, m = 19 rejected (p <= 0.05) 0.720 against 0.365 for m = 99.  Here 100 fresh
    data sets (seed 37006), paired (the same data and the first m of the same 99
    resamples, privcrt's own mechanism): m = 19 must win a one-sided sign test over the
    discordant pairs at 0.01.  With the measured difference the chance that it does not
    is below 1e-6 (a false failure); if m = 99 had as much power, the test would pass with
    probability at most 0.01."""
    from privci._stats import _oriented
    n, beta, eps = 2000, 0.4, 1.0
    mx = privci.GaussianModelX(lambda zz: np.sin(zz[:, 0]), 1.0)
    wins19 = wins99 = 0
    for child in np.random.SeedSequence(37006).spawn(100):
        rng = np.random.default_rng(child)
        z = rng.normal(size=(n, 1))
        nx = rng.normal(size=n)
        x = np.sin(z[:, 0]) + nx
        y = np.cos(z[:, 0]) + beta * nx + rng.normal(size=n)
        cs = privci.crt_statistics(x, y, z, model_x=mx, y_bound=5, x_residual_bound=4,
                                   n_resamples=99, rng=rng)
        o = _oriented(cs.statistics, 0)
        rej = {}
        for m in (19, 99):
            scores = _kernels.rank_scores(np.ascontiguousarray(o[:m + 1]), cs.sensitivity)
            c, _ = mechanisms.report_noisy_max(scores, eps, rng)
            rej[m] = (1 + c) / (m + 1) <= 0.05
        wins19 += rej[19] and not rej[99]
        wins99 += rej[99] and not rej[19]
    p_sign = stats.binomtest(wins19, wins19 + wins99, 0.5, alternative="greater").pvalue
    print(f"\ndiscordant pairs: m = 19 alone {wins19}, m = 99 alone {wins99}, "
          f"sign test p {p_sign:.2g}")
    assert p_sign < 0.01
