"""PrivGCM's released regression: a nested spline fit published with differential privacy.

The transformation -> mechanism -> test path of :func:`privci.privgcm` with
``regression="spline"`` (the default when z is given).  Every public choice is made
by :func:`choose_design` from public numbers only (n, d, epsilon, the number of
columns of x and y); the proofs are on the documentation's "Released regression" page.

1. **Basis** (public, :class:`Design`).  Each column of z is centred and scaled by
   public (or privately released) values, t = (z - z_center) / z_scale.  A row with some
   |t_j| > 4 is left out of the fit and of the test (its features and its product count
   as zero, so every bound below holds): beyond the clip box no fit can follow E[X | Z],
   and such rows' products carried that bias (a null with lognormal z rejected 0.10 at
   n = 10^5, epsilon 100; 0.035 with the rule).  The test is then one of X _||_ Y | Z on
   the box, which the null implies.  t, clipped to [-4, 4], is expanded in cubic B-splines whose interior knots are the standard
   normal quantiles j / I (every central interval holds the same reference mass, so
   every function carries data) and a uniform grid of I / 2 intervals on [-3, 3] (the
   flanks); the bases for I and 2I intervals are nested.  The **rich**
   basis has 2I intervals, the **test** basis I.  With 2 to 4 columns the basis also
   holds multilinear interaction blocks (products over the columns of hat functions, on
   [-3, 3]^d in both bases, and one more on [-2, 2]^d in the rich one).  Every block is quantised to
   the grid 2^-16 with its integer sum at most 2^16, so every row's feature vector is
   non-negative with L1 norm at most s = the number of blocks, *exactly*.
2. **Rule** (:func:`choose_design`).  Bias first, then noise: for every split (the fit's
   share of epsilon, the Gram matrices' share of the fit's), the resolution I is the
   finest in (4, 8, 16, 32, 64) at which no central direction of the test fit is shrunk
   by more than 10% (on the public reference Gram of z ~ N(0, I)); the rule takes the
   finest any split reaches, and among those splits and block counts k in (5, 10, 20)
   the least t quantile times predicted sd of S.  Where no split resolves even I = 4,
   the design is not resolvable: the **fail-safe** sets the p-value to 1 and the result
   says why.  With two or more columns the design is never certified unless the user
   states ``assume_additive=True``: the multilinear blocks fit only multilinear
   interactions, and no nested check sees the others.
3. **Released fit** (:func:`release_fits`).  The rows are split by a data-independent
   partition into halves A and B.  On A the sufficient statistics of the regression
   of the scaled x on the rich basis, G_A = sum phi phi^T (upper triangle) and
   b_A = sum x phi, get Laplace noise; on B the same for y.  Replacing one row changes
   the upper triangle of G by at most s^2 + s in L1 and b by at most 2 s per column
   (|x| <= 1); the rule's share of epsilon_fit goes to G, the rest to b.  All sums are exact (fixed-point integers), so the bounds hold in
   floating point; beyond 2^21 rows the float conversion's rounding is added to the
   stated sensitivity.  A row lies in A or in B: parallel composition.
4. **Fits** (post-processing).  Test fit: the nested basis (Gram A^T G A with the
   knot-insertion matrix A), ridge lambda = (Gram noise scale) sqrt(p) on everything
   but a linear function per column, eigenvalues floored at lambda.  Rich fit: the full
   basis, floor lambda, no ridge.
5. **Residual products** (:func:`partition_block_sums`).  With the test fit public,
   r_x = (x - clip(phi^T beta_x, -1, 1)) / c_x, likewise r_y, where c = max(1 + p_max,
   1 - p_min) in [1, 2] and [p_min, p_max] holds every prediction of the released fit
   (:func:`residual_scales`: public, from its coefficients).  So |r| <= 1 with no clip,
   E[r_x | z] = (E[x | z] - clip(phi^T beta_x)) / c_x and under the null E[r_x r_y] is
   the fits' error product alone (a clip of x - prediction to [-1, 1], as before stop
   32, biased it wherever the clip bound: a tight, off-centre window with skewed noise
   rejected 0.27 of nulls at n = 10^6).  Each product lies in [-1, 1], so the k block
   sums of a second data-independent partition have L1 sensitivity 2 per pair of
   columns, whatever the fit.  Laplace noise.
6. **Test** (:func:`spline_test`).  S = the sum of the k noisy block sums,
   t = S / sqrt(k var(block sums) + V + B^2) on k - 1 degrees of freedom.  V is the
   delta-method second moment of the shift e_x^T G e_y that the fits' noise puts on
   every product (G: the released Gram with its eigenvalues shrunk by the noise edge).
   B is the **bias allowance**: the nested fits' estimate of the covariance of the test
   fits' errors, |(rich_x - test_x)^T G (rich_y - test_y)|, plus the same for an
   unshrunk fit on coarse canonical directions against the test fit's projection, each
   with its own noise second moment removed, plus two noise standard deviations (an
   upper confidence bound).  "Not certified" is reported where the squared estimate
   exceeds half of the block and shift variance (the nested fits disagree) or where the
   rule cannot resolve the design; in both cases the fail-safe sets p = 1.

Everything is epsilon_fit + epsilon_test = epsilon-DP by sequential composition.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

from ._epsilon import remaining as _rest
from .mechanisms import laplace_mechanism

__all__ = ["Design", "choose_design", "SPLINE_RANGE", "INTERACTION_BOX", "SCALE_BITS",
           "GRAM_SHARE", "K_BLOCKS", "gram_sensitivity", "cross_sensitivity",
           "partition_stats", "release_fits", "fit_coefficients", "partition_block_sums",
           "release_block_sums", "spline_test", "mechanism_text", "ADDITIVE_CAVEAT",
           "FitRelease", "SplineTest", "fit_check", "additive_caveat"]

SPLINE_RANGE = 4.0        # t = (z - centre) / scale is clipped to [-4, 4]
INTERACTION_BOX = 3.0     # the test basis' multilinear block lives on [-3, 3]^d
RICH_BOX = 2.0            # the rich basis adds one on [-2, 2]^d
MAX_INTERACTION_D = 4     # multilinear blocks (2^d features) for 2 <= d <= 4
SCALE_BITS = 16           # features and scaled x, y on the grid 2^-16; products 2^-32
GRAM_SHARE = 0.8          # default share of the fit's epsilon for the Gram matrices
GRAM_SHARES = (0.3, 0.4, 0.5, 0.6, 0.7, 0.8)   # the rule's choices for that share
BETA_REF = 0.25           # reference size of a fitted function in the scaled units (4-sd bounds)
K_BLOCKS = 20             # noisy block sums of the test (the largest the rule picks)
K_CHOICES = (1, 5, 10, 20)   # the rule's choices for k; k = 1: one noisy sum and the
#                              released sum of squared products (SQ_SHARES of epsilon_test)
SQ_SHARES = (0.05, 0.1, 0.15, 0.2, 0.3)  # k = 1: the rule's choices for the squares' share
SQ_UCB = 1.0              # k = 1: the variance uses Q + SQ_UCB noise scales (an upper bound)
CERTIFY_SHARE = 0.5       # estimated bias^2 / (block + shift variance) above which: flagged
INTERVAL_CHOICES = (4, 8, 16, 32, 64)  # test-basis intervals per column (rich: twice)
FIT_SHARES = (0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8)
RES_TOL = 0.1             # the rule: the finest resolution within this of the least critical value
# regions of t (shells of max_j |t_j|, public): each has its own residual scale, and the
# Gram matrices are released per region (a row lies in one), so that the allowance sees
# the regions' weights exactly
REGION_EDGES = ()             # measured: three shells gave no gain (the regions' Gram noise)
CERT_RHO = 0.9            # a fit is certified when no central direction is shrunk by > 10%
CHUNK = 1 << 16           # rows per chunk: memory O(CHUNK * p)
# the calibration (read at call time, so that studies can vary them; the values are the
# documented mechanism, fixed on pilot runs: vignettes/README.md)
RICH_FLOOR = 1.0          # the rich fit's eigenvalue floor, in units of lambda
UCB_Z = 2.0               # allowance: the debiased estimate plus this many noise sds

CANONICAL = True          # second allowance: coarse canonical directions, unshrunk
GP_SHRINK = 1.0           # quadratic forms' Gram: eigenvalues lowered by this * lambda, >= 0
_ONE = 1 << SCALE_BITS
_EXACT_ROWS = 1 << 21     # sums of values in [-1, 1] on the grid 2^-32 stay exact below this


def gram_sensitivity(s):
    """L1 sensitivity of the upper triangle of sum phi phi^T for s blocks: s^2 + s."""
    return float(s * s + s)


def cross_sensitivity(s, cols):
    """L1 sensitivity of sum u phi^T for ``cols`` columns of u in [-1, 1]: 2 s cols."""
    return float(2 * s * cols)


# --------------------------------------------------------------------------- the basis

@lru_cache(maxsize=32)
def _knots(intervals):
    """Clamped cubic knots on [-T, T] with interior knots at the standard normal quantiles
    j / intervals (every central interval holds the same reference mass, so every basis
    function carries data) and on a uniform grid of intervals / 2 intervals over [-3, 3]
    (the flanks stay resolved).  The bases for I and 2I intervals are nested."""
    from scipy.stats import norm
    T = SPLINE_RANGE
    inner = norm.ppf(np.arange(1, intervals) / intervals)
    grid = np.linspace(-3.0, 3.0, intervals // 2 + 1)
    inner = np.unique(np.round(np.r_[inner, grid], 12))
    kv = np.r_[[-T] * 4, inner, [T] * 4]
    kv.setflags(write=False)
    return kv


def _n_per(intervals):
    """Number of cubic B-splines per column for a resolution of ``intervals``."""
    return len(_knots(intervals)) - 4


def _greville(intervals):
    kv = _knots(intervals)
    return np.array([kv[j + 1:j + 4].mean() for j in range(_n_per(intervals))])


def _bspline_values(t, intervals):
    """Cubic B-splines on uniform knots over [-T, T] at t (already in [-T, T]): (m, I + 3)."""
    from scipy.interpolate import BSpline
    return BSpline.design_matrix(np.ascontiguousarray(t), _knots(intervals), 3).toarray()


def _quantise_block(v):
    """Non-negative values whose rows sum to ~1 -> integers >= 0 with row sums <= 2^16."""
    q = np.floor(np.clip(v, 0.0, 1.0) * _ONE).astype(np.int64)
    excess = q.sum(axis=1) - _ONE
    while np.any(excess > 0):          # rounding can only overshoot by a few units
        rows = np.nonzero(excess > 0)[0]
        j = np.argmax(q[rows], axis=1)
        q[rows, j] -= 1
        excess[rows] -= 1
    return q


def _multilinear(t, box):
    s = np.clip(t / box, -1.0, 1.0)
    out = np.ones((t.shape[0], 1))
    for j in range(t.shape[1]):
        h0 = (1.0 - s[:, j]) / 2.0
        h1 = (1.0 + s[:, j]) / 2.0
        out = np.concatenate([out * h0[:, None], out * h1[:, None]], axis=1)
    return out


@dataclass(frozen=True)
class Design:
    """The public design of the released regression, fixed before any data is read.

    ``intervals`` per column in the test basis (the rich basis has twice as many),
    ``interactions`` (multilinear blocks), the epsilon split and the block count.
    """

    d: int
    intervals: int
    interactions: bool
    eps_fit: float
    eps_test: float
    k: int = K_BLOCKS
    certified: bool = True
    gram_share: float = GRAM_SHARE
    assume_additive: bool = False
    predicted: dict = field(default_factory=dict, compare=False)
    sq_share: float = 0.0     # k = 1: the share of eps_test for the sum of squared products
    regions: tuple = ()       # the region edges on max_j |t_j| (public); () : one region

    @property
    def n_regions(self):
        return len(self.regions) + 1

    @property
    def rich_intervals(self):
        return 2 * self.intervals

    @property
    def eps_gram(self):
        """Each half's epsilon for its Gram matrix: ``gram_share`` of the fit's."""
        return self.gram_share * self.eps_fit

    @property
    def eps_cross(self):
        """Each half's epsilon for its cross-products: the rest of the fit's (rounded down,
        so that eps_gram + eps_cross <= eps_fit exactly)."""
        return _rest(self.eps_fit, self.eps_gram)

    @property
    def eps_sums(self):
        """epsilon of the noisy (block) sums of the residual products: all of eps_test for
        k >= 2; for k = 1 what the sum of squared products leaves (rounded down)."""
        if self.k > 1 or not self.sq_share:
            return self.eps_test
        return _rest(self.eps_test, self.eps_squares)

    @property
    def eps_squares(self):
        """k = 1: epsilon of the sum of squared products (``sq_share`` of eps_test); else 0."""
        if self.k > 1 or not self.sq_share:
            return 0.0
        return self.sq_share * self.eps_test

    @property
    def n_blocks(self):
        """s: the L1 bound of every feature vector (additive columns + interaction blocks)."""
        return self.d + (2 if self.interactions else 0)

    def n_features(self, rich=True):
        per = _n_per(self.rich_intervals if rich else self.intervals)
        p = per + (self.d - 1) * (per - 1)
        if self.interactions:
            p += (2 if rich else 1) * 2 ** self.d
        return p

    def features_int(self, t):
        """Rich-basis features of t (m, d), as integers on the grid 2^-16: (m, p) int64."""
        if np.shape(t)[0] == 0:
            return np.zeros((0, self.n_features()), np.int64)
        t = np.clip(np.nan_to_num(np.asarray(t, dtype=np.float64), nan=0.0,
                                  posinf=SPLINE_RANGE, neginf=-SPLINE_RANGE),
                    -SPLINE_RANGE, SPLINE_RANGE)
        blocks = []
        for j in range(self.d):
            q = _quantise_block(_bspline_values(t[:, j], self.rich_intervals))
            blocks.append(q if j == 0 else q[:, 1:])
        if self.interactions:
            blocks.append(_quantise_block(_multilinear(t, INTERACTION_BOX)))
            blocks.append(_quantise_block(_multilinear(t, RICH_BOX)))
        return np.concatenate(blocks, axis=1)

    def features(self, t):
        """Rich-basis features as floats (exact multiples of 2^-16)."""
        return self.features_int(t) * (1.0 / _ONE)


@lru_cache(maxsize=64)
def _gram_pattern(d, intervals, interactions):
    """The rich basis' possibly non-zero Gram entries: (p_rich, p_rich) bool, public.

    Feature l of an additive block is a cubic B-spline of column j, non-zero only on the
    open interval (kv[l], kv[l + 4]) of its knots (and zero after the quantisation wherever
    the spline is); the interaction features are non-zero almost everywhere.  Two features
    can both be non-zero at some t only if, in every column, their closed supports meet:
    entry (l, m) of sum phi phi^T is then possibly non-zero; every other entry is exactly 0
    for every data set, so it is public and released without noise (Lemma 3 is unchanged:
    a row moves the released entries by at most s^2 + s in L1).  Read-only.

    Examples
    --------
    >>> P = _gram_pattern(1, 4, False)
    >>> bool(P[0, 3]), bool(P[0, 4])       # cubic splines overlap over 4 knot intervals
    (True, False)
    """
    kv = _knots(2 * intervals)
    per = _n_per(2 * intervals)
    lo, hi, col = [], [], []
    for j in range(d):
        for ell in range(0 if j == 0 else 1, per):
            lo.append(kv[ell])
            hi.append(kv[ell + 4])
            col.append(j)
    if interactions:
        for _ in range(2 * 2 ** d):
            lo.append(-np.inf)
            hi.append(np.inf)
            col.append(-1)
    lo, hi, col = np.array(lo), np.array(hi), np.array(col)
    meet = (lo[:, None] <= hi[None, :]) & (lo[None, :] <= hi[:, None])
    # features of different columns (or an interaction feature) always meet somewhere
    pat = meet | (col[:, None] != col[None, :]) | (col[:, None] < 0) | (col[None, :] < 0)
    pat.setflags(write=False)
    return pat


def _pattern_rows(d, intervals, interactions, regions=()):
    """The largest number of noisy entries in a row of the rich Gram matrix, summed over
    the regions' releases (the noise edge is about sqrt of it times the entries' noise
    scale)."""
    if regions:
        return int(np.max(np.sum(_region_patterns(d, intervals, interactions, regions),
                                 axis=(0, 2))))
    return int(np.max(np.sum(_gram_pattern(d, intervals, interactions), axis=1)))


def region_of(t, edges):
    """The region of every row of t (m, d): the number of ``edges`` below max_j |t_j|
    (int64, in [0, len(edges)]); a function of the row alone.

    Examples
    --------
    >>> import numpy as np
    >>> region_of(np.array([[0.2, -1.0], [1.6, 0.0], [0.0, -3.0], [1.5, 1.5]]), (1.5, 2.5))
    array([0, 1, 2, 0])
    """
    t = np.asarray(t, dtype=np.float64)
    if t.ndim == 1:
        t = t[:, None]
    sh = np.max(np.abs(np.nan_to_num(t, nan=0.0)), axis=1) if t.shape[1] else np.zeros(
        t.shape[0])
    out = np.zeros(t.shape[0], dtype=np.int64)
    for e in edges:
        out += sh > e
    return out


def _feature_supports(d, intervals, interactions):
    """(lo, hi, column) of every rich-basis feature: its closed support on its column
    (interaction features: the whole line, column -1)."""
    kv = _knots(2 * intervals)
    per = _n_per(2 * intervals)
    lo, hi, col = [], [], []
    for j in range(d):
        for ell in range(0 if j == 0 else 1, per):
            lo.append(kv[ell])
            hi.append(kv[ell + 4])
            col.append(j)
    if interactions:
        for _ in range(2 * 2 ** d):
            lo.append(-np.inf)
            hi.append(np.inf)
            col.append(-1)
    return np.array(lo), np.array(hi), np.array(col)


@lru_cache(maxsize=64)
def _region_active(d, intervals, interactions, regions):
    """(R, p_rich) bool: feature l is possibly non-zero at some t of region r (public).

    Region r holds the t with a_(r-1) < max_j |t_j| <= a_r (a_(-1) = 0, a_R = the clip
    box); every column then lies in [-a_r, a_r], and with one column |t| is at least
    a_(r-1).  Closed intervals throughout (a superset of the truth)."""
    lo, hi, col = _feature_supports(d, intervals, interactions)
    edges = (0.0,) + tuple(regions) + (SPLINE_RANGE,)
    out = np.zeros((len(edges) - 1, lo.size), dtype=bool)
    for r in range(len(edges) - 1):
        a0, a1 = edges[r], edges[r + 1]
        inner = (lo <= a1) & (hi >= -a1)
        if d == 1 and r > 0:
            inner &= (hi >= a0) | (lo <= -a0)      # meets the annulus a0 <= |t| <= a1
        out[r] = inner | (col < 0)
    out.setflags(write=False)
    return out


@lru_cache(maxsize=64)
def _region_patterns(d, intervals, interactions, regions):
    """(R, p_rich, p_rich) bool: entry (l, m) of region r's Gram sum_{rows in r} phi phi^T
    is possibly non-zero (public; every other entry of that release is exactly 0).

    Two features must both be active in region r (:func:`_region_active`) and, on a shared
    column, have closed supports that meet inside the region's range of that column."""
    pat = _gram_pattern(d, intervals, interactions)
    lo, hi, col = _feature_supports(d, intervals, interactions)
    act = _region_active(d, intervals, interactions, regions)
    edges = (0.0,) + tuple(regions) + (SPLINE_RANGE,)
    out = np.zeros((act.shape[0],) + pat.shape, dtype=bool)
    same = (col[:, None] == col[None, :]) & (col[:, None] >= 0)
    for r in range(act.shape[0]):
        a0, a1 = edges[r], edges[r + 1]
        both = act[r][:, None] & act[r][None, :] & pat
        # on a shared column the overlap of the two supports must meet the region's range
        olo = np.maximum(lo[:, None], lo[None, :])
        ohi = np.minimum(hi[:, None], hi[None, :])
        meet = (olo <= a1) & (ohi >= -a1)
        if d == 1 and r > 0:
            meet &= (ohi >= a0) | (olo <= -a0)
        out[r] = both & (~same | meet)
    out.setflags(write=False)
    return out


