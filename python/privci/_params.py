"""Checks of the tests' parameters, shared by the in-memory and the Dask paths.

The start of the parameter layer (issue 22): each function validates one option before
any data are read and returns its normalised value, with a message that names the
argument and what was received.
"""

from __future__ import annotations

import numpy as np

from . import _validation as V
from ._private import auto_n_blocks


DEFAULT_PRIVATE_CV_LAMBDAS = (5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0, 1000.0)


def _check_approximation(kernel_approximation, n_features):
    if kernel_approximation not in ("exact", "rff"):
        raise ValueError("`kernel_approximation` must be 'exact' or 'rff'; "
                         f"got {kernel_approximation!r} instead.")
    if kernel_approximation == "rff":
        return V.check_int(n_features, "n_features", 1)
    return None


def _check_lambda(ridge_lambda, kernel_approximation, cv_lambdas, n):
    """Validate ``ridge_lambda`` (a number, or the opt-in ``"cv"``); returns (lam, grid)."""
    if isinstance(ridge_lambda, str):
        if ridge_lambda != "cv":
            raise ValueError("`ridge_lambda` must be a positive number or 'cv' (opt-in "
                             f"tuning); got {ridge_lambda!r} instead.")
        if kernel_approximation != "exact":
            raise ValueError("`ridge_lambda='cv'` is only available with kernel_approximation='exact'.")
        grid = DEFAULT_PRIVATE_CV_LAMBDAS if cv_lambdas is None else cv_lambdas
        grid = np.asarray(grid, dtype=np.float64).ravel()
        if grid.size == 0 or not np.all(np.isfinite(grid)) or not np.all(grid > 0):
            raise ValueError("`cv_lambdas` must be a non-empty sequence of positive finite "
                             f"numbers; got {cv_lambdas!r} instead.")
        V.check_min_n(n, 20, "ridge_lambda='cv' (10-fold cross-validation)")
        return float(grid.min()), grid
    return V.positive_finite(ridge_lambda, "ridge_lambda"), None


def _check_n_blocks(n_blocks, n, conditional, regression="krr"):
    """``"auto"`` -> the default rule, None -> n (Algorithm 1), an int in [2, n] (in [1, n]
    with the released spline fit)."""
    if n_blocks is None:
        if regression == "spline" and conditional:
            raise ValueError("`n_blocks=None` (one block per row) is the paper's mechanism and "
                             "needs regression='krr'; got regression='spline'.")
        return n
    if isinstance(n_blocks, str):
        if n_blocks != "auto":
            raise ValueError("`n_blocks` must be 'auto', None (one block per row: the paper's "
                             f"Algorithm 1) or an integer >= 2; got {n_blocks!r} instead.")
        return auto_n_blocks(n, conditional, regression)
    spline = regression == "spline" and conditional
    # the released spline fit also takes k = 1: one noisy sum and its released variance
    k = V.check_int(n_blocks, "n_blocks", 1 if spline else 2)
    if k > n:
        raise ValueError(f"`n_blocks` must be at most the number of rows n = {n}; got {k} "
                         "instead.")
    return k


#: The kernel ridge path's options and their defaults.  In ``privgcm`` each defaults to
#: None ("not given"): with ``regression="krr"`` (or without z) None means the default
#: below; with the released spline fit any value other than None is refused, so that a
#: KRR option is never silently ignored (not even one equal to its default).
KRR_DEFAULTS = (("ridge_lambda", 5.0), ("kernel_sigma", 1.0), ("cv_lambdas", None),
                ("kernel_approximation", "exact"), ("n_features", 512), ("feature_rng", None),
                ("sensitivity", "paper"))


def _check_regression(regression, conditional, given):
    """``"spline"`` (default) or ``"krr"``; KRR-only options (not None) are refused with the
    spline fit.  Returns (regression, the KRR options with None replaced by defaults)."""
    if regression not in ("spline", "krr"):
        raise ValueError("`regression` must be 'spline' (the released spline fit, the "
                         "default) or 'krr' (kernel ridge regression, the paper's mechanism); "
                         f"got {regression!r} instead.")
    if regression == "spline" and conditional:
        for name, _ in KRR_DEFAULTS:
            v = given[name]
            if v is not None:
                raise ValueError(f"`{name}` applies to regression='krr' only; got {name}={v!r} "
                                 "with regression='spline' (the default when z is given). Pass "
                                 "regression='krr' for the kernel ridge regression.")
    return regression, {name: (default if given[name] is None else given[name])
                        for name, default in KRR_DEFAULTS}


