"""Model-X tests: the conditional randomization test (CRT) and PrivCRT.

PrivCRT is Algorithm 2 of Kalemaj, Kasiviswanathan & Ramdas: the statistic
T(x, y, z) = sum_i r_X,i r_Y,i is computed on the observed x and on m
resamples of X given Z, and the rank of T_0 is released by report-noisy-max
over the scores s_c = -|Q_c - T_0| / (2 Delta_T).
"""

from __future__ import annotations

import numpy as np

from . import _crt_pipeline as CP, _kernels, _validation as V
from ._frames import accepts_data_frames
from ._model_x import (GaussianModelX, ModelX, _model_x_plan, _private_x_residuals,
                       _resamples_and_mean, _safe_call)
from ._params import _check_approximation
from ._stats import _oriented
from .mechanisms import quiet, report_noisy_max, sanitize
from .regression import (_check_kind, crt_sensitivity, krr_residuals, residual_bound,
                         rff_frequencies)
from .results import CRTResult, CRTStatistics

__all__ = ["ModelX", "GaussianModelX", "crt_statistics", "privcrt", "crt"]


def _univariate(arr, name):
    if arr.shape[1] != 1:
        raise ValueError(f"`{name}` must be univariate (n,) for the CRT; got shape {arr.shape} instead.")
    return arr[:, 0]


def _crt_statistics(x, y, z, model_x, y_bound, x_residual_bound, n_resamples, x_resamples,
                    ridge_lambda, kernel_sigma, rng, kernel_approximation, n_features,
                    feature_rng, y_center=None, sensitivity="sharp", charge=None, auto=None):
    xa = _univariate(V.as_data(x, "x"), "x")
    ya = V.as_data(y, "y")
    _univariate(ya, "y")
    za = V.as_data(z, "z", allow_none=True)
    n = V.check_same_rows(x=xa[:, None], y=ya, z=za)
    V.check_min_n(n, 2, "PrivCRT")
    conditional = za is not None
    if not conditional:
        za = np.zeros((n, 0))
    # auto = (epsilon for the released parameters, noise rng, record dict to fill) or None
    is_auto = {k: isinstance(v, str) and v == "auto" for k, v in
               (("y_bound", y_bound), ("x_residual_bound", x_residual_bound),
                ("y_center", y_center))}
    if any(is_auto.values()) and auto is None:
        raise ValueError("'auto' bounds and centres need a privacy budget: use privci.privcrt "
                         "(bounds_epsilon=) or privci.bounds.private_bounds first.")
    yb = 1.0 if is_auto["y_bound"] else V.positive_finite(y_bound, "y_bound")
    yc = 0.0 if is_auto["y_center"] else float(V.public_centres(y_center, "y_center", 1)[0])
    xrb = 1.0 if is_auto["x_residual_bound"] else V.positive_finite(x_residual_bound,
                                                                     "x_residual_bound")
    lam = V.positive_finite(ridge_lambda, "ridge_lambda")
    sigma = V.positive_finite(kernel_sigma, "kernel_sigma")
    kind = _check_kind(sensitivity)
    n_features = _check_approximation(kernel_approximation, n_features)
    frng = V.check_rng(feature_rng) if (kernel_approximation == "rff" and conditional) else None
    rbound = residual_bound(lam, kind) if conditional else 1.0
    sens = crt_sensitivity(lam, kind) if conditional else 2.0
    plan = _model_x_plan(model_x, za, n, n_resamples, x_resamples)
    if charge is not None:   # after every check, before anything is computed from the data
        charge()
    if any(is_auto.values()):
        from .bounds import _auto_public_parameters, _reliability, _report_unreliable
        eps_b, brng, out = auto
        # outside quiet(), before the release: public numbers only (n, epsilon, what is 'auto')
        unreliable = _report_unreliable([_reliability(
            "/".join(k for k in ("y_center", "x_residual_bound", "y_bound") if is_auto[k]),
            n, eps_b, sum(is_auto.values()))], "privcrt")
        # the observed x's model-X residual: a row-wise map with the public law
        if plan["mean_arr"] is not None:
            mu = sanitize(plan["mean_arr"])
        else:
            fn = model_x.mean if plan["gaussian"] else model_x.conditional_mean
            mu = _safe_call(fn, za, (n,), (1,), 0.0)
        with quiet():
            dev = np.nan_to_num(xa - mu, nan=0.0)
            rel = _auto_public_parameters(
                dev, ya, epsilon=eps_b, want_center=(False, is_auto["y_center"]),
                want_bound=(is_auto["x_residual_bound"], is_auto["y_bound"]),
                x_center=0.0, y_center=yc, rng=brng)
        if rel.get("x_bound") is not None:
            xrb = float(np.asarray(rel["x_bound"])[0])
        if rel.get("y_bound") is not None:
            yb = float(np.asarray(rel["y_bound"])[0])
        if rel.get("y_center") is not None:
            yc = float(np.asarray(rel["y_center"])[0])
        out.update(rel)
        out["caveats"] = tuple(rel.get("caveats", ())) + tuple(unreliable)
    rx_all = _private_x_residuals(plan, xa, za, rng, xrb)
    with quiet():
        u = _kernels.clip_scale(ya - yc, np.array([yb]))
        if conditional:
            freqs = None
            if kernel_approximation == "rff":
                freqs = rff_frequencies(za.shape[1], n_features, sigma, frng)
            ry = krr_residuals(za, u, sigma, lam, kernel_approximation=kernel_approximation,
                               freqs=freqs, warn=False)[:, 0]
        else:
            ry = u[:, 0].copy()
        ry = np.clip(np.nan_to_num(ry, nan=0.0), -rbound, rbound)
        stats = _kernels.crt_statistics(rx_all, np.ascontiguousarray(ry))
    return CRTStatistics(statistics=stats, sensitivity=sens, ridge_lambda=lam if conditional else None,
                         kernel_sigma=sigma if conditional else None, y_bound=yb,
                         x_residual_bound=xrb, kernel_approximation=kernel_approximation, n=n,
                         y_center=yc, sensitivity_kind=kind)


