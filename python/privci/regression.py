"""Kernel ridge regression (KRR) and its privacy-relevant constants.

One parameterisation for the whole package, the textbook one used by R's CVST
(and therefore by GeneralisedCovarianceMeasure's ``kernel.ridge``):

    minimise  (1/n) sum_i (u_i - f(z_i))^2 + lambda ||f||_H^2,

so that alpha = (K + n lambda I)^-1 u, the fitted values are K alpha, and the
in-sample residual is u - K alpha = n lambda alpha (no extra matrix product).
The kernel is the Gaussian RBF k(z, z') = exp(-sigma ||z - z'||^2), so
k(z, z) = 1 and the feature map has norm 1, as the sensitivity bounds need.

Two solvers:

* ``exact``: the Gram matrix is built by a numba kernel (lower triangle only)
  and factorised in place by LAPACK ``dpotrf``; one factorisation serves every
  column of x and y that shares lambda.
* ``rff``: paired random Fourier features phi(z) = D^-1/2 [cos(w.z), sin(w.z)]
  with w ~ N(0, 2 sigma I) (the spectral density of the kernel), norm exactly
  1, and the primal ridge solve in 2D dimensions, O(n D^2).  With frequencies
  drawn independently of the data the same sensitivity constants hold.
"""

from __future__ import annotations

import contextlib
import math
import warnings

import numpy as np
from . import _kernels


class _LazyModule:
    """Import a module on first attribute access.

    ``scipy.linalg`` costs about 0.3 s to import (a third of ``import privci``);
    it is loaded when the first regression runs instead.
    """

    def __init__(self, name):
        self._name = name
        self._mod = None

    def __getattr__(self, attr):
        if self._mod is None:
            import importlib
            self._mod = importlib.import_module(self._name)
        return getattr(self._mod, attr)


blas = _LazyModule("scipy.linalg.blas")
lapack = _LazyModule("scipy.linalg.lapack")

__all__ = ["gcm_sensitivity", "crt_sensitivity", "krr_norm_bound", "residual_bound",
           "krr_residuals", "krr_cv_residuals",
           "cvst_folds", "DEFAULT_CV_LAMBDAS", "rff_frequencies"]

DEFAULT_CV_LAMBDAS = tuple(10.0 ** k for k in range(-6, 5))


SENSITIVITY_KINDS = ("sharp", "paper")


def _check_kind(kind):
    if kind not in SENSITIVITY_KINDS:
        raise ValueError(f"`sensitivity` must be one of {SENSITIVITY_KINDS}; got {kind!r} instead.")
    return kind


def krr_norm_bound(ridge_lambda):
    """B_lambda: the largest RKHS norm of a KRR fit to responses in [-1, 1].

    ``1 / (2 sqrt(lambda))`` for lambda < 1 and ``1 / (1 + lambda)`` for
    lambda >= 1 (package parameterisation, k(z, z) = 1).  Since |f(z)| <= ||f||,
    every fitted value lies in [-B, B] and every residual in [-(1 + B), 1 + B].

    Proof: ||f||^2 = u' (K + n lambda I)^-1 K (K + n lambda I)^-1 u
    <= max_{s in [0, n]} s / (s + n lambda)^2 * ||u||^2, as the eigenvalues of
    the PSD matrix K (trace n) lie in [0, n] and ||u||^2 <= n; s / (s + c)^2
    peaks at s = c = n lambda, inside [0, n] iff lambda <= 1.

    Examples
    --------
    >>> from privci.regression import krr_norm_bound
    >>> krr_norm_bound(5.0), krr_norm_bound(0.25)
    (0.16666666666666666, 1.0)
    """
    lam = float(ridge_lambda)
    return 1.0 / (1.0 + lam) if lam >= 1.0 else 0.5 / math.sqrt(lam)


def residual_bound(ridge_lambda, sensitivity="sharp"):
    """The certified bound b on |u - f_hat(z)| for |u| <= 1 (private paths clip to it).

    ``"sharp"``: 1 + B_lambda (:func:`krr_norm_bound`).  ``"paper"``:
    1 + 1/sqrt(lambda), from Kusner et al.'s norm bound ||f|| <= sqrt(2/lambda_K).
    """
    _check_kind(sensitivity)
    lam = float(ridge_lambda)
    if sensitivity == "paper":
        return 1.0 + 1.0 / math.sqrt(lam)
    return 1.0 + krr_norm_bound(lam)


