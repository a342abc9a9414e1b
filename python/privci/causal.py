"""Private causal discovery: PC with private CI tests; causal-learn, pgmpy, tigramite adapters.

A constraint-based search (PC, FCI) asks many conditional-independence
questions of one data set.  Here every question is answered by a private test
(PrivGCM by default), every answer is charged to one
:class:`~privci.budget.PrivacyBudget` before anything is computed, and a
repeated question (the same X, Y given the same S) is answered from a cache
and never charged twice.  The graph is post-processing of the released
p-values, so it carries the budget's guarantee.

- :func:`pc`: the package's own PC-stable skeleton and CPDAG, splitting a
  total epsilon over the tests by a public rule.
- :class:`PrivateCITest`: the shared engine (data, public bounds, budget,
  cache); the adapters below wrap it.
- :func:`register_causallearn`: registers ``"privgcm"`` with causal-learn
  (``pc(data, alpha, "privgcm", budget=..., bounds=...)``, ``fci(...)``).
- :func:`pgmpy_ci_test`: a callable for pgmpy's ``PC(ci_test=...)`` (both
  ``pgmpy.causal_discovery.PC`` and the older ``pgmpy.estimators.PC``).
- :func:`tigramite_ci_test`: a tigramite ``CondIndTest`` for PCMCI's PC on
  i.i.d. data (``run_pcalg_non_timeseries_data``).

Tested peer versions (the ``privci[causal]`` extra): causal-learn 0.1.4.x,
pgmpy 1.1.x, tigramite 5.2.x.
"""

from __future__ import annotations

import itertools
import math
import threading
from dataclasses import dataclass, field

import numpy as np

from . import _validation as V
from .budget import BudgetExceededError, PrivacyBudget

__all__ = ["pc", "PCResult", "PrivateCITest", "register_causallearn", "pgmpy_ci_test",
           "tigramite_ci_test", "worst_case_tests", "TESTED_VERSIONS"]

# the peers' version ranges the adapters are tested against (also pinned in pyproject's extra)
TESTED_VERSIONS = {"causal-learn": (">=0.1.4.0", "<0.1.5"), "pgmpy": (">=1.1.0", "<1.2"),
                   "tigramite": (">=5.2.0", "<5.3")}

_ON_EXHAUSTED = ("raise", "dependent", "independent")
_TESTS = ("privgcm",)
_SPLITS = ("levels", "halves", "tests")


def _check_version(dist, module_version):
    """Raise ImportError when a peer's version is outside the tested range."""
    def parse(v):
        parts = []
        for piece in str(v).split("."):
            digits = "".join(itertools.takewhile(str.isdigit, piece))
            parts.append(int(digits) if digits else 0)
        return tuple(parts)

    lo, hi = TESTED_VERSIONS[dist]
    v = parse(module_version)
    if not (parse(lo[2:]) <= v < parse(hi[1:])):
        raise ImportError(f"privci.causal is tested with {dist} {lo},{hi}; found "
                          f"{module_version}.  Install the tested range with "
                          "`pip install privci[causal]`.")


def _as_matrix(data):
    """(n, p) float array and the column names (DataFrame columns, or 0..p-1)."""
    names = None
    cols = getattr(data, "columns", None)
    if cols is not None and getattr(data, "ndim", 2) == 2:
        names = [c for c in cols]
    arr = V.as_data(data, "data", min_rows=2)
    if arr.shape[1] < 2:
        raise ValueError(f"`data` must have at least 2 columns (variables); got shape "
                         f"{arr.shape} instead.")
    if names is None:
        names = list(range(arr.shape[1]))
    return arr, names


def worst_case_tests(p, max_order=None):
    """The largest number of distinct (X, Y | S) tests PC can ask on ``p`` variables.

    Every unordered pair, every conditioning set of the other ``p - 2``
    variables of size at most ``max_order``:
    ``p (p - 1) / 2 * sum_{l <= max_order} C(p - 2, l)``.  A public number: the
    adapters split a budget evenly over it unless told ``max_tests``.

    Examples
    --------
    >>> from privci.causal import worst_case_tests
    >>> worst_case_tests(4), worst_case_tests(6, max_order=2)
    (24, 165)
    """
    p = V.check_int(p, "p", 2)
    top = p - 2 if max_order is None else min(V.check_int(max_order, "max_order", 0), p - 2)
    return p * (p - 1) // 2 * sum(math.comb(p - 2, k) for k in range(top + 1))


@dataclass
class _Answer:
    pvalue: float
    epsilon: float
    released: bool   # False: the budget refused and on_exhausted decided (nothing computed)


