"""Release once, test many: one private release of a table's second moments, then any CI test.

:func:`release` reads the private table once and publishes, with one epsilon,
noisy Gram matrices of a per-row feature vector built from public bounds and
centres.  The returned :class:`ReleasedTable` keeps only the released values and
public parameters; :meth:`ReleasedTable.test` answers any question
"column i independent of column j given the columns S" by post-processing, so
any number of questions costs no further epsilon.

The mechanism (proof on the documentation page "Release once, test many")
---------------------------------------------------------------------------

1. **Features** (public).  Column v is centred and scaled, u_v = clip((x_v -
   c_v) / b_v, -1, 1), and expanded in the K + 1 *hat functions* (piecewise
   linear B-splines) on the uniform knots t_k = -1 + 2k / K of [-1, 1]; with the
   default ``knots="auto"`` K is chosen by the public rule ``release_knots`` from
   n, epsilon and V (``privci.causal.pc`` uses K = 6).  The hat
   values of one variable are non-negative and sum to 1; each is rounded
   *down* to the grid 2^-16, so they stay non-negative with sum at most 1.  The
   row's feature vector f (length V (K + 1) for V columns) therefore has
   ||f||_1 <= V and ||f||_2^2 <= V.  The clipped variable itself is in the
   span: u_v = sum_k t_k h_vk(u_v) (hat interpolation reproduces linear
   functions), so it needs no features of its own (which would double ||f||_1
   and quadruple the noise).
2. **Release.**  The rows are split by position into ``blocks`` disjoint,
   data-independent blocks.  For each block the upper triangle of
   G_b = sum_{rows in b} f f^T is summed exactly (integers in units of 2^-32)
   and released with Laplace noise of scale Delta / epsilon, where Delta =
   (max ||f||_1)^2 + (max ||f||_2^2) = V^2 + V.  Each block's release is
   epsilon-DP; a row lies in one block, so all blocks together are epsilon-DP
   (parallel composition) under the replacement of one row.
3. **Tests** (post-processing).  For (i, j | S) the responses are the clipped
   u_i and u_j (and, with ``responses="quadratic"`` and |S| <= 1, their
   squares: three pairs, Bonferroni; vectors in feature space), the regressors the hat features of
   the columns in S (a constant when S is empty).  From the pooled Gram
   matrix, u_i and u_j are each regressed on the additive hat basis of S with a
   second-difference penalty (no shrinkage of linear functions) and an
   eigenvalue floor at the noise level; T = sum_rows r_i r_j is the resulting
   bilinear form of the released Gram matrix.  The calibration is noise-aware:

   - ``blocks >= 2``: T_b, the same bilinear form of block b's Gram
     matrix, is computed per block; t = T / sqrt(k var_b(T_b)) on k - 1 degrees
     of freedom.  Each T_b carries its own block's sampling variation *and* its
     own Laplace noise, so the block spread sees both (heteroscedastic data
     included).
   - ``blocks == 1`` (default; the measured choice, see the docs page):
     z = T / sqrt(H T_ii T_jj / n + V_noise + B^2), where V_noise is a
     parametric bootstrap of T over the released noise scale (the fit
     recomputed every draw) and H >= 1 a heteroscedasticity factor from the
     released conditional variances of the responses given each column of S.

   In both modes two **fit checks** add a bias allowance to the variance: B, the
   difference to the same statistic from an unpenalised (floor-only) fit, and the
   **nested check** B_n, the difference to the statistic of a coarser fit in the
   test basis' span (every second knot, the clipping one knot further in; for a
   smooth conditional mean the test fit's bias is about a third of B_n), each
   squared minus its own bootstrap noise.  A query whose allowance is more than
   half the variance is flagged ``trusted=False``.  Queries whose released
   residual variances are not positive get p = 1 and the flag.  Before any of
   this, a **resolution fail-safe** (``assume_smooth=False``, the default) answers
   a query with conditioning columns only where each column's knot spacing is at
   most 0.4 of its released sd and its clipped share (rows beyond the ends the
   noise merged, weighted by distance) at most 0.10; otherwise p = 1.

Everything a test uses is released or public; the object never holds a row.
"""

from __future__ import annotations

import itertools
import math
import numbers
import warnings
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Tuple

import numpy as np

from . import _validation as V
from ._epsilon import remaining
from ._plan import ReleasePlan
from .mechanisms import laplace_mechanism

__all__ = ["release", "ReleasedTable", "ReleasedCovariance", "ReleasedTestResult",
           "release_sensitivity", "covariance_sensitivity", "linear_clip",
           "release_knots", "release_resolves", "hat_features"]

SCALE_BITS = 16
_ONE = 1 << SCALE_BITS
_SCALE_UNIT = 1.0 / float(1 << (2 * SCALE_BITS))   # one unit of the exact sums
_EXACT_ROWS = 1 << 21          # sums of products on the grid 2^-32 convert to float exactly
_CHUNK = 1 << 14
DEFAULT_KNOTS = 6              # PC's K intervals on [-1, 1]: K + 1 hat functions per column
RELEASE_KNOTS = "auto"         # privci.release's default: the public rule release_knots()
KNOT_CHOICES = (24, 32, 48, 64)     # the rule's choices of K (uniform intervals)
RULE_RANGE = 0.5               # the rule keeps the hats within u = +-0.5 (2 sd) resolved
NOISE_RATIO = 1.0              # the rule: reference noise variance <= this x sampling's
CHECK_BOOT = 50               # draws for the fit checks' noise (T's variance uses all)
BOOT_BATCH = 25                # bootstrap draws per batch (memory)
DEFAULT_BLOCKS = 1
N_BOOT = 200
CERTIFY_SHARE = 0.5
MIN_SNR = 10.0               # released mass of a hat group, in noise sds
# response functions of x_i and x_j (powers of the clipped, scaled column)
_RESPONSES = {"linear": (1,), "quadratic": (1, 2)}
QUADRATIC_MAX_S = 1          # the squared responses are used for |S| <= 1 only
# bounds="auto" / centers="auto": a share of epsilon releases private medians and the
# AUTO_QUANTILE quantile of |x - centre|; the bound is AUTO_WIDTH times that quantile
# (about 4 standard deviations for a normal column, the scale the release was measured on)
AUTO_SHARE = 0.1
AUTO_QUANTILE = 0.9
AUTO_WIDTH = 2.5
ADDITIVE_FAILSAFE = (
    "two or more conditioning columns: the release's regression is additive in them and "
    "cannot see a product of two of them, which can reject a true null every time; p = 1 "
    "(the fail-safe, not evidence of independence).  Pass assume_additive=True to state "
    "that E[x_i | S] and E[x_j | S] are additive in the columns of S.")
# the resolution fail-safe: a conditioning column's knot spacing must be at most
# MAX_SPACING of its released standard deviation, and its clipped share (rows beyond the
# noise-merged ends, weighted by distance in spacings up to 1) at most MAX_CLIPPED (a
# normal column cut at 1.5 sd: 0.097-0.105), unless assume_smooth=True
MAX_SPACING = 0.4
MAX_CLIPPED = 0.10
ADDITIVE_ASSUMPTION = (
    "assume_additive: E[x_i | S] and E[x_j | S] are additive in the clipped columns of S "
    "(a product of two conditioning columns can make the test reject a true null)")
SMOOTH_ASSUMPTION = (
    "assume_smooth: E[x_i | S] and E[x_j | S] vary on scales of at least three knot "
    "spacings (table.resolution); finer structure can make the test reject a true null")
CLIP_WARN = 0.05             # released share of rows at a clipping bound that earns a caveat
STATISTICS = ("additive", "linear")     # what privci.release publishes (the rungs)


def _group_noise_sd(g, scale):
    """Noise sd of the released mass 1_g^T G 1_g of a group of g hats (upper-triangle
    Laplace noise of ``scale``: g diagonal entries, g (g - 1) / 2 off-diagonal ones
    counted twice; Var(Laplace) = 2 scale^2)."""
    return scale * math.sqrt(2.0 * (g + 2 * g * (g - 1)))


def _check_knots(knots):
    """``knots``: "auto" (None: the rule ``release_knots``) or an integer in [1, 64]."""
    if _is_auto(knots):
        return None
    K = V.check_int(knots, "knots", 1)
    if K > 64:
        raise ValueError(f"`knots` must be 'auto' or an integer in [1, 64]; got {K} instead.")
    return K


def _is_auto(value):
    return isinstance(value, str) and value == "auto"


def _check_auto_share(value):
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or \
            not 0.0 < float(value) < 1.0:
        raise ValueError(f"`auto_share` must be a number in (0, 1); got {value!r} instead.")
    return float(value)


def release_sensitivity(n_vars):
    """L1 sensitivity of the released upper triangle: (max ||f||_1)^2 + max ||f||_2^2 = V^2 + V.

    Replacing one row f by g changes the upper triangle of sum f f^T by
    sum_{k <= l} |f_k f_l - g_k g_l| <= U(f) + U(g), with
    U(f) = sum_{k <= l} |f_k f_l| = (||f||_1^2 + ||f||_2^2) / 2.  With
    ||f||_1 <= V and ||f||_2^2 <= V this is at most V^2 + V, attained when f and g
    have disjoint supports with one hat equal to 1 in every block (all columns at
    +bound versus all at -bound).

    Examples
    --------
    >>> release_sensitivity(5)
    30.0
    """
    v = V.check_int(n_vars, "n_vars", 1)
    return float(v * v + v)


def _pooled_scale(nv, eps, k):
    """Laplace scale of the pooled Gram matrix: k blocks, each at sensitivity V^2 + V."""
    return math.sqrt(k) * release_sensitivity(nv) / eps


def release_knots(n, epsilon, n_vars, blocks=1):
    """The public rule for the release's resolution K (``knots="auto"``).

    Bias first, within a noise budget.  Starting from the coarsest choice, 24 (spacing
    1/3 sd at 4-sd bounds: within the largest spacing the resolution fail-safe of
    :meth:`ReleasedTable.test` accepts, 0.4 sd, with a margin for the noise of the
    released sd), K is refined through ``KNOT_CHOICES`` while both
    conditions hold on a *reference table* (the expected Gram matrix of independent
    normal columns at 4-sd bounds, the reference the bounds are chosen for, plus one
    public draw of the release's noise at this n, epsilon, V and blocks):

    1. **resolved**: the query-time grouping (:meth:`ReleasedTable.active_range`) keeps
       every hat within u = +-0.5 (2 standard deviations) on its own;
    2. **noise at most the sampling variance**: the bootstrap noise variance of the
       test statistic of (0, 1 | 2) is at most ``NOISE_RATIO`` = 1 times its sampling
       variance (privacy at most doubles the variance of the statistic).

    Finer knots cut the fit's bias (E[x | z] is resolved at spacing 8 / K sd) and raise
    the noise of the fit (its variance grows about as K^2); the rule stops where the
    noise would dominate.  The nested fit check of :meth:`ReleasedTable.test` measures
    what the coarser half of the chosen basis misses.  Only public numbers enter, so
    the choice costs no privacy; it is cached per (n, epsilon, V, blocks).

    Examples
    --------
    >>> release_knots(10_000, 1.0, 3), release_knots(10_000, 100.0, 3)
    (24, 64)
    """
    return _release_knots(V.check_int(n, "n", 1), V.positive_finite(epsilon, "epsilon"),
                          V.check_int(n_vars, "n_vars", 1), V.check_int(blocks, "blocks", 1))


def release_resolves(n, epsilon, n_vars, blocks=1):
    """Whether a release of this size is expected to answer conditional queries.

    Public numbers only, so it can be asked before anything is charged.  On the rule's
    reference table (normal columns at 4-sd bounds, one seeded draw of the release's
    noise at n, ``epsilon`` for the Gram matrices, ``n_vars`` columns and ``blocks``,
    with K = ``release_knots(...)``) it checks the resolution fail-safe's first
    condition: the clipped share of a conditioning column is at most 0.10
    (:meth:`ReleasedTable.clipped_share`).  False means that
    :meth:`ReleasedTable.test` will most likely return the fail-safe p = 1 for every
    query with a conditioning column (the release warns then).  With ``"auto"``
    bounds or centres pass the Gram matrices' share of epsilon, (1 - auto_share) x
    epsilon.  A prediction for normal-like columns at 4-sd bounds, not a promise: the
    released values decide.

    Examples
    --------
    >>> release_resolves(10_000, 1.0, 3), release_resolves(10_000, 5.0, 3)
    (False, True)
    >>> release_resolves(10_000, 5.0, 8), release_resolves(100_000, 5.0, 8)
    (False, True)
    """
    n = V.check_int(n, "n", 1)
    eps = V.positive_finite(epsilon, "epsilon")
    nv = V.check_int(n_vars, "n_vars", 1)
    k = V.check_int(blocks, "blocks", 1)
    K = _release_knots(n, eps, nv, k)
    return bool(_reference_check(n, _pooled_scale(nv, eps, k), K)[3] <= MAX_CLIPPED)


@lru_cache(maxsize=256)
def _release_knots(n, eps, nv, k):
    sc = _pooled_scale(nv, eps, k)
    best = KNOT_CHOICES[0]
    for K in KNOT_CHOICES[1:]:      # refine until a condition fails
        lo, hi, ratio, _ = _reference_check(n, sc, K)
        if lo > -RULE_RANGE or hi < RULE_RANGE or ratio > NOISE_RATIO:
            break
        best = K
    return best


