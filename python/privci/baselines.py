"""Baseline private CI tests from the literature, for comparison only.

The paper (Kalemaj, Kasiviswanathan & Ramdas, "Differentially Private
Conditional Independence Testing") compares PrivGCM and PrivCRT with two
earlier private CI tests and shows that neither controls type-I error when Z
is continuous (its first experiment figure).  Both are implemented here, from
the mathematics of their papers, so that comparison can be reproduced:

* :func:`privtot` -- the Test of Tests of Kazan, Shi, Groce & Bray (2023) with
  the non-private GCM (:func:`privci.gcm`) as the black-box test.
* :func:`private_kendall` -- the private conditional Kendall's tau test of
  Wang, Pang & Song (2020), adapted to continuous Z by k-means clustering.

They are *baselines*: their ``method`` names say so, and their privacy
records state exactly which guarantee they have and what weakens it.  Use
:func:`privci.privgcm` or :func:`privci.privcrt` for inference.
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
from scipy.special import log_ndtr, ndtr, ndtri
from scipy.stats import binom

from . import _validation as V
from ._private import SEEDED_CAVEAT
from .budget import _charge
from .gcm import gcm
from .mechanisms import laplace_mechanism, quiet
from .results import PrivacyRecord, PrivateTestResult, Release

__all__ = ["privtot", "private_kendall", "tot_default_alpha0", "kendall_statistic"]


def _probability(value, name, *, allow_none=False):
    """A number strictly between 0 and 1."""
    if value is None and allow_none:
        return None
    v = V.positive_finite(value, name)
    if not v < 1.0:
        raise ValueError(f"`{name}` must be a number strictly between 0 and 1; got {value!r} instead.")
    return v


def _numpy_or_fresh(user_rng):
    """Randomness that is not privacy noise: the user's generator or fresh OS entropy."""
    return user_rng if user_rng is not None else np.random.default_rng()


# =========================================================================== PrivToT

def _tulap_cdf(t, eps):
    """CDF of N = L + U, L discrete Laplace (P(L=k) ~ exp(-eps |k|)), U ~ Unif(-1/2, 1/2).

    This is Awan & Slavkovic's Tulap(0, b = exp(-eps), q = 0).  With r the
    nearest integer to t and f = t - r in [-1/2, 1/2],
    F(t) = P(L <= r - 1) + P(L = r) (f + 1/2), where
    P(L <= j) = b^(-j) / (1 + b) for j < 0 and 1 - b^(j+1) / (1 + b) for j >= 0.
    """
    t = np.asarray(t, dtype=np.float64)
    b = math.exp(-eps)
    r = np.floor(t + 0.5)
    f = t - r
    j = r - 1.0
    below = np.where(j < 0, np.exp(np.minimum(j, 0.0) * eps) / (1 + b),
                     1.0 - np.exp(-(np.maximum(j, -1.0) + 1.0) * eps) / (1 + b))
    at = (1 - b) / (1 + b) * np.exp(-np.abs(r) * eps)
    return np.clip(below + at * (f + 0.5), 0.0, 1.0)


def _tot_pvalue(released, m, alpha0, eps):
    """P(Binom(m, alpha0) + Tulap >= released): the private binomial test's p-value."""
    t = np.arange(m + 1)
    pmf = binom.pmf(t, m, alpha0)
    return float(np.clip(np.sum(pmf * (1.0 - _tulap_cdf(released - t, eps))), 0.0, 1.0))


def _tot_critical_sf(alpha0, m, eps, alpha):
    """For each alpha0: the critical value c (p(c) = alpha) and P(Tulap >= c - t), t = 0..m.

    The p-value is decreasing in the released value, so the level-alpha test
    rejects iff Z >= c; c is located on a grid of step < 0.01 (used only to
    choose alpha0, where this precision is ample).
    """
    t = np.arange(m + 1)
    grid = np.linspace(-2.0 - 12.0 / eps, m + 2.0 + 12.0 / eps, 4001)
    sf = 1.0 - _tulap_cdf(grid[:, None] - t[None, :], eps)             # (G, m+1)
    pvals = sf @ binom.pmf(t[None, :], m, alpha0[:, None]).T             # (G, A)
    ok = pvals <= alpha
    first = np.where(ok.any(axis=0), ok.argmax(axis=0), -1)
    c = np.where(first >= 0, grid[np.maximum(first, 0)], np.inf)
    return 1.0 - _tulap_cdf(c[:, None] - t[None, :], eps)                # (A, m+1)