class PrivateCITest:
    """Private CI tests between the columns of one data set, charged to one budget, cached.

    Parameters
    ----------
    data : array-like or DataFrame, shape (n, p)
        The private data, one row per individual.
    budget : PrivacyBudget
        Charged before every release (optional with ``table``).
    bounds : float or sequence of p floats
        Public bounds: column k is clipped to ``centers[k] +- bounds[k]``
        when it is the X or Y of a test (PrivGCM's ``x_bound``/``y_bound``).
        Conditioning columns are used as given (the Gaussian kernel is
        bounded); put them on a scale that suits ``kernel_sigma`` with
        public constants.
    centers : float or sequence of p floats, default 0.0
        Public centres (PrivGCM's ``x_center``/``y_center``).
    epsilon_per_test : float, optional
        The epsilon of every test.  Default: the budget split evenly over
        ``max_tests`` (:meth:`PrivacyBudget.per_test_epsilon`).
    max_tests : int, optional
        How many distinct tests to plan for (default
        :func:`worst_case_tests` of p and ``max_order``).  Only used without
        ``epsilon_per_test``.
    max_order : int, optional
        Largest conditioning set planned for (default p - 2).
    test : "privgcm" or callable, default "privgcm"
        A callable is called as ``test(x, y, z, epsilon=..., rng=...,
        **test_options)`` with ``z`` None for unconditional tests, must be
        ``epsilon``-DP and return an object with ``pvalue``; it is charged
        here, so it must not charge a budget itself.
    rng : None, int or numpy Generator
        None: OpenDP's hardened noise in every test.  Given: reproducible
        numpy noise (simulations only; not hardened).
    on_exhausted : {"dependent", "raise", "independent"}, default "dependent"
        When the budget refuses a test: answer without touching the data,
        p = 0 ("dependent": the edge stays; the default, as in :func:`pc`) or
        p = 1 ("independent"), or raise :class:`BudgetExceededError` (which
        escapes a peer's search mid-way, with the budget spent and no graph).
        The answer is recorded as not released.
    names : sequence, optional
        Column names for the ledger (default: the DataFrame's columns or 0..p-1).
    table : ReleasedTable or ReleasedCovariance, optional
        Answer every question from one release (:func:`privci.release`, made
        and charged beforehand): no further charge, however many questions
        (PC then FCI on one release asks nothing twice of the budget).  Then
        only ``responses`` and ``power_rule`` apply as test options, and an
        answer that is not trusted, or whose ``detectable_correlation`` is
        above ``power_rule`` (default 0.45), is returned as p = 0 (the edge
        stays), as in :func:`pc`; with ``responses="quadratic"`` and two or
        more conditioning columns the p-value is the smaller of the linear
        pair's and the squared pairs' (pc's dependence veto).  A linear release
        (``statistics="linear"``, :func:`pc`'s default rung) answers under
        ``assume_linear=True``, an additive one under ``assume_additive`` and
        ``assume_smooth``, as :func:`pc` does.
    untrusted : {"keep", "use"}, default "keep"
        With ``table``: "use" returns untrusted p-values as they are.
    **test_options
        Passed to the test (e.g. ``regression="krr"`` with ``ridge_lambda``,
        ``kernel_sigma``, ``kernel_approximation``; or, for PrivGCM's default
        released spline fit, public ``z_center`` / ``z_scale``: a number, or
        one per column of ``data``, of which each test takes its conditioning
        columns; they are dropped for unconditional tests).  Without them the
        spline fit releases z's centre and scale privately in every
        conditional test (10% of that test's epsilon).

    Notes
    -----
    The cache key is (min(X, Y), max(X, Y), sorted S): a repeated or
    mirrored question is answered from the cache without a charge.  Each key
    has its own lock, so threads asking the same question wait for one
    answer, and different questions run concurrently.  The charge comes
    before the test reads the data, so a refused test computes nothing; a
    test that then fails (e.g. on a bad ``test_options`` value) has still
    been charged (conservative); the options are checked before the first
    charge (unknown names, and for PrivGCM a dry run on public dummy data of
    the same size), so a wrong option raises with nothing charged.

    Examples
    --------
    >>> import numpy as np
    >>> from privci.budget import PrivacyBudget
    >>> from privci.causal import PrivateCITest
    >>> rng = np.random.default_rng(0)
    >>> a = rng.normal(size=400); b = a + rng.normal(size=400); c = rng.normal(size=400)
    >>> budget = PrivacyBudget(epsilon=3.0)
    >>> ci = PrivateCITest(np.column_stack([a, b, c]), budget=budget, bounds=4.0,
    ...                    epsilon_per_test=1.0, rng=1)
    >>> p1 = ci.pvalue(0, 2); p2 = ci.pvalue(2, 0)   # the second answer comes from the cache
    >>> p1 == p2, len(budget.ledger)
    (True, 1)
    """

    def __init__(self, data, *, budget=None, bounds=None, centers=0.0, epsilon_per_test=None,
                 max_tests=None, max_order=None, test="privgcm", rng=None,
                 on_exhausted="dependent", names=None, table=None, untrusted="keep",
                 **test_options):
        self.data, default_names = _as_matrix(data)
        n, p = self.data.shape
        self.names = list(default_names if names is None else names)
        if len(self.names) != p:
            raise ValueError(f"`names` must have one entry per column ({p}); got "
                             f"{len(self.names)} instead.")
        if on_exhausted not in _ON_EXHAUSTED:
            raise ValueError(f"`on_exhausted` must be one of {_ON_EXHAUSTED}; got "
                             f"{on_exhausted!r} instead.")
        self.on_exhausted = on_exhausted
        self._cache = {}
        self._locks = {}
        self._lock = threading.Lock()
        self.table = None
        if table is not None:
            self._init_table(table, n, p, budget, bounds, epsilon_per_test, max_tests, test,
                             rng, untrusted, test_options)
            return
        if not isinstance(budget, PrivacyBudget):
            raise TypeError("`budget` must be a privci.PrivacyBudget (one per data set, shared "
                            f"by all tests); got {type(budget).__name__} instead.")
        self.budget = budget
        for name, value in (("bounds", bounds), ("centers", centers)):
            if isinstance(value, str):
                raise ValueError(f"`{name}={value!r}` is not available per test: release the "
                                 "table once with privci.release(data, epsilon=..., "
                                 f"{name}='auto', knots=6, budget=budget) and pass table=; "
                                 "or release "
                                 "them with privci.bounds.private_bounds.  Nothing was charged.")
        self.bounds = V.positive_bounds(bounds, "bounds", p)
        self.centers = V.public_centres(centers, "centers", p)
        if not (callable(test) or (isinstance(test, str) and test in _TESTS)):
            raise ValueError(f"`test` must be one of {_TESTS} or a callable; got {test!r} "
                             "instead.")
        self.test = test
        self.rng = None if rng is None else V.check_rng(rng)
        self.max_order = None if max_order is None else V.check_int(max_order, "max_order", 0)
        if epsilon_per_test is not None:
            self.epsilon_per_test = V.positive_finite(epsilon_per_test, "epsilon_per_test")
            self.max_tests = None if max_tests is None else V.check_int(max_tests, "max_tests", 1)
        else:
            self.max_tests = (worst_case_tests(p, self.max_order) if max_tests is None
                              else V.check_int(max_tests, "max_tests", 1))
            self.epsilon_per_test = budget.per_test_epsilon(self.max_tests)
        self.test_options = dict(test_options)
        for bad in ("epsilon", "budget", "x_bound", "y_bound", "x_center", "y_center", "rng"):
            if bad in self.test_options:
                raise TypeError(f"`{bad}` is set by PrivateCITest (from `bounds`, `centers`, "
                                "`epsilon_per_test` and the budget); remove it from the test "
                                "options.")
        if untrusted != "keep":
            raise ValueError("`untrusted` applies to answers from a released table (table=) "
                             f"only; got untrusted={untrusted!r} without a table.")
        self.untrusted = untrusted
        self._check_test_options(n, p)

    def _init_table(self, table, n, p, budget, bounds, epsilon_per_test, max_tests, test, rng,
                    untrusted, test_options):
        from .release import _RESPONSES, ReleasedCovariance, ReleasedTable

        if not isinstance(table, (ReleasedTable, ReleasedCovariance)):
            raise TypeError("`table` must be a privci.ReleasedTable or ReleasedCovariance (from "
                            f"privci.release); got {type(table).__name__} instead.")
        if len(table.names) != p or table.n != n:
            raise ValueError(f"`table` must be the release of this data ({n} rows, {p} "
                             f"columns); got a release of {table.n} rows and "
                             f"{len(table.names)} columns instead.")
        given = [k for k, v in (("bounds", bounds), ("epsilon_per_test", epsilon_per_test),
                                ("max_tests", max_tests), ("rng", rng)) if v is not None]
        if test != "privgcm":
            given.append("test")
        extra = sorted(set(test_options) - {"responses", "power_rule"})
        if given or extra:
            raise ValueError("with `table=` every answer is post-processing of the release: "
                             f"{given + extra} do not apply (the release fixed bounds, "
                             "centres, epsilon and noise).  Nothing was charged.")
        if budget is not None and not isinstance(budget, PrivacyBudget):
            raise TypeError("`budget` must be None or a privci.PrivacyBudget; got "
                            f"{type(budget).__name__} instead.")
        if untrusted not in ("keep", "use"):
            raise ValueError(f"`untrusted` must be 'keep' or 'use'; got {untrusted!r} instead.")
        responses = test_options.get("responses", "quadratic")
        if responses not in _RESPONSES:
            raise ValueError(f"`responses` must be one of {tuple(_RESPONSES)}; got "
                             f"{responses!r} instead.")
        from .release import DEFAULT_POWER_RULE
        power_rule = test_options.get("power_rule", DEFAULT_POWER_RULE)
        if power_rule is not None and (isinstance(power_rule, bool) or not isinstance(
                power_rule, (int, float)) or not 0.0 < power_rule <= 1.0):
            raise ValueError(f"`power_rule` must be None or a number in (0, 1]; got "
                             f"{power_rule!r} instead.")
        self.power_rule = power_rule
        self.table = table
        self.responses = responses
        self.untrusted = untrusted
        self.budget = budget if budget is not None else PrivacyBudget(
            table.epsilon, name="privci.release (already charged)")
        self.test = "release"
        self.test_options = {"responses": responses, "power_rule": power_rule}
        self.epsilon_per_test = 0.0
        self.max_tests = self.max_order = None
        self.rng = None

    def _check_test_options(self, n, p):
        """Check the test options before anything is charged: names, then (PrivGCM) a dry
        run on public dummy data of the same size (no private data is read)."""
        import inspect
        import warnings

        opts = self.test_options
        if callable(self.test):
            try:
                params = inspect.signature(self.test).parameters
            except (TypeError, ValueError):   # builtins without a signature: trust them
                return
            if any(v.kind is inspect.Parameter.VAR_KEYWORD for v in params.values()):
                return
            unknown = sorted(set(opts) - set(params))
            if unknown:
                raise TypeError(f"the test {getattr(self.test, '__name__', 'callable')} takes "
                                f"no option(s) {unknown}; nothing was charged.")
            return
        if not opts:
            return
        from .gcm import privgcm

        params = inspect.signature(privgcm).parameters
        open_ended = any(v.kind is inspect.Parameter.VAR_KEYWORD for v in params.values())
        unknown = sorted(k for k in opts if k not in params or k in ("x", "y", "z"))
        if unknown and not open_ended:
            raise TypeError(f"unknown test option(s) {unknown} for privgcm (see "
                            "privci.privgcm's parameters); nothing was charged.")
        from ._spline import UnresolvableDesignError
        rng = np.random.default_rng(0)
        m = int(min(n, 50_000))
        d = rng.normal(size=(m, 3))
        for ss in ((), (0,)):
            kw = self._options_for(ss, p_check=p)
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    privgcm(d[:, 1], d[:, 2], d[:, list(ss)] if ss else None, epsilon=1.0,
                            x_bound=4.0, y_bound=4.0, rng=0, **kw)
            except UnresolvableDesignError:
                pass     # the options are valid; this n and epsilon are not resolvable
            except (TypeError, ValueError) as err:
                kind = "conditional" if ss else "unconditional"
                raise type(err)(f"{err} (checked on public dummy data for a {kind} test, "
                                "before anything was charged)") from None

    def _spline_refuses(self, key, eps):
        """Whether privgcm's released spline fit would refuse this test (public numbers:
        n, the conditioning set's size, epsilon, the stated model, which z parameters are
        public)."""
        i, j, ss = key
        if not ss:
            return False
        opts = self._options_for(ss)
        if opts.get("regression", "spline") != "spline":
            return False
        from .plan import _spline_design
        model = opts.get("assume") or ("additive" if opts.get("assume_additive") else "full")
        public_z = opts.get("z_center") is not None and opts.get("z_scale") is not None \
            and not isinstance(opts.get("z_center"), str) \
            and not isinstance(opts.get("z_scale"), str)
        des = _spline_design(self.data.shape[0], eps, len(ss), model,
                             "none" if public_z else "z")
        return not des.certified

    def _options_for(self, ss, p_check=None):
        """The test options of one test: per-column z_center / z_scale sliced to S."""
        opts = dict(self.test_options)
        if not ss:      # z's public centre and scale only concern conditional tests
            opts.pop("z_center", None)
            opts.pop("z_scale", None)
            return opts
        for name in ("z_center", "z_scale"):
            if np.ndim(opts.get(name)) == 1:   # one per column of the data
                vals = np.asarray(opts[name], dtype=float)
                if p_check is not None and vals.shape[0] != p_check:
                    raise ValueError(f"`{name}` must be a number or one per column of the data "
                                     f"({p_check}); got {vals.shape[0]} entries instead.  "
                                     "Nothing was charged.")
                opts[name] = vals[list(ss)]
        return opts

    # the engine is shared, never copied: copies would answer (and charge) apart
    def __copy__(self):
        return self

    def __deepcopy__(self, memo):
        return self

    def __reduce_ex__(self, protocol):
        raise TypeError("a PrivateCITest cannot be pickled: its budget must stay in one "
                        "process (use threads, not processes, to run tests in parallel).")

    # --- keys -----------------------------------------------------------------------------

    def _index(self, v, what):
        # integers are positions; anything else is looked up among the column names
        is_int = isinstance(v, (int, np.integer)) and not isinstance(v, bool)
        if is_int and 0 <= v < len(self.names):
            return int(v)
        if v in self.names:
            return self.names.index(v)
        raise ValueError(f"`{what}` must be a column index (0..{len(self.names) - 1}) or a "
                         f"column name; got {v!r} instead.")

    def key(self, x, y, s=()):
        """The cache key (i, j, S) with i < j and S sorted.

        Columns are given by position (an integer) or by a name that is not an integer.
        """
        i, j = self._index(x, "x"), self._index(y, "y")
        if s is None:
            s = ()
        elif isinstance(s, (str, int, np.integer)):
            s = (s,)
        ss = tuple(sorted({self._index(k, "condition set") for k in s}))
        if i == j or i in ss or j in ss:
            raise ValueError("X and Y must be different columns and not in the conditioning "
                             f"set; got X={x!r}, Y={y!r}, S={tuple(s)!r} instead.")
        return (min(i, j), max(i, j), ss)

    # --- answers --------------------------------------------------------------------------

    @property
    def cache(self):
        """The answered questions: {(i, j, S): p-value} (released values, or refusals)."""
        return {k: a.pvalue for k, a in self._cache.items()}

    @property
    def n_released(self):
        """How many tests were computed and released (each charged once)."""
        return sum(a.released for a in self._cache.values())

    def is_cached(self, x, y, s=()):
        return self.key(x, y, s) in self._cache

    def pvalue(self, x, y, s=(), *, epsilon=None):
        """The private p-value of X _||_ Y | S (cached; charged once per distinct question).

        ``epsilon`` overrides ``epsilon_per_test`` for this test (used by
        :func:`pc`'s split rule); a cached answer keeps its own epsilon.
        """
        key = self.key(x, y, s)
        with self._lock:
            if key in self._cache:
                return self._cache[key].pvalue
            lk = self._locks.setdefault(key, threading.Lock())
        with lk:
            if key in self._cache:   # answered by another thread while we waited
                return self._cache[key].pvalue
            ans = self._answer(key, self.epsilon_per_test if epsilon is None else epsilon)
            with self._lock:
                self._cache[key] = ans
            return ans.pvalue

    def _describe(self, key):
        i, j, ss = key
        cond = ", ".join(str(self.names[k]) for k in ss)
        return f"{self.names[i]} _||_ {self.names[j]}" + (f" | {cond}" if ss else "")

    def _refused(self, key, eps, err=None):
        if self.on_exhausted == "raise":
            if err is not None:
                raise err
            raise BudgetExceededError(
                f"the budget has nothing left for the test {self._describe(key)}; nothing was "
                "computed or released.")
        return _Answer(0.0 if self.on_exhausted == "dependent" else 1.0, 0.0, False)

    def _answer(self, key, eps):
        if self.table is not None:      # post-processing of a release: nothing is charged
            i, j, ss = key
            from .release import QUADRATIC_MAX_S, ReleasedCovariance
            if isinstance(self.table, ReleasedCovariance):
                res = self.table.test(i, j, list(ss), assume_linear=True)
            else:
                res = self.table.test(i, j, list(ss), responses=self.responses,
                                      assume_additive=True, assume_smooth=True)
            pv = res.pvalue
            if self.responses == "quadratic" and len(ss) > QUADRATIC_MAX_S and \
                    not isinstance(self.table, ReleasedCovariance):
                # the dependence veto of pc: the squared pairs can keep an edge, never
                # remove one (min over the two p-values: removed only if both exceed alpha)
                pv = min(pv, self.table._answer(i, j, list(ss), "quadratic",
                                                len(ss)).pvalue)
            if (not res.trusted and self.untrusted == "keep") or (
                    self.power_rule is not None
                    and not res.detectable_correlation <= self.power_rule):
                pv = 0.0       # an untrusted or underpowered answer never removes an edge
            return _Answer(float(pv), 0.0, True)
        if not eps > 0.0:
            return self._refused(key, eps)
        if not callable(self.test) and self._spline_refuses(key, eps):
            # privgcm would refuse this test from public facts (n, |S|, epsilon, the model):
            # untested, nothing charged, and an untested answer never removes an edge
            return _Answer(0.0, 0.0, False)
        name = "privgcm" if isinstance(self.test, str) else getattr(self.test, "__name__",
                                                                    "custom test")
        try:
            self.budget.charge(eps, test=name, details=self._describe(key))
        except BudgetExceededError as err:
            return self._refused(key, eps, err)
        i, j, ss = key
        x, y = self.data[:, i], self.data[:, j]
        z = self.data[:, list(ss)] if ss else None
        if callable(self.test):
            res = self.test(x, y, z, epsilon=eps, rng=self.rng, **self.test_options)
        else:
            from .gcm import privgcm

            from ._spline import UnresolvableDesignError
            opts = self._options_for(ss)
            try:
                res = privgcm(x, y, z, epsilon=eps, x_bound=self.bounds[i],
                              y_bound=self.bounds[j], x_center=self.centers[i],
                              y_center=self.centers[j], rng=self.rng, **opts)
            except UnresolvableDesignError:
                # refused before any data was read (the public pre-check above missed it:
                # it models the default split of released parameters); untested
                return _Answer(0.0, eps, False)
        pv = float(res.pvalue)
        if not np.isfinite(pv):   # a degenerate released statistic: no evidence against H0
            pv = 1.0
        return _Answer(pv, eps, True)