def _reference_table(n, scale, K, seed, nv=3, epsilon=1.0):
    """A public planning table: the expected Gram matrix of ``nv`` independent standard
    normal columns at 4-sd bounds on K uniform intervals, plus one draw of Laplace noise of
    ``scale`` on its upper triangle (``seed``: a seed or a Generator; public and
    reproducible)."""
    K1 = K + 1
    m2, m1 = _hat_moments(K)
    pf = nv * K1
    E = np.outer(np.tile(m1, nv), np.tile(m1, nv))
    for v in range(nv):
        E[v * K1:(v + 1) * K1, v * K1:(v + 1) * K1] = m2
    gen = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    iu = np.triu_indices(pf)
    g = np.zeros((pf, pf))
    g[iu] = n * E[iu] + gen.laplace(0.0, scale, iu[0].size)
    g = g + np.triu(g, 1).T
    return ReleasedTable(grams=g[None], names=list(range(nv)), bounds=np.full(nv, 4.0),
                         centers=np.zeros(nv), knots=K, block_rows=[n],
                         epsilon=epsilon, sensitivity=release_sensitivity(nv),
                         noise_scale=scale, mechanism="planning draw", hardened=False,
                         charge_statement="planning draw (synthetic, public)",
                         boot_seed=int(gen.integers(2 ** 31)))


@lru_cache(maxsize=256)
def _reference_check(n, scale, K):
    """On the reference table (:func:`_reference_table`): the released range (lo, hi) of
    a conditioning column (``active_range``), the bootstrap noise variance / sampling
    variance of the linear statistic of (0, 1 | 2), and the column's clipped share."""
    tab = _reference_table(n, scale, K, seed=[20261126, K])
    lo, hi = tab.active_range(2)
    clipped = tab.clipped_share(2)
    parts = tab.test(0, 1, [2], responses="linear", assume_smooth=True).variance_parts
    if not parts:
        return lo, hi, math.inf, clipped
    noise = parts["noise_bootstrap"][0]
    samp = parts["base"][0] - noise
    return lo, hi, (noise / samp if samp > 0 else math.inf), clipped


def hat_features(u, knots=DEFAULT_KNOTS):
    """Hat-function features of scaled values ``u`` (m, V) in [-1, 1]: integers in units 2^-16.

    Returns an (m, V (knots + 1)) int64 array; per variable the entries are >= 0 and
    sum to at most 2^16 (each hat value rounded down).
    """
    u = np.clip(np.nan_to_num(np.asarray(u, dtype=np.float64), nan=0.0, posinf=1.0,
                              neginf=-1.0), -1.0, 1.0)
    if u.ndim == 1:
        u = u[:, None]
    m, nv = u.shape
    K = int(knots)
    # position in knot units; the hats at floor(pos) and floor(pos) + 1 carry 1 - w and w
    pos = (u + 1.0) * (K / 2.0)
    lo = np.clip(np.floor(pos).astype(np.int64), 0, K - 1)
    w = np.clip(pos - lo, 0.0, 1.0)
    out = np.zeros((m, nv * (K + 1)), np.int64)
    rows = np.arange(m)
    for v in range(nv):
        base = v * (K + 1)
        out[rows, base + lo[:, v]] += np.floor((1.0 - w[:, v]) * _ONE).astype(np.int64)
        out[rows, base + lo[:, v] + 1] += np.floor(w[:, v] * _ONE).astype(np.int64)
    return out


def _scaled(X, centers, bounds):
    # a far row overflows to +-inf before the clip: silently (a warning would tell
    # neighbouring tables apart)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        return np.clip((X - centers[None, :]) / bounds[None, :], -1.0, 1.0)


def _gram_int(F):
    """Exact upper triangle of F^T F for int64 features in units 2^-16 (units 2^-32)."""
    p = F.shape[1]
    iu = np.triu_indices(p)
    acc = np.zeros(iu[0].size, np.int64)
    for a in range(0, F.shape[0], _CHUNK):
        blk = F[a:a + _CHUNK]
        # float64 products of integers < 2^16 are exact, and a chunk's sums stay < 2^46
        acc += np.rint(blk.T.astype(np.float64) @ blk.astype(np.float64))[iu].astype(np.int64)
    return acc


def _conversion_slack(rows, entries):
    """L1 slack of converting exact sums (|entry| <= rows) to float64: 0 below 2^21 rows."""
    if rows < _EXACT_ROWS:
        return 0.0
    return float(entries) * 2.0 * 2.0 ** (math.floor(math.log2(rows)) + 1 - 52)


def _block_bounds(n, k):
    edges = np.linspace(0, n, k + 1).round().astype(np.int64)
    return edges


def _names_and_matrix(data):
    names = None
    cols = getattr(data, "columns", None)
    if cols is not None and getattr(data, "ndim", 2) == 2:
        names = list(cols)
    arr = V.as_data(data, "data", min_rows=2)
    if arr.ndim != 2 or arr.shape[1] < 2:
        raise ValueError(f"`data` must have at least 2 columns (variables); got shape "
                         f"{arr.shape} instead.")
    if names is None:
        names = list(range(arr.shape[1]))
    return arr, names


@dataclass(frozen=True)
class ReleasedTestResult:
    """One CI query answered from a :class:`ReleasedTable` (post-processing, no epsilon).

    Attributes
    ----------
    statistic : float
        t (``blocks >= 2``, on ``blocks - 1`` degrees of freedom) or z (``blocks == 1``)
        of the response pair with the smallest p-value.
    pvalue : float
        Two-sided, Bonferroni over the response pairs; 1.0 when the released
        statistics cannot support the query.
    statistic_name : str
    partial_covariance : float
        T / n for the linear pair (u_i, u_j), the released estimate of E[r_i r_j] on the
        scaled columns.
    allowance_share : float
        The fit checks: the share of the variance taken by the bias allowance (the
        penalised-versus-unpenalised difference B^2 plus the nested check's B_n^2).
    fit_ok : bool
        ``allowance_share <= 0.5``.
    trusted : bool
        False when the fit check fails or the released residual variances are not
        positive: the p-value is then conservative (inflated or 1) and should not be
        read as evidence of independence.
    query : tuple
        (i, j, S) as column names.
    caveats : tuple of str
    variance_parts : dict
        The parts of the variance of each statistic (sampling, noise bootstrap,
        allowance), one entry per response pair.
    component_pvalues : tuple of float
        The p-value of each response pair (one for ``responses="linear"`` or when S
        has two or more columns, three for ``"quadratic"``); ``pvalue`` is their
        Bonferroni combination.
    detectable_correlation : float
        The power read-out (post-processing of released values): the smallest, over
        the response pairs, partial correlation r at which this query would reject at
        level 0.05 (Bonferroni) with probability about 1/2, r = z * sd(T) /
        sqrt(T_ii T_jj).  ``pc``'s ``power_rule`` lets only queries with
        r <= power_rule remove an edge.
    assumptions : tuple of str
        The public assumptions the answer rests on (``assume_additive``,
        ``assume_smooth`` or ``assume_linear``, each with what it means); empty when
        none was needed.
    """

    statistic: float
    pvalue: float
    statistic_name: str
    partial_covariance: float
    allowance_share: float
    fit_ok: bool
    trusted: bool
    query: tuple
    caveats: Tuple[str, ...] = field(default=())
    variance_parts: dict = field(default_factory=dict)
    component_pvalues: Tuple[float, ...] = field(default=())
    detectable_correlation: float = math.nan
    assumptions: Tuple[str, ...] = field(default=())


