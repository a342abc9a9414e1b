"""Every compiled kernel against its slow numpy twin (tests/naive.py)."""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import naive
from privci import _kernels, regression

dims = st.tuples(st.integers(1, 40), st.integers(1, 4))


@settings(max_examples=30, deadline=None)
@given(dims, st.floats(0.01, 5.0), st.integers(0, 2**31 - 1))
def test_rbf_gram_lower_matches_twin(shape, sigma, seed):
    z = np.random.default_rng(seed).normal(size=shape) * 2
    n = shape[0]
    out = np.full((n, n), np.nan)
    _kernels.rbf_gram_lower(z, sigma, out)
    ref = naive.rbf_gram(z, z, sigma)
    low = np.tril_indices(n)
    np.testing.assert_allclose(out[low], ref[low], rtol=1e-13, atol=1e-15)
    assert np.all(np.diag(out) == 1.0)          # k(z, z) = 1 exactly (sensitivity needs it)
    assert np.all(np.isnan(out[np.triu_indices(n, 1)]))  # upper triangle untouched


def test_rbf_gram_cross_matches_twin():
    rng = np.random.default_rng(1)
    a, b = rng.normal(size=(17, 3)), rng.normal(size=(9, 3))
    np.testing.assert_allclose(_kernels.rbf_gram_cross(a, b, 0.7), naive.rbf_gram(a, b, 0.7),
                               rtol=1e-13)


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 30), st.integers(1, 3), st.integers(1, 3), st.integers(0, 2**31 - 1))
def test_residual_products_matches_twin(n, p, q, seed):
    rng = np.random.default_rng(seed)
    rx, ry = rng.normal(size=(n, p)), rng.normal(size=(n, q))
    np.testing.assert_array_equal(_kernels.residual_products(rx, ry),
                                  naive.residual_products(rx, ry))


@settings(max_examples=30, deadline=None)
@given(st.integers(3, 200), st.integers(0, 2**31 - 1))
def test_gcm_univariate_matches_twin(n, seed):
    R = np.random.default_rng(seed).standard_t(3, size=n)
    stat, sd = _kernels.gcm_univariate(R)
    assert stat == pytest.approx(naive.gcm_univariate(R), rel=1e-10, abs=1e-12)
    assert sd == pytest.approx(R.std(), rel=1e-8)


def test_gcm_univariate_zero_variance_is_nan():
    stat, sd = _kernels.gcm_univariate(np.full(10, 0.3))
    assert np.isnan(stat) and sd == 0.0