# --- the package's own PC (graph steps and result: privci._pc) -------------------------

from ._pc import PCResult, _candidate_sets, _count_sets, _orient, _pc_skeleton  # noqa: E402
from ._pc import (SIEVE_BLOCK_ROWS, SIEVE_EXAMINE_SHARE, SIEVE_KNOTS,  # noqa: E402,F401
                  SIEVE_OPTIONS, SIEVE_THRESHOLD, sieve_epsilons)

PCResult.__module__ = __name__   # public here: privci.causal.PCResult


def pc(data, *, epsilon, bounds, centers=0.0, alpha=0.05, method="release", rng=None,
       max_order=None, budget=None, test="privgcm", split="levels", delta=None,
       composition=None, on_exhausted="dependent", **options):
    """Private PC: the skeleton and CPDAG of a causal graph from private CI tests.

    PC-stable (Colombo and Maathuis 2014): for orders l = 0, 1, ..., with the
    adjacencies frozen at the start of each order, every remaining edge
    i - j is tested against the conditioning sets of size l drawn from
    adj(i) \\ {j} and adj(j) \\ {i}; the first test with p > alpha removes
    the edge and records its separating set.  The graph is post-processing of
    the private answers, so the run is ``epsilon``-DP under the replacement of
    one row.

    Two ways to spend ``epsilon``:

    - ``method="release"`` (default): one :func:`privci.release` of the whole
      table with the total ``epsilon``; every test is post-processing of it, so
      the number of tests costs nothing.  By default the release is the *linear
      rung* (``statistics="linear"``): the first and second moments of the
      columns, clipped at a public fraction of their bounds (``clip="auto"``),
      and every test is a noise-aware partial-correlation test (Fisher's z null:
      linear conditional means, stated as ``assume_linear``);
      ``statistics="additive"`` releases the hat-feature Gram matrices instead
      (additive smooth fits; more noise).  A test that is not trusted (its fit
      check failed, or the noise swamps a released residual variance) never
      removes an edge (``untrusted="keep"``).  Edges that no test could remove
      are reported as *untested* (``res.untested``, and in the printed result).
    - ``method="per-test"``: every test is a PrivGCM test (or ``test``), charged
      to a :class:`~privci.budget.PrivacyBudget` of total ``epsilon`` before it
      reads the data, with epsilon split over the tests by ``split``.
    - ``method="sieve"``: a sparse-vector sieve in the style of Priv-PC (Wang,
      Pang and Song 2020) that pays only for the tests flagged as removals,
      each followed by a fresh noisy examination (Notes).

    Parameters
    ----------
    data : array-like or DataFrame, shape (n, p)
        The private data (rows are individuals).
    epsilon : float
        Total privacy budget of the run (> 0).
    bounds : float, sequence of p floats, or "auto"
        Public bounds per column (fixed before seeing the data): column k is
        clipped to ``centers[k] +- bounds[k]`` (the linear rung clips at ``clip``
        times that).  ``"auto"`` (``method="release"``
        only): released privately with a share ``auto_share`` (default 0.1) of
        ``epsilon``.  Columns whose bounds do not fit are named in the result's
        ``caveats`` when the released values show it beyond their noise.
    centers : float, sequence of p floats, or "auto", default 0.0
        Public centres per column (``"auto"``: private medians, ``method="release"``
        only).
    alpha : float, default 0.05
        Level of each test.
    method : {"release", "per-test", "sieve"}, default "release"
    rng : None, int or numpy Generator
        None: hardened OpenDP noise.  Given: reproducible numpy noise
        (simulations only).
    max_order : int, optional
        Largest conditioning set (default p - 2).
    budget : PrivacyBudget, optional
        An outer (pure-DP) budget of the data set: the whole run is charged
        to it as one epsilon-DP release before it starts (after every option
        is validated).
    test, split, delta, composition, on_exhausted
        ``method="per-test"`` only (passing them with ``method="release"`` is an
        error).  ``test``: "privgcm" or a callable (see :class:`PrivateCITest`);
        ``split`` in {"levels", "halves", "tests"}: the public rule that splits
        ``epsilon`` over the tests (Notes); ``composition="zcdp"`` with ``delta``
        accounts by zCDP (an (epsilon, delta)-DP run); ``on_exhausted`` in
        {"dependent", "raise", "independent"} (default "dependent", as in the
        adapters): what a test the run's budget cannot pay for answers, without
        touching the data ("dependent" keeps the edge).
    **options
        ``method="release"``: ``statistics`` (``"linear"``, the default, or
        ``"additive"``; Notes), ``clip`` (linear rung: ``"auto"``, the public rule
        ``privci.release.linear_clip``, or a fraction in (0, 1] of the bounds),
        ``max_tests`` (default 5000, or None: the public cap on distinct tests,
        reported in the result; Notes), ``orientation`` (``"majority"``, the default,
        or ``"sepset"``; Notes), ``untrusted`` (``"keep"`` or ``"use"``),
        ``power_rule`` (default 0.45, or None; Notes), ``plan_orders`` (default True;
        Notes) and ``auto_share``; for the additive rung also ``blocks``, ``knots``
        (default 6; the queries assume E[x_i | S] and E[x_j | S] smooth at that
        resolution, ``assume_smooth=True`` of :meth:`privci.ReleasedTable.test`, and a
        result caveat counts them), ``responses`` (``"quadratic"``, the default, or
        ``"linear"``; see :meth:`privci.ReleasedTable.test`) and ``quadratic_veto``
        (default True; Notes).
        ``method="sieve"``: ``block_rows`` (default 100), ``max_removals``
        (default p (p - 1) / 2), ``examine_share`` (default 0.2),
        ``threshold`` (default 0.5), ``knots`` (default 4) and ``responses``.
        ``method="per-test"``: options of the test, e.g. for
        PrivGCM's default spline fit public ``z_center`` / ``z_scale``
        (without them every conditional test spends 10% of its epsilon
        releasing them), or ``regression="krr"`` with ``ridge_lambda`` and
        ``kernel_sigma``.  Every option is checked before anything is
        charged; an unknown or inapplicable option raises.

    Returns
    -------
    PCResult
        ``adjacency`` (bool, symmetric), ``directed`` (the CPDAG in
        causal-learn's encoding), ``sepsets``, the ``pvalues``, the
        ``budget`` with its ledger, the ``guarantee`` and ``caveats``; with
        ``method="release"`` also ``table`` (ask it further questions for free:
        ``res.table.test(i, j, S)`` answers as the run did, under the assumptions
        stated in ``res.table.assumptions`` and in each answer), ``untested`` (the
        kept edges that no test could remove, with ``untested_reasons``),
        ``statistics`` and ``max_tests``.

    Notes
    -----
    *The rungs* (``method="release"``).  ``statistics="linear"`` (default) releases
    the first and second moments of f = (1/2, u_1, ..., u_p), u the columns clipped
    at ``clip`` x ``bounds`` and scaled to [-1, 1]: (p + 1)(p + 2)/2 - 1 numbers at L1
    sensitivity ((p + 1/2)^2 + p) / 2 (the proof is on the documentation page
    "Release once, test many").  Each test regresses u_i and u_j on (1, u_S) from the
    released moments and compares the residual cross moment with a variance that
    adds the bootstrap variance of the released noise to the sampling variance
    (times a public heteroscedasticity allowance 2.5); the p-value treats the one
    noisy entry (i, j) that moves the statistic one for one as Laplace.  The answer
    tests zero partial correlation: conditional independence where E[x_i | S] and
    E[x_j | S] are linear in S (``assume_linear``, stated in the caveats).  It cannot
    see a dependence without correlation (y = x^2 - 1); the additive rung can (its
    squared responses and the dependence veto), at far more noise per test: on
    pilot graphs (seed 3603, 12 graphs per cell, 5 to 12 nodes, n = 10^3 to 10^5,
    half nonlinear) the linear rung's F1 was higher than the additive rung's in all 7
    cells compared, by 0.02 to 0.19 (the additive rung was ahead on the nonlinear half
    at n = 10^5), and it was 5 to 30 times faster.  ``clip="auto"`` takes the
    tightest of 1, 3/4, 5/8, 1/2, 3/8, 5/16 and 1/4 of the bounds whose reference
    clipping bias is at most a quarter of the test's standard deviation (n, epsilon and
    p only).

    *Untested edges and the test cap.*  PC keeps an edge unless a test removes it.
    A kept edge is *untested* when one of its tests had p > alpha but could not
    remove it (power rule or untrusted), or when conditioning sets of a size it
    still had were never asked (planned orders, or ``max_tests``); the other kept
    edges were *found*.  ``max_tests`` (default 5000) caps the number of distinct
    tests computed (the linear rung computes an order's tests in one vectorised
    batch): an order whose tests do not all fit runs the edges that fit, the rest
    stay untested, and the search stops there.  The cap and the count are in the
    result (``n_tests``, ``max_tests``, the guarantee).  :func:`privci.plan_pc`
    says before the run which edges will stay untested and the smallest epsilon
    or n that would resolve them.

    *Orientation* (``orientation="majority"``).  Each unshielded triple i - k - j
    is a collider when k is in fewer than half of the separating sets of (i, j)
    that the run's tests found among the subsets of adj(i) and adj(j) (sizes up to
    the last order run; free post-processing, within ``max_tests``), a
    non-collider when in more, and is left unoriented at exactly half (the majority
    rule of Colombo and Maathuis 2014).  An edge two colliders would orient both
    ways is left undirected instead of keeping the first, and Meek's rules
    propagate only the arrowheads that stand.  ``"sepset"``: the one separating set
    that removed the edge decides, the first orientation wins (the earlier rule).
    *Power rule* (``method="release"``).  A test that cannot see a
    dependence does not remove an edge.  Each answer carries
    ``detectable_correlation``, the partial correlation at which it would
    reject with probability about 1/2, computed from released values only
    (post-processing; a field of the ``ReleasedTestResult``).  An
    answer whose detectable correlation is above ``power_rule`` never removes
    an edge, nor does an untrusted one (``untrusted="keep"``).  The level of
    each test is unchanged; the rule trades precision for recall (measured in
    ``vignettes/release_once_pc.py``; ``power_rule=None`` turns it off).
    The default 0.45 was chosen on pilot graphs for the additive rung (seeds 77
    and 78, 8 nodes) and kept for the linear rung after pilot graphs of seeds
    3602 and 3604 (5 to 12 nodes; 0.3 and 0.6 were not better overall).

    *Dependence veto* (additive rung, ``responses="quadratic"``,
    ``quadratic_veto=True``).  With two or more conditioning columns the test
    uses the linear pair only (the squared pairs do not keep their level
    there), so it cannot see y = x^2 - 1.  Before such a test removes an
    edge, the squared pairs of the same query are asked too (post-processing
    of the same release); if they reject at ``alpha`` the edge stays.  The
    veto can only keep edges, so a biased squared pair costs precision, never
    a wrong removal.  Measured on 80 pilot 8-node nonlinear graphs at eps = 5:
    recall 0.74 -> 0.82, precision unchanged.

    The per-test split rule is public: it depends on ``epsilon``,
    ``max_order`` and the graph released so far (post-processing), never on
    the data directly.  At the start of order l, with K_l the number of
    distinct tests planned at that order (cached questions are free) and L
    the highest order still possible (max_order, and one less than the
    largest degree of the current skeleton):

    - ``"levels"``: order l gets a share 1 / (L - l + 1) of what remains,
      split evenly over its K_l tests;
    - ``"halves"``: order l gets half of what remains (all of it at L);
    - ``"tests"``: every planned test of this and later orders counts once
      (later orders as if no more edges were removed): order l gets the
      share K_l / (K_l + K_later).

    Tests skipped because their edge was already removed leave their
    epsilon for later orders; the budget's filter guarantees the total is
    never exceeded (fully adaptive composition).  The per-test path needs
    much more epsilon than the release for the same graph (the documentation
    page "Private causal discovery" has the measured F1).

    *Planned orders* (``method="release"``, ``plan_orders=True``).  Before the
    search, :func:`privci.plan_pc` (public numbers only: n, epsilon, p, knots)
    gives each conditioning-set size's best-case detectable correlation;
    sizes >= 1 from the first one above 1.5 x ``power_rule`` on are not
    asked (their tests could not remove an edge; a caveat says so), and none
    above 0 when order 0 is above it.  Order 0 is always asked.

    *The sieve* (``method="sieve"``).  Rows are split by position into
    k = n // block_rows public blocks; the query of (i, j | S) is the share q
    of blocks whose own (non-private) hat-basis partial-correlation test has
    p > alpha, of sensitivity 1/k (one row changes one block's vote).
    AboveThreshold (Dwork and Roth 2014, Thm 3.23): a noisy threshold
    ``threshold`` + Lap(2/(k eps_1)), and per question, in PC-stable's order,
    q + Lap(4/(k eps_1)); the first question above it ends the instance,
    which is eps_1-DP for all its answers.  That question is examined with a
    fresh Laplace vote q + Lap(1/(k eps_2)) >= ``threshold`` (eps_2-DP), which
    removes the edge; then a new instance starts.  With c = ``max_removals``
    and s = ``examine_share``, eps_1 = (1 - s) epsilon / c and
    eps_2 = s epsilon / c; each instance and each examination is charged
    before it runs to a budget of ``epsilon`` (sequential composition under a
    privacy filter), so the total is at most c (eps_1 + eps_2) = epsilon;
    questions no instance can pay for keep their edges untouched.  The graph
    is post-processing: the run is epsilon-DP under replacement of one row.

    Examples
    --------
    >>> import numpy as np
    >>> from privci.causal import pc
    >>> rng = np.random.default_rng(2)
    >>> a = rng.normal(size=5000); b = rng.normal(size=5000)
    >>> c = (a + b) / 1.5 + 0.5 * rng.normal(size=5000)
    >>> res = pc(np.column_stack([a, b, c]), epsilon=5.0, bounds=4.0, rng=2)
    >>> res.adjacency.astype(int)
    array([[0, 0, 1],
           [0, 0, 1],
           [1, 1, 0]])
    >>> res.edges()
    [(0, '->', 2), (1, '->', 2)]
    >>> len(res.budget.ledger), res.budget.spent <= 5.0
    (1, True)
    """
    if method == "release":
        from .release import RELEASE_PC_OPTIONS, _pc_release

        extra = sorted(set(options) - set(RELEASE_PC_OPTIONS))
        given = [name for name, value, default in (
            ("test", test, "privgcm"), ("split", split, "levels"), ("delta", delta, None),
            ("composition", composition, None), ("on_exhausted", on_exhausted, "dependent"))
            if not (value is default or (isinstance(value, str) and value == default))]
        if extra or given:
            raise ValueError(f"method='release' does not take {extra + given}: its options "
                             f"are {list(RELEASE_PC_OPTIONS)} (per-test options need "
                             "method='per-test').  Nothing was charged.")
        return _pc_release(data, epsilon=epsilon, bounds=bounds, centers=centers, alpha=alpha,
                           rng=rng, max_order=max_order, budget=budget, **options)
    if method == "sieve":
        given = [name for name, value, default in (
            ("test", test, "privgcm"), ("split", split, "levels"), ("delta", delta, None),
            ("composition", composition, None), ("on_exhausted", on_exhausted, "dependent"))
            if not (value is default or (isinstance(value, str) and value == default))]
        if given:
            raise ValueError(f"method='sieve' does not take {given}: its options are "
                             f"{list(SIEVE_OPTIONS)}.  Nothing was charged.")
        return _pc_sieve(data, epsilon=epsilon, bounds=bounds, centers=centers, alpha=alpha,
                         rng=rng, max_order=max_order, budget=budget, **options)
    if method != "per-test":
        raise ValueError(f"`method` must be 'release', 'per-test' or 'sieve'; got {method!r} "
                         "instead.")
    test_options = options
    for name, value in (("bounds", bounds), ("centers", centers)):
        if isinstance(value, str):
            raise ValueError(f"`{name}={value!r}` is supported by method='release' (the default) "
                             "only; for the per-test path release them first with "
                             "privci.bounds.private_bounds (its epsilon counts too).  Nothing "
                             "was charged.")
    if on_exhausted not in _ON_EXHAUSTED:
        raise ValueError(f"`on_exhausted` must be one of {_ON_EXHAUSTED}; got "
                         f"{on_exhausted!r} instead.")
    X, names = _as_matrix(data)
    n, p = X.shape
    eps_total = V.positive_finite(epsilon, "epsilon")
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not 0.0 < alpha < 1.0:
        raise ValueError(f"`alpha` must be a number in (0, 1); got {alpha!r} instead.")
    if split not in _SPLITS:
        raise ValueError(f"`split` must be one of {_SPLITS}; got {split!r} instead.")
    top = p - 2 if max_order is None else min(V.check_int(max_order, "max_order", 0), p - 2)
    run_budget = PrivacyBudget(eps_total, delta=delta, composition=composition,
                               name="privci.causal.pc")
    tester = PrivateCITest(X, budget=run_budget, bounds=bounds, centers=centers,
                           epsilon_per_test=1.0, test=test, rng=rng, on_exhausted=on_exhausted,
                           names=names, **test_options)
    if budget is not None:
        if not isinstance(budget, PrivacyBudget):
            raise TypeError(f"`budget` must be None or a privci.PrivacyBudget; got "
                            f"{type(budget).__name__} instead.")
        if run_budget.composition != "pure":
            raise ValueError("an outer `budget` needs a pure-DP run (the run is charged to it "
                             "as one epsilon-DP release); got composition='zcdp' instead.")
        budget.charge(eps_total, test="privci.causal.pc",
                      details=f"PC on {p} columns, all tests of the run")

    level_eps, refused = {}, []
    state = {"eps": 0.0}

    def before_order(order, plan, adj_sets, edges):
        k_now = sum(1 for i, j, c in plan for s in c if not tester.is_cached(i, j, s))
        if k_now == 0:
            eps_l = 0.0
        else:
            max_deg = max(len(a) for a in adj_sets)
            last = min(top, max_deg - 1)
            if split == "levels":
                share = 1.0 / (last - order + 1)
            elif split == "halves":
                share = 1.0 if order >= last else 0.5
            else:
                later = sum(_count_sets(adj_sets, i, j, o) for o in range(order + 1, last + 1)
                            for i, j in edges)
                share = k_now / (k_now + later)
            eps_l = run_budget.per_test_epsilon(k_now, share=min(1.0, share))
        level_eps[order] = state["eps"] = eps_l

    def ask(i, j, s):
        cached = tester.is_cached(i, j, s)
        pv = tester.pvalue(i, j, s, epsilon=state["eps"])
        if not cached and not tester._cache[tester.key(i, j, s)].released:
            refused.append((i, j, s))
        return pv, True

    adj, sepsets, _ = _pc_skeleton(p, alpha, ask, top=top, before_order=before_order)
    directed = _orient(adj, sepsets)
    pvalues = {k: a.pvalue for k, a in tester._cache.items() if a.released}
    joint = (f"{eps_total:g}-DP" if run_budget.composition == "pure"
             else f"({eps_total:g}, {run_budget.delta:g})-DP")
    guarantee = (f"the {len(pvalues)} released p-values (each an epsilon_i-DP PrivGCM test, "
                 f"epsilon_i by the public '{split}' split) are jointly {joint} under "
                 "replacement of one row, by OpenDP's fully adaptive composition with a "
                 "privacy filter; the skeleton, separating sets and CPDAG are post-processing")
    if budget is not None:
        guarantee += (f"; the run was charged as one {eps_total:g}-DP release to the outer "
                      "budget")
    caveats = []
    if rng is not None:
        caveats.append("noise drawn from a seeded numpy generator: reproducible but not "
                       "hardened against floating-point attacks; use rng=None for a release.")
    if refused:
        caveats.append(f"{len(refused)} tests were not paid for and answered "
                       f"'{on_exhausted}' without touching the data.")
    return PCResult(adjacency=adj, directed=directed, names=names, sepsets=sepsets,
                    pvalues=pvalues, level_epsilon=level_eps, n_tests=len(pvalues),
                    refused=tuple(refused), epsilon=eps_total, alpha=float(alpha),
                    budget=run_budget, guarantee=guarantee, caveats=tuple(caveats))


