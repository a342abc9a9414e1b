"""Private public parameters: centres, bounds and scales released with differential privacy.

Every private test needs public bounds and centres fixed before seeing the
data.  When nothing public is known about the range of a column, this module
spends a stated part of the privacy budget on differentially private
quantiles and releases

* a **centre** per column: the private median;
* a **bound** per column: a private upper quantile (``bound_quantile``) of
  ``|x - centre|``, computed after the centre is released;
* a **scale** per column of Z (:func:`private_scale`): the private median of
  the differences |z_i - z_{i + n/2}| of paired rows, divided by 0.9539 (the
  standard deviation for Gaussian data), so that ``kernel_sigma`` means the
  same thing whatever the units of Z.

Each quantity is one release of OpenDP's quantile mechanism
(``make_private_quantile``, an exponential mechanism over a public grid of
candidates, Smith 2011) with its own epsilon; by sequential composition the
epsilons add up.  The budget is split equally between the released
quantities (columns x {centre, bound}); the result says how.

The candidates are public: by default 0 and +-10^(k / points_per_decade) for
exponents from -6 to 9 (``points_per_decade=1000``, a relative spacing of
0.23%, 30,003 candidates) for centres, and 10^(k / 50) from 10^-6 to 10^9 for
bounds and scales (a relative spacing of 4.7%; a bound needs only its order
of magnitude).  A public range, where one is known, replaces the grid by
10,001 equally spaced points inside it.  A quantile can only be as good as
the candidates inside the data: the centre grid has candidates within every
column whose |mean| / sd is below about 800 (0.23% of the mean is then less
than 2 sd); beyond that, give a public range.  And the scores of a quantile
span about n / 2 while the noise is of order (2 / epsilon) ln(#candidates):
below n x epsilon-per-quantile of about 60 the release is close to a uniform
draw among the candidates (:class:`UnreliableQuantileWarning`).

Randomness: ``rng=None`` (default) uses OpenDP's hardened sampler.  A seed or
Generator selects a numpy implementation of the same exponential mechanism
(Gumbel noise of scale 2 / epsilon on the scores) for simulation studies: it
is NOT hardened against floating-point attacks, and its seed must be secret,
fresh and never reused for a release.

Choice of ``bound_quantile`` (default 0.8).  PrivGCM's Laplace noise does not
depend on the bounds while its signal, in units of the bounds, does, and
clipping loses less signal than a wide bound: for Gaussian residuals clipped
at b standard deviations the covariance that survives, in units of the
bound, is (E[X clip(X / b, -1, 1)])^2 r = 0.55 r at q = 0.5 (b = 0.67),
0.39 r at q = 0.8 (b = 1.28), 0.30 r at 0.9, 0.15 r at 0.99 and 0.06 r at the
oracle 4-sd bound of the vignettes.  Where the privacy noise dominates,
tighter is stronger; where the sampling noise dominates, clipping costs
efficiency: the asymptotic relative efficiency of the product of two clipped
Gaussians is 0.70 at q = 0.5, 0.81 at 0.68, 0.89 at 0.8, 0.95 at 0.9.  The
power study of the whole test in ``vignettes/auto_bounds.py`` (PrivGCM with
its defaults, n = 10^4, the paper's design, 10% of epsilon on the bounds,
100 replications) gave, for q = 0.5, 0.68, 0.8, 0.9, 0.95, 0.99 and the oracle
4-sd bounds: beta = 0.05, epsilon = 8 (sampling noise dominates) 0.84, 0.86,
0.92, 0.95, 0.95, 0.97 and 0.92; beta = 0.1, epsilon = 0.5 (privacy noise
dominates) 0.99-1.00 for every q and 0.17 for the oracle; and under the null
(epsilon = 8) 0.11-0.13 for every q and 0.10 for the oracle (the level does
not depend on q; see the vignette's README for the level at epsilon = 8).
0.8 is the smallest quantile that matches the oracle where sampling noise
dominates, and it keeps 6x the oracle's signal where privacy noise does.

Bounds prefer small candidates (``BOUND_PRIOR_POWER``, since stop 49).  Every
candidate above the largest |x - centre| has the same score, so where the
upper quantile sits on that largest value (a binary column with both values
common, a top-coded one) the plain mechanism drew the bound log-uniformly
from there to 10^9: a balanced binary x got a bound more than 10 times its
largest |x - centre| in 0.86 of 100 draws (n = 2000, epsilon 0.05 per
quantity), and PrivGCM with ``x_bound="auto"`` lost its power (0.05 at
epsilon 5 where the oracle has 0.94).  The bound's mechanism therefore weighs
candidate c by the public weight (c / c_min)^-1 (c_min the grid's smallest
candidate) besides exp(epsilon score / 2): a base measure of the exponential
mechanism, fixed before the data are seen, so the ratio of any output's
probability under neighbouring data sets is still at most e^epsilon.  The
binary column's bound is then near its values (more than 10 times them in 0.01
of 400 draws; a bound below the smaller |x - centre| maps the column to two
values, a lossless recoding).  Where the scores separate the candidates (n
epsilon per quantity well above 60) the weight moves the release by a small
fraction of a grid step; where they do not, it pulls the bound toward the
grid's smallest candidates (a tight window: x is then recoded near its sign
around the centre, which keeps the test valid).  The hardened path builds the
mechanism from OpenDP's ``make_quantile_score_candidates`` and
``make_noisy_max`` with the public weights added to the scores between them.

The upper quantile is also lowered, using only public numbers, when n and
epsilon are small: with (1 - q) n epsilon_q / 2 below ln(#candidates) + 5,
the candidates far beyond the data (all tied at the same score) could win
the exponential mechanism and release an absurdly large bound, so q is
capped at 1 - 2 (ln(#candidates) + 5) / (n epsilon_q) (and floored at 0.5).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Optional, Tuple

import numpy as np

from . import _validation as V
from ._epsilon import equal_share as _split

__all__ = ["ReleasedParameters", "candidate_grid", "private_quantile", "private_bounds",
           "private_scale", "UnreliableQuantileWarning", "DEFAULT_BOUND_QUANTILE", "MAD_TO_SD"]

DEFAULT_BOUND_QUANTILE = 0.8
MAD_TO_SD = 1.482602218505602  # 1 / Phi^-1(3/4): the MAD of N(0, s^2) is s / 1.4826
_CENTER_POINTS_PER_DECADE = 1000
_BOUND_POINTS_PER_DECADE = 50
_MIN_EXPONENT, _MAX_EXPONENT = -6, 9
_RANGE_POINTS = 10001
_TAIL_MARGIN = 5.0
_MAX_FLOAT = float(np.finfo(np.float64).max)
# The score of a quantile ranges over about n / 2 while the Gumbel noise has scale
# 2 / epsilon and its maximum over C candidates about (2 / epsilon) ln C: below
# n epsilon = 4 (ln 30003 + 5) ~ 60 the noise swamps the scores.
_UNRELIABLE_N_EPS = 60.0
# The bounds' public preference for small candidates (stop 49): candidate c is drawn with
# weight (c / c_min)^-BOUND_PRIOR_POWER times exp(epsilon score / 2), where c_min is the
# grid's smallest candidate.  Every candidate above the data's largest |x - centre| has the
# same score, so where the quantile sits on that largest value (binary or top-coded
# columns) the draw without it was log-uniform up to 10^9 (a binary x got bounds of 10^2
# to 10^8 in 5 of 6 draws, and no power); with it the draw stays near the data.  The
# weights do not depend on the data, so the guarantee is unchanged.  0: no preference.
BOUND_PRIOR_POWER = 1.0


# --------------------------------------------------------------------------- grids

def candidate_grid(public_range=None, *, points_per_decade=_CENTER_POINTS_PER_DECADE,
                   min_exponent=_MIN_EXPONENT, max_exponent=_MAX_EXPONENT, positive=False):
    """The public candidates of the private quantiles.

    Parameters
    ----------
    public_range : (float, float) or None
        A range known before seeing the data.  Given: 10,001 equally spaced
        points from its lower to its upper end (``positive=True``: from
        width / 10,000 to the width, ``upper - lower``).  The width must be a
        finite float and the range must hold 10,001 distinct floats; otherwise
        ValueError (public numbers only: refused before any budget is
        charged).  None: a logarithmic grid.
    points_per_decade : int, default 1000
        Candidates per factor of 10 in the logarithmic grid.
    min_exponent, max_exponent : int, default -6 and 9
        The logarithmic grid runs over 10^min_exponent .. 10^max_exponent.
    positive : bool, default False
        False: 0 and +-10^(k / points_per_decade) (for centres).  True: the
        positive half only (for bounds and scales).

    Returns
    -------
    ndarray, increasing

    Examples
    --------
    >>> from privci import bounds
    >>> g = bounds.candidate_grid(points_per_decade=1, min_exponent=-1, max_exponent=1)
    >>> [round(v, 12) for v in g.tolist()]
    [-10.0, -1.0, -0.1, 0.0, 0.1, 1.0, 10.0]
    >>> bounds.candidate_grid((0, 10), positive=True)[[0, -1]].tolist()
    [0.001, 10.0]
    >>> bounds.candidate_grid((-1e308, 1e308))
    Traceback (most recent call last):
    ...
    ValueError: `public_range` must have a finite width upper - lower (at most 1.7976931348623157e+308); got (-1e+308, 1e+308) instead, whose width overflows to inf.  Give a narrower range.
    """
    if public_range is not None:
        lo, hi = _check_range(public_range, "public_range")
        return _range_grid(lo, hi, positive)
    ppd = V.check_int(points_per_decade, "points_per_decade", 1)
    lo_e = V.check_int(min_exponent, "min_exponent", -300)
    hi_e = V.check_int(max_exponent, "max_exponent", lo_e + 1)
    if hi_e > 300:
        raise ValueError(f"`max_exponent` must be at most 300; got {hi_e} instead.")
    pos = 10.0 ** (np.arange(lo_e * ppd, hi_e * ppd + 1) / ppd)
    if positive:
        return pos
    return np.concatenate([-pos[::-1], [0.0], pos])


def _range_grid(lo, hi, positive):
    """The candidates of a checked public range (see :func:`candidate_grid`)."""
    if positive:
        w = hi - lo
        return np.linspace(w / (_RANGE_POINTS - 1), w, _RANGE_POINTS - 1)
    return np.linspace(lo, hi, _RANGE_POINTS)


def _check_range(value, name):
    """A public (lower, upper) pair whose width and both grids are finite and increasing.

    Public numbers only: everything refused here is refused before a budget is
    charged and whatever the data.  The width ``upper - lower`` must be a
    finite float (it is the largest candidate of a bound or scale; an
    overflow gave NaN candidates), and the range must hold 10,001 distinct
    floats (OpenDP needs strictly increasing candidates).
    """
    try:
        lo, hi = (float(v) for v in value)
    except (TypeError, ValueError):
        raise TypeError(f"`{name}` must be None or a pair (lower, upper) of numbers; got "
                        f"{V._short(value)} instead.") from None
    if not (np.isfinite(lo) and np.isfinite(hi) and lo < hi):
        raise ValueError(f"`{name}` must be a finite pair with lower < upper; got "
                         f"{V._short(value)} instead.")
    with np.errstate(over="ignore"):
        width = hi - lo
    if not np.isfinite(width):
        raise ValueError(f"`{name}` must have a finite width upper - lower (at most "
                         f"{_MAX_FLOAT:.17g}); got {V._short(value)} instead, "
                         "whose width overflows to inf.  Give a narrower range.")
    for positive in (False, True):
        g = _range_grid(lo, hi, positive)
        if not (np.all(np.diff(g) > 0) and (g[0] > 0 or not positive)):
            raise ValueError(f"`{name}` is too narrow to hold {_RANGE_POINTS} distinct "
                             f"candidates between its ends; got {V._short(value)} instead.  "
                             "Give a wider range.")
    return lo, hi


def _column_ranges(value, name, ncol):
    """None, one (lower, upper) pair for every column, or one pair per column."""
    if value is None:
        return [None] * ncol
    arr = np.asarray(value, dtype=object)
    if arr.ndim == 1 and len(value) == 2 and not isinstance(value[0], (tuple, list, np.ndarray)):
        r = _check_range(value, name)
        return [r] * ncol
    ranges = [_check_range(v, name) for v in value]
    if len(ranges) != ncol:
        raise ValueError(f"`{name}` must be one (lower, upper) pair or one pair per column "
                         f"({ncol}); got {len(ranges)} pairs instead.")
    return ranges


# --------------------------------------------------------------------------- one quantile

def _dp():
    # OpenDP's core modules only: `opendp.prelude` also imports opendp.extras (~3 s).
    from opendp import domains, measurements, measures, metrics, mod

    mod.enable_features("contrib")
    return domains, measurements, measures, metrics


_FEATURE_LOCK = __import__("threading").Lock()


def _log_preference(candidates, power):
    """The public log-weights -power ln(c / c_min) of the candidates (0 where power is 0;
    candidates at or below 0 take the weight of the smallest positive one)."""
    c = np.asarray(candidates, dtype=np.float64)
    if power == 0.0:
        return np.zeros(c.size)
    pos = c[c > 0]
    if pos.size == 0:
        return np.zeros(c.size)
    lo = float(pos.min())
    return -float(power) * np.log(np.maximum(c, lo) / lo)


def _opendp_quantile(values, alpha, epsilon, candidates, power=0.0):
    """OpenDP's make_private_quantile on a vector of known size; map(2) <= epsilon.

    With ``power`` > 0 the same mechanism is built from its parts, OpenDP's
    ``make_quantile_score_candidates`` and ``make_noisy_max`` (negated: the least score
    wins), with a public non-negative integer added to every candidate's score between them:
    round(scale power ln(c / c_min)) in the scores' units, so that the selection weighs
    candidate c by (c / c_min)^-power.  Adding a public vector is 1-stable in the scores'
    L-infinity metric (saturating at 2^64 - 1, also 1-Lipschitz), so map(2) is the
    mechanism's own."""
    domains, measurements, measures, metrics = _dp()
    dom = domains.vector_domain(domains.atom_domain(T=float, nan=False), size=int(values.size))
    met = metrics.symmetric_distance()
    cands = [float(c) for c in candidates]
    if power == 0.0:
        def build(scale):
            return measurements.make_private_quantile(dom, met, measures.max_divergence(),
                                                      candidates=cands, alpha=float(alpha),
                                                      scale=scale)
        meas, scale, spent = _calibrated(build, 2.0 / epsilon, epsilon)
        return float(meas(values.tolist())), scale, spent
    from opendp import mod, transformations
    score = transformations.make_quantile_score_candidates(dom, met, candidates=cands,
                                                            alpha=float(alpha))
    unit = float(score.map(2))             # the scores' sensitivity: one unit of the rank score
    pref = -_log_preference(cands, power)  # >= 0
    top = (1 << 64) - 1

    def build(scale):
        shift = [int(round(scale * v)) for v in pref]

        def add(s, shift=shift):
            return [min(int(a) + b, top) for a, b in zip(s, shift)]

        with _FEATURE_LOCK:      # OpenDP's feature set is global: one thread at a time
            had = "honest-but-curious" in mod.GLOBAL_FEATURES
            mod.enable_features("honest-but-curious")
            try:
                public_shift = transformations.make_user_transformation(
                    score.output_domain, score.output_metric, score.output_domain,
                    score.output_metric, add, lambda d_in: d_in)
            finally:
                if not had:
                    mod.disable_features("honest-but-curious")
        return score >> public_shift >> measurements.then_noisy_max(
            measures.max_divergence(), scale=float(scale), negate=True)

    meas, scale, spent = _calibrated(build, 2.0 / epsilon * unit, epsilon)
    return float(cands[int(meas(values.tolist()))]), scale / unit, spent


