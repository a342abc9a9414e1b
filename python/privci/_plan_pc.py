"""Plan a whole private PC run from public numbers only (:func:`plan_pc`, :class:`PCPlan`).

Re-exported by :mod:`privci.plan` (``from privci.plan import plan_pc``) and as
``privci.plan_pc``.  Nothing here reads data.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

import numpy as np

from . import _validation as V

__all__ = ["plan_pc", "PCPlan"]


# --- a whole PC run (issue 24) ------------------------------------------------------------

_PC_METHODS = ("release", "sieve", "per-test")


@dataclass(frozen=True)
class PCPlan:
    """The answer of :func:`plan_pc`: what one private PC run can resolve, from public numbers.

    Attributes
    ----------
    method : str
    n, n_variables : int
    epsilon, alpha : float
    per_query_epsilon : float
        ``"release"``: the release's epsilon (every query is post-processing of it);
        ``"sieve"``: one (AboveThreshold, examination) round; ``"per-test"``: one
        order-0 test under the "levels" split.
    noise_scale : float
        ``"release"``: the Laplace scale of each released entry (the linear rung's
        ((V + 1/2)^2 + V) / (2 epsilon), the additive rung's (V^2 + V) / epsilon);
        ``"sieve"``: the scale of the sieve's query noise, 4 / (k eps_1);
        ``"per-test"``: nan.
    orders : tuple of dict
        One dict per conditioning-set size l: ``detectable_correlation`` (the partial
        correlation detected with probability about 1/2), ``resolvable`` (a test of this
        size may remove an edge: under the power rule for ``"release"``), ``power`` (the
        approximate power against a partial correlation ``effect``), and for
        ``"release"`` ``untrusted`` (the share of fail-safe answers in the planning draws).
    resolvable_orders : tuple of int
    power_class : str
        "adequate" (orders 0, 1 and 2, or all there are, resolvable), "partial" (order 0
        resolvable, some of 1-2 not: PC keeps edges that need larger separating sets), or
        "inadequate" (order 0 not resolvable: PC keeps nearly every edge).
    details : str
    statistics : str or None
        ``"release"``: the rung planned ("linear", pc's default, or "additive").
    clip : float or None
        The linear rung's clip (a fraction of the bounds) from the public rule.
    untested : str
        Empty when the plan is adequate; otherwise what PC will return before anything
        is spent: which edges stay *untested* (kept only because no test can remove
        them; pc reports them in ``res.untested``) and the smallest epsilon and n that
        would make the plan adequate.
    smallest_epsilon, smallest_n : float or None
        ``"release"``: the smallest epsilon (at this n) and the smallest n (at this
        epsilon), on a grid of factors 1.25 up to 4096 times the given value, at which
        the plan is adequate; None when it already is, inf when the grid does not reach it.
    """

    method: str
    n: int
    n_variables: int
    epsilon: float
    alpha: float
    per_query_epsilon: float
    noise_scale: float
    orders: tuple
    resolvable_orders: tuple
    power_class: str
    details: str = ""
    statistics: object = None
    clip: object = None
    untested: str = ""
    smallest_epsilon: object = None
    smallest_n: object = None

    def __str__(self):
        rung = f", {self.statistics} rung" if self.statistics else ""
        lines = [f"PC plan ({self.method}{rung}): n={self.n}, {self.n_variables} variables, "
                 f"epsilon={self.epsilon:g}: {self.power_class}"]
        for o in self.orders:
            lines.append(f"  |S|={o['order']}: detectable partial correlation "
                         f"{o['detectable_correlation']:.3g}, power {o['power']:.2f}, "
                         + ("resolvable" if o["resolvable"] else "cannot remove edges"))
        if self.untested:
            lines.append("  " + self.untested)
        return "\n".join(lines)


def plan_pc(n, n_variables, epsilon, *, method="release", alpha=0.05, power_rule="default",
            max_order=None, effect=0.3, knots=None, block_rows=None, max_removals=None,
            draws=5, rng=0, statistics="linear", clip="auto"):
    """Plan a whole private PC run from public numbers only: what can it resolve?

    Nothing here reads data.  For ``method="release"`` (``privci.causal.pc``'s default)
    the release of the chosen rung (``statistics``: the linear rung's moments, pc's
    default, clipped by the public rule ``privci.release.linear_clip``, or the
    additive rung's hat Gram matrices) is emulated from its expectation under
    independent standard-normal columns with 4-sd bounds plus the release's Laplace
    noise, and the release's own test is asked, for each conditioning-set size l,
    how large a partial correlation it detects with probability about 1/2 (the
    ``detectable_correlation`` that pc's power rule compares with ``power_rule``).
    Where the plan is not adequate, ``untested`` says, before anything is spent, which
    edges pc will keep *untested* and the smallest epsilon and n that would resolve
    them (``smallest_epsilon``, ``smallest_n``).
    Independent columns are the best case: a response explained at R^2 by S needs about
    1 / (1 - R^2) times the detectable correlation.  ``"sieve"``: the per-round epsilon,
    the block size and the chance that a null query survives the sieve and the
    examination.  ``"per-test"``: the order-0 test's epsilon under the "levels" split
    and PrivGCM's approximate power (:func:`plan`).

    Parameters
    ----------
    n : int
        Rows (>= 2).
    n_variables : int
        Columns V (>= 2).
    epsilon : float
        The run's total epsilon.
    method : {"release", "sieve", "per-test"}, default "release"
    alpha : float, default 0.05
    power_rule : float, None or "default"
        ``"release"``: pc's power rule (``"default"``: pc's default).
    max_order : int, optional
        Largest conditioning-set size planned (default min(V - 2, 3)).
    effect : float, default 0.3
        The partial correlation at which ``power`` is reported.
    knots, block_rows, max_removals
        As in :func:`privci.causal.pc` (release knots; the sieve's block size and
        number of rounds).
    draws : int, default 5
        Planning draws of the emulated release (``"release"``).
    rng : int, default 0
        Seed of the planning draws (synthetic; no privacy meaning).
    statistics : {"linear", "additive"}, default "linear"
        ``"release"``: the rung, as ``privci.causal.pc``'s ``statistics``.
    clip : "auto" or float in (0, 1]
        ``"release"`` with the linear rung: as ``privci.causal.pc``'s ``clip``.

    Returns
    -------
    PCPlan

    Examples
    --------
    >>> from privci.plan import plan_pc
    >>> pl = plan_pc(10_000, 5, 5.0)
    >>> pl.power_class, pl.resolvable_orders[:2], pl.untested
    ('adequate', (0, 1), '')
    >>> low = plan_pc(1_000, 12, 1.0)
    >>> low.power_class, low.smallest_epsilon > 1.0
    ('inadequate', True)
    >>> "untested" in str(low)
    True
    """
    from scipy.special import ndtr

    n_ = V.check_int(n, "n", 2)
    V_ = V.check_int(n_variables, "n_variables", 2)
    eps = V.positive_finite(epsilon, "epsilon")
    if method not in _PC_METHODS:
        raise ValueError(f"`method` must be one of {_PC_METHODS}; got {method!r} instead.")
    if isinstance(alpha, bool) or not isinstance(alpha, numbers.Real) or not 0 < alpha < 1:
        raise ValueError(f"`alpha` must be a number in (0, 1); got {alpha!r} instead.")
    if isinstance(effect, bool) or not isinstance(effect, numbers.Real) or \
            not 0 < float(effect) < 1:
        raise ValueError(f"`effect` must be a partial correlation in (0, 1); got {effect!r} "
                         "instead.")
    top = min(V_ - 2, 3) if max_order is None else min(V.check_int(max_order, "max_order", 0),
                                                        V_ - 2)
    V.check_int(draws, "draws", 1)
    extra = {}
    if method == "release":
        from .release import (DEFAULT_KNOTS, DEFAULT_POWER_RULE, PC_STATISTICS, _check_clip,
                              _planned_orders, linear_clip)
        pr = DEFAULT_POWER_RULE if (isinstance(power_rule, str) and power_rule == "default") \
            else power_rule
        if pr is not None and (isinstance(pr, bool) or not isinstance(pr, numbers.Real)
                               or not 0 < float(pr) <= 1):
            raise ValueError(f"`power_rule` must be None, 'default' or a number in (0, 1]; got "
                             f"{power_rule!r} instead.")
        K = DEFAULT_KNOTS if knots is None else V.check_int(knots, "knots", 1)
        if K > 64:
            raise ValueError(f"`knots` must be an integer in [1, 64]; got {K} instead.")
        if not (isinstance(statistics, str) and statistics in PC_STATISTICS):
            raise ValueError(f"`statistics` must be one of {PC_STATISTICS}; got "
                             f"{statistics!r} instead.")
        width = _check_clip(clip)
        linear = statistics == "linear"

        def width_at(nn, ee):
            if not linear:
                return 1.0
            return linear_clip(nn, ee, V_) if width is None else width

        def run(nn, ee, tp, dr):
            return _planned_orders(nn, V_, ee, K, pr, tp, float(effect), dr, rng,
                                   statistics=statistics, clip=width_at(nn, ee))

        orders, scale = run(n_, eps, top, int(draws))
        per_q = eps
        extra = {"statistics": statistics, "clip": width_at(n_, eps) if linear else None}
        rung = (f"linear rung (first and second moments, clip {extra['clip']:g} of the "
                "bounds): Laplace scale ((V + 1/2)^2 + V) / (2 epsilon) = "
                if linear else "additive rung (hat Gram matrices): Laplace scale "
                "(V^2 + V) / epsilon = ")
        details = (f"one release, {rung}{scale:.3g} per entry; queries are free; power rule "
                   f"{pr}; independent standard-normal columns with 4-sd bounds (best case)")
    elif method == "sieve":
        from ._pc import SIEVE_BLOCK_ROWS, SIEVE_EXAMINE_SHARE, SIEVE_KNOTS, \
            SIEVE_THRESHOLD, sieve_epsilons
        m = SIEVE_BLOCK_ROWS if block_rows is None else V.check_int(block_rows, "block_rows", 10)
        c = V_ * (V_ - 1) // 2 if max_removals is None else V.check_int(
            max_removals, "max_removals", 1)
        k = max(2, n_ // m)
        split = sieve_epsilons(eps, c, SIEVE_EXAMINE_SHARE)
        e1, e2 = split["sieve"], split["examine"]
        gen = np.random.default_rng(rng)
        draws_mc = 20000
        thr = SIEVE_THRESHOLD + gen.laplace(0, 2.0 / (k * e1), draws_mc)

        def p_remove(q):
            above = q + gen.laplace(0, 4.0 / (k * e1), draws_mc) >= thr
            exam = q + gen.laplace(0, 1.0 / (k * e2), draws_mc) >= SIEVE_THRESHOLD
            return float(np.mean(above & exam))

        p_null = p_remove(1.0 - alpha)
        p_dep = p_remove(0.0)
        orders = []
        zq = 1.959964
        for o in range(top + 1):
            qz = 1 + o * SIEVE_KNOTS
            sd = 1.0 / math.sqrt(max(m - qz - 3, 1))
            det = zq * sd
            # a block votes "dependent" with probability pw; the query is 1 - pw
            pw_block = float(ndtr(float(effect) / sd - zq))
            orders.append({"order": o, "detectable_correlation": det,
                           "resolvable": bool(p_null >= 0.5),
                           "power": 1.0 - p_remove(1.0 - pw_block)})
        per_q = e1 + e2
        scale = 4.0 / (k * e1)
        details = (f"{c} rounds of epsilon {per_q:.3g} (sieve {e1:.3g}, examination "
                   f"{e2:.3g}); k = {k} blocks of {m} rows; a null query is removed with "
                   f"probability {p_null:.2f}, a clearly dependent one with {p_dep:.3f}")
    else:
        L = V_ - 2
        pairs = V_ * (V_ - 1) // 2
        per_q = eps / (L + 1) / pairs
        from .plan import plan
        pl = plan("privgcm", n=n_, epsilon=per_q, effect=float(effect), x_bound=4.0,
                  y_bound=4.0, alpha=alpha)
        zq = 1.959964
        orders = [{"order": 0, "detectable_correlation": math.nan,
                   "resolvable": bool(pl.power >= 0.5), "power": float(pl.power)}]
        scale = math.nan
        details = (f"order 0: {pairs} tests of epsilon {per_q:.3g} each ('levels' split); "
                   "later orders depend on the graph released so far")
    resolvable = tuple(o["order"] for o in orders if o["resolvable"])
    need = tuple(range(min(2, top) + 1))
    if 0 not in resolvable:
        cls = "inadequate"
    elif all(o in resolvable for o in need):
        cls = "adequate"
    else:
        cls = "partial"
    if method == "release" and cls != "adequate":
        top_need = need[-1]

        def adequate(nn, ee):
            got, _ = run(nn, ee, top_need, int(draws))
            return all(o["resolvable"] for o in got)

        def smallest(f):
            for k in range(1, 38):          # factors 1.25^k up to about 4096
                if f(1.25 ** k):
                    return 1.25 ** k
            return math.inf

        fe = smallest(lambda f: adequate(n_, eps * f))
        fn = smallest(lambda f: adequate(int(math.ceil(n_ * f)), eps))
        extra["smallest_epsilon"] = eps * fe
        extra["smallest_n"] = math.ceil(n_ * fn) if math.isfinite(fn) else math.inf
        first_bad = min(o["order"] for o in orders if not o["resolvable"])
        what = ("no test can remove an edge: pc will return the complete graph, every edge "
                "untested" if cls == "inadequate" else
                f"tests conditioning on {first_bad} or more columns cannot remove edges: "
                "edges that need such a separating set stay untested")
        extra["untested"] = (f"{what} (res.untested).  Adequate (|S| <= {top_need} "
                             f"resolvable) from epsilon = {extra['smallest_epsilon']:.3g} at "
                             f"n = {n_}, or n = {extra['smallest_n']:.6g} at epsilon = "
                             f"{eps:g}.")
    return PCPlan(method=method, n=n_, n_variables=V_, epsilon=eps, alpha=float(alpha),
                  per_query_epsilon=float(per_q), noise_scale=float(scale),
                  orders=tuple(orders), resolvable_orders=resolvable, power_class=cls,
                  details=details, **extra)
