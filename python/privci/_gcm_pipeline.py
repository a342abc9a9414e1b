"""PrivGCM as one pipeline: parameters -> release plan -> public releases -> mechanism ->
result, shared by the in-memory and the Dask paths.

The layers (see the documentation's "Architecture" page):

1. :class:`GCMParams` (:func:`gcm_params`): every option validated and normalised once,
   before any data are read; the in-memory and Dask entry points call the same function,
   so they accept and refuse the same calls.
2. :class:`privci._plan.ReleasePlan` (:func:`gcm_plan`): every epsilon share of the test, computed
   once from public numbers (n, d, p, q and the options) by the exact-remainder
   functions of :mod:`privci._epsilon`, checked as Fractions to sum to at most epsilon,
   charged to the budget in one call, and the source of the composition text.
3. :func:`release_public`: the released z centres and scales and the "auto" bounds and
   centres of x and y, each with the plan's share.
4. The mechanism: the released spline regression (:func:`spline_mechanism`, after the
   private re-centring :func:`release_centres`, both over a source of
   :mod:`privci._source`: one partition in memory, the chunks on Dask) or the kernel
   ridge path (:func:`krr_mechanism` in memory, ``_dask._krr_mechanism`` on Dask); each
   returns a :class:`MechanismOutput` (released values only).
5. :func:`gcm_result`: post-processing into the :class:`~privci.results.PrivateTestResult`
   with its privacy record, one entry per release.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field, replace
from typing import Optional

import numpy as np

from . import _validation as V
from ._epsilon import remaining
from ._params import _check_assume, _check_n_blocks, _check_regression
from ._private import (REGRESSION_CAVEAT, SEEDED_CAVEAT, block_counts, block_labels,
                       block_statistic, block_sums, guarantee_text, new_entropy)
from ._plan import ReleasePlan
from ._stats import _method_name, _statistic_from_products
from .mechanisms import laplace_mechanism, quiet
from .results import PrivacyRecord, PrivateTestResult, Release

__all__ = ["GCMParams", "gcm_params", "gcm_plan", "release_public",
           "MechanismOutput", "krr_mechanism", "spline_mechanism", "release_centres",
           "gcm_result", "finite"]

_XY = ("x_bound", "y_bound", "x_center", "y_center")


# --------------------------------------------------------------------------- 1. parameters

@dataclass(frozen=True)
class GCMParams:
    """PrivGCM's options, validated and normalised before any data are read.

    ``auto`` maps each of x_bound, y_bound, x_center, y_center to whether it is "auto";
    ``z_center`` / ``z_scale`` are resolved (None -> "auto" with the spline fit and z,
    z_center None -> 0 otherwise); ``bounds_epsilon`` / ``center_epsilon`` are the
    validated parts of epsilon (None when not used).
    """

    epsilon: float
    alternative: str
    mode: str
    n_sim: int
    rng: object
    x_bound: object
    y_bound: object
    x_center: object
    y_center: object
    auto: dict
    z_center: object
    z_scale: object
    bounds_epsilon: Optional[float]
    center_epsilon: Optional[float]
    regression: str
    conditional: bool
    assume_additive: bool
    n_blocks: object
    budget: object
    krr: dict = field(default_factory=dict)
    model: str = "full"       # the released regression: "full", "additive" or "linear"
    # public x / y bounds tightened by a released quantile (``tighten``): which of x_bound,
    # y_bound; the option as given; bounds_epsilon without the tightening (for the fallback)
    tight: dict = field(default_factory=lambda: {"x_bound": False, "y_bound": False})
    tighten: object = "auto"
    bounds_epsilon_untight: Optional[float] = None

    @property
    def released(self):
        """x_bound, y_bound, x_center, y_center -> whether a private quantile releases it
        ("auto", or a public bound tightened)."""
        return {k: bool(v or self.tight.get(k, False)) for k, v in self.auto.items()}

    @property
    def spline(self):
        return self.regression == "spline" and self.conditional

    @property
    def scale_auto(self):
        return isinstance(self.z_scale, str)

    @property
    def zc_auto(self):
        return isinstance(self.z_center, str)

    @property
    def auto_k(self):
        """n_blocks="auto" with the spline fit: the released regression's rule picks k."""
        return self.spline and isinstance(self.n_blocks, str)

    def inputs(self, x, y, z):
        """The validated data (:class:`privci._transform._GCMInputs`); "auto" bounds and
        centres get placeholders (1 and 0) until :func:`release_public` sets them."""
        from ._transform import _GCMInputs
        a = self.auto
        return _GCMInputs(x, y, z, 1.0 if a["x_bound"] else self.x_bound,
                          1.0 if a["y_bound"] else self.y_bound,
                          self.krr["ridge_lambda"], self.krr["kernel_sigma"],
                          self.krr["cv_lambdas"], self.krr["kernel_approximation"],
                          self.krr["n_features"], self.krr["feature_rng"],
                          0.0 if a["x_center"] else self.x_center,
                          0.0 if a["y_center"] else self.y_center, self.krr["sensitivity"])


