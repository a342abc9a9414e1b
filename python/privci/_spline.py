"""PrivGCM's released regression: an additive spline fit published with differential privacy.

The transformation -> mechanism -> test path of :func:`privci.privgcm` with
``regression="spline"`` (the default when z is given):

1. **Basis** (public, :func:`spline_basis`).  Each column of z is centred and
   scaled by public values, t = (z - z_center) / z_scale, clipped to
   [-T, T] (T = 4), and expanded in the cubic B-splines with interior knots at
   the standard normal quantiles j / (m + 1), j = 1..m (m = 8, 12 functions per
   column).  B-splines are non-negative and sum to 1 at every t (a partition of
   unity), so every row's feature vector phi(z) >= 0 has sum d (the first
   function of every column after the first is dropped: the constants are
   already in the span, and the span is unchanged).
2. **Released fit** (:func:`release_fit`).  The rows are split by a
   data-independent random partition into halves A and B.  On A the
   sufficient statistics of the least-squares fit of the scaled x on phi(z),
   G_A = sum phi phi^T (upper triangle) and b_A = sum x phi, are released with
   Laplace noise; on B the same for y.  Replacing one row changes the upper
   triangle of G by at most d^2 + d in L1 (each row's part is non-negative
   with sum ((sum phi)^2 + sum phi^2) / 2 <= (d^2 + d) / 2) and b by at most
   2 d per column of x (|x| <= 1).  ``GRAM_SHARE`` of the fit's epsilon goes to
   G, the rest to b; a row lies in A or in B, so the two releases together are
   epsilon_fit-DP (parallel composition).  The coefficients are the solution
   of the released normal equations with the eigenvalues of the released G
   floored at ``FLOOR`` times the Laplace scale times sqrt(p) (post-processing).
3. **Residual products** (:func:`residual_products`).  With the fit public,
   r_x = clip(x - clip(phi^T beta_x, -1, 1), -1, 1) and likewise r_y, so each
   product lies in [-1, 1] and replacing one row moves only its own product:
   the L1 sensitivity of the products (and of any vector of disjoint block
   sums) is 2 per pair of columns, whatever the regression.
4. **Test** (:func:`spline_statistic`).  The noisy block sums of a second
   data-independent partition (Laplace(2 / epsilon_test) per sum) give
   S = sum of the sums; the fit's own noise shifts all products together by
   about n <e_x, e_y>, which the between-block variance does not see, so its
   second moment V is estimated by a parametric bootstrap from the released
   statistics and public noise scales (post-processing), and
   t = S / sqrt(k var(block sums) + V) is referred to t with k - 1 degrees of
   freedom.  Several columns: Bonferroni over the pairs.

Everything is epsilon_fit + epsilon_test = epsilon-DP by sequential composition.
The proofs are written out on the documentation's "Released regression" page.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .mechanisms import laplace_mechanism

__all__ = ["spline_basis", "n_basis", "gram_sensitivity", "cross_sensitivity", "release_fit",
           "release_sums", "mechanism_text", "ADDITIVE_CAVEAT",
           "residuals", "shift_second_moment", "spline_statistic", "SPLINE_KNOTS", "SPLINE_RANGE",
           "FIT_SHARE", "GRAM_SHARE", "FLOOR", "N_BOOT"]

SPLINE_KNOTS = 8        # interior knots per column of z
SPLINE_RANGE = 4.0      # t = (z - centre) / scale is clipped to [-4, 4]
SPLINE_DEGREE = 3
FIT_SHARE = 0.9         # of the test's epsilon, for the released regression
GRAM_SHARE = 0.8        # of the fit's epsilon, for the Gram matrices
FLOOR = 2.0             # eigenvalue floor, in units of Laplace scale * sqrt(p)
N_BOOT = 100            # parametric-bootstrap draws for the fit's shift


def _knots(m=SPLINE_KNOTS, T=SPLINE_RANGE, deg=SPLINE_DEGREE):
    from scipy.stats import norm
    inner = norm.ppf(np.arange(1, m + 1) / (m + 1))
    return np.r_[[-T] * (deg + 1), inner, [T] * (deg + 1)]


def n_basis(d, m=SPLINE_KNOTS):
    """Number of features for d columns of z: (m + 4) + (d - 1)(m + 3)."""
    per = m + SPLINE_DEGREE + 1
    return per + (d - 1) * (per - 1)


def spline_basis(t):
    """Additive cubic B-spline features of centred, scaled z (n, d) -> (n, p), non-negative.

    Each row's features sum to d (at most): a partition of unity per column, with the
    first function of columns 2..d dropped.  Non-finite values are mapped into
    [-T, T] (a NaN to 0) before the basis, so every row gets a valid feature vector.

    Examples
    --------
    >>> import numpy as np
    >>> B = spline_basis(np.array([[0.0, 1.0], [-9.0, 2.5]]))
    >>> B.shape, np.allclose(B.sum(axis=1), 2.0), bool((B >= 0).all())
    ((2, 23), True, True)
    """
    from scipy.interpolate import BSpline
    t = np.asarray(t, dtype=np.float64)
    t = np.clip(np.nan_to_num(t, nan=0.0, posinf=SPLINE_RANGE, neginf=-SPLINE_RANGE),
                -SPLINE_RANGE, SPLINE_RANGE)
    kn = _knots()
    cols = []
    for j in range(t.shape[1]):
        B = BSpline.design_matrix(np.ascontiguousarray(t[:, j]), kn, SPLINE_DEGREE).toarray()
        cols.append(B if j == 0 else B[:, 1:])
    out = np.concatenate(cols, axis=1)
    return np.clip(out, 0.0, 1.0)


def gram_sensitivity(d):
    """L1 sensitivity of the upper triangle of sum phi phi^T: d^2 + d."""
    return float(d * d + d)


def cross_sensitivity(d, cols):
    """L1 sensitivity of sum u phi^T for ``cols`` columns of u in [-1, 1]: 2 d cols."""
    return float(2 * d * cols)


@dataclass(frozen=True)
class FitRelease:
    """One released fit: the noisy sufficient statistics, their noise scales, the coefficients."""

    gram: np.ndarray        # (p, p) symmetric, noisy
    cross: np.ndarray       # (p, cols), noisy
    gram_scale: float
    cross_scale: float
    coef: np.ndarray        # (p, cols)
    hardened: bool
    mechanism: str


def _solve(gram, cross, gram_scale):
    p = gram.shape[0]
    w, V = np.linalg.eigh(gram)
    w = np.maximum(w, FLOOR * gram_scale * math.sqrt(p))
    return V @ ((V.T @ cross) / w[:, None])


def release_fit(phi, u, epsilon, rng):
    """Release (G, b) of rows ``phi`` (m, p), ``u`` (m, cols) with Laplace noise; epsilon-DP.

    ``u`` must lie in [-1, 1] and ``phi`` be a :func:`spline_basis` output for d columns
    (p = n_basis(d)).  Returns a :class:`FitRelease`.
    """
    p = phi.shape[1]
    return release_sums((phi.T @ phi)[np.triu_indices(p)], phi.T @ u, phi.shape[0], epsilon,
                        rng)


def release_sums(gram_tri, cross, rows, epsilon, rng):
    """:func:`release_fit` from the summed statistics of ``rows`` rows (a public count).

    ``gram_tri`` is the upper triangle of sum phi phi^T, ``cross`` = sum phi u^T (p, cols);
    the Dask path sums them over partitions.  ``GRAM_SHARE`` of ``epsilon`` goes to the
    Gram matrix (L1 sensitivity d^2 + d), the rest, rounded down, to the cross-products
    (2 d cols); every entry lies in [-rows, rows].
    """
    cross = np.asarray(cross, dtype=np.float64)
    p, cols = cross.shape
    d = _d_from_p(p)
    iu = np.triu_indices(p)
    m = max(int(rows), 1)
    eps_g = GRAM_SHARE * epsilon
    eps_b = _rest(epsilon, eps_g)
    Gn, info_g = laplace_mechanism(np.asarray(gram_tri, dtype=np.float64), gram_sensitivity(d),
                                   eps_g, rng, value_bound=float(m))
    bn, info_b = laplace_mechanism(cross, cross_sensitivity(d, cols), eps_b, rng,
                                   value_bound=float(m))
    gram = np.zeros((p, p))
    gram[iu] = Gn
    gram = gram + np.triu(gram, 1).T
    coef = _solve(gram, bn, info_g.scale)
    return FitRelease(gram=gram, cross=bn, gram_scale=info_g.scale, cross_scale=info_b.scale,
                      coef=coef, hardened=info_g.hardened and info_b.hardened,
                      mechanism=info_g.mechanism)


def mechanism_text(d, p, q, k, fit_mechanism, noise_mechanism, eps_fit, eps_t):
    """The privacy record's mechanism string of the spline path (in memory and on Dask)."""
    fit = (f"released additive cubic-spline regression ({n_basis(d)} features for {d} "
           f"column(s) of z; rows split into two halves by a data-independent partition, x "
           f"fitted on one and y on the other; {fit_mechanism} on the Gram matrices "
           f"(L1 sensitivity {gram_sensitivity(d):g}) and cross-products (L1 sensitivity "
           f"{cross_sensitivity(d, max(p, q)):g}), epsilon {eps_fit:g})")
    return (f"{fit}; {noise_mechanism} on {k} block sums of the residual products clipped to "
            f"[-1, 1] (L1 sensitivity {2 * p * q:g}, epsilon {eps_t:g})")