@lru_cache(maxsize=64)
def _insertion(d, intervals, interactions):
    """Knot insertion: test-basis coefficients -> rich-basis coefficients (p_rich, p_test)."""
    from scipy.linalg import block_diag
    g = np.linspace(-SPLINE_RANGE, SPLINE_RANGE, 4001)
    Bf = _bspline_values(g, 2 * intervals)
    Bc = _bspline_values(g, intervals)
    A1 = np.linalg.lstsq(Bf, Bc, rcond=None)[0]
    A1[np.abs(A1) < 1e-12] = 0.0
    blocks = [A1 if j == 0 else A1[1:, 1:] for j in range(d)]
    if interactions:
        blocks.append(np.eye(2 ** d))
    A = block_diag(*blocks)
    if interactions:
        A = np.vstack([A, np.zeros((2 ** d, A.shape[1]))])
    A.setflags(write=False)
    return A


@lru_cache(maxsize=64)
def _penalty(d, intervals, interactions):
    """Ridge on everything but a linear function per column (the projector onto the
    complement of the coefficients of 1 and t, from the Greville abscissae), ridge 1 on the
    interaction blocks, plus 1e-3 ridge everywhere (the blocks' shared constants)."""
    from scipy.linalg import block_diag
    g = _greville(intervals)
    blocks = []
    for j in range(d):
        L = np.column_stack([np.ones_like(g), g])
        if j > 0:
            L = L[1:]
        Q, _ = np.linalg.qr(L)
        blocks.append(np.eye(L.shape[0]) - Q @ Q.T)
    if interactions:
        blocks.append(np.eye(2 ** d))
    P = block_diag(*blocks)
    P = P + 1e-3 * np.eye(P.shape[0])
    P.setflags(write=False)
    return P