def _calibrated(build, scale, epsilon):
    """(measurement, scale, epsilon spent) of ``build(scale)`` with the least scale tried
    from ``scale`` up whose map(2) (replacing one row of a data set of known size is a
    symmetric distance of 2) is at most ``epsilon``."""
    for attempt in range(64):
        meas = build(scale)
        spent = meas.map(2)
        if spent <= epsilon:
            return meas, scale, float(spent)
        scale = float(np.nextafter(scale * max(1.0, spent / epsilon), np.inf)) \
            if attempt < 8 else scale * (1.0 + 1e-12 * 2.0 ** (attempt - 8))
    raise RuntimeError("could not calibrate OpenDP's quantile mechanism to the requested "
                       "epsilon")  # pragma: no cover


def _numpy_quantile(values, alpha, epsilon, candidates, rng, power=0.0):
    """The exponential mechanism with score -dist(alpha n, [#{x < c}, #{x <= c}]).

    Replacing one row moves both counts by at most 1, so the score has
    sensitivity 1; the Gumbel-max trick with scale 2 / epsilon samples the
    exponential mechanism exp(epsilon u / 2), times the public weights
    (c / c_min)^-power (a base measure on the candidates: it does not depend on the
    data, so the ratio of any output's probability under neighbouring data sets is
    still at most e^epsilon).
    """
    xs = np.sort(values)
    lt = np.searchsorted(xs, candidates, side="left")
    le = np.searchsorted(xs, candidates, side="right")
    target = alpha * xs.size
    score = -np.maximum(0.0, np.maximum(lt - target, target - le))
    pref = (2.0 / epsilon) * _log_preference(candidates, power)
    idx = int(np.argmax(score + pref + rng.gumbel(0.0, 2.0 / epsilon, size=score.size)))
    return float(candidates[idx])