@lru_cache(maxsize=128)
def tot_default_alpha0(n_subsets, epsilon, alpha=0.05, target_power=0.8):
    """The default subset level alpha0 of :func:`privtot` (data-independent).

    Kazan et al. (2023) choose (m, alpha0) by maximising the ToT's power
    computed from the public test's power function; for an unknown effect
    size their "practical" rule takes the smallest effect for which some
    (m, alpha0) reaches ``target_power`` (0.8) and uses the maximising
    parameters.  Here m = ``n_subsets`` is fixed by the user, and the public
    test is the GCM, whose statistic on a subset is asymptotically
    N(delta, 1), so its power at level a is
    Phi(delta - z_{1-a/2}) + Phi(-delta - z_{1-a/2}).  The function bisects
    on delta for the smallest effect at which max over alpha0 of the ToT
    power reaches ``target_power`` and returns that maximiser (grid step
    0.005).  It uses only public parameters, so it costs no privacy.

    Examples
    --------
    >>> from privci.baselines import tot_default_alpha0
    >>> 0 < tot_default_alpha0(10, 2.0) < 1
    True
    """
    m = V.check_int(n_subsets, "n_subsets", 1)
    eps = V.positive_finite(epsilon, "epsilon")
    alpha = _probability(alpha, "alpha")
    grid = np.arange(0.005, 0.9951, 0.005)
    zq = ndtri(1.0 - grid / 2.0)
    sf_c = _tot_critical_sf(grid, m, eps, alpha)
    t = np.arange(m + 1)

    def best(delta):
        theta = ndtr(delta - zq) + ndtr(-delta - zq)
        power = np.sum(binom.pmf(t[None, :], m, theta[:, None]) * sf_c, axis=1)
        k = int(np.argmax(power))
        return power[k], grid[k]

    lo, hi = 0.0, 1.0
    while best(hi)[0] < target_power and hi < 64:
        lo, hi = hi, 2.0 * hi
    for _ in range(30):
        mid = 0.5 * (lo + hi)
        if best(mid)[0] >= target_power:
            hi = mid
        else:
            lo = mid
    return float(round(best(hi)[1], 3))


def _tot_count(xa, ya, za, labels, m, alpha0, gcm_kwargs, subset_rngs):
    """The PrivToT transformation: number of subsets j < m whose GCM p-value is <= alpha0.

    ``labels`` is the (data-independent) subset of every row and
    ``subset_rngs[j]`` subset j's own generator (multiplier draws, the
    uniform p-value of a degenerate subset), so a change in one subset cannot
    shift the randomness of another.  Sensitivity 1 under replacement of one
    row.  Un-noised: never release it.
    """
    count = 0
    for j in range(m):
        idx = np.flatnonzero(labels == j)
        # Every warning (the user's regressor included) is silenced, and any exception
        # inside a subset is handled like an undefined statistic: that subset alone gets
        # a Uniform(0, 1) p-value.  Either way only this subset's decision can change, so
        # the count keeps sensitivity 1 and nothing but the noisy count leaves.
        try:
            with quiet():
                res = gcm(xa[idx], ya[idx], za[idx], rng=subset_rngs[j], **gcm_kwargs)
            p = res.pvalue if np.isfinite(res.pvalue) else math.nan
        except Exception:
            p = math.nan
        if not np.isfinite(p):
            p = subset_rngs[j].uniform()
        count += int(p <= alpha0)
    return count


def _check_gcm_options(gcm_kwargs, d, p, q):
    """Run the subset GCM once on a public probe, so that a bad option fails here, with its
    own message, whatever the data (inside the subsets every exception is absorbed)."""
    gen = np.random.default_rng(20240601)
    k = 64
    try:
        with quiet():
            gcm(gen.normal(size=(k, p)), gen.normal(size=(k, q)), gen.normal(size=(k, d)),
                rng=gen, **gcm_kwargs)
    except (TypeError, ValueError) as exc:
        raise type(exc)(f"the GCM options given to privtot were rejected: {exc}") from None


