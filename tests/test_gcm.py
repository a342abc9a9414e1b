"""Behaviour of the non-private GCM: inputs, alternatives, regressors, degenerate cases."""

import warnings

import numpy as np
import pytest

import naive
import privci
from privci import DegenerateStatisticWarning


@pytest.fixture
def data():
    rng = np.random.default_rng(10)
    n = 120
    z = rng.normal(size=(n, 2))
    x = np.sin(z[:, 0]) + rng.normal(size=n)
    y = np.cos(z[:, 1]) + 0.4 * x + rng.normal(size=n)
    return x, y, z


def test_univariate_statistic_matches_naive(data):
    x, y, z = data
    res = privci.gcm(x, y, z, ridge_lambda=0.1, kernel_sigma=0.5)
    rx = naive.krr_residuals(z, x, 0.5, 0.1)
    ry = naive.krr_residuals(z, y, 0.5, 0.1)
    stat = naive.gcm_univariate(rx * ry)
    assert res.statistic == pytest.approx(stat, abs=1e-10)
    assert res.pvalue == pytest.approx(naive.gcm_pvalue(stat, "two-sided"), abs=1e-12)
    assert res.ridge_lambda_x == (0.1,) and res.ridge_lambda_y == (0.1,)
    assert res.n == 120 and res.alternative == "two-sided"


@pytest.mark.parametrize("alternative", ["two-sided", "greater", "less"])
def test_alternatives_univariate(data, alternative):
    x, y, z = data
    res = privci.gcm(x, y, z, ridge_lambda=0.1, alternative=alternative)
    assert res.pvalue == pytest.approx(naive.gcm_pvalue(res.statistic, alternative), abs=1e-14)


def test_alternative_one_sided_relation(data):
    x, y, z = data
    g = privci.gcm(x, y, z, ridge_lambda=0.1, alternative="greater").pvalue
    l_ = privci.gcm(x, y, z, ridge_lambda=0.1, alternative="less").pvalue
    assert g + l_ == pytest.approx(1.0, abs=1e-12)


def test_z_none_uses_raw_variables(data):
    x, y, _ = data
    res = privci.gcm(x, y)
    assert res.statistic == pytest.approx(naive.gcm_univariate(x * y), abs=1e-12)
    assert res.ridge_lambda_x is None


def test_accepts_lists_and_pandas(data):
    pd = pytest.importorskip("pandas")
    x, y, z = data
    ref = privci.gcm(x, y, z, ridge_lambda=0.1)
    df = pd.DataFrame(z, columns=["a", "b"])
    r1 = privci.gcm(pd.Series(x), pd.Series(y), df, ridge_lambda=0.1)
    r2 = privci.gcm(list(x), list(y), z.tolist(), ridge_lambda=0.1)
    assert r1.statistic == ref.statistic == r2.statistic


def test_one_dimensional_z_equals_column(data):
    x, y, z = data
    a = privci.gcm(x, y, z[:, 0], ridge_lambda=0.1)
    b = privci.gcm(x, y, z[:, :1], ridge_lambda=0.1)
    assert a.statistic == b.statistic


def test_sklearn_regressor_in_sample_residuals(data):
    from sklearn.linear_model import LinearRegression
    x, y, z = data
    res = privci.gcm(x, y, z, regressor=LinearRegression())
    X1 = np.column_stack([np.ones(len(x)), z])
    rx = x - X1 @ np.linalg.lstsq(X1, x, rcond=None)[0]
    ry = y - X1 @ np.linalg.lstsq(X1, y, rcond=None)[0]
    assert res.statistic == pytest.approx(naive.gcm_univariate(rx * ry), abs=1e-9)


def test_multivariate_matches_naive_and_is_seeded(data):
    x, y, z = data
    rng = np.random.default_rng(0)
    X = np.column_stack([x, rng.normal(size=len(x))])
    Y = np.column_stack([y, rng.normal(size=len(x)), rng.normal(size=len(x))])
    r1 = privci.gcm(X, Y, z, ridge_lambda=0.1, n_sim=300, rng=42)
    r2 = privci.gcm(X, Y, z, ridge_lambda=0.1, n_sim=300, rng=42)
    assert r1.pvalue == r2.pvalue and r1.n_sim == 300
    Rm = naive.residual_products(r1.resid_x, r1.resid_y)
    draws = np.random.default_rng(42).standard_normal((300, len(x)))
    stat, sims = naive.gcm_max(Rm, draws)
    assert r1.statistic == pytest.approx(stat, rel=1e-12)
    assert r1.pvalue == pytest.approx((1 + np.sum(sims >= stat)) / 301, abs=1e-12)


