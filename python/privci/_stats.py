"""Post-processing: from released (or non-private) values to a statistic and a p-value.

The lowest layer of the pipeline's tail (issue 22): functions of numbers that are already
released (noisy products, noisy block sums, a rank) or of non-private residuals; nothing
here reads the private data or draws privacy noise.  The multivariate statistic's
multiplier bootstrap draws from the ``rng`` it is handed.
"""

from __future__ import annotations

import math
import warnings

import numpy as np

from . import _kernels


class DegenerateStatisticWarning(RuntimeWarning):
    """The residual products have zero variance, so the GCM statistic is undefined."""


class FailSafeWarning(UserWarning):
    """A private test returned the fail-safe p = 1 because its released statistics say
    the fit cannot be trusted (not evidence of independence); emitted from the released
    result itself (post-processing)."""


_SQRT2 = math.sqrt(2.0)


def _pvalue_normal(stat, mode):
    """Normal tail probability via erfc (accurate far into the tails)."""
    if mode == 0:
        return math.erfc(abs(stat) / _SQRT2)
    if mode == 1:
        return 0.5 * math.erfc(stat / _SQRT2)
    return 0.5 * math.erfc(-stat / _SQRT2)


def _statistic_from_sums(s1, s2, n, mode, stacklevel=3):
    """Univariate GCM statistic and normal p-value from sum(R), sum(R^2) and n.

    The same formula and degeneracy rule as :func:`_kernels.gcm_univariate` (used where
    only the two sums are at hand, e.g. reduced over Dask partitions).
    """
    mean = s1 / n
    var = s2 / n - mean * mean
    if not var > _kernels.DEGENERATE_RTOL * (s2 / n):
        warnings.warn("the residual products have zero variance, so the GCM statistic is "
                      "undefined; returning statistic = nan and pvalue = nan.",
                      DegenerateStatisticWarning, stacklevel=stacklevel)
        return math.nan, math.nan
    stat = math.sqrt(n) * mean / math.sqrt(var)
    return stat, _pvalue_normal(stat, mode)


def _statistic_from_products(prod, n_sim, mode, rng):
    """GCM statistic and p-value from an (n, k) matrix of residual products.

    k = 1: sqrt(n) mean / sd with a normal p-value.  k > 1: R's max statistic
    with ``n_sim`` Gaussian multiplier draws from ``rng``.
    """
    n, k = prod.shape
    if k == 1:
        stat, sd = _kernels.gcm_univariate(prod[:, 0])
        if not sd > 0:
            warnings.warn("the residual products have zero variance, so the GCM statistic is "
                          "undefined; returning statistic = nan and pvalue = nan.",
                          DegenerateStatisticWarning, stacklevel=3)
            return np.nan, np.nan
        return float(stat), _pvalue_normal(stat, mode)
    scaled, min_sd = _kernels.standardise_columns(prod)
    if not min_sd > 0:
        warnings.warn("a column of residual products has zero variance, so the GCM max "
                      "statistic is undefined; returning statistic = nan and pvalue = nan.",
                      DegenerateStatisticWarning, stacklevel=3)
        return np.nan, np.nan
    draws = rng.standard_normal((n_sim, n))
    stat, sims = _kernels.gcm_max_statistic(scaled, draws, mode)
    pval = (1.0 + np.count_nonzero(sims >= stat)) / (n_sim + 1.0)
    return float(stat), float(pval)


def _method_name(k, private=False):
    base = "Generalised covariance measure test"
    if private:
        base = "Private generalised covariance measure test (PrivGCM)"
    return base + (" (multivariate max statistic, multiplier bootstrap)" if k > 1 else "")


def _oriented(stats, mode):
    if mode == 0:
        return np.abs(stats)
    if mode == 2:
        return -stats
    return stats