class ReleasedTable:
    """The released sufficient statistics of one table; answers CI queries for free.

    Made by :func:`release`; holds only released values (the noisy Gram matrices of
    each row block) and public parameters (names, bounds, centres, knots, block
    sizes, noise scale).  See the module docstring for the statistic.
    """

    def __init__(self, *, grams, names, bounds, centers, knots, block_rows, epsilon,
                 sensitivity, noise_scale, mechanism, hardened, charge_statement,
                 boot_seed, auto_epsilon=0.0):
        self._grams = grams                      # (k, p_f, p_f) released, symmetric
        self.names = list(names)
        self.bounds = np.asarray(bounds, dtype=float)
        self.centers = np.asarray(centers, dtype=float)
        self.knots = int(knots)
        self.knot_values = np.linspace(-1.0, 1.0, self.knots + 1)      # public
        self.block_rows = tuple(int(r) for r in block_rows)
        self.n = int(sum(self.block_rows))
        self.epsilon = float(epsilon)
        self.sensitivity = float(sensitivity)
        self.noise_scale = float(noise_scale)
        self.mechanism = mechanism
        self.hardened = bool(hardened)
        self._boot_seed = boot_seed
        self.auto_epsilon = float(auto_epsilon)
        self.n_queries = 0
        # the defaults of test()'s assume_* arguments: False for privci.release, True for
        # the table privci.causal.pc returns (the assumptions its queries were answered on)
        self.assumptions = {"assume_additive": False, "assume_smooth": False}
        self._groups = [self._groups_for(v) for v in range(len(self.names))]
        self.privacy = {
            "epsilon": self.epsilon,
            "mechanism": mechanism,
            "sensitivity": self.sensitivity,
            "noise_scale": self.noise_scale,
            "blocks": len(self.block_rows),
            "auto_epsilon": self.auto_epsilon,
            "composition": (("private centres/bounds (epsilon "
                             f"{self.auto_epsilon:g}), then " if self.auto_epsilon else "")
                            + "one epsilon-DP release: the Laplace mechanism on the upper "
                            "triangle of each row block's Gram matrix (L1 sensitivity "
                            f"{self.sensitivity:g} = V^2 + V), disjoint blocks (parallel "
                            "composition), replacement of one row"),
            "queries": "post-processing of the release: every query costs epsilon 0",
            "charged": charge_statement,
            "hardened": self.hardened,
        }

    # --- public read-outs -------------------------------------------------------------

    @property
    def blocks(self):
        return len(self.block_rows)

    @property
    def gram(self):
        """The pooled released Gram matrix (sum over blocks): a copy."""
        return self._grams.sum(axis=0)

    @property
    def block_grams(self):
        """The released Gram matrix of each row block: a copy, shape (k, p_f, p_f)."""
        return self._grams.copy()

    @property
    def epsilon_spent_by_queries(self):
        return 0.0

    @property
    def resolution(self):
        """The knot spacing of each column in its own units, 2 bounds / K (public).

        The fit of E[x_i | S] is piecewise linear between knots: what varies on a
        shorter scale (an oscillation whose period is a few spacings or less) is seen
        neither by the fit nor by its checks, and looks like dependence.
        """
        return 2.0 * self.bounds / self.knots

    def __repr__(self):
        return (f"ReleasedTable({len(self.names)} columns, n={self.n}, blocks={self.blocks}, "
                f"epsilon={self.epsilon:g}, knots={self.knots}, "
                f"queries={self.n_queries} at epsilon 0)")

    def __reduce_ex__(self, protocol):   # released values only: safe to pickle
        return object.__reduce_ex__(self, protocol)

    # --- queries ----------------------------------------------------------------------

    def _index(self, v, what):
        is_int = isinstance(v, (int, np.integer)) and not isinstance(v, bool)
        if v in self.names and not (is_int and v not in self.names):
            return self.names.index(v)
        if is_int and 0 <= v < len(self.names):
            return int(v)
        raise ValueError(f"`{what}` must be a column name or index (0..{len(self.names) - 1}); "
                         f"got {v!r} instead.")

    def _key(self, i, j, S):
        a, b = self._index(i, "i"), self._index(j, "j")
        if S is None:
            S = ()
        elif isinstance(S, (str, numbers.Integral)) or not hasattr(S, "__iter__"):
            S = (S,)
        ss = tuple(sorted({self._index(s, "S") for s in S}))
        if a == b or a in ss or b in ss:
            raise ValueError("i and j must be different columns, neither in S; got "
                             f"i={i!r}, j={j!r}, S={tuple(S)!r} instead.")
        return a, b, ss

    def _groups_for(self, v):
        """Hat groups of column v: the outer hats with too little released mass are merged
        into their inner neighbour (post-processing of the released diagonal block).

        Merging hats k..K into one is the hat basis of u clipped at knot t_k, so the
        test then uses clip(u_v, t_lo, t_hi): a public function of column v chosen from
        released values.  A group is kept alone when its released mass
        1_g^T G 1_g is at least ``MIN_SNR`` noise standard deviations of that mass.
        """
        K1 = self.knots + 1
        G = self.gram[v * K1:(v + 1) * K1, v * K1:(v + 1) * K1]
        sc = self.noise_scale * math.sqrt(self.blocks)

        def ok(idx):
            mass = float(G[np.ix_(idx, idx)].sum())
            return mass >= MIN_SNR * _group_noise_sd(len(idx), sc)

        lo, hi = 0, K1 - 1
        while hi - lo > 2 and not ok(list(range(0, lo + 1))):
            lo += 1
        while hi - lo > 2 and not ok(list(range(hi, K1))):
            hi -= 1
        groups = [list(range(0, lo + 1))] + [[k] for k in range(lo + 1, hi)] + \
            [list(range(hi, K1))]
        return groups

    def edge_share(self, v):
        """The released share of rows in the outer hats of column v (post-processing).

        The mass of the first and last hat (1_k^T G 1 over the hats of v) over n: at least
        the share of rows clipped at -bound or +bound, plus the rows within one knot of
        them.  A large value means the bounds or centres do not fit the column.
        """
        v = self._index(v, "v")
        K1 = self.knots + 1
        G = self.gram[v * K1:(v + 1) * K1, v * K1:(v + 1) * K1]
        return float(max(0.0, G[0].sum() + G[-1].sum()) / self.n)

    def edge_share_noise(self):
        """The noise standard deviation of :meth:`edge_share` (public: the noise scale).

        The share sums row 0 and row K of a column's pooled diagonal block over n; the
        corner entry (0, K) enters twice, so the sum of squared coefficients over the
        released entries is 2K + 4, each of Laplace variance 2 scale^2 (pooled over the
        blocks)."""
        sc = self.noise_scale * math.sqrt(self.blocks)
        return sc * math.sqrt(2.0 * (2 * self.knots + 4)) / self.n

    @property
    def caveats(self):
        """Public caveats about the release (e.g. columns that sit at their bounds).

        A column is named when its released :meth:`edge_share` exceeds ``CLIP_WARN`` by more
        than z_{1 - 0.01 / V} noise standard deviations (:meth:`edge_share_noise`), so that
        at most about 1% of releases whose columns all fit their bounds are flagged by the
        noise alone.  When the noise is too large for the check (its margin above
        ``CLIP_WARN``) one caveat says so instead."""
        from scipy.special import ndtri
        out = []
        margin = float(ndtri(1.0 - 0.01 / len(self.names))) * self.edge_share_noise()
        for v, name in enumerate(self.names):
            sh = self.edge_share(v)
            if sh > CLIP_WARN + margin:
                out.append(f"column {name!r}: about {sh:.0%} of the rows are at or near its "
                           f"clipping bound (released; noise sd {self.edge_share_noise():.1%}); "
                           "the bounds or centres do not fit this column (standardise with "
                           "public constants, or use bounds='auto', centers='auto').")
        if margin > CLIP_WARN:
            out.append(f"the released shares of rows at the clipping bounds are too noisy "
                       f"(noise sd {self.edge_share_noise():.1%}) to check the bounds.")
        return tuple(out)

    def active_range(self, v):
        """The released clipping range (t_lo, t_hi) of column v on the scaled axis [-1, 1]."""
        v = self._index(v, "v")
        g = self._groups[v]
        t = self.knot_values
        return float(t[g[0][-1]]), float(t[g[-1][0]])

    def column_moments(self, v):
        """Released mean and standard deviation of column v, clipped to its active range,
        on the scaled axis [-1, 1] (post-processing of the released diagonal block).

        The hats of a column sum to one, so the row sums of its block are the hats'
        masses; each merged outer group's mass sits at its inner knot (the test uses u
        clipped there), so the noise of the empty outer hats does not enter.  Then
        mean = sum_g t_g m_g / n, sd^2 = sum_g t_g^2 m_g / n - mean^2 (the hat
        interpolation of u^2 overstates it by at most a quarter spacing squared).
        Negative released masses count as zero.
        """
        v = self._index(v, "v")
        m, t = self._group_masses(v)
        m = np.maximum(m, 0.0)
        tot = float(m.sum())
        if not tot > 0:
            return 0.0, 0.0
        mean = float(m @ t / tot)
        return mean, float(math.sqrt(max(0.0, float(m @ (t * t)) / tot - mean * mean)))

    def _hat_masses(self, v):
        """Released masses of column v's hats: the row sums of its pooled diagonal block."""
        K1 = self.knots + 1
        return self._grams[:, v * K1:(v + 1) * K1, v * K1:(v + 1) * K1].sum(axis=(0, 2))

    def _group_masses(self, v):
        """Released masses of column v's hat groups and the knots they sit at."""
        m = self._hat_masses(v)
        g = self._groups[v]
        t = self.knot_values
        mass = np.array([m[idx].sum() for idx in g])
        at = np.array([t[g[0][-1]]] + [t[idx[0]] for idx in g[1:-1]] + [t[g[-1][0]]])
        return mass, at

    def clipped_share(self, v):
        """Released share of column v's rows clipped by its active range (post-processing).

        The rows beyond the range's end knots are fit as if they sat on them.  Each
        counts by how far it is moved, in knot spacings, at most 1: exactly the mass of
        the hats wholly beyond the end knots (a row d spacings beyond an end, d < 1, has
        weight d on the first hat outside it; a row further out has all its weight
        outside).  Rows on an end knot count 0.  Each end's sum is floored at zero.  A
        normal column cut at 1.5 sd (13% of its rows beyond) has 0.097 at 24 knots over
        4 sd and 0.105 at 32.
        """
        v = self._index(v, "v")
        m = self._hat_masses(v)
        g = self._groups[v]
        lo, hi = g[0][-1], g[-1][0]
        out = max(0.0, float(m[:lo].sum())) + max(0.0, float(m[hi + 1:].sum()))
        return float(min(1.0, out / max(float(m.sum()), 1e-300)))

    def _resolution_failure(self, ss):
        """Why the release cannot resolve E[. | S] (a caveat), or None (post-processing).

        For each column of S: its clipped share (:meth:`clipped_share`, the rows beyond
        the ends where the privacy noise merged its hats, weighted by distance) must be
        at most ``MAX_CLIPPED``, and the knot spacing 2 / K at most ``MAX_SPACING`` of
        its released sd."""
        h = 2.0 / self.knots
        for v in ss:
            clipped = self.clipped_share(v)
            if clipped > MAX_CLIPPED:
                lo, hi = self.active_range(v)
                what = (f"the privacy noise merges its outer hats: its released range is "
                        f"[{lo:.2f}, {hi:.2f}] on the scaled axis and its clipped share "
                        f"(the rows beyond, weighted by distance in knot spacings up to 1) "
                        f"is {clipped:.0%} (at most {MAX_CLIPPED:.0%} is allowed)")
            else:
                sd = self.column_moments(v)[1]
                if h <= MAX_SPACING * sd:
                    continue
                what = (f"its knot spacing is {h / sd:.2g} of its released standard deviation "
                        f"(at most {MAX_SPACING:g} is needed)" if sd > 0 else
                        "its released standard deviation is not positive")
            return (f"conditioning column {self.names[v]!r}: {what}.  The fit of E[x_i | S] cannot "
                    "see what varies on a shorter scale (measured: E[x | z] oscillating "
                    "with a period of two knot spacings rejected a true null every time); "
                    "p = 1 (the fail-safe, not evidence of independence).  Release with "
                    "more epsilon or rows, or pass assume_smooth=True to state that "
                    "E[x_i | S] and E[x_j | S] vary on scales of at least three knot "
                    "spacings (table.resolution).")
        return None

    def _design(self, a, b, ss, powers=(1,)):
        """Columns of C (feature space): the response functions of column a (u_a^k for k in
        ``powers``, u_a clipped to its active range), the same for b, then the regressors
        (the grouped hats of the columns in S, or a constant)."""
        K1 = self.knots + 1
        pf = len(self.names) * K1
        t = self.knot_values
        cols = []
        for v in (a, b):
            for power in powers:
                c = np.zeros(pf)
                for g in self._groups[v]:
                    knot = t[g[-1]] if g[0] == 0 else t[g[0]]
                    c[[v * K1 + k for k in g]] = knot ** power
                cols.append(c)
        if not ss:
            c = np.zeros(pf)
            c[a * K1:(a + 1) * K1] = 1.0            # the constant (the hats sum to 1)
            cols.append(c)
            pen = np.zeros((1, 1))
        else:
            blocks = []
            for pos, s in enumerate(ss):
                groups = self._groups[s]
                # the groups of a column sum to the constant: after the first column of S,
                # drop each column's first group (same span, no exact collinearity)
                keep = groups if pos == 0 else groups[1:]
                for g in keep:
                    c = np.zeros(pf)
                    c[[s * K1 + k for k in g]] = 1.0
                    cols.append(c)
                D = np.diff(np.eye(len(groups)), 2, axis=0)
                if pos:
                    D = D[:, 1:]
                blocks.append(D.T @ D)
            from scipy.linalg import block_diag
            pen = block_diag(*blocks)
        return np.column_stack(cols), pen

    def _coarse_map(self, ss):
        """The nested coarse basis of the regressors (the nested fit check's second fit).

        Per column s of S the test basis is the hat basis of u_s clipped to its active
        range, on the knots g = 0..m-1 of its groups.  The coarse basis is the hat basis
        of u_s clipped one knot further in (at group knots 1 and m - 2), on every second
        knot in between (m <= 3: the two end knots, a line).  It is piecewise linear
        with breakpoints at test knots, so it lies in the test span: the check measures
        both what the finer half of the knots adds and what the outermost kept knots
        add.  Returns the map R (test regressors x coarse regressors) and the coarse
        second-difference penalty, or (None, None) without S.  Post-processing only.
        """
        if not ss:
            return None, None
        from scipy.linalg import block_diag
        maps, pens = [], []
        for pos, s_col in enumerate(ss):
            m = len(self._groups[s_col])
            if m >= 4:
                ks = list(range(1, m - 1, 2))
                if ks[-1] != m - 2:
                    ks.append(m - 2)
            else:
                ks = [0, m - 1]
            R = np.zeros((m, len(ks)))
            for g in range(m):
                if g <= ks[0]:
                    R[g, 0] = 1.0
                elif g >= ks[-1]:
                    R[g, -1] = 1.0
                else:
                    j = int(np.searchsorted(ks, g, side="right")) - 1
                    w = (g - ks[j]) / (ks[j + 1] - ks[j])
                    R[g, j], R[g, j + 1] = 1.0 - w, w
            D = np.diff(np.eye(len(ks)), 2, axis=0)
            if pos:                      # as in _design: the first group / hat is dropped
                R, D = R[1:, 1:], D[:, 1:]
            maps.append(R)
            pens.append(D.T @ D)
        return block_diag(*maps), block_diag(*pens)

    @staticmethod
    def _stat(M, pen, lam, floor, nr=2):
        """Residual maps of the ``nr`` responses: c of shape (..., q, nr) with c^T M c the
        Gram matrix of the residuals, for M of shape (..., q, q)."""
        Mz = M[..., nr:, nr:]
        w, Vv = np.linalg.eigh(Mz + lam * pen)
        w = np.maximum(w, floor)
        inv = (Vv / w[..., None, :]) @ np.swapaxes(Vv, -1, -2)
        beta = inv @ M[..., nr:, :nr]                     # (..., qz, nr)
        q = M.shape[-1]
        c = np.zeros(M.shape[:-2] + (q, nr))
        for r in range(nr):
            c[..., r, r] = 1.0
        c[..., nr:, :] = -beta
        return c

    def test(self, i, j, S=(), *, responses="quadratic", alpha=None, assume_additive=None,
             assume_smooth=None):
        """Test column i independent of column j given the columns S (post-processing only).

        Parameters
        ----------
        i, j : column name or index
        S : sequence of column names or indices, or one of them
        responses : {"quadratic", "linear"}, default "quadratic"
            The functions of x_i and x_j whose residual covariance is tested.
            ``"linear"``: the clipped u_i and u_j (one statistic; no power against a
            dependence with zero correlation, such as y = x^2).  ``"quadratic"``: the
            three pairs (u_i, u_j), (u_i^2, u_j) and (u_i, u_j^2), each with its own
            statistic, and the Bonferroni p-value min(1, 3 min_k p_k).  Both are
            post-processing of the same release.  With two or more columns in S the
            squares' conditional means have interactions that the additive fit cannot
            model (a level of 0.74 was measured for them in a linear design), so
            ``"quadratic"`` tests the linear pair only there.
        alpha : ignored (kept for adapters); the p-value is returned.
        assume_additive : bool, default False
            With two or more columns in S: the release holds per-column bases only, so
            its regression on S is additive and cannot see a product of two conditioning
            columns (measured: such a design rejects true nulls up to 100% of the time).
            False (default): the query is answered with p = 1 (the fail-safe, as
            :func:`privci.privgcm` does where it cannot resolve products), ``trusted`` is
            False and the caveat says why.  True: the user's public assumption that
            E[x_i | S] and E[x_j | S] are additive in the columns of S; the level rests
            on it.  The assumption is about the *clipped* columns: a skewed column
            clipped at its bound has a clipped mean that need not be additive even when
            its mean is (measured: 0.088 rejections of a true null at epsilon 100 with
            4-sd bounds, 0.025 with 8-sd bounds).  ``privci.causal.pc`` on a release
            states this assumption for its queries (see its caveats).
        assume_smooth : bool, default False
            The fit of E[x_i | S] is piecewise linear between knots (spacing
            ``table.resolution``) and cannot see what varies on a shorter scale
            (measured: E[x | z] oscillating with a period of two knot spacings rejects a
            true null every time, at any epsilon).  False (default): the query is
            answered only when, for every column of S, the privacy noise leaves its
            clipped share (:meth:`clipped_share`: rows beyond the merged ends, weighted
            by distance in knot spacings) at most 0.10 (a normal column cut at 1.5 sd)
            and the knot spacing is at most 0.4 of its released standard deviation
            (:meth:`column_moments`); otherwise p = 1 (the fail-safe), ``trusted`` is
            False and the caveat says which column and why.  True: the user's public
            assumption that E[x_i | S] and E[x_j | S] vary on scales of at least three
            knot spacings; the level rests on it.  ``privci.causal.pc`` on a release
            states this assumption.

        Returns
        -------
        ReleasedTestResult

        Examples
        --------
        >>> import numpy as np, privci
        >>> rng = np.random.default_rng(0)
        >>> X = rng.normal(size=(5000, 4))
        >>> tab = privci.release(X, epsilon=5.0, bounds=4.0, rng=1)
        >>> tab.test(0, 1, [2, 3]).pvalue            # products of z columns: fail-safe
        1.0
        >>> 0 <= tab.test(0, 1, [2, 3], assume_additive=True, assume_smooth=True).pvalue <= 1
        True
        >>> coarse = privci.release(X, epsilon=5.0, bounds=4.0, knots=12, rng=1)
        >>> res = coarse.test(0, 1, [2])               # spacing 2/3 sd: the fail-safe
        >>> res.pvalue, res.trusted, "assume_smooth" in res.caveats[0]
        (1.0, False, True)
        """
        if responses not in _RESPONSES:
            raise ValueError(f"`responses` must be one of {tuple(_RESPONSES)}; got "
                             f"{responses!r} instead.")
        if assume_additive is None:
            assume_additive = self.assumptions["assume_additive"]
        if assume_smooth is None:
            assume_smooth = self.assumptions["assume_smooth"]
        if not isinstance(assume_additive, (bool, np.bool_)):
            raise TypeError("`assume_additive` must be True, False or None; got "
                            f"{assume_additive!r} instead.")
        if not isinstance(assume_smooth, (bool, np.bool_)):
            raise TypeError("`assume_smooth` must be True, False or None; got "
                            f"{assume_smooth!r} instead.")
        a, b, ss = self._key(i, j, S)
        why = None
        if not assume_additive and len(ss) >= 2:
            why = ADDITIVE_FAILSAFE
        elif not assume_smooth:
            why = self._resolution_failure(ss)
        if why is not None:
            self.n_queries += 1
            names = (self.names[a], self.names[b], tuple(self.names[t] for t in ss))
            return ReleasedTestResult(math.nan, 1.0, "none", math.nan, math.nan, False,
                                      False, names, (why,), {}, (), math.inf)
        res = self._answer(i, j, S, responses, QUADRATIC_MAX_S)
        assumed = ((ADDITIVE_ASSUMPTION,) if len(ss) >= 2 else ()) + \
            ((SMOOTH_ASSUMPTION,) if ss and assume_smooth else ())
        return replace(res, assumptions=assumed) if assumed else res

    def _answer(self, i, j, S, responses, quadratic_max_s):
        """:meth:`test` with the largest |S| that gets the squared responses as a parameter
        (PC's dependence veto asks the squared pairs at larger |S|; post-processing)."""
        a, b, ss = self._key(i, j, S)
        # the squares' conditional means given two or more columns have interactions the
        # additive fit cannot model (x = z1 + z2 + e: E[x^2 | z] has 2 z1 z2), which biases
        # the squared pairs under the null: there only the linear pair is tested
        powers = _RESPONSES[responses] if len(ss) <= quadratic_max_s else _RESPONSES["linear"]
        m = len(powers)
        nr = 2 * m
        # the pairs with at most one squared response: (u_i, u_j), (u_i^2, u_j), (u_i, u_j^2)
        # ((u_i^2, u_j^2) adds little power for PC and is the most sensitive to
        # heteroscedasticity)
        pairs = [(r, m + t) for r in range(m) for t in range(m) if r + t <= 1]
        ra = np.array([r for r, _ in pairs])
        rb = np.array([t for _, t in pairs])
        C, pen = self._design(a, b, ss, powers)
        k = self.blocks
        Mb = np.einsum("pq,kpr,rs->kqs", C, self._grams, C, optimize=True)
        M = Mb.sum(axis=0)
        q = M.shape[0] - nr + 2          # as with one response per side
        pooled_scale = self.noise_scale * math.sqrt(k)
        lam = pooled_scale * math.sqrt(q)
        floor = lam
        c_pen = self._stat(M, pen, lam, floor, nr)
        c_free = self._stat(M, 0.0 * pen, lam, floor, nr)
        Rc, pen_c = self._coarse_map(ss)
        if Rc is not None:
            from scipy.linalg import block_diag
            Pc = block_diag(np.eye(nr), Rc)          # test coordinates <- coarse ones

        def coarse(Ms):
            """The coarse fit's residual maps, in test coordinates."""
            return Pc @ self._stat(Pc.T @ Ms @ Pc, pen_c, lam, floor, nr)

        def gram(Ms, c):
            return np.einsum("...qr,...qs,...st->...rt", c, Ms, c, optimize=True)

        G = gram(M, c_pen)
        T = G[ra, rb]
        Taa, Tbb = G[ra, ra], G[rb, rb]
        B = T - gram(M, c_free)[ra, rb]
        # the nested fit check: the statistic's change from the coarse to the test basis
        Bn = T - gram(M, coarse(M))[ra, rb] if Rc is not None else None
        names = (self.names[a], self.names[b], tuple(self.names[s] for s in ss))
        # the bootstrap's seed is a function of the query: a repeated or mirrored query
        # gets the same answer
        rng = np.random.default_rng([self._boot_seed, min(a, b), max(a, b), *ss])
        self.n_queries += 1
        # parametric bootstrap over the released noise scale, on the used features only
        # (in batches: the same draws in the same order as one (N_BOOT, ...) draw)
        used = np.flatnonzero(np.any(C != 0, axis=1))
        Cu = C[used]
        iu_u = np.triu_indices(used.size)
        Ts, Bs, Bns = [], [], []
        for start in range(0, N_BOOT, BOOT_BATCH):
            nb = min(BOOT_BATCH, N_BOOT - start)
            E = np.zeros((nb, used.size, used.size))
            E[:, iu_u[0], iu_u[1]] = rng.laplace(0.0, pooled_scale, (nb, iu_u[0].size))
            E = E + np.triu(E, 1).swapaxes(-1, -2)
            Mstar = M[None] + np.einsum("pq,bpr,rs->bqs", Cu, E, Cu, optimize=True)
            ts = gram(Mstar, self._stat(Mstar, pen, lam, floor, nr))[:, ra, rb]
            Ts.append(ts)
            if start >= CHECK_BOOT:      # the checks' noise needs fewer draws than T's
                continue
            Bs.append(ts - gram(Mstar, self._stat(Mstar, 0.0 * pen, lam, floor, nr))[:, ra, rb])
            if Rc is not None:
                Bns.append(ts - gram(Mstar, coarse(Mstar))[:, ra, rb])
        Ts, Bs = np.concatenate(Ts), np.concatenate(Bs)
        var_noise = np.mean((Ts - T) ** 2, axis=0)
        var_B_noise = np.mean((Bs - B) ** 2, axis=0)
        allow2 = np.maximum(0.0, B * B - var_B_noise)
        if Rc is not None:
            # the coarse fit's bias estimate (its noise second moment removed): for a
            # smooth conditional mean the test fit's bias is about a third of it, so the
            # whole of it over-covers
            var_Bn_noise = np.mean((np.concatenate(Bns) - Bn) ** 2, axis=0)
            allow2 = allow2 + np.maximum(0.0, Bn * Bn - var_Bn_noise)
        if k >= 2:
            Tb = gram(Mb, c_pen[None])[:, ra, rb]
            base = k * np.var(Tb, axis=0, ddof=1)
            name = "t"
        else:
            hf = self._hetero_factor(C, nr, ss, ra, rb)
            base = Taa * Tbb / self.n * hf + var_noise
            name = "z"
        var = base + allow2
        from scipy.special import ndtr, ndtri, stdtr
        ps, stats, shares, caveats = [], [], [], []
        degenerate = False
        for c in range(len(pairs)):
            if Taa[c] <= 0 or Tbb[c] <= 0 or not (np.isfinite(var[c]) and var[c] > 0):
                degenerate = True
                ps.append(1.0)
                stats.append(math.nan)
                shares.append(math.nan)
                continue
            st = float(T[c] / math.sqrt(var[c]))
            stats.append(st)
            shares.append(float(allow2[c] / var[c]))
            if k >= 2:
                ps.append(float(min(1.0, 2.0 * stdtr(k - 1, -abs(st)))))
            else:
                ps.append(float(min(1.0, 2.0 * ndtr(-abs(st)))))
        zq = float(ndtri(1.0 - 0.025 / len(pairs)))
        det = [zq * math.sqrt(var[c] / (Taa[c] * Tbb[c])) for c in range(len(pairs))
               if Taa[c] > 0 and Tbb[c] > 0 and np.isfinite(var[c]) and var[c] > 0]
        detectable = float(min(det)) if det else math.inf
        best = int(np.argmin(ps))
        p = float(min(1.0, len(pairs) * ps[best]))
        if degenerate:
            caveats.append("a released residual variance is not positive: the noise "
                           "dominates part of this query (that part's p = 1).")
        if all(math.isnan(x) for x in stats):
            return ReleasedTestResult(math.nan, 1.0, "none", float(T[0] / self.n), math.nan,
                                      False, False, names, tuple(caveats), {},
                                      tuple(ps), math.inf)
        share = max(x for x in shares if not math.isnan(x))
        fit_ok = share <= CERTIFY_SHARE
        trusted = fit_ok and not degenerate
        if not fit_ok:
            caveats.append(f"fit check failed: the allowance for the additive fit's bias is "
                           f"{share:.0%} of the variance; the p-value is conservative and is "
                           "not evidence of independence.")
        parts = {"base": base.tolist(), "noise_bootstrap": var_noise.tolist(),
                 "allowance": allow2.tolist()}
        if k == 1:
            parts["hetero_factor"] = hf.tolist()
        stat = stats[best]
        return ReleasedTestResult(float(stat), p, name, float(T[0] / self.n), float(share),
                                  bool(fit_ok), bool(trusted), names, tuple(caveats), parts,
                                  tuple(ps), detectable)

    def _hetero_factor(self, C, nr, ss, ra, rb):
        """Heteroscedasticity factor of the sampling variance, per response pair (>= 1).

        Under the null, Var(T) = n E[r_a^2 r_b^2] = n E[V_a(S) V_b(S)], which exceeds
        the homoscedastic T_aa T_bb / n when the two conditional variances move together.
        For each column s of S the released cross moments give, per (grouped) hat bin g of
        s, the mass m_g and the first two moments of each response (f and f^2 are both in
        the span of the response column's hats), hence its variance V_g within the bin.
        The factor n sum_g m_g V_ag V_bg / (sum_g m_g V_ag)(sum_g m_g V_bg) is taken at
        its largest over the columns of S and never below 1 (1 when S is empty: then
        E[r_a^2 r_b^2] = E[r_a^2] E[r_b^2] under independence).  Post-processing only.
        """
        npair = len(ra)
        out = np.ones(npair)
        if not ss:
            return out
        K1 = self.knots + 1
        G = self.gram
        resp = C[:, :nr]                       # f(t_l) on the response column's hats
        # f^2 on the same hats: square the coefficients (the interpolant of f^2)
        resp2 = resp ** 2
        for s_col in ss:
            groups = self._groups[s_col]
            E = np.zeros((G.shape[0], len(groups)))
            for gi, g in enumerate(groups):
                E[[s_col * K1 + kk for kk in g], gi] = 1.0
            ones = np.zeros(G.shape[0])
            ones[s_col * K1:(s_col + 1) * K1] = 1.0
            m = E.T @ G @ ones                                  # mass of each bin
            if np.sum(m > 0) < 2:
                continue
            # the conditional moments E[f | z_s] and E[f^2 | z_s] as hat functions of z_s:
            # deconvolve the released cross moments by the bins' Gram matrix (ridge at the
            # noise level), then V = E[f^2 | z] - E[f | z]^2 at the knots
            Gz = E.T @ G @ E
            lam = self.noise_scale * math.sqrt(self.blocks) * math.sqrt(len(groups))
            Gz = Gz + lam * np.eye(len(groups))
            m1 = np.linalg.solve(Gz, E.T @ G @ resp)            # bins x responses
            m2 = np.linalg.solve(Gz, E.T @ G @ resp2)
            Vg = np.maximum(m2 - m1 ** 2, 0.0)
            mm = np.maximum(m, 0.0)
            va, vb = Vg[:, ra], Vg[:, rb]
            num = self.n * np.sum(mm[:, None] * va * vb, axis=0)
            den = np.sum(mm[:, None] * va, axis=0) * np.sum(mm[:, None] * vb, axis=0)
            with np.errstate(divide="ignore", invalid="ignore"):
                fac = np.where(den > 0, num / den, 1.0)
            out = np.maximum(out, np.nan_to_num(fac, nan=1.0, posinf=1.0))
        return out

    def pvalue(self, i, j, S=(), assume_additive=False, assume_smooth=False):
        """The p-value of :meth:`test` (for PC-style callers)."""
        return self.test(i, j, S, assume_additive=assume_additive,
                         assume_smooth=assume_smooth).pvalue