def test_cv_with_n_not_divisible_by_folds():
    rng = np.random.default_rng(3)
    n = 137
    z = rng.normal(size=n) * 2
    x = np.sin(z) + rng.normal(size=n) * 0.3
    y = rng.normal(size=n)
    res = privci.gcm(x, y, z)
    for col, lam in ((x, res.ridge_lambda_x[0]), (y, res.ridge_lambda_y[0])):
        ref, _ = naive.cvst_cv_lambda(z[:, None], col, 1.0, np.array(privci.regression.DEFAULT_CV_LAMBDAS), 10)
        assert lam == ref


def test_zero_variance_products_warn_and_return_nan():
    x = np.ones(50)
    y = np.arange(50.0)
    with pytest.warns(DegenerateStatisticWarning, match="zero variance"):
        res = privci.gcm(x, np.ones(50))
    assert np.isnan(res.statistic) and np.isnan(res.pvalue)
    with pytest.warns(DegenerateStatisticWarning):
        res = privci.gcm_from_residuals(np.column_stack([x, y]), np.ones(50))
    assert np.isnan(res.pvalue)


def test_no_warning_on_regular_data(data):
    x, y, z = data
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        privci.gcm(x, y, z, ridge_lambda=1.0)


def test_repr_is_readable(data):
    x, y, z = data
    text = repr(privci.gcm(x, y, z, ridge_lambda=1.0))
    assert "statistic=" in text and "pvalue=" in text and "GCMResult" in text


X, Y, Z = np.arange(30.0), np.sin(np.arange(30.0)), np.cos(np.arange(30.0))


@pytest.mark.parametrize("kwargs,exc,match", [
    (dict(x=X[:-1]), ValueError, r"same number of rows.*`x` has 29"),
    (dict(z=np.ones((29, 2))), ValueError, r"`z` has 29"),
    (dict(x=np.where(X > 5, np.nan, X)), ValueError, r"`x` contains NaN"),
    (dict(y=np.where(X > 5, np.inf, X)), ValueError, r"`y` contains inf"),
    (dict(z=np.ones((30, 2, 2))), ValueError, r"`z` must be 1-D .* shape \(30, 2, 2\)"),
    (dict(x="abc"), TypeError, r"`x` must be array-like"),
    (dict(x=np.array(["a"] * 30)), TypeError, r"`x` must be numeric"),
    (dict(kernel_sigma=0.0), ValueError, r"`kernel_sigma` must be a positive finite number; got 0.0"),
    (dict(kernel_sigma=-1), ValueError, r"`kernel_sigma`.*got -1"),
    (dict(ridge_lambda=-0.5), ValueError, r"`ridge_lambda`.*got -0.5"),
    (dict(ridge_lambda=float("nan")), ValueError, r"`ridge_lambda`.*nan"),
    (dict(alternative="two.sided"), ValueError, r"`alternative` must be one of .*'two.sided'"),
    (dict(regressor="xgboost"), ValueError, r"`regressor` must be 'kernel_ridge'.*'xgboost'"),
    (dict(regressor=3), TypeError, r"`regressor`.*int"),
    (dict(n_sim=0), ValueError, r"`n_sim` must be an integer >= 1; got 0"),
    (dict(n_sim=1.5), TypeError, r"`n_sim` must be an integer"),
    (dict(cv_folds=20), ValueError, r"too few samples.*cross-validation.*n = 30"),
    (dict(cv_lambdas=[1.0, -1.0]), ValueError, r"`cv_lambdas`"),
    (dict(x=X[:2], y=Y[:2], z=Z[:2]), ValueError, r"too few samples"),
    (dict(rng="seed"), TypeError, r"`rng`"),
])
def test_gcm_bad_input(kwargs, exc, match):
    args = dict(x=X, y=Y, z=Z)
    args.update(kwargs)
    x, y, z = args.pop("x"), args.pop("y"), args.pop("z")
    with pytest.raises(exc, match=match):
        privci.gcm(x, y, z, **args)


def test_gcm_from_residuals_bad_input():
    with pytest.raises(ValueError, match="`resid_x`.*`resid_y`|same number of rows"):
        privci.gcm_from_residuals(np.ones(5), np.ones(6))
    with pytest.raises(ValueError, match="`resid_y` contains NaN"):
        privci.gcm_from_residuals(np.ones(5), [1, 2, np.nan, 3, 4])


def test_gcm_rff_option_approximates_exact_kernel():
    rng = np.random.default_rng(21)
    n = 1500
    z = rng.normal(size=(n, 2))
    x = np.sin(z[:, 0]) + rng.normal(size=n)
    y = np.cos(z[:, 1]) + rng.normal(size=n)
    exact = privci.gcm(x, y, z, ridge_lambda=1e-3, kernel_sigma=0.5)
    approx = privci.gcm(x, y, z, ridge_lambda=1e-3, kernel_sigma=0.5, kernel_approximation="rff",
                        n_features=1024, feature_rng=3)
    # random features approximate the kernel: residuals close, statistic close
    assert np.sqrt(np.mean((exact.resid_x - approx.resid_x) ** 2)) < 0.05
    assert abs(exact.statistic - approx.statistic) < 0.1
    again = privci.gcm(x, y, z, ridge_lambda=1e-3, kernel_sigma=0.5, kernel_approximation="rff",
                       n_features=1024, feature_rng=3)
    assert again.statistic == approx.statistic
    with pytest.raises(ValueError, match="needs a fixed `ridge_lambda`"):
        privci.gcm(x, y, z, kernel_approximation="rff")


