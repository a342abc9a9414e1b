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