def _quantile(values, alpha, epsilon, candidates, rng, power=0.0):
    """(value, epsilon spent, noise scale) of one private quantile; ``power``: the public
    preference (c / c_min)^-power for small candidates (:data:`BOUND_PRIOR_POWER`)."""
    if rng is None:
        value, scale, spent = _opendp_quantile(values, alpha, epsilon, candidates, power)
        return value, spent, scale
    return (_numpy_quantile(values, alpha, epsilon, candidates, rng, power), epsilon,
            2.0 / epsilon)


def _quantile_release(name, epsilon, scale, rng, power=0.0):
    """The ``privci.results.Release`` entry of one private quantile (score
    sensitivity 1); ``power`` > 0: the bounds' public preference is named."""
    from .results import Release
    mech = _MECH_OPENDP if rng is None else _MECH_NUMPY
    if power:
        mech = ((_MECH_OPENDP_PARTS if rng is None else _MECH_NUMPY)
                + f", public preference (c / c_min)^-{power:g} for small candidates")
    return Release(name, float(epsilon), 1.0, float(scale), mech)


_MECH_OPENDP = "OpenDP make_private_quantile (exponential mechanism over public candidates)"
_MECH_NUMPY = "exponential mechanism over public candidates (numpy Gumbel noise, not hardened)"
_MECH_OPENDP_PARTS = ("OpenDP make_quantile_score_candidates and make_noisy_max (exponential "
                      "mechanism over public candidates)")