def release(data, *, epsilon, bounds, centers=0.0, rng=None, budget=None,
            blocks=DEFAULT_BLOCKS, knots=RELEASE_KNOTS, auto_share=AUTO_SHARE,
            statistics="additive", clip=1.0):
    """Release a table's second moments once, with ``epsilon``; test any CI query for free.

    Parameters
    ----------
    data : array-like or DataFrame, shape (n, V)
        The private table (rows are individuals; V >= 2 columns).
    epsilon : float
        The epsilon of the single release (> 0).
    bounds : float, sequence of V floats, or "auto"
        Public bounds: column v is scaled as (x_v - centers[v]) / bounds[v] and clipped
        to [-1, 1].  ``"auto"``: released privately with a share ``auto_share`` of
        ``epsilon`` (2.5 times the private 0.9-quantile of |x_v - centre|, about 4
        standard deviations of a normal column; :func:`privci.bounds.private_bounds`).
    centers : float, sequence of V floats, or "auto", default 0.0
        Public centres; ``"auto"``: private medians (same share of epsilon).
    rng : None, int or numpy Generator
        None: OpenDP's hardened Laplace sampler.  Given: reproducible numpy noise
        (simulations only).
    budget : PrivacyBudget, optional
        Charged ``epsilon`` once, after every argument is validated and before the data
        are read.
    blocks : int, default 1
        Disjoint row blocks (by position), each released with the full epsilon
        (parallel composition).  ``blocks >= 2``: block-wise t statistic; 1: one
        Gram matrix with a delta/bootstrap calibration (homoscedastic sampling model).
    knots : "auto" or int in [1, 64], default "auto"
        Intervals of the hat basis on [-1, 1] (``knots + 1`` features per column).
        ``"auto"``: K by the public rule ``release_knots`` (``from privci.release
        import release_knots``): from 24 up to 64 as long as the hats within 2 sd stay
        resolved and the privacy noise at most doubles the statistic's variance on a
        reference table; it grows with n epsilon / V^2.  An integer: that many
        intervals.  The fit cannot see what varies faster than its knots
        (``table.resolution``): a conditional query is answered only where the knot
        spacing is at most 0.4 released sd of each conditioning column and the noise
        leaves its clipped share at most 10% (otherwise the fail-safe
        p = 1, see :meth:`ReleasedTable.test`'s ``assume_smooth``); a warning says when
        the rule's reference table predicts that.  The nested fit check measures what
        the coarser half of the basis misses.  ``privci.causal.pc`` uses 6 intervals
        and assumes smoothness at that scale (its adjacency F1 was measured there; a
        false rejection keeps an edge).
    auto_share : float in (0, 1), default 0.1
        The share of ``epsilon`` spent on the ``"auto"`` centres and bounds (sequential
        composition: they and the Gram matrices together are ``epsilon``-DP); unused
        without ``"auto"``.
    statistics : {"additive", "linear"}, default "additive"
        What is released.  ``"additive"``: the hat-feature Gram matrices above
        (:class:`ReleasedTable`; additive fits of any smooth E[x | S]).  ``"linear"``:
        the first and second moments of the clipped, scaled columns only
        (:class:`ReleasedCovariance`; (V + 1)(V + 2) / 2 - 1 noisy numbers at L1
        sensitivity ((V + 1/2)^2 + V) / 2 instead of V (K + 1) (V (K + 1) + 1) / 2 at
        V^2 + V), whose queries test zero partial correlation (conditional independence
        where the conditional means are linear).  ``blocks`` and ``knots`` do not apply.
    clip : float in (0, 1] or "auto", default 1.0
        ``statistics="linear"`` only: the columns are clipped at ``clip`` times their
        bounds, u_v = clip((x_v - c_v) / (clip b_v), -1, 1).  A tighter clip raises the
        variance of u against the fixed noise (2 sd against 4 sd: about 3.7 times) at the
        price of a small bias where the clip makes E[u_i | u_S] nonlinear.  ``"auto"``:
        the public rule ``privci.release.linear_clip`` (n, epsilon, V only).

    Returns
    -------
    ReleasedTable or ReleasedCovariance

    Examples
    --------
    >>> import numpy as np, privci
    >>> rng = np.random.default_rng(0)
    >>> z = rng.normal(size=4000); x = z + rng.normal(size=4000); y = z + rng.normal(size=4000)
    >>> tab = privci.release(np.column_stack([x, y, z]), epsilon=20.0, bounds=4.0, rng=1)
    >>> res = tab.test(0, 1, [2])                  # answered: the release resolves z
    >>> res.pvalue > 0.01, res.trusted, tab.test(0, 2).pvalue < 0.01
    (True, True, True)
    >>> tab.privacy["queries"]
    'post-processing of the release: every query costs epsilon 0'
    """
    X, names = _names_and_matrix(data)
    n, nv = X.shape
    eps = V.positive_finite(epsilon, "epsilon")
    auto_b, auto_c = _is_auto(bounds), _is_auto(centers)
    b = None if auto_b else V.positive_bounds(bounds, "bounds", nv)
    c = None if auto_c else V.public_centres(centers, "centers", nv)
    share = _check_auto_share(auto_share)
    k = V.check_int(blocks, "blocks", 1)
    K = _check_knots(knots)
    if n < 2 * k:
        raise ValueError(f"`blocks` must leave at least 2 rows per block; got blocks={k} for "
                         f"n={n} rows instead.")
    if len(set(map(repr, names))) != len(names):
        raise ValueError(f"`data` must have distinct column names; got {names!r} instead.")
    if not (isinstance(statistics, str) and statistics in STATISTICS):
        raise ValueError(f"`statistics` must be one of {STATISTICS}; got {statistics!r} "
                         "instead.")
    if statistics == "linear" and (k != DEFAULT_BLOCKS or K is not None):
        raise ValueError("`blocks` and `knots` apply to statistics='additive' only; got "
                         f"blocks={blocks!r}, knots={knots!r} with statistics='linear'.")
    clip_ = _check_clip(clip)
    if statistics != "linear" and clip_ != 1.0:
        raise ValueError("`clip` applies to statistics='linear' only; got "
                         f"clip={clip!r} with statistics={statistics!r}.")
    gen = None if rng is None else V.check_rng(rng)
    if budget is not None:
        from .budget import PrivacyBudget
        if not isinstance(budget, PrivacyBudget):
            raise TypeError("`budget` must be None or a privci.PrivacyBudget; got "
                            f"{type(budget).__name__} instead.")
    if statistics == "linear":
        return _release_linear(X, names, eps=eps, b=b, c=c, auto_b=auto_b, auto_c=auto_c,
                               share=share, gen=gen, budget=budget, clip=clip_)
    sens_base = release_sensitivity(nv)
    eps_auto = share * eps if (auto_b or auto_c) else 0.0
    eps_gram = remaining(eps, eps_auto) if eps_auto else eps
    if K is None:                    # the public rule (n, epsilon, V, blocks only)
        K = release_knots(n, eps_gram, nv, k)
        if not release_resolves(n, eps_gram, nv, k):
            warnings.warn(
                f"at n={n}, epsilon={eps_gram:g} for the Gram matrices and {nv} columns, the "
                f"privacy noise is expected to merge the outer {K}-knot hats of a normal "
                f"column beyond a clipped share of {MAX_CLIPPED:.0%}: conditional queries "
                "will then return the fail-safe p = 1 (see ReleasedTable.test, "
                "assume_smooth; release_resolves asks before a release).  More epsilon or "
                "rows, or fewer columns, resolve them.",
                UserWarning, stacklevel=2)
    pf = nv * (K + 1)
    ntri = pf * (pf + 1) // 2
    edges = _block_bounds(n, k)
    rows = np.diff(edges)
    sens = sens_base + _conversion_slack(int(rows.max()), ntri)
    # the release plan: the private centres/bounds (if any) and the Gram matrices; the
    # exact remainder (a float eps - eps_auto can round up and overspend by an ulp)
    plan = ReleasePlan(eps, {"centres/bounds": eps_auto, "Gram matrices": eps_gram}, eps_gram,
                       details=f"Gram matrices of {nv} columns, {k} row blocks"
                       + (f"; private centres/bounds with {eps_auto:g}" if eps_auto else ""))
    statement = plan.charge(budget, "privci.release")
    if eps_auto:
        from .bounds import private_bounds
        rel = private_bounds(X, epsilon=eps_auto, center=True if auto_c else c,
                             bound=auto_b, bound_quantile=AUTO_QUANTILE, rng=gen)
        if auto_c:
            c = np.asarray(rel.center, dtype=float)
        if auto_b:
            b = np.maximum(AUTO_WIDTH * np.asarray(rel.bound, dtype=float), 1e-12)
    eps = plan.test_epsilon
    U = _scaled(X, c, b)
    grams = np.zeros((k, pf, pf))
    iu = np.triu_indices(pf)
    info = None
    for blk in range(k):
        F = hat_features(U[edges[blk]:edges[blk + 1]], K)
        exact = _gram_int(F)
        vals = exact.astype(np.float64) * (1.0 / float(1 << (2 * SCALE_BITS)))
        noisy, info = laplace_mechanism(vals, sens, eps, gen, value_bound=float(rows[blk]))
        g = np.zeros((pf, pf))
        g[iu] = noisy
        grams[blk] = g + np.triu(g, 1).T
    del U, X
    seed = int(np.random.default_rng(gen.integers(2 ** 32) if gen is not None else None)
               .integers(2 ** 31))
    return ReleasedTable(grams=grams, names=names, bounds=b, centers=c, knots=K,
                         block_rows=rows.tolist(), epsilon=plan.epsilon, sensitivity=sens,
                         noise_scale=info.scale, mechanism=info.mechanism,
                         hardened=info.hardened, charge_statement=statement, boot_seed=seed,
                         auto_epsilon=eps_auto)