@pytest.mark.parametrize("alternative,mode", [("two-sided", 0), ("greater", 1), ("less", 2)])
def test_gcm_max_statistic_matches_twin(alternative, mode):
    rng = np.random.default_rng(3)
    R = rng.normal(size=(60, 4)) + 0.2
    draws = rng.standard_normal((50, 60))
    scaled, min_sd = _kernels.standardise_columns(R)
    stat, sims = _kernels.gcm_max_statistic(scaled, draws, mode)
    ref_stat, ref_sims = naive.gcm_max(R, draws, alternative)
    assert stat == pytest.approx(ref_stat, rel=1e-12)
    np.testing.assert_allclose(sims, ref_sims, rtol=1e-10)
    assert min_sd == pytest.approx(np.min(R.std(axis=0)), rel=1e-10)


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 25), st.integers(1, 50), st.integers(0, 2**31 - 1))
def test_crt_statistics_and_rank_scores_match_twin(m1, n, seed):
    rng = np.random.default_rng(seed)
    rx, ry = rng.uniform(-1, 1, size=(m1, n)), rng.normal(size=n)
    T = _kernels.crt_statistics(rx, ry)
    np.testing.assert_allclose(T, naive.crt_statistics(rx, ry), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(_kernels.rank_scores(T, 1.7), naive.rank_scores(T, 1.7),
                               rtol=1e-12, atol=1e-15)


def test_rff_features_matches_twin_and_has_unit_norm():
    rng = np.random.default_rng(4)
    z = rng.normal(size=(30, 3))
    freqs = regression.rff_frequencies(3, 64, 0.5, rng)
    phi = _kernels.rff_features(z, freqs)
    np.testing.assert_allclose(phi, naive.rff_features(z, freqs), rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(np.linalg.norm(phi, axis=1), 1.0, rtol=1e-14)


def test_clip_scale_matches_twin():
    rng = np.random.default_rng(5)
    u = rng.normal(size=(40, 2)) * 5
    b = np.array([2.0, 7.0])
    np.testing.assert_array_equal(_kernels._clip_scale_kernel(u, b), naive.clip_scale(u, b))
    np.testing.assert_array_equal(_kernels.clip_scale(u, b), naive.clip_scale(u, b))


def test_clip_scale_twin_equals_the_kernel(monkeypatch):
    """clip_scale's first-call numpy twin gives the kernel's floats bit for bit (NaN kept,
    +-inf and far values at the bound, the edge itself); it runs while the kernel is not
    ready, on at most NUMPY_FIRST_ROWS rows."""
    rng = np.random.default_rng(6)
    u = rng.normal(size=(500, 3)) * 4
    u[:4] = [[np.nan, 2.0, -np.inf], [np.inf, -2.0, 3.0], [1e300, -1e300, 0.0],
             [-0.0, 7.0, -7.0]]
    b = np.array([2.0, 0.3, 7.0])
    kernel = _kernels._clip_scale_kernel(u, b)
    calls = []
    real_clip = np.clip
    monkeypatch.setattr(_kernels, "ready", lambda k: False)
    monkeypatch.setattr(_kernels.np, "clip", lambda *a: calls.append(1) or real_clip(*a))
    twin = _kernels.clip_scale(u, b)
    assert calls == [1]
    np.testing.assert_array_equal(twin, kernel)
    monkeypatch.setattr(_kernels, "NUMPY_FIRST_ROWS", 499)
    np.testing.assert_array_equal(_kernels.clip_scale(u, b), kernel)
    assert calls == [1]


@pytest.mark.parametrize("n,d,sigma,lam", [(50, 1, 1.0, 0.01), (80, 3, 0.5, 1e-5), (64, 2, 2.0, 5.0)])
def test_krr_residuals_match_textbook_solve(n, d, sigma, lam):
    rng = np.random.default_rng(n)
    z = rng.normal(size=(n, d))
    U = rng.normal(size=(n, 3))
    got = regression.krr_residuals(z, U.copy(), sigma, lam)
    ref = naive.krr_residuals(z, U, sigma, lam)
    np.testing.assert_allclose(got, ref, atol=1e-10)


@pytest.mark.parametrize("n", [20, 57, 100, 123, 205])
def test_cvst_folds_match_r_semantics(n):
    got = [list(f) for f in regression.cvst_folds(n, 10)]
    assert got == naive.cvst_folds(n, 10)


@pytest.mark.parametrize("n,d,seed", [(60, 1, 0), (97, 2, 1), (123, 1, 2), (150, 3, 3), (211, 1, 4)])
def test_cv_lambda_choice_matches_plain_cvst(n, d, seed):
    """The shared-eigendecomposition CV picks the same lambda as one solve per lambda per fold,
    including n not divisible by the number of folds."""
    rng = np.random.default_rng(seed)
    z = rng.normal(size=(n, d)) * 2
    x = np.sin(z[:, 0]) + 0.5 * rng.normal(size=n)
    y = np.exp(-z[:, 0] ** 2) + rng.normal(size=n)
    U = np.column_stack([x, y])
    grid = np.array(regression.DEFAULT_CV_LAMBDAS)
    resid, chosen, errors = regression.krr_cv_residuals(z, U.copy(), 1.0, grid, 10)
    for c in range(2):
        lam_ref, err_ref = naive.cvst_cv_lambda(z, U[:, c], 1.0, grid, 10)
        assert chosen[c] == lam_ref
        np.testing.assert_allclose(errors[:, c], err_ref, rtol=1e-6)
        np.testing.assert_allclose(resid[:, c], naive.krr_residuals(z, U[:, c], 1.0, chosen[c]),
                                   atol=1e-9)


def test_sensitivity_constants_match_paper_form():
    for lam in [0.1, 1.0, 5.0, 10.0, 100.0]:
        for kind in ("sharp", "paper"):
            assert regression.gcm_sensitivity(lam, kind) == pytest.approx(
                naive.gcm_sensitivity(lam, kind), rel=1e-14)
            assert regression.crt_sensitivity(lam, kind) == pytest.approx(
                naive.crt_sensitivity(lam, kind), rel=1e-14)
    # the package's lambda is the paper's lambda_K / 2: the paper's constant at lambda_K = 2 lambda
    for lam in [0.5, 5.0, 50.0]:
        lk = 2 * lam
        paper = 4 * (1 + np.sqrt(2 / lk)) * (1 + np.sqrt(2 / lk) + 4 * np.sqrt(2) / lk ** 1.5 + 4 / lk)
        assert regression.gcm_sensitivity(lam, "paper") == pytest.approx(paper, rel=1e-13)
        paper_t = 4 * (1 + np.sqrt(2 / lk) + 2 * np.sqrt(2) / lk ** 1.5 + 2 / lk)
        assert regression.crt_sensitivity(lam, "paper") == pytest.approx(paper_t, rel=1e-13)
        # the sharp constants are never larger than the paper's
        assert regression.gcm_sensitivity(lam) < regression.gcm_sensitivity(lam, "paper")
        assert regression.crt_sensitivity(lam) < regression.crt_sensitivity(lam, "paper")
    assert regression.gcm_sensitivity(5.0) == pytest.approx(3.62963, abs=1e-5)
    assert regression.crt_sensitivity(5.0) == pytest.approx(2.72222, abs=1e-5)


@pytest.mark.parametrize("n", [7, 50, 1000])
@pytest.mark.parametrize("lam", [0.01, 0.2, 0.9, 1.0, 1.1, 5.0, 300.0])
def test_norm_bound_is_the_spectral_maximum(n, lam):
    """B_lambda equals max_{s in [0, n]} sqrt(n s)/(s + n lambda), the bound of Lemma 1."""
    assert regression.krr_norm_bound(lam) >= naive.krr_norm_bound_numeric(n, lam) * (1 - 1e-9)
    assert regression.krr_norm_bound(lam) <= naive.krr_norm_bound_numeric(n, lam) * (1 + 1e-6)


@pytest.mark.parametrize("lam", [0.05, 0.5, 5.0])
def test_fits_obey_the_norm_bound(lam):
    """Definitional check of Lemma 1 on adversarial responses: the eigenvector of K whose
    eigenvalue is closest to n lambda, signed to +-1, maximises ||f||."""
    rng = np.random.default_rng(9)
    for d, sigma in [(1, 0.3), (3, 1.0), (8, 0.05)]:
        z = rng.normal(size=(60, d))
        K = np.exp(-sigma * ((z[:, None, :] - z[None, :, :]) ** 2).sum(-1))
        s, V = np.linalg.eigh(K)
        j = int(np.argmin(np.abs(s - 60 * lam)))
        for u in (np.sign(V[:, j]) + (V[:, j] == 0), np.ones(60), rng.choice([-1.0, 1.0], 60)):
            alpha = np.linalg.solve(K + 60 * lam * np.eye(60), u)
            norm = float(np.sqrt(alpha @ K @ alpha))
            assert norm <= regression.krr_norm_bound(lam) * (1 + 1e-9)
            assert np.max(np.abs(u - K @ alpha)) <= regression.residual_bound(lam) * (1 + 1e-9)