# --------------------------------------------------------------------------- the public rule

@lru_cache(maxsize=256)
def _reference(d, intervals, interactions):
    """Per-row reference Gram E[phi phi^T] of the rich basis under z ~ N(0, I) (public)."""
    rng = np.random.default_rng(20261126)            # a fixed, public reference sample
    z = rng.standard_normal((8192, d))
    des = Design(d, intervals, interactions, 1.0, 1.0)
    phi = des.features(z)
    G = phi.T @ phi / z.shape[0]
    return G


REFERENCE_INTERVALS = 8   # the splits' predicted noise is ranked at this resolution


@lru_cache(maxsize=64)
def _central_quotients(d, intervals, interactions):
    """Per-row reference Rayleigh quotients E[h^2] (z ~ N(0, I)) of the test basis' central
    functions (Greville abscissa in [-2, 2]) and of its interaction features."""
    rng = np.random.default_rng(20261126)            # a fixed, public reference sample
    z = np.clip(rng.standard_normal((8192, d)), -SPLINE_RANGE, SPLINE_RANGE)
    g = _greville(intervals)
    q1 = np.mean(_bspline_values(z[:, 0], intervals) ** 2, axis=0)[np.abs(g) <= 2.0]
    out = [q1]
    if interactions:
        out.append(np.mean(_multilinear(z, INTERACTION_BOX) ** 2, axis=0))
    return np.concatenate(out)


def _lambda(n, d, eps_fit, gram_share, intervals, interactions):
    """The ridge / eigenvalue floor lambda = (Gram noise scale) sqrt(p_rich)."""
    des = Design(d, intervals, interactions, eps_fit, eps_fit)
    return gram_sensitivity(des.n_blocks) / (gram_share * eps_fit) * math.sqrt(
        _pattern_rows(d, intervals, interactions, tuple(REGION_EDGES)))