# --- the linear rung: one release of the clipped columns' first and second moments -----

COV_WEIGHT = 0.5             # public weight a of the constant feature in f = (a, u)
LINEAR_BOOT = 100            # bootstrap draws of the linear statistic's noise
LINEAR_CHUNK = 256           # queries per vectorised batch
LINEAR_FLOOR = 2.0           # eigenvalue floor: this x the noise's expected operator norm
LINEAR_HETERO = 2.5          # the sampling variance's public heteroscedasticity allowance
# the linear rung's resolution: columns clipped at a fraction of their public bounds.  The
# choices (4, 3, 2.5, 2, 1.5, 1.25 and 1 sd at 4-sd bounds) and the largest
# partial-correlation bias that clipping adds on the reference designs (chains
# x_i <- z -> x_j of standard normal columns with noise sd 0.2-1 on each arm, clipped at
# the width; 8e7 rows, two seeds, the larger taken; docs page "Release once, test many")
CLIP_CHOICES = (1.0, 0.75, 0.625, 0.5, 0.375, 0.3125, 0.25)
CLIP_BIAS = {1.0: 0.0002, 0.75: 0.0005, 0.625: 0.0013, 0.5: 0.004, 0.375: 0.011,
             0.3125: 0.018, 0.25: 0.028}
CLIP_BIAS_SHARE = 0.25       # the rule: the reference bias at most this x the test's sd
SD_WIDE = 0.05               # a released sd(u) below this: the bounds are wide (>= 20 sd)
SD_TIGHT = 0.5               # a released sd(u) above this: the bounds are tight (<= 2 sd)
LINEAR_ASSUMPTION = (
    "assume_linear: E[x_i | S] and E[x_j | S] are linear in the clipped, scaled columns of "
    "S and the residuals' variance does not move with S (the partial-correlation null of "
    "Fisher's z test); a nonlinear conditional mean shared by x_i and x_j can make the "
    "test reject a true conditional independence")
LINEAR_FAILSAFE = (
    "a conditioning column on the linear release: zero partial correlation is conditional "
    "independence only when E[x_i | S] and E[x_j | S] are linear in S; p = 1 (the "
    "fail-safe, not evidence of independence).  Pass assume_linear=True to state it.")


def covariance_sensitivity(n_vars):
    """L1 sensitivity of the linear release: ((V + a)^2 + V) / 2 with a = ``COV_WEIGHT``.

    The released vector is the upper triangle of sum f f^T for f = (a, u_1, ..., u_V),
    u_v in [-1, 1], without the entry (0, 0) (a^2 n: public).  Write d = f - g and
    s = f + g for the rows before and after a replacement.  Then f_k f_l - g_k g_l =
    (d_k s_l + s_k d_l) / 2, so the sum of |f_k f_l - g_k g_l| over all ordered pairs
    is at most ||d||_1 ||s||_1 <= ((||d||_1 + ||s||_1) / 2)^2; each coordinate has
    |d_k| + |s_k| = 2 max(|f_k|, |g_k|) <= 2 (and d_0 = 0, s_0 = 2a), so the full sum
    is at most (V + a)^2.  The upper triangle counts each off-diagonal pair once:
    (full + diagonal) / 2 <= ((V + a)^2 + V) / 2, as the diagonal changes by at most
    1 per column.  All columns at +bound against all at 0 come within 1% of it.

    Examples
    --------
    >>> covariance_sensitivity(8)
    40.125
    """
    v = V.check_int(n_vars, "n_vars", 1)
    return float(((v + COV_WEIGHT) ** 2 + v) / 2.0)


def _cov_features(U):
    """(m, V + 1) int64 in units 2^-16: the constant a, then u rounded to the grid.

    Rounding to nearest keeps |u| <= 1 (the grid holds -1 and 1), so the bound of
    :func:`covariance_sensitivity` holds for the rounded values."""
    m, nv = U.shape
    U = np.clip(np.nan_to_num(np.asarray(U, dtype=np.float64), nan=0.0, posinf=1.0,
                              neginf=-1.0), -1.0, 1.0)    # any input: a row in [-1, 1]^V
    F = np.empty((m, nv + 1), np.int64)
    F[:, 0] = int(round(COV_WEIGHT * _ONE))
    F[:, 1:] = np.rint(U * _ONE).astype(np.int64)
    return F


def _laplace_normal_sf(t, s, b):
    """P(N + L > t) for N ~ N(0, s^2) and L ~ Laplace(0, b), elementwise (t >= 0).

    With E ~ Exp(mean b): P(N + E > t) = Phi_c(t/s) + exp(s^2/(2b^2) - t/b) Phi(t/s - s/b)
    and P(N - E > t) = Phi_c(t/s) - exp(s^2/(2b^2) + t/b) Phi(-t/s - s/b); L is E or -E
    with probability 1/2 each.  Evaluated in logs (scipy's log_ndtr)."""
    from scipy.special import log_ndtr, ndtr
    t = np.asarray(t, float)
    s = np.maximum(np.asarray(s, float), 1e-300)
    b = np.asarray(b, float)
    out = ndtr(-t / s)
    pos = b > 0
    if np.any(pos):
        bb = np.where(pos, b, 1.0)
        c = s * s / (2.0 * bb * bb)
        up = np.exp(c - t / bb + log_ndtr(t / s - s / bb))
        down = np.exp(c + t / bb + log_ndtr(-t / s - s / bb))
        out = np.where(pos, out + 0.5 * (up - down), out)
    return np.clip(out, 0.0, 1.0)