def _discrete_laplace(eps, user_rng):
    """One draw of L with P(L = k) proportional to exp(-eps |k|); returns (L, info dict)."""
    if user_rng is None:
        from opendp import domains, measurements, metrics, mod

        mod.enable_features("contrib")   # not opendp.prelude: it imports scikit-learn (~3 s)
        scale = 1.0 / eps
        for _ in range(64):
            meas = measurements.make_laplace(domains.atom_domain(T=int),
                                             metrics.absolute_distance(T=int), scale=scale)
            spent = meas.map(1)
            if spent <= eps:
                break
            scale = float(np.nextafter(scale, np.inf))
        else:  # pragma: no cover - OpenDP always calibrates within a few ulps
            raise RuntimeError("could not calibrate OpenDP's discrete Laplace to the requested epsilon")
        return int(meas(0)), scale, True, "discrete Laplace (OpenDP make_laplace, integer domain)"
    p = -math.expm1(-eps)   # 1 - exp(-eps): the difference of two Geometric(p) counts
    g1, g2 = user_rng.geometric(p, size=2)
    return int(g1 - g2), 1.0 / eps, False, "discrete Laplace (numpy geometric difference)"


def privtot(x, y, z, *, epsilon, n_subsets=10, alpha=0.05, alpha0=None, rng=None, budget=None,
            **gcm_kwargs):
    """PrivToT: the Test of Tests of Kazan et al. (2023) around the non-private GCM (baseline).

    The rows are split at random into ``n_subsets`` disjoint parts of sizes
    floor(n/m) and ceil(n/m); :func:`privci.gcm` is run on each part and
    rejects when its p-value is at most ``alpha0``; the number of rejections
    T (an integer in 0..m) is released with Tulap noise and tested with the
    differentially private binomial test of Awan & Slavkovic (2018), as in
    Kazan et al.'s Algorithm 1.  This is the "PrivToT" baseline of
    Kalemaj, Kasiviswanathan & Ramdas, who used m = 10 subsets.

    Parameters
    ----------
    x, y, z : array-like
        x (n,) or (n, p); y (n,) or (n, q); z (n, d) or (n,).
    epsilon : float
        Privacy parameter (> 0).  The released (statistic, p-value) is
        epsilon-DP under replacement of one row (x_i, y_i, z_i).
    n_subsets : int, default 10
        m, the number of disjoint subsets (needs n >= 3 m).
    alpha : float, default 0.05
        Level of the private test; used only to choose the default ``alpha0``.
    alpha0 : float in (0, 1) or None
        Level at which the GCM is run on each subset.  None uses
        :func:`tot_default_alpha0` (n_subsets, epsilon, alpha): Kazan et al.'s
        power-based choice for an unknown effect (see its docstring).
    rng : None, int or numpy Generator
        None: the privacy noise is OpenDP's exact discrete Laplace sampler
        (hardened) and the other randomness (subset assignment, the uniform
        part of the Tulap noise) comes from fresh OS entropy.  Given: all
        randomness comes from numpy with this generator (reproducible, not
        hardened; the result says so).
    **gcm_kwargs
        Passed to :func:`privci.gcm` on every subset (e.g. ``ridge_lambda``,
        ``kernel_sigma``, ``alternative``, ``n_sim``); each subset's GCM gets
        its own generator spawned from ``rng``.  A subset whose GCM warns is
        silenced; one whose GCM raises counts as undefined (a uniform p-value).
        They are checked on a tiny public probe before anything touches the
        data, so a bad option fails with its own message.  With the GCM defaults,
        ``ridge_lambda`` is chosen by 10-fold cross-validation inside each
        subset, which the guarantee covers (it only sees that subset).

    Returns
    -------
    PrivateTestResult
        ``statistic`` is the released noisy count Z = T + L + U,
        ``pvalue`` = P(Binom(m, alpha0) + Tulap >= Z), ``alternative`` is the
        GCM's alternative on the subsets, and ``privacy`` the record.  The
        un-noised count and the subset p-values are not stored.

    Notes
    -----
    *Mechanism and epsilon accounting.*  Under replacement of one row, only
    the subset that contains that row changes (the assignment is drawn
    independently of the data), so at most one subset decision flips and T
    changes by at most 1 (sensitivity 1, integer-valued).  L is discrete
    Laplace with P(L = k) proportional to exp(-epsilon |k|) (geometric
    mechanism), which makes T + L epsilon-DP; U ~ Uniform(-1/2, 1/2) is
    independent of the data, so Z = T + L + U (a Tulap(T, exp(-epsilon), 0)
    draw) and the p-value are post-processing.  The whole budget epsilon is
    spent on this one release.

    *Level.*  If each subset test has exact level alpha0, T ~ Binom(m,
    alpha0) under the null and the p-value is exactly uniform (Awan &
    Slavkovic).  The GCM is only asymptotically valid, and on n/m points its
    level can exceed alpha0 when the regressions are hard (large s in the
    paper's simulation); ToT then inherits the excess, which is what the
    paper under test reports.  Following Kazan et al.'s implementation, a
    subset whose GCM statistic is undefined (zero variance) is given a
    Uniform(0, 1) p-value.

    References
    ----------
    Z. Kazan, K. Shi, A. Groce, A. Bray (2023). The Test of Tests: A Framework
    for Differentially Private Hypothesis Testing. ICML 2023, arXiv:2302.04260.

    J. Awan, A. Slavkovic (2018). Differentially Private Uniformly Most
    Powerful Tests for Binomial Data. NeurIPS 2018.

    I. Kalemaj, S. P. Kasiviswanathan, A. Ramdas. Differentially Private
    Conditional Independence Testing (PrivToT baseline, k = 10).

    Examples
    --------
    >>> import numpy as np
    >>> from privci.baselines import privtot
    >>> rng = np.random.default_rng(0)
    >>> z = rng.normal(size=600); x = z + rng.normal(size=600); y = z + rng.normal(size=600)
    >>> res = privtot(x, y, z, epsilon=2.0, rng=1, ridge_lambda=0.1)
    >>> res.privacy.sensitivity, res.privacy.hardened, 0 <= res.pvalue <= 1
    (1.0, False, True)
    """
    eps = V.positive_finite(epsilon, "epsilon")
    m = V.check_int(n_subsets, "n_subsets", 1)
    alpha = _probability(alpha, "alpha")
    alpha0 = _probability(alpha0, "alpha0", allow_none=True)
    user_rng = None if rng is None else V.check_rng(rng)
    xa = V.as_data(x, "x")
    ya = V.as_data(y, "y")
    za = V.as_data(z, "z")
    n = V.check_same_rows(x=xa, y=ya, z=za)
    V.check_min_n(n, 3 * m, f"PrivToT with n_subsets = {m} (at least 3 rows per subset)")
    if alpha0 is None:
        alpha0 = tot_default_alpha0(m, eps, alpha)
    _check_gcm_options(gcm_kwargs, za.shape[1], xa.shape[1], ya.shape[1])
    composition = _charge(budget, eps, test="privtot", details=f"{m} subsets")
    other = _numpy_or_fresh(user_rng)

    # data-independent assignment: sizes floor(n/m) and ceil(n/m)
    labels = other.permutation(np.arange(n) % m)
    alternative = gcm_kwargs.get("alternative", "two-sided")
    count = _tot_count(xa, ya, za, labels, m, alpha0, gcm_kwargs, other.spawn(m))

    noise, scale, hardened, mech = _discrete_laplace(eps, user_rng)
    released = count + noise + other.uniform(-0.5, 0.5)
    del count
    pval = _tot_pvalue(released, m, alpha0, eps)

    caveats = [
        "baseline: the p-value is exact only if every subset GCM has exact level alpha0; the "
        "GCM is asymptotic, so on n/m rows with hard regressions the test can exceed its level.",
        f"alpha0 = {alpha0:g} chosen from public parameters only (Kazan et al.'s power rule).",
        "the uniform part of the Tulap noise and the subset assignment come from numpy; they "
        "are independent of the data (post-processing / data-independent), so the guarantee "
        "rests on the discrete Laplace draw alone.",
    ]
    if not hardened:
        caveats.append(SEEDED_CAVEAT)
    record = PrivacyRecord(
        composition=composition,
        epsilon=eps, mechanism=f"Tulap: {mech} + Uniform(-1/2, 1/2)", sensitivity=1.0,
        noise_scale=scale, hardened=hardened, ridge_lambda=None, kernel_sigma=None, bounds={},
        releases=(Release(f"rejection count of {m} subset tests", eps, 1.0, scale,
                          f"Tulap: {mech} + Uniform(-1/2, 1/2)"),),
        guarantee=(f"(statistic, pvalue) is {eps:g}-differentially private under replacement of "
                   "one row (x_i, y_i, z_i): the rejection count has sensitivity 1 and gets "
                   "discrete Laplace noise"
                   + ("" if hardened else " (seeded numpy sampler, not hardened: private only "
                      "if the seed is secret, fresh and never reused; for simulation studies)")),
        caveats=tuple(caveats))
    return PrivateTestResult(
        statistic=float(released), pvalue=pval, alternative=alternative,
        method=(f"Baseline: PrivToT, Test of Tests (Kazan et al. 2023) around the GCM "
                f"(m = {m} subsets, alpha0 = {alpha0:g})"),
        n=n, privacy=record, statistic_name="noisy rejection count (Tulap)")