_NOT_HARDENED = ("quantiles drawn with a seeded numpy generator: reproducible but not hardened "
                 "against floating-point attacks; the seed must be secret, fresh and never "
                 "reused; use rng=None for a release.")


def private_quantile(values, alpha, *, epsilon, candidates=None, rng=None, budget=None):
    """An epsilon-DP ``alpha``-quantile of one column, chosen among public candidates.

    Parameters
    ----------
    values : array-like (n,)
        One column of private data (no NaN or inf).
    alpha : float in [0, 1]
        0.5 for the median.
    epsilon : float
        Privacy parameter (> 0), under replacement of one row.
    candidates : array-like or None
        Public candidates, fixed before seeing the data; sorted on use.
        None: :func:`candidate_grid` (0 and +-10^-6 .. 10^9, 1000 per decade).
    rng : None, int or numpy Generator
        None: OpenDP's hardened ``make_private_quantile``.  Given: numpy
        Gumbel noise (reproducible, not hardened; the seed must be secret,
        fresh and never reused).
    budget : privci.budget.PrivacyBudget or None
        Charged ``epsilon`` before anything is computed.

    Returns
    -------
    float
        One of the candidates.

    Examples
    --------
    >>> import numpy as np
    >>> from privci import bounds
    >>> x = np.random.default_rng(0).normal(50, 1, size=2000)
    >>> m = bounds.private_quantile(x, 0.5, epsilon=1.0)   # hardened (OpenDP)
    >>> abs(m - 50) < 0.3
    True
    """
    x = V.as_data(values, "values", min_rows=1)
    if x.shape[1] != 1:
        raise ValueError(f"`values` must be one column; got shape {x.shape} instead.")
    a = _check_unit(alpha, "alpha")
    eps = V.positive_finite(epsilon, "epsilon")
    cands = _check_candidates(candidates)
    user_rng = None if rng is None else V.check_rng(rng)
    from .budget import _charge
    _charge(budget, eps, test="private_quantile", details=f"alpha = {a:g}")
    value, _, _ = _quantile(x[:, 0], a, eps, cands, user_rng)
    return value


def _check_unit(value, name, lo=0.0, hi=1.0):
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"`{name}` must be a number in [{lo:g}, {hi:g}]; got "
                        f"{type(value).__name__} {V._short(value)} instead.")
    v = float(value)
    if not (lo <= v <= hi):
        raise ValueError(f"`{name}` must be in [{lo:g}, {hi:g}]; got {V._short(value)} instead.")
    return v


def _check_candidates(candidates, positive=False):
    if candidates is None:
        return candidate_grid(positive=positive)
    c = np.asarray(candidates, dtype=np.float64).ravel()
    if c.size == 0 or not np.all(np.isfinite(c)):
        raise ValueError("`candidates` must be a non-empty sequence of finite numbers; got "
                         f"{V._short(candidates)} instead.")
    return np.unique(c)


# --------------------------------------------------------------------------- bounds