def _linear_stats(Ms, floor):
    """Residual Gram matrices (..., 2, 2) of the responses (rows/columns 0, 1) given the
    regressors (2:) of moment matrices ``Ms`` (..., q, q), with the regressors' Gram
    eigenvalues floored at ``floor``; also the smallest eigenvalue before the floor."""
    Mz = Ms[..., 2:, 2:]
    w, Vv = np.linalg.eigh(Mz)
    wf = np.maximum(w, floor)
    inv = (Vv / wf[..., None, :]) @ np.swapaxes(Vv, -1, -2)
    beta = inv @ Ms[..., 2:, :2]
    cross = Ms[..., :2, 2:] @ beta
    R = Ms[..., :2, :2] - cross - np.swapaxes(cross, -1, -2) + \
        np.swapaxes(beta, -1, -2) @ Mz @ beta
    return R, w[..., 0], beta


class ReleasedCovariance:
    """The linear rung: released first and second moments of the clipped, scaled columns.

    Made by :func:`release` with ``statistics="linear"``; holds only the released
    (V + 1) x (V + 1) moment matrix of f = (a, u_1, ..., u_V) (the entry (0, 0) = a^2 n
    is public) and public parameters.  :meth:`test` answers (i, j | S) by the partial
    correlation of u_i and u_j given (1, u_S), with a noise-aware variance
    (post-processing; docs page "Release once, test many").
    """

    statistics = "linear"

    def __init__(self, *, moments, names, bounds, centers, n, epsilon, sensitivity,
                 noise_scale, mechanism, hardened, charge_statement, boot_seed,
                 auto_epsilon=0.0, assumptions=None, clip=1.0):
        self._M = moments
        self.clip = float(clip)
        self.names = list(names)
        self.bounds = np.asarray(bounds, dtype=float)
        self.centers = np.asarray(centers, dtype=float)
        self.n = int(n)
        self.epsilon = float(epsilon)
        self.sensitivity = float(sensitivity)
        self.noise_scale = float(noise_scale)
        self.mechanism = mechanism
        self.hardened = bool(hardened)
        self._boot_seed = boot_seed
        self.auto_epsilon = float(auto_epsilon)
        self.n_queries = 0
        self.assumptions = {"assume_linear": False}
        if assumptions:
            self.assumptions.update(assumptions)
        self.privacy = {
            "epsilon": self.epsilon,
            "mechanism": mechanism,
            "sensitivity": self.sensitivity,
            "noise_scale": self.noise_scale,
            "blocks": 1,
            "auto_epsilon": self.auto_epsilon,
            "composition": (("private centres/bounds (epsilon "
                             f"{self.auto_epsilon:g}), then " if self.auto_epsilon else "")
                            + "one epsilon-DP release: the Laplace mechanism on the first "
                            "and second moments of the clipped, scaled columns (L1 "
                            f"sensitivity {self.sensitivity:g} = ((V + a)^2 + V) / 2, "
                            f"a = {COV_WEIGHT:g}), replacement of one row"),
            "queries": "post-processing of the release: every query costs epsilon 0",
            "charged": charge_statement,
            "hardened": self.hardened,
        }

    blocks = 1

    @property
    def moments(self):
        """The released moment matrix of f = (a, u): a copy, shape (V + 1, V + 1)."""
        return self._M.copy()

    @property
    def epsilon_spent_by_queries(self):
        return 0.0

    def covariance(self):
        """The released covariance matrix of the clipped, scaled columns u (a copy)."""
        M = self._M
        m = M[0, 1:] / (COV_WEIGHT * self.n)
        return M[1:, 1:] / self.n - np.outer(m, m)

    def column_moments(self, v):
        """Released mean and standard deviation of the scaled column u_v (0 if the released
        variance is not positive), and the noise sd of the released variance."""
        v = self._index(v, "v")
        m = float(self._M[0, v + 1] / (COV_WEIGHT * self.n))
        var = float(self._M[v + 1, v + 1] / self.n - m * m)
        return m, math.sqrt(max(var, 0.0))

    def _var_noise_sd(self):
        return math.sqrt(2.0) * self.noise_scale / self.n

    @property
    def caveats(self):
        """Public caveats from released values, with their noise taken into account.

        A column whose released sd(u) is above ``SD_TIGHT`` (bounds closer than 2 sd)
        beyond the noise is flagged as clipped; one whose released sd(u) is below
        ``SD_WIDE`` (bounds wider than 20 sd) beyond the noise as wide (the noise is then
        large against the column).  The margin is z_{1 - 0.01 / V} noise sds of the
        released variance (at most 1% of tables flagged by noise alone)."""
        from scipy.special import ndtri
        out = []
        nv = len(self.names)
        zq = float(ndtri(1.0 - 0.01 / nv))
        margin = zq * self._var_noise_sd()
        for v, name in enumerate(self.names):
            m, sd = self.column_moments(v)
            var = sd * sd
            if var - margin > SD_TIGHT ** 2 or abs(m) > 0.5 + zq * math.sqrt(2.0) * \
                    self.noise_scale / (COV_WEIGHT * self.n):
                out.append(f"column {name!r}: many rows are at or near its clipping bound "
                           f"(released sd {sd:.2f} and mean {m:+.2f} of the scaled column, "
                           "beyond the noise); the bounds or centres do not fit this column "
                           "(standardise with public constants, or use bounds='auto', "
                           "centers='auto').")
            elif var + margin < SD_WIDE ** 2:
                out.append(f"column {name!r}: released sd {sd:.3f} of the scaled column "
                           "(beyond the noise): its bounds are more than 20 sd wide, so the "
                           "noise is large against it (narrower public bounds give more "
                           "power).")
        if margin > SD_TIGHT ** 2:
            out.append(f"the released variances are too noisy (noise sd {self._var_noise_sd():.2g}"
                       " on the scaled axis) to check the bounds.")
        return tuple(out)

    def __repr__(self):
        return (f"ReleasedCovariance({len(self.names)} columns, n={self.n}, "
                f"epsilon={self.epsilon:g}, queries={self.n_queries} at epsilon 0)")

    def __reduce_ex__(self, protocol):   # released values only: safe to pickle
        return object.__reduce_ex__(self, protocol)

    _index = ReleasedTable._index
    _key = ReleasedTable._key

    def detectable_floor(self, q_z):
        """The eigenvalue floor of a regression on q_z regressors (public)."""
        return LINEAR_FLOOR * self.noise_scale * math.sqrt(2.0 * q_z)

    def test(self, i, j, S=(), *, alpha=None, assume_linear=None):
        """Test zero partial correlation of columns i and j given the columns S.

        Post-processing of the linear release.  The responses u_i, u_j (clipped, scaled
        columns) are regressed on (1, u_S) from the released moments; T = sum_rows r_i r_j
        is the residual cross moment, and

            z = T / sqrt(R_ii R_jj / (n - |S| - 1) + V_noise),

        with V_noise a parametric bootstrap of T over the released noise scale (the fit
        recomputed every draw).  The p-value is two-sided for N(0, s^2) + Laplace(b), with
        b the noise scale of the released entry (i, j) (T moves one for one with it) and
        s^2 the rest of the variance (:func:`_laplace_normal_sf`).

        Parameters
        ----------
        i, j : column name or index
        S : sequence of column names or indices, or one of them
        alpha : ignored (kept for adapters).
        assume_linear : bool or None
            With a non-empty S, zero partial correlation is conditional independence only
            when E[x_i | S] and E[x_j | S] are linear in S (and the test's variance is the
            homoscedastic one of Fisher's z test).  False: such a query gets p = 1 (the
            fail-safe).  True: the user's public assumption; the level rests on it.  None
            (default): the table's ``assumptions`` (False for :func:`privci.release`, True
            for the table of :func:`privci.causal.pc`, which answered its queries so).

        Returns
        -------
        ReleasedTestResult
            With ``assumptions`` naming what the answer assumed.

        Examples
        --------
        >>> import numpy as np, privci
        >>> rng = np.random.default_rng(0)
        >>> z = rng.normal(size=20000); x = z + rng.normal(size=20000)
        >>> y = z + rng.normal(size=20000)
        >>> tab = privci.release(np.column_stack([x, y, z]) / 2, epsilon=5.0, bounds=4.0,
        ...                      statistics="linear", rng=1)
        >>> tab.test(0, 1, [2]).pvalue                  # not assumed: the fail-safe
        1.0
        >>> res = tab.test(0, 1, [2], assume_linear=True)
        >>> res.pvalue > 0.01, res.trusted, tab.test(0, 1).pvalue < 0.01
        (True, True, True)
        """
        if assume_linear is None:
            assume_linear = self.assumptions["assume_linear"]
        if not isinstance(assume_linear, (bool, np.bool_)):
            raise TypeError("`assume_linear` must be True, False or None; got "
                            f"{assume_linear!r} instead.")
        a, b, ss = self._key(i, j, S)
        names = (self.names[a], self.names[b], tuple(self.names[t] for t in ss))
        if ss and not assume_linear:
            self.n_queries += 1
            return ReleasedTestResult(math.nan, 1.0, "none", math.nan, math.nan, False,
                                      False, names, (LINEAR_FAILSAFE,), {}, (), math.inf,
                                      ())
        return self._answer_many([(a, b, ss)])[0]

    def _answer_many(self, keys):
        """Answers (ReleasedTestResult) for keys (i, j, S) with i != j not in S, in order.

        Vectorised by |S| in chunks; each query's bootstrap draws come from a generator
        seeded by the release's seed and the query, so a repeated or mirrored query gets
        the same answer however it is batched."""
        out = [None] * len(keys)
        groups = {}
        keys = [(min(a, b), max(a, b), tuple(sorted(ss))) for a, b, ss in keys]
        for pos, key in enumerate(keys):
            groups.setdefault(len(key[2]), []).append(pos)
        for l, positions in groups.items():
            for start in range(0, len(positions), LINEAR_CHUNK):
                chunk = positions[start:start + LINEAR_CHUNK]
                for pos, res in zip(chunk, self._answer_chunk([keys[p] for p in chunk], l)):
                    out[pos] = res
        self.n_queries += len(keys)
        return out

    def _answer_chunk(self, keys, l):
        from scipy.special import ndtri
        m = len(keys)
        q = l + 3
        n = self.n
        sc = self.noise_scale
        idx = np.array([[a + 1, b + 1, 0] + [s + 1 for s in ss] for a, b, ss in keys])
        M = self._M[idx[:, :, None], idx[:, None, :]]                  # (m, q, q)
        floor = self.detectable_floor(l + 1)
        R, wmin, beta = _linear_stats(M, floor)
        T, Rii, Rjj = R[:, 0, 1], R[:, 0, 0], R[:, 1, 1]
        # the bootstrap: Laplace noise on the released entries of each query's matrix (the
        # constant's diagonal entry, a^2 n, is public and exact)
        iu = np.triu_indices(q)
        noisy = ~((iu[0] == 2) & (iu[1] == 2))
        rows, cols = iu[0][noisy], iu[1][noisy]
        D = np.empty((m, rows.size, LINEAR_BOOT))
        for k, (a, b, ss) in enumerate(keys):
            g = np.random.default_rng([self._boot_seed, min(a, b), max(a, b), *ss])
            D[k] = g.laplace(0.0, sc, (rows.size, LINEAR_BOOT))
        E = np.zeros((m, LINEAR_BOOT, q, q))
        E[:, :, rows, cols] = D.swapaxes(1, 2)
        E = E + np.triu(E, 1).swapaxes(-1, -2)
        Rs, _, _ = _linear_stats(M[:, None] + E, floor)
        # a control variate: T's first-order (delta-method) response to the drawn noise,
        # whose variance 2 scale^2 sum g^2 is known exactly; the bootstrap then only
        # estimates what the first order misses (T is bilinear in the residual maps c)
        c = np.zeros((m, q, 2))
        c[:, 0, 0] = c[:, 1, 1] = 1.0
        c[:, 2:, :] = -beta
        grad = c[:, rows, 0] * c[:, cols, 1] + np.where(rows != cols, c[:, cols, 0] * c[:, rows, 1],
                                                          0.0)
        var_lin = 2.0 * sc * sc * np.sum(grad * grad, axis=1)
        T_lin = np.sum(grad[:, :, None] * D, axis=1)     # row by row: batch-invariant
        var_noise = np.maximum(
            var_lin + np.mean((Rs[..., 0, 1] - T[:, None]) ** 2 - T_lin ** 2, axis=1), 0.0)
        dof = max(n - l - 1, 1)
        # the homoscedastic sampling variance of T, times the public heteroscedasticity
        # allowance (the release holds no fourth moments to estimate it)
        var_samp = LINEAR_HETERO * np.maximum(Rii, 0.0) * np.maximum(Rjj, 0.0) / dof
        var = var_samp + var_noise
        # the released entry (i, j) enters T with weight one: its Laplace part is kept
        # exact, the rest of the variance is treated as normal
        lap_var = 2.0 * sc * sc
        rest = np.maximum(var - lap_var, var_samp)
        zq = float(ndtri(0.975))
        ok = (Rii > 0) & (Rjj > 0) & np.isfinite(var) & (var > 0)
        resolved = wmin >= floor
        out = []
        for k, (a, b, ss) in enumerate(keys):
            names = (self.names[a], self.names[b], tuple(self.names[t] for t in ss))
            assumed = (LINEAR_ASSUMPTION,) if ss else ()
            if not ok[k]:
                out.append(ReleasedTestResult(
                    math.nan, 1.0, "none", float(T[k] / n), math.nan, False, False, names,
                    ("a released residual variance is not positive: the noise dominates "
                     "this query (p = 1).",), {}, (1.0,), math.inf, assumed))
                continue
            t = abs(float(T[k]))
            p = float(min(1.0, 2.0 * _laplace_normal_sf(t, math.sqrt(rest[k]), sc)))
            st = float(T[k] / math.sqrt(var[k]))
            det = float(zq * math.sqrt(var[k] / (Rii[k] * Rjj[k])))
            caveats = []
            if not resolved[k]:
                caveats.append(f"the released Gram matrix of (1, S) has an eigenvalue "
                               f"{wmin[k]:.3g} below the noise floor {floor:.3g}: S is not "
                               "resolved at this noise (nearly collinear columns); the fit "
                               "is floored and the answer is not trusted.")
            parts = {"base": [float(var_samp[k] + var_noise[k])],
                     "noise_bootstrap": [float(var_noise[k])], "allowance": [0.0],
                     "sampling": [float(var_samp[k])]}
            out.append(ReleasedTestResult(st, p, "z", float(T[k] / n), 0.0, True,
                                          bool(resolved[k]), names, tuple(caveats), parts,
                                          (p,), det, assumed))
        return out