# --- causal-learn ---------------------------------------------------------------------------

_CL_CLASS = None


def register_causallearn(name="privgcm"):
    """Register privci's private test with causal-learn under ``name``.

    After this, ``causallearn.search.ConstraintBased.PC.pc(data, alpha,
    "privgcm", budget=..., bounds=..., **options)`` and
    ``causallearn.search.ConstraintBased.FCI.fci(data, "privgcm", alpha,
    budget=..., bounds=...)`` run PC/FCI with private tests.  The keyword
    arguments go to :class:`PrivateCITest` (``budget`` and ``bounds``
    required; ``centers``, ``epsilon_per_test`` or ``max_tests``,
    ``max_order``, ``rng``, ``on_exhausted``, test options).  Without
    ``epsilon_per_test`` the budget is split evenly over
    :func:`worst_case_tests` (or ``max_tests``), decided before any test.

    Release once instead (recommended): ``tab = privci.release(X,
    epsilon=..., bounds=..., budget=budget, knots=6)`` (PC's resolution), then ``pc(X, alpha,
    "privgcm", table=tab)`` and ``fci(X, "privgcm", alpha, table=tab)``
    answer every question from the one release.  causal-learn's own search
    needs a numpy array: pass ``df.to_numpy()`` and ``names=list(df.columns)``.

    Parameters
    ----------
    name : str, default "privgcm"

    Returns
    -------
    type
        The registered ``CIT_Base`` subclass; its instances expose the
        engine as ``.private`` (ledger: ``.private.budget``).

    Examples
    --------
    >>> import numpy as np
    >>> from privci.budget import PrivacyBudget
    >>> from privci.causal import register_causallearn
    >>> from causallearn.search.ConstraintBased.PC import pc as cl_pc
    >>> cls = register_causallearn()
    >>> rng = np.random.default_rng(0)
    >>> d = rng.normal(size=(300, 3))
    >>> budget = PrivacyBudget(epsilon=2.0)
    >>> cg = cl_pc(d, 0.05, "privgcm", budget=budget, bounds=4.0, rng=1, show_progress=False)
    >>> budget.spent <= 2.0, len(budget.ledger) >= 3
    (True, True)
    """
    global _CL_CLASS
    from causallearn.utils import cit

    _check_version("causal-learn", _dist_version("causal-learn"))
    if not isinstance(name, str) or not name:
        raise TypeError(f"`name` must be a non-empty string; got {name!r} instead.")
    if _CL_CLASS is None:
        class PrivGCMCIT(cit.CIT_Base):
            """causal-learn CI test: privci's private test, charged to one PrivacyBudget."""

            def __init__(self, data, budget=None, bounds=None, **kwargs):
                if getattr(data, "columns", None) is not None and getattr(data, "ndim", 2) == 2:
                    kwargs.setdefault("names", list(data.columns))   # a DataFrame
                data = _as_matrix(data)[0]
                super().__init__(data)
                if budget is None and kwargs.get("table") is None:
                    raise TypeError("causal-learn with a privci test needs `budget=` (a "
                                    "privci.PrivacyBudget for this data set) or `table=` (a "
                                    "privci.release of it); got neither.")
                self.private = PrivateCITest(data, budget=budget, bounds=bounds, **kwargs)
                params = repr(sorted((k, repr(v)) for k, v in kwargs.items()))
                self.check_cache_method_consistent("privci", params)

            def __call__(self, X, Y, condition_set=None):
                if condition_set is None:
                    condition_set = ()
                return self.private.pvalue(int(X), int(Y), [int(k) for k in condition_set])

        _CL_CLASS = PrivGCMCIT
    cit.register_ci_test(name, _CL_CLASS)
    return _CL_CLASS