@dataclass(frozen=True)
class ReleasedParameters:
    """Centres, bounds or scales released by private quantiles, with their privacy record.

    Attributes
    ----------
    center : tuple of float or None
        Per column: the private median (or the given public centre when no
        centre was released).
    bound : tuple of float or None
        Per column: the private ``bound_quantile`` of ``|x - center|``.
    scale : tuple of float or None
        Per column (:func:`private_scale`): a private standard deviation.
    epsilon : float
        Total epsilon spent (the sum over the released quantities).
    epsilon_each : float
        Epsilon of each released quantity (the budget split equally).
    released : tuple of str
        The released quantities in order, e.g. ``("center[0]", "bound[0]")``.
    bound_quantile : float or None
        The upper quantile actually used (after the public small-sample cap).
    mechanism, hardened, guarantee, caveats
        As in :class:`privci.PrivacyRecord`.
    releases : tuple
        One entry per released quantity (named as in ``released``), with its
        epsilon, score sensitivity (1) and noise scale.
    """

    center: Optional[Tuple[float, ...]]
    bound: Optional[Tuple[float, ...]]
    epsilon: float
    epsilon_each: float
    released: Tuple[str, ...]
    bound_quantile: Optional[float]
    mechanism: str
    hardened: bool
    guarantee: str
    scale: Optional[Tuple[float, ...]] = None
    caveats: Tuple[str, ...] = field(default=())
    releases: tuple = field(default=(), compare=False)

    def as_record(self):
        """A plain dict for a privacy record (``PrivacyRecord.bounds``) or a ledger."""
        out = {"epsilon": self.epsilon, "epsilon_each": self.epsilon_each,
               "released": self.released, "mechanism": self.mechanism,
               "hardened": self.hardened}
        for k in ("center", "bound", "scale", "bound_quantile"):
            if getattr(self, k) is not None:
                out[k] = getattr(self, k)
        return out

    def transform(self, data):
        """(data - center) / scale, column by column (for Z before a kernel regression)."""
        if self.scale is None:
            raise ValueError("`transform` needs released scales (see private_scale); this "
                             "release has none.")
        d = V.as_data(data, "data")
        if d.shape[1] != len(self.scale):
            raise ValueError(f"`data` must have {len(self.scale)} columns; got {d.shape[1]}.")
        # an extreme row may overflow: mapped to +-largest float, silently, as on Dask
        with np.errstate(all="ignore"):
            out = (d - np.asarray(self.center)) / np.asarray(self.scale)
        return np.clip(out, -_MAX_FLOAT, _MAX_FLOAT)


class UnreliableQuantileWarning(UserWarning):
    """n x epsilon is too small for the private quantiles to be informative.

    It depends on public numbers only (n, epsilon and what is released), so
    :func:`privci.privgcm` and :func:`privci.privcrt` raise it too, for their
    "auto" parameters, before any release and outside their silenced
    sections, and state it among the result's ``privacy.caveats``.
    """


def _warn_if_unreliable(n, epsilon_each):
    # public numbers only (n and the epsilon of one quantile)
    if n * epsilon_each < _UNRELIABLE_N_EPS:
        import warnings
        warnings.warn(f"n x epsilon per quantile = {n * epsilon_each:.3g} is below "
                      f"{_UNRELIABLE_N_EPS:g}: the private quantiles are close to a uniform draw "
                      "among the candidates (bounds: weighted toward the smallest) and the "
                      "released centres, bounds or scales may be far off (the guarantee is "
                      "unaffected).  Spend more epsilon on them, or give a public range.",
                      UnreliableQuantileWarning, stacklevel=3)


def _reliability(what, n, epsilon, k=1, unit="rows"):
    """The public reliability of ``k`` quantiles sharing ``epsilon`` on ``n`` values.

    Public numbers only (``n``, ``epsilon`` and ``k`` are fixed by the caller's
    arguments and the data's shape, never by its values), and the same
    split as :func:`_release_columns` / :func:`private_scale`
    (:func:`_split`).  Returns None when n x epsilon-per-quantile is at least
    60, else ``(what, n, epsilon_each, unit)`` for :func:`_report_unreliable`.
    """
    e = _split(epsilon, k)
    return None if n * e >= _UNRELIABLE_N_EPS else (what, int(n), e, unit)


def _unreliable_caveat(what, n, epsilon_each, unit="rows"):
    """The privacy record's caveat for one unreliable release (public numbers only)."""
    return (f"the released {what} used epsilon {epsilon_each:.3g} per quantile on {n} {unit}: "
            f"n x epsilon = {n * epsilon_each:.3g} is below {_UNRELIABLE_N_EPS:g}, where the "
            "private quantiles are unreliable (close to a uniform draw among the candidates, "
            "bounds weighted toward the smallest; "
            "see privci.bounds) and the released value may be far off; the guarantee is "
            "unaffected.")


def _user_stacklevel():
    """The ``stacklevel`` of the innermost caller outside the privci package (for warnings
    raised from its entry points, whatever wrappers sit in between)."""
    import os
    import sys
    pkg = os.path.dirname(os.path.abspath(__file__)) + os.sep
    frame, level = sys._getframe(1), 1   # the function that will call warnings.warn
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(pkg):
        frame, level = frame.f_back, level + 1
    return level