def gcm_sensitivity(ridge_lambda, sensitivity="sharp"):
    """L1 sensitivity of the KRR residual products (one column pair), |x|, |y| <= 1.

    Parameters
    ----------
    ridge_lambda : float
        Package parameterisation lambda ||f||^2 + (1/n) sum (u_i - f(z_i))^2
        (the paper's lambda_K = 2 lambda).
    sensitivity : {"sharp", "paper"}, default "sharp"
        ``"sharp"``: the package's proved constant
        C*(lambda) = 2 b^2 + 4 b min(b B, 1 / (2 sqrt(lambda))), with
        B = B_lambda (:func:`krr_norm_bound`) and b = 1 + B.
        ``"paper"``: the paper's Lemma with Kusner et al.'s Theorem 5,
        C(lambda) = 4 (1 + 1/sqrt(lambda)) (1 + 1/sqrt(lambda) + 2/lambda^1.5 + 2/lambda),
        kept for reproducing the paper.

    Notes
    -----
    Proof of the sharp constant (written out in full in the documentation's
    sensitivity page).  Replace row j.  Its own product changes by at most
    |R_j| + |R'_j| <= 2 b^2.  Every other row i changes by
    |r^x_i| |Delta g(z_i)| + |r^y'_i| |Delta f(z_i)|.  By Sherman-Morrison, with
    M = sum_{i != j} k_i (x) k_i + n lambda I, the fit is
    f~ + r_j M^-1 k_j on one data set and f~ + r'_j M^-1 k'_j on the other
    (f~ the shared-rows fit), so sum_{i != j} |Delta f(z_i)| <= 2 b B (spectral
    bound on ||(<k_i, M^-1 k_j>)_i||_1) and sum_{i != j} Delta f(z_i)^2 <= b^2/(n lambda);
    with |r_i| <= b or, by Cauchy-Schwarz, sum_i r_i^2 <= n, each of the two
    sums is at most b min(2 b B, 1/sqrt(lambda)).

    Examples
    --------
    >>> import privci
    >>> round(privci.gcm_sensitivity(5.0), 3), round(privci.gcm_sensitivity(5.0, "paper"), 3)
    (3.63, 11.729)
    """
    _check_kind(sensitivity)
    lam = float(ridge_lambda)
    if sensitivity == "paper":
        a = 1.0 / math.sqrt(lam)
        return 4.0 * (1.0 + a) * (1.0 + a + 2.0 * a ** 3 + 2.0 / lam)
    B = krr_norm_bound(lam)
    b = 1.0 + B
    return 2.0 * b * b + 4.0 * b * min(b * B, 0.5 / math.sqrt(lam))


def crt_sensitivity(ridge_lambda, sensitivity="sharp"):
    """Sensitivity Delta_T of T = sum_i r_X,i r_Y,i (PrivCRT), |r_X| <= 1, |y| <= 1.

    ``"sharp"``: Delta_T* = 2 (1 + B_lambda)^2 (row j moves T by at most 2 b,
    the others by at most sum_{i != j} |Delta g(z_i)| <= 2 b B).  ``"paper"``:
    the paper's Lemma, 4 (1 + 1/sqrt(lambda) + 1/lambda^1.5 + 1/lambda).

    Examples
    --------
    >>> import privci
    >>> round(privci.crt_sensitivity(5.0), 4), round(privci.crt_sensitivity(5.0, "paper"), 4)
    (2.7222, 6.9466)
    """
    _check_kind(sensitivity)
    lam = float(ridge_lambda)
    if sensitivity == "paper":
        a = 1.0 / math.sqrt(lam)
        return 4.0 * (1.0 + a + a ** 3 + 1.0 / lam)
    b = 1.0 + krr_norm_bound(lam)
    return 2.0 * b * b


# --------------------------------------------------------------------------- exact KRR

def _gram_lower(z, sigma):
    n = z.shape[0]
    K = np.empty((n, n))
    _kernels.rbf_gram_lower(z, float(sigma), K)
    return K


def _cholesky_solve_inplace(K, shift, U):
    """Solve (K + shift I) A = U using only the lower triangle of the C-ordered K.

    K is overwritten with its factor.  K.T is Fortran-contiguous and holds the
    data in its upper triangle, so LAPACK works in place without a copy.
    """
    n = K.shape[0]
    K.ravel()[:: n + 1] += shift
    A = K.T
    c, info = lapack.dpotrf(A, lower=0, clean=0, overwrite_a=1)
    if info != 0:
        return None
    sol, info = lapack.dpotrs(c, U, lower=0)
    if info != 0:  # pragma: no cover - dpotrs only fails on bad arguments
        return None
    return sol


