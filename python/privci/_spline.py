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
K_CHOICES = (5, 10, 20)   # the rule's choices for the number of block sums
CERTIFY_SHARE = 0.5       # estimated bias^2 / (block + shift variance) above which: flagged
INTERVAL_CHOICES = (4, 8, 16, 32, 64)  # test-basis intervals per column (rich: twice)
FIT_SHARES = (0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8)
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
    return gram_sensitivity(des.n_blocks) / (gram_share * eps_fit) * math.sqrt(des.n_features())


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
    lam = sg * math.sqrt(pr)
    A = _insertion(d, intervals, interactions)
    P = _penalty(d, intervals, interactions)
    H = A @ _floored_inverse(A.T @ Gr @ A + lam * P, lam) @ A.T   # b -> test fit (rich coords)
    R = _floored_inverse(Gr, RICH_FLOOR * lam)                     # b -> rich fit
    K = R - H                                                       # b -> nested difference
    G2 = 2.0 * Gr                                                   # both halves' Gram
    # noise of b - G beta per coordinate (delta method): 2 sb^2 + 2 sg^2 |beta|^2, with the
    # reference |beta|^2 = BETA_REF^2 per coefficient (B-spline coefficients ~ values)
    beta2 = BETA_REF ** 2 * pr
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
                          tuple(INTERVAL_CHOICES), float(CERT_RHO))