def _report_unreliable(notes, entry):
    """Warn about the unreliable releases of an entry point and return their caveats.

    ``notes`` are the results of :func:`_reliability` (None entries are
    skipped).  Called outside :func:`privci.mechanisms.quiet` and before
    the releases, so that a warning which depends only on public numbers
    reaches the user (inside ``quiet()`` it was swallowed) while nothing
    that depends on the data can.  One :class:`UnreliableQuantileWarning`
    names every unreliable release; it points at the user's call.
    """
    notes = [nt for nt in notes if nt is not None]
    if not notes:
        return []
    import warnings
    listed = ", ".join(f"{what} ({n} {unit} x epsilon {e:.3g} = {n * e:.3g})"
                       for what, n, e, unit in notes)
    warnings.warn(f"{entry}: n x epsilon per quantile is below {_UNRELIABLE_N_EPS:g} for the "
                  f"released {listed}: the private quantiles are close to a uniform draw among "
                  "the candidates (bounds: weighted toward the smallest) and these values may "
                  "be far off (the guarantee is unaffected; the result's caveats say which).  "
                  "Spend more epsilon on them (bounds_epsilon) or pass public values.",
                  UnreliableQuantileWarning,
                  stacklevel=_user_stacklevel())
    return [_unreliable_caveat(*nt) for nt in notes]


def _abs_difference(a, b):
    """|a - b| elementwise, mapped into the finite floats without a warning.

    The difference of two finite floats overflows to inf when they lie far
    apart (1.8e308 and -1e293): that gave a RuntimeWarning on the neighbour
    holding the extreme row only, and handed inf to OpenDP.  Every element
    is clamped to the largest float, deterministically and row by row, with
    numpy's floating-point errors silenced, so nothing observable depends on
    one row beyond the released value.
    """
    with np.errstate(all="ignore"):
        return np.minimum(np.abs(a - b), _MAX_FLOAT)


def _effective_bound_quantile(bound_quantile, n, epsilon_each, n_candidates):
    """The public cap on the upper quantile: min(q, 1 - 2 (ln C + 5) / (n eps)), >= 0.5."""
    cap = 1.0 - 2.0 * (math.log(n_candidates) + _TAIL_MARGIN) / (n * epsilon_each)
    return float(max(0.5, min(bound_quantile, cap)))


def _release_columns(cols, *, epsilon, want_center, want_bound, given_centers, ranges,
                     bound_quantile, rng):
    """Release centres and bounds of the columns of ``cols`` (list of (n,) arrays).

    The budget is split equally among the released quantities; each column's
    centre is released before its bound, which uses |x - released centre|.
    """
    k = sum(bool(c) for c in want_center) + sum(bool(b) for b in want_bound)
    if k == 0:
        raise ValueError("nothing to release: no centre and no bound was requested.")
    e = _split(epsilon, k)
    _warn_if_unreliable(cols[0].size, e)
    centers, bounds_, released, spent, q_used = [], [], [], 0.0, None
    entries = []
    for j, col in enumerate(cols):
        n = col.size
        c = float(given_centers[j])
        if want_center[j]:
            grid = candidate_grid(ranges[j])
            c, s, sc = _quantile(col, 0.5, e, grid, rng)
            spent += s
            released.append(f"center[{j}]")
            entries.append(_quantile_release(f"center[{j}]", e, sc, rng))
        centers.append(c)
        if want_bound[j]:
            r = ranges[j]
            grid = candidate_grid(None if r is None else (0.0, r[1] - r[0]),
                                  points_per_decade=_BOUND_POINTS_PER_DECADE, positive=True)
            q = _effective_bound_quantile(bound_quantile, n, e, grid.size)
            b, s, sc = _quantile(_abs_difference(col, c), q, e, grid, rng,
                                 BOUND_PRIOR_POWER)
            spent += s
            released.append(f"bound[{j}]")
            entries.append(_quantile_release(f"bound[{j}]", e, sc, rng, BOUND_PRIOR_POWER))
            bounds_.append(b)
            q_used = q if q_used is None else min(q_used, q)
        else:
            bounds_.append(None)
    return centers, bounds_, tuple(released), spent, e, q_used, tuple(entries)


def _guarantee(eps, k, e, what):
    return (f"the released {what} are {eps:g}-differentially private under replacement of one "
            f"row, by sequential composition of {k} private quantiles of epsilon {e:g} each")