def crt_statistics(x, y, z=None, *, model_x, y_bound, x_residual_bound, n_resamples=19,
                   x_resamples=None, ridge_lambda=5.0, kernel_sigma=1.0, rng=None,
                   kernel_approximation="exact", n_features=512, feature_rng=None,
                   y_center=0.0, sensitivity="sharp"):
    """The PrivCRT transformation: the m + 1 statistics T_0..T_m and their sensitivity.

    T(x, y, z) = sum_i r_X,i r_Y,i with r_X = clip((x - E[X | Z]) / x_residual_bound,
    -1, 1) and r_Y the KRR residuals of clip(y - y_center, -y_bound, y_bound) / y_bound
    on z (one fit serves all m + 1 statistics).

    Parameters
    ----------
    x, y : array-like (n,)
    z : array-like (n, d) or (n,), or None
        None: no conditioning; ``model_x`` is then the law of X (its methods
        receive an (n, 0) array) and r_Y is the scaled y itself.
    model_x : ModelX or array-like
        The known law of X given Z (e.g. :class:`GaussianModelX`).  When
        ``x_resamples`` is given, it may instead be the array of the n
        conditional means.  It must be public (fixed before seeing the data)
        and applied row by row: the value for a row may depend on that row's
        z only.  Callable means are checked for this on a public probe input
        (a fitted sampler or a function of the whole z fails); non-finite
        means or draws are mapped to finite values and clipped, never raised.
    y_bound, x_residual_bound : float
        Public bounds on |y| and on |x - E[X | Z]|; values beyond are clipped.
    n_resamples : int, default 19
        m, the number of resamples (ignored when ``x_resamples`` is given).
        The p-value is at least 1 / (m + 1): 0.05 with m = 19 (see
        :func:`privcrt` for why 19 is PrivCRT's default).
    x_resamples : array-like (m, n), optional
        Precomputed resamples of X given Z, drawn row by row from a public
        law.  They are part of the protected data set (a row of the data set
        is (x_i, every resample's i-th entry, y_i, z_i)); a sampler fitted on
        the data breaks the one-row locality the guarantee needs.
    ridge_lambda : float, default 5.0
    kernel_sigma : float, default 1.0
    rng : None, int or Generator
        Randomness of the resampling.
    kernel_approximation, n_features, feature_rng
        See :func:`privci.residual_products`.
    y_center : float, default 0.0
        Public centre of y (the ridge regression has no intercept).
    sensitivity : {"sharp", "paper"}, default "sharp"
        Which proved constant certifies Delta_T (:func:`privci.crt_sensitivity`).

    Returns
    -------
    CRTStatistics
        ``.statistics`` (T_0, ..., T_m) and ``.sensitivity`` Delta_T: the
        largest change of any T_j when one row of (x, every resample, y, z)
        is replaced.  Not private: see :func:`privcrt`.

    Notes
    -----
    Sharp: Delta_T* = 2 (1 + B_lambda)^2 (2.722 at lambda = 5): the replaced
    row moves T by at most 2 b (|r_X| <= 1, |r_Y| <= b = 1 + B_lambda), the
    others by at most sum_{i != j} |Delta g(z_i)| <= 2 b B_lambda (see
    :func:`privci.crt_sensitivity`).  ``"paper"``: the paper's Lemma,
    4 (1 + 1/sqrt(lambda) + 1/lambda^1.5 + 1/lambda) (6.947 at lambda = 5).
    Without conditioning (z = None) r_Y = u and Delta_T = 2.  The residuals
    r_Y are clipped to their proved bound b.

    Examples
    --------
    >>> import numpy as np, privci
    >>> rng = np.random.default_rng(4)
    >>> z = rng.normal(size=200); x = np.sin(z) + rng.normal(size=200)
    >>> y = rng.normal(size=200)
    >>> mx = privci.GaussianModelX(lambda zz: np.sin(zz[:, 0]), 1.0)
    >>> cs = privci.crt_statistics(x, y, z, model_x=mx, y_bound=4, x_residual_bound=4, rng=0)
    >>> cs.statistics.shape, round(cs.sensitivity, 4)
    ((20,), 2.7222)
    """
    return _crt_statistics(x, y, z, model_x, y_bound, x_residual_bound, n_resamples,
                           x_resamples, ridge_lambda, kernel_sigma, V.check_rng(rng),
                           kernel_approximation, n_features, feature_rng, y_center, sensitivity)