def _check_clip(clip):
    """``clip``: "auto" (None: the rule) or a number in (0, 1]."""
    if _is_auto(clip):
        return None
    if isinstance(clip, bool) or not isinstance(clip, numbers.Real) or \
            not 0.0 < float(clip) <= 1.0:
        raise ValueError(f"`clip` must be 'auto' or a number in (0, 1]; got {clip!r} instead.")
    return float(clip)


def linear_clip(n, epsilon, n_vars):
    """The public rule for the linear rung's clipping (``clip="auto"``).

    Among ``CLIP_CHOICES`` (the columns clipped at 1, 3/4, 5/8, 1/2, 3/8, 5/16 or 1/4 of
    their bounds: 4, 3, 2.5, 2, 1.5, 1.25 or 1 sd at 4-sd bounds) it takes the tightest
    whose reference
    bias (``CLIP_BIAS``: the partial correlation that the clip alone adds on chains of
    standard-normal columns) is at most ``CLIP_BIAS_SHARE`` = 1/4 of the standard
    deviation of the release's test at |S| = 1 on the reference table (independent
    standard-normal columns at 4-sd bounds, clipped at that width, plus one seeded draw
    of the release's noise at n, ``epsilon``, V).  A bias of a quarter of the test's sd
    moves its level from 0.05 to at most 0.058.  Tighter clipping raises the variance of
    the clipped columns against the fixed noise, so it pays where the noise dominates.
    Public numbers only; cached.

    Examples
    --------
    >>> linear_clip(1_000, 2.0, 8), linear_clip(10_000, 2.0, 8), linear_clip(100_000, 100.0, 5)
    (0.3125, 0.5, 0.75)
    """
    return _linear_clip(V.check_int(n, "n", 2), V.positive_finite(epsilon, "epsilon"),
                        V.check_int(n_vars, "n_vars", 2))


@lru_cache(maxsize=256)
def _linear_clip(n, eps, nv):
    scale = covariance_sensitivity(nv) / eps
    best = CLIP_CHOICES[0]
    for c in CLIP_CHOICES:
        tab = _linear_reference(n, scale, max(nv, 3), [20261127, int(1000 * c)],
                                epsilon=eps, clip=c)
        res = tab._answer_many([(0, 1, (2,))])[0]
        sd = res.detectable_correlation / 1.959964
        if np.isfinite(sd) and CLIP_BIAS[c] <= CLIP_BIAS_SHARE * sd:
            best = c
    return best


def _release_linear(X, names, *, eps, b, c, auto_b, auto_c, share, gen, budget, clip=1.0):
    """The linear rung of :func:`release` (arguments validated there)."""
    n, nv = X.shape
    sens = covariance_sensitivity(nv)
    eps_auto = share * eps if (auto_b or auto_c) else 0.0
    eps_mom = remaining(eps, eps_auto) if eps_auto else eps
    if clip is None:                 # the public rule (n, epsilon, V only)
        clip = linear_clip(n, eps_mom, nv)
    ntri = (nv + 1) * (nv + 2) // 2 - 1
    sens = sens + _conversion_slack(n, ntri)
    plan = ReleasePlan(eps, {"centres/bounds": eps_auto, "moments": eps_mom}, eps_mom,
                       details=f"first and second moments of {nv} columns (linear rung)"
                       + (f"; private centres/bounds with {eps_auto:g}" if eps_auto else ""))
    statement = plan.charge(budget, "privci.release")
    if eps_auto:
        from .bounds import private_bounds
        rel = private_bounds(X, epsilon=eps_auto, center=True if auto_c else c,
                             bound=auto_b, bound_quantile=AUTO_QUANTILE, rng=gen)
        if auto_c:
            c = np.asarray(rel.center, dtype=float)
        if auto_b:
            b = np.maximum(AUTO_WIDTH * np.asarray(rel.bound, dtype=float), 1e-12)
    U = _scaled(X, c, clip * b)
    del X
    F = _cov_features(U)
    del U
    exact = _gram_int(F)                       # upper triangle of (V + 1) x (V + 1)
    iu = np.triu_indices(nv + 1)
    keep = ~((iu[0] == 0) & (iu[1] == 0))      # (0, 0) = a^2 n is public
    vals = exact[keep].astype(np.float64) * _SCALE_UNIT
    noisy, info = laplace_mechanism(vals, sens, plan.test_epsilon, gen, value_bound=float(n))
    M = np.zeros((nv + 1, nv + 1))
    M[iu[0][keep], iu[1][keep]] = noisy
    M[0, 0] = COV_WEIGHT * COV_WEIGHT * n
    M = M + np.triu(M, 1).T
    seed = int(np.random.default_rng(gen.integers(2 ** 32) if gen is not None else None)
               .integers(2 ** 31))
    return ReleasedCovariance(moments=M, names=names, bounds=b, centers=c, n=n,
                              epsilon=plan.epsilon, sensitivity=sens,
                              noise_scale=info.scale, mechanism=info.mechanism,
                              hardened=info.hardened, charge_statement=statement,
                              boot_seed=seed, auto_epsilon=eps_auto, clip=clip)


def _hat_moments(knots, bound_sd=4.0, grid=4001):
    """E[h_k(u) h_l(u)] and E[h_k(u)] for u = clip(x / bound_sd, -1, 1), x ~ N(0, 1)."""
    x = np.linspace(-8.0, 8.0, grid)
    w = np.exp(-0.5 * x * x)
    w /= w.sum()
    H = hat_features(np.clip(x / bound_sd, -1.0, 1.0), knots).astype(float) / 65536.0
    return (H * w[:, None]).T @ H, w @ H


def _linear_reference(n, scale, nv, seed, epsilon=1.0, clip=1.0):
    """A public planning table for the linear rung: the expected moments of ``nv``
    independent standard-normal columns at 4-sd bounds clipped at ``clip`` of them, plus
    one draw of Laplace noise of ``scale`` on the released entries (``seed``: a seed or a
    Generator)."""
    m2, _ = _clipped_normal_moments(4.0 * float(clip))
    gen = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    M = np.zeros((nv + 1, nv + 1))
    M[0, 0] = COV_WEIGHT * COV_WEIGHT * n
    iu = np.triu_indices(nv + 1)
    keep = ~((iu[0] == 0) & (iu[1] == 0))
    E = np.zeros((nv + 1, nv + 1))
    E[iu[0][keep], iu[1][keep]] = gen.laplace(0.0, scale, int(keep.sum()))
    M = M + E + np.triu(E, 1).T
    M[np.arange(1, nv + 1), np.arange(1, nv + 1)] += n * m2
    return ReleasedCovariance(moments=M, names=list(range(nv)), bounds=np.full(nv, 4.0),
                              centers=np.zeros(nv), n=n, epsilon=epsilon,
                              sensitivity=covariance_sensitivity(nv), noise_scale=scale,
                              mechanism="planning draw", hardened=False,
                              charge_statement="planning draw (synthetic, public)",
                              boot_seed=int(gen.integers(2 ** 31)),
                              assumptions={"assume_linear": True}, clip=clip)


@lru_cache(maxsize=8)
def _clipped_normal_moments(bound_sd=4.0, grid=8001):
    """E[u^2] and E[u] for u = clip(x / bound_sd, -1, 1), x ~ N(0, 1)."""
    x = np.linspace(-8.0, 8.0, grid)
    w = np.exp(-0.5 * x * x)
    w /= w.sum()
    u = np.clip(x / bound_sd, -1.0, 1.0)
    return float(w @ (u * u)), float(w @ u)


def _planned_orders(n, V_, epsilon, knots, power_rule, top, effect, draws, rng,
                    statistics="additive", clip=1.0):
    """Planning draws for :func:`privci.plan_pc`: the expected Gram matrix (``"additive"``)
    or moment matrix (``"linear"``) of independent standard-normal columns (4-sd bounds)
    plus the release's noise; per order the median detectable correlation, resolvability
    under ``power_rule``, the power at ``effect`` and the noise's share of the test
    variance."""
    from scipy.special import ndtr
    linear = statistics == "linear"
    scale = (covariance_sensitivity(V_) if linear else release_sensitivity(V_)) / epsilon
    gen = np.random.default_rng(rng)
    dets = np.zeros((draws, top + 1))
    untrusted = np.zeros((draws, top + 1))
    shares = np.zeros((draws, top + 1))
    for d in range(draws):
        if linear:
            tab = _linear_reference(n, scale, V_, gen, epsilon=epsilon, clip=clip)
            results = tab._answer_many([(0, 1, tuple(range(2, 2 + o)))
                                        for o in range(top + 1)])
        else:
            tab = _reference_table(n, scale, knots, gen, nv=V_, epsilon=epsilon)
            results = [tab.test(0, 1, list(range(2, 2 + o)), assume_additive=True,
                                assume_smooth=True) for o in range(top + 1)]
        for o, res in enumerate(results):
            dets[d, o] = res.detectable_correlation
            untrusted[d, o] = not res.trusted
            parts = res.variance_parts
            shares[d, o] = (parts["noise_bootstrap"][0] / parts["base"][0]
                            if parts and parts["base"][0] > 0 else 1.0)
    out = []
    zq = 1.959964
    for o in range(top + 1):
        det = float(np.median(dets[:, o]))
        resolvable = bool(np.isfinite(det) and (power_rule is None or det <= power_rule)
                          and np.mean(untrusted[:, o]) < 0.5)
        pw = float(ndtr(zq * (effect / det - 1.0))) if np.isfinite(det) and det > 0 else 0.0
        out.append({"order": o, "detectable_correlation": det, "resolvable": resolvable,
                    "power": pw, "untrusted": float(np.mean(untrusted[:, o])),
                    "noise_share": float(np.median(shares[:, o]))})
    return out, scale


# --- private PC on one release ----------------------------------------------------------

_UNTRUSTED = ("keep", "use")
RELEASE_PC_OPTIONS = ("statistics", "clip", "blocks", "knots", "untrusted", "responses",
                      "auto_share", "power_rule", "quadratic_veto", "plan_orders",
                      "max_tests", "orientation")
PC_STATISTICS = ("linear", "additive")
ORIENTATIONS = ("majority", "sepset")
DEFAULT_POWER_RULE = 0.45
DEFAULT_MAX_TESTS = 5000     # the public cap on distinct tests computed by one PC run
PLAN_MARGIN = 1.5            # plan_orders: skip orders planned above 1.5 x power_rule
PLAN_DRAWS = 3
ORIENT_MAX_ORDER = 3         # the majority rule asks separating sets of at most this size


def _check_release_options(p, *, bounds, centers, blocks, knots, untrusted, responses,
                           auto_share, power_rule, statistics="linear", max_tests=None,
                           orientation="majority", clip="auto"):
    """Validate every option of a release-once PC before anything is charged."""
    if not _is_auto(bounds):
        V.positive_bounds(bounds, "bounds", p)
    if not _is_auto(centers):
        V.public_centres(centers, "centers", p)
    V.check_int(blocks, "blocks", 1)
    K = V.check_int(knots, "knots", 1)
    if K > 64:
        raise ValueError(f"`knots` must be an integer in [1, 64]; got {K} instead.")
    if untrusted not in _UNTRUSTED:
        raise ValueError(f"`untrusted` must be one of {_UNTRUSTED}; got {untrusted!r} instead.")
    if responses not in _RESPONSES:
        raise ValueError(f"`responses` must be one of {tuple(_RESPONSES)}; got {responses!r} "
                         "instead.")
    _check_auto_share(auto_share)
    if power_rule is not None and (isinstance(power_rule, bool) or not isinstance(
            power_rule, numbers.Real) or not 0.0 < float(power_rule) <= 1.0):
        raise ValueError(f"`power_rule` must be None or a number in (0, 1]; got {power_rule!r} "
                         "instead.")
    if not (isinstance(statistics, str) and statistics in PC_STATISTICS):
        raise ValueError(f"`statistics` must be one of {PC_STATISTICS}; got {statistics!r} "
                         "instead.")
    if max_tests is not None:
        V.check_int(max_tests, "max_tests", 1)
    if not (isinstance(orientation, str) and orientation in ORIENTATIONS):
        raise ValueError(f"`orientation` must be one of {ORIENTATIONS}; got {orientation!r} "
                         "instead.")
    c = _check_clip(clip)
    if statistics != "linear" and c is not None and c != 1.0:
        raise ValueError(f"`clip` applies to statistics='linear' only; got clip={clip!r} "
                         f"with statistics={statistics!r}.")
    if statistics == "linear" and (int(blocks) != DEFAULT_BLOCKS):
        raise ValueError("`blocks` applies to statistics='additive' only; got "
                         f"blocks={blocks!r} with statistics='linear'.")