@lru_cache(maxsize=256)
def _choose_design(n, d, p, q, epsilon, k, assume_additive, fit_shares, gram_shares,
                   interval_choices, cert_rho):
    # the choice sets and cert_rho are arguments so that the cache follows studies that
    # change the module's constants (_resolvable reads CERT_RHO itself)
    interactions = (not assume_additive) and 2 <= d <= MAX_INTERACTION_D
    products = not assume_additive
    ref = min(REFERENCE_INTERVALS, interval_choices[-1])
    levels = {}
    for f in fit_shares:
        for g in gram_shares:
            level = -1
            for i, cand in enumerate(interval_choices):
                if not _resolvable(n, d, f * epsilon, g, cand, interactions, products):
                    break
                level = i
            levels[f, g] = level
    top = max(levels.values())
    ks = (k,) if k is not None else tuple(c for c in K_CHOICES if c <= n) or (max(2, n),)
    samp = n * BETA_REF ** 4          # reference sampling variance of S (residual sd BETA_REF)
    best = None                   # (-(t quantile x predicted sd), f, g, k, noise)
    for (f, g), level in levels.items():
        if level < top:
            continue
        tv1, fv = _predicted(n, d, p, q, epsilon, ref, interactions, f, 1, g)
        for kk in ks:
            tv = kk * tv1
            key = -float(_t_quantile(kk - 1)) * math.sqrt(samp + tv + fv)
            if best is None or key > best[0]:
                best = (key, f, g, kk, (tv, fv))
    _, f, g, k, (tv, fv) = best
    level = top
    intervals = interval_choices[max(level, 0)]
    eps_fit = f * epsilon
    eps_test = _rest(epsilon, eps_fit)
    return Design(d=d, intervals=intervals, interactions=interactions, eps_fit=eps_fit,
                  eps_test=eps_test, k=k, certified=level >= 0, assume_additive=assume_additive,
                  gram_share=g, predicted={"fit_share": f, "gram_share": g,
                                           "test_noise_var": tv, "fit_noise_var": fv})


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
    Returns int64 arrays (units 2^-32): G_A (upper triangle), b_A (p_rich, p) over half A
    with the x columns, and G_B, b_B over half B with the y columns.  Memory
    O(CHUNK * p_rich).
    """
    pr = design.n_features()
    iu = np.triu_indices(pr)
    q = U.shape[1] - p
    m = t.shape[0]
    kp = None if keep is None else np.asarray(keep, dtype=bool)
    if _fast(design, m):
        group = np.where(np.asarray(half, dtype=bool), 0, 1).astype(np.int64)
        if kp is not None:
            group[~kp] = 2
        return _stats_rows(t, U[:, :p], U[:, p:], 0.0, 1.0, 0.0, 1.0, group, design,
                           left_out=kp is not None)
    acc = [np.zeros(iu[0].size, np.int64), np.zeros((pr, p), np.int64),
           np.zeros(iu[0].size, np.int64), np.zeros((pr, q), np.int64)]
    step = min(CHUNK, _EXACT_ROWS)
    for a in range(0, m, step):
        sl = slice(a, min(a + step, m))
        phi = design.features(t[sl])
        u = _quantise_u(U[sl])
        h = np.asarray(half[sl], dtype=bool)
        k_ = np.ones_like(h) if kp is None else kp[sl]
        for g, (rows, cols) in enumerate(((h & k_, slice(0, p)), (~h & k_, slice(p, p + q)))):
            ph = phi[rows]
            acc[2 * g] += _exact_sum([(ph.T @ ph)[iu]])
            acc[2 * g + 1] += _exact_sum([ph.T @ u[rows, cols]])
    return tuple(acc)


def _stats_rows(t, x, y, xc, xb, yc, yb, group, design, left_out=False):
    """:func:`partition_stats` of an additive design from the raw x, y columns, in one
    fused pass (:func:`privci._basis_kernels.accumulate`): u = clip((x - xc) / xb, -1, 1),
    the values of the scaled U of :meth:`privci._transform._GCMInputs.scaled` exactly, then
    quantised as :func:`_quantise_u`.  ``group`` (m,) int64: 0 for half A, 1 for half B;
    with ``left_out``, 2 for rows left out, and the kernels send every row whose t lies
    beyond the clip box there as well (a third group, discarded)."""
    from ._basis_kernels import accumulate
    spec, keep = _kernel_spec(design.d, design.rich_intervals)
    p = x.shape[1]
    q = y.shape[1]
    ucols = ((0, p), (p, p + q)) + (((0, 0),) if left_out else ())
    G, B = accumulate(t, x, y, 0.0, 1.0, xc, xb, yc, yb, spec, group=group,
                      n_groups=len(ucols), check_labels=False, u_columns=ucols,
                      outside_group=2 if left_out else None)
    pr = design.n_features()
    iu = np.triu_indices(pr)
    ix = np.ix_(keep, keep)
    return (G[0][ix][iu], B[0][keep][:, :p], G[1][ix][iu], B[1][keep][:, p:])


def _sums_rows(t, x, y, xc, xb, yc, yb, labels, design, coef_x, coef_y, k, left_out=False,
               residual_scale=None):
    """:func:`partition_block_sums` of an additive design from the raw x, y columns (as
    :func:`_stats_rows`); ``labels`` (m,) int64 in [0, k); with ``left_out``, k for rows
    left out, and the kernels send every row beyond the clip box there as well (an extra
    block, discarded)."""
    from ._basis_kernels import residual_block_sums
    spec, keep = _kernel_spec(design.d, design.rich_intervals)
    full_x = np.zeros((spec.n_features, x.shape[1]))
    full_y = np.zeros((spec.n_features, y.shape[1]))
    full_x[keep] = coef_x
    full_y[keep] = coef_y
    sums = residual_block_sums(t, x, y, 0.0, 1.0, xc, xb, yc, yb, spec, full_x, full_y,
                               labels, k + 1 if left_out else k, check_labels=False,
                               outside_block=k if left_out else None,
                               residual_scale=residual_scale)
    return sums[:k] if left_out else sums


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


def _release_one(g_int, b_int, rows, design, rng):
    pr = design.n_features()
    s = design.n_blocks
    iu = np.triu_indices(pr)
    cols = b_int.shape[1]
    m = max(int(rows), 1)
    eps_g, eps_b = design.eps_gram, design.eps_cross
    sens_g = gram_sensitivity(s) + _conversion_slack(m, iu[0].size)
    sens_b = cross_sensitivity(s, cols) + _conversion_slack(m, pr * cols)
    Gn, info_g = laplace_mechanism(_to_float(g_int), sens_g, eps_g, rng, value_bound=float(m))
    bn, info_b = laplace_mechanism(_to_float(b_int), sens_b, eps_b, rng, value_bound=float(m))
    gram = np.zeros((pr, pr))
    gram[iu] = Gn
    gram = gram + np.triu(gram, 1).T
    return FitRelease(gram=gram, cross=bn, gram_scale=info_g.scale, cross_scale=info_b.scale,
                      gram_sensitivity=sens_g, cross_sensitivity=sens_b, gram_epsilon=eps_g,
                      cross_epsilon=eps_b, hardened=info_g.hardened and info_b.hardened,
                      mechanism=info_g.mechanism, rows=m, cross_mechanism=info_b.mechanism)


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


def _lam(design, rel):
    return rel.gram_scale * math.sqrt(design.n_features())


def fit_coefficients(rel, design):
    """Coefficients (in rich-basis coordinates) of the test fit (post-processing)."""
    return _test_operator(rel, design) @ rel.cross


def residual_scales(coef, design):
    """Public residual scales s = 1 / c per column of ``coef`` (p_rich, cols): c =
    max(1 + p_max, 1 - p_min) in [1, 2], where [p_min, p_max] holds every prediction
    clip(phi^T coef, -1, 1) of the basis (post-processing of the released fit).

    An additive block's features are >= 0 and sum to at most 1, so its part of phi^T coef
    lies in [min(0, min of its coefficients), max(0, max of its coefficients)]; the
    bounds add over the blocks.  So u - prediction, u in [-1, 1], lies in [-c, c] and
    (u - prediction) / c in [-1, 1]: the residuals need no clip (which biased them where
    it bound).  Designs with interaction blocks, and non-finite coefficients, take c = 2.

    Examples
    --------
    >>> import numpy as np
    >>> from privci._spline import choose_design, residual_scales
    >>> des = choose_design(10_000, 1, 1, 1, 2.0)
    >>> p = des.n_features()
    >>> residual_scales(np.full((p, 1), 0.25), des)    # predictions in [0, 0.25]: c = 1.25
    array([0.8])
    """
    coef = np.asarray(coef, dtype=np.float64)
    cols = coef.shape[1]
    if design.interactions or not np.all(np.isfinite(coef)):
        return np.full(cols, 0.5)
    per = _n_per(design.rich_intervals)
    starts = [0] + [per + j * (per - 1) for j in range(design.d)]
    hi = np.zeros(cols)
    lo = np.zeros(cols)
    for a, b in zip(starts[:-1], starts[1:]):
        blk = coef[a:b]
        hi += np.maximum(blk.max(axis=0), 0.0)
        lo += np.minimum(blk.min(axis=0), 0.0)
    c = np.maximum(1.0 + np.minimum(hi, 1.0), 1.0 - np.maximum(lo, -1.0))
    return 1.0 / c


def partition_block_sums(t, U, labels, design, coef_x, coef_y, p, k, keep=None,
                         residual_scale=None):
    """Pass 2 over rows: exact block sums of the residual products (int64, 2^-32).

    Residuals clip((u - clip(prediction, -1, 1)) s, -1, 1) with ``residual_scale`` s (p +
    q,) (None: 1; PrivGCM passes :func:`residual_scales`, under which the clip never
    binds).  Column order: x index fastest (a + p * b).  Each product lies in [-1, 1].
    ``keep`` as in :func:`partition_stats`: a left-out row's product is not added.
    """
    q = U.shape[1] - p
    m = t.shape[0]
    rs = np.ones(U.shape[1]) if residual_scale is None else np.asarray(residual_scale, float)
    kp = None if keep is None else np.asarray(keep, dtype=bool)
    if _fast(design, m):
        lab = np.asarray(labels)
        if lab.shape != (m,) or lab.dtype.kind not in "iu" or (
                m and (lab.min() < 0 or lab.max() >= k)):
            raise ValueError(f"`labels` must be {m} integers in [0, {k})")
        lab = lab.astype(np.int64, copy=kp is not None)
        if kp is not None:
            lab[~kp] = k
        return _sums_rows(t, U[:, :p], U[:, p:], 0.0, 1.0, 0.0, 1.0, lab, design, coef_x,
                          coef_y, k, left_out=kp is not None, residual_scale=rs)
    out = np.zeros((k, p * q), np.int64)
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
        qp = np.trunc(np.clip(prod, -1.0, 1.0) * scale).astype(np.int64)
        if kp is not None:
            qp[~kp[sl]] = 0
        lab = np.asarray(labels[sl], dtype=np.int64)
        for c in range(p * q):
            # each |value| <= 2^32 and a chunk has <= 2^16 rows: float sums are exact
            out[:, c] += np.bincount(lab, weights=qp[:, c].astype(np.float64),
                                     minlength=k).astype(np.int64)
    return out


def release_block_sums(sums_int, n, design, p, q, rng):
    """Laplace noise on the k block sums (L1 sensitivity 2 per pair, plus conversion slack)."""
    from ._private import block_counts
    counts = block_counts(n, design.k)
    rows = int(counts.max())
    sens = 2.0 * p * q + _conversion_slack(rows, design.k * p * q)
    released, info = laplace_mechanism(_to_float(sums_int), sens, design.eps_test, rng,
                                       value_bound=float(rows))
    return released, info, sens


# --------------------------------------------------------------------------- the test

@dataclass(frozen=True)
class SplineTest:
    statistic: float
    pvalue: float
    name: str
    allowance_share: float       # largest B^2 / (k var + V + B^2) over the pairs
    certified: bool


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
    alpha I + s beta beta^T with s = 2 gram_scale^2, alpha = 2 cross_scale^2 + s |beta|^2."""
    pr = rel.gram.shape[0]
    alpha, s = _noise_cov_parts(rel, beta_col[:, None])
    return float(alpha[0]) * np.eye(pr) + s * np.outer(beta_col, beta_col)


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