BOUNDS_SHARE = 0.1   # bounds_epsilon's default: this share of epsilon (released z centre and
#                      scale, "auto" or tightened x / y bounds); privci.plan follows it


def _top_split(eps, eps_b, eps_c):
    """epsilon -> (bounds, centres, the rest): the one place the top-level split is made."""
    rest = eps
    if eps_b is not None:
        rest = remaining(rest, eps_b)
    if eps_c is not None:
        rest = remaining(rest, eps_c)
    return rest


def gcm_params(*, conditional, epsilon, x_bound, y_bound, ridge_lambda, kernel_sigma,
               alternative, rng, n_sim, cv_lambdas, kernel_approximation, n_features,
               feature_rng, x_center, y_center, center_epsilon, n_blocks, sensitivity, budget,
               bounds_epsilon, z_scale, regression, z_center, assume_additive, assume=None,
               tighten="auto"):
    """Validate privgcm's options (no data read); returns :class:`GCMParams`."""
    eps = V.positive_finite(epsilon, "epsilon")
    mode = V.check_alternative(alternative)
    n_sim = V.check_int(n_sim, "n_sim", 1)
    user_rng = None if rng is None else V.check_rng(rng)
    given = dict(zip(_XY, (x_bound, y_bound, x_center, y_center)))
    auto = {name: isinstance(v, str) and v == "auto" for name, v in given.items()}
    for name, v in given.items():
        if isinstance(v, str) and not auto[name]:
            raise ValueError(f"`{name}` must be a number, one per column, or 'auto'; got "
                             f"{v!r} instead.")
    # The spline fit places its knots on (z - z_center) / z_scale: by default both are
    # released privately ("auto"); with the kernel ridge regression z is used as given.
    spline_default = regression == "spline" and conditional
    if z_scale is None and spline_default:
        z_scale = "auto"
    if z_center is None:
        z_center = "auto" if spline_default else 0.0
    if isinstance(z_scale, str) and z_scale != "auto":
        raise ValueError(f"`z_scale` must be None, a positive number, one per column of z, or "
                         f"'auto'; got {z_scale!r} instead.")
    if isinstance(z_center, str) and z_center != "auto":
        raise ValueError(f"`z_center` must be None, a number, one per column of z, or 'auto'; "
                         f"got {z_center!r} instead.")
    tighten_opt = tighten
    tighten = _check_tighten(tighten, spline_default, regression, conditional)
    tight = {name: bool(tighten) and not auto[name] for name in ("x_bound", "y_bound")}
    eps_b = eps_c = None
    others = any(auto.values()) or isinstance(z_scale, str) or isinstance(z_center, str)
    eps_b_untight = None
    if others and bounds_epsilon is None:
        eps_b_untight = BOUNDS_SHARE * eps
    if others or any(tight.values()):
        eps_b = BOUNDS_SHARE * eps if bounds_epsilon is None else V.positive_finite(bounds_epsilon,
                                                                            "bounds_epsilon")
        if center_epsilon is None and (auto["x_center"] or auto["y_center"]):
            center_epsilon = 0.1 * eps
    elif bounds_epsilon is not None:
        raise ValueError("`bounds_epsilon` is only used with an 'auto' bound, centre or z_scale, "
                         f"or a tightened bound (tighten); got {bounds_epsilon!r} with none.")
    if eps_b is not None and not eps_b < eps:
        raise ValueError(f"`bounds_epsilon` must be smaller than `epsilon` ({eps:g}), which "
                         f"it is part of; got {eps_b!r} instead.")
    if center_epsilon is not None:
        eps_c = V.positive_finite(center_epsilon, "center_epsilon")
        if not eps_c < _top_split(eps, eps_b, None):
            raise ValueError(f"`center_epsilon` must be smaller than `epsilon` ({eps:g}) minus "
                             f"any bounds_epsilon, which it is part of; got {center_epsilon!r} "
                             "instead.")
    reg, krr = _check_regression(regression, conditional, {
        "ridge_lambda": ridge_lambda, "kernel_sigma": kernel_sigma, "cv_lambdas": cv_lambdas,
        "kernel_approximation": kernel_approximation, "n_features": n_features,
        "feature_rng": feature_rng, "sensitivity": sensitivity})
    model = _check_assume(assume, assume_additive, reg == "spline" and conditional)
    if z_scale is not None and not conditional:
        raise ValueError("`z_scale` needs z; got z = None.")
    if not conditional and not (isinstance(z_center, (int, float))
                                and not isinstance(z_center, bool) and z_center == 0):
        raise ValueError(f"`z_center` needs z; got z = None and z_center={z_center!r}.")
    return GCMParams(epsilon=eps, alternative=alternative, mode=mode, n_sim=n_sim,
                     rng=user_rng, x_bound=x_bound, y_bound=y_bound, x_center=x_center,
                     y_center=y_center, auto=auto, z_center=z_center, z_scale=z_scale,
                     bounds_epsilon=eps_b, center_epsilon=eps_c, regression=reg,
                     conditional=conditional, assume_additive=model == "additive",
                     n_blocks=n_blocks, budget=budget, krr=krr, model=model, tight=tight,
                     tighten="auto" if isinstance(tighten_opt, str) else bool(tighten_opt),
                     bounds_epsilon_untight=(eps_b if others else None)
                     if bounds_epsilon is not None else eps_b_untight)