def normal_laplace_sf(s, sigma, b):
    """P(N + L >= s) for N ~ N(0, sigma^2) and L ~ Laplace(0, b) independent.

    The closed form of the convolution (``sigma`` or ``b`` may be 0):
    Phi(-s / sigma) + exp(a^2 / 2 - s / b) Phi(s / sigma - a) / 2
    - exp(a^2 / 2 + s / b) Phi(-s / sigma - a) / 2, a = sigma / b.  Where a normal factor
    is a far tail, exp(a^2 / 2 -+ s / b) Phi(-u) is evaluated as
    exp(-s^2 / (2 sigma^2)) erfcx(u / sqrt 2) / 2 (no overflow, no cancellation).

    Examples
    --------
    >>> from privci._stats import normal_laplace_sf
    >>> round(normal_laplace_sf(0.0, 1.0, 2.0), 12)                  # symmetric
    0.5
    >>> round(normal_laplace_sf(1.0, 0.0, 1.0), 6), round(0.5 * math.exp(-1.0), 6)
    (0.18394, 0.18394)
    >>> round(normal_laplace_sf(1.959964, 1.0, 1e-12), 6)           # a normal tail
    0.025
    """
    from scipy.special import erfcx, ndtr
    s, sigma, b = float(s), float(sigma), float(b)
    if not (math.isfinite(s) and math.isfinite(sigma) and math.isfinite(b)
            and sigma >= 0 and b >= 0):
        return math.nan
    if sigma == 0 and b == 0:
        return 1.0 if s <= 0 else 0.0
    if b == 0:
        return float(ndtr(-s / sigma))
    if sigma == 0:
        return 0.5 * math.exp(-s / b) if s >= 0 else 1.0 - 0.5 * math.exp(s / b)
    a = sigma / b
    g = math.exp(-0.5 * (s / sigma) ** 2)

    def term(sign):
        # exp(a^2 / 2 - sign s / b) Phi(sign s / sigma - a)
        u = a - sign * s / sigma
        if u > 0:
            return 0.5 * g * float(erfcx(u / _SQRT2))
        return math.exp(0.5 * a * a - sign * s / b) * float(ndtr(-u))

    val = float(ndtr(-s / sigma)) + 0.5 * term(1.0) - 0.5 * term(-1.0)
    return float(min(1.0, max(0.0, val)))


def shift_law_sf(s, sigma, b, lam):
    """P(N + L + W >= s) for independent N ~ N(0, sigma^2), L ~ Laplace(0, b) and
    W = sum_j lam_j u_j v_j with u, v independent standard normal vectors: a bilinear form
    in two independent Gaussian vectors (the released fits' common shift e_x^T G e_y, whose
    variance is sum lam_j^2), instead of a normal of that variance.

    A bilinear form with few effective terms has heavier tails than a normal (one term,
    u v: P(|u v| > 1.96) = 0.065 against 0.05).  Its characteristic function is
    prod_j (1 + lam_j^2 w^2)^(-1/2); the law's is that times exp(-sigma^2 w^2 / 2) and
    1 / (1 + b^2 w^2), inverted by the Gil-Pelaez formula
    1/2 - (1/pi) int_0^inf sin(w s) phi(w) / w dw.  Where that is below 1e-6 the Chernoff
    bound inf_t exp(-t s) M(t) is returned instead (an upper bound: conservative).  With
    no lam (or a negligible one) this is :func:`normal_laplace_sf`.

    Examples
    --------
    >>> from privci._stats import shift_law_sf, normal_laplace_sf
    >>> round(shift_law_sf(1.0, 1.0, 0.5, []), 12) == round(normal_laplace_sf(1.0, 1.0, 0.5), 12)
    True
    >>> round(2 * shift_law_sf(1.96, 1e-3, 0.0, [1.0]), 3)    # one product u v
    0.065
    >>> shift_law_sf(4.0, 1.0, 0.0, [1.0]) > normal_laplace_sf(4.0, math.sqrt(2.0), 0.0)
    True
    """
    from scipy.integrate import quad
    lam = np.abs(np.asarray(lam, dtype=np.float64).ravel())
    s, sigma, b = float(s), float(sigma), float(b)
    if not (math.isfinite(s) and math.isfinite(sigma) and math.isfinite(b)
            and sigma >= 0 and b >= 0 and np.all(np.isfinite(lam))):
        return math.nan
    lam = lam[lam > 0]
    scale2 = sigma * sigma + 2.0 * b * b
    if lam.size == 0 or float(np.sum(lam * lam)) <= 1e-9 * scale2:
        return normal_laplace_sf(s, sigma, b)
    if s < 0:
        return 1.0 - shift_law_sf(-s, sigma, b, lam)
    if s == 0:
        return 0.5
    lam2 = lam * lam

    def logphi(w):
        return (-0.5 * sigma * sigma * w * w - math.log1p(b * b * w * w)
                - 0.5 * float(np.sum(np.log1p(lam2 * w * w))))

    top = 1.0 / math.sqrt(scale2 + float(np.sum(lam2)))
    while logphi(top) > -36.0:            # phi(top) < 2e-16: the rest is negligible
        top *= 2.0

    def f(w):
        if w == 0.0:
            return s
        return math.sin(w * s) * math.exp(logphi(w)) / w

    val, _ = quad(f, 0.0, top, limit=2000, epsabs=1e-11, epsrel=1e-9)
    p = 0.5 - val / math.pi
    if p >= 1e-6:
        return float(min(1.0, p))
    # far tail: the Chernoff bound, minimised over t in (0, 1 / max(b, lam)) on a grid
    tmax = 1.0 / max(b, float(lam.max()))
    ts = tmax * (1.0 - np.geomspace(1e-6, 1.0, 400)[::-1] * (1.0 - 1e-9))
    ts = ts[(ts > 0) & (ts < tmax)]
    logm = (0.5 * sigma * sigma * ts * ts - np.log1p(-(b * ts) ** 2)
            - 0.5 * np.sum(np.log1p(-lam2[:, None] * ts[None, :] ** 2), axis=0))
    return float(min(1e-6, math.exp(float(np.min(logm - ts * s)))))