def krr_residuals(z, U, kernel_sigma, ridge_lambda, *, kernel_approximation="exact",
                  freqs=None, warn=True):
    """In-sample KRR residuals of every column of ``U`` on ``z`` with a fixed lambda.

    Parameters
    ----------
    z : (n, d) float64, C-contiguous.
    U : (n, c) float64: the responses (all columns share one factorisation).
    kernel_sigma, ridge_lambda : float
    kernel_approximation : {"exact", "rff"}
    freqs : (D, d) frequencies for ``"rff"`` (see :func:`rff_frequencies`).
    warn : bool, default True
        Warn when the Cholesky factorisation fails and the eigen-decomposition
        fallback is used.  The private tests pass False: whether the fallback
        runs depends on the data (duplicated z at a tiny lambda), so a warning
        would tell neighbours apart.

    Returns
    -------
    (n, c) residuals u - f_hat(z).
    """
    n = z.shape[0]
    shift = n * ridge_lambda
    if kernel_approximation == "rff":
        return _rff_residuals(z, U, freqs, shift)
    K = _gram_lower(z, kernel_sigma)
    sol = _cholesky_solve_inplace(K, shift, np.asfortranarray(U))
    if sol is None:
        if warn:
            warnings.warn("Cholesky factorisation of K + n*lambda*I failed (lambda = "
                          f"{ridge_lambda}); falling back to an eigen-decomposition.",
                          RuntimeWarning, stacklevel=3)
        K = _gram_lower(z, kernel_sigma)
        s, V = _eigh_lower(K)
        filt = shift / np.maximum(s + shift, np.finfo(float).tiny)
        return V @ (filt[:, None] * (V.T @ U))
    return shift * sol


_RFF_CHUNK_BYTES = 1 << 25  # 32 MiB of features per block