def private_bounds(x, *, epsilon, center=True, bound=True, bound_quantile=DEFAULT_BOUND_QUANTILE,
                   public_range=None, rng=None, budget=None):
    """Private centres and bounds of each column of ``x``, for the private tests.

    Parameters
    ----------
    x : array-like (n,) or (n, p)
        Private data (no NaN or inf).
    epsilon : float
        The privacy budget spent here (> 0); split equally among the released
        quantities (p centres and p bounds by default).  Spend the rest on the
        test: the two releases compose sequentially.
    center : bool or float or one per column, default True
        True: release the private median of each column.  A number (or one
        per column): a known public centre, used for the bound.
    bound : bool, default True
        Release the private ``bound_quantile`` of ``|x - center|``.
    bound_quantile : float in [0.5, 1), default 0.8
        Chosen by a power study of the whole PrivGCM test (module notes).
        Lowered, from public numbers only, when n epsilon is small.
    public_range : (lower, upper), a pair per column, or None
        A range known before seeing the data: the candidates become 10,001
        equally spaced points inside it (bounds: up to its width).  None: a
        logarithmic grid over +-10^-6 .. 10^9 (see :func:`candidate_grid`).
    rng : None, int or numpy Generator
        None: OpenDP's hardened quantile mechanism.  Given: numpy noise for
        simulations (not hardened; the seed must be secret, fresh and never
        reused for a release).
    budget : privci.budget.PrivacyBudget or None
        Charged ``epsilon`` (test ``"private_bounds"``) before anything is
        computed; a refused charge computes nothing.

    Returns
    -------
    ReleasedParameters
        ``center`` and ``bound`` (tuples, one per column), the epsilon spent
        and how it was split, the mechanism and whether it was hardened.

    Notes
    -----
    A data set of known size n changes by a symmetric distance of 2 when one
    row is replaced; each quantile is epsilon_each-DP for that change
    (OpenDP's map(2)), each bound uses only the released centre, and the sum
    of the epsilon_each is at most ``epsilon`` (basic sequential composition).

    Examples
    --------
    >>> import numpy as np
    >>> from privci import bounds
    >>> rng = np.random.default_rng(0)
    >>> x = rng.normal(50, 2, size=(5000, 1))
    >>> rel = bounds.private_bounds(x, epsilon=0.5)          # hardened (OpenDP)
    >>> abs(rel.center[0] - 50) < 0.3, 2 < rel.bound[0] < 3.5, rel.epsilon <= 0.5
    (True, True, True)
    >>> rel.released
    ('center[0]', 'bound[0]')
    """
    xa = V.as_data(x, "x", min_rows=1)
    eps = V.positive_finite(epsilon, "epsilon")
    p = xa.shape[1]
    if isinstance(center, (bool, np.bool_)):
        want_c, given_c = [bool(center)] * p, np.zeros(p)
    else:
        want_c, given_c = [False] * p, V.public_centres(center, "center", p)
    if not isinstance(bound, (bool, np.bool_)):
        raise TypeError(f"`bound` must be True or False; got {V._short(bound)} instead.")
    q = _check_unit(bound_quantile, "bound_quantile", 0.5, 1.0)
    if q >= 1.0:
        raise ValueError("`bound_quantile` must be smaller than 1 (the maximum is not a stable "
                         "statistic); got 1.0 instead.")
    ranges = _column_ranges(public_range, "public_range", p)
    user_rng = None if rng is None else V.check_rng(rng)
    if not any(want_c) and not bound:
        raise ValueError("nothing to release: `center` is a public value and `bound` is False.")
    from .budget import _charge
    _charge(budget, eps, test="private_bounds",
            details=f"{p} column(s): centre {any(want_c)}, bound {bool(bound)}")
    centers, bnds, released, spent, e, q_used, entries = _release_columns(
        [xa[:, j] for j in range(p)], epsilon=eps, want_center=want_c,
        want_bound=[bool(bound)] * p, given_centers=given_c, ranges=ranges,
        bound_quantile=q, rng=user_rng)
    return ReleasedParameters(
        center=tuple(centers), bound=tuple(bnds) if bound else None, epsilon=spent,
        epsilon_each=e, released=released, bound_quantile=q_used,
        mechanism=_MECH_OPENDP if user_rng is None else _MECH_NUMPY,
        hardened=user_rng is None,
        guarantee=_guarantee(eps, len(released), e, "centres and bounds"),
        caveats=() if user_rng is None else (_NOT_HARDENED,), releases=entries)


def private_scale(z, *, epsilon, public_range=None, rng=None, budget=None):
    """Private scale of each column of Z, so that ``kernel_sigma`` is unit-free.

    The rows are paired by position (row i with row i + floor(n / 2), a
    data-independent pairing) and the scale of a column is the private median
    of the n / 2 absolute differences |z_i - z_{i + n/2}|, divided by
    sqrt(2) Phi^-1(3/4) = 0.9539 (so it equals the standard deviation for
    Gaussian data).  Differences need no centre, so each column costs one
    quantile and the estimate does not depend on where the column sits:
    a centre would be needed only for a location, and the Gaussian kernel
    is translation-invariant.  ``rel.transform(z)`` returns z / scale.

    A Gaussian kernel exp(-kernel_sigma ||z - z'||^2) on the transformed Z
    has a bandwidth in units of the spread of each column; it still has
    k(z, z) = 1, so the sensitivity of the private tests is unchanged, and
    the scales are released values whose epsilon adds to the test's.

    Parameters
    ----------
    z : array-like (n,) or (n, d), n >= 2
    epsilon : float
        Split equally among the d columns.
    public_range : (lower, upper), a pair per column, or None
        Known ranges: the candidates become 10,000 equally spaced points in
        (0, upper - lower].  None: 10^-6 .. 10^9, 50 per decade (4.7% apart).
    rng, budget
        As in :func:`private_bounds`.

    Returns
    -------
    ReleasedParameters
        ``scale`` per column (``center`` is 0: Z is not shifted).

    Notes
    -----
    Replacing one row changes one of the n / 2 differences, a symmetric
    distance of 2 on a vector of known size; each column's quantile is
    epsilon / d-DP for it, and the columns compose sequentially.

    Examples
    --------
    >>> import numpy as np
    >>> from privci import bounds
    >>> z = np.random.default_rng(1).normal([0, -2000], [300, 0.5], size=(4000, 2))
    >>> rel = bounds.private_scale(z, epsilon=1.0, rng=7)   # seeded: not hardened
    >>> [round(s / sd, 1) for s, sd in zip(rel.scale, (300, 0.5))], rel.hardened
    ([1.0, 1.0], False)
    >>> rel.transform(z).std(axis=0).round(1).tolist()
    [1.0, 1.0]
    """
    za = V.as_data(z, "z", min_rows=2)
    eps = V.positive_finite(epsilon, "epsilon")
    d = za.shape[1]
    ranges = _column_ranges(public_range, "public_range", d)
    user_rng = None if rng is None else V.check_rng(rng)
    from .budget import _charge
    _charge(budget, eps, test="private_scale", details=f"{d} column(s) of z")
    e = _split(eps, d)
    h = za.shape[0] // 2
    _warn_if_unreliable(h, e)
    scales, spent, entries = [], 0.0, []
    for j in range(d):
        r = ranges[j]
        grid = candidate_grid(None if r is None else (0.0, r[1] - r[0]),
                              points_per_decade=_BOUND_POINTS_PER_DECADE, positive=True)
        # |z_i - z_{i+h}| of two finite values can overflow to inf (1e308 and -1e308): map it
        # to the largest float (OpenDP never sees a non-finite value, no overflow warning)
        diffs = _abs_difference(za[:h, j], za[h:2 * h, j])
        v, sp, sc = _quantile(diffs, 0.5, e, grid, user_rng)
        scales.append(v * MAD_TO_SD / math.sqrt(2.0))
        entries.append(_quantile_release(f"scale[{j}]", e, sc, user_rng))
        spent += sp
    return ReleasedParameters(
        center=(0.0,) * d, bound=None, scale=tuple(scales), epsilon=spent, epsilon_each=e,
        released=tuple(f"scale[{j}]" for j in range(d)), bound_quantile=None,
        mechanism=_MECH_OPENDP if user_rng is None else _MECH_NUMPY, hardened=user_rng is None,
        guarantee=_guarantee(eps, d, e, "scales"),
        caveats=() if user_rng is None else (_NOT_HARDENED,), releases=tuple(entries))