def _dist_version(dist):
    from importlib import metadata

    return metadata.version(dist)


# --- pgmpy ----------------------------------------------------------------------------------


class _PgmpyCITest:
    """A pgmpy CI-test callable: ``(X, Y, Z, significance_level=...) -> independent?``."""

    def __init__(self, engine):
        self.private = engine
        self.p_value_ = None
        self.effect_size_ = None

    def _position(self, label):
        # pgmpy passes column labels: look them up as labels, never as positions
        try:
            return self.private.names.index(label)
        except ValueError:
            raise ValueError(f"pgmpy asked about {label!r}, which is not a column of the data "
                             "given to pgmpy_ci_test.") from None

    def __call__(self, X, Y, Z=(), data=None, significance_level=0.05, **kwargs):
        pv = self.private.pvalue(self._position(X), self._position(Y),
                                 [self._position(k) for k in (Z or ())])
        self.p_value_ = pv
        self.effect_size_ = 1.0 - pv
        return bool(pv >= significance_level)

    def __repr__(self):
        return f"privci.causal.pgmpy_ci_test(budget={self.private.budget!r})"


def pgmpy_ci_test(data, *, budget=None, bounds=None, centers=0.0, **options):
    """A CI test for pgmpy's PC (``ci_test=``), private and charged to ``budget``.

    Parameters
    ----------
    data : DataFrame
        The same data frame the PC will be fitted on (pgmpy passes column
        names; the test reads the data kept here).
    budget, bounds, centers, **options
        See :class:`PrivateCITest` (``epsilon_per_test`` or ``max_tests``,
        ``max_order``, ``rng``, ``on_exhausted``, test options), or
        ``table=`` (a :func:`privci.release` of ``data``: every answer is
        post-processing, no budget needed).

    Returns
    -------
    callable
        ``test(X, Y, Z, significance_level=...)`` returns True for
        "independent" (p >= significance_level), as pgmpy's tests do, and
        sets ``p_value_``.  ``test.private`` is the engine.

    Notes
    -----
    ``pgmpy.causal_discovery.PC(ci_test=test, variant="parallel")`` runs
    tests on threads (joblib ``prefer="threads"``); the budget and the
    cache are thread-safe, but which tests run first, and so which are
    asked at all, may vary between runs (pgmpy's order over sets depends on
    hash seeds).  The older ``pgmpy.estimators.PC(data).estimate(
    ci_test=test)`` runs its "parallel" variant in processes: a budget
    cannot be copied to another process, so use ``variant="stable"`` or
    ``"orig"`` there.

    Examples
    --------
    >>> import numpy as np, pandas as pd
    >>> from privci.budget import PrivacyBudget
    >>> from privci.causal import pgmpy_ci_test
    >>> rng = np.random.default_rng(0)
    >>> df = pd.DataFrame(rng.normal(size=(300, 3)), columns=["a", "b", "c"])
    >>> budget = PrivacyBudget(epsilon=2.0)
    >>> from pgmpy.causal_discovery import PC      # doctest: +SKIP
    >>> test = pgmpy_ci_test(df, budget=budget, bounds=4.0, rng=1)      # doctest: +SKIP
    >>> est = PC(ci_test=test, variant="stable", show_progress=False).fit(df)  # doctest: +SKIP
    >>> budget.spent <= 2.0
    True

    (Skipped in the doctests because pgmpy 1.1 needs numpy >= 2, which the
    R-side environment does not have; ``tests/test_causal.py`` runs it.)
    """
    _check_version("pgmpy", _dist_version("pgmpy"))
    engine = PrivateCITest(data, budget=budget, bounds=bounds, centers=centers, **options)
    return _PgmpyCITest(engine)


