"""The Generalised Covariance Measure test (Shah & Peters) and its private version.

Public functions: :func:`gcm`, :func:`gcm_from_residuals`,
:func:`residual_products` (the PrivGCM transformation) and :func:`privgcm`
(Algorithm 1 of Kalemaj, Kasiviswanathan & Ramdas).
"""

from __future__ import annotations

import numpy as np

from . import _gcm_pipeline as P, _kernels, _validation as V
from ._frames import accepts_data_frames
from ._params import GCMOptions
from ._source import MemorySource
from ._stats import DegenerateStatisticWarning, _method_name, _statistic_from_products
from ._transform import _GCMInputs
from .regression import krr_cv_residuals, krr_residuals, rff_frequencies
from .results import GCM_LARGE_N as LARGE_N, GCMResult

__all__ = ["gcm", "gcm_from_residuals", "residual_products", "privgcm",
           "DegenerateStatisticWarning"]


def gcm_from_residuals(resid_x, resid_y, *, n_sim=499, alternative="two-sided", rng=None):
    """GCM test on given residuals (R's ``gcm.test(resid.XonZ=, resid.YonZ=)``).

    Parameters
    ----------
    resid_x : array-like, shape (n,) or (n, p)
        Residuals of X on Z.
    resid_y : array-like, shape (n,) or (n, q)
        Residuals of Y on Z.
    n_sim : int, default 499
        Number of Gaussian multiplier draws for the multivariate test.
    alternative : {"two-sided", "greater", "less"}
        ``"greater"`` rejects for a positive expected conditional covariance.
    rng : None, int or numpy Generator
        Source of the multiplier draws (multivariate only).

    Returns
    -------
    GCMResult

    Notes
    -----
    Univariate (p = q = 1): R = resid_x * resid_y, statistic
    sqrt(n) mean(R) / sqrt(mean(R^2) - mean(R)^2), normal p-value.
    Multivariate: the p*q product columns (x index fastest) are each divided
    by their population standard deviation; statistic sqrt(n) max_k |mean_k|;
    p-value (1 + #{S_b >= statistic}) / (n_sim + 1) with
    S_b = max_k |sum_i R_ik g_ib| / sqrt(n), g ~ N(0, 1), as in R.
    Products with zero variance make the statistic undefined: the result then
    has ``statistic = pvalue = nan`` and a :class:`DegenerateStatisticWarning`
    is issued.

    Examples
    --------
    >>> import numpy as np, privci
    >>> rng = np.random.default_rng(0)
    >>> rx, ry = rng.normal(size=200), rng.normal(size=200)
    >>> res = privci.gcm_from_residuals(rx, ry)
    >>> 0 <= res.pvalue <= 1
    True
    """
    rx = V.as_data(resid_x, "resid_x", min_rows=2)
    ry = V.as_data(resid_y, "resid_y", min_rows=2)
    V.check_same_rows(resid_x=rx, resid_y=ry)
    n_sim = V.check_int(n_sim, "n_sim", 1)
    mode = V.check_alternative(alternative)
    rng = V.check_rng(rng)
    prod = _kernels.residual_products(rx, ry)
    stat, pval = _statistic_from_products(prod, n_sim, mode, rng)
    k = prod.shape[1]
    return GCMResult(statistic=stat, pvalue=pval, alternative=alternative,
                     method=_method_name(k), n=rx.shape[0], resid_x=rx, resid_y=ry,
                     n_sim=n_sim if k > 1 else None)


def _sklearn_residuals(regressor, z, U):
    from sklearn.base import clone

    out = np.empty_like(U)
    for c in range(U.shape[1]):
        est = clone(regressor)
        est.fit(z, U[:, c])
        out[:, c] = U[:, c] - np.asarray(est.predict(z), dtype=np.float64).ravel()
    return out


# LARGE_N: from this n on, gcm's exact kernel ridge regression (O(n^3)) takes seconds to
# minutes; the progress lines and the result's note say what is faster (a rule of n)


def _regression_text(opt):
    """How gcm regressed x and y on z, for the result's ``method``."""
    if opt.kind == "none":
        return ""
    if opt.kind == "sklearn":
        return f", regression {type(opt.regressor).__name__} (scikit-learn)"
    if opt.kind == "krr-cv":
        what = (f"kernel ridge regression, lambda by {opt.folds}-fold cross-validation over "
                f"{opt.grid.size} values")
    elif opt.kernel_approximation == "rff":
        what = (f"kernel ridge regression on {opt.n_features} random Fourier features, "
                f"lambda {opt.lam:g}")
    else:
        what = f"kernel ridge regression, lambda {opt.lam:g}"
    return ", " + what + (", x and y centred" if opt.center else "")


def _progress(enabled, text, out=None):
    if enabled:
        import sys
        print(f"privci.gcm: {text}", file=sys.stderr if out is None else out, flush=True)