def _check_tighten(tighten, spline_default, regression, conditional):
    """``tighten`` -> True (tighten public x / y bounds) or False.  "auto": with the
    spline fit and z (the default); True is refused elsewhere (it would not be done)."""
    if isinstance(tighten, str):
        if tighten != "auto":
            raise ValueError(f"`tighten` must be 'auto', True or False; got {tighten!r} "
                             "instead.")
        return bool(spline_default)
    if not isinstance(tighten, (bool, np.bool_)):
        raise TypeError(f"`tighten` must be 'auto', True or False; got {V._short(tighten)} "
                        "instead.")
    if tighten and not spline_default:
        why = ("regression='krr' (the paper's Algorithm 1 keeps its public bounds)"
               if regression != "spline" else "z = None (the unconditional test)")
        raise ValueError(f"`tighten=True` needs the released spline fit with z; got {why}.  "
                         "Pass tighten='auto' or False, or release the window with "
                         "x_bound='auto'.")
    return bool(tighten)


def resolve_tighten(par, n, d, p, q):
    """``tighten="auto"``: keep the public bounds where the released spline fit could not be
    resolved with the tightening's share of epsilon but could without it (public numbers
    only: n, d, p, q, epsilon, the model).  Returns ``par`` or a copy without tightening."""
    if par.tighten != "auto" or not any(par.tight.values()) or not par.spline:
        return par
    from dataclasses import replace as _replace
    untight = _replace(par, tight={"x_bound": False, "y_bound": False},
                       bounds_epsilon=par.bounds_epsilon_untight)
    if not tighten_model(par.model, d):
        # the linear model: the clip to a tighter window bends E[X | Z] out of it (stop 46's
        # released windows: fail-safes on true-linear data); "auto" keeps the public windows
        return untight
    from ._spline import choose_design
    k = None if par.auto_k else _check_n_blocks(par.n_blocks, n, par.conditional,
                                                 par.regression)
    eps_t = _top_split(par.epsilon, par.bounds_epsilon, par.center_epsilon)
    des = choose_design(n, d, p, q, eps_t, k, model=par.model)
    if not des.certified:
        return untight
    if par.model != "full":
        # a stated model (stop 53: "additive" with two or more columns, its window
        # STATED_BOUND_WIDTH times the released quantile): tightened only where the bounds'
        # share leaves the check as it is without it, so that the tightening never turns
        # a checked assumption into an unchecked one
        eps_u = _top_split(par.epsilon, par.bounds_epsilon_untight, par.center_epsilon)
        if choose_design(n, d, p, q, eps_u, k, model=par.model).checked != des.checked:
            return untight
        if not noise_dominated(des):
            # where the privacy noise no longer dominates, a window gains little and the
            # clip's small bend of an additive x is what the fit check sees at large n
            return untight
    return par


TIGHTEN_NOISE_SHARE = 0.5  # a stated model is tightened only where the rule's predicted
#                           privacy-noise variance of S (the sum's and the fits') is at
#                           least this share of its sampling variance.  Chosen on stop 53's
#                           pilot runs: n = 10^4, two columns, epsilon 5 (share 0.56) gained
#                           0.57 -> 0.92; three tanh columns at epsilon 100 (0.11) lost 0.97
#                           -> 0.89 to fail-safes, and three linear columns at n = 10^5,
#                           epsilon 5 (0.13) failed safe in 0.50 of 30 data sets against 0.07


def noise_dominated(design):
    """Whether the rule predicts the privacy noise of S to be at least
    TIGHTEN_NOISE_SHARE of its sampling variance (public numbers: the rule's reference)."""
    p = design.predicted
    return (p["test_noise_var"] + p["fit_noise_var"]
            >= TIGHTEN_NOISE_SHARE * p["sampling_var"])


def tighten_model(model, d):
    """Whether ``tighten="auto"`` tightens public bounds under ``model`` with d columns of z
    (public numbers): the full fit (one column), and since stop 53 ``assume="additive"``
    with two or more columns, whose window is STATED_BOUND_WIDTH times the released
    quantile (a clip that rare keeps an additive x nearly additive: true-additive nulls at
    n = 10^3 and 10^4 at most 0.045 of 200 at epsilon 1, 5 and 100, vignettes/README.md,
    stop 53); not ``assume="linear"``, and not the full fit of two columns (the tensor fit
    of stop 54, whose level was measured with public windows).  Where it tightens is :func:`resolve_tighten`'s."""
    return (model == "full" and d == 1) or (model == "additive" and d > 1)