def _check_assume_additive(assume_additive, spline):
    if not isinstance(assume_additive, (bool, np.bool_)):
        raise TypeError("`assume_additive` must be True or False; got "
                        f"{assume_additive!r} instead.")
    if assume_additive and not spline:
        raise ValueError("`assume_additive=True` applies to the released spline fit "
                         "(regression='spline' with z); got it with regression='krr' or "
                         "without z.")


ASSUME = (None, "additive", "linear")


def _check_assume(assume, assume_additive, spline):
    """The released regression's model from ``assume`` (None, "additive", "linear") and its
    older alias ``assume_additive=True`` (= "additive"): "full", "additive" or "linear"."""
    _check_assume_additive(assume_additive, spline)
    if assume is not None and not (isinstance(assume, str) and assume in ASSUME[1:]):
        raise ValueError("`assume` must be None (no assumption), 'additive' or 'linear'; got "
                         f"{assume!r} instead.")
    if assume is not None and not spline:
        raise ValueError(f"`assume={assume!r}` applies to the released spline fit "
                         "(regression='spline' with z); got it with regression='krr' or "
                         "without z.")
    if assume_additive and assume not in (None, "additive"):
        raise ValueError(f"`assume_additive=True` means assume='additive'; got it with "
                         f"assume={assume!r}.")
    if assume_additive:
        return "additive"
    return "full" if assume is None else assume


class GCMOptions:
    """The non-private GCM test's options, validated once (in memory and on Dask).

    ``kind`` is "none" (no z), "krr" (a fixed ``ridge_lambda``), "krr-cv" (10-fold, or
    ``cv_folds``, cross-validation over ``grid``) or "sklearn" (a regressor with
    fit/predict).
    """

    def __init__(self, n, conditional, *, regressor, kernel_sigma, ridge_lambda, cv_lambdas,
                 cv_folds, n_sim, alternative, rng, kernel_approximation, n_features,
                 feature_rng, center):
        self.n_sim = V.check_int(n_sim, "n_sim", 1)
        self.mode = V.check_alternative(alternative)
        self.rng = V.check_rng(rng)
        V.check_min_n(n, 3, "the GCM test")
        if not isinstance(center, (bool, np.bool_)):
            raise TypeError(f"`center` must be True or False; got {center!r} instead.")
        self.center = bool(center)
        self.regressor = regressor
        self.kernel_approximation = kernel_approximation
        self.feature_rng = feature_rng
        self.kind, self.lam, self.grid, self.folds = "none", None, None, None
        if not conditional:
            return
        if not isinstance(regressor, str):
            if not (hasattr(regressor, "fit") and hasattr(regressor, "predict")):
                raise TypeError("`regressor` must be 'kernel_ridge' or an object with "
                                f"fit/predict; got {type(regressor).__name__} instead.")
            self.kind = "sklearn"
            return
        if regressor != "kernel_ridge":
            raise ValueError("`regressor` must be 'kernel_ridge' or a scikit-learn regressor "
                             f"with fit/predict; got {regressor!r} instead.")
        self.sigma = V.positive_finite(kernel_sigma, "kernel_sigma")
        self.n_features = _check_approximation(kernel_approximation, n_features)
        if ridge_lambda is None and kernel_approximation == "rff":
            raise ValueError("`kernel_approximation='rff'` needs a fixed `ridge_lambda`; got None "
                             "(cross-validation is only available for the exact kernel).")
        if ridge_lambda is None:
            from .regression import DEFAULT_CV_LAMBDAS
            self.folds = V.check_int(cv_folds, "cv_folds", 2)
            grid = DEFAULT_CV_LAMBDAS if cv_lambdas is None else cv_lambdas
            grid = np.asarray(grid, dtype=np.float64).ravel()
            if grid.size == 0 or not np.all(np.isfinite(grid)) or not np.all(grid > 0):
                raise ValueError("`cv_lambdas` must be a non-empty sequence of positive finite "
                                 f"numbers; got {cv_lambdas!r} instead.")
            V.check_min_n(n, 2 * self.folds,
                          f"{self.folds}-fold cross-validation (cv_folds = {self.folds})")
            self.kind, self.grid = "krr-cv", grid
        else:
            self.kind, self.lam = "krr", V.positive_finite(ridge_lambda, "ridge_lambda")