@accepts_data_frames
def gcm(x, y, z=None, *, regressor="kernel_ridge", kernel_sigma=1.0, ridge_lambda=None,
        cv_lambdas=None, cv_folds=10, n_sim=499, alternative="two-sided", rng=None,
        kernel_approximation="exact", n_features=512, feature_rng=None, center=False,
        progress=None):
    """Generalised Covariance Measure test of X independent of Y given Z (non-private).

    Reproduces R's ``GeneralisedCovarianceMeasure::gcm.test`` with
    ``regr.method = "kernel.ridge"`` (see ``../shared/r-parity``).

    Parameters
    ----------
    x : array-like, shape (n,) or (n, p)
    y : array-like, shape (n,) or (n, q)
    z : array-like, shape (n, d) or (n,), or None
        None means no conditioning: the residuals are x and y themselves.
    regressor : "kernel_ridge" or a scikit-learn regressor
        ``"kernel_ridge"`` is R's ``kernel.ridge``: Gaussian RBF kernel
        exp(-kernel_sigma ||z - z'||^2) and alpha = (K + n lambda I)^-1 u.
        Any object with ``fit``/``predict`` is cloned and fitted per column;
        residuals are in-sample, as in R.
    kernel_sigma : float, default 1.0
        RBF parameter (R's ``regr.pars$sigma``).
    ridge_lambda : float or None, default None
        None chooses lambda per column by CVST-compatible cross-validation over
        ``cv_lambdas``; a number fixes it.
    cv_lambdas : sequence of float, default 10**-6, ..., 10**4 (11 values)
    cv_folds : int, default 10
        Contiguous unshuffled folds as in CVST; needs n >= 2 * cv_folds.
    n_sim : int, default 499
        Multiplier draws for the multivariate test.
    alternative : {"two-sided", "greater", "less"}
    rng : None, int or numpy Generator
        Randomness for the multivariate multiplier draws.
    kernel_approximation : {"exact", "rff"}, default "exact"
        ``"rff"`` replaces the exact kernel by ``n_features`` paired random
        Fourier features drawn from ``feature_rng`` (O(n D^2) instead of
        O(n^3)); it needs a fixed ``ridge_lambda``.
    n_features : int, default 512
    feature_rng : None, int or numpy Generator
        Stream of the random frequencies, separate from ``rng``.
    center : bool, default False
        Subtract the sample means of x and y before the regressions.  Kernel
        ridge regression has no intercept, so on data far from zero the
        residuals keep part of the means and the products have a non-zero
        mean even under independence.  False reproduces R's ``gcm.test``.
        Use True with ``kernel_approximation="rff"`` or a fixed ``ridge_lambda``
        (see "Larger n" below).
    progress : bool or None, default None
        Print one line to stderr before the regressions and one after them
        (with the time taken).  None: only when the exact kernel ridge
        regression runs at n >= 3000, where it takes
        seconds to minutes; the first line says what is faster.

    Returns
    -------
    GCMResult
        ``statistic``, ``pvalue``, ``alternative``, ``method`` (it names the
        regression: cross-validated, fixed lambda or random features, centred
        or not), ``n``, the lambdas used per column and the residuals.  From
        n = 3000 on, its printed form adds a note on what is faster when the
        exact kernel regression ran.

    Notes
    -----
    **Larger n.**  The defaults reproduce R's ``gcm.test``: exact kernel ridge
    regression with lambda chosen by 10-fold cross-validation over 11 values.
    That needs the n x n kernel matrix and its eigendecomposition: O(n^2)
    memory and O(n^3) time, measured at n = 5000 (one column of z, this
    project's 2-core machine, shared): 149 s under a load of 8 (the issue
    that prompted this note saw 16-41 s), against 5.6 s with a fixed
    ``ridge_lambda`` (one Cholesky solve, still O(n^3)) and about 1 s with
    random features (``kernel_approximation="rff"``, 512 features, O(n D^2)).

    A faster fit must still fit: the level of any GCM test rests on its two
    regressions (Shah and Peters), and a fixed lambda too large for the data
    biases the statistic.  Measured on nulls at n = 5000 with three columns
    of z (x = 10 + sin z1 + z3^2 + e, y = 10 + cos z3 + z1 + e,
    ``center=True``), the rejection rate at 0.05: ``ridge_lambda=1e-3`` 0.54
    (exact kernel, 50 data sets, seed 37012) and 0.495 [0.426, 0.564]
    (random features, 200, seed 37011); ``ridge_lambda=1e-2`` 0.99 (random
    features); ``ridge_lambda=1e-5`` with random features 0.045
    [0.024, 0.083] (200, seed 37013; a first 50, seed 37012: 0.10), and with
    one column of z (x = 10 + sin z1 + e, y = 10 + cos z1 + z1 + e) 0.065
    [0.038, 0.108] (200, seed 37013).  So at larger n use
    ``kernel_approximation="rff", ridge_lambda=1e-5, center=True``, and check
    that a smaller lambda does not move the p-value.  With random features
    (or any fixed lambda) pass ``center=True``: the regression has no
    intercept, and on data whose means are far from 0 the un-centred
    residuals keep part of the means (nulls at n = 5000 with means 10,
    lambda = 1e-2: p = 2.5e-26 with one column of z and 3.5e-244 with three;
    with ``center=True`` 0.54 and 0.39).

    Examples
    --------
    >>> import numpy as np, privci
    >>> rng = np.random.default_rng(1)
    >>> z = rng.normal(size=300)
    >>> x = np.sin(z) + rng.normal(size=300)
    >>> y = np.cos(z) + rng.normal(size=300)
    >>> res = privci.gcm(x, y, z, ridge_lambda=0.01)
    >>> res.pvalue > 0.001
    True
    """
    call = dict(regressor=regressor, kernel_sigma=kernel_sigma, ridge_lambda=ridge_lambda,
                cv_lambdas=cv_lambdas, cv_folds=cv_folds, n_sim=n_sim, alternative=alternative,
                rng=rng, kernel_approximation=kernel_approximation, n_features=n_features,
                feature_rng=feature_rng, center=center)
    from . import _dask   # Dask arrays: map-reduce over partitions (dask imported only then)
    if _dask.is_dask(x, y, z):
        return _dask.gcm(x, y, z, **call)
    if progress is not None and not isinstance(progress, (bool, np.bool_)):
        raise TypeError(f"`progress` must be None, True or False; got {progress!r} instead.")
    xa = V.as_data(x, "x", min_rows=2)
    ya = V.as_data(y, "y", min_rows=2)
    za = V.as_data(z, "z", allow_none=True, min_rows=2)
    n = V.check_same_rows(x=xa, y=ya, z=za)
    opt = GCMOptions(n, za is not None, **call)
    exact = opt.kind in ("krr", "krr-cv") and kernel_approximation != "rff"
    show = bool(progress) if progress is not None else (exact and n >= LARGE_N)
    if show and opt.kind != "none":
        hint = (" (O(n^3) time: faster at large n with kernel_approximation='rff', "
                "ridge_lambda=1e-5, center=True; progress=False silences these lines)"
                if exact else "")
        _progress(True, f"n = {n}: regressing x and y on z by"
                  f"{_regression_text(opt)[1:]}{hint} ...")
    import time
    start = time.perf_counter()
    p = xa.shape[1]
    U = np.concatenate([xa, ya], axis=1)
    if opt.center:
        U = U - U.mean(axis=0)
    lam_x = lam_y = None
    if opt.kind == "none":
        resid = U
    elif opt.kind == "sklearn":
        resid = _sklearn_residuals(regressor, za, U)
    else:
        if opt.kind == "krr-cv":
            resid, chosen, _ = krr_cv_residuals(za, U, opt.sigma, opt.grid, opt.folds)
        else:
            freqs = None
            if kernel_approximation == "rff":
                freqs = rff_frequencies(za.shape[1], opt.n_features, opt.sigma,
                                        V.check_rng(feature_rng))
            resid = krr_residuals(za, U, opt.sigma, opt.lam,
                                  kernel_approximation=kernel_approximation, freqs=freqs)
            chosen = np.full(U.shape[1], opt.lam)
        lam_x = tuple(float(v) for v in chosen[:p])
        lam_y = tuple(float(v) for v in chosen[p:])
    if show and opt.kind != "none":
        _progress(True, f"regressions done in {time.perf_counter() - start:.1f} s")
    rx = np.ascontiguousarray(resid[:, :p])
    ry = np.ascontiguousarray(resid[:, p:])
    prod = _kernels.residual_products(rx, ry)
    stat, pval = _statistic_from_products(prod, opt.n_sim, opt.mode, opt.rng)
    k = prod.shape[1]
    return GCMResult(statistic=stat, pvalue=pval, alternative=alternative,
                     method=_method_name(k) + _regression_text(opt), n=n,
                     ridge_lambda_x=lam_x, ridge_lambda_y=lam_y,
                     resid_x=rx, resid_y=ry, n_sim=opt.n_sim if k > 1 else None)