def test_center_subtracts_sample_means_and_removes_the_intercept_bias():
    """center=True is the GCM of the mean-centred data; on independent x, y far from zero the
    intercept-free KRR (small lambda, clustered z) leaves part of the means in the residuals
    and the uncentred statistic is far from 0, the centred one is not."""
    rng = np.random.default_rng(31)
    n = 400
    z = np.r_[rng.normal(size=(n - 20, 2)), rng.normal(size=(20, 2)) * 0.1 + 6]
    x = 3 + rng.normal(size=n)
    y = 2 + np.where(np.arange(n) >= n - 20, 3.0, 0.0) + rng.normal(size=n)
    c = privci.gcm(x, y, z, ridge_lambda=0.5, center=True)
    ref = privci.gcm(x - x.mean(), y - y.mean(), z, ridge_lambda=0.5)
    assert c.statistic == pytest.approx(ref.statistic, rel=1e-12)
    u = privci.gcm(x, y, z, ridge_lambda=0.5)
    assert abs(u.statistic) > 3 and abs(c.statistic) < 3
    with pytest.raises(TypeError, match=r"`center` must be True or False; got 'yes'"):
        privci.gcm(x, y, z, center="yes")


# ---- the regression in the result, progress lines, larger n (issue 37, item 11) --------

@pytest.mark.parametrize("kwargs, text", [
    (dict(), "kernel ridge regression, lambda by 10-fold cross-validation over 11 values"),
    (dict(cv_folds=5, cv_lambdas=[0.1, 1.0]),
     "kernel ridge regression, lambda by 5-fold cross-validation over 2 values"),
    (dict(ridge_lambda=0.1), "kernel ridge regression, lambda 0.1"),
    (dict(ridge_lambda=0.1, center=True), "kernel ridge regression, lambda 0.1, x and y centred"),
    (dict(ridge_lambda=0.1, kernel_approximation="rff", n_features=32, feature_rng=1),
     "kernel ridge regression on 32 random Fourier features, lambda 0.1"),
])
def test_method_names_the_regression(data, kwargs, text):
    x, y, z = data
    res = privci.gcm(x, y, z, **kwargs)
    assert res.method == "Generalised covariance measure test, " + text
    assert privci.gcm(x, y, None).method == "Generalised covariance measure test"


def test_progress_lines_on_request_and_never_below_large_n(data, capsys):
    x, y, z = data
    privci.gcm(x, y, z, ridge_lambda=0.1)                      # n = 120: no lines
    assert capsys.readouterr().err == ""
    privci.gcm(x, y, z, ridge_lambda=0.1, progress=True)
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 2
    assert err[0].startswith("privci.gcm: n = 120: regressing x and y on z by kernel ridge "
                             "regression, lambda 0.1 (O(n^3) time: faster at large n with "
                             "kernel_approximation='rff', ridge_lambda=1e-5, center=True")
    assert err[1].startswith("privci.gcm: regressions done in ") and err[1].endswith(" s")
    privci.gcm(x, y, z, ridge_lambda=0.1, kernel_approximation="rff", n_features=16,
               progress=True)
    assert "faster" not in capsys.readouterr().err         # already the fast path
    with pytest.raises(TypeError, match="`progress` must be None, True or False; got 'yes'"):
        privci.gcm(x, y, z, progress="yes")


def test_progress_by_default_from_large_n_on(capsys):
    """From n = 3000 (LARGE_N) the exact regression prints its two lines by default (one
    fixed-lambda fit, a few seconds), and the result notes what is faster."""
    from privci.results import GCM_LARGE_N
    rng = np.random.default_rng(37)
    n = GCM_LARGE_N
    z = rng.normal(size=n)
    x, y = np.sin(z) + rng.normal(size=n), np.cos(z) + rng.normal(size=n)
    res = privci.gcm(x, y, z, ridge_lambda=1e-3)
    err = capsys.readouterr().err
    assert err.count("privci.gcm:") == 2 and f"n = {n}" in err
    assert res.note is not None and "note: at n = 3000" in repr(res)
    quiet = privci.gcm(x, y, z, ridge_lambda=1e-3, progress=False)
    assert capsys.readouterr().err == ""
    assert quiet.statistic == res.statistic