def _rff_residuals(z, U, freqs, shift):
    """Primal ridge on paired random Fourier features, never storing the n x 2D features.

    Pass 1 computes the features block by block and accumulates
    G = Phi^T Phi (BLAS dsyrk, upper triangle) and B = Phi^T U; the ridge
    system (G + shift I) w = B is solved by Cholesky; pass 2 recomputes the
    features row by row and returns U - Phi w.  Memory O(block * D + D^2).
    """
    n = z.shape[0]
    freqs_t = np.ascontiguousarray(freqs.T)
    m = 2 * freqs.shape[0]
    U = np.ascontiguousarray(U)
    rows = max(256, min(n, _RFF_CHUNK_BYTES // (8 * m)))
    # small problems: BLAS threads cost more than they save (see _single_threaded_blas)
    with (_single_threaded_blas() if float(n) * m * m < 2e9 else contextlib.nullcontext()):
        w = _rff_solve(z, U, freqs_t, m, rows, shift)
    return _kernels.rff_residuals(z, freqs_t, np.ascontiguousarray(w), U)


def _rff_solve(z, U, freqs_t, m, rows, shift):
    n = z.shape[0]
    buf = np.empty((rows, m))
    G = np.zeros((m, m), order="F")
    B = np.zeros((m, U.shape[1]))
    for start in range(0, n, rows):
        stop = min(n, start + rows)
        P = buf[: stop - start]
        _kernels.rff_features_into(z, freqs_t, start, P)
        # P.T is Fortran-ordered (m, rows): dsyrk computes P^T P without a copy
        G = blas.dsyrk(1.0, P.T, beta=1.0, c=G, trans=0, lower=0, overwrite_c=1)
        B += P.T @ U[start:stop]
    del buf
    G.ravel(order="F")[:: m + 1] += shift
    c, info = lapack.dpotrf(G, lower=0, clean=0, overwrite_a=1)
    if info != 0:  # pragma: no cover - G + shift I is positive definite for shift > 0
        raise np.linalg.LinAlgError("ridge system on random features is not positive definite")
    w, info = lapack.dpotrs(c, B, lower=0)
    if info != 0:  # pragma: no cover
        raise np.linalg.LinAlgError("ridge system on random features could not be solved")
    return w


def rff_frequencies(d, n_features, kernel_sigma, rng):
    """Draw D frequencies from the spectral density N(0, 2 sigma I) of exp(-sigma ||.||^2)."""
    return rng.normal(scale=math.sqrt(2.0 * kernel_sigma), size=(n_features, d))


# --------------------------------------------------------------------------- CVST CV

def cvst_folds(n, folds):
    """Validation index sets of CVST::CV (0-based), contiguous and unshuffled.

    CVST uses ``size = n / folds`` and, for fold f = 1..folds, the R sequence
    ``seq((f-1)*size + 1, f*size)`` used as indices (fractional values are
    truncated towards zero by R's indexing).  When n is not divisible by
    ``folds`` some rows belong to no validation fold, exactly as in R.
    """
    size = n / folds
    out = []
    for f in range(1, folds + 1):
        start = (f - 1) * size + 1.0
        stop = f * size
        k = math.floor(stop - start + 1e-10)
        seq = start + np.arange(k + 1)
        idx = np.unique(np.trunc(seq).astype(np.int64) - 1)
        out.append(idx)
    return out


def _eigh_lower(K):
    """Eigen-decomposition of the symmetric matrix whose lower triangle K holds (in place)."""
    s, V, info = lapack.dsyevd(K.T, compute_v=1, lower=0, overwrite_a=1)
    if info != 0:  # pragma: no cover
        raise np.linalg.LinAlgError(f"eigen-decomposition failed (LAPACK info {info})")
    return s, V


_BLAS_CONTROLLER = []
_SMALL_EIGH = 2048


def _single_threaded_blas():
    """Context limiting BLAS to one thread (for loops of small products and factorisations).

    Threads gain nothing on |v| x |v| blocks, and when other processes share
    the cores (parallel simulation studies) OpenBLAS's spinning threads make
    such loops 10-20x slower.  Uses threadpoolctl (a scikit-learn dependency);
    without it, a no-op.
    """
    if not _BLAS_CONTROLLER:
        try:
            from threadpoolctl import ThreadpoolController
            _BLAS_CONTROLLER.append(ThreadpoolController())
        except Exception:  # pragma: no cover - threadpoolctl missing or broken
            _BLAS_CONTROLLER.append(None)
    ctl = _BLAS_CONTROLLER[0]
    if ctl is None:  # pragma: no cover
        return contextlib.nullcontext()
    return ctl.limit(limits=1, user_api="blas")


def krr_cv_residuals(z, U, kernel_sigma, lambdas, folds):
    """KRR residuals with lambda chosen per column by CVST-compatible cross-validation.

    Reproduces ``CVST::CV`` with its KRR learner: contiguous unshuffled folds
    (:func:`cvst_folds`), a fit on the training rows with penalty
    N_train * lambda, the mean over folds of the mean squared validation error,
    ties to the first lambda in the grid.

    Instead of one solve per lambda per fold, the whole grid shares one
    eigen-decomposition K = V diag(s) V^T of the full Gram matrix: with
    G = (K + mu I)^-1 = V diag(1/(s + mu)) V^T, the validation residuals of a
    fit on the other rows are G_vv^-1 (G u)_v (block inversion), so each
    (lambda, fold) costs one small |v| x |v| solve.  X and Y (all columns)
    share the decomposition.  The final residuals for the chosen lambda are
    V diag(n lambda / (s + n lambda)) V^T u.

    Returns
    -------
    resid : (n, c) residuals;  chosen : (c,) lambdas.
    """
    n = z.shape[0]
    lambdas = np.asarray(lambdas, dtype=np.float64)
    K = _gram_lower(z, kernel_sigma)
    # up to n ~ 2000 a second BLAS thread saves little on the eigen-decomposition
    # and costs 10x when the cores are shared; beyond, use the default threads
    with (_single_threaded_blas() if n <= _SMALL_EIGH else contextlib.nullcontext()):
        s, V = _eigh_lower(K)
    del K
    W = V.T @ U  # (n, c)
    fold_idx = cvst_folds(n, folds)
    Vf = [np.ascontiguousarray(V[idx]) for idx in fold_idx]
    ncol = U.shape[1]
    errors = np.zeros((lambdas.size, ncol))
    with _single_threaded_blas():
        for li, lam in enumerate(lambdas):
            for idx, Vv in zip(fold_idx, Vf):
                n_train = n - idx.size
                mu = n_train * lam
                w = 1.0 / (s + mu)
                # G_vv = (Vv sqrt(w)) (Vv sqrt(w))^T by dsyrk: half the flops of a
                # general product; Bt is Fortran-ordered so BLAS needs no copy.
                Bt = Vv.T * np.sqrt(w)[:, None]
                Gvv = blas.dsyrk(1.0, Bt, trans=1, lower=0)
                rhs = Vv @ (w[:, None] * W)
                c, info = lapack.dpotrf(Gvv, lower=0, clean=0, overwrite_a=1)
                if info == 0:
                    e, _ = lapack.dpotrs(c, rhs, lower=0)
                else:  # pragma: no cover - numerically singular block
                    e = np.linalg.lstsq((Vv * w) @ Vv.T, rhs, rcond=None)[0]
                errors[li] += np.mean(e * e, axis=0)
    errors /= len(fold_idx)
    best = np.argmin(errors, axis=0)  # first minimum, like R's which.min
    chosen = lambdas[best]
    resid = np.empty_like(U)
    for c in range(ncol):
        shift = n * chosen[c]
        filt = shift / (s + shift)
        resid[:, c] = V @ (filt * W[:, c])
    return resid, chosen, errors