# =========================================================================== private Kendall

def _pair_sign_sum(x, y):
    """S = sum_{i<j} sign(x_i - x_j) sign(y_i - y_j) (concordant minus discordant; ties count 0)."""
    k = x.shape[0]
    if k < 2:
        return 0
    total = 0
    block = max(1, 2_000_000 // k)
    for start in range(0, k, block):
        stop = min(k, start + block)
        # signs by comparison: exact, and no overflow warning for extreme values
        xa, ya = x[start:stop, None], y[start:stop, None]
        sx = (xa > x[None, :]).astype(np.int8) - (xa < x[None, :]).astype(np.int8)
        sy = (ya > y[None, :]).astype(np.int8) - (ya < y[None, :]).astype(np.int8)
        total += int(np.sum(sx.astype(np.int64) * sy, dtype=np.int64))
    return total // 2   # every unordered pair was counted twice


def _strata_weights(sizes):
    """w(m) = 1 / sigma_0^2(m) = 9 m (m - 1) / (4 m + 10), the inverse null variance of tau_a."""
    sizes = np.asarray(sizes, dtype=np.float64)
    return 9.0 * sizes * (sizes - 1.0) / (4.0 * sizes + 10.0)


def kendall_statistic(x, y, labels):
    """Wang, Pang & Song's conditional Kendall statistic and its sensitivity (un-noised).

    T = sum_k w_k tau_k / sqrt(sum_k w_k), with tau_k Kendall's tau-a in
    stratum k and w_k = 9 n_k (n_k - 1) / (4 n_k + 10).  Returns
    ``(T, sensitivity)`` where ``sensitivity`` is the bound used by
    :func:`private_kendall` for replacing one row's (x_i, y_i) with the strata
    held fixed (see its Notes).  Internal transformation: never release T.
    """
    x = np.asarray(x, dtype=np.float64).ravel()
    y = np.asarray(y, dtype=np.float64).ravel()
    labels = np.asarray(labels).ravel()
    n = x.shape[0]
    uniq, inv, sizes = np.unique(labels, return_inverse=True, return_counts=True)
    w = _strata_weights(sizes)
    W = float(np.sum(w))
    if not W > 0:
        raise ValueError("every stratum has a single row, so the conditional Kendall statistic "
                         "is undefined; use fewer clusters (`n_clusters`) or more data.")
    num = 0.0
    order = np.argsort(inv, kind="stable")
    bounds = np.concatenate([[0], np.cumsum(sizes)])
    for k in range(uniq.shape[0]):
        if sizes[k] < 2:
            continue
        rows = order[bounds[k]:bounds[k + 1]]
        S = _pair_sign_sum(x[rows], y[rows])
        num += 18.0 * S / (4.0 * sizes[k] + 10.0)          # = w_k tau_k
    stat = num / math.sqrt(W)
    nmax = float(sizes.max())
    exact = 36.0 * (nmax - 1.0) / ((4.0 * nmax + 10.0) * math.sqrt(W))
    return stat, max(exact, 6.0 / math.sqrt(n))


def _normal_laplace_sf(t, b):
    """P(N + L >= t) for N ~ N(0, 1) and L ~ Laplace(0, b), computed in log space."""
    lam = 1.0 / b
    # P(N + L <= t) = Phi(t) - 1/2 e^{lam^2/2 - lam t} Phi(t - lam) + 1/2 e^{lam^2/2 + lam t} Phi(-t - lam)
    a = math.exp(0.5 * lam * lam - lam * t + log_ndtr(t - lam))
    c = math.exp(0.5 * lam * lam + lam * t + log_ndtr(-t - lam))
    cdf = ndtr(t) - 0.5 * a + 0.5 * c
    return float(min(1.0, max(0.0, 1.0 - cdf)))


def _pvalue_normal_laplace(stat, b, alternative):
    if alternative == "greater":
        return _normal_laplace_sf(stat, b)
    if alternative == "less":
        return _normal_laplace_sf(-stat, b)
    return float(min(1.0, 2.0 * _normal_laplace_sf(abs(stat), b)))


def private_kendall(x, y, z, *, epsilon, n_clusters=100, categorical_z=False,
                    alternative="two-sided", rng=None, budget=None):
    """Private conditional Kendall's tau test of Wang, Pang & Song (2020) (baseline).

    Z is turned into strata -- its distinct values when ``categorical_z`` is
    True (the setting of the original test), otherwise k-means clusters
    (scikit-learn ``KMeans(n_clusters)``), which is how Kalemaj,
    Kasiviswanathan & Ramdas adapted the test to continuous Z.  Within each
    stratum k Kendall's tau-a is computed, the strata are combined with
    inverse-null-variance weights w_k = 9 n_k (n_k - 1) / (4 n_k + 10) into
    T = sum_k w_k tau_k / sqrt(sum_k w_k) (asymptotically N(0, 1) under
    conditional independence), Laplace noise of scale sensitivity / epsilon is
    added, and the p-value is computed from the N(0, 1) * Laplace null
    distribution of the released value.

    Parameters
    ----------
    x, y : array-like, shape (n,)
        Univariate.
    z : array-like, shape (n, d) or (n,)
    epsilon : float
        Privacy parameter (> 0); see the guarantee in Notes.
    n_clusters : int, default 100
        Number of k-means strata for continuous Z (ignored when
        ``categorical_z``).
    categorical_z : bool, default False
        Use the distinct rows of z as strata (no clustering).
    alternative : {"two-sided", "greater", "less"}
    rng : None, int or numpy Generator
        None: OpenDP's hardened Laplace sampler (k-means seeded from fresh
        entropy).  Given: numpy noise and k-means seed from this generator
        (reproducible, not hardened).

    Returns
    -------
    PrivateTestResult
        ``statistic`` = T + Laplace noise, ``pvalue`` from its null
        distribution, and the ``privacy`` record.

    Notes
    -----
    *Statistic.*  Since tau_k = 2 S_k / (n_k (n_k - 1)) with S_k = concordant
    minus discordant pairs, w_k tau_k = 18 S_k / (4 n_k + 10).  This is the
    statistic of Wang, Pang & Song's released implementation (Priv-PC), with
    tau-a, and with every stratum of size >= 2 kept (strata of size 1 have
    w = 0); Priv-PC also skips strata where tau is undefined because of
    ties, which would make the weights depend on x and y.

    *Sensitivity.*  Replace one row's (x_i, y_i) and keep the strata (its z_i)
    fixed.  Only S_k of its stratum changes, by at most 2 (n_k - 1) (each of
    its n_k - 1 pairs can flip from concordant to discordant), so
    |T - T'| <= 36 (n_k - 1) / ((4 n_k + 10) sqrt(W)), W = sum_k w_k; the
    maximum over k is at the largest stratum, and the bound is attained.
    Wang, Pang & Song use 6 / sqrt(n), the limit of this bound for many equal
    large strata (W ~ 9 n / 4); it can be smaller than the exact bound when
    strata are unequal.  The noise is calibrated to the larger of the two, so
    it is never smaller than theirs.  The bound depends on the stratum sizes,
    so it is a valid global sensitivity only when the strata are public.

    *Guarantee.*  Hence the release is epsilon-DP with respect to replacing
    one row's (x_i, y_i) **when the strata (z) are public** -- the categorical
    setting of the original test.  It gives **no** guarantee for z: the
    stratum sizes enter the noise scale, moving a row between strata changes
    the weights, and with continuous Z the k-means clustering is computed on
    the private z without any noise.  The paper under test used it this way
    as a baseline; the record's caveats say so.

    *p-value.*  Priv-PC perturbs the one-sided normal tail of |T| with
    Laplace noise; here the noise is added to T and the p-value is the tail
    of N(0, 1) + Laplace(0, b) at the released value (two-sided by default),
    a post-processing that accounts for the noise.  At the paper's n = 10^4
    the noise is small either way; the failure of type-I control with
    continuous Z comes from the clustering (residual dependence on Z within a
    cluster), not from the noise.

    References
    ----------
    L. Wang, Q. Pang, D. Song (2020). Towards Practical Differentially Private
    Causal Graph Discovery. NeurIPS 2020, arXiv:2006.08598.

    I. Kalemaj, S. P. Kasiviswanathan, A. Ramdas. Differentially Private
    Conditional Independence Testing (private Kendall baseline with 100
    k-means clusters).

    Examples
    --------
    >>> import numpy as np
    >>> from privci.baselines import private_kendall
    >>> rng = np.random.default_rng(0)
    >>> z = rng.integers(0, 4, size=1000)
    >>> x = z + rng.normal(size=1000); y = z + rng.normal(size=1000)
    >>> res = private_kendall(x, y, z, epsilon=2.0, categorical_z=True, rng=3)
    >>> res.privacy.hardened, 0 <= res.pvalue <= 1
    (False, True)
    """
    eps = V.positive_finite(epsilon, "epsilon")
    V.check_alternative(alternative)
    if not isinstance(categorical_z, (bool, np.bool_)):
        raise TypeError(f"`categorical_z` must be True or False; got {categorical_z!r} instead.")
    k = V.check_int(n_clusters, "n_clusters", 1)
    user_rng = None if rng is None else V.check_rng(rng)
    xa = V.as_data(x, "x", min_rows=2)
    ya = V.as_data(y, "y", min_rows=2)
    za = V.as_data(z, "z", min_rows=2)
    n = V.check_same_rows(x=xa, y=ya, z=za)
    for name, arr in (("x", xa), ("y", ya)):
        if arr.shape[1] != 1:
            raise ValueError(f"`{name}` must be univariate for the Kendall test; "
                             f"got {arr.shape[1]} columns instead.")
    if not categorical_z and k > n:
        raise ValueError(f"`n_clusters` must be at most the number of rows ({n}); got {k} instead.")
    composition = _charge(budget, eps, test="private_kendall",
                          details="strata public, z not protected")
    if categorical_z:
        _, labels = np.unique(za, axis=0, return_inverse=True)
        strata = "distinct values of z (categorical)"
    else:
        from sklearn.cluster import KMeans

        seed = int(_numpy_or_fresh(user_rng).integers(2**31 - 1))
        with quiet():
            labels = KMeans(n_clusters=k, n_init="auto", random_state=seed).fit_predict(za)
        strata = f"k-means clusters of z (n_clusters = {k})"
    with quiet():
        stat, sens = kendall_statistic(xa[:, 0], ya[:, 0], labels)
    noisy, info = laplace_mechanism(np.array([stat]), sens, eps, user_rng)
    del stat
    released = float(noisy[0])
    pval = _pvalue_normal_laplace(released, info.scale, alternative)

    caveats = [
        "baseline: the guarantee protects (x_i, y_i) only, with the strata treated as public; "
        "z is not protected (stratum sizes set the noise scale and weights).",
        "the statistic is asymptotically N(0, 1) only within exact strata of a categorical Z; "
        "with clustered continuous Z it is biased and the test need not control type-I error.",
    ]
    if not categorical_z:
        caveats.insert(0, "k-means clustering of z is computed on the private data without "
                          "privacy protection: NOT covered by the epsilon guarantee.")
    if not info.hardened:
        caveats.append(SEEDED_CAVEAT)
    record = PrivacyRecord(
        composition=composition,
        epsilon=eps, mechanism=info.mechanism, sensitivity=float(sens), noise_scale=info.scale,
        hardened=info.hardened, ridge_lambda=None, kernel_sigma=None, bounds={},
        releases=(Release("conditional Kendall statistic", eps, float(sens), info.scale,
                          info.mechanism),),
        guarantee=(f"(statistic, pvalue) is {eps:g}-differentially private under replacement of "
                   "one row's (x_i, y_i) with the strata held fixed and public"
                   + ("" if info.hardened else ", for idealised real-valued Laplace noise, and "
                      "only if the seed is secret, fresh and never reused (simulation studies)")
                   + "; there is no guarantee for z"),
        caveats=tuple(caveats))
    return PrivateTestResult(
        statistic=released, pvalue=pval, alternative=alternative,
        method=("Baseline: private conditional Kendall's tau test (Wang, Pang & Song 2020), "
                f"strata = {strata}"),
        n=n, privacy=record, statistic_name="noisy conditional Kendall statistic")