# --- tigramite ------------------------------------------------------------------------------

_TG_CLASS = None


def _tigramite_class():
    global _TG_CLASS
    if _TG_CLASS is not None:
        return _TG_CLASS
    from tigramite.independence_tests.independence_tests_base import CondIndTest

    _check_version("tigramite", _dist_version("tigramite"))

    class PrivGCMTigramite(CondIndTest):
        """tigramite CondIndTest: privci's private test on i.i.d. rows, charged to one budget.

        Only contemporaneous (lag 0) variables of a single data set without
        masks or missing values: one row is one individual.  The released
        "dependence measure" is 1 - p.
        """

        @property
        def measure(self):
            return "privci_" + self._privci_test_name

        def __init__(self, *, budget, bounds, centers=0.0, privci_options=None, **kwargs):
            self._privci_test_name = "privgcm"
            super().__init__(significance="analytic", **kwargs)
            self.two_sided = True
            self.residual_based = False
            self._privci = dict(budget=budget, bounds=bounds, centers=centers,
                                **(privci_options or {}))
            if not isinstance(budget, PrivacyBudget) and not (
                    budget is None and self._privci.get("table") is not None):
                raise TypeError("`budget` must be a privci.PrivacyBudget (or None with "
                                f"table=); got {type(budget).__name__} instead.")
            self.private = None

        def set_dataframe(self, dataframe):
            super().set_dataframe(dataframe)
            values = dataframe.values
            if len(values) != 1:
                raise ValueError("privci's tigramite test takes one data set (M = 1); got "
                                 f"{len(values)} instead.")
            if getattr(dataframe, "mask", None) is not None or \
                    getattr(dataframe, "missing_flag", None) is not None:
                raise ValueError("privci's tigramite test takes no mask and no missing_flag: "
                                 "rows must be complete, i.i.d. individuals.")
            data = next(iter(values.values()))
            names = list(getattr(dataframe, "var_names", range(data.shape[1])))
            self.private = PrivateCITest(data, names=names, **self._privci)

        def _columns(self, nodes, what):
            cols = []
            for var, lag in nodes or ():
                if lag != 0:
                    raise ValueError(f"privci's tigramite test is for i.i.d. rows: `{what}` "
                                     f"must have lag 0; got {(var, lag)!r} instead (use "
                                     "run_pcalg_non_timeseries_data or tau_max = 0).")
                cols.append(int(var))
            return cols

        def run_test(self, X, Y, Z=None, tau_max=0, cut_off="2xtau_max", alpha_or_thres=None):
            if self.private is None:
                raise ValueError("Call set_dataframe first (PCMCI does this).")
            xs, ys, zs = (self._columns(X, "X"), self._columns(Y, "Y"),
                          self._columns(Z, "Z"))
            if len(xs) != 1 or len(ys) != 1:
                raise ValueError("privci's tigramite test needs univariate X and Y; got "
                                 f"X={X!r}, Y={Y!r} instead.")
            if alpha_or_thres is not None and (isinstance(alpha_or_thres, bool) or not
                                               isinstance(alpha_or_thres, (int, float))):
                raise ValueError("privci's tigramite test needs one number as pc_alpha; got "
                                 f"{alpha_or_thres!r} (a list or None asks tigramite to select "
                                 "pc_alpha by a score, which privci does not release).  "
                                 "Nothing was charged.")
            pv = self.private.pvalue(xs[0], ys[0], zs)
            val = 1.0 - pv
            if alpha_or_thres is None:
                return val, pv
            return val, pv, bool(pv <= alpha_or_thres)

        def get_dependence_measure(self, array, xyz, data_type=None):
            raise NotImplementedError("privci's tigramite test answers through run_test only "
                                      "(each answer is a charged private release).")

        def get_analytic_significance(self, value, T, dim, xyz):   # pragma: no cover
            raise NotImplementedError("privci's tigramite test answers through run_test only.")

    _TG_CLASS = PrivGCMTigramite
    return _TG_CLASS