ADDITIVE_CAVEAT = ("the released regression is additive in the columns of z (cubic splines "
                   "on (z - z_center) / z_scale, clipped to [-4, 4]): z must be on a unit "
                   "scale (z_center, z_scale) and interactions between columns of z are not "
                   "fitted; the level was measured on the designs in the documentation, not "
                   "proved.")


def _rest(total, spent):
    """The largest float r with spent + r <= total in exact arithmetic."""
    from fractions import Fraction
    r = total - spent
    while Fraction(r) + Fraction(spent) > Fraction(total):
        r = float(np.nextafter(r, 0.0))
    return r


def _d_from_p(p, m=SPLINE_KNOTS):
    per = m + SPLINE_DEGREE + 1
    d = 1 + (p - per) // (per - 1)
    if n_basis(d, m) != p:
        raise ValueError(f"not a spline basis width: p = {p}")
    return d


def residuals(u, phi, coef):
    """clip(u - clip(phi coef, -1, 1), -1, 1): every residual in [-1, 1]."""
    pred = np.clip(np.nan_to_num(phi @ coef), -1.0, 1.0)
    return np.clip(u - pred, -1.0, 1.0)


def shift_second_moment(rel_x, rel_y, n_boot, rng):
    """Parametric-bootstrap E[(n <e_x, e_y>)^2] of the fits' common shift, per (x, y) pair.

    Treats the released statistics as the truth, draws fresh Laplace noise with the
    public scales, refits, and evaluates delta_x^T (G_A + G_B) delta_y.  Post-processing:
    uses only released values and public scales.  Returns (p_cols, q_cols).
    """
    gfull = rel_x.gram + rel_y.gram
    p = gfull.shape[0]
    iu = np.triu_indices(p)
    acc = np.zeros((rel_x.coef.shape[1], rel_y.coef.shape[1]))

    def redraw(rel):
        E = np.zeros((p, p))
        E[iu] = rng.laplace(0.0, rel.gram_scale, iu[0].size)
        E = E + np.triu(E, 1).T
        b = rel.cross + rng.laplace(0.0, rel.cross_scale, rel.cross.shape)
        return _solve(rel.gram + E, b, rel.gram_scale) - rel.coef

    for _ in range(n_boot):
        dx = redraw(rel_x)
        dy = redraw(rel_y)
        acc += (dx.T @ gfull @ dy) ** 2
    return acc / n_boot


