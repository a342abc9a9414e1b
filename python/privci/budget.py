"""A privacy budget for many private tests on one data set.

A causal-discovery run (PC, FCI) asks hundreds of conditional-independence
questions of the same data.  Each private test is epsilon_i-DP on its own; the
budget accounts for all of them together.  One :class:`PrivacyBudget` belongs
to one data set: create it once, pass it to every private test (``budget=``),
and every release is charged *before* anything is computed from the data.  A
release that would overspend raises :class:`BudgetExceededError`, is not
recorded, and nothing is computed or released for it.

The accounting is OpenDP's own: a fully adaptive composition odometer
(``make_fully_adaptive_composition``) wrapped in a privacy filter
(``make_privacy_filter``), either for pure DP (``max_divergence``, basic
sequential composition, valid when each epsilon_i is chosen adaptively from
earlier releases) or for zero-concentrated DP (each epsilon_i-DP release
counts as rho_i = epsilon_i^2 / 2, converted to (epsilon, delta)-DP by
OpenDP's ``make_zCDP_to_approxDP``); zCDP spends the total better when the
number of tests is large (see :meth:`PrivacyBudget.per_test_epsilon`).
"""

from __future__ import annotations

import math
import threading
from fractions import Fraction

__all__ = ["PrivacyBudget", "BudgetExceededError"]

_COMPOSITIONS = ("pure", "zcdp")


class BudgetExceededError(ValueError):
    """A release would exceed the privacy budget; nothing was computed or released."""


def _dp():
    # the OpenDP core modules only: ``opendp.prelude`` also imports scikit-learn (~3 s)
    import types

    from opendp import combinators, domains, measurements, measures, metrics, mod

    mod.enable_features("contrib")
    return types.SimpleNamespace(c=combinators, m=measurements, measures=measures,
                                 domain=domains.atom_domain(T=float, nan=False),
                                 metric=metrics.absolute_distance(T=float),
                                 OpenDPException=mod.OpenDPException)


def _up_add(a, b):
    """a + b rounded up to a float (the sum a conservative accountant would keep)."""
    s = a + b
    if Fraction(s) < Fraction(a) + Fraction(b):
        s = math.nextafter(s, math.inf)
    return s


def _pure_measurement(dp, epsilon):
    """An OpenDP Laplace measurement on the placeholder whose map(1) is the least float >= epsilon.

    The measurement stands for the private test in the filter's accounting;
    it only ever sees a constant placeholder, never the data.
    """
    scale = 1.0 / epsilon
    meas = dp.m.make_laplace(dp.domain, dp.metric, scale=scale)
    while meas.map(1.0) < epsilon:
        scale = math.nextafter(scale, 0.0)
        meas = dp.m.make_laplace(dp.domain, dp.metric, scale=scale)
    for _ in range(64):   # step to the least map >= epsilon (OpenDP rounds the map up)
        wider = dp.m.make_laplace(dp.domain, dp.metric, scale=math.nextafter(scale, math.inf))
        if wider.map(1.0) < epsilon:
            break
        scale, meas = math.nextafter(scale, math.inf), wider
    return meas


def _zcdp_to_epsilon(dp, rho, delta):
    """OpenDP's (epsilon, delta) conversion of rho-zCDP (0 for rho = 0)."""
    if rho <= 0.0:
        return 0.0
    gauss = dp.m.make_gaussian(dp.domain, dp.metric, scale=1.0 / math.sqrt(2.0 * rho))
    # the Gaussian's own map may round rho up by an ulp: conservative
    return dp.c.make_fix_delta(dp.c.make_zCDP_to_approxDP(gauss), delta).map(1.0)[0]