def tigramite_ci_test(*, budget=None, bounds=None, centers=0.0, **options):
    """A tigramite ``CondIndTest`` running privci's private test, charged to ``budget``.

    Parameters
    ----------
    budget, bounds, centers, **options
        See :class:`PrivateCITest` (or ``table=``, a :func:`privci.release`
        of the same data: no budget needed); the data come from the ``DataFrame``
        PCMCI gives the test (one data set, no mask, lag-0 tests only: i.i.d.
        rows, one per individual).

    Returns
    -------
    CondIndTest
        Use as ``PCMCI(dataframe, cond_ind_test=test)`` and run
        ``run_pcalg_non_timeseries_data(pc_alpha=...)``.  PCMCI deep-copies
        the test: the budget is shared by the copy (a budget is never
        copied), and the engine is ``pcmci.cond_ind_test.private``.

    Examples
    --------
    >>> import numpy as np
    >>> from privci.budget import PrivacyBudget
    >>> from privci.causal import tigramite_ci_test
    >>> from tigramite.data_processing import DataFrame
    >>> from tigramite.pcmci import PCMCI
    >>> rng = np.random.default_rng(0)
    >>> budget = PrivacyBudget(epsilon=2.0)
    >>> test = tigramite_ci_test(budget=budget, bounds=4.0, rng=1)
    >>> out = PCMCI(DataFrame(rng.normal(size=(300, 3))), cond_ind_test=test
    ...             ).run_pcalg_non_timeseries_data(pc_alpha=0.05)
    >>> budget.spent <= 2.0
    True
    """
    cls = _tigramite_class()
    return cls(budget=budget, bounds=bounds, centers=centers, privci_options=options)


# --- Priv-PC-style sparse-vector sieve ------------------------------------------------------

