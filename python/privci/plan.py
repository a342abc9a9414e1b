"""What power can I expect?  Approximate power, sample size and epsilon for PrivGCM and PrivCRT.

:func:`plan` answers the planning questions from public numbers only (n,
epsilon, the public bounds and an assumed effect size); it never touches data.
Give all of ``n``, ``epsilon`` and ``power`` but one: the missing one is
computed (the power, the smallest n, or the smallest epsilon).  The module
itself is callable, so ``privci.plan(...)`` (after ``import privci.plan``, or
lazily once ``privci`` lists it) and ``from privci.plan import plan`` are the
same function.

Approximations (the effect in units of the bounds: rho = effect /
(x_bound y_bound) and sigma = effect_sd / (x_bound y_bound), C the L1
sensitivity of the residual products):

* PrivGCM, one block per row (the paper's Algorithm 1, ``n_blocks=None``):
  the statistic is approximately N(sqrt(n) rho / sigma', 1) with
  sigma'^2 = sigma^2 + 2 (C / epsilon)^2.
* PrivGCM with k blocks (noisy block sums S_b + Laplace(C / epsilon), the t
  statistic of the k block means): approximately noncentral t with k - 1
  degrees of freedom and non-centrality
  n rho / sqrt(n sigma^2 + 2 k (C / epsilon)^2); critical value from t_{k-1}.
* PrivCRT (report-noisy-max over the rank scores of m + 1 statistics, Delta_T):
  a Monte Carlo under a Gaussian model, T_0 ~ N(n rho, n sigma^2) and the m
  resampled T_j ~ N(0, n tau^2), tau^2 = sigma^2 - rho^2 (the resamples break
  the dependence); ranks, scores -|Q_c - T_0| / (2 Delta_T) and exponential
  noise of scale 2 / epsilon exactly as in :func:`privci.privcrt`.

The effect is the mean of the product of the residuals r_X r_Y (data units),
i.e. E[Cov(X, Y | Z)] when the regressions are good; its standard deviation
``effect_sd`` defaults to that of Gaussian residuals with standard deviations
of a quarter of each bound (the "4-sd bounds" of the simulations):
sqrt((x_bound y_bound / 16)^2 + effect^2).  Clipping and the shrinkage of the
strongly regularised private regressions are not modelled: measure rho and
sigma on public pilot data where the regression matters (see the vignette
``vignettes/auto_bounds.py`` and ``tests/test_plan.py`` for the agreement with
simulations of ``privci.privgcm`` and ``privci.privcrt``).
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field

import numpy as np

from . import _validation as V

__all__ = ["plan", "PowerPlan", "plan_pc", "PCPlan"]

_TESTS = ("privgcm", "privcrt")


@dataclass(frozen=True)
class PowerPlan:
    """The answer of :func:`plan`.

    Attributes
    ----------
    test : str
    solved_for : {"power", "n", "epsilon"}
    n : int
    epsilon : float
    power : float
        The approximate power at (n, epsilon) (for solved n or epsilon: at
        the returned values, so at least the target).
    alpha : float
    effect, effect_sd : float
        In data units.
    rho, sigma : float
        The same in units of the bounds.
    sensitivity : float
        C (PrivGCM) or Delta_T (PrivCRT).
    n_blocks : int or None
        PrivGCM's number of blocks (None: one per row).
    noncentrality : float or None
        Mean of the statistic (PrivGCM).
    approximation : str
    details : dict
    """

    test: str
    solved_for: str
    n: int
    epsilon: float
    power: float
    alpha: float
    effect: float
    effect_sd: float
    rho: float
    sigma: float
    sensitivity: float
    n_blocks: object
    noncentrality: object
    approximation: str
    details: dict = field(default_factory=dict)

    def __repr__(self):
        fail = ("; the fit is not resolvable here, so privgcm's fail-safe returns p = 1"
                if self.details.get("resolvable") is False else "")
        return (f"PowerPlan({self.test}: n = {self.n}, epsilon = {self.epsilon:.4g}, "
                f"power = {self.power:.3f} at alpha = {self.alpha:g}; solved for "
                f"{self.solved_for}; {self.approximation}{fail})")


def _sensitivity(test, sensitivity, ridge_lambda):
    if sensitivity is None:
        sensitivity = "paper" if test == "privgcm" else "sharp"
    if isinstance(sensitivity, numbers.Real) and not isinstance(sensitivity, bool):
        return V.positive_finite(sensitivity, "sensitivity")
    if sensitivity not in ("sharp", "paper"):
        raise ValueError("`sensitivity` must be 'sharp', 'paper' or a positive number (the L1 "
                         f"sensitivity in units of the bounds); got {V._short(sensitivity)} "
                         "instead.")
    from . import regression
    fn = regression.gcm_sensitivity if test == "privgcm" else regression.crt_sensitivity
    lam = V.positive_finite(ridge_lambda, "ridge_lambda")
    try:
        return float(fn(lam, sensitivity))
    except TypeError:  # a version of privci with only the paper's constant
        if sensitivity == "paper":
            return float(fn(lam))
        raise ValueError("this version of privci has only sensitivity='paper'; got 'sharp'.") \
            from None


def _n_blocks(n_blocks, n):
    if n_blocks is None:
        return None
    if isinstance(n_blocks, str):
        if n_blocks != "auto":
            raise ValueError("`n_blocks` must be None, 'auto' or an integer >= 2; got "
                             f"{V._short(n_blocks)} instead.")
        return int(min(n, 20))  # privgcm's public rule (privci._private.auto_n_blocks)
    k = V.check_int(n_blocks, "n_blocks", 2)
    return int(min(k, n))


def _gcm_power(n, eps, rho, sigma, C, k, alpha, mode):
    """(power, noncentrality) of PrivGCM under the normal / noncentral-t approximation."""
    from scipy import stats
    if k is None:
        mu = math.sqrt(n) * rho / math.sqrt(sigma ** 2 + 2.0 * (C / eps) ** 2)
        if mode == 0:
            z = stats.norm.isf(alpha / 2)
            return float(stats.norm.sf(z - mu) + stats.norm.cdf(-z - mu)), mu
        z = stats.norm.isf(alpha)
        return float(stats.norm.sf(z - mu if mode == 1 else z + mu)), mu
    nc = n * rho / math.sqrt(n * sigma ** 2 + 2.0 * k * (C / eps) ** 2)
    df = k - 1

    def upper(c, delta):
        """P(T > c) for T noncentral t(df, delta)."""
        v = float(stats.nct.sf(c, df, delta))
        if not math.isfinite(v):  # scipy fails far in the tails: the normal approximation
            v = float(stats.norm.sf((c - delta) / math.sqrt(1.0 + c * c / (2.0 * df))))
        return min(1.0, max(0.0, v))

    if mode == 0:
        c = stats.t.isf(alpha / 2, df)
        return min(1.0, upper(c, nc) + upper(c, -nc)), nc
    c = stats.t.isf(alpha, df)
    return upper(c, nc if mode == 1 else -nc), nc


def _crt_power(n, eps, rho, sigma, D, m, alpha, mode, draws):
    """Monte Carlo power of PrivCRT under the Gaussian model (common random numbers)."""
    g0, gj, e = draws
    tau = math.sqrt(max(sigma ** 2 - rho ** 2, 0.0))
    t = np.empty((g0.shape[0], m + 1))
    t[:, 0] = n * rho + math.sqrt(n) * sigma * g0
    t[:, 1:] = math.sqrt(n) * tau * gj[:, :m]
    if mode == 0:
        t = np.abs(t)
    elif mode == 2:
        t = -t
    q = -np.sort(-t, axis=1)
    scores = -np.abs(q - t[:, :1]) / (2.0 * D)
    c_hat = np.argmax(scores + e[:, :m + 1] * (2.0 / eps), axis=1)
    p = (1.0 + c_hat) / (m + 1.0)
    return float(np.mean(p <= alpha))


def _spline_design(n, epsilon, d=1, assume_additive=False):
    """The spline rule's design at (n, epsilon) for d columns of z (one x and one y column)."""
    from ._spline import choose_design
    return choose_design(max(int(n), 4), int(d), 1, 1, float(epsilon),
                         assume_additive=bool(assume_additive))


