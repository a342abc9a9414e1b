"""The Generalised Covariance Measure test (Shah & Peters) and its private version.

Public functions: :func:`gcm`, :func:`gcm_from_residuals`,
:func:`residual_products` (the PrivGCM transformation) and :func:`privgcm`
(Algorithm 1 of Kalemaj, Kasiviswanathan & Ramdas).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from . import _kernels, _validation as V
from ._epsilon import remaining
from ._frames import accepts_data_frames
from ._params import (_check_approximation, _check_assume_additive, _check_n_blocks,
                      _check_regression)
from ._private import (REGRESSION_CAVEAT, SEEDED_CAVEAT, block_counts, block_labels,
                       block_statistic, block_sums, guarantee_text, new_entropy)
from ._stats import DegenerateStatisticWarning, _method_name, _statistic_from_products
from ._transform import _GCMInputs
from .budget import _charge
from .mechanisms import laplace_mechanism, quiet
from .regression import (DEFAULT_CV_LAMBDAS, krr_cv_residuals, krr_residuals,
                         rff_frequencies)
from .results import GCMResult, PrivacyRecord, PrivateTestResult, Release

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


@accepts_data_frames
def gcm(x, y, z=None, *, regressor="kernel_ridge", kernel_sigma=1.0, ridge_lambda=None,
        cv_lambdas=None, cv_folds=10, n_sim=499, alternative="two-sided", rng=None,
        kernel_approximation="exact", n_features=512, feature_rng=None, center=False):
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

    Returns
    -------
    GCMResult
        ``statistic``, ``pvalue``, ``alternative``, ``method``, ``n``, the
        lambdas used per column and the residuals.

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
    from . import _dask   # Dask arrays: map-reduce over partitions (dask imported only then)
    if _dask.is_dask(x, y, z):
        return _dask.gcm(**{k: v for k, v in locals().items() if k != "_dask"})
    xa = V.as_data(x, "x", min_rows=2)
    ya = V.as_data(y, "y", min_rows=2)
    za = V.as_data(z, "z", allow_none=True, min_rows=2)
    n = V.check_same_rows(x=xa, y=ya, z=za)
    n_sim = V.check_int(n_sim, "n_sim", 1)
    mode = V.check_alternative(alternative)
    rng = V.check_rng(rng)
    V.check_min_n(n, 3, "the GCM test")
    if not isinstance(center, (bool, np.bool_)):
        raise TypeError(f"`center` must be True or False; got {center!r} instead.")
    lam_x = lam_y = None
    p = xa.shape[1]
    U = np.concatenate([xa, ya], axis=1)
    if center:
        U = U - U.mean(axis=0)
    if za is None:
        resid = U
    elif isinstance(regressor, str):
        if regressor != "kernel_ridge":
            raise ValueError("`regressor` must be 'kernel_ridge' or a scikit-learn regressor "
                             f"with fit/predict; got {regressor!r} instead.")
        sigma = V.positive_finite(kernel_sigma, "kernel_sigma")
        n_features = _check_approximation(kernel_approximation, n_features)
        if ridge_lambda is None and kernel_approximation == "rff":
            raise ValueError("`kernel_approximation='rff'` needs a fixed `ridge_lambda`; got None "
                             "(cross-validation is only available for the exact kernel).")
        if ridge_lambda is None:
            folds = V.check_int(cv_folds, "cv_folds", 2)
            grid = DEFAULT_CV_LAMBDAS if cv_lambdas is None else cv_lambdas
            grid = np.asarray(grid, dtype=np.float64).ravel()
            if grid.size == 0 or not np.all(np.isfinite(grid)) or not np.all(grid > 0):
                raise ValueError("`cv_lambdas` must be a non-empty sequence of positive finite "
                                 f"numbers; got {cv_lambdas!r} instead.")
            V.check_min_n(n, 2 * folds, f"{folds}-fold cross-validation (cv_folds = {folds})")
            resid, chosen, _ = krr_cv_residuals(za, U, sigma, grid, folds)
        else:
            lam = V.positive_finite(ridge_lambda, "ridge_lambda")
            freqs = None
            if kernel_approximation == "rff":
                freqs = rff_frequencies(za.shape[1], n_features, sigma, V.check_rng(feature_rng))
            resid = krr_residuals(za, U, sigma, lam, kernel_approximation=kernel_approximation,
                                  freqs=freqs)
            chosen = np.full(U.shape[1], lam)
        lam_x = tuple(float(v) for v in chosen[:p])
        lam_y = tuple(float(v) for v in chosen[p:])
    elif hasattr(regressor, "fit") and hasattr(regressor, "predict"):
        resid = _sklearn_residuals(regressor, za, U)
    else:
        raise TypeError("`regressor` must be 'kernel_ridge' or an object with fit/predict; "
                        f"got {type(regressor).__name__} instead.")
    rx = np.ascontiguousarray(resid[:, :p])
    ry = np.ascontiguousarray(resid[:, p:])
    prod = _kernels.residual_products(rx, ry)
    stat, pval = _statistic_from_products(prod, n_sim, mode, rng)
    k = prod.shape[1]
    return GCMResult(statistic=stat, pvalue=pval, alternative=alternative,
                     method=_method_name(k), n=n, ridge_lambda_x=lam_x, ridge_lambda_y=lam_y,
                     resid_x=rx, resid_y=ry, n_sim=n_sim if k > 1 else None)


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
    a = np.asarray(a)
    if a.ndim == 2 and a.dtype == np.float64:
        # one compiled pass (the same values as the numpy expression below)
        from ._kernels import finite_clip
        return finite_clip(a, big, np.empty(a.shape))
    return np.ascontiguousarray(np.clip(np.nan_to_num(a, nan=0.0, posinf=big, neginf=-big),
                                        -big, big))


def _privgcm_spline(inp, k, eps_test, centre_noise, user_rng, mode, assume_additive=False):
    """The released-regression path of privgcm (see :mod:`privci._spline`)."""
    from . import _spline as S
    p, q, n = inp.p, inp.q, inp.n
    design = S.choose_design(n, inp.za.shape[1], p, q, eps_test, k,
                             assume_additive=assume_additive)
    k = design.k
    # additive designs without re-centring: the fused kernels clip and scale x and y
    # themselves (the same values as inp.scaled), so no scaled copy U is made
    fused = centre_noise is None and S._fast(design, n)
    with quiet():
        if fused:
            U, xc, yc, centre_info = None, inp.xc, inp.yc, None
            raw = (inp.xa, inp.ya, inp.xc, inp.xb, inp.yc, inp.yb)
            group = block_labels(n, 2, new_entropy(user_rng))   # 0: half A, 1: half B
            stats = S._stats_rows(inp.za, *raw, group, design)
            del group
        else:
            U, xc, yc, centre_info = inp.scaled(centre_noise)
            half = block_labels(n, 2, new_entropy(user_rng)) == 0
            stats = S.partition_stats(inp.za, U, half, design, p)
            del half
        rel_x, rel_y = S.release_fits(stats, tuple(block_counts(n, 2)), design, user_rng)
        coef_x = S.fit_coefficients(rel_x, design)
        coef_y = S.fit_coefficients(rel_y, design)
        labels = block_labels(n, k, new_entropy(user_rng))
        if fused:
            sums = S._sums_rows(inp.za, *raw, labels, design, coef_x, coef_y, k)
        else:
            sums = S.partition_block_sums(inp.za, U, labels, design, coef_x, coef_y, p, k)
        del U, labels
    released, info, sens = S.release_block_sums(sums, n, design, p, q, user_rng)
    with quiet():
        test = S.spline_test(released, rel_x, rel_y, design, mode)
    mech = S.mechanism_text(design, p, q, rel_x, rel_y, info.mechanism, sens)
    hardened = info.hardened and rel_x.hardened and rel_y.hardened
    releases = S.spline_releases(rel_x, rel_y, design, info, sens)
    return test, info, centre_info, xc, yc, mech, hardened, design, sens, releases


@accepts_data_frames
def privgcm(x, y, z=None, *, epsilon, x_bound, y_bound, ridge_lambda=5.0, kernel_sigma=1.0,
            alternative="two-sided", rng=None, n_sim=499, cv_lambdas=None,
            kernel_approximation="exact", n_features=512, feature_rng=None, x_center=0.0,
            y_center=0.0, center_epsilon=None, n_blocks="auto", sensitivity="paper",
            budget=None, bounds_epsilon=None, z_scale=None, regression="spline", z_center=None,
            assume_additive=False):
    """Differentially private GCM test (PrivGCM).

    With z given and ``regression="spline"`` (the default): the regressions
    of the scaled x and y on z are **released** with differential privacy (a
    cubic-spline fit, additive with multilinear interactions for 2 to 4
    columns, whose Gram matrices and cross-products get Laplace noise, x
    fitted on one half of the rows and y on the other), the residuals are
    clipped to [-1, 1], their products are summed within k blocks of a
    data-independent partition (k in 5, 10, 20 by the rule below), each block
    sum gets Laplace(2 / epsilon_test),
    and the test is a t statistic whose variance also holds the released
    fits' noise and a bias allowance from a nested richer fit (see
    ``privci._spline`` and the documentation's "Released regression" page for
    the proof).  A public rule of (n, d, epsilon) sets the basis resolution,
    the epsilon split and k; where it finds that the regression cannot be
    resolved, or the nested fits disagree, the p-value is 1 (a fail-safe) and
    ``res.fit_check`` and the
    printed "fit check" line say so.

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
        clipped.  ``"auto"``: released with differential privacy from the
        data (a private upper quantile of |x - centre|, see
        :func:`privci.bounds.private_bounds`), spending ``bounds_epsilon``.
    ridge_lambda : float or "cv", default 5.0
        Fixed before seeing the data (the default is the paper's
        lambda_K = 10).  ``"cv"`` opts in to cross-validation over
        ``cv_lambdas`` on the private data: the result then states that there
        is no privacy guarantee.
    kernel_sigma : float, default 1.0
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
        See :func:`residual_products`.  Set the public centres near the means
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
    sensitivity : {"paper", "sharp"}, default "paper"
        The proved constant (see :func:`privci.gcm_sensitivity`).  Both are
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
        ``n_blocks=None`` too.  It is additive in the columns of z, with
        multilinear interactions for 2 to 4 columns; its level rests on what
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
    assume_additive : bool, default False
        Spline fit only.  False: with two or more columns of z the test
        certifies its regression against interactions (products of columns),
        which the released fit can resolve only at large n * epsilon; where it
        cannot, the p-value is 1 (the fail-safe).  True: a public assumption
        that E[X | Z] and E[Y | Z] are additive in the columns of z; no
        interaction is fitted or checked, the level rests on the assumption,
        and the result's caveats say so.

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
    >>> z = rng.normal(size=500); x = np.sin(z) + rng.normal(size=500)
    >>> y = np.cos(z) + rng.normal(size=500)
    >>> res = privci.privgcm(x, y, z, epsilon=1.0, x_bound=4, y_bound=4, rng=7)
    >>> res.privacy.hardened, res.privacy.n_blocks in (5, 10, 20), 0 <= res.pvalue <= 1
    (False, True, True)
    >>> res.privacy.sensitivity_kind    # the default: the released spline regression
    'released spline fit'
    >>> paper = privci.privgcm(x, y, z, epsilon=1.0, x_bound=4, y_bound=4, rng=7,
    ...                        regression="krr")      # the paper's Algorithm 1
    >>> paper.privacy.n_blocks, paper.privacy.sensitivity_kind
    (500, 'paper')
    >>> stat, p = res                   # unpacks like scipy's results
    >>> privci.privgcm(x, y, None, epsilon=1.0, x_bound=4, y_bound=4, rng=7).privacy.n_blocks
    20
    """
    from . import _dask   # Dask arrays: map-reduce over partitions (dask imported only then)
    if _dask.is_dask(x, y, z):
        return _dask.privgcm(**{k: v for k, v in locals().items() if k != "_dask"})
    eps = V.positive_finite(epsilon, "epsilon")
    mode = V.check_alternative(alternative)
    n_sim = V.check_int(n_sim, "n_sim", 1)
    user_rng = None if rng is None else V.check_rng(rng)
    auto = {name: isinstance(v, str) and v == "auto" for name, v in
            (("x_bound", x_bound), ("y_bound", y_bound), ("x_center", x_center),
             ("y_center", y_center))}
    for name, v in (("x_bound", x_bound), ("y_bound", y_bound), ("x_center", x_center),
                    ("y_center", y_center)):
        if isinstance(v, str) and not auto[name]:
            raise ValueError(f"`{name}` must be a number, one per column, or 'auto'; got "
                             f"{v!r} instead.")
    # The spline fit places its knots on (z - z_center) / z_scale: by default both are
    # released privately ("auto"); with the kernel ridge regression z is used as given.
    spline_default = regression == "spline" and z is not None
    if z_scale is None and spline_default:
        z_scale = "auto"
    if z_center is None:
        z_center = "auto" if spline_default else 0.0
    scale_auto = isinstance(z_scale, str) and z_scale == "auto"
    if isinstance(z_scale, str) and not scale_auto:
        raise ValueError(f"`z_scale` must be None, a positive number, one per column of z, or "
                         f"'auto'; got {z_scale!r} instead.")
    zc_auto = isinstance(z_center, str) and z_center == "auto"
    if isinstance(z_center, str) and not zc_auto:
        raise ValueError(f"`z_center` must be None, a number, one per column of z, or 'auto'; "
                         f"got {z_center!r} instead.")
    eps_b = None
    if any(auto.values()) or scale_auto or zc_auto:
        eps_b = 0.1 * eps if bounds_epsilon is None else V.positive_finite(bounds_epsilon,
                                                                            "bounds_epsilon")
        if center_epsilon is None and (auto["x_center"] or auto["y_center"]):
            center_epsilon = 0.1 * eps
    elif bounds_epsilon is not None:
        raise ValueError("`bounds_epsilon` is only used with an 'auto' bound, centre or z_scale; "
                         f"got {bounds_epsilon!r} with none.")
    eps_c = centre_noise = None
    eps_test = eps
    if eps_b is not None:
        if not eps_b < eps:
            raise ValueError(f"`bounds_epsilon` must be smaller than `epsilon` ({eps:g}), which "
                             f"it is part of; got {eps_b!r} instead.")
        eps_test = remaining(eps_test, eps_b)
    if center_epsilon is not None:
        eps_c = V.positive_finite(center_epsilon, "center_epsilon")
        if not eps_c < eps_test:
            raise ValueError(f"`center_epsilon` must be smaller than `epsilon` ({eps:g}) minus "
                             f"any bounds_epsilon, which it is part of; got {center_epsilon!r} "
                             "instead.")
        eps_test = remaining(eps_test, eps_c)
        centre_noise = (eps_c, user_rng)
    inp = _GCMInputs(x, y, z, 1.0 if auto["x_bound"] else x_bound,
                     1.0 if auto["y_bound"] else y_bound, ridge_lambda, kernel_sigma, cv_lambdas,
                     kernel_approximation, n_features, feature_rng,
                     0.0 if auto["x_center"] else x_center,
                     0.0 if auto["y_center"] else y_center, sensitivity)
    reg = _check_regression(regression, inp.za is not None, {
        "ridge_lambda": ridge_lambda, "kernel_sigma": kernel_sigma, "cv_lambdas": cv_lambdas,
        "kernel_approximation": kernel_approximation, "n_features": n_features,
        "feature_rng": feature_rng, "sensitivity": sensitivity})
    spline = reg == "spline" and inp.za is not None
    _check_assume_additive(assume_additive, spline)
    k = _check_n_blocks(n_blocks, inp.n, inp.za is not None, reg)
    auto_k = spline and isinstance(n_blocks, str)   # "auto": the spline design picks k
    if auto_k:
        from ._spline import choose_design
        k = choose_design(inp.n, inp.za.shape[1], inp.p, inp.q, eps_test, None,
                          assume_additive=assume_additive).k
    if z_scale is not None and inp.za is None:
        raise ValueError("`z_scale` needs z; got z = None.")
    if inp.za is None:
        if not (isinstance(z_center, (int, float)) and not isinstance(z_center, bool)
                and z_center == 0):
            raise ValueError(f"`z_center` needs z; got z = None and z_center={z_center!r}.")
    elif not zc_auto:
        zc = V.public_centres(z_center, "z_center", inp.za.shape[1])
        if np.any(zc != 0):
            with quiet():
                inp.za = _finite(inp.za - zc)
    zs_pub = None   # a public z_scale: the released z centre is in units of z / zs_pub
    if z_scale is not None and not scale_auto:
        zs_pub = V.positive_bounds(z_scale, "z_scale", inp.za.shape[1])
        with quiet():
            inp.za = _finite(inp.za / zs_pub)
    composition = _charge(budget, eps, test="privgcm",
                          details=f"n = {inp.n}, {k} blocks")
    auto_params = None
    scale_params = None
    zcentre_params = None
    from .bounds import _reliability, _report_unreliable
    notes = []   # public numbers only: which releases have too small an n x epsilon
    if scale_auto or zc_auto:
        n_auto = sum(auto.values())
        # z's share of bounds_epsilon: one part per released z quantity against one per
        # released x / y item
        d = inp.za.shape[1]
        z_items = d * (int(scale_auto) + int(zc_auto))
        xy_items = n_auto * max(inp.p, inp.q)
        eps_z = eps_b if xy_items == 0 else eps_b * z_items / (z_items + xy_items)
        eps_zc = eps_z / 2.0 if (scale_auto and zc_auto) else eps_z
        eps_zs = remaining(eps_z, eps_zc) if (scale_auto and zc_auto) else eps_z
        eps_b_rest = remaining(eps_b, eps_z) if xy_items else 0.0
        if zc_auto:
            notes.append(_reliability("z_center", inp.n, eps_zc, d))
        if scale_auto:
            notes.append(_reliability("z_scale", inp.n // 2, eps_zs, d,
                                      unit="paired differences"))
    else:
        eps_b_rest = eps_b
    if eps_b is not None and any(auto.values()):
        k_xy = ((int(auto["x_center"]) + int(auto["x_bound"])) * inp.p
                + (int(auto["y_center"]) + int(auto["y_bound"])) * inp.q)
        notes.append(_reliability(
            "/".join(nm for nm in ("x_center", "y_center", "x_bound", "y_bound") if auto[nm]),
            inp.n, eps_b_rest, k_xy))
    # outside quiet(), before any release: the warning depends on public numbers only
    unreliable_caveats = _report_unreliable(notes, "privgcm")
    if scale_auto or zc_auto:
        from .bounds import private_bounds, private_scale
        if zc_auto:
            with quiet():
                zcentre_params = private_bounds(inp.za, epsilon=eps_zc, center=True, bound=False,
                                                rng=user_rng)
                inp.za = _finite(inp.za - np.asarray(zcentre_params.center, dtype=np.float64))
        if scale_auto:
            with quiet():
                scale_params = private_scale(inp.za, epsilon=eps_zs, rng=user_rng)
                inp.za = _finite(inp.za / np.asarray(scale_params.scale, dtype=np.float64))
    if eps_b is not None and any(auto.values()):
        from .bounds import _auto_public_parameters
        with quiet():
            auto_params = _auto_public_parameters(
                inp.xa, inp.ya, epsilon=eps_b_rest,
                want_center=(auto["x_center"], auto["y_center"]),
                want_bound=(auto["x_bound"], auto["y_bound"]),
                x_center=inp.xc, y_center=inp.yc, rng=user_rng)
        for key, attr in (("x_center", "xc"), ("y_center", "yc"), ("x_bound", "xb"),
                          ("y_bound", "yb")):
            if auto_params.get(key) is not None:
                setattr(inp, attr, np.asarray(auto_params[key], dtype=np.float64))
    fit_check = None
    if spline:
        (test, info, centre_info, xc_used, yc_used, spline_mech, hardened,
         design, spline_sens, spline_rel) = _privgcm_spline(
             inp, None if auto_k else k, eps_test, centre_noise, user_rng, mode,
             assume_additive)
        stat, pval, stat_name = test.statistic, test.pvalue, test.name
        eps_fit, eps_t = design.eps_fit, design.eps_test
        from ._spline import fit_check as _fit_check
        fit_check = _fit_check(test, design)
        caveats = []
        rp = None
    else:
        rp, caveats, centre_info = inp.transform(centre_noise)
        prod = rp.products.reshape(rp.products.shape[0], -1)
        value_bound = inp.rbound ** 2
    if spline:
        pass
    elif k == inp.n:
        released, info = laplace_mechanism(prod, rp.sensitivity, eps_test, user_rng,
                                           value_bound=value_bound)
        del prod
        boot_rng = user_rng if user_rng is not None else np.random.default_rng()
        stat, pval = _statistic_from_products(released, n_sim, mode, boot_rng)
        stat_name = "Z" if released.shape[1] == 1 else "max|Z|"
    else:
        labels = block_labels(inp.n, k, new_entropy(user_rng))
        with quiet():
            sums = block_sums(prod, labels, k)
        del prod, labels
        counts = block_counts(inp.n, k)
        released, info = laplace_mechanism(sums, rp.sensitivity, eps_test, user_rng,
                                           value_bound=value_bound * counts.max())
        boot_rng = user_rng if user_rng is not None else np.random.default_rng()
        stat, pval, stat_name = block_statistic(released, counts, n_sim, mode, boot_rng)
    if not (info.hardened if not spline else hardened):
        caveats.append(SEEDED_CAVEAT)
    if kernel_approximation == "rff" and inp.za is not None and not spline:
        caveats.append(f"random Fourier features (D = {inp.n_features}) drawn from feature_rng, "
                       "independent of the data; same sensitivity constant.")
    if inp.za is not None:
        caveats.append(REGRESSION_CAVEAT)
    if spline:
        from ._spline import additive_caveat
        caveats.append(additive_caveat(design))
    what = "block sums" if k < inp.n else "residual products"
    if spline:
        mechanism = spline_mech
    else:
        mechanism = f"{info.mechanism} on {k} {what} ({inp.kind} sensitivity)"
    comp_text = ""
    parts, pieces = [], []
    releases = []
    if zcentre_params is not None:
        releases.extend(replace(r, name="z_" + r.name) for r in zcentre_params.releases)
        parts.append(f"{zcentre_params.epsilon:g} for the released centres of z")
        pieces.append(f"z centres: {zcentre_params.mechanism}")
    if scale_params is not None:
        releases.extend(replace(r, name="z_" + r.name) for r in scale_params.releases)
        parts.append(f"{scale_params.epsilon:g} for the released scales of z")
        pieces.append(f"z scales: {scale_params.mechanism}")
    if auto_params is not None:
        releases.extend(auto_params["releases"])
        parts.append(f"{auto_params['epsilon']:g} for the released bounds/centres "
                     f"({', '.join(auto_params['released'])})")
        pieces.append(f"bounds: {auto_params['mechanism']} (epsilon {auto_params['epsilon']:g})")
        caveats.extend(auto_params.get("caveats", ()))
    caveats.extend(unreliable_caveats)
    if centre_info is not None:
        releases.append(Release("centres (means of the scaled x, y)", eps_c,
                                2.0 * (inp.p + inp.q) / inp.n, centre_info.scale,
                                centre_info.mechanism))
        parts.append(f"{eps_c:g} for the released centres")
        pieces.append(f"centres: {centre_info.mechanism}, scale {centre_info.scale:.4g} "
                      f"(epsilon {eps_c:g})")
    if spline:
        releases.extend(spline_rel)
    else:
        releases.append(Release(f"{k} {what}", eps_test, rp.sensitivity, info.scale,
                                info.mechanism))
    if spline:
        parts.append(f"{eps_fit:g} for the released regression")
        tail = f"{eps_t:g} for the block sums"
        if pieces:
            mechanism = "; ".join([mechanism] + pieces)
        comp_text = f" (sequential composition: {', '.join(parts)}, {tail})"
    elif parts:
        mechanism = "; ".join([f"{mechanism} (epsilon {eps_test:g})"] + pieces)
        comp_text = (f" (sequential composition: {', '.join(parts)}, {eps_test:g} for the "
                     f"{what})")
    covered = inp.grid is None
    if spline:
        xb, yb, xcu, ycu = inp.xb, inp.yb, np.asarray(xc_used), np.asarray(yc_used)
        sens, lam, ksig, kind = spline_sens, None, None, "released spline fit"
        hard = hardened
    else:
        xb, yb, xcu, ycu = rp.x_bound, rp.y_bound, rp.x_center, rp.y_center
        sens, lam, kind, hard = rp.sensitivity, rp.ridge_lambda, inp.kind, info.hardened
        ksig = rp.kernel_sigma if inp.za is not None else None
    zc_record = None
    if zcentre_params is not None:
        # in z's own units: with a public z_scale the centre was released on z / z_scale, so
        # that passing the record back as a public z_center reproduces the centring
        zc_record = np.asarray(zcentre_params.center, dtype=np.float64)
        if zs_pub is not None:
            with np.errstate(all="ignore"):   # released value x public scale: post-processing
                zc_record = np.clip(zc_record * zs_pub, -np.finfo(np.float64).max,
                                    np.finfo(np.float64).max)
    record = PrivacyRecord(
        epsilon=eps, mechanism=mechanism, sensitivity=sens,
        noise_scale=info.scale, hardened=hard, ridge_lambda=lam,
        kernel_sigma=ksig,
        bounds={"x_bound": tuple(np.asarray(xb, dtype=float).tolist()),
                "y_bound": tuple(np.asarray(yb, dtype=float).tolist()),
                "x_center": tuple(np.asarray(xcu, dtype=float).tolist()),
                "y_center": tuple(np.asarray(ycu, dtype=float).tolist()),
                **({"z_center": tuple(zc_record.tolist())} if zc_record is not None else {}),
                **({"z_scale": tuple(float(s) for s in scale_params.scale)}
                   if scale_params is not None else {})},
        guarantee=guarantee_text(
            eps, "statistic, pvalue",
            "one row (x_i, y_i, z_i)" if inp.za is not None else "one row (x_i, y_i)",
            hardened=hard, released_bounds=(auto_params is not None
                                            or zcentre_params is not None
                                            or scale_params is not None),
            covered=covered, composition=comp_text,
            not_covered_reason="ridge_lambda was chosen by cross-validation on the private data"),
        caveats=tuple(caveats), n_blocks=k, composition=composition,
        sensitivity_kind=kind, releases=tuple(releases))
    prod_cols = inp.p * inp.q
    method = _method_name(prod_cols, private=True)
    if inp.za is None:
        method = method.replace("test", "test without conditioning", 1)
    if spline:
        method += ", released spline regression"
    if k < inp.n:
        method += f", {k} noisy block sums"
    return PrivateTestResult(statistic=stat, pvalue=pval, alternative=alternative,
                             method=method, n=inp.n, privacy=record, statistic_name=stat_name,
                             n_sim=n_sim if (prod_cols > 1 and not spline) else None,
                             fit_check=fit_check)