def _check_sieve_options(n, p, *, block_rows=SIEVE_BLOCK_ROWS, max_removals=None,
                         examine_share=SIEVE_EXAMINE_SHARE, threshold=SIEVE_THRESHOLD,
                         knots=SIEVE_KNOTS, responses="quadratic"):
    """Validate the sieve's options (before anything is charged); returns them resolved."""
    m = V.check_int(block_rows, "block_rows", 10)
    if n < 2 * m:
        raise ValueError(f"`block_rows` must leave at least 2 blocks; got block_rows={m} for "
                         f"n={n} rows instead.")
    pairs = p * (p - 1) // 2
    c = pairs if max_removals is None else V.check_int(max_removals, "max_removals", 1)
    for name, value in (("examine_share", examine_share), ("threshold", threshold)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or \
                not 0.0 < float(value) < 1.0:
            raise ValueError(f"`{name}` must be a number in (0, 1); got {value!r} instead.")
    K = V.check_int(knots, "knots", 1)
    if K > 16:
        raise ValueError(f"`knots` must be an integer in [1, 16]; got {K} instead.")
    if responses not in ("quadratic", "linear"):
        raise ValueError(f"`responses` must be 'quadratic' or 'linear'; got {responses!r} "
                         "instead.")
    return dict(block_rows=m, max_removals=c, examine_share=float(examine_share),
                threshold=float(threshold), knots=K, responses=responses)


class _BlockVotes:
    """The sieve's query: the share of row blocks whose (non-private) test says "independent".

    The rows are split by position into k = n // block_rows disjoint blocks (public).  In
    each block the exact Gram matrix of the hat features (as in :func:`privci.release`,
    clipped with the public bounds and centres) gives, for (i, j | S), the residual
    partial correlations of u_i and u_j (and, for |S| <= 1 with ``responses="quadratic"``,
    of u_i^2 and u_j^2: three pairs, Bonferroni) given the additive hat basis of S, and a
    Fisher-z p-value.  The query is the share of blocks with p > alpha.  Replacing one row
    changes one block's vote, so the query's sensitivity is 1 / k.  Nothing here is
    released; only the noisy comparisons of :func:`_pc_sieve` are.
    """

    def __init__(self, X, centers, bounds, block_rows, knots, responses, alpha):
        from .release import _block_bounds, _gram_int, _scaled, hat_features, SCALE_BITS
        n, p = X.shape
        self.k = max(2, n // block_rows)
        edges = _block_bounds(n, self.k)
        self.rows = np.diff(edges)
        U = _scaled(X, centers, bounds)
        K1 = knots + 1
        pf = p * K1
        iu = np.triu_indices(pf)
        self.grams = np.zeros((self.k, pf, pf))
        for b in range(self.k):
            g = np.zeros((pf, pf))
            g[iu] = _gram_int(hat_features(U[edges[b]:edges[b + 1]], knots)) * \
                (1.0 / float(1 << (2 * SCALE_BITS)))
            self.grams[b] = g + np.triu(g, 1).T
        self.K1, self.pf, self.responses, self.alpha = K1, pf, responses, float(alpha)
        self.t = np.linspace(-1.0, 1.0, K1)

    def __call__(self, i, j, S):
        from scipy.special import ndtr
        K1, pf, t = self.K1, self.pf, self.t
        powers = (1, 2) if (self.responses == "quadratic" and len(S) <= 1) else (1,)
        cols = []
        for v in (i, j):
            for pw in powers:
                c = np.zeros(pf)
                c[v * K1:(v + 1) * K1] = t ** pw
                cols.append(c)
        nr = len(cols)
        if not S:
            c = np.zeros(pf)
            c[i * K1:(i + 1) * K1] = 1.0
            cols.append(c)
        for pos, s in enumerate(S):
            for kk in range(0 if pos == 0 else 1, K1):
                c = np.zeros(pf)
                c[s * K1 + kk] = 1.0
                cols.append(c)
        C = np.column_stack(cols)
        M = np.einsum("pq,kpr,rs->kqs", C, self.grams, C, optimize=True)
        Mz = M[:, nr:, nr:]
        qz = Mz.shape[-1]
        ridge = 1e-9 * np.trace(Mz, axis1=1, axis2=2)[:, None, None] * np.eye(qz) + \
            1e-12 * np.eye(qz)
        R = M[:, :nr, :nr] - M[:, :nr, nr:] @ np.linalg.solve(Mz + ridge, M[:, nr:, :nr])
        m = len(powers)
        pairs = [(a, m + b) for a in range(m) for b in range(m) if a + b <= 1]
        dof = np.maximum(self.rows - qz - 3, 1).astype(float)
        pv = np.ones((self.k, len(pairs)))
        for c, (a, b) in enumerate(pairs):
            den = R[:, a, a] * R[:, b, b]
            ok = den > 0
            r = np.where(ok, R[:, a, b] / np.sqrt(np.where(ok, den, 1.0)), 0.0)
            z = np.arctanh(np.clip(r, -0.999999, 0.999999)) * np.sqrt(dof)
            pv[:, c] = np.where(ok, 2.0 * ndtr(-np.abs(z)), 1.0)
        p_block = np.minimum(1.0, len(pairs) * pv.min(axis=1))
        return float(np.mean(p_block > self.alpha))


def _pc_sieve(data, *, epsilon, bounds, centers=0.0, alpha=0.05, rng=None, max_order=None,
              budget=None, **options):
    """PC-stable with Priv-PC's sieve-and-examine (see :func:`pc`, ``method="sieve"``)."""
    from .mechanisms import laplace_mechanism

    X, names = _as_matrix(data)
    n, p = X.shape
    eps_total = V.positive_finite(epsilon, "epsilon")
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not 0.0 < alpha < 1.0:
        raise ValueError(f"`alpha` must be a number in (0, 1); got {alpha!r} instead.")
    for name, value in (("bounds", bounds), ("centers", centers)):
        if isinstance(value, str):
            raise ValueError(f"`{name}={value!r}` is supported by method='release' only; got "
                             f"method='sieve'.  Nothing was charged.")
    b = V.positive_bounds(bounds, "bounds", p)
    c0 = V.public_centres(centers, "centers", p)
    top = p - 2 if max_order is None else min(V.check_int(max_order, "max_order", 0), p - 2)
    extra = sorted(set(options) - set(SIEVE_OPTIONS))
    if extra:
        raise ValueError(f"method='sieve' does not take {extra}: its options are "
                         f"{list(SIEVE_OPTIONS)}.  Nothing was charged.")
    opt = _check_sieve_options(n, p, **options)
    if budget is not None and not isinstance(budget, PrivacyBudget):
        raise TypeError(f"`budget` must be None or a privci.PrivacyBudget; got "
                        f"{type(budget).__name__} instead.")
    gen = None if rng is None else V.check_rng(rng)
    plan = sieve_epsilons(eps_total, opt["max_removals"], opt["examine_share"])
    eps1, eps2 = plan["sieve"], plan["examine"]
    run_budget = PrivacyBudget(eps_total, name="privci.causal.pc (sieve)")
    if budget is not None:
        budget.charge(eps_total, test="privci.causal.pc",
                      details=f"PC on {p} columns, sparse-vector sieve and examination")
    votes = _BlockVotes(X, c0, b, opt["block_rows"], opt["knots"], opt["responses"], alpha)
    del X
    delta_q = 1.0 / votes.k                        # sensitivity of the share of blocks
    tau = opt["threshold"]
    state = {"open": False, "thr": None, "stopped": False, "instances": 0, "examined": 0}
    asked = {}

    def open_instance():
        try:
            run_budget.charge(eps1, test="AboveThreshold",
                              details=f"sieve instance {state['instances'] + 1}: threshold "
                              f"{tau:g}, sensitivity 1/{votes.k}")
        except BudgetExceededError:
            state["stopped"] = True
            return False
        # threshold noise Lap(2 Delta / eps1), query noise Lap(4 Delta / eps1)
        state["thr"] = float(laplace_mechanism(np.array([tau]), 2.0 * delta_q, eps1, gen)[0][0])
        state["open"] = True
        state["instances"] += 1
        return True

    def ask(i, j, s):
        key = (i, j, tuple(sorted(s)))
        if key in asked:
            return asked[key], True
        if state["stopped"] or (not state["open"] and not open_instance()):
            asked[key] = 0.0                       # not paid for: the edge stays
            return 0.0, True
        q = votes(i, j, list(key[2]))
        noisy = float(laplace_mechanism(np.array([q]), 4.0 * delta_q, eps1, gen)[0][0])
        if noisy < state["thr"]:
            asked[key] = 0.0                       # below: keep the edge
            return 0.0, True
        state["open"] = False                      # above: this instance halts
        try:
            run_budget.charge(eps2, test="examination",
                              details=f"Laplace vote of ({names[i]}, {names[j]} | "
                              f"{[names[v] for v in key[2]]})")
        except BudgetExceededError:   # pragma: no cover - every instance reserves its share
            state["stopped"] = True
            asked[key] = 0.0
            return 0.0, True
        state["examined"] += 1
        exam = float(laplace_mechanism(np.array([q]), delta_q, eps2, gen)[0][0])
        asked[key] = 1.0 if exam >= tau else 0.0
        return asked[key], True

    adj, sepsets, _ = _pc_skeleton(p, 0.5, ask, top=top)
    directed = _orient(adj, sepsets)
    guarantee = (f"{eps_total:g}-DP under replacement of one row: {state['instances']} "
                 f"AboveThreshold instances (each {eps1:g}-DP up to its first above-threshold "
                 f"answer; query sensitivity 1/{votes.k}) and {state['examined']} Laplace "
                 f"examinations (each {eps2:g}-DP), composed sequentially under the budget's "
                 "filter; the skeleton, separating sets and CPDAG are post-processing")
    if budget is not None:
        guarantee += f"; the run was charged as one {eps_total:g}-DP release to the outer budget"
    caveats = []
    if gen is not None:
        caveats.append("noise drawn from a seeded numpy generator: reproducible but not "
                       "hardened against floating-point attacks; use rng=None for a release.")
    if state["stopped"]:
        caveats.append("the budget ran out of sieve instances: the remaining tests kept their "
                       "edges without touching the data.")
    return PCResult(adjacency=adj, directed=directed, names=names, sepsets=sepsets,
                    pvalues=dict(asked), level_epsilon={"sieve": eps1, "examine": eps2},
                    n_tests=len(asked), refused=(), epsilon=eps_total, alpha=float(alpha),
                    budget=run_budget, guarantee=guarantee, caveats=tuple(caveats))