def _resolvable(n, d, eps_fit, gram_share, intervals, interactions, products=True):
    """Whether every central test-basis function keeps at least CERT_RHO of itself under
    the ridge (r / (r + lambda) >= CERT_RHO) and, with two or more columns and
    ``products`` (no additivity assumed), whether the interactions of the columns are
    resolved: never.  The multilinear blocks fit only multilinear interactions; the
    interactions nobody can rule out (sin(z1) cos(z2), (z1^2 - 1) z2) are in neither the
    test nor the rich basis, so the nested check cannot see them (measured before this
    rule: such nulls at n = 10^5, epsilon 20 and 100, rejected in 100% of data sets with
    the fit "certified")."""
    if products and d >= 2:
        return False
    m = max(n // 2, 1)
    lam = _lambda(n, d, eps_fit, gram_share, intervals, interactions)
    r = m * _central_quotients(d, intervals, interactions)
    rho = r / (r + lam)
    return float(np.min(rho)) >= CERT_RHO


def _predicted(n, d, p, q, eps, intervals, interactions, fit_share, k, gram_share=GRAM_SHARE):
    """Predicted noise variances of S on the public reference Gram of z ~ N(0, I): the
    test's block noise, and the fit's (its shift V plus the allowance's noise part,
    UCB_Z^2 times the nested difference's noise second moment)."""
    des = Design(d, intervals, interactions, fit_share * eps, (1 - fit_share) * eps, k)
    s = des.n_blocks
    m = max(n // 2, 1)
    eps_fit = fit_share * eps
    sg = gram_sensitivity(s) / (gram_share * eps_fit)
    sbx = cross_sensitivity(s, p) / ((1 - gram_share) * eps_fit)
    sby = cross_sensitivity(s, q) / ((1 - gram_share) * eps_fit)
    Gr = m * _reference(d, intervals, interactions)
    pr = Gr.shape[0]
    lam = sg * math.sqrt(_pattern_rows(d, intervals, interactions, tuple(REGION_EDGES)))
    A = _insertion(d, intervals, interactions)
    P = _penalty(d, intervals, interactions)
    H = A @ _floored_inverse(A.T @ Gr @ A + lam * P, lam) @ A.T   # b -> test fit (rich coords)
    R = _floored_inverse(Gr, RICH_FLOOR * lam)                     # b -> rich fit
    K = R - H                                                       # b -> nested difference
    G2 = 2.0 * Gr                                                   # both halves' Gram
    # noise of b - G beta per coordinate (delta method): 2 sb^2 + 2 sg^2 |beta|^2, with the
    # reference |beta|^2 = BETA_REF^2 per coefficient (B-spline coefficients ~ values)
    beta2 = BETA_REF ** 2 * _pattern_rows(d, intervals, interactions, tuple(REGION_EDGES))
    vx = 2 * sbx ** 2 + 2 * sg ** 2 * beta2
    vy = 2 * sby ** 2 + 2 * sg ** 2 * beta2
    Ch = G2 @ H @ H.T
    Ck = G2 @ K @ K.T
    shift = vx * vy * float(np.sum(Ch * Ch.T))          # V: the fits' common shift
    nested = vx * vy * float(np.sum(Ck * Ck.T))         # the allowance's noise second moment
    fit_var = shift + UCB_Z ** 2 * nested
    test_var = k * 2.0 * (2.0 * p * q / ((1 - fit_share) * eps)) ** 2
    return test_var, fit_var


def _t_quantile(df):
    from scipy.stats import t as _t
    return _t.ppf(0.975, df)


def choose_design(n, d, p, q, epsilon, k=None, assume_additive=False):
    """The public rule: basis resolution, interactions and the epsilon split.

    Bias first, then noise.  For every split (the fit's share f in ``FIT_SHARES`` of
    epsilon, the Gram matrices' share g in ``GRAM_SHARES`` of the fit's), the resolution is
    the finest ``intervals`` in ``INTERVAL_CHOICES`` at which the test fit is resolvable: a
    direction h is shrunk by r_h / (r_h + lambda), r_h its Rayleigh quotient on the public
    reference Gram of z ~ N(0, I), and every central basis function must keep at least
    ``CERT_RHO`` = 0.9 of itself.  With two or more columns nothing is certified unless
    ``assume_additive`` (a public assumption of the user: no interactions are fitted and
    none are checked): the multilinear blocks (2 to 4 columns) fit only multilinear
    interactions, and an interaction such as sin(z1) cos(z2) is in neither the test nor
    the rich basis, so no nested check can see its bias.  The rule takes the finest resolution
    any split reaches, and among the splits that reach it the least predicted noise
    variance of S (the test's block noise plus twice the fit's shift variance, the latter
    with the cross-products' and the Gram's noise for a reference fitted function of size
    ``BETA_REF`` per coefficient).  With ``k=None`` the number of block sums is chosen
    too, from ``K_CHOICES``: the least t quantile (k - 1 degrees of freedom) times the
    predicted sd of S, whose sampling part is that of residuals of sd ``BETA_REF`` (the
    block noise grows with k, the t quantile shrinks).  ``certified`` is False where no split resolves even
    the coarsest basis: privgcm then returns p = 1 (the fail-safe).

    Examples
    --------
    >>> des = choose_design(10_000, 1, 1, 1, 7.0)
    >>> des.intervals in INTERVAL_CHOICES, des.certified, 0 < des.eps_fit < 7.0
    (True, True, True)
    >>> choose_design(10_000, 2, 1, 1, 7.0).certified     # interactions: never certified
    False
    >>> choose_design(10 ** 6, 2, 1, 1, 100.0).certified  # not even at large n epsilon
    False
    >>> choose_design(10_000, 2, 1, 1, 7.0, assume_additive=True).certified
    True
    """
    return _choose_design(int(n), int(d), int(p), int(q), float(epsilon),
                          None if k is None else int(k),
                          bool(assume_additive), tuple(FIT_SHARES), tuple(GRAM_SHARES),
                          tuple(INTERVAL_CHOICES), float(CERT_RHO), tuple(REGION_EDGES),
                          float(RES_TOL), float(RICH_FLOOR), float(UCB_Z))


@lru_cache(maxsize=256)
def _choose_design(n, d, p, q, epsilon, k, assume_additive, fit_shares, gram_shares,
                   interval_choices, cert_rho, regions=(), res_tol=0.1, rich_floor=1.0,
                   ucb_z=2.0):
    # the choice sets and cert_rho are arguments so that the cache follows studies that
    # change the module's constants (_resolvable reads CERT_RHO itself)
    interactions = (not assume_additive) and 2 <= d <= MAX_INTERACTION_D
    products = not assume_additive
    ks = (k,) if k is not None else tuple(c for c in K_CHOICES if c <= n) or (max(2, n),)
    samp = n * BETA_REF ** 4          # reference sampling variance of S (residual sd BETA_REF)

    def options(f, g, i):
        """(critical value, i, f, g, k, sq share, test noise var, fit noise var) of every k
        and squares' share at the split (f, g) and resolution interval_choices[i]."""
        tv1, fv = _predicted(n, d, p, q, epsilon, interval_choices[i], interactions, f, 1, g)
        for kk in ks:
            for sq in (SQ_SHARES if kk == 1 else (0.0,)):
                key, tv = _critical(kk, sq, samp, tv1, fv, p * q)
                yield (-key, i, f, g, kk, sq, tv, fv)

    cands = []
    for f in fit_shares:
        for g in gram_shares:
            for i, cand in enumerate(interval_choices):
                if not _resolvable(n, d, f * epsilon, g, cand, interactions, products):
                    break
                cands.extend(options(f, g, i))
    certified = bool(cands)
    if cands:
        # power first, resolution next: the least predicted critical value of S, but the
        # finest resolution whose critical value is within RES_TOL of that least one
        cmin = min(c[0] for c in cands)
        near = [c for c in cands if c[0] <= (1.0 + RES_TOL) * cmin]
        top = max(c[1] for c in near)
        best = min((c for c in near if c[1] == top), key=lambda c: c[0])
    else:
        best = min((c for f in fit_shares for g in gram_shares for c in options(f, g, 0)),
                   key=lambda c: c[0])
    crit, i, f, g, k, sq, tv, fv = best
    intervals = interval_choices[i]
    eps_fit = f * epsilon
    eps_test = _rest(epsilon, eps_fit)
    return Design(d=d, intervals=intervals, interactions=interactions, eps_fit=eps_fit,
                  eps_test=eps_test, k=k, certified=certified, assume_additive=assume_additive,
                  gram_share=g, sq_share=sq, regions=tuple(REGION_EDGES),
                  predicted={"fit_share": f, "gram_share": g, "test_noise_var": tv,
                             "fit_noise_var": fv, "critical": crit,
                             "sampling_var": samp})


def _critical(k, sq, samp, tv1, fv, pairs):
    """(-(predicted critical value of S), S's predicted noise variance) for k block sums
    (t quantile on k - 1 degrees of freedom times the predicted sd) or, k = 1, one noisy sum
    and the released sum of squares with share ``sq`` of epsilon_test (the critical value
    of |N(0, samp + SQ_UCB b_Q + fv) + Laplace(b_S)|).  ``tv1``: the variance of one sum's
    Laplace noise with all of epsilon_test, 2 b^2."""
    from ._stats import normal_laplace_critical
    if k > 1:
        tv = k * tv1
        return -float(_t_quantile(k - 1)) * math.sqrt(samp + tv + fv), tv
    b_s = math.sqrt(tv1 / 2.0) / (1.0 - sq)
    b_q = 0.5 * math.sqrt(tv1 / 2.0) / sq     # squares: half the products' sensitivity
    tv = 2.0 * b_s * b_s
    return -normal_laplace_critical(math.sqrt(samp + SQ_UCB * b_q + fv), b_s), tv


# --------------------------------------------------------------------------- row passes

def _quantise_u(U):
    """Scaled x, y in [-1, 1] -> the grid 2^-16 (towards zero, so |u| <= 1 stays exact)."""
    return np.trunc(np.clip(np.nan_to_num(U), -1.0, 1.0) * _ONE) * (1.0 / _ONE)


def _exact_sum(parts):
    """Sum float arrays that are exact multiples of 2^-32 (< 2^21 in size): int64 exactly."""
    out = None
    for a in parts:
        v = np.rint(np.asarray(a) * float(1 << (2 * SCALE_BITS))).astype(np.int64)
        out = v if out is None else out + v
    return out


USE_KERNELS = True        # fused numba passes (privci._basis_kernels) for additive designs


@lru_cache(maxsize=32)
def _kernel_spec(d, intervals):
    """The additive rich basis as a :mod:`privci._basis_kernels` spec, and the indices of
    this module's features among the kernels' (the first function of every column after
    the first is dropped here)."""
    from ._basis_kernels import make_basis
    kv = np.asarray(_knots(intervals), dtype=np.float64)
    spec = make_basis([kv] * d)
    per = _n_per(intervals)
    keep = np.concatenate([np.arange(per)] + [j * per + np.arange(1, per) for j in range(1, d)])
    keep.setflags(write=False)
    return spec, keep


def _fast(design, m):
    return USE_KERNELS and not design.interactions and m > 0


def partition_stats(t, U, half, design, p, keep=None):
    """Pass 1 over rows: exact fixed-point sums of the fit's statistics.

    ``t`` (m, d) centred and scaled z, ``U`` (m, p + q) the clipped, scaled x and y,
    ``half`` (m,) True for rows of half A, ``keep`` None or (m,) bool: False for rows left
    out (every row is evaluated either way; a left-out row's terms are not added).
    Returns int64 arrays (units 2^-32): G_A (R, upper triangle), the Gram matrices of half
    A's rows in each of the design's R regions (:func:`region_of`), b_A (p_rich, p) over
    half A with the x columns, and G_B, b_B over half B with the y columns.  Memory
    O(CHUNK * p_rich).
    """
    pr = design.n_features()
    iu = np.triu_indices(pr)
    q = U.shape[1] - p
    m = t.shape[0]
    R = design.n_regions
    kp = None if keep is None else np.asarray(keep, dtype=bool)
    if _fast(design, m):
        group = np.where(np.asarray(half, dtype=bool), 0, 1).astype(np.int64)
        if kp is not None:
            group[~kp] = 2
        return _stats_rows(t, U[:, :p], U[:, p:], 0.0, 1.0, 0.0, 1.0, group, design,
                           left_out=kp is not None)
    region = region_of(t, design.regions) if R > 1 else np.zeros(m, np.int64)
    acc = [np.zeros((R, iu[0].size), np.int64), np.zeros((pr, p), np.int64),
           np.zeros((R, iu[0].size), np.int64), np.zeros((pr, q), np.int64)]
    step = min(CHUNK, _EXACT_ROWS)
    for a in range(0, m, step):
        sl = slice(a, min(a + step, m))
        phi = design.features(t[sl])
        u = _quantise_u(U[sl])
        h = np.asarray(half[sl], dtype=bool)
        k_ = np.ones_like(h) if kp is None else kp[sl]
        reg = region[sl]
        for g, (rows, cols) in enumerate(((h & k_, slice(0, p)), (~h & k_, slice(p, p + q)))):
            for r in range(R):
                ph = phi[rows & (reg == r)]
                acc[2 * g][r] += _exact_sum([(ph.T @ ph)[iu]])
            ph = phi[rows]
            acc[2 * g + 1] += _exact_sum([ph.T @ u[rows, cols]])
    return tuple(acc)


def _stats_rows(t, x, y, xc, xb, yc, yb, group, design, left_out=False):
    """:func:`partition_stats` of an additive design from the raw x, y columns, in one
    fused pass (:func:`privci._basis_kernels.accumulate`): u = clip((x - xc) / xb, -1, 1),
    the values of the scaled U of :meth:`privci._transform._GCMInputs.scaled` exactly, then
    quantised as :func:`_quantise_u`.  ``group`` (m,) int64: 0 for half A, 1 for half B;
    with ``left_out``, 2 for rows left out, and the kernels send every row whose t lies
    beyond the clip box there as well (a discarded group).  With R regions the kernels'
    groups are half R + region (:func:`region_of`, from t), and 2 R the discarded one."""
    from ._basis_kernels import accumulate
    spec, keep = _kernel_spec(design.d, design.rich_intervals)
    p = x.shape[1]
    q = y.shape[1]
    R = design.n_regions
    if R > 1:
        group = np.where(group < 2, group * R + region_of(t, design.regions), 2 * R)
    ucols = ((0, p),) * R + ((p, p + q),) * R + (((0, 0),) if left_out else ())
    G, B = accumulate(t, x, y, 0.0, 1.0, xc, xb, yc, yb, spec, group=group,
                      n_groups=len(ucols), check_labels=False, u_columns=ucols,
                      outside_group=2 * R if left_out else None)
    pr = design.n_features()
    iu = np.triu_indices(pr)
    ix = np.ix_(keep, keep)
    g_a = np.stack([G[r][ix][iu] for r in range(R)])
    g_b = np.stack([G[R + r][ix][iu] for r in range(R)])
    b_a = sum(B[r][keep][:, :p] for r in range(R))
    b_b = sum(B[R + r][keep][:, p:] for r in range(R))
    return (g_a, b_a, g_b, b_b)


def _sums_rows(t, x, y, xc, xb, yc, yb, labels, design, coef_x, coef_y, k, left_out=False,
               residual_scale=None):
    """:func:`partition_block_sums` of an additive design from the raw x, y columns (as
    :func:`_stats_rows`); ``labels`` (m,) int64 in [0, k); with ``left_out``, k for rows
    left out, and the kernels send every row beyond the clip box there as well (an extra
    block, discarded).  With R regions the kernels' labels are block R + region (from t)
    and the output has k R rows of sums, then k R of squares."""
    from ._basis_kernels import residual_block_sums
    spec, keep = _kernel_spec(design.d, design.rich_intervals)
    R = design.n_regions
    if R > 1:
        labels = np.where(labels < k, labels * R + region_of(t, design.regions), k * R)
        k = k * R
    full_x = np.zeros((spec.n_features, x.shape[1]))
    full_y = np.zeros((spec.n_features, y.shape[1]))
    full_x[keep] = coef_x
    full_y[keep] = coef_y
    sums, squares = residual_block_sums(
        t, x, y, 0.0, 1.0, xc, xb, yc, yb, spec, full_x, full_y, labels,
        k + 1 if left_out else k, check_labels=False, outside_block=k if left_out else None,
        residual_scale=residual_scale, squares=True)
    return np.vstack([sums[:k], squares[:k]])


def _to_float(a):
    return np.asarray(a, dtype=np.float64) * (1.0 / float(1 << (2 * SCALE_BITS)))


def _conversion_slack(rows, entries):
    """L1 slack of converting exact sums (|entry| <= rows) to float64: 0 below 2^21 rows."""
    if rows < _EXACT_ROWS:
        return 0.0
    ulp = 2.0 ** (math.floor(math.log2(rows)) + 1 - 52)
    return float(entries) * ulp


@dataclass(frozen=True)
class FitRelease:
    """One released fit: noisy statistics, their public noise scales and sensitivities."""

    gram: np.ndarray        # (p_rich, p_rich) symmetric, noisy
    cross: np.ndarray       # (p_rich, cols), noisy
    gram_scale: float
    cross_scale: float
    gram_sensitivity: float
    cross_sensitivity: float
    gram_epsilon: float
    cross_epsilon: float
    hardened: bool
    mechanism: str
    rows: int = 0           # the public size of the half
    cross_mechanism: str = ""
    # (p_rich, p_rich) public: how many independent Laplace draws of scale gram_scale each
    # entry of ``gram`` carries (0: a structural zero, released exactly); None: one each
    noise_map: object = None
    # (R, p_rich, p_rich): the released Gram matrix of each region (``gram`` is their sum)
    # and each one's noise map; None with one region
    gram_regions: object = None
    region_maps: object = None


def _release_one(g_int, b_int, rows, design, rng):
    """Release one half's Gram matrices, one per region (the possibly non-zero entries of
    each upper triangle, :func:`_region_patterns`; the others are structural zeros, public
    and exact), and its cross-products.  ``g_int``: (R, upper triangle) exact sums.

    A row lies in one region, so replacing it moves the released entries of the R
    matrices by at most s^2 + s in L1 (its old terms out of one, its new terms into one:
    each at most (s^2 + s) / 2), the sensitivity of one Gram matrix."""
    pr = design.n_features()
    s = design.n_blocks
    R = design.n_regions
    iu = np.triu_indices(pr)
    pats = _region_patterns(design.d, design.intervals, design.interactions, design.regions) \
        if R > 1 else _gram_pattern(design.d, design.intervals, design.interactions)[None]
    tri = np.stack([pt[iu] for pt in pats])                 # (R, n_tri) bool
    cols = b_int.shape[1]
    m = max(int(rows), 1)
    eps_g, eps_b = design.eps_gram, design.eps_cross
    sens_g = gram_sensitivity(s) + _conversion_slack(m, int(tri.sum()))
    sens_b = cross_sensitivity(s, cols) + _conversion_slack(m, pr * cols)
    g_exact = np.asarray(g_int).reshape(R, -1)[tri]   # only the possibly non-zero entries
    Gn, info_g = laplace_mechanism(_to_float(g_exact), sens_g, eps_g, rng,
                                   value_bound=float(m))
    bn, info_b = laplace_mechanism(_to_float(b_int), sens_b, eps_b, rng, value_bound=float(m))
    upper = np.zeros(tri.shape)
    upper[tri] = Gn
    grams = np.zeros((R, pr, pr))
    for r in range(R):
        grams[r][iu] = upper[r]
        grams[r] = grams[r] + np.triu(grams[r], 1).T
    maps = pats.astype(np.float64)
    return FitRelease(gram=grams.sum(axis=0), cross=bn, gram_scale=info_g.scale,
                      cross_scale=info_b.scale, gram_sensitivity=sens_g,
                      cross_sensitivity=sens_b, gram_epsilon=eps_g, cross_epsilon=eps_b,
                      hardened=info_g.hardened and info_b.hardened,
                      mechanism=info_g.mechanism, rows=m, cross_mechanism=info_b.mechanism,
                      noise_map=maps.sum(axis=0), gram_regions=grams if R > 1 else None,
                      region_maps=maps if R > 1 else None)


def release_fits(stats, rows, design, rng):
    """Release the x fit's statistics (half A) and the y fit's (half B): (rel_x, rel_y).

    ``stats`` from :func:`partition_stats` (summed over partitions), ``rows`` = the
    public sizes of the halves.  Each half's release is epsilon_fit-DP (the design's
    ``gram_share`` of it on G, the rest, rounded down, on b); the halves are disjoint (parallel composition).
    """
    g_a, b_a, g_b, b_b = stats
    rel_x = _release_one(g_a, b_a, rows[0], design, rng)
    rel_y = _release_one(g_b, b_b, rows[1], design, rng)
    return rel_x, rel_y


def _noise_rows(rel):
    """The largest row sum of the release's noise map (p_rich without one: every entry)."""
    nm = getattr(rel, "noise_map", None)
    if nm is None:
        return float(rel.gram.shape[0])
    return float(np.max(np.sum(nm, axis=1)))


def _lam(design, rel):
    """The ridge / eigenvalue floor: the Gram noise's scale times sqrt of the largest number
    of noisy entries in a row (the noise matrix's spectral edge is of that order; with every
    entry noisy, sqrt(p_rich))."""
    return rel.gram_scale * math.sqrt(_noise_rows(rel))


def fit_coefficients(rel, design):
    """Coefficients (in rich-basis coordinates) of the test fit (post-processing)."""
    return _test_operator(rel, design) @ rel.cross


def _block_starts(design):
    """The first rich feature of every block (additive columns, then the interaction
    blocks), and the end."""
    per = _n_per(design.rich_intervals)
    starts = [0] + [per + j * (per - 1) for j in range(design.d)]
    if design.interactions:
        starts += [starts[-1] + 2 ** design.d, starts[-1] + 2 * 2 ** design.d]
    return starts


def region_residual_scales(coef, design):
    """Public residual scales s_r = 1 / c_r of every region r and column of ``coef``
    (p_rich, cols): (R, cols), with c_r = max(1 + p_max, 1 - p_min) in [1, 2] and
    [p_min, p_max] holding every prediction clip(phi^T coef, -1, 1) at any t of region r
    (post-processing of the released fit).

    Every block's features are >= 0 and sum to at most 1, so its part of phi^T coef at t
    lies in [min(0, min of its coefficients active at t), max(0, max of them)]; the
    features possibly active in region r are public (:func:`_region_active`) and the bounds
    add over the blocks.  So u - prediction, u in [-1, 1], lies in [-c_r, c_r] for every row
    of region r, and (u - prediction) / c_r in [-1, 1]: the residuals need no clip (which
    biased them where it bound).  Non-finite coefficients give c = 2.

    Examples
    --------
    >>> import numpy as np
    >>> from privci._spline import choose_design, region_residual_scales
    >>> des = choose_design(10_000, 1, 1, 1, 2.0)
    >>> p = des.n_features()
    >>> region_residual_scales(np.full((p, 1), 0.25), des)[:, 0]   # c = 1.25 everywhere
    array([0.8, 0.8, 0.8])
    """
    coef = np.asarray(coef, dtype=np.float64)
    cols = coef.shape[1]
    R = design.n_regions
    if not np.all(np.isfinite(coef)):
        return np.full((R, cols), 0.5)
    act = _region_active(design.d, design.intervals, design.interactions, design.regions) \
        if R > 1 else np.ones((1, coef.shape[0]), dtype=bool)
    starts = _block_starts(design)
    out = np.empty((R, cols))
    for r in range(R):
        hi = np.zeros(cols)
        lo = np.zeros(cols)
        for a, b in zip(starts[:-1], starts[1:]):
            sel = act[r, a:b]
            if not np.any(sel):
                continue
            blk = coef[a:b][sel]
            hi += np.maximum(blk.max(axis=0), 0.0)
            lo += np.minimum(blk.min(axis=0), 0.0)
        c = np.maximum(1.0 + np.minimum(hi, 1.0), 1.0 - np.maximum(lo, -1.0))
        out[r] = 1.0 / c
    return out


def residual_scales(coef, design):
    """Public residual scales s = 1 / c per column of ``coef`` (p_rich, cols), one for every
    t: the smallest of the regions' (:func:`region_residual_scales`), so that
    (u - prediction) s lies in [-1, 1] for every row (post-processing of the released fit).

    Examples
    --------
    >>> import numpy as np
    >>> from privci._spline import choose_design, residual_scales
    >>> des = choose_design(10_000, 1, 1, 1, 2.0)
    >>> p = des.n_features()
    >>> residual_scales(np.full((p, 1), 0.25), des)    # predictions in [0, 0.25]: c = 1.25
    array([0.8])
    """
    return np.min(region_residual_scales(coef, design), axis=0)


def partition_block_sums(t, U, labels, design, coef_x, coef_y, p, k, keep=None,
                         residual_scale=None):
    """Pass 2 over rows: exact sums of the residual products and of their squares per block
    and region (int64, 2^-32), stacked: (2 k R, p q), the k R sums (row b R + r: block b,
    region r of :func:`region_of`) then the k R sums of squares.

    Residuals clip((u - clip(prediction, -1, 1)) s, -1, 1) with ``residual_scale`` s (p +
    q,) (None: 1; PrivGCM passes :func:`residual_scales`, under which the clip never
    binds).  Column order: x index fastest (a + p * b).  Each product lies in [-1, 1], each
    square in [0, 1].  ``keep`` as in :func:`partition_stats`: a left-out row's product is
    not added.
    """
    q = U.shape[1] - p
    m = t.shape[0]
    R = design.n_regions
    rs = np.ones(U.shape[1]) if residual_scale is None else np.asarray(residual_scale, float)
    kp = None if keep is None else np.asarray(keep, dtype=bool)
    lab = np.asarray(labels)
    if lab.shape != (m,) or lab.dtype.kind not in "iu" or (
            m and (lab.min() < 0 or lab.max() >= k)):
        raise ValueError(f"`labels` must be {m} integers in [0, {k})")
    lab = lab.astype(np.int64, copy=True)
    if _fast(design, m):
        if kp is not None:
            lab[~kp] = k
        return _sums_rows(t, U[:, :p], U[:, p:], 0.0, 1.0, 0.0, 1.0, lab, design, coef_x,
                          coef_y, k, left_out=kp is not None, residual_scale=rs)
    if R > 1:
        lab = lab * R + region_of(t, design.regions)
    labels = lab
    k = k * R
    out = np.zeros((2 * k, p * q), np.int64)
    step = min(CHUNK, _EXACT_ROWS)
    for a in range(0, m, step):
        sl = slice(a, min(a + step, m))
        phi = design.features(t[sl])
        u = _quantise_u(U[sl])
        rx = np.clip((u[:, :p] - np.clip(np.nan_to_num(phi @ coef_x), -1.0, 1.0)) * rs[:p],
                     -1.0, 1.0)
        ry = np.clip((u[:, p:] - np.clip(np.nan_to_num(phi @ coef_y), -1.0, 1.0)) * rs[p:],
                     -1.0, 1.0)
        prod = (rx[:, :, None] * ry[:, None, :]).transpose(0, 2, 1).reshape(len(rx), p * q)
        scale = float(1 << (2 * SCALE_BITS))
        prod = np.clip(prod, -1.0, 1.0)
        qp = np.trunc(prod * scale).astype(np.int64)
        qs = np.trunc(prod * prod * scale).astype(np.int64)
        if kp is not None:
            qp[~kp[sl]] = 0
            qs[~kp[sl]] = 0
        lab = np.asarray(labels[sl], dtype=np.int64)
        for c in range(p * q):
            # each |value| <= 2^32 and a chunk has <= 2^16 rows: float sums are exact
            out[:k, c] += np.bincount(lab, weights=qp[:, c].astype(np.float64),
                                      minlength=k).astype(np.int64)
            out[k:, c] += np.bincount(lab, weights=qs[:, c].astype(np.float64),
                                      minlength=k).astype(np.int64)
    return out


@dataclass(frozen=True)
class SumsRelease:
    """The test's released sums: ``sums`` (k, p q) noisy block sums of the residual
    products and, for k = 1, ``squares`` (p q,) the noisy sum of their squares (else None),
    with the squares' public noise scale, sensitivity, epsilon and mechanism."""

    sums: np.ndarray
    sums_scale: float = 0.0
    squares: object = None
    squares_scale: float = 0.0
    squares_sensitivity: float = 0.0
    squares_epsilon: float = 0.0
    squares_mechanism: str = ""
    squares_hardened: bool = True


def _combination_slack(rows, entries, regions):
    """L1 slack of the regions' weighted combination in float64 (0 with one region): each
    combined entry is within regions 2^-52 rows of its exact value (every row adds at most 1
    to it), on both neighbours."""
    if regions <= 1:
        return 0.0
    return float(entries) * 2.0 * regions * rows * 2.0 ** -52


def region_weights(region_scales, p, q):
    """The regions' weights (R, p q) of the products computed with the global residual
    scales (the smallest over the regions): w_r = (s_r,x s_r,y) / (s_x s_y) >= 1, column
    a + p b (x index fastest)."""
    rs = np.asarray(region_scales, dtype=np.float64).reshape(-1, p + q)
    g = np.min(rs, axis=0)
    rel = rs / g[None, :]
    return np.stack([np.outer(rel[r, :p], rel[r, p:]).T.ravel() for r in range(rs.shape[0])])


def combine_regions(sums_int, k, R, weights):
    """The weighted block sums of (2 k R, p q) exact per-region sums: (k, p q) sums
    sum_r w_r S_(b, r) and (k, p q) squares sum_r w_r^2 Q_(b, r), float64 (``weights``
    (R, p q), None: 1)."""
    a = _to_float(np.asarray(sums_int))
    pq = a.shape[1]
    S_ = a[:k * R].reshape(k, R, pq)
    Q_ = a[k * R:].reshape(k, R, pq)
    if weights is None:
        return S_.sum(axis=1), Q_.sum(axis=1)
    w = np.asarray(weights, dtype=np.float64).reshape(R, pq)
    return (S_ * w[None]).sum(axis=1), (Q_ * (w * w)[None]).sum(axis=1)


def release_block_sums(sums_int, n, design, p, q, rng, weights=None):
    """Laplace noise on the k block sums (L1 sensitivity 2 per pair, plus conversion
    slack), epsilon ``design.eps_sums``; for k = 1 then on the sum of squared products (L1
    sensitivity 1 per pair, epsilon ``design.eps_squares``).  ``sums_int`` (2 k R, p q)
    from :func:`partition_block_sums`; with R regions each region's sums are weighted by
    ``weights`` (R, p q) first (:func:`combine_regions`): PrivGCM's w_r = c / c_r >= 1 turns
    products scaled by the global residual scales into products scaled by the region's,
    each still in [-1, 1] (and each square in [0, 1]).  Returns (:class:`SumsRelease`, the
    sums' NoiseInfo, their sensitivity)."""
    from ._private import block_counts
    k = design.k
    R = design.n_regions
    sums, squares = combine_regions(sums_int, k, R, weights)
    counts = block_counts(n, k)
    rows = int(counts.max())
    sens = 2.0 * p * q + _conversion_slack(rows, k * p * q) + \
        _combination_slack(rows, k * p * q, R)
    released, info = laplace_mechanism(sums, sens, design.eps_sums, rng,
                                       value_bound=float(rows))
    if k > 1 or not design.sq_share:
        return SumsRelease(released, info.scale), info, sens
    sens_q = 1.0 * p * q + _conversion_slack(rows, p * q) + _combination_slack(rows, p * q, R)
    sq, info_q = laplace_mechanism(squares[0], sens_q, design.eps_squares, rng,
                                   value_bound=float(rows))
    return (SumsRelease(released, info.scale, sq, info_q.scale, sens_q, design.eps_squares,
                        info_q.mechanism, info_q.hardened), info, sens)


# --------------------------------------------------------------------------- the test

@dataclass(frozen=True)
class SplineTest:
    statistic: float
    pvalue: float
    name: str
    allowance_share: float       # largest B^2 / (k var + V + B^2) over the pairs
    certified: bool
    # the reported pair's variance parts, in units of the products (post-processing of
    # released values): sampling (the block spread, or Q + SQ_UCB b_Q), noise (the sums' own
    # Laplace noise: 2 b^2 for k = 1, included in the block spread for k >= 2), shift (V),
    # allowance (B^2); and the residual scales 1 / c of the x and y columns
    variance_parts: dict = field(default_factory=dict)
    residual_scales: tuple = ()


@lru_cache(maxsize=64)
def _canonical(d, intervals, interactions):
    """Rich-basis coefficients (p_rich, c) of the canonical coarse directions (public).

    The nested coarse cubic splines with 4 intervals per column (every function carries a
    large share of the data, so its coefficient is resolvable) and the interaction blocks'
    features, columns scaled to unit norm.
    """
    from scipy.linalg import block_diag
    g = np.linspace(-SPLINE_RANGE, SPLINE_RANGE, 4001)
    Bf = _bspline_values(g, 2 * intervals)
    Bc = _bspline_values(g, 4)
    A1 = np.linalg.lstsq(Bf, Bc, rcond=None)[0]
    A1[np.abs(A1) < 1e-12] = 0.0
    blocks = [A1 if j == 0 else A1[1:, 1:] for j in range(d)]
    if interactions:
        blocks += [np.eye(2 ** d), np.eye(2 ** d)]
    C = block_diag(*blocks)
    C = C / np.linalg.norm(C, axis=0)
    C.setflags(write=False)
    return C


def _floored_inverse(M, floor):
    w, V = np.linalg.eigh(M)
    return (V / np.maximum(w, floor)) @ V.T


def _noise_cov(rel, beta_col):
    """Delta-method covariance of (b-noise - G-noise beta) for one column (p_rich square):
    2 cross_scale^2 I + s (diag(M beta^2) + M o beta beta^T), s = 2 gram_scale^2 and M the
    release's noise map (every entry noisy: alpha I + s beta beta^T with
    alpha = 2 cross_scale^2 + s |beta|^2)."""
    pr = rel.gram.shape[0]
    nm = getattr(rel, "noise_map", None)
    if nm is None:
        alpha, s = _noise_cov_parts(rel, beta_col[:, None])
        return float(alpha[0]) * np.eye(pr) + s * np.outer(beta_col, beta_col)
    s = 2.0 * rel.gram_scale ** 2
    return (np.diag(2.0 * rel.cross_scale ** 2 + s * (nm @ (beta_col * beta_col)))
            + s * nm * np.outer(beta_col, beta_col))


def _noise_cov_parts(rel, beta):
    """(alpha (cols,), s) of :func:`_noise_cov` for every column of ``beta`` (p_rich, cols)."""
    sb2 = 2.0 * rel.cross_scale ** 2
    sg2 = 2.0 * rel.gram_scale ** 2
    return sb2 + sg2 * np.sum(beta * beta, axis=0), sg2


def _pair_traces(Gp, Lx, Ly, bx, by, rel_x, rel_y):
    """tr(Gp Lx C_a Lx^T Gp Ly C_b Ly^T) for every pair (a, b), C_a = :func:`_noise_cov`
    of ``rel_x`` at ``bx[:, a]``, C_b of ``rel_y`` at ``by[:, b]``: (p_cols, q_cols).

    With C = alpha I + s beta beta^T and A = Ly^T Gp Lx (Gp symmetric) the trace is
    alpha_a alpha_b |A|_F^2 + alpha_a s_y |A^T beta_b|^2 + s_x alpha_b |A beta_a|^2
    + s_x s_y (beta_b^T A beta_a)^2: two products of p_rich-square matrices for all pairs,
    where the trace itself takes four per column (the same value up to rounding).
    """
    if getattr(rel_x, "noise_map", None) is not None or \
            getattr(rel_y, "noise_map", None) is not None:
        # a general noise map: the covariance matrices formed, the trace tr(A C_a A^T C_b)
        A = Ly.T @ (Gp @ Lx)
        cxs = [_noise_cov(rel_x, bx[:, a]) for a in range(bx.shape[1])]
        cys = [_noise_cov(rel_y, by[:, b]) for b in range(by.shape[1])]
        out = np.empty((bx.shape[1], by.shape[1]))
        for a, ca in enumerate(cxs):
            M = A @ ca @ A.T
            for b, cb in enumerate(cys):
                out[a, b] = float(np.sum(M * cb))
        return out
    ax, sx = _noise_cov_parts(rel_x, bx)
    ay, sy = _noise_cov_parts(rel_y, by)
    A = Ly.T @ (Gp @ Lx)
    Ab = A @ bx                      # (p_rich, p): A beta_a
    Atb = A.T @ by                   # (p_rich, q): A^T beta_b
    quad = (by.T @ Ab).T             # (p, q): beta_b^T A beta_a
    return (np.outer(ax, ay) * float(np.sum(A * A))
            + np.outer(ax, sy * np.sum(Atb * Atb, axis=0))
            + np.outer(sx * np.sum(Ab * Ab, axis=0), ay)
            + (sx * sy) * quad ** 2)


def _test_operator(rel, design):
    """The test fit as a linear map b -> coefficients (rich coordinates): the nested basis
    (A), ridge lambda towards a linear function per column, eigenvalues floored at lambda.

    Computed once per released fit and design (:func:`fit_coefficients` and
    :func:`spline_test` both need it): the operator is kept on the release object, keyed by
    the design's basis and the identity of the released Gram matrix, and returned
    read-only (the same array, so the same values bit for bit)."""
    key = ("test_operator", id(rel.gram), design.d, design.intervals, design.interactions)
    cache = rel.__dict__.setdefault("_operators", {})
    op = cache.get(key)
    if op is None:
        op = _test_operator_uncached(rel, design)
        op.setflags(write=False)
        cache[key] = op
    return op


def _test_operator_uncached(rel, design):
    lam = _lam(design, rel)
    A = _insertion(design.d, design.intervals, design.interactions)
    P = _penalty(design.d, design.intervals, design.interactions)
    return A @ _floored_inverse(A.T @ rel.gram @ A + lam * P, lam) @ A.T


def _fit_operators(rel, design):
    """Linear maps b -> coefficients (rich coordinates) of the test and the rich fit."""
    return _test_operator(rel, design), _floored_inverse(rel.gram, RICH_FLOOR * _lam(design,
                                                                                      rel))


def _weighted_gram(rel_x, rel_y, weights):
    """The quadratic forms' Gram matrix: sum_r w_r (G_A,r + G_B,r) over the regions (the
    released Gram matrices without regions; ``weights`` (R,) None: 1), its eigenvalues
    lowered by GP_SHRINK times the noise edges of the two weighted halves (each the
    Laplace scale times sqrt of the largest row sum of w_r^2 times the regions' noise
    maps), floored at 0."""
    edges = 0.0
    if weights is None or rel_x.gram_regions is None:
        w_all = 1.0 if weights is None else float(np.asarray(weights).reshape(-1)[0])
        gfull = w_all * (rel_x.gram + rel_y.gram)
        for rel in (rel_x, rel_y):
            edges += w_all * rel.gram_scale * math.sqrt(_noise_rows(rel))
    else:
        w = np.asarray(weights, dtype=np.float64).reshape(-1)
        gfull = np.tensordot(w, rel_x.gram_regions + rel_y.gram_regions, axes=1)
        for rel in (rel_x, rel_y):
            nm = np.tensordot(w * w, rel.region_maps, axes=1)
            edges += rel.gram_scale * math.sqrt(float(np.max(np.sum(nm, axis=1))))
    ev, Vv = np.linalg.eigh(gfull)
    return (Vv * np.maximum(ev - GP_SHRINK * edges, 0.0)) @ Vv.T


def _shift_and_allowance(rel_x, rel_y, design, weights=None):
    """Second moment V of the fits' common shift e_x^T G e_y and the allowance B^2, per pair.

    Post-processing of released values and public noise scales.  V: delta-method
    tr(G C_x G C_y).  B: |(rich_x - test_x)^T G (rich_y - test_y)|, the nested fits'
    estimate of the covariance of the test fits' errors, with its own noise second moment
    removed, plus the same for the coarse canonical directions, plus ``UCB_Z`` noise
    standard deviations.  G is the regions' Gram matrices weighted by ``weights`` (R,) (the
    products' weights w_r = s_r,x s_r,y; None: 1, one region: a single weight), so that
    the terms are in the products' own units (:func:`_weighted_gram`).  Returns (V, B^2,
    estimate^2), arrays of shape (p_cols, q_cols).
    """
    Gp = _weighted_gram(rel_x, rel_y, weights)
    Hx, Rx = _fit_operators(rel_x, design)
    Hy, Ry = _fit_operators(rel_y, design)
    bx, by = Hx @ rel_x.cross, Hy @ rel_y.cross
    Dx, Dy = Rx @ rel_x.cross - bx, Ry @ rel_y.cross - by
    shift2 = _pair_traces(Gp, Hx, Hy, bx, by, rel_x, rel_y)
    est, nvar = _debiased(Dx, Dy, Rx - Hx, Ry - Hy, bx, by, rel_x, rel_y, Gp)
    if CANONICAL:
        Cx_, Cy_ = _canonical_operator(rel_x, design, Gp, Hx), _canonical_operator(rel_y, design,
                                                                                 Gp, Hy)
        est2, nvar2 = _debiased(Cx_ @ rel_x.cross, Cy_ @ rel_y.cross, Cx_, Cy_, bx, by, rel_x,
                                rel_y, Gp)
        est, nvar = est + est2, nvar + nvar2
    allow = est + UCB_Z * np.sqrt(nvar)
    return shift2, allow ** 2, est ** 2


def _canonical_operator(rel, design, Gp, H_test):
    """b -> (unshrunk fit on the canonical directions) - (test fit projected on their span).

    (The products keep their order: the projection's near pseudo-inverse, floored at
    1e-12 of its trace, can be ill-conditioned, and regrouping them moved fail-safe
    designs' statistics by up to 1e-6 relative.)"""
    C = _canonical(design.d, design.intervals, design.interactions)
    M = C.T @ rel.gram @ C
    floor = 2.0 * math.sqrt(2.0 * C.shape[1]) * rel.gram_scale   # the noise's spectral edge
    H_c = C @ _floored_inverse(M, floor) @ C.T
    Pi = C @ _floored_inverse(C.T @ Gp @ C, 1e-12 * float(np.trace(C.T @ Gp @ C)) + 1e-300) \
        @ C.T @ Gp
    return H_c - Pi @ H_test


def _debiased(Dx, Dy, Kx, Ky, bx, by, rel_x, rel_y, Gp):
    """|Dx^T Gp Dy| with its noise second moment removed, and that second moment (per pair:
    tr(Gp Kx C_a Kx^T Gp Ky C_b Ky^T), :func:`_pair_traces`)."""
    raw2 = (Dx.T @ Gp @ Dy) ** 2
    noise = _pair_traces(Gp, Kx, Ky, bx, by, rel_x, rel_y)
    return np.sqrt(np.maximum(raw2 - noise, 0.0)), noise


def spline_test(released, rel_x, rel_y, design, mode, residual_scale=None):
    """Statistic, p-value and fit check from released values only (post-processing).

    ``released``: a :class:`SumsRelease` (or the (k, p q) noisy block sums).  Per pair, k
    >= 2: t = S / sqrt(k var(sums) + V + B^2) on k - 1 degrees of freedom.  k = 1: S is one
    noisy sum, its sampling variance is bounded by Q + ``SQ_UCB`` b_Q (Q the noisy sum of
    squared products, b_Q its public noise scale), and the p-value is that of S under
    N(0, Q + SQ_UCB b_Q + V + B^2) plus the sum's own Laplace noise, exactly (the
    convolution, :func:`privci._stats.normal_laplace_pvalue`); the statistic reported is
    S / sqrt(that variance + 2 b_S^2).  Several pairs: the largest |statistic| (or
    statistic) with a Bonferroni p-value.
    """
    from ._private import _t_sf
    from ._stats import normal_laplace_pvalue
    if not isinstance(released, SumsRelease):
        released = SumsRelease(np.asarray(released))
    squares, b_s, b_q = released.squares, released.sums_scale, released.squares_scale
    released = released.sums
    # the fits' terms are second moments of sums of w_r (u - pred_x)(v - pred_y) with the
    # products' weights w_r = s_r,x s_r,y of each region (the residual scales): G weighted
    px = rel_x.cross.shape[1]
    py = rel_y.cross.shape[1]
    if residual_scale is None:
        rs = np.ones((design.n_regions, px + py))
    else:
        rs = np.asarray(residual_scale, dtype=np.float64)
        rs = rs.reshape(-1, px + py)
    shift2 = np.empty(px * py)
    allow2 = np.empty(px * py)
    est2 = np.empty(px * py)
    cache = {}
    for b_ in range(py):
        for a_ in range(px):
            w = rs[:, a_] * rs[:, px + b_]
            key = w.tobytes()
            if key not in cache:
                cache[key] = _shift_and_allowance(rel_x, rel_y, design, w)
            sh, al, es = cache[key]
            j_ = a_ + px * b_                # x index fastest, as the products
            shift2[j_], allow2[j_], est2[j_] = sh[a_, b_], al[a_, b_], es[a_, b_]
    k, c = released.shape
    S = released.sum(axis=0)
    sq = squares is not None
    if sq:
        qhat = np.maximum(np.asarray(squares, dtype=np.float64), 0.0) + SQ_UCB * b_q
        samp_var = qhat
        block_var = qhat + 2.0 * b_s * b_s         # sampling and the sum's own noise
    else:
        block_var = k * np.var(released, axis=0, ddof=1)
        samp_var = block_var
    var = block_var + np.maximum(shift2, 0.0) + allow2
    share = float(np.max(np.where(var > 0, allow2 / np.where(var > 0, var, 1.0), 0.0)))
    # certified: the nested fits' (debiased) estimate of the bias is small against the
    # statistic's sd; the allowance's noise part is there in any case
    noise_var = block_var + np.maximum(shift2, 0.0)
    evidence = float(np.max(np.where(noise_var > 0, est2 / np.where(noise_var > 0, noise_var,
                                                                     1.0), 0.0)))
    certified = evidence <= CERTIFY_SHARE
    stats_ = np.where(var > 0, S / np.sqrt(np.where(var > 0, var, 1.0)), np.nan)
    if not np.all(np.isfinite(stats_)):
        return SplineTest(math.nan, math.nan, "z" if sq else "t", share, certified, {}, ())
    if sq:
        # the variance without the sum's own Laplace noise, which the convolution adds
        nvar = samp_var + np.maximum(shift2, 0.0) + allow2
        ps = [normal_laplace_pvalue(float(S[j]), math.sqrt(float(nvar[j])), b_s, mode)
              for j in range(c)]
        j = (int(np.argmax(np.abs(stats_))) if mode == 0 else
             int(np.argmax(stats_)) if mode == 1 else int(np.argmin(stats_)))
    elif mode == 0:
        ps = [min(1.0, 2.0 * _t_sf(abs(t), k - 1)) for t in stats_]
        j = int(np.argmax(np.abs(stats_)))
    elif mode == 1:
        ps = [_t_sf(t, k - 1) for t in stats_]
        j = int(np.argmax(stats_))
    else:
        ps = [_t_sf(-t, k - 1) for t in stats_]
        j = int(np.argmin(stats_))
    pval = min(1.0, c * min(ps))
    if not certified:
        # fail-safe: the nested fits disagree, so the released statistics themselves say
        # that the test fit misses part of E[X | Z] or E[Y | Z]; what the rich fit misses
        # as well is not in the allowance, so no rejection is trusted
        pval = 1.0
    if not design.certified:
        # fail-safe: the public rule says the released fit cannot resolve the central
        # directions at this (n, d, epsilon); its bias could masquerade as dependence
        pval = 1.0
        certified = False
    name = "z" if sq else "t"
    parts = {"sampling": float(samp_var[j]), "noise": 2.0 * b_s * b_s if sq else 0.0,
             "shift": float(max(shift2[j], 0.0)), "allowance": float(allow2[j]),
             "estimate": float(est2[j])}
    rs_t = tuple(float(v) for v in np.min(rs, axis=0))
    return SplineTest(float(stats_[j]), float(pval), name if c == 1 else
                      f"max {name} (Bonferroni)", share, certified, parts, rs_t)



def fit_check(test, design):
    """The result's fit check (public numbers and post-processed released values)."""
    return {"certified": bool(test.certified), "resolvable": bool(design.certified),
            "columns": int(design.d), "assume_additive": bool(design.assume_additive),
            "allowance_share": float(test.allowance_share), "intervals": design.intervals,
            "rich_intervals": design.rich_intervals, "interactions": design.interactions,
            "fit_share": design.eps_fit / (design.eps_fit + design.eps_test),
            "n_blocks": int(design.k), "squares_share": float(design.sq_share),
            "variance_parts": dict(test.variance_parts),
            "residual_scales": tuple(test.residual_scales)}


def mechanism_text(design, p, q, rel_x, rel_y, noise_mechanism, sums_sensitivity, sums=None):
    """The privacy record's mechanism string of the spline path (in memory and on Dask)."""
    inter = (", with multilinear interaction blocks on [-3, 3]^d and, in the rich fit, "
             "[-2, 2]^d" if design.interactions else "")
    fit = (f"released nested cubic-spline regression (normal-quantile and uniform knots, "
           f"resolution {design.rich_intervals} per column of z, {design.n_features()} "
           f"features for {design.d} "
           f"column(s){inter}; rows split into two halves by a data-independent partition, "
           f"x fitted on one and y on the other; {rel_x.mechanism} on the Gram matrices "
           f"(L1 sensitivity {rel_x.gram_sensitivity:g}, epsilon {rel_x.gram_epsilon:g}) and "
           f"{rel_x.cross_mechanism} on the cross-products (L1 sensitivity "
           f"{rel_x.cross_sensitivity:g} for x, {rel_y.cross_sensitivity:g} for y, epsilon "
           f"{rel_x.cross_epsilon:g}); "
           f"epsilon {design.eps_fit:g} in all by parallel composition over the halves)")
    if isinstance(sums, SumsRelease) and sums.squares is not None:
        return (f"{fit}; {noise_mechanism} on the sum of the residual products (each in "
                f"[-1, 1]; L1 sensitivity {sums_sensitivity:g}, epsilon {design.eps_sums:g}) "
                f"and {sums.squares_mechanism} on the sum of their squares (each in [0, 1]; "
                f"L1 sensitivity {sums.squares_sensitivity:g}, epsilon "
                f"{sums.squares_epsilon:g})")
    return (f"{fit}; {noise_mechanism} on {design.k} block sums of the residual products "
            f"(each in [-1, 1]; L1 sensitivity {sums_sensitivity:g}, epsilon "
            f"{design.eps_test:g})")


def additive_caveat(design):
    """The caveat on what the released regression represents (in memory and on Dask)."""
    if design.assume_additive and design.d > 1:
        return ("assume_additive=True: the user assumed E[X | Z] and E[Y | Z] additive in the "
                "columns of z; no interaction between columns was fitted or checked, so the "
                "level rests on that assumption (cubic splines on (z - z_center) / z_scale; "
                "rows beyond [-4, 4] in any column left out; a nested rich fit's estimated bias is in the variance).")
    return ADDITIVE_CAVEAT


ADDITIVE_CAVEAT = ("the released regression: cubic splines on (z - z_center) / z_scale "
                   "(z must be on a unit scale; rows beyond [-4, 4] in any column are "
                   "left out of the fit and the test), additive in the columns "
                   "of z with multilinear interactions for 2 to 4 columns; the public rule "
                   "checks that every central direction is resolved and certifies no fit "
                   "on two or more columns unless assume_additive=True (else p = 1), and a "
                   "nested rich fit's estimated bias is in the "
                   "variance; what neither fit represents (structure finer than the rich "
                   "basis) is not covered, and the level was measured on the designs in the "
                   "documentation, not proved.")


def spline_releases(rel_x, rel_y, design, info, sums_sensitivity, sums=None):
    """The privacy record's releases of the spline path (in memory and on Dask).

    The x fit reads half A of the rows and the y fit half B (parallel composition:
    epsilon_fit once); the block sums read all rows.
    """
    from .results import Release
    out = []
    for what, rel, half in (("x", rel_x, "half A"), ("y", rel_y, "half B")):
        out.append(Release(f"fit of {what}: Gram matrix", rel.gram_epsilon,
                           rel.gram_sensitivity, rel.gram_scale, rel.mechanism, half))
        out.append(Release(f"fit of {what}: cross-products", rel.cross_epsilon,
                           rel.cross_sensitivity, rel.cross_scale, rel.cross_mechanism, half))
    if isinstance(sums, SumsRelease) and sums.squares is not None:
        out.append(Release("sum of residual products", design.eps_sums, sums_sensitivity,
                           info.scale, info.mechanism))
        out.append(Release("sum of squared residual products", sums.squares_epsilon,
                           sums.squares_sensitivity, sums.squares_scale,
                           sums.squares_mechanism))
        return tuple(out)
    out.append(Release(f"{design.k} block sums", design.eps_test, sums_sensitivity, info.scale,
                       info.mechanism))
    return tuple(out)