def _pc_release(data, *, epsilon, bounds, centers=0.0, alpha=0.05, rng=None, max_order=None,
                budget=None, statistics="linear", clip="auto", blocks=DEFAULT_BLOCKS,
                knots=DEFAULT_KNOTS,
                untrusted="keep", responses="quadratic", auto_share=AUTO_SHARE,
                power_rule=DEFAULT_POWER_RULE, quadratic_veto=True, plan_orders=True,
                max_tests=DEFAULT_MAX_TESTS, orientation="majority"):
    """PC-stable with every CI test answered by one :func:`release` (see ``causal.pc``).

    The whole run is one epsilon-DP release; the skeleton, separating sets and CPDAG
    are post-processing.  ``untrusted="keep"``: a query that is not trusted (fit check
    failed, or a released residual variance not positive) never removes an edge;
    ``"use"``: its (conservative) p-value is used as it is.
    """
    from .budget import PrivacyBudget
    from ._pc import PCResult, _orient, _pc_skeleton, _unshielded_triples

    X, names = _names_and_matrix(data)
    n, p = X.shape
    eps = V.positive_finite(epsilon, "epsilon")
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not 0.0 < alpha < 1.0:
        raise ValueError(f"`alpha` must be a number in (0, 1); got {alpha!r} instead.")
    top = p - 2 if max_order is None else min(V.check_int(max_order, "max_order", 0), p - 2)
    if budget is not None and not isinstance(budget, PrivacyBudget):
        raise TypeError(f"`budget` must be None or a privci.PrivacyBudget; got "
                        f"{type(budget).__name__} instead.")
    _check_release_options(p, bounds=bounds, centers=centers, blocks=blocks, knots=knots,
                           untrusted=untrusted, responses=responses, auto_share=auto_share,
                           power_rule=power_rule, statistics=statistics, max_tests=max_tests,
                           orientation=orientation, clip=clip)
    for name, value in (("quadratic_veto", quadratic_veto), ("plan_orders", plan_orders)):
        if not isinstance(value, bool):
            raise ValueError(f"`{name}` must be True or False; got {value!r} instead.")
    cap = None if max_tests is None else int(max_tests)
    if rng is not None:
        rng = V.check_rng(rng)
    auto = _is_auto(bounds) or _is_auto(centers)
    eps_stats = remaining(eps, auto_share * eps) if auto else eps     # public
    rung = statistics
    width = 1.0
    if rung == "linear":             # the public rule (n, epsilon, p only) unless given
        width = _check_clip(clip)
        width = linear_clip(n, eps_stats, p) if width is None else width
    run_budget = PrivacyBudget(eps, name="privci.causal.pc (release once)")
    if budget is not None:
        budget.charge(eps, test="privci.causal.pc",
                      details=f"PC on {p} columns, one release of the table ({rung} rung)")
    if rung == "linear":
        table = release(X, epsilon=eps, bounds=bounds, centers=centers, rng=rng,
                        budget=run_budget, auto_share=auto_share, statistics="linear",
                        clip=width)
        table.assumptions = {"assume_linear": True}
    else:
        table = release(X, epsilon=eps, bounds=bounds, centers=centers, rng=rng,
                        budget=run_budget, blocks=blocks, knots=knots, auto_share=auto_share)
        table.assumptions = {"assume_additive": True, "assume_smooth": True}
    del X
    answers, flagged, weak, vetoed = {}, set(), set(), set()
    not_asked = {}          # (i, j) -> reason: conditioning-set sizes never asked

    def record(key, res):
        answers[key] = res.pvalue
        if not res.trusted:
            flagged.add(key)
        if power_rule is not None and not res.detectable_correlation <= power_rule:
            weak.add(key)

    def compute(keys):
        """Answer the keys not answered yet (the linear rung in one vectorised batch)."""
        new = [k for k in dict.fromkeys(keys) if k not in answers]
        if not new:
            return
        if rung == "linear":
            for key, res in zip(new, table._answer_many(new)):
                record(key, res)
            return
        for key in new:
            i, j, s = key
            res = table.test(i, j, list(s), responses=responses, assume_additive=True,
                             assume_smooth=True)
            record(key, res)
            if (quadratic_veto and responses == "quadratic" and len(s) > QUADRATIC_MAX_S
                    and res.pvalue > alpha):
                # the dependence veto: the squared pairs, not tested at this |S| (their
                # level is not kept there), may still show a dependence the linear pair
                # cannot see (y = x^2); they can only keep an edge, never remove one
                if table._answer(i, j, list(s), "quadratic", len(s)).pvalue <= alpha:
                    vetoed.add(key)

    def may_remove(key):
        return (not (key in flagged and untrusted == "keep") and key not in weak
                and key not in vetoed)

    def ask(i, j, s):
        key = (i, j, tuple(sorted(s)))
        compute([key])
        return answers[key], may_remove(key)

    planned_top = top
    if plan_orders and power_rule is not None and top >= 0:
        # the public rule from privci.plan_pc: an order >= 1 whose best-case detectable
        # partial correlation (independent standard-normal columns, 4-sd bounds, this n,
        # epsilon and p) exceeds PLAN_MARGIN times the power rule cannot remove an edge; it
        # and the orders above it are not asked (public numbers only: no effect on
        # privacy).  Order 0 is always asked; when it is not resolvable, nothing above is.
        orders, _ = _planned_orders(n, p, eps_stats, int(knots), PLAN_MARGIN * power_rule,
                                    top, 0.3, PLAN_DRAWS, 0, statistics=rung, clip=width)
        planned_top = 0
        for o in orders[1:]:
            if not (orders[0]["resolvable"] and o["resolvable"]):
                break
            planned_top = o["order"]
    state = {"capped": None}

    def before_order(order, plan, adj_sets, edges):
        keys_of = [[(i, j, tuple(s)) for s in cands] for i, j, cands in plan]
        last = order >= planned_top
        if cap is not None:
            budget_left = cap - len(answers)
            kept, used = [], 0
            for (i, j, cands), keys in zip(plan, keys_of):
                extra = sum(1 for k in keys if k not in answers)
                if used + extra > budget_left:
                    not_asked[(i, j)] = (f"the test cap (max_tests={cap}) was reached at "
                                         f"conditioning-set size {order}")
                    continue
                used += extra
                kept.append((i, j, cands))
            if len(kept) < len(plan):
                state["capped"] = order
                last = True
                plan = kept
                keys_of = [[(i, j, tuple(s)) for s in cands] for i, j, cands in plan]
        if rung == "linear":
            compute([k for keys in keys_of for k in keys])
        return plan, last

    adj, sepsets, orders_run = _pc_skeleton(p, alpha, ask, top=top, before_order=before_order)
    last_order = orders_run[-1] if orders_run else -1
    # edges that kept conditioning sets of a size PC never asked (planned orders or the cap)
    if last_order < top:
        for i in range(p):
            for j in range(i + 1, p):
                if adj[i, j] and (i, j) not in not_asked and \
                        max(adj[i].sum(), adj[j].sum()) - 1 > last_order:
                    if state["capped"] is not None:
                        not_asked[(i, j)] = (f"the test cap (max_tests={cap}) stopped the "
                                             f"search after conditioning-set size {last_order}")
                    elif last_order >= planned_top and planned_top < top:
                        not_asked[(i, j)] = (f"conditioning sets of size {planned_top + 1} and "
                                             "more were not asked (planned orders)")
    # orientation: the majority rule over every separating set the run can ask for free
    colliders = None
    if orientation == "majority":
        colliders = {}
        triples = _unshielded_triples(adj)
        top_orient = min(max(last_order, 0), ORIENT_MAX_ORDER)
        keys_of = {}
        for i, k, j in triples:
            if (i, j) in keys_of:
                continue
            sets = set()
            for a, b in ((i, j), (j, i)):
                nb = sorted(set(np.flatnonzero(adj[a]).tolist()) - {b})
                for size in range(0, min(len(nb), top_orient) + 1):
                    sets.update(itertools.combinations(nb, size))
            keys_of[(i, j)] = sorted((i, j, tuple(sorted(s))) for s in sets)
        # one batch for every pair's sets, pair by pair within the cap (cached ones are free)
        todo, queued = [], set()
        room = None if cap is None else cap - len(answers)
        for pair in sorted(keys_of):
            new = [k for k in keys_of[pair] if k not in answers and k not in queued]
            if room is not None and len(new) > room:
                keys_of[pair] = [k for k in keys_of[pair] if k in answers or k in queued]
                continue
            todo.extend(new)
            queued.update(new)
            if room is not None:
                room -= len(new)
        compute(todo)
        for i, k, j in triples:
            keys = keys_of[(i, j)]
            seps = [k_[2] for k_ in keys if answers[k_] > alpha and may_remove(k_)]
            if (i, j) in sepsets and sepsets[(i, j)] not in seps:
                seps.append(sepsets[(i, j)])
            share = sum(k in s_ for s_ in seps) / len(seps) if seps else 0.5
            colliders[(i, k, j)] = True if share < 0.5 else (False if share > 0.5 else None)
    directed = _orient(adj, sepsets, colliders=colliders,
                       conflicts="undirected" if orientation == "majority" else "first")
    # which kept edges were found, which stay only because no test could remove them
    reasons = {}
    for (i, j, s), pv in answers.items():
        if adj[i, j] and pv > alpha and not may_remove((i, j, s)):
            why = ("untrusted" if (i, j, s) in flagged and untrusted == "keep" else
                   "underpowered (power rule)" if (i, j, s) in weak else None)
            if why is not None:
                reasons.setdefault((i, j), set()).add(why)
    for e, why in not_asked.items():
        if adj[e]:
            reasons.setdefault(e, set()).add(why)
    untested = tuple(sorted(reasons))
    n_tests = len(answers)
    guarantee = (f"one {eps:g}-DP release (privci.release, {rung} rung: "
                 + (f"private centres/bounds with {table.auto_epsilon:g}, then " if
                    table.auto_epsilon else "")
                 + ("Laplace noise on the first and second moments of the clipped columns"
                    if rung == "linear" else
                    f"Laplace noise on the Gram matrices of {blocks} disjoint row blocks")
                 + f", replacement of one row); the {n_tests} tests (at most "
                 f"max_tests={cap}), the skeleton, separating sets and CPDAG are "
                 "post-processing")
    if budget is not None:
        guarantee += f"; the run was charged as one {eps:g}-DP release to the outer budget"
    caveats = []
    if rung == "linear" and _is_auto(clip):
        caveats.append(f"clip='auto' (privci.release.linear_clip, public numbers only) "
                       f"clipped the columns at {width:g} of their bounds.")
    caveats.extend(table.caveats)
    if rng is not None:
        caveats.append("noise drawn from a seeded numpy generator: reproducible but not "
                       "hardened against floating-point attacks; use rng=None for a release.")
    m_edges = int(adj.sum() // 2)
    if untested:
        caveats.insert(0, f"{len(untested)} of the {m_edges} edges are untested: they stay "
                       "only because no test could remove them (res.untested, "
                       "res.untested_reasons; res.edges('found') lists the others); "
                       "privci.plan_pc(n, p, epsilon) gives the epsilon or n that would "
                       "resolve them.")
    if planned_top < top:
        caveats.append(f"conditioning sets of size > {planned_top} were not tested: "
                       "privci.plan_pc says their "
                       f"tests cannot detect a partial correlation of {PLAN_MARGIN:g} x "
                       f"power_rule at n={n}, epsilon={eps_stats:g}, {p} "
                       "columns (edges that need them stay).")
    if state["capped"] is not None:
        caveats.append(f"the test cap max_tests={cap} was reached at conditioning-set size "
                       f"{state['capped']}: the edges whose tests did not fit stay untested.")
    if rung == "linear":
        n_lin = sum(1 for key in answers if len(key[2]) >= 1)
        if n_lin:
            caveats.append(f"{n_lin} tests conditioned on columns of the linear release and "
                           "assumed E[x_i | S], E[x_j | S] linear in them with a residual "
                           "variance that does not move with S (assume_linear=True, "
                           "res.table.assumptions): a nonlinear shared mean can make such a "
                           "test reject, which keeps an edge; a dependence without "
                           "correlation (y = x^2) is not seen, which can remove one.")
    else:
        n_additive = sum(1 for key in answers if len(key[2]) >= 2)
        if n_additive:
            caveats.append(f"{n_additive} tests conditioned on two or more columns and "
                           "assumed E[x_i | S], E[x_j | S] additive in them "
                           "(assume_additive=True): a product of conditioning columns can "
                           "make such a test reject, which keeps an edge (it never removes "
                           "one).")
        n_cond = sum(1 for key in answers if len(key[2]) >= 1)
        if n_cond:
            caveats.append(f"{n_cond} tests conditioned on columns at the release's "
                           f"resolution ({table.knots} knot intervals per column, "
                           "table.resolution) and assumed E[x_i | S], E[x_j | S] smooth on "
                           "that scale (assume_smooth=True): structure finer than three knot "
                           "spacings can make such a test reject, which keeps an edge (it "
                           "never removes one).")
    if weak:
        caveats.append(f"{len(weak)} tests could not detect a partial correlation of "
                       f"{power_rule:g} (power rule, released values only); they never removed "
                       "an edge.")
    if flagged:
        caveats.append(f"{len(flagged)} tests were not trusted (fit check failed or noise "
                       "dominated; conservative p-values); "
                       + ("they never removed an edge." if untrusted == "keep" else
                          "their p-values were used as they are."))
    return PCResult(adjacency=adj, directed=directed, names=names, sepsets=sepsets,
                    pvalues=dict(answers), level_epsilon={}, n_tests=n_tests, refused=(),
                    epsilon=eps, alpha=float(alpha), budget=run_budget, guarantee=guarantee,
                    caveats=tuple(caveats), table=table, untested=untested,
                    untested_reasons={e: tuple(sorted(r)) for e, r in reasons.items()},
                    max_tests=cap, statistics=rung)