@accepts_data_frames
def privcrt(x, y, z=None, *, epsilon, model_x, y_bound, x_residual_bound, n_resamples=19,
            x_resamples=None, ridge_lambda=5.0, kernel_sigma=1.0, alternative="two-sided",
            rng=None, kernel_approximation="exact", n_features=512, feature_rng=None,
            y_center=0.0, sensitivity="sharp", budget=None, bounds_epsilon=None):
    """Differentially private conditional randomization test (PrivCRT, Algorithm 2).

    Parameters
    ----------
    x, y, z, model_x, y_bound, x_residual_bound, n_resamples, x_resamples,
    ridge_lambda, kernel_sigma, kernel_approximation, n_features, feature_rng, y_center,
    sensitivity
        As in :func:`crt_statistics`.
    epsilon : float
        Privacy parameter (> 0).
    alternative : {"two-sided", "greater", "less"}
        ``"greater"`` is the paper's one-sided test on T; ``"two-sided"`` ranks
        |T| and ``"less"`` ranks -T (same sensitivity).
    rng : None, int or Generator
        None (default): resamples from fresh entropy and OpenDP's exact
        report-noisy-max; use it for a release.  Given: resampling and
        exponential noise from this generator, for simulation studies
        (reproducible, not hardened; private only if the seed is secret, fresh
        and never reused; the result says so).
    budget : privci.PrivacyBudget, optional
        Charged ``epsilon`` after the inputs are validated and before anything
        is computed from the data (a refused release computes nothing).
    bounds_epsilon : float, optional
        With ``y_bound``, ``x_residual_bound`` or ``y_center`` set to
        ``"auto"``: the part of ``epsilon`` (default 10%) spent on releasing
        them with differential privacy (private quantiles of |x - E[X | Z]|
        and |y - centre|, the private median of y; see
        :func:`privci.bounds.private_bounds`); sequential composition, the
        released values are in ``privacy.bounds``.

    Returns
    -------
    PrivateTestResult
        ``statistic`` is the privately selected rank c_hat (0-based, in the
        decreasing order), ``pvalue`` = (1 + c_hat) / (m + 1), ``min_pvalue``
        = 1 / (m + 1), the smallest p-value the test can return (printed
        next to the p-value), and the privacy record.  Neither the statistics
        nor the true rank are stored.

    Notes
    -----
    **Rejecting.**  The p-value takes the values 1/(m + 1), ..., 1: with the
    default m = 19 the smallest is exactly 0.05, so the test rejects at level
    alpha when ``pvalue <= alpha`` (``pvalue < 0.05`` never holds with
    m = 19).  With m resamples a level alpha is attainable only when
    alpha >= 1 / (m + 1).

    **Why m = 19.**  More resamples make smaller p-values possible but cost
    power: report-noisy-max must single out T_0 among more close
    competitors.  Measured on the README's design (n = 2000, z ~ N(0, 1),
    x = sin z + e, y = cos z + beta (x - sin z) + e', ``y_bound=5``,
    ``x_residual_bound=4``, two-sided; 200 data sets per beta, seed 37005,
    the same data and resamples for every m; 95% Wilson intervals), the
    rejection rate at ``pvalue <= 0.05``:

    ========  =======  ====================  ====================  ====================  ====================
    beta      epsilon  m = 19                m = 39                m = 99                m = 199
    ========  =======  ====================  ====================  ====================  ====================
    0 (null)  1        0.060 [0.035, 0.102]  0.050 [0.027, 0.090]  0.045 [0.024, 0.083]  0.035 [0.017, 0.070]
    0 (null)  2        0.035 [0.017, 0.070]  0.040 [0.020, 0.077]  0.035 [0.017, 0.070]  0.040 [0.020, 0.077]
    0.2       1        0.200 [0.150, 0.261]  0.155 [0.111, 0.212]  0.080 [0.050, 0.126]  0.110 [0.074, 0.161]
    0.2       2        0.670 [0.602, 0.731]  0.555 [0.486, 0.622]  0.365 [0.301, 0.434]  0.230 [0.177, 0.293]
    0.4       1        0.720 [0.654, 0.778]  0.595 [0.526, 0.661]  0.365 [0.301, 0.434]  0.225 [0.173, 0.288]
    0.4       2        0.985 [0.957, 0.995]  0.975 [0.943, 0.989]  0.940 [0.898, 0.965]  0.885 [0.833, 0.922]
    ========  =======  ====================  ====================  ====================  ====================

    So m = 19, the smallest m that can reach 0.05, keeps the most power, and
    the level holds for every m (the paper's appendix figure shows the same
    at n = 1000, ``vignettes/fig6_privcrt_m_and_pvalues.py``).  For a smaller
    alpha take m = ceil(1 / alpha) - 1 (e.g. 99 for alpha = 0.01).

    **Mechanism.**  Scores s_c = -|Q_c - T_0| / (2 Delta_T), Q the statistics
    in decreasing order, have sensitivity at most 1 (the paper's Lemma);
    report-noisy-max with exponential noise of scale 2 / epsilon is then
    epsilon-DP.

    Examples
    --------
    >>> import numpy as np, privci
    >>> rng = np.random.default_rng(5)
    >>> z = rng.normal(size=2000); x = np.sin(z) + rng.normal(size=2000)
    >>> y = 2 * (x - np.sin(z)) + rng.normal(size=2000)
    >>> mx = privci.GaussianModelX(lambda zz: np.sin(zz[:, 0]), 1.0)
    >>> res = privci.privcrt(x, y, z, epsilon=2, model_x=mx, y_bound=8,
    ...                      x_residual_bound=4, rng=1)
    >>> res.pvalue, res.min_pvalue, res.privacy.sensitivity > 0
    (0.05, 0.05, True)
    >>> res.pvalue <= 0.05            # rejects at level 0.05 (p <= alpha)
    True
    >>> print(res)                    # doctest: +ELLIPSIS
    PrivateTestResult(
        statistic=0 (rank),
        pvalue=0.05  (the smallest attainable with 19 resamples is 1/20 = 0.05; reject at level alpha when p <= alpha),
    ...
    """
    call = dict(epsilon=epsilon, model_x=model_x, y_bound=y_bound,
                x_residual_bound=x_residual_bound, n_resamples=n_resamples,
                x_resamples=x_resamples, ridge_lambda=ridge_lambda, kernel_sigma=kernel_sigma,
                alternative=alternative, rng=rng, kernel_approximation=kernel_approximation,
                n_features=n_features, feature_rng=feature_rng, y_center=y_center,
                sensitivity=sensitivity, budget=budget, bounds_epsilon=bounds_epsilon)
    from . import _dask   # Dask arrays: map-reduce over partitions (dask imported only then)
    if _dask.is_dask(x, y, z, x_resamples):
        return _dask.privcrt(x, y, z, **call)
    # parameters (before any data) and the release plan (every epsilon share)
    par = CP.crt_params(**{k: v for k, v in call.items() if k not in ("model_x",
                                                                       "feature_rng")})
    plan = CP.crt_plan(par)
    sample_rng = par.rng if par.rng is not None else np.random.default_rng()
    charged, released = [], {}
    # the statistics T_0..T_m; the budget is charged after the data checks, before any use
    cs = _crt_statistics(x, y, z, model_x, y_bound, x_residual_bound, n_resamples, x_resamples,
                         ridge_lambda, kernel_sigma, sample_rng, kernel_approximation,
                         n_features, feature_rng, y_center, sensitivity,
                         charge=lambda: charged.append(plan.charge(par.budget, "privcrt")),
                         auto=((plan.share("bounds"), par.rng, released) if par.any_auto
                               else None))
    # the mechanism: report-noisy-max over the rank scores
    scores = _kernels.rank_scores(_oriented(cs.statistics, par.mode), cs.sensitivity)
    c_hat, info = report_noisy_max(scores, plan.test_epsilon, par.rng)
    out = CP.RankOutput(c_hat=c_hat, noise=info, m=cs.statistics.shape[0] - 1, n=cs.n,
                        conditional=cs.ridge_lambda is not None, sensitivity=cs.sensitivity,
                        sensitivity_kind=cs.sensitivity_kind, ridge_lambda=cs.ridge_lambda,
                        kernel_sigma=cs.kernel_sigma, y_bound=cs.y_bound,
                        y_center=cs.y_center, x_residual_bound=cs.x_residual_bound)
    return CP.crt_result(par, plan, out, released, charged[0] if charged else None)