def shift_law_pvalue(s, sigma, b, lam, mode):
    """p-value of the observed S = N + L + W (:func:`shift_law_sf`) under a zero mean:
    two-sided (mode 0; the law is symmetric), greater (1) or less (2)."""
    if mode == 0:
        return min(1.0, 2.0 * shift_law_sf(abs(s), sigma, b, lam))
    if mode == 1:
        return shift_law_sf(s, sigma, b, lam)
    return shift_law_sf(-s, sigma, b, lam)


def shift_draws_pvalue(s, sigma, b, draws, mode):
    """p-value of the observed S = N + L + W, N ~ N(0, sigma^2), L ~ Laplace(0, b) and W
    with the empirical law of ``draws`` (symmetrised: W and -W), under a zero mean:
    two-sided (mode 0), greater (1) or less (2).  The mean over the draws of
    :func:`normal_laplace_sf` at s - w (and s + w).

    Examples
    --------
    >>> from privci._stats import shift_draws_pvalue, normal_laplace_pvalue
    >>> shift_draws_pvalue(2.0, 1.0, 0.5, [0.0], 0) == normal_laplace_pvalue(2.0, 1.0, 0.5, 0)
    True
    >>> shift_draws_pvalue(2.0, 1.0, 0.5, [1.5, -1.5], 0) > normal_laplace_pvalue(2.0, 1.0, 0.5, 0)
    True
    """
    w = np.asarray(draws, dtype=np.float64).ravel()
    s = float(s)
    if mode == 0:
        a = abs(s)
        vals = [0.5 * (normal_laplace_sf(a - v, sigma, b) + normal_laplace_sf(a + v, sigma, b))
                for v in w]
        return float(min(1.0, 2.0 * np.mean(vals)))
    x = s if mode == 1 else -s
    vals = [0.5 * (normal_laplace_sf(x - v, sigma, b) + normal_laplace_sf(x + v, sigma, b))
            for v in w]
    return float(min(1.0, np.mean(vals)))


def normal_laplace_pvalue(s, sigma, b, mode):
    """p-value of the observed S = N + L (N ~ N(0, sigma^2), L ~ Laplace(0, b)) under a
    zero mean: two-sided (mode 0), greater (1) or less (2)."""
    if mode == 0:
        return min(1.0, 2.0 * normal_laplace_sf(abs(s), sigma, b))
    if mode == 1:
        return normal_laplace_sf(s, sigma, b)
    return normal_laplace_sf(-s, sigma, b)


def normal_laplace_critical(sigma, b, alpha=0.05):
    """The two-sided critical value c with P(|N + L| >= c) = alpha."""
    from scipy.optimize import brentq
    hi = 10.0 * (sigma + b) + 1e-12
    while normal_laplace_pvalue(hi, sigma, b, 0) > alpha:
        hi *= 2.0
    return float(brentq(lambda c: normal_laplace_pvalue(c, sigma, b, 0) - alpha, 0.0, hi,
                        xtol=1e-12 * hi))