def _spline_constant(n, epsilon, d=1, assume_additive=False):
    """C = 2 / (the test's share of epsilon) under the spline rule."""
    des = _spline_design(n, epsilon, d, assume_additive)
    return 2.0 * float(epsilon) / des.eps_test


def _spline_blocks(n_blocks, n, epsilon, d=1, assume_additive=False):
    """The block count privgcm uses: the spline rule's for "auto", else as given."""
    if n_blocks != "auto":
        return _n_blocks(n_blocks, n)
    return int(_spline_design(n, epsilon, d, assume_additive).k)


def _additive_hint(d, assume_additive):
    if d >= 2 and not assume_additive:
        return ("; without assume_additive=True no fit on two or more columns is "
                "certified (their interactions cannot be), so state it if E[X | Z] and "
                "E[Y | Z] are additive")
    return ""


def plan(test="privgcm", *, n=None, epsilon=None, power=None, effect, effect_sd=None,
         x_bound=1.0, y_bound=1.0, x_residual_bound=None, ridge_lambda=5.0,
         sensitivity=None, n_blocks=None, n_resamples=19, alpha=0.05,
         alternative="two-sided", n_mc=20000, rng=0, regression="spline", z_columns=1,
         assume_additive=False):
    """Approximate power of PrivGCM or PrivCRT, or the smallest n or epsilon for a target power.

    Parameters
    ----------
    test : {"privgcm", "privcrt"}
    n : int or None
        Sample size; None to solve for the smallest n reaching ``power``.
    epsilon : float or None
        The test's epsilon; None to solve for the smallest epsilon.
    power : float in (0, 1) or None
        None to compute the power at (n, epsilon); otherwise the target.
    effect : float
        The assumed mean of the product of the residuals r_X r_Y, in data
        units (e.g. beta for the paper's design, where r_X r_Y ~ N_X (N_Y +
        beta N_X)); its sign matters for one-sided alternatives.
    effect_sd : float or None
        Standard deviation of r_X r_Y (data units); default: Gaussian
        residuals of standard deviation bound / 4,
        sqrt((x_bound y_bound / 16)^2 + effect^2).
    x_bound, y_bound : float
        The public bounds (PrivCRT: ``x_residual_bound`` replaces ``x_bound``).
    x_residual_bound : float or None
        PrivCRT's bound on |x - E[X | Z]| (default: ``x_bound``).
    ridge_lambda : float, default 5.0
    sensitivity : {"sharp", "paper"}, float or None, default None
        The constant of :func:`privci.gcm_sensitivity` /
        :func:`privci.crt_sensitivity` at ``ridge_lambda``, or a number.
        None: the tests' defaults, "paper" for PrivGCM, "sharp" for PrivCRT.
    n_blocks : None, "auto" or int, default None
        PrivGCM's block aggregation: None is one block per row (the paper's
        Algorithm 1, privgcm's default when z is given); "auto" is
        min(n, 20) (privgcm's rule without z); an integer k >= 2.
    n_resamples : int, default 19
        PrivCRT's m.
    regression : {"spline", "krr"}, default "spline"
        PrivGCM's regression.  "spline" (privgcm's default with z): the
        products (residuals in [-1, 1]; privgcm divides them by a public scale
        c in [1, 2] from the released fit, which lowers the effect by up to 4x:
        not modelled here, part of the upper approximation) have sensitivity 2 and get
        the test's share of epsilon (``privci._spline.choose_design``'s rule at
        (n, epsilon) for one column of z) on the rule's number of block sums
        (5, 10 or 20), i.e. an effective constant C = 2 / share with
        ``n_blocks="auto"``;
        ``sensitivity`` and ``ridge_lambda`` are not used.  The released fit's
        own noise (accounted for by the test) is ignored here, so the power
        is an upper approximation (measured on the paper's design: 1.00 where
        this gives 1.00).  Where the rule cannot resolve the fit at (n,
        epsilon, ``z_columns``), privgcm's fail-safe returns p = 1, so the
        power is 0 here (``details["resolvable"]`` is False) and a solved n or
        epsilon is at least the smallest one the rule resolves.  "krr": the
        paper's mechanism with ``sensitivity``, ``ridge_lambda`` and
        ``n_blocks``.
    alpha : float, default 0.05
    alternative : {"two-sided", "greater", "less"}
    n_mc : int, default 20000
        Monte Carlo draws (PrivCRT), with common random numbers from ``rng``
        so that the power is a smooth, repeatable function of n and epsilon.
    rng : int or numpy Generator, default 0
    z_columns : int, default 1
        The number of columns of z (PrivGCM with ``regression="spline"``
        only): the rule's design, its epsilon split and whether it can
        resolve the fit depend on it.
    assume_additive : bool, default False
        As in :func:`privci.privgcm` (``regression="spline"`` only): the
        user's public assumption that E[X | Z] and E[Y | Z] are additive.
        Without it, two or more columns of z are resolvable only where the
        rule can fit their products.

    Returns
    -------
    PowerPlan

    Notes
    -----
    The smallest n and epsilon are found by bisection (n on the integers,
    epsilon to a relative precision of 10^-4).  A target that cannot be met
    raises ``ValueError``: e.g. PrivCRT with (1 + 0) / (m + 1) > alpha, or a
    power beyond the noise-free limit at the given n.

    Examples
    --------
    >>> from privci.plan import plan
    >>> p = plan("privgcm", n=10_000, epsilon=8.0, effect=1.0, x_bound=4, y_bound=5.7,
    ...          regression="krr")
    >>> round(p.power, 2)                      # Algorithm 1 (figure 4 measured 0.58)
    0.56
    >>> plan("privgcm", epsilon=8.0, power=0.8, effect=1.0, x_bound=4, y_bound=5.7,
    ...      regression="krr").n
    17564
    >>> round(plan("privgcm", n=10_000, power=0.8, effect=1.0, x_bound=4,
    ...            y_bound=5.7, regression="krr").epsilon, 1)
    10.6
    >>> p = plan("privgcm", n=10_000, epsilon=1.0, effect=0.1, x_bound=4, y_bound=4,
    ...          n_blocks=20, sensitivity="sharp", regression="krr")  # 20 noisy block sums
    >>> round(p.power, 2)
    0.7
    >>> p = plan("privgcm", n=10_000, epsilon=2.0, effect=1.0, x_bound=4, y_bound=5.7)
    >>> round(p.power, 2), p.n_blocks          # the default: the released spline fit
    (1.0, 10)
    >>> p = plan("privgcm", n=442, epsilon=8.0, effect=0.2, z_columns=3,
    ...          assume_additive=True)         # three columns of z at n = 442
    >>> p.power, p.details["resolvable"]       # privgcm's fail-safe: p = 1 whatever the data
    (0.0, False)
    >>> e = plan("privgcm", n=442, power=0.8, effect=0.2, z_columns=3, assume_additive=True)
    >>> e.details["resolvable"], e.epsilon > 8     # the smallest epsilon that resolves it
    (True, True)
    >>> round(plan("privcrt", n=1000, epsilon=2.0, effect=0.5, x_bound=4, y_bound=4).power, 2)
    0.96
    """
    if test not in _TESTS:
        raise ValueError(f"`test` must be one of {_TESTS}; got {V._short(test)} instead.")
    missing = [name for name, v in (("n", n), ("epsilon", epsilon), ("power", power))
               if v is None]
    if len(missing) != 1:
        raise ValueError("give exactly two of `n`, `epsilon` and `power` (the third is "
                         f"computed); got {3 - len(missing)} of them.")
    solve = missing[0]
    if n is not None:
        n = V.check_int(n, "n", 2)
    if epsilon is not None:
        epsilon = V.positive_finite(epsilon, "epsilon")
    if power is not None:
        if isinstance(power, bool) or not isinstance(power, numbers.Real) \
                or not 0.0 < float(power) < 1.0:
            raise ValueError(f"`power` must be a number in (0, 1); got {V._short(power)} instead.")
        power = float(power)
    if isinstance(effect, bool) or not isinstance(effect, numbers.Real) \
            or not math.isfinite(effect):
        raise TypeError(f"`effect` must be a finite number; got {V._short(effect)} instead.")
    effect = float(effect)
    xb = V.positive_finite(x_bound, "x_bound")
    yb = V.positive_finite(y_bound, "y_bound")
    if test == "privcrt" and x_residual_bound is not None:
        xb = V.positive_finite(x_residual_bound, "x_residual_bound")
    if effect_sd is None:
        effect_sd = math.sqrt((xb * yb / 16.0) ** 2 + effect ** 2)
    else:
        effect_sd = V.positive_finite(effect_sd, "effect_sd")
    if not isinstance(alpha, numbers.Real) or isinstance(alpha, bool) or not 0 < alpha < 1:
        raise ValueError(f"`alpha` must be in (0, 1); got {V._short(alpha)} instead.")
    alpha = float(alpha)
    mode = V.check_alternative(alternative)
    if regression not in ("spline", "krr"):
        raise ValueError("`regression` must be 'spline' or 'krr'; got "
                         f"{V._short(regression)} instead.")
    spline = test == "privgcm" and regression == "spline"
    z_columns = V.check_int(z_columns, "z_columns", 1)
    if not isinstance(assume_additive, (bool, np.bool_)):
        raise TypeError("`assume_additive` must be True or False; got "
                        f"{V._short(assume_additive)} instead.")
    assume_additive = bool(assume_additive)
    if not spline and (z_columns != 1 or assume_additive):
        raise ValueError("`z_columns` and `assume_additive` apply to test='privgcm' with "
                         f"regression='spline' only; got z_columns={z_columns}, "
                         f"assume_additive={assume_additive} with test={test!r}, "
                         f"regression={regression!r}.")
    if spline:
        if sensitivity is not None:
            raise ValueError("`sensitivity` applies to regression='krr' only; got "
                             f"{V._short(sensitivity)} with regression='spline'.")

        def C(nn, ee):
            return _spline_constant(nn, ee, z_columns, assume_additive)

        def resolvable(nn, ee):
            return bool(_spline_design(nn, ee, z_columns, assume_additive).certified)
        n_blocks = "auto" if n_blocks is None else n_blocks
    else:
        C = _sensitivity(test, sensitivity, ridge_lambda)

        def resolvable(nn, ee):
            return True
    rho, sigma = effect / (xb * yb), effect_sd / (xb * yb)
    details = {"alternative": alternative}

    if test == "privgcm":
        if n_blocks is not None and not isinstance(n_blocks, str):
            V.check_int(n_blocks, "n_blocks", 2)
        elif isinstance(n_blocks, str) and n_blocks != "auto":
            raise ValueError("`n_blocks` must be None, 'auto' or an integer >= 2; got "
                             f"{V._short(n_blocks)} instead.")

        def blocks(nn, ee):
            if callable(C):
                return _spline_blocks(n_blocks, nn, ee, z_columns, assume_additive)
            return _n_blocks(n_blocks, nn)

        def pw(nn, ee):
            if not resolvable(nn, ee):
                return 0.0          # the fail-safe: p = 1 whatever the data
            c = C(nn, ee) if callable(C) else C
            return _gcm_power(nn, ee, rho, sigma, c, blocks(nn, ee), alpha, mode)[0]
        approx = ("normal approximation N(sqrt(n) rho / sigma', 1), one block per row"
                  if n_blocks is None else
                  "noncentral t (k - 1 df) for the t statistic of k noisy block means")
    else:
        m = V.check_int(n_resamples, "n_resamples", 1)
        if 1.0 / (m + 1.0) > alpha:
            raise ValueError(f"PrivCRT with n_resamples = {m} cannot reject at alpha = {alpha:g}: "
                             f"its smallest p-value is 1 / {m + 1}.")
        n_mc = V.check_int(n_mc, "n_mc", 100)
        g = V.check_rng(rng)
        draws = (g.standard_normal(n_mc), g.standard_normal((n_mc, m)),
                 g.standard_exponential((n_mc, m + 1)))

        def pw(nn, ee):
            return _crt_power(nn, ee, rho, sigma, C, m, alpha, mode, draws)
        approx = (f"Monte Carlo ({n_mc} draws) of report-noisy-max over ranks, Gaussian model "
                  "of T_0 and the resamples")
        details["n_resamples"] = m

    if solve == "power":
        pval = pw(n, epsilon)
    elif solve == "n":
        limit = pw(10 ** 9, epsilon)
        if not resolvable(10 ** 9, epsilon):
            raise ValueError(f"power {power:g} is out of reach at epsilon = {epsilon:g}: the "
                             f"released regression on {z_columns} columns of z is not "
                             "resolvable even at n = 10^9 (privgcm's fail-safe returns "
                             f"p = 1){_additive_hint(z_columns, assume_additive)}.")
        if limit < power:
            raise ValueError(f"power {power:g} is out of reach at epsilon = {epsilon:g}: even "
                             f"n = 10^9 gives about {limit:.3f}.")
        lo, hi = 2, 2
        while pw(hi, epsilon) < power:
            lo, hi = hi, hi * 2
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if pw(mid, epsilon) >= power:
                hi = mid
            else:
                lo = mid
        n = hi if pw(lo, epsilon) < power else lo
        pval = pw(n, epsilon)
    else:
        limit = pw(n, 1e6)
        if not resolvable(n, 1e6):
            raise ValueError(f"power {power:g} is out of reach at n = {n}: the released "
                             f"regression on {z_columns} columns of z is not resolvable even "
                             "at epsilon = 10^6 (privgcm's fail-safe returns p = 1)"
                             f"{_additive_hint(z_columns, assume_additive)}.")
        if limit < power:
            raise ValueError(f"power {power:g} is out of reach at n = {n}: even without privacy "
                             f"noise the approximation gives about {limit:.3f}; increase n.")
        lo, hi = 1e-6, 1e6
        while hi / lo > 1.0 + 1e-4:
            mid = math.sqrt(lo * hi)
            if pw(n, mid) >= power:
                hi = mid
            else:
                lo = mid
        epsilon = hi
        pval = pw(n, epsilon)
    k = blocks(n, epsilon) if test == "privgcm" else None
    if spline:
        details["z_columns"] = z_columns
        details["assume_additive"] = assume_additive
        details["resolvable"] = resolvable(n, epsilon)
    if callable(C):
        C = C(n, epsilon)
    nc = _gcm_power(n, epsilon, rho, sigma, C, k, alpha, mode)[1] if test == "privgcm" else None
    return PowerPlan(test=test, solved_for=solve, n=int(n), epsilon=float(epsilon),
                     power=float(pval), alpha=alpha, effect=effect, effect_sd=float(effect_sd),
                     rho=rho, sigma=sigma, sensitivity=C, n_blocks=k, noncentrality=nc,
                     approximation=approx, details=details)


# --- a whole PC run (issue 24): privci._plan_pc, re-exported here ------------------------

from ._plan_pc import PCPlan, plan_pc  # noqa: E402,F401


class _CallableModule(__import__("types").ModuleType):
    """``privci.plan(...)`` calls :func:`plan` whether ``privci.plan`` is this module or the function."""

    def __call__(self, *args, **kwargs):
        return plan(*args, **kwargs)


__import__("sys").modules[__name__].__class__ = _CallableModule