@accepts_data_frames
def crt(x, y, z, *, model_x, n_resamples=199, x_resamples=None, alternative="two-sided",
        rng=None, statistic=None, ridge_lambda=5.0, kernel_sigma=1.0):
    """Conditional randomization test (non-private, model-X), exact finite-sample p-value.

    Parameters
    ----------
    x, y : array-like (n,)
    z : array-like (n, d) or (n,)
    model_x : ModelX or array-like
        As in :func:`crt_statistics`.
    n_resamples : int, default 199
    x_resamples : array-like (m, n), optional
    alternative : {"two-sided", "greater", "less"}
        Ranks T, |T| or -T.
    rng : None, int or Generator
        Randomness of the resampling.
    statistic : callable, optional
        ``statistic(x, y, z) -> float``, applied to the observed x and to each
        resample; the CRT is valid for every statistic.  Default: the
        residual-product sum T = sum_i (x_i - E[X | z_i]) r_Y,i with r_Y the
        KRR residuals of y on z (``ridge_lambda``, ``kernel_sigma``), unclipped.

    Returns
    -------
    CRTResult
        ``pvalue`` = (1 + #{j >= 1 : T_j >= T_0}) / (m + 1) (ties count against
        rejection), ``statistic`` = T_0, and the resampled statistics.

    Examples
    --------
    >>> import numpy as np, privci
    >>> rng = np.random.default_rng(6)
    >>> z = rng.normal(size=200); x = np.sin(z) + rng.normal(size=200)
    >>> y = rng.normal(size=200)
    >>> mx = privci.GaussianModelX(lambda zz: np.sin(zz[:, 0]), 1.0)
    >>> res = privci.crt(x, y, z, model_x=mx, n_resamples=99, rng=0)
    >>> 0.01 <= res.pvalue <= 1
    True
    """
    mode = V.check_alternative(alternative)
    rng = V.check_rng(rng)
    xa = _univariate(V.as_data(x, "x"), "x")
    ya = V.as_data(y, "y")
    _univariate(ya, "y")
    za = V.as_data(z, "z")
    n = V.check_same_rows(x=xa[:, None], y=ya, z=za)
    V.check_min_n(n, 2, "the CRT")
    mu, xr = _resamples_and_mean(model_x, za, n, n_resamples, x_resamples, rng)
    x_all = np.vstack([xa[None, :], xr])
    if statistic is None:
        lam = V.positive_finite(ridge_lambda, "ridge_lambda")
        sigma = V.positive_finite(kernel_sigma, "kernel_sigma")
        ry = krr_residuals(za, ya.copy(), sigma, lam)[:, 0]
        stats = _kernels.crt_statistics(np.ascontiguousarray(x_all - mu[None, :]),
                                        np.ascontiguousarray(ry))
    elif callable(statistic):
        yv, zv = ya[:, 0], (za[:, 0] if za.shape[1] == 1 else za)
        stats = np.array([float(statistic(row, yv, zv)) for row in x_all])
        if not np.all(np.isfinite(stats)):
            raise ValueError("`statistic` returned NaN or inf.")
    else:
        raise TypeError(f"`statistic` must be None or a callable; got {type(statistic).__name__} instead.")
    o = _oriented(stats, mode)
    m = x_all.shape[0] - 1
    pval = (1.0 + np.count_nonzero(o[1:] >= o[0])) / (m + 1.0)
    return CRTResult(statistic=float(stats[0]), pvalue=float(pval), alternative=alternative,
                     method="Conditional randomization test (model-X)", n=n, n_resamples=m,
                     resampled_statistics=stats[1:])
