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