# --------------------------------------------------------------------------- 2. release plan

def gcm_plan(par, n, d, p, q):
    """The release plan of privgcm for n rows, d columns of z, p and q of x and y."""
    from .bounds import _reliability
    eps, eps_b, eps_c = par.epsilon, par.bounds_epsilon, par.center_epsilon
    eps_test = _top_split(eps, eps_b, eps_c)
    k = _check_n_blocks(par.n_blocks, n, par.conditional, par.regression)
    design = None
    if par.spline:
        from ._spline import choose_design
        design = choose_design(n, d, p, q, eps_test, None if par.auto_k else k,
                               model=par.model)
        if not design.certified:
            # the answer would be p = 1 from public facts alone (n, d, epsilon, the model):
            # refuse before the budget is charged or anything is computed
            from ._spline import UnresolvableDesignError, unresolvable_message
            raise UnresolvableDesignError(unresolvable_message(n, d, p, q, par.epsilon,
                                                               eps_test, par.model))
        k = design.k
    shares = {}
    notes = []   # public numbers only: which releases have too small an n x epsilon
    rel = par.released
    n_auto = sum(rel.values())
    eps_xy = eps_b
    if par.scale_auto or par.zc_auto:
        # z's share of bounds_epsilon: one part per released z quantity against one per
        # released x / y item
        both = par.scale_auto and par.zc_auto
        z_items = d * (int(par.scale_auto) + int(par.zc_auto))
        xy_items = n_auto * max(p, q)
        eps_z = eps_b if xy_items == 0 else eps_b * z_items / (z_items + xy_items)
        eps_zc = eps_z / 2.0 if both else eps_z
        eps_zs = remaining(eps_z, eps_zc) if both else eps_z
        eps_xy = remaining(eps_b, eps_z) if xy_items else 0.0
        if par.zc_auto:
            shares["z_center"] = eps_zc
            notes.append(_reliability("z_center", n, eps_zc, d))
        if par.scale_auto:
            shares["z_scale"] = eps_zs
            notes.append(_reliability("z_scale", n // 2, eps_zs, d, unit="paired differences"))
    if eps_b is not None and n_auto:
        shares["xy_bounds"] = eps_xy
        k_xy = ((int(rel["x_center"]) + int(rel["x_bound"])) * p
                + (int(rel["y_center"]) + int(rel["y_bound"])) * q)
        notes.append(_reliability("/".join(nm for nm in ("x_center", "y_center", "x_bound",
                                                         "y_bound") if rel[nm]),
                                  n, eps_xy, k_xy))
    if eps_c is not None:
        shares["centres"] = eps_c
    if design is not None:
        # each half (x on A, y on B; parallel composition) spends these two in sequence
        shares["fit: Gram matrices"] = design.eps_gram
        shares["fit: cross-products"] = design.eps_cross
        if design.eps_squares:
            shares["sum of products"] = design.eps_sums
            shares["sum of squared products"] = design.eps_squares
        else:
            shares["block sums"] = design.eps_test
    else:
        shares["block sums" if k < n else "residual products"] = eps_test
    return ReleasePlan(epsilon=eps, shares=shares, test_epsilon=eps_test,
                       details=f"n = {n}, {k} blocks", k=k, n=n, design=design, notes=notes)


# --------------------------------------------------------------------------- 3. public releases

def finite(a):
    """Map the overflow of a public shift or scale of finite z (1e308 - (-1e308)) back into
    the finite numbers, so that no later step sees inf (and raises or warns on one
    neighbour only); the values are clipped to [-4, 4] by the spline basis anyway."""
    big = np.finfo(np.float64).max
    a = np.asarray(a)
    if a.ndim == 2 and a.dtype == np.float64:
        # one compiled pass (the same values as the numpy expression below)
        from ._kernels import finite_clip
        return finite_clip(a, big, np.empty(a.shape))
    return np.ascontiguousarray(np.clip(np.nan_to_num(a, nan=0.0, posinf=big, neginf=-big),
                                        -big, big))


def public_z(par, d):
    """The public centre and scale of z (None where "auto" or not given)."""
    zc = None if par.zc_auto or not par.conditional else V.public_centres(par.z_center,
                                                                           "z_center", d)
    zs = None
    if par.z_scale is not None and not par.scale_auto:
        zs = V.positive_bounds(par.z_scale, "z_scale", d)
    return zc, zs


@dataclass
class PublicReleases:
    """What :func:`release_public` released (each a bounds result, or None)."""

    z_center: object = None
    z_scale: object = None
    xy: object = None
    z_public_scale: object = None
    caveats: tuple = ()


def shift_scale_z(inp, zc, zs):
    """A copy of the inputs with z replaced by (z - zc) / zs (public values; None: no
    shift or no scale); the validated inputs are left as they are."""
    inp = copy.copy(inp)
    with quiet():
        if zc is not None and np.any(zc != 0):
            inp.za = finite(inp.za - zc)
        if zs is not None and np.any(zs != 1):     # z / 1 is z: no copy
            inp.za = finite(inp.za / zs)
    return inp


STATED_BOUND_WIDTH = 2.0  # "auto" x/y bounds under assume="additive" with two or more columns
#                          of z: the window is this many times the released quantile (stop
#                          46).  The released 0.8 quantile of |x - centre| clips a fifth of
#                          the rows, and a clipped x is not additive in z even where x is:
#                          at n = 10^4, 200 true-model nulls per cell, the shared square
#                          (z1^2 - 1) / 2 at epsilon 1 was rejected in 0.450, tanh(2 z1) in
#                          0.115, three linear columns in 0.105; with 2: 0.150, 0.050, 0.055
#                          (vignettes/README.md, stop 46).  Not under "linear" (true-model
#                          nulls at most 0.065 with the quantile itself, and power at
#                          epsilon 1 fell from 0.90 to 0.30 with 2)


def _bound_width(par, inp):
    """The factor on the released "auto" x/y bounds: STATED_BOUND_WIDTH under
    assume="additive" with two or more columns of z, else 1 (public numbers: the model
    and d)."""
    d = 0 if inp.za is None else inp.za.shape[1]
    return STATED_BOUND_WIDTH if (par.model == "additive" and d > 1) else 1.0


def _fmt(v):
    v = np.ravel(np.asarray(v, dtype=np.float64))
    return f"{v[0]:.4g}" if v.size == 1 else "(" + ", ".join(f"{u:.4g}" for u in v) + ")"


def release_public(par, plan, inp, zs_pub):
    """Release the "auto" z centres, z scales and x/y bounds and centres, in that order,
    each with the plan's share.  Returns the releases and a copy of the inputs shifted and
    scaled by them (the inputs passed in are not changed)."""
    from .bounds import _report_unreliable
    inp = copy.copy(inp)
    out = PublicReleases(z_public_scale=zs_pub)
    # outside quiet(), before any release: the warning depends on public numbers only
    out.caveats = tuple(_report_unreliable(plan.notes, "privgcm"))
    user_rng = par.rng
    if par.zc_auto or par.scale_auto:
        from .bounds import private_bounds, private_scale
        if par.zc_auto:
            with quiet():
                out.z_center = private_bounds(inp.za, epsilon=plan.share("z_center"),
                                              center=True, bound=False, rng=user_rng)
                inp.za = finite(inp.za - np.asarray(out.z_center.center, dtype=np.float64))
        if par.scale_auto:
            with quiet():
                out.z_scale = private_scale(inp.za, epsilon=plan.share("z_scale"), rng=user_rng)
                inp.za = finite(inp.za / np.asarray(out.z_scale.scale, dtype=np.float64))
    if "xy_bounds" in plan.shares:
        from .bounds import _auto_public_parameters
        a, t = par.auto, par.tight
        # a tightened public bound: candidates in (0, bound] of each column (public), and
        # the released window is at most the public one
        caps = {"x_bound": np.asarray(inp.xb, dtype=np.float64) if t["x_bound"] else None,
                "y_bound": np.asarray(inp.yb, dtype=np.float64) if t["y_bound"] else None}
        with quiet():
            out.xy = _auto_public_parameters(
                inp.xa, inp.ya, epsilon=plan.share("xy_bounds"),
                want_center=(a["x_center"], a["y_center"]),
                want_bound=(a["x_bound"] or t["x_bound"], a["y_bound"] or t["y_bound"]),
                x_center=inp.xc, y_center=inp.yc, rng=user_rng,
                x_range=None if caps["x_bound"] is None or a["x_center"] else
                [(0.0, float(b)) for b in caps["x_bound"]],
                y_range=None if caps["y_bound"] is None or a["y_center"] else
                [(0.0, float(b)) for b in caps["y_bound"]])
        width = _bound_width(par, inp)
        if width != 1.0 and (a["x_bound"] or a["y_bound"] or t["x_bound"] or t["y_bound"]):
            out.caveats = out.caveats + (
                f'released x/y bounds under assume=\'additive\' with {inp.za.shape[1]} columns '
                f"of z: the clipping window is {width:g} times the released quantile of "
                "|x - centre| (a tighter window clips more rows, and a clipped x is no "
                "longer additive in z where x is: true-model nulls were rejected in up to "
                "0.45 of data sets with the quantile itself; the unchecked fit at small "
                "epsilon still was in 0.15, stop 46).",)
        for key, attr in (("x_center", "xc"), ("y_center", "yc"), ("x_bound", "xb"),
                          ("y_bound", "yb")):
            if out.xy.get(key) is not None:
                v = np.asarray(out.xy[key], dtype=np.float64)
                if key.endswith("bound"):
                    v = v * width
                    if caps[key] is not None:
                        # a tightened window is at most the public one (public numbers)
                        v = np.minimum(v, caps[key])
                setattr(inp, attr, v)
        tightened = [k for k in ("x_bound", "y_bound") if caps[k] is not None]
        if tightened:
            out.caveats = out.caveats + (
                "tightened windows (tighten): " + "; ".join(
                    f"the public {k} {_fmt(caps[k])} was tightened to "
                    f"{_fmt(getattr(inp, k[0] + 'b'))}" for k in tightened)
                + f" (a private {out.xy['bound_quantile']:g} quantile of |value - public centre| "
                "among candidates up to the public bound, at most the public bound; clipping x "
                "and y to any window leaves a null true, and a window near the data's spread "
                "keeps several times the signal of a wide one; tighten=False keeps the public "
                "window).",)
    return out, inp


# --------------------------------------------------------------------------- 4. mechanisms

@dataclass
class MechanismOutput:
    """The released test of one mechanism (released values and public numbers only)."""

    statistic: object
    pvalue: float
    statistic_name: str
    noise: object              # NoiseInfo of the final release (the block sums / products)
    hardened: bool
    mechanism: str             # the mechanism's own text (without the public releases)
    sensitivity: float
    sensitivity_kind: str
    x_bound: object
    y_bound: object
    x_center: object
    y_center: object
    releases: tuple            # the mechanism's releases (centres first), in order drawn
    caveats: list = field(default_factory=list)
    ridge_lambda: object = None
    kernel_sigma: object = None
    fit_check: object = None
    covered: bool = True
    n_sim: object = None


def centre_release(centre_info, eps_c, p, q, n):
    """The record entry of the private re-centring (means of the scaled x, y)."""
    return Release("centres (means of the scaled x, y)", eps_c, 2.0 * (p + q) / n,
                   centre_info.scale, centre_info.mechanism)


def _released_means(total, *, n, sensitivity, epsilon, rng):
    return laplace_mechanism(total / n, sensitivity, epsilon, rng, value_bound=1.0)


def release_centres(source, plan, inp, rng):
    """The private re-centring over a source: Laplace noise on the means of the clipped,
    scaled columns of x and y (L1 sensitivity 2 (p + q) / n), drawn where the sums land.
    Returns (means or None, x centres, y centres, the record entry or None)."""
    from functools import partial

    from ._source import colsum_pass
    eps_c = plan.share("centres")
    if eps_c is None:
        return None, inp.xc, inp.yc, None
    p, q, n = inp.p, inp.q, plan.n
    sens = 2.0 * (p + q) / n
    means, info = source.map_reduce_release(
        colsum_pass, (inp.xc, inp.xb, inp.yc, inp.yb),
        partial(_released_means, n=float(n), sensitivity=sens, epsilon=eps_c), rng)
    return (means, inp.xc + inp.xb * means[:p], inp.yc + inp.yb * means[p:],
            centre_release(info, eps_c, p, q, n))


def krr_mechanism(par, plan, inp):
    """The kernel ridge path in memory: products (k = n) or k noisy block sums."""
    eps_c = plan.share("centres")
    eps_test = plan.test_epsilon
    centre_noise = None if eps_c is None else (eps_c, par.rng)
    k, n = plan.k, inp.n
    rp, caveats, centre_info = inp.transform(centre_noise)
    prod = rp.products.reshape(rp.products.shape[0], -1)
    value_bound = inp.rbound ** 2
    boot_rng = None
    if k == n:
        released, info = laplace_mechanism(prod, rp.sensitivity, eps_test, par.rng,
                                           value_bound=value_bound)
        del prod
        boot_rng = par.rng if par.rng is not None else np.random.default_rng()
        stat, pval = _statistic_from_products(released, par.n_sim, par.mode, boot_rng)
        stat_name = "Z" if released.shape[1] == 1 else "max|Z|"
    else:
        labels = block_labels(n, k, new_entropy(par.rng))
        with quiet():
            sums = block_sums(prod, labels, k)
        del prod, labels
        counts = block_counts(n, k)
        released, info = laplace_mechanism(sums, rp.sensitivity, eps_test, par.rng,
                                           value_bound=value_bound * counts.max())
        boot_rng = par.rng if par.rng is not None else np.random.default_rng()
        stat, pval, stat_name = block_statistic(released, counts, par.n_sim, par.mode,
                                                boot_rng)
    what = "block sums" if k < n else "residual products"
    releases = (() if centre_info is None else
                (centre_release(centre_info, eps_c, inp.p, inp.q, n),))
    releases += (Release(f"{k} {what}", eps_test, rp.sensitivity, info.scale, info.mechanism),)
    return MechanismOutput(
        statistic=stat, pvalue=pval, statistic_name=stat_name, noise=info,
        hardened=info.hardened, mechanism=f"{info.mechanism} on {k} {what} ({inp.kind} "
        "sensitivity)", sensitivity=rp.sensitivity, sensitivity_kind=inp.kind,
        x_bound=rp.x_bound, y_bound=rp.y_bound, x_center=rp.x_center, y_center=rp.y_center,
        releases=releases, caveats=list(caveats), ridge_lambda=rp.ridge_lambda,
        kernel_sigma=rp.kernel_sigma if inp.za is not None else None,
        covered=inp.grid is None, n_sim=par.n_sim if inp.p * inp.q > 1 else None)


def spline_output(test, design, info, sens, mechanism, hardened, releases, inp, xc, yc,
                  centre=None):
    """The released spline regression's :class:`MechanismOutput` (memory and Dask):
    ``mechanism``, ``hardened`` and ``releases`` as :mod:`privci._spline` states them."""
    from ._spline import fit_check
    return MechanismOutput(
        statistic=test.statistic, pvalue=test.pvalue, statistic_name=test.name, noise=info,
        hardened=hardened, mechanism=mechanism, sensitivity=sens,
        sensitivity_kind="released spline fit", x_bound=inp.xb, y_bound=inp.yb,
        x_center=np.asarray(xc), y_center=np.asarray(yc),
        releases=((centre,) if centre is not None else ()) + tuple(releases),
        fit_check=fit_check(test, design))


def spline_mechanism(source, plan, inp, scaling, means, xc, yc, centre, rng, mode):
    """The released spline regression over a source (``privci._source``): two passes.

    The seeded draws come in this order: (the centre noise, drawn by the caller), the
    entropy of the half split, the x fit's noise (Gram, cross-products), the y fit's, the
    entropy of the blocks, the block sums' noise (where the sums land).
    """
    from functools import partial

    from . import _spline as S
    from ._source import spline_pass1, spline_pass2
    design, n, p, q, k = plan.design, plan.n, inp.p, inp.q, plan.k
    spec = {"scaling": scaling, "means": means, "p": p, "n": n, "k": k, "design": design,
            "entropy": new_entropy(rng)}
    # pass 1: the fit's sufficient statistics of halves A (x) and B (y), summed exactly
    stats = source.map_reduce(spline_pass1, spec)
    with quiet():
        rel_x, rel_y = S.release_fits(stats, tuple(block_counts(n, 2)), design, rng)
        coef_x = S.fit_coefficients(rel_x, design)
        coef_y = S.fit_coefficients(rel_y, design)
    # pass 2: residuals with the released coefficients, partial block sums, their noise
    # the residuals' public scales (from the released coefficients): no clip binds
    res_scale = np.r_[S.residual_scales(coef_x, design), S.residual_scales(coef_y, design)]
    spec = dict(spec, coef_x=coef_x, coef_y=coef_y, res_scale=res_scale,
                entropy=new_entropy(rng))
    released, info, sens = source.map_reduce_release(
        spline_pass2, spec, partial(S.release_block_sums, n=n, design=design, p=p, q=q), rng)
    with quiet():
        test = S.spline_test(released, rel_x, rel_y, design, mode, res_scale)
    return spline_output(
        test, design, info, sens,
        S.mechanism_text(design, p, q, rel_x, rel_y, info.mechanism, sens, released),
        info.hardened and rel_x.hardened and rel_y.hardened and released.squares_hardened,
        S.spline_releases(rel_x, rel_y, design, info, sens, released), inp, xc, yc, centre)


# --------------------------------------------------------------------------- 5. the result

def gcm_result(par, plan, inp, public, out, composition, caption=""):
    """Post-processing: the result and its privacy record (one entry per release)."""
    n, p, q = inp.n, inp.p, inp.q
    k, conditional = plan.k, inp.za is not None
    spline = plan.design is not None
    caveats = list(out.caveats)
    if not out.hardened:
        caveats.append(SEEDED_CAVEAT)
    if inp.kernel_approximation == "rff" and conditional and not spline:
        caveats.append(f"random Fourier features (D = {inp.n_features}) drawn from feature_rng, "
                       "independent of the data; same sensitivity constant.")
    if conditional:
        caveats.append(REGRESSION_CAVEAT)
    if spline:
        from ._spline import additive_caveat
        caveats.append(additive_caveat(plan.design))
    what = "block sums" if k < n else "residual products"
    mechanism = out.mechanism
    parts, pieces, releases = [], [], []
    zcp, scp, ap = public.z_center, public.z_scale, public.xy
    if zcp is not None:
        releases.extend(replace(r, name="z_" + r.name) for r in zcp.releases)
        parts.append(f"{zcp.epsilon:g} for the released centres of z")
        pieces.append(f"z centres: {zcp.mechanism}")
    if scp is not None:
        releases.extend(replace(r, name="z_" + r.name) for r in scp.releases)
        parts.append(f"{scp.epsilon:g} for the released scales of z")
        pieces.append(f"z scales: {scp.mechanism}")
    if ap is not None:
        releases.extend(ap["releases"])
        parts.append(f"{ap['epsilon']:g} for the released bounds/centres "
                     f"({', '.join(ap['released'])})")
        pieces.append(f"bounds: {ap['mechanism']} (epsilon {ap['epsilon']:g})")
        caveats.extend(ap.get("caveats", ()))
    caveats.extend(public.caveats)
    eps_c = plan.share("centres")
    if eps_c is not None:
        centre = out.releases[0]
        parts.append(f"{eps_c:g} for the released centres")
        pieces.append(f"centres: {centre.mechanism}, scale {centre.noise_scale:.4g} "
                      f"(epsilon {eps_c:g})")
    releases.extend(out.releases)
    comp_text = ""
    if spline:
        parts.append(f"{plan.design.eps_fit:g} for the released regression")
        if pieces:
            mechanism = "; ".join([mechanism] + pieces)
        if plan.design.eps_squares:
            tail = (f"{plan.share('sum of products'):g} for the sum of the residual products, "
                    f"{plan.share('sum of squared products'):g} for the sum of their squares")
        else:
            tail = f"{plan.share('block sums'):g} for the block sums"
        comp_text = f" (sequential composition: {', '.join(parts)}, {tail})"
    elif parts:
        eps_test = plan.test_epsilon
        mechanism = "; ".join([f"{mechanism} (epsilon {eps_test:g})"] + pieces)
        comp_text = (f" (sequential composition: {', '.join(parts)}, {eps_test:g} for the "
                     f"{what})")
    bounds = {name: tuple(np.asarray(v, dtype=float).tolist()) for name, v in
              (("x_bound", out.x_bound), ("y_bound", out.y_bound),
               ("x_center", out.x_center), ("y_center", out.y_center))}
    if zcp is not None:
        # in z's own units: with a public z_scale the centre was released on z / z_scale, so
        # that passing the record back as a public z_center reproduces the centring
        zc_record = np.asarray(zcp.center, dtype=np.float64)
        if public.z_public_scale is not None:
            with np.errstate(all="ignore"):   # released value x public scale: post-processing
                zc_record = np.clip(zc_record * public.z_public_scale,
                                    -np.finfo(np.float64).max, np.finfo(np.float64).max)
        bounds["z_center"] = tuple(zc_record.tolist())
    if scp is not None:
        bounds["z_scale"] = tuple(float(s) for s in scp.scale)
    record = PrivacyRecord(
        epsilon=par.epsilon, mechanism=mechanism, sensitivity=out.sensitivity,
        noise_scale=out.noise.scale, hardened=out.hardened, ridge_lambda=out.ridge_lambda,
        kernel_sigma=out.kernel_sigma, bounds=bounds,
        guarantee=guarantee_text(
            par.epsilon, "statistic, pvalue",
            "one row (x_i, y_i, z_i)" if conditional else "one row (x_i, y_i)",
            hardened=out.hardened, released_bounds=(ap is not None or zcp is not None
                                                    or scp is not None),
            covered=out.covered, composition=comp_text,
            not_covered_reason="ridge_lambda was chosen by cross-validation on the private data"),
        caveats=tuple(caveats), n_blocks=k, composition=composition,
        sensitivity_kind=out.sensitivity_kind, releases=tuple(releases))
    method = _method_name(p * q, private=True)
    if not conditional:
        method = method.replace("test", "test without conditioning", 1)
    if spline:
        method += ", released spline regression"
    if spline and k == 1:
        method += ", one noisy sum and its released variance"
    elif k < n:
        method += f", {k} noisy block sums"
    method += caption
    if spline and out.fit_check is not None and not out.fit_check.get("certified", True):
        # the fail-safe fired on this data (the nested fits disagree): say so where
        # `stat, p = res` users see it (post-processing of the released result)
        import warnings
        from ._stats import FailSafeWarning
        if out.fit_check.get("floor_binds"):
            from .results import FLOOR_REASON
            why = FLOOR_REASON
        else:
            why = ("the released nested fits disagree (the test fit misses part of "
                   "E[X | Z] or E[Y | Z])")
        tip = ""
        if any(par.tight.values()):
            tip = ("  The bounds were tightened (tighten): a regression that fills the "
                   "tighter window is harder to fit; tighten=False keeps the public window.")
        warnings.warn(f"privgcm: p = 1 is the fail-safe, not evidence of independence: {why}; "
                      "see the result's fit check and caveats.  More epsilon or n "
                      "(a finer fit), or a stated model (assume=...), may resolve it." + tip,
                      FailSafeWarning, stacklevel=3)
    return PrivateTestResult(statistic=out.statistic, pvalue=out.pvalue,
                             alternative=par.alternative, method=method, n=n, privacy=record,
                             statistic_name=out.statistic_name, n_sim=out.n_sim,
                             fit_check=out.fit_check)