# --------------------------------------------------------------------------- for the tests

def _auto_public_parameters(x, y, *, epsilon, want_center=(True, True), want_bound=(True, True),
                            x_center=0.0, y_center=0.0, x_range=None, y_range=None,
                            bound_quantile=DEFAULT_BOUND_QUANTILE, rng=None):
    """Release the "auto" public parameters of a private test (for privgcm / privcrt).

    ``x`` (n,) or (n, p) and ``y`` (n,) or (n, q) are the private data as the
    test receives them (for PrivCRT's ``x_residual_bound`` pass
    ``x - model_x.conditional_mean(z)``, a row-wise map with a public
    function, and ``want_center=(False, ...)``).  ``want_center[i]`` /
    ``want_bound[i]`` select what is released for x (i = 0) and y (i = 1);
    where no centre is released the given public ``x_center`` / ``y_center``
    is used for the bound.  ``epsilon`` is split equally among all released
    quantities (each column of x and y: centre, then bound).  No budget is
    charged here: the caller charges the test's whole epsilon once.

    Recommended wiring (measured in ``vignettes/auto_bounds.py``): use the
    released median and bound as the clipping window, then re-centre on the
    private means inside it (privgcm's ``center_epsilon``).  The median from
    the exponential mechanism is only as precise as a few percent of the
    ranks at small n x epsilon, and is not the mean of a skewed column; with
    20 noisy block sums the test sees offsets that small (level 0.52 at
    n = 1000, epsilon = 1 on the design shifted by +50 without the
    re-centring).

    Returns
    -------
    dict with ``x_center``, ``y_center``, ``x_bound``, ``y_bound`` (ndarrays
    of one value per column, or None when not released), ``epsilon``
    (spent), ``epsilon_each``, ``released`` (names such as
    ``"x_center[0]"``), ``bound_quantile``, ``mechanism``, ``hardened``,
    ``caveats`` and ``releases`` (one ``privci.results.Release`` each).
    """
    xa = V.as_data(x, "x", min_rows=1)
    ya = V.as_data(y, "y", min_rows=1)
    V.check_same_rows(x=xa, y=ya)
    eps = V.positive_finite(epsilon, "epsilon")
    wc = tuple(bool(v) for v in want_center)
    wb = tuple(bool(v) for v in want_bound)
    if len(wc) != 2 or len(wb) != 2:
        raise ValueError("`want_center` and `want_bound` must be pairs (for x, for y).")
    p, q = xa.shape[1], ya.shape[1]
    xc = V.public_centres(x_center, "x_center", p)
    yc = V.public_centres(y_center, "y_center", q)
    ranges = _column_ranges(x_range, "x_range", p) + _column_ranges(y_range, "y_range", q)
    qb = _check_unit(bound_quantile, "bound_quantile", 0.5, 1.0)
    user_rng = None if rng is None else V.check_rng(rng)
    cols = [xa[:, j] for j in range(p)] + [ya[:, j] for j in range(q)]
    centers, bnds, released, spent, e, q_used, entries = _release_columns(
        cols, epsilon=eps, want_center=[wc[0]] * p + [wc[1]] * q,
        want_bound=[wb[0]] * p + [wb[1]] * q, given_centers=np.concatenate([xc, yc]),
        ranges=ranges, bound_quantile=qb, rng=user_rng)
    names = [f"x_{{}}[{j}]" for j in range(p)] + [f"y_{{}}[{j}]" for j in range(q)]
    rel = tuple(names[int(r.split("[")[1][:-1])].format(r.split("[")[0]) for r in released)
    entries = tuple(replace(en, name=nm) for en, nm in zip(entries, rel))
    return {
        "x_center": np.asarray(centers[:p]) if wc[0] else None,
        "y_center": np.asarray(centers[p:]) if wc[1] else None,
        "x_bound": np.asarray(bnds[:p], dtype=np.float64) if wb[0] else None,
        "y_bound": np.asarray(bnds[p:], dtype=np.float64) if wb[1] else None,
        "epsilon": spent, "epsilon_each": e, "released": rel, "bound_quantile": q_used,
        "mechanism": _MECH_OPENDP if user_rng is None else _MECH_NUMPY,
        "hardened": user_rng is None,
        "caveats": () if user_rng is None else (_NOT_HARDENED,),
        "releases": entries,
    }