def spline_statistic(sums, shift2, mode):
    """Statistic and p-value from noisy block sums (k, pq) and shift second moments (pq,).

    Per pair: t = S / sqrt(k var(sums) + V), S the sum of the k noisy sums, referred to
    t with k - 1 degrees of freedom; several pairs: the largest |t| (or t) with a
    Bonferroni p-value.  Returns (statistic, pvalue, statistic_name).
    """
    from ._private import _t_sf
    k, c = sums.shape
    S = sums.sum(axis=0)
    var = k * np.var(sums, axis=0, ddof=1) + np.maximum(shift2, 0.0)
    stats_ = np.where(var > 0, S / np.sqrt(np.where(var > 0, var, 1.0)), np.nan)
    if not np.all(np.isfinite(stats_)):
        return math.nan, math.nan, "t"
    if mode == 0:
        ps = [min(1.0, 2.0 * _t_sf(abs(t), k - 1)) for t in stats_]
        j = int(np.argmax(np.abs(stats_)))
    elif mode == 1:
        ps = [_t_sf(t, k - 1) for t in stats_]
        j = int(np.argmax(stats_))
    else:
        ps = [_t_sf(-t, k - 1) for t in stats_]
        j = int(np.argmin(stats_))
    p = min(1.0, c * min(ps))
    return float(stats_[j]), float(p), ("t" if c == 1 else "max t (Bonferroni)")