# --------------------------------------------------------------------------- PrivGCM

@accepts_data_frames
def residual_products(x, y, z=None, *, x_bound, y_bound, ridge_lambda=5.0, kernel_sigma=1.0,
                      kernel_approximation="exact", n_features=512, feature_rng=None,
                      x_center=0.0, y_center=0.0, sensitivity="paper"):
    """The PrivGCM transformation: clip, rescale, KRR residuals, products, sensitivity.

    Parameters
    ----------
    x : array-like, shape (n,) or (n, p)
    y : array-like, shape (n,) or (n, q)
    z : array-like, shape (n, d) or (n,), or None
        Not bounded.  None: no conditioning (an unconditional test): the
        residuals are the clipped, scaled x and y themselves.
    x_bound, y_bound : float or array of one per column
        Public bounds, fixed before seeing the data.  Values outside
        [center - bound, center + bound] are clipped (silently: a count of
        clipped values would leak), then (value - center) / bound is used.
    ridge_lambda : float, default 5.0
        Ridge parameter in the package's parameterisation (the paper's
        lambda_K = 2 * ridge_lambda = 10).  Must not be chosen from the data.
    kernel_sigma : float, default 1.0
        Gaussian kernel exp(-kernel_sigma ||z - z'||^2), data-independent
        default; put Z on a known scale first.
    kernel_approximation : {"exact", "rff"}, default "exact"
        ``"rff"`` uses ``n_features`` paired random Fourier features (norm
        exactly 1, so the same sensitivity holds) drawn from ``feature_rng``,
        a stream independent of the data.
    n_features : int, default 512
    feature_rng : None, int or numpy Generator
    x_center, y_center : float or one per column, default 0.0
        Public centres, fixed before seeing the data (e.g. the midpoint of a
        known range).  Kernel ridge regression has no intercept and, at the
        strong regularisation the privacy bound needs, removes little of a
        constant: put the centre near the mean, or the residual products
        have a non-zero mean even under independence (a level failure).
    sensitivity : {"paper", "sharp"}, default "paper"
        Which proved constant certifies the products (see
        :func:`privci.gcm_sensitivity`); the default follows :func:`privgcm`.

    Returns
    -------
    ResidualProducts
        ``.products`` of shape (n,) (or (n, p*q), x index fastest) and
        ``.sensitivity``, the certified L1 bound of the change of ``.products``
        when one row (x_i, y_i, z_i) is replaced: p * q * C(ridge_lambda), or
        2 p q without conditioning.  The residuals are clipped to their proved
        bound ``.residual_bound`` (1 + B_lambda, see
        :func:`privci.regression.krr_norm_bound`).  These values are NOT
        private: add noise (see :func:`privgcm`).

    Notes
    -----
    Sharp constant C*(lambda) = 2 b^2 + 4 b min(b B, 1 / (2 sqrt(lambda))),
    B = B_lambda, b = 1 + B (3.630 at lambda = 5); the paper's constant
    C(lambda) = 4 (1 + 1/sqrt(lambda)) (1 + 1/sqrt(lambda) + 2/lambda^1.5 + 2/lambda)
    (11.729 at lambda = 5) with ``sensitivity="paper"``.  Proofs: see
    :func:`privci.gcm_sensitivity` and the documentation's sensitivity page.
    Without conditioning the residuals are the scaled data (|u| <= 1) and
    one row moves only its own product, by at most 2.

    Examples
    --------
    >>> import numpy as np, privci
    >>> rng = np.random.default_rng(2)
    >>> z = rng.normal(size=100); x = rng.normal(size=100); y = rng.normal(size=100)
    >>> rp = privci.residual_products(x, y, z, x_bound=4, y_bound=4)
    >>> rp.products.shape, round(rp.sensitivity, 3)
    ((100,), 11.729)
    >>> round(privci.residual_products(x, y, z, x_bound=4, y_bound=4,
    ...                                sensitivity="sharp").sensitivity, 3)
    3.63
    """
    if isinstance(ridge_lambda, str):
        raise ValueError("`ridge_lambda` must be a positive number fixed before seeing the data "
                         f"(the transformation certifies a sensitivity for it); got "
                         f"{ridge_lambda!r} instead ('cv' is an opt-in of privgcm only).")
    inp = _GCMInputs(x, y, z, x_bound, y_bound, ridge_lambda, kernel_sigma, None,
                     kernel_approximation, n_features, feature_rng, x_center, y_center,
                     sensitivity)
    rp, _, _ = inp.transform()
    return rp


