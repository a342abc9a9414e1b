"""Result objects returned by the tests.

Every test returns a frozen dataclass with ``statistic`` and ``pvalue`` first
(the habit of :mod:`scipy.stats`).  Private tests carry a :class:`PrivacyRecord`
that states exactly which guarantee the released numbers have, and never carry
un-noised intermediate values (residuals, residual products, statistics).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional, Tuple

import numpy as np

__all__ = ["Release", "PrivacyRecord", "GCMResult", "PrivateTestResult", "CRTResult",
           "ResidualProducts", "CRTStatistics"]


def _fmt(v):
    if isinstance(v, float):
        return f"{v:.6g}"
    if isinstance(v, np.ndarray):
        return f"array(shape={v.shape})"
    if isinstance(v, tuple) and v and isinstance(v[0], float):
        return "(" + ", ".join(f"{t:.6g}" for t in v) + ("," if len(v) == 1 else "") + ")"
    return repr(v)


def _assumed(fc):
    """Whether the fit check's call stated a public assumption on E[X | Z], E[Y | Z]
    (``assume_additive=True`` or ``assume=...``)."""
    return bool(fc.get("assume_additive", False) or fc.get("assume"))


FLOOR_REASON = ("the unchecked linear fit was shrunk: a released Gram matrix has an "
                "eigenvalue under its noise floor (correlated or few rows for this "
                "epsilon), a bias nothing bounds")


def failsafe_reason(fit_check, pvalue):
    """Why ``pvalue`` is the fail-safe 1 (a short clause), or None when it is not.

    The fail-safe is a p-value of 1 set because the released regression is not
    certified (``fit_check["certified"]`` is False): it is not evidence of
    independence.  Public: the clause is built from the fit check only.

    Examples
    --------
    >>> failsafe_reason({"certified": False, "resolvable": True}, 1.0)
    'the nested fits disagree (regression bias large against the noise)'
    >>> failsafe_reason({"certified": True}, 1.0) is None
    True
    """
    fc = fit_check
    if fc is None or fc.get("certified", True) or pvalue != 1.0:
        return None
    if not fc.get("resolvable", True) and fc.get("columns", 1) >= 2 and not _assumed(fc):
        return ("the interactions of two or more columns of z cannot be certified (state "
                "assume_additive=True if E[X | Z] and E[Y | Z] are additive)")
    if not fc.get("resolvable", True):
        return ("the released regression cannot be resolved at this n, epsilon and number "
                "of columns of z")
    if fc.get("floor_binds"):
        return FLOOR_REASON
    return "the nested fits disagree (regression bias large against the noise)"


def smallest_pvalue(n_resamples):
    """The smallest p-value a resampling test with ``n_resamples`` resamples can return,
    1 / (m + 1)."""
    return 1.0 / (int(n_resamples) + 1.0)


def _pvalue_line(pvalue, note):
    return f"\n    pvalue={_fmt(pvalue)}" + (f"  ({note})" if note else "") + ","


class _ReprMixin:
    _repr_fields: Tuple[str, ...] = ()

    def _pvalue_note(self):
        """A note printed next to the p-value ('' for none)."""
        return ""

    def __repr__(self):  # pragma: no cover - exercised through str()
        names = self._repr_fields or tuple(self.__dataclass_fields__)

        def item(k):
            text = f"{k}={_fmt(getattr(self, k))}"
            note = self._pvalue_note() if k == "pvalue" else ""
            return text + (f"  ({note})" if note else "")

        body = ",\n    ".join(item(k) for k in names)
        return f"{type(self).__name__}(\n    {body}\n)"


@dataclass(frozen=True)
class Release:
    """One noisy release of a private test: an entry of ``PrivacyRecord.releases``.

    Attributes
    ----------
    name : str
        What was released, e.g. ``"block sums"``, ``"x_center[0]"``.
    epsilon : float
        The epsilon share charged for this release.
    sensitivity : float
        The sensitivity the noise is calibrated to (L1 for Laplace; the
        sensitivity of each score for the exponential mechanisms).
    noise_scale : float
        The scale of the noise drawn (Laplace scale; Gumbel/exponential scale).
    mechanism : str
        The mechanism that drew the noise.
    rows : str
        ``"all"``; or the disjoint part of the rows the release reads (the two
        halves of the spline fit, ``"half A"`` and ``"half B"``): releases on
        disjoint parts compose in parallel (see ``composed_epsilon``).
    """

    name: str
    epsilon: float
    sensitivity: float
    noise_scale: float
    mechanism: str
    rows: str = "all"


def composed_epsilon(releases):
    """The epsilon of ``releases`` by composition, as an exact ``fractions.Fraction``.

    Releases on all rows compose sequentially (their epsilons add up); those on
    disjoint parts of the rows compose in parallel: each part's releases add up,
    and the parts count once, by their largest total.
    """
    from fractions import Fraction
    total, parts = Fraction(0), {}
    for r in releases:
        e = Fraction(float(r.epsilon))
        if r.rows == "all":
            total += e
        else:
            parts[r.rows] = parts.get(r.rows, Fraction(0)) + e
    return total + (max(parts.values()) if parts else Fraction(0))


def _release_table(releases, indent="    "):
    """The releases as a small aligned table (one line per release), or ''."""
    if not releases:
        return ""
    head = ("release", "epsilon", "sensitivity", "noise scale", "mechanism")
    rows = [(r.name + ("" if r.rows == "all" else f" ({r.rows})"), f"{r.epsilon:.6g}",
             f"{r.sensitivity:.6g}", f"{r.noise_scale:.6g}", r.mechanism) for r in releases]
    widths = [max(len(row[i]) for row in [head] + rows) for i in range(4)]

    def line(row):
        cells = [row[0].ljust(widths[0])] + [row[i].rjust(widths[i]) for i in (1, 2, 3)]
        return indent + "  ".join(cells + [row[4]])

    return "\n".join([line(head)] + [line(r) for r in rows])


@dataclass(frozen=True, repr=False)
class PrivacyRecord(_ReprMixin):
    """What the released output of a private test guarantees.

    Attributes
    ----------
    epsilon : float
        The pure differential-privacy parameter of the release (neighbouring
        data sets differ in one row, replaced arbitrarily).
    mechanism : str
        The noise mechanism, e.g. ``"laplace"`` or ``"report_noisy_max"``.
    sensitivity : float
        The certified sensitivity the noise is calibrated to (L1 for the
        Laplace mechanism, the sensitivity of each score for report-noisy-max).
    noise_scale : float
        The scale of the noise actually drawn.
    hardened : bool
        True when the noise came from OpenDP's exact samplers (safe against
        floating-point attacks); False for numpy noise from a user ``rng``.
    ridge_lambda, kernel_sigma : float
        The hyper-parameters that enter the sensitivity bound.
    bounds : dict
        The public bounds used for clipping.
    guarantee : str
        One sentence stating the guarantee.
    caveats : tuple of str
        Everything that weakens or qualifies the guarantee.
    n_blocks : int or None
        PrivGCM: the number of noisy block sums released (n: one per product,
        the paper's Algorithm 1).
    composition : str or None
        With a :class:`privci.PrivacyBudget`: how this release was charged.
    sensitivity_kind : str or None
        ``"sharp"`` (the package's proved constants) or ``"paper"``.
    releases : tuple
        Every noisy release of the test, in the order drawn, with its epsilon
        share, sensitivity, noise scale and mechanism (``epsilon`` and
        ``sensitivity``/``noise_scale`` above summarise the final one).
        ``composed_epsilon`` of them is at most ``epsilon``.
    """

    epsilon: float
    mechanism: str
    sensitivity: float
    noise_scale: float
    hardened: bool
    ridge_lambda: Optional[float]
    kernel_sigma: Optional[float]
    bounds: dict
    guarantee: str
    caveats: Tuple[str, ...] = ()
    n_blocks: Optional[int] = None
    composition: Optional[str] = None
    sensitivity_kind: Optional[str] = None
    releases: Tuple[Release, ...] = ()

    def __repr__(self):
        names = tuple(k for k in self.__dataclass_fields__ if k != "releases")
        body = ",\n    ".join(f"{k}={_fmt(getattr(self, k))}" for k in names)
        table = _release_table(self.releases, "        ")
        if table:
            body += ",\n    releases:\n" + table
        return f"{type(self).__name__}(\n    {body}\n)"


@dataclass(frozen=True, repr=False)
class GCMResult(_ReprMixin):
    """Result of the non-private GCM test (:func:`privci.gcm`).

    Attributes
    ----------
    statistic : float
        Univariate: sqrt(n) mean(R) / sd(R).  Multivariate: the max statistic
        sqrt(n) max_k |mean(R_k)| / sd(R_k).
    pvalue : float
        Normal p-value (univariate) or multiplier-bootstrap p-value
        (multivariate).
    alternative, method : str
    n : int
    ridge_lambda_x, ridge_lambda_y : tuple of float or None
        The ridge parameter used for each column of x and y (None when the
        residuals were not from kernel ridge regression).
    resid_x, resid_y : ndarray
        The residuals of x on z and y on z, shape (n, p) and (n, q).
    n_sim : int or None
        Number of multiplier draws (multivariate only).
    """

    statistic: float
    pvalue: float
    alternative: str
    method: str
    n: int
    ridge_lambda_x: Optional[Tuple[float, ...]] = None
    ridge_lambda_y: Optional[Tuple[float, ...]] = None
    resid_x: Optional[np.ndarray] = field(default=None, compare=False)
    resid_y: Optional[np.ndarray] = field(default=None, compare=False)
    n_sim: Optional[int] = None
    data_name: Optional[str] = None

    def __iter__(self):
        return iter((self.statistic, self.pvalue))

    @property
    def note(self):
        """What is faster at this n (a public rule of n and ``method``), or None: from
        n = 3000 on, after the exact kernel ridge regression (O(n^3) time)."""
        m = self.method or ""
        if self.n < GCM_LARGE_N or "kernel ridge regression" not in m or \
                "random Fourier" in m:
            return None
        what = ("the exact kernel ridge regression with cross-validated lambda (R's default)"
                if "cross-validation" in m else "the exact kernel ridge regression")
        return (f"at n = {self.n} {what} takes O(n^3) time and O(n^2) memory; faster: "
                "kernel_approximation='rff', ridge_lambda=1e-5, center=True (see "
                "help(privci.gcm), 'Larger n')")

    def __repr__(self):
        text = super().__repr__()
        return text[:-2] + f",\n    note: {self.note}\n)" if self.note else text


GCM_LARGE_N = 3000     # privci.gcm's LARGE_N: from this n on the result notes what is faster


@dataclass(frozen=True, repr=False)
class PrivateTestResult(_ReprMixin):
    """Result of a differentially private test.

    Only the released quantities are stored: the statistic computed on noisy
    values (or, for PrivCRT, the privately selected rank) and its p-value, with
    the :class:`PrivacyRecord` that says what they guarantee.
    """

    statistic: float
    pvalue: float
    alternative: str
    method: str
    n: int
    privacy: PrivacyRecord
    statistic_name: str = "statistic"
    n_resamples: Optional[int] = None
    n_sim: Optional[int] = None
    data_name: Optional[str] = None
    fit_check: Optional[dict] = field(default=None, compare=False)

    def __iter__(self):
        return iter((self.statistic, self.pvalue))

    @property
    def fit_certified(self):
        """False when the released regression is not certified: its public rule cannot
        resolve the fit, or the nested fits' estimated bias is large against the noise; in
        both cases the p-value is set to 1 (a fail-safe, not evidence).  None when the
        test has no released regression.
        """
        return None if self.fit_check is None else bool(self.fit_check["certified"])

    @property
    def failsafe(self):
        """Why ``pvalue`` is the fail-safe 1 (a short clause; public), or None when it is
        not: the released regression is not certified (``fit_certified`` is False), so the
        test does not answer and the 1 is not evidence of independence."""
        return failsafe_reason(self.fit_check, self.pvalue)

    @property
    def min_pvalue(self):
        """The smallest p-value this test could have returned: 1 / (m + 1) for PrivCRT with
        m resamples (with m = 19 it is 0.05, so only ``p <= alpha`` rejects at alpha =
        0.05); None for the other tests (their p-values are continuous)."""
        if self.statistic_name != "rank" or self.n_resamples is None:
            return None
        return smallest_pvalue(self.n_resamples)

    def _pvalue_note(self):
        if self.failsafe is not None:
            return f"fail-safe, not evidence: {self.failsafe}; see the fit check"
        if self.min_pvalue is not None:
            return (f"the smallest attainable with {self.n_resamples} resamples is "
                    f"1/{self.n_resamples + 1} = {_fmt(self.min_pvalue)}; reject at level "
                    f"alpha when p <= alpha")
        return ""

    def __repr__(self):
        name = "" if self.statistic_name == "statistic" else f" ({self.statistic_name})"
        head = (f"{type(self).__name__}(\n    statistic={_fmt(self.statistic)}{name},"
                + _pvalue_line(self.pvalue, self._pvalue_note())
                + f"\n    alternative={self.alternative!r},"
                f"\n    method={self.method!r},\n    n={self.n},")
        if self.data_name is not None:
            head += f"\n    data_name={self.data_name!r},"
        if self.n_resamples is not None:
            head += f"\n    n_resamples={self.n_resamples},"
        p = self.privacy
        priv = (f"\n    privacy: epsilon={_fmt(p.epsilon)} ({p.mechanism}, sensitivity="
                f"{_fmt(p.sensitivity)}, noise scale={_fmt(p.noise_scale)}, "
                f"{'hardened OpenDP noise' if p.hardened else 'NOT hardened: seeded numpy noise'})"
                f"\n    guarantee: {p.guarantee}")
        if p.composition:
            priv += f"\n    budget: {p.composition}"
        if p.releases:
            priv += "\n    releases:\n" + _release_table(p.releases, "      ")
        for c in p.caveats:
            priv += f"\n    caveat: {c}"
        fc = self.fit_check
        if fc is not None:
            if fc.get("certified", True):
                verdict = "certified"
            elif not fc.get("resolvable", True) and fc.get("columns", 1) >= 3 \
                    and not _assumed(fc):
                verdict = ("NOT certified: with three or more columns of z the released "
                           "regression cannot certify their interactions (assume='additive' "
                           "or 'linear' states a model), so the p-value is set to 1 (a "
                           "fail-safe, not evidence)")
            elif not fc.get("resolvable", True):
                verdict = ("NOT certified: at this n, epsilon and number of columns of z the "
                           "released regression cannot resolve the central directions, so "
                           "the p-value is set to 1 (a fail-safe, not evidence)")
            elif fc.get("floor_binds"):
                verdict = (f"NOT certified: {FLOOR_REASON}, so the p-value is set to 1 (a "
                           "fail-safe, not evidence)")
            else:
                verdict = ("NOT certified: the nested fits disagree (estimated regression "
                           "bias large against the noise), so the p-value is set to 1 (a "
                           "fail-safe, not evidence)")
            details = []
            if "allowance_share" in fc:
                details.append(f"bias allowance {100 * fc['allowance_share']:.0f}% of the "
                               "variance")
            if fc.get("model") == "linear":
                if not fc.get("checked"):
                    how = ", not checked"
                elif fc.get("intervals") == _POLY_INTERVALS:
                    how = (", checked by a nested fit of every product of cubic polynomials "
                           "in the clipped columns")
                else:
                    how = (f", checked by a nested fit of cubic splines, "
                           f"{fc.get('rich_intervals', '?')} intervals per column")
                details.append("assume='linear': a linear function of each column" + how)
            elif "intervals" in fc:
                details.append(f"{fc['intervals']} spline intervals per column, nested rich "
                               f"fit {fc.get('rich_intervals', '?')}, interactions "
                               f"{'yes' if fc.get('interactions') else 'no'}"
                               + (f"; periods under {fc['shortest_period']:.2g} z_scale not "
                                  "seen" if "shortest_period" in fc else ""))
            head += f"\n    fit check: {verdict}" + (f" ({'; '.join(details)})"
                                                       if details else "")
        return head + priv + "\n)"


# privci._spline.POLY_INTERVALS: the "intervals" of the linear fit's polynomial check (this
# module may not import _spline, which imports it; a test asserts they agree)
_POLY_INTERVALS = 1


@dataclass(frozen=True, repr=False)
class CRTResult(_ReprMixin):
    """Result of the non-private conditional randomization test."""

    statistic: float
    pvalue: float
    alternative: str
    method: str
    n: int
    n_resamples: int
    resampled_statistics: np.ndarray = field(compare=False, default=None)
    data_name: Optional[str] = None

    def __iter__(self):
        return iter((self.statistic, self.pvalue))

    @property
    def min_pvalue(self):
        """The smallest p-value the test could have returned, 1 / (m + 1)."""
        return smallest_pvalue(self.n_resamples)

    def _pvalue_note(self):
        return (f"the smallest attainable with {self.n_resamples} resamples is "
                f"1/{self.n_resamples + 1} = {_fmt(self.min_pvalue)}")


@dataclass(frozen=True, repr=False)
class ResidualProducts(_ReprMixin):
    """Output of the PrivGCM transformation (:func:`privci.residual_products`).

    ``products`` has a certified L1 sensitivity ``sensitivity`` (over all
    columns) under the replacement of one row.  These are *un-noised* private
    values: never release them.
    """

    products: np.ndarray
    sensitivity: float
    ridge_lambda: float
    kernel_sigma: float
    x_bound: np.ndarray
    y_bound: np.ndarray
    shape_xy: Tuple[int, int]
    kernel_approximation: str = "exact"
    x_center: Optional[np.ndarray] = None
    y_center: Optional[np.ndarray] = None
    residual_bound: Optional[float] = None
    sensitivity_kind: str = "sharp"
    data_name: Optional[str] = None


@dataclass(frozen=True, repr=False)
class CRTStatistics(_ReprMixin):
    """Output of the PrivCRT transformation (:func:`privci.crt_statistics`).

    ``statistics[0]`` is T_0 on the observed x, ``statistics[1:]`` on the
    resamples; each has sensitivity at most ``sensitivity`` (Delta_T).  These
    are *un-noised* private values: never release them.
    """

    statistics: np.ndarray
    sensitivity: float
    ridge_lambda: float
    kernel_sigma: float
    y_bound: float
    x_residual_bound: float
    kernel_approximation: str = "exact"
    n: int = 0
    y_center: float = 0.0
    sensitivity_kind: str = "sharp"