def _rho_for(dp, epsilon, delta):
    """The largest rho (to a relative 1e-12) whose (epsilon, delta) conversion is <= epsilon."""
    lo, hi = 0.0, max(epsilon, 1.0)
    while _zcdp_to_epsilon(dp, hi, delta) <= epsilon:   # pragma: no cover - hi = epsilon suffices
        lo, hi = hi, 2.0 * hi
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if _zcdp_to_epsilon(dp, mid, delta) <= epsilon:
            lo = mid
        else:
            hi = mid
        if hi - lo <= 1e-12 * hi:
            break
    return lo


def _fmt(v):
    return f"{v:.6g}"


class PrivacyBudget:
    """A privacy budget (OpenDP privacy filter) shared by the private tests on one data set.

    Parameters
    ----------
    epsilon : float
        The total privacy loss allowed for all releases charged to this
        budget (> 0).  Neighbouring data sets differ in one row, replaced
        arbitrarily, as for every test in privci.
    delta : float, optional
        Only with ``composition="zcdp"``: the total release is
        (epsilon, delta)-DP.  Giving ``delta`` without ``composition``
        selects ``"zcdp"``.
    composition : {"pure", "zcdp"}, optional
        ``"pure"`` (default without ``delta``): basic sequential composition
        of pure DP; all releases together are epsilon-DP.  ``"zcdp"``: each
        epsilon_i-DP release is charged rho_i = epsilon_i^2 / 2 under
        zero-concentrated DP; the filter admits releases while the sum of
        rho_i stays below the largest rho that OpenDP converts to at most
        (epsilon, delta)-DP.  Better than basic composition from a few dozen
        tests on (see :meth:`per_test_epsilon`).
    name : str, optional
        A label for the ledger and the messages (public; do not put data in it).

    Attributes
    ----------
    epsilon, delta, composition, name
        As given (``delta`` is None for ``"pure"``).
    rho : float or None
        The zCDP budget (``"zcdp"`` only).
    spent : float
        The epsilon spent so far (``"zcdp"``: the (epsilon, delta) conversion
        of the rho spent so far).
    remaining : float
        ``epsilon - spent``, never negative.
    ledger : list of dict
        One record per admitted release, in order: ``index``, ``test``,
        ``epsilon`` (of that release), ``charged`` (what OpenDP's filter
        charged, in the budget's measure: epsilon, or rho for zCDP),
        ``cumulative`` (the filter's total loss after the release, same
        measure), ``cumulative_epsilon`` and ``details``.

    Notes
    -----
    Every private test in privci calls the budget after validating its
    arguments and before reading the data.  The budget first checks, in exact
    rational arithmetic on the numbers OpenDP reports (the filter's current
    loss and the privacy map of the new release), whether the release fits;
    if it does not, :class:`BudgetExceededError` is raised and the filter is
    not touched, so later smaller releases can still be admitted.  Otherwise
    the release is charged to OpenDP's filter, which checks again and is the
    authority on the total.  OpenDP's filter stands for the data set with a
    constant placeholder: each release is represented in it by a measurement
    with the test's privacy map (a Laplace mechanism on the placeholder,
    converted to zCDP with ``make_pureDP_to_zCDP`` for ``"zcdp"``), and
    privci draws the test's own noise after the filter has admitted it.
    Fully adaptive composition (Whitehouse, Ramdas, Rogers and Wu 2023) lets
    each epsilon_i depend on earlier released results, as in PC, where the
    next test depends on the edges removed so far.

    Charging is serialised by a lock, so tests running on threads (pgmpy's
    parallel PC) can share one budget.

    Examples
    --------
    >>> from privci.budget import PrivacyBudget, BudgetExceededError
    >>> budget = PrivacyBudget(epsilon=1.0, name="diabetes")
    >>> print(budget.charge(0.4, test="my private mean"))   # doctest: +NORMALIZE_WHITESPACE
    charged epsilon = 0.4 to PrivacyBudget "diabetes" (OpenDP privacy filter, basic
    sequential composition of pure DP, total epsilon = 1): 0.4 of 1 spent after this
    release; all releases charged to it are jointly 1-DP
    >>> budget.spent, budget.remaining
    (0.4, 0.6)
    >>> try:
    ...     budget.charge(0.7, test="too much")
    ... except BudgetExceededError as err:
    ...     print("refused")
    refused
    >>> len(budget.ledger), budget.spent
    (1, 0.4)
    """

    def __init__(self, epsilon, *, delta=None, composition=None, name=None):
        from . import _validation as V

        self.epsilon = V.positive_finite(epsilon, "epsilon")
        if composition is None:
            composition = "pure" if delta is None else "zcdp"
        if not isinstance(composition, str) or composition not in _COMPOSITIONS:
            raise ValueError(f"`composition` must be one of {_COMPOSITIONS}; got "
                             f"{composition!r} instead.")
        if composition == "zcdp":
            if delta is None:
                raise ValueError("`delta` is required with composition='zcdp' (the total is "
                                 "(epsilon, delta)-DP); got None instead.")
            if isinstance(delta, bool) or not isinstance(delta, (int, float)):
                raise TypeError(f"`delta` must be a number in (0, 1); got "
                                f"{type(delta).__name__} instead.")
            delta = float(delta)
            if not 0.0 < delta < 1.0:
                raise ValueError(f"`delta` must be a number in (0, 1); got {delta!r} instead.")
        elif delta is not None:
            raise ValueError("`delta` applies only to composition='zcdp' (pure DP has "
                             f"delta = 0); got delta={delta!r} instead.")
        if name is not None and not isinstance(name, str):
            raise TypeError(f"`name` must be a string or None; got {type(name).__name__} "
                            "instead.")
        self.delta, self.composition, self.name = delta, composition, name
        self._dp = dp = _dp()
        self._lock = threading.RLock()
        self._ledger = []
        self._exhausted = False
        if composition == "pure":
            self.rho = None
            self._limit = self.epsilon
            measure = dp.measures.max_divergence()
        else:
            self.rho = _rho_for(dp, self.epsilon, delta)
            self._limit = self.rho
            measure = dp.measures.zero_concentrated_divergence()
        odometer = dp.c.make_fully_adaptive_composition(dp.domain, dp.metric, measure)
        self._filter = dp.c.make_privacy_filter(odometer, d_in=1.0, d_out=self._limit)(0.0)

    # --- accounting -------------------------------------------------------------------------

    def _measurement(self, epsilon):
        meas = _pure_measurement(self._dp, epsilon)
        if self.composition == "zcdp":
            meas = self._dp.c.make_pureDP_to_zCDP(meas)
        return meas

    def _loss(self):
        """The filter's total loss in its own measure (epsilon, or rho for zCDP)."""
        if not self._ledger:
            return 0.0
        return self._ledger[-1]["cumulative"]

    def _to_epsilon(self, loss):
        if self.composition == "pure":
            return loss
        return min(self.epsilon, _zcdp_to_epsilon(self._dp, loss, self.delta))

    def _label(self):
        return "PrivacyBudget" + (f' "{self.name}"' if self.name else "")

    def _rule(self):
        if self.composition == "pure":
            return ("OpenDP privacy filter, basic sequential composition of pure DP, total "
                    f"epsilon = {_fmt(self.epsilon)}")
        return (f"OpenDP privacy filter, zero-concentrated DP (rho = {self.rho:.6g}, each "
                "epsilon_i-DP release charged epsilon_i^2/2) converted to "
                f"({_fmt(self.epsilon)}, {self.delta:g})-DP")

    def _refuse(self, epsilon, test, why=""):
        raise BudgetExceededError(
            f"this release of {test} would spend epsilon = {_fmt(epsilon)}, which does not fit "
            f"in what remains of the {self._label()} ({self.remaining!r} of "
            f"{_fmt(self.epsilon)}){why}; nothing was computed or released.  (Losses add up "
            "exactly: split a total with PrivacyBudget.per_test_epsilon.)")

    def charge(self, epsilon, *, test, details=""):
        """Charge one epsilon-DP release to the budget, before it happens.

        Use this for a private release of your own; privci's tests call it
        through ``budget=``.

        Parameters
        ----------
        epsilon : float
            The pure-DP parameter of the release (> 0).
        test : str
            What is released (for the ledger).
        details : str, optional
            Public details for the ledger (e.g. which columns are tested).

        Returns
        -------
        str
            The composition statement for the release's privacy record.

        Raises
        ------
        BudgetExceededError
            If the release does not fit; nothing is recorded.
        """
        from . import _validation as V

        eps = V.positive_finite(epsilon, "epsilon")
        if not isinstance(test, str):
            raise TypeError(f"`test` must be a string; got {type(test).__name__} instead.")
        if not isinstance(details, str):
            raise TypeError(f"`details` must be a string; got {type(details).__name__} "
                            "instead.")
        with self._lock:
            if self._exhausted:
                self._refuse(eps, test, " (the filter is exhausted)")
            meas = self._measurement(eps)
            cost = meas.map(1.0)
            loss = self._loss()
            if Fraction(loss) + Fraction(cost) > Fraction(self._limit):
                self._refuse(eps, test)
            try:
                self._filter.invoke(meas)
            except self._dp.OpenDPException:   # pragma: no cover - the exact check comes first
                self._exhausted = True
                self._refuse(eps, test, " (refused by OpenDP's filter)")
            total = self._filter.privacy_loss(1.0)
            record = {"index": len(self._ledger) + 1, "test": test, "epsilon": eps,
                      "charged": cost, "cumulative": total,
                      "cumulative_epsilon": self._to_epsilon(total), "details": details}
            self._ledger.append(record)
        joint = (f"{_fmt(self.epsilon)}-DP" if self.composition == "pure"
                 else f"({_fmt(self.epsilon)}, {self.delta:g})-DP")
        return (f"charged epsilon = {_fmt(eps)} to {self._label()} ({self._rule()}): "
                f"{_fmt(record['cumulative_epsilon'])} of {_fmt(self.epsilon)} spent after this "
                f"release; all releases charged to it are jointly {joint}")

    # --- read-outs --------------------------------------------------------------------------

    @property
    def spent(self):
        with self._lock:
            return self._to_epsilon(self._loss())

    @property
    def remaining(self):
        with self._lock:
            return max(0.0, self.epsilon - self.spent)

    @property
    def rho_spent(self):
        """The rho charged so far (``"zcdp"`` only; None for ``"pure"``)."""
        return None if self.composition == "pure" else self._loss()

    @property
    def ledger(self):
        with self._lock:
            return [dict(r) for r in self._ledger]

    _LEDGER_COLUMNS = ("index", "test", "epsilon", "charged", "cumulative",
                       "cumulative_epsilon", "details")

    def ledger_columns(self):
        """The ledger as {column: list}, one entry per release (R: ``as.data.frame()``)."""
        rows = self.ledger
        return {c: [r[c] for r in rows] for c in self._LEDGER_COLUMNS}

    def ledger_frame(self):
        """The ledger as a pandas DataFrame (one row per release; needs pandas)."""
        import pandas as pd

        return pd.DataFrame(self.ledger, columns=list(self._LEDGER_COLUMNS))

    def per_test_epsilon(self, k, *, share=1.0):
        """The largest epsilon_i such that ``k`` more epsilon_i-DP releases fit.

        A public rule (it depends on the budget, ``k`` and ``share`` only)
        for splitting what remains over ``k`` tests.  Pure DP: about
        ``share * remaining / k``; zCDP: about
        ``sqrt(2 share (rho - rho_spent) / k)``.  zCDP gives each test more
        than basic composition's ``epsilon / k`` from 21 tests on at
        (epsilon, delta) = (1, 1e-6) and from 33 tests on at (10, 1e-6).

        Parameters
        ----------
        k : int
            The number of releases (>= 1).
        share : float, default 1.0
            The fraction (0 < share <= 1) of what remains (in the budget's
            own measure: epsilon, or rho for zCDP) to split over the ``k``
            releases.

        Returns
        -------
        float
            0.0 when nothing remains.

        Examples
        --------
        >>> from privci.budget import PrivacyBudget
        >>> round(PrivacyBudget(epsilon=1.0).per_test_epsilon(100), 12)
        0.01
        >>> round(PrivacyBudget(epsilon=1.0, delta=1e-6).per_test_epsilon(100), 4)
        0.0221
        """
        from . import _validation as V

        k = V.check_int(k, "k", 1)
        if (isinstance(share, bool) or not isinstance(share, (int, float))
                or not 0.0 < share <= 1.0):
            raise ValueError(f"`share` must be a number in (0, 1]; got {share!r} instead.")
        with self._lock:
            left = share * (self._limit - self._loss())
            if left <= 0.0:
                return 0.0
            if self.composition == "pure":
                eps = left / k
            else:
                eps = math.sqrt(2.0 * left / k)
            trial = eps
            cap = self._loss() + left
            for step in range(200):   # a few ulps below eps, then relative steps of 2^-45 * 2^j
                if trial <= 0.0:
                    return 0.0
                if self._fits(trial, k, min(cap, self._limit)):
                    return trial
                trial = (math.nextafter(trial, 0.0) if step < 16
                         else eps * (1.0 - 2.0 ** min(-45 + (step - 16), -1)))
            return 0.0   # pragma: no cover

    def _fits(self, eps, k, cap):
        cost = self._measurement(eps).map(1.0)
        total = self._loss()
        for _ in range(k):
            total = _up_add(total, cost)
        return total <= cap

    # A copy would spend the same budget twice.  copy.copy and copy.deepcopy return the
    # budget itself (causal-learn deep-copies its graph, test and all, between phases);
    # pickling, i.e. handing the budget to another process, is refused.
    def __reduce_ex__(self, protocol):
        raise TypeError("a PrivacyBudget cannot be pickled (a copy in another process would "
                        "spend the same budget twice); run tests that share it in one process, "
                        "e.g. on threads (pgmpy's causal_discovery.PC uses threads).")

    def __copy__(self):
        return self

    def __deepcopy__(self, memo):
        return self

    def format_ledger(self):
        """The ledger as a text table: one line per release, with the cumulative loss."""
        rows = self.ledger
        head = f"{self._label()}: {self._rule()}"
        lines = [head, f"{'#':>4}  {'test':<28} {'epsilon':>10} {'cumulative eps':>15}  details"]
        for r in rows:
            lines.append(f"{r['index']:>4}  {r['test'][:28]:<28} {r['epsilon']:>10.4g} "
                         f"{r['cumulative_epsilon']:>15.6g}  {r['details']}")
        lines.append(f"spent {_fmt(self.spent)} of {_fmt(self.epsilon)}; remaining "
                     f"{_fmt(self.remaining)}; {len(rows)} releases")
        return "\n".join(lines)

    def __str__(self):
        return self.format_ledger()

    def __repr__(self):
        extra = "" if self.composition == "pure" else f", delta={self.delta:g}"
        name = f", name={self.name!r}" if self.name else ""
        return (f"PrivacyBudget(epsilon={_fmt(self.epsilon)}{extra}, "
                f"composition={self.composition!r}{name}, spent={_fmt(self.spent)}, "
                f"releases={len(self._ledger)})")


def _charge(budget, epsilon, *, test, details=""):
    """Charge ``epsilon`` to ``budget`` before a release; returns the composition statement.

    ``budget=None`` charges nothing and returns None.  Raises
    :class:`BudgetExceededError` (and records nothing) when the release does not fit.
    """
    if budget is None:
        return None
    if not isinstance(budget, PrivacyBudget):
        raise TypeError("`budget` must be None or a privci.PrivacyBudget; got "
                        f"{type(budget).__name__} instead.")
    return budget.charge(float(epsilon), test=test, details=details)