def _finite(a):
    """Map the overflow of a public shift or scale of finite z (1e308 - (-1e308)) back into
    the finite numbers, so that no later step sees inf (and raises or warns on one
    neighbour only); the values are clipped to [-4, 4] by the spline basis anyway."""
    big = np.finfo(np.float64).max
    return np.ascontiguousarray(np.clip(np.nan_to_num(a, nan=0.0, posinf=big, neginf=-big),
                                        -big, big))


def _spline_mechanism(par, plan, inp):
    """The released spline regression in memory: the pipeline's mechanism over one
    partition (the Dask path runs the same one over its chunks)."""
    source = MemorySource(inp.xa, inp.ya, inp.za)
    means, xc, yc, centre = P.release_centres(source, plan, inp, par.rng)
    return P.spline_mechanism(source, plan, inp, (inp.xc, inp.xb, inp.yc, inp.yb), means, xc,
                              yc, centre, par.rng, par.mode)


@accepts_data_frames
def privgcm(x, y, z=None, *, epsilon, x_bound, y_bound, ridge_lambda=None, kernel_sigma=None,
            alternative="two-sided", rng=None, n_sim=499, cv_lambdas=None,
            kernel_approximation=None, n_features=None, feature_rng=None, x_center=0.0,
            y_center=0.0, center_epsilon=None, n_blocks="auto", sensitivity=None,
            budget=None, bounds_epsilon=None, z_scale=None, regression="spline", z_center=None,
            assume_additive=False, assume=None, tighten="auto"):
    """Differentially private GCM test (PrivGCM).

    With z given and ``regression="spline"`` (the default): the regressions
    of the scaled x and y on z are **released** with differential privacy
    (cubic splines for one column of z; a stated model, ``assume=``, for two
    or more: Gram matrices and cross-products get Laplace noise, x fitted on one
    half of the rows and y on the other), the residuals are divided by public
    scales so that they lie in [-1, 1], and the test releases one noisy sum of
    their products and one of the squared products (its variance): the
    p-value is the exact tail of the normal sampling error plus the sum's own
    Laplace noise, with the released fits' noise and a bias allowance from a
    nested richer fit in the variance (see ``privci._spline`` and the
    documentation's "Released regression" page for the proof).  A public rule
    of (n, d, epsilon, the model) sets the basis resolution, the epsilon split
    and the test; where it finds that the regression cannot be resolved,
    privgcm raises :class:`~privci._spline.UnresolvableDesignError` before
    anything is charged or read (naming the smallest epsilon and n that would
    resolve it, and the stated models that resolve here; :func:`privci.plan`
    says so beforehand).  Where the nested fits disagree on the data, the
    p-value is 1 (the fail-safe, not evidence of independence): the printed
    result and ``res.fit_check`` say so and a ``FailSafeWarning`` is emitted.
    The check sees what the nested rich fit represents, no finer:
    ``res.fit_check["shortest_period"]`` (printed) is the shortest period, in
    units of ``z_scale``, of an oscillation it resolves; regressions of x and
    y that both vary faster can bias the test (measured on the documentation's
    "Released regression" page).

    With ``regression="krr"`` (the paper's mechanism): the kernel ridge
    residual products of (x - x_center)/x_bound and (y - y_center)/y_bound,
    clipped to [-1, 1], on z (see :func:`residual_products`), summed within
    ``n_blocks`` blocks, Laplace noise of scale sensitivity / epsilon on
    every block sum; its defaults (one block per row, the paper's constant)
    are the paper's Algorithm 1.

    Parameters
    ----------
    x, y : array-like
        x (n,) or (n, p); y (n,) or (n, q).  Dask arrays run as map-reduce
        passes over their partitions on the current Dask client, with the same
        result as in memory (the spline fit with public ``z_center`` and
        ``z_scale``; ``regression="krr"`` with ``kernel_approximation="rff"``).
    z : array-like (n, d) or (n,), or None
        The conditioning variables; None tests unconditional independence.
    epsilon : float
        Privacy parameter (> 0).  The released (statistic, p-value) is
        epsilon-DP under the replacement of one row (x_i, y_i, z_i).
    x_bound, y_bound : float, one per column, or "auto"
        Public bounds; data outside [center - bound, center + bound] are
        clipped.  A column known to take two values a < b (a binary column:
        0 and 1) has the public window centre (a + b) / 2, bound (b - a) / 2,
        which maps it to -1 and 1 exactly (far more power than a 4-sd window;
        docs: parameters, "Binary and few-valued columns").  ``"auto"``: released with differential privacy from the
        data (a private upper quantile of |x - centre|, see
        :func:`privci.bounds.private_bounds`), spending ``bounds_epsilon``;
        under ``assume="additive"`` with two or more columns of z the window is
        twice the released quantile (a clipped x is not additive in z where x
        is; the result's caveats say so).
    ridge_lambda : float, "cv" or None, default None
        ``regression="krr"`` only (like ``kernel_sigma``, ``cv_lambdas``,
        ``kernel_approximation``, ``n_features``, ``feature_rng`` and
        ``sensitivity``: each defaults to None, "not given", and any other
        value is refused with the spline fit, even one equal to the KRR
        default).  None: 5.0, the paper's lambda_K = 10.  Fixed before seeing
        the data.  ``"cv"`` opts in to cross-validation over
        ``cv_lambdas`` on the private data: the result then states that there
        is no privacy guarantee.
    kernel_sigma : float or None, default None (1.0 with ``"krr"``)
    alternative : {"two-sided", "greater", "less"}
    rng : None, int or numpy Generator
        None (default): OpenDP's exact, floating-point-safe Laplace sampler and
        fresh OS entropy for the partition; use it for a release.  Given:
        numpy noise from that generator, for simulation studies (reproducible,
        not hardened; a seeded release is private only if the seed is secret,
        fresh and never reused; the result says so).
    n_sim : int, default 499
        Multiplier draws for multivariate x or y.
    cv_lambdas : sequence, optional
        Grid for ``ridge_lambda="cv"`` (default 5, 10, 20, ..., 1000).
    kernel_approximation, n_features, feature_rng, x_center, y_center
        See :func:`residual_products` (None: "exact", 512, None with
        ``"krr"``).  Set the public centres near the means
        of x and y: the ridge regression has no intercept.  ``"auto"``
        centres: the private median (part of ``bounds_epsilon``) sets the
        clipping window, and the data are then re-centred on private means
        (``center_epsilon``, default 10% of ``epsilon`` in that case).
    center_epsilon : float, optional
        Private re-centring, for when no public centre near the means is
        known.  This part of ``epsilon`` (0 < center_epsilon < epsilon) buys
        Laplace-noised means of the clipped, scaled columns of x and y (L1
        sensitivity 2 (p + q) / n); the data are shifted by the released
        means and clipped again to the same width.  The products then get
        ``epsilon - center_epsilon`` (rounded down to the float that keeps the
        exact sum <= epsilon), and the whole release is ``epsilon``-DP by
        sequential composition.  The released centres are in
        ``privacy.bounds``.  None (default): no re-centring.
    n_blocks : "auto", int or None, default "auto"
        Number k of blocks whose sums are released.  The L1 sensitivity of
        the vector of block sums is that of the products (each row lies in one
        block), so each block sum gets Laplace(sensitivity / epsilon): the
        noise in the statistic shrinks by a factor of about k / n against
        per-product noise.  None: k = n, noise on every product (Algorithm 1).
        ``"auto"`` (a public rule, see ``privci._private.auto_n_blocks``):
        min(n, 20) without conditioning; with the spline fit 5, 10 or 20, the
        released regression's rule (``privci._spline.choose_design``); with
        ``regression="krr"`` and z given, n (Algorithm 1),
        because the noise of Algorithm 1 is what hides the bias of the
        strongly regularised regression (measured: fewer blocks or the sharp
        constant with the default regression reject up to all true nulls at
        n = 10^4).  Choose k < n with z only when the regressions are known to
        fit well (then the power gain is large).
    sensitivity : {"paper", "sharp"} or None, default None ("paper" with ``"krr"``)
        The proved constant (see :func:`privci.gcm_sensitivity`); the kernel
        ridge path keeps the paper's constant by default, unlike
        :func:`privci.privcrt` ("sharp"), because its noise is what hides the
        strongly regularised regression's bias (see ``n_blocks``).  Both are
        valid privacy guarantees; "sharp" is 3.2 times smaller at lambda = 5
        and adds correspondingly less noise, which, like fewer blocks, exposes
        the regression's bias (see ``n_blocks``); without z both equal 2.
    budget : privci.PrivacyBudget, optional
        Charged ``epsilon`` before anything is computed from the data; a
        release that would overspend raises ``BudgetExceededError`` and
        computes nothing.
    bounds_epsilon : float, optional
        The part of ``epsilon`` spent on the ``"auto"`` bounds and centres
        (default 10% of ``epsilon`` when any is ``"auto"``).  Split by weight:
        z's released quantities (``d`` per ``"auto"`` among ``z_center`` and
        ``z_scale``) get ``z_items / (z_items + xy_items)`` of it, with
        ``xy_items`` = (number of ``"auto"`` among the x/y bounds and centres)
        times max(p, q); z's part is halved between centres and scales, and
        the x/y part is split equally among its released quantities.
        Sequential composition: the released values are in ``privacy.bounds``
        and the split in the guarantee.
    z_scale : None, float, one per column of z, or "auto"
        Divide each column of z by this scale before the kernel, so that
        ``kernel_sigma`` does not depend on the units of z.  A number is a
        public scale; ``"auto"`` releases a private scale per column
        (:func:`privci.bounds.private_scale`, part of ``bounds_epsilon``).
        Any fixed per-column rescaling keeps k(z, z) = 1, so the sensitivity
        is unchanged.  None (default): ``"auto"`` with the spline fit (the
        knots need z on a unit scale; 10% of epsilon by default, shared with
        ``z_center``), z as given with ``"krr"``.

    regression : {"spline", "krr"}, default "spline"
        ``"spline"``: the released spline regression (above);
        the KRR-only options (``ridge_lambda``, ``kernel_sigma``,
        ``cv_lambdas``, ``kernel_approximation``, ``n_features``,
        ``feature_rng``, ``sensitivity``) are refused with it, and
        ``n_blocks=None`` too.  With several columns of z it fits a stated
        model (``assume``), checked by interaction terms for 2 to 4 columns; its level rests on what
        the nested fits can represent (measured level, including the cells
        that fail, in ``vignettes/README.md``, "Level stress grid").
        ``"krr"``: kernel ridge regression, the paper's mechanism.
    z_center : None, float, one per column of z, or "auto"
        Public centre of each column of z (subtracted before ``z_scale``);
        the spline's knots sit at the normal quantiles (and on a uniform grid
        over [-3, 3]) of (z - z_center) / z_scale, clipped to [-4, 4].  None (default):
        ``"auto"`` with the spline fit (a private median per column, part of
        ``bounds_epsilon``), 0 with ``"krr"`` (the Gaussian kernel does not
        depend on a shift).  Fixed before seeing the data when given.
    assume : None, "additive" or "linear"
        Spline fit only: a stated model for E[X | Z] and E[Y | Z].  None
        (default): the full fit: cubic splines for one column of z, their
        tensor product for two (since stop 54: fitted and tested on the rows
        inside [-2, 2]^2 in units of z_scale, at the largest resolvable fit
        share; cautious, it fails safe where the nested fits disagree); with
        three or more columns privgcm refuses, naming the models that
        resolve (the documentation's "Released regression" page).  ``"additive"``: cubic
        splines per column, no interaction fitted; its check (an interaction
        block in the nested fit: products of quadratics in each column for 2
        and 3 columns, which sees sin(z1) cos(z2); multilinear for 4) runs
        where n and epsilon resolve it, and the fail-safe holds p = 1 where
        it finds interactions; interactions beyond what the block holds are
        not seen: use it where the design makes the model plausible.
        ``"linear"``: a
        linear function of each column (few coefficients: small samples);
        its check runs where n and epsilon resolve it: splines with 4
        intervals per column and the same interaction block, or (1 to 3
        columns, where the rule predicts more power from it) every product of
        cubic polynomials in clip(t_j, -1, 1) beside the linear fit's own
        features, on the rows with every column of t = (z - z_center) /
        z_scale in [-2, 2]; unchecked, the fit uses those rows too.
        The model and whether it was checked are in ``res.fit_check`` and the
        caveats; where unchecked, the level rests on the assumption (the
        unchecked additive fit's test still allows for its ridge's shrinkage,
        estimated from an unshrunk coarse fit, and fails safe where it is
        large).
    assume_additive : bool, default False
        The older spelling of ``assume="additive"``.
    tighten : "auto", True or False, default "auto"
        Tighten public ``x_bound`` / ``y_bound`` to a released window inside
        them (the released spline fit with z only).  A public bound is a
        promise about the range (what privacy needs); a range known from the
        domain is usually far wider than the data, and the test's signal in
        window units falls with the window's width (at 4 sd a sixth of what a
        1.3-sd window keeps).  True: part of ``bounds_epsilon`` (default 10%
        of epsilon, shared with the released z centre and scale) releases the
        private 0.8 quantile of |x - x_center| among candidates in
        (0, x_bound] (:func:`privci.bounds.private_bounds`; the same release
        as ``x_bound="auto"``, with the public centre), and x is clipped to
        that window, at most the public one (twice the quantile under
        ``assume="additive"`` with two or more columns, where a clip that
        rare keeps an additive x nearly additive).  Clipping x and y to
        any window leaves a null true.  ``"auto"``: True with the spline fit
        and z, unless the model is ``assume="linear"`` (the clip would bend
        E[X | Z] out of it), the fit could be resolved only without that
        share of epsilon, or, under ``assume="additive"``, that share would
        move the model below its check's edge (the check is never traded
        for the window) or the rule predicts the privacy noise of the
        statistic below half its sampling variance (where a window gains
        little and the clip's small bend is what the check sees at large n;
        all public numbers); with ``regression="krr"``,
        without z and on Dask arrays, False.  False: the public windows as given.  Measured
        (stop 51, n = 10^4, 4-sd public windows, 200 data sets per cell): the
        README design at epsilon 0.5 rejects in 0.97 (0.76 with the public
        window), skewed noise in 0.975 (0.19); but where E[X | Z] oscillates
        over the whole window the tighter window's fit check fails safe more
        often (one oscillation at epsilon 1, 50 data sets: fail-safes 0.90
        instead of 0.06); a FailSafeWarning then names tighten=False.

    Returns
    -------
    PrivateTestResult
        ``statistic`` and ``pvalue`` computed on the noisy block sums (or
        products) and the ``privacy`` record (epsilon, mechanism,
        sensitivity, noise scale, hardened or not, number of blocks,
        hyper-parameters, bounds, composition, caveats).  No un-noised
        quantity is stored.

    Notes
    -----
    Test.  Spline fit: t = S / sqrt(k var(block sums) + V + B^2) on k - 1
    degrees of freedom, S the sum of the k noisy block sums, V a delta-method
    estimate of the second moment of the shift that the released fits' noise
    puts on every product and B the bias allowance of the nested fits
    (several columns: Bonferroni over the pairs); p = 1 where the public rule
    cannot resolve the fit.  KRR with k < n blocks: the one-sample t statistic of the k noisy block
    means with a t reference on k - 1 degrees of freedom (several columns:
    the max statistic with a multiplier bootstrap over blocks).  With k = n:
    the GCM statistic on the noisy products with a normal p-value, as in the
    paper.  Under the null and the paper's "good fit" conditions the level is
    asymptotically exact; the level of any GCM-type test rests on the
    quality of the regressions (Shah and Peters' no-free-lunch result).

    Examples
    --------
    >>> import numpy as np, privci
    >>> rng = np.random.default_rng(3)
    >>> z = rng.normal(size=2000); x = np.sin(z) + rng.normal(size=2000)
    >>> y = np.cos(z) + 0.5 * x + rng.normal(size=2000)
    >>> res = privci.privgcm(x, y, z, epsilon=2.0, x_bound=4, y_bound=4, z_center=0.0,
    ...                      z_scale=1.0, rng=7)
    >>> res.privacy.hardened, res.statistic_name, res.pvalue < 0.05
    (False, 'z', True)
    >>> res.privacy.sensitivity_kind    # the default: the released spline regression
    'released spline fit'
    >>> paper = privci.privgcm(x, y, z, epsilon=2.0, x_bound=4, y_bound=4, rng=7,
    ...                        regression="krr")      # the paper's Algorithm 1
    >>> paper.privacy.n_blocks, paper.privacy.sensitivity_kind
    (2000, 'paper')
    >>> stat, p = res                   # unpacks like scipy's results
    >>> privci.privgcm(x, y, None, epsilon=1.0, x_bound=4, y_bound=4, rng=7).privacy.n_blocks
    20
    >>> z3 = rng.normal(size=(2000, 3))  # three columns: state a model, or privgcm refuses
    >>> privci.privgcm(x, y, z3, epsilon=2.0, x_bound=4, y_bound=4, z_center=0.0,
    ...                z_scale=1.0)      # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    privci._spline.UnresolvableDesignError: privgcm: the full fit (no assumption) cannot be resolved with 3 column(s) of z ...
    >>> privci.privgcm(x, y, z3, epsilon=2.0, x_bound=4, y_bound=4, z_center=0.0,
    ...                z_scale=1.0, assume="linear", rng=7).fit_check["model"]
    'linear'
    """
    call = dict(epsilon=epsilon, x_bound=x_bound, y_bound=y_bound, ridge_lambda=ridge_lambda,
                kernel_sigma=kernel_sigma, alternative=alternative, rng=rng, n_sim=n_sim,
                cv_lambdas=cv_lambdas, kernel_approximation=kernel_approximation,
                n_features=n_features, feature_rng=feature_rng, x_center=x_center,
                y_center=y_center, center_epsilon=center_epsilon, n_blocks=n_blocks,
                sensitivity=sensitivity, budget=budget, bounds_epsilon=bounds_epsilon,
                z_scale=z_scale, regression=regression, z_center=z_center,
                assume_additive=assume_additive, assume=assume, tighten=tighten)
    from . import _dask   # Dask arrays: map-reduce over partitions (dask imported only then)
    if _dask.is_dask(x, y, z):
        return _dask.privgcm(x, y, z, **call)
    # 1. parameters, validated before any data are read; then the data
    par = P.gcm_params(conditional=z is not None, **call)
    inp = par.inputs(x, y, z)
    d = 0 if inp.za is None else inp.za.shape[1]
    zc_pub, zs_pub = P.public_z(par, d)
    # 2. every epsilon share, from public numbers; the budget is charged before anything
    par = P.resolve_tighten(par, inp.n, d, inp.p, inp.q)
    plan = P.gcm_plan(par, inp.n, d, inp.p, inp.q)
    composition = plan.charge(par.budget, "privgcm")
    # 3. public shift and scale of z, then the released z centres/scales and x/y bounds
    public, inp = P.release_public(par, plan, P.shift_scale_z(inp, zc_pub, zs_pub), zs_pub)
    # 4. the mechanism: the released spline regression or the kernel ridge products
    out = _spline_mechanism(par, plan, inp) if par.spline else P.krr_mechanism(par, plan, inp)
    # 5. post-processing: the result and its privacy record
    return P.gcm_result(par, plan, inp, public, out, composition)