def _shift_and_allowance(rel_x, rel_y, design):
    """Second moment V of the fits' common shift e_x^T G e_y and the allowance B^2, per pair.

    Post-processing of released values and public noise scales.  V: delta-method
    tr(G C_x G C_y).  B: |(rich_x - test_x)^T G (rich_y - test_y)|, the nested fits'
    estimate of the covariance of the test fits' errors, with its own noise second moment
    removed, plus the same for the coarse canonical directions, plus ``UCB_Z`` noise
    standard deviations.  Returns (V, B^2, estimate^2), arrays of shape (p_cols, q_cols).
    """
    gfull = rel_x.gram + rel_y.gram
    lamsum = _lam(design, rel_x) + _lam(design, rel_y)
    w, Vv = np.linalg.eigh(gfull)
    Gp = (Vv * np.maximum(w - GP_SHRINK * lamsum, 0.0)) @ Vv.T
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

    Per pair: t = S / sqrt(k var(sums) + V + B^2) on k - 1 degrees of freedom; several
    pairs: the largest |t| (or t) with a Bonferroni p-value.
    """
    from ._private import _t_sf
    shift2, allow2, est2 = _shift_and_allowance(rel_x, rel_y, design)
    # the fits' terms are second moments of sums of (u - pred_x)(v - pred_y); a product is
    # that times s_x s_y (the residual scales), its second moments times (s_x s_y)^2
    if residual_scale is None:
        unit = np.ones(shift2.shape)
    else:
        rs = np.asarray(residual_scale, dtype=np.float64)
        px = shift2.shape[0]
        unit = np.outer(rs[:px], rs[px:]) ** 2
    shift2 = (unit * shift2).T.ravel()   # x index fastest, as the products
    allow2 = (unit * allow2).T.ravel()
    est2 = (unit * est2).T.ravel()
    k, c = released.shape
    S = released.sum(axis=0)
    block_var = k * np.var(released, axis=0, ddof=1)
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
        return SplineTest(math.nan, math.nan, "t", share, certified)
    if mode == 0:
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
    return SplineTest(float(stats_[j]), float(pval), "t" if c == 1 else "max t (Bonferroni)",
                      share, certified)


def fit_check(test, design):
    """The result's fit check (public numbers and post-processed released values)."""
    return {"certified": bool(test.certified), "resolvable": bool(design.certified),
            "columns": int(design.d), "assume_additive": bool(design.assume_additive),
            "allowance_share": float(test.allowance_share), "intervals": design.intervals,
            "rich_intervals": design.rich_intervals, "interactions": design.interactions,
            "fit_share": design.eps_fit / (design.eps_fit + design.eps_test)}


def mechanism_text(design, p, q, rel_x, rel_y, noise_mechanism, sums_sensitivity):
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
    return (f"{fit}; {noise_mechanism} on {design.k} block sums of the residual products "
            f"clipped to [-1, 1] (L1 sensitivity {sums_sensitivity:g}, epsilon "
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


def spline_releases(rel_x, rel_y, design, info, sums_sensitivity):
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
    out.append(Release(f"{design.k} block sums", design.eps_test, sums_sensitivity, info.scale,
                       info.mechanism))
    return tuple(out)
