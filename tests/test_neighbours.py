"""Neighbour-consistency harness (issue 12): no release may tell neighbours apart.

Every private entry point -- ``privgcm``, ``privcrt``, ``residual_products``,
``crt_statistics``, ``baselines.privtot``, ``baselines.private_kendall``,
the stand-alone releases of ``privci.bounds`` (``private_bounds``,
``private_quantile``, ``private_scale``; ``candidate_grid`` on public numbers)
and the command line (the R functions: tests/test_neighbours_r.py) -- is run on
many pairs of neighbouring data sets (one row replaced arbitrarily, drawn by
hypothesis from a mixture of ordinary values and the extremes of float64:
+-1e308, +-5e-324 subnormals, -0.0, duplicated rows, all rows equal, n at the
function's minimum, one row far away), for both kernels (exact, random
Fourier features) and both noise paths (``rng=None``: OpenDP, hardened; a
seed: numpy).  On each pair (see tests/neighbours_util.py):

* both calls return a finite statistic and p-value, or both raise the same
  exception type with the same message;
* the warnings (category and message, numpy's floating-point warnings
  included) are the same in both calls;
* the un-noised transformations stay within their stated sensitivity:
  ||R - R'||_1 <= sensitivity (1 + 1e-9) for ``residual_products``,
  max_j |T_j - T'_j| <= sensitivity (1 + 1e-9) for ``crt_statistics``, and
  |T - T'| <= sensitivity for the Kendall statistic with the strata fixed;
* ``privgcm`` and ``privcrt`` on the seeded path (issue 38): the second neighbour is run
  with the same seed and every release returning the first neighbour's output; what each
  noise mechanism is handed (the centres, the spline fit's statistics, the block sums or
  products, the rank's scores, the private quantiles) differs by at most its stated
  sensitivity, with the same public parameters; the released statistic reaches half of
  its sharp constant over the search, and the p-value changes when the released
  statistic is moved towards rejection (unless the fail-safe holds it at 1);
* on the hardened path OpenDP is never handed a non-finite value (its
  ``nan=False`` domain is not enforced by OpenDP itself);
* ``privci.bounds``: given the same earlier releases, the vector handed to
  each private quantile changes in at most one entry, and the epsilons add up
  to at most ``epsilon`` exactly.

A search cannot pass vacuously (issue 21): every entry point must return on
at least half of its pairs, and every sensitivity check must reach at least
half of its constant (hand-made pairs, run first, reach 0.75-0.99 of the
sharp KRR constants; see "hand-made pairs"), so a constant halved by mistake
fails.

These are exact properties, not statistical ones: one failing pair is a bug
(tolerated error rate 0).  Then the issue's reproductions are checked one by
one, with the wording of the guarantees (seeded path, ``ridge_lambda="cv"``),
the command line's error messages, and concurrent releases in two threads.

The default run searches 15-40 pairs per entry point and configuration
(``derandomize=True``: the same pairs on every run, no shrinking, a few
seconds each); ``--runslow`` runs a 10x larger search with shrinking.  The
number of pairs searched and the largest sensitivity ratio seen per entry
point are printed at the end of the module (``pytest -s``).
"""

import contextlib
import io
import math
import re
import sys
import threading
import warnings

import numpy as np
import pytest
from hypothesis import (HealthCheck, Phase, example, given, settings, strategies as st,
                        target)
from hypothesis.control import currently_in_test_context

import neighbours_util as nu
import privci
from privci import cli
from privci.baselines import kendall_statistic, private_kendall, privtot

KERNELS = ("exact", "rff")
GCM_FITS = ("exact", "rff", "spline")   # privgcm: both KRR kernels and the released spline fit
KRR_ONLY = ("ridge_lambda", "kernel_sigma", "sensitivity", "kernel_approximation", "n_features",
            "feature_rng")
NOISE = {"hardened": None, "seeded": 20261126}
N_FEATURES = 16          # random features in the searches (the issue's reproduction: 512)
FEATURE_SEED = 3         # the data-independent frequencies: the same for both neighbours
RESAMPLE_SEED = 11       # the resampling stream of crt_statistics: the same for both


def _search(check, max_examples, *, slow=False, min_success=nu.MIN_SUCCESS_SHARE,
            reach=None, examples=(), **strategies):
    """Run ``check(**drawn)`` on ``max_examples`` hypothesis draws (fixed seed, no database).

    Then every entry point compared must have returned (not raised) on at least
    ``min_success`` of the pairs, and, with ``reach``, every sensitivity check must have
    reached that ratio of its constant (see ``neighbours_util.assert_ratio_reached``).
    ``examples``: dicts of explicit draws (hand-made pairs), run first.
    """
    phases = (Phase.explicit, Phase.generate, Phase.target) + ((Phase.shrink,) if slow else ())

    @settings(max_examples=max_examples, deadline=None, derandomize=True, database=None,
              phases=phases, suppress_health_check=list(HealthCheck), print_blob=False)
    @given(**strategies)
    def run(**drawn):
        check(**drawn)

    for drawn in reversed(examples):
        run = example(**drawn)(run)
    with nu.tracking() as seen:
        run()
    nu.assert_enough_successes(seen, min_success)
    if reach is not None:
        nu.assert_ratio_reached(seen, reach)
    return seen


FAST, SLOW = 1, 10       # multipliers of the per-entry-point example counts


# --------------------------------------------------------------------------- OpenDP spy

NONFINITE_TO_OPENDP = []


def _nonfinite(arg):
    if isinstance(arg, float):
        return not math.isfinite(arg)
    if isinstance(arg, (list, tuple)):
        return any(_nonfinite(v) for v in arg)
    return False


@pytest.fixture(scope="module", autouse=True)
def _opendp_spy_and_summary():
    """Record every non-finite value handed to an OpenDP measurement; print the summary."""
    import opendp.core

    original = opendp.core.measurement_invoke

    def spy(this, arg):
        if _nonfinite(arg):
            NONFINITE_TO_OPENDP.append(repr(arg)[:200])
        return original(this, arg)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(opendp.core, "measurement_invoke", spy)
        yield
    print("\n" + "\n".join(nu.summary_lines()))


def _assert_opendp_saw_finite_values(context):
    seen = list(NONFINITE_TO_OPENDP)
    NONFINITE_TO_OPENDP.clear()
    assert not seen, f"OpenDP was handed a non-finite value: {seen[0]}\n  case: {context}"


_WARMED = set()


def _compare(entry, call, pair, context, *, released=nu._numbers):
    """Run ``call`` on both neighbours and assert they cannot be told apart.

    The first time an entry point is compared it is called once beforehand,
    unrecorded, so that a warning issued once per process (a lazy import, a
    first compilation) is not mistaken for a difference between neighbours.
    """
    if entry not in _WARMED:
        _WARMED.add(entry)
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            with contextlib.suppress(Exception, SystemExit):
                call(pair.a)
    NONFINITE_TO_OPENDP.clear()
    a = nu.run_recorded(lambda: call(pair.a), released=released)
    b = nu.run_recorded(lambda: call(pair.b), released=released)
    nu.count_pair(entry, ok=a.kind == "ok" and b.kind == "ok")
    nu.assert_indistinguishable(a, b, f"{context}; {pair!r}")
    _assert_opendp_saw_finite_values(f"{context}; {pair!r}")
    return a, b


def _ratio_check(entry, ratio, pair, context, what, sharp_ratio=None):
    """Record ``ratio`` (change / stated constant) and assert it is at most 1 (+1e-9).

    ``sharp_ratio``: change / the sharp constant, for an entry that states the paper's
    looser constant (recorded for ``neighbours_util.assert_ratio_reached``, and itself at
    most 1: the sharp constant is a proved bound whatever constant the noise uses).
    """
    nu.count_pair(entry, ratio, pairs=0, sharp_ratio=sharp_ratio)   # pair counted by _compare
    if sharp_ratio is not None:
        assert nu.within(sharp_ratio), (
            f"{what} changed by {sharp_ratio!r} times the sharp constant between neighbours "
            f"(the path states the paper's constant)\n  case: {context}; {pair!r}")
    if math.isfinite(ratio) and currently_in_test_context():   # steer the search upwards
        target(min(ratio, 1e6), label=f"{entry} sensitivity ratio")
    assert nu.within(ratio), (f"{what} changed by {ratio!r} times the stated sensitivity "
                              f"between neighbours\n  case: {context}; {pair!r}")


# --------------------------------------------------------------------------- strategies

def _pairs(min_n, max_n, **shapes):
    return nu.neighbours(min_n=min_n, max_n=max_n, shapes=shapes)


GCM_PAIRS = _pairs(2, 36, x=st.sampled_from((1, 1, 1, 2)), y=st.sampled_from((1, 1, 1, 2)),
                   z=st.integers(1, 2))
GCM_OPTS = st.fixed_dictionaries({
    "x_bound": st.sampled_from((2.0, 0.5, 1e308)),
    "y_bound": st.sampled_from((2.0, 3.0)),
    "x_center": st.sampled_from((0.0, 0.0, 0.5, -1e308)),
    "y_center": st.sampled_from((0.0, 0.0, 1.7976931348623157e308)),
    "ridge_lambda": st.sampled_from((5.0, 5.0, 0.5, 1e-3)),
    "kernel_sigma": st.sampled_from((1.0, 1.0, 0.05, 1e6)),
    "alternative": st.sampled_from(("two-sided", "greater", "less")),
    "center_epsilon": st.sampled_from((None, None, 0.25)),
    "sensitivity": st.sampled_from(("sharp", "paper")),
    "n_blocks": st.sampled_from(("auto", "auto", None, 2)),
    "z": st.sampled_from(("given", "given", "given", "none")),   # none: unconditional test
    "z_center": st.sampled_from((0.0, 0.0, 0.5, -1e308)),       # the spline fit's public centre
    "tighten": st.sampled_from(("auto", "auto", False)),      # public bounds tightened (stop 51)
})
PRIVGCM_ONLY = ("alternative", "center_epsilon", "n_blocks", "z_center", "tighten")
CRT_PAIRS = _pairs(2, 36, x=1, y=1, z=st.integers(1, 2), xr=5)
MEANS = {
    "sin": lambda z: np.sin(z[:, 0]),
    "exp": lambda z: np.exp(z[:, 0]),                # overflows for z > 709.8
    "steep linear": lambda z: 1e300 * z[:, 0],       # overflows for |z| > 1.8e8
    "sum": lambda z: z.sum(axis=1),                  # overflows for two rows of 1e308
    "sqrt": lambda z: np.sqrt(z[:, 0]),              # NaN (and numpy's warning) for z < 0
    # not row by row (depends on the whole z): must be refused the same way on both
    "centred (not row-wise)": lambda z: z[:, 0] - z[:, 0].mean(),
}


class StudentModelX:
    """A non-Gaussian model-X law (the ModelX protocol): X | Z = z ~ sin(z_1) + t_3."""

    def conditional_mean(self, z):
        return np.sin(np.asarray(z)[:, 0])

    def sample(self, z, n_resamples, rng):
        mu = self.conditional_mean(z)
        return mu + rng.standard_t(3, size=(n_resamples, mu.shape[0]))
CRT_OPTS = st.fixed_dictionaries({
    "mean": st.sampled_from(tuple(MEANS) + ("Student model-X",)),
    "sensitivity": st.sampled_from(("sharp", "paper")),
    "scale": st.sampled_from((1.0, 1.0, 1e-300, 1e300)),
    "given_resamples": st.sampled_from((False, False, True)),
    "y_bound": st.sampled_from((4.0, 1.0)),
    "x_residual_bound": st.sampled_from((4.0, 1.0)),
    "y_center": st.sampled_from((0.0, 0.0, -1e308)),
    "ridge_lambda": st.sampled_from((5.0, 5.0, 0.5)),
    "kernel_sigma": st.sampled_from((1.0, 0.05)),
    "alternative": st.sampled_from(("two-sided", "greater", "less")),
})


def _kernel_kw(kernel, noise):
    if kernel == "exact":
        return {"kernel_approximation": "exact"}
    return {"kernel_approximation": "rff", "n_features": N_FEATURES,
            "feature_rng": None if noise == "hardened" else FEATURE_SEED}


# --------------------------------------------------------------------------- PrivGCM

def _z(d, opts):
    return None if opts["z"] == "none" else d["z"]


def spline_epsilon(n):
    """The released spline fit's epsilon in the searches: n epsilon = 2e4 (at least 1).

    privgcm's spline path refuses (UnresolvableDesignError, before anything is computed)
    where its public rule cannot resolve the fit: below n epsilon ~ 1900 with one column of
    z, ~ 3000 with two under assume="additive" (two columns need a stated model;
    privci._spline.smallest_epsilon), more with the private z scale and centres.  At the searches' n <= 36 and epsilon 1 both neighbours
    would raise the same refusal and compare nothing.  n is public (the same on both
    neighbours), so this epsilon is too; the properties checked (the same outcome, warnings
    and errors on both neighbours, every release within its stated sensitivity) hold
    whatever epsilon."""
    return max(1.0, 2e4 / n)


def _privgcm_call(kernel, noise, opts):
    if kernel == "spline":
        kw = {k: v for k, v in opts.items() if k != "z" and k not in KRR_ONLY}
        kw["regression"] = "spline"
        if kw.get("n_blocks", "auto") is None:
            kw["n_blocks"] = "auto"       # one block per row is the KRR path's option
        if opts["z"] == "none":
            kw.pop("z_center", None)
    else:
        kw = dict({k: v for k, v in opts.items() if k not in ("z", "z_center")},
                  **_kernel_kw(kernel, noise), regression="krr")

    def call(d):
        more = {}
        if kernel == "spline" and opts["z"] == "none":
            kw.pop("tighten", None)     # "auto" without z is False: the same call
        if kernel == "spline":
            more["epsilon"] = spline_epsilon(d["x"].shape[0])
            if opts["z"] != "none" and d["z"].shape[1] > 1:
                more["assume"] = "additive"     # two columns of z need a stated model
        return privci.privgcm(nu.vec(d["x"]), nu.vec(d["y"]), _z(d, opts),
                              **{"epsilon": 1.0, **more}, rng=NOISE[noise], **kw)
    return call


def _without_failsafe_warning(call):
    """``call`` with privci.FailSafeWarning (only) silenced: see _failsafe_follows_releases."""
    def quiet(d):
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", category=privci.FailSafeWarning)
            return call(d)
    return quiet


def _failsafe_follows_releases(entry, call, pair, context):
    """The spline path's FailSafeWarning ("the released nested fits disagree", p = 1) is a
    function of the released values: on the hardened path it differs between two runs on
    the *same* data (fresh noise), so the comparison of warnings leaves it out.  Instead:
    with the second neighbour's releases returning the first's outputs (the same released
    values), the warning must be the same on both neighbours; a fail-safe that read the
    rows would differ here."""
    seen, ref = [], None
    for d in (pair.a, pair.b):
        with warnings.catch_warnings(record=True) as caught, np.errstate(all="ignore"), \
                nu.released(ref) as log:
            warnings.simplefilter("always")
            try:
                call(d)
            except Exception as exc:  # noqa: BLE001 - compared below
                caught.append(warnings.WarningMessage(repr(exc), RuntimeError, "", 0))
        ref = ref or log
        assert not log.errors, f"{entry}: {log.errors}\n  case: {context}; {pair!r}"
        seen.append([str(w.message) for w in caught
                     if issubclass(w.category, (privci.FailSafeWarning, RuntimeError))])
    assert seen[0] == seen[1], (
        f"{entry}: with the same released values the neighbours' fail-safe differs: "
        f"{seen}\n  case: {context}; {pair!r}")


def _compare_spline(entry, call, pair, context):
    """_compare for a call on the spline path: its FailSafeWarning is a function of its
    releases (on the hardened path it differs between runs on the same data), so it is left
    out of the comparison of warnings and checked with the releases fixed instead."""
    a, b = _compare(entry, _without_failsafe_warning(call), pair, context)
    if a.kind == "ok":
        _failsafe_follows_releases(entry, call, pair, context)
    return a, b


def check_privgcm(kernel, noise, pair, opts):
    entry = f"privgcm[{kernel}, {noise}]"
    call = _privgcm_call(kernel, noise, opts)
    context = f"privgcm {kernel} {noise} {opts}"
    if kernel == "spline":
        a, b = _compare_spline(entry, call, pair, context)
    else:
        a, b = _compare(entry, call, pair, context)
    if noise == "seeded" and a.kind == "ok":
        over = 1.0
        if kernel != "spline" and opts["z"] != "none" and opts["sensitivity"] == "paper":
            lam = opts["ridge_lambda"]
            over = privci.gcm_sensitivity(lam, "paper") / privci.gcm_sensitivity(lam, "sharp")
        _released_check(entry, call, pair, f"privgcm {kernel} {noise} {opts}", over, a,
                        -1.0 if opts["alternative"] == "less" else 1.0)


def _perturbed(rel, direction):
    """Another output of the release ``rel``: a Laplace release shifted by 1000 noise scales
    (plus 1000) per entry in ``direction`` (towards rejection), another index of a noisy
    max."""
    out, info = rel.output
    if rel.kind == "noisy_max":
        return (0 if out != 0 else len(rel.values) - 1), info
    return out + direction * 1e3 * (info.scale + 1.0), info


def _released_check(entry, call, pair, context, stated_over_sharp=1.0, outcome=None,
                    direction=1.0):
    """Issue 38, seeded path: what every noise mechanism is handed on both neighbours (the
    second with the first's release outputs: the same seeded noise, earlier releases
    fixed) differs by at most the stated sensitivity, with the same public parameters; the
    last release is the test's statistic (block sums, products, the rank's scores), and its
    change / the sharp constant (``stated_over_sharp``: stated / sharp) counts towards the
    search's reach, so a statistic that does not follow the data (a constant p-value) fails
    the search."""
    changes, problems, log = nu.release_changes(call, pair)
    assert not problems, "\n".join(problems) + f"\n  case: {context}; {pair!r}"
    assert changes, (f"{entry}: returned without releasing anything\n  case: {context}; "
                     f"{pair!r}")
    for rel, ratio in changes[:-1]:
        assert nu.within(ratio), (f"a {rel.kind} release changed by {ratio!r} times its "
                                  f"stated sensitivity {rel.sensitivity!r} between neighbours"
                                  f"\n  case: {context}; {pair!r}")
    rel, ratio = changes[-1]
    _ratio_check(f"{entry} released statistic", ratio, pair, context,
                 f"the released {rel.kind} statistic", sharp_ratio=ratio * stated_over_sharp)
    if outcome is None:
        return
    # the p-value is post-processing of the released statistic: another released value
    # (far towards rejection) gives another p-value, unless the fail-safe holds it at 1
    res = nu.rerun(call, pair.a, log, {len(log.calls) - 1: _perturbed(rel, direction)})
    assert not isinstance(res, Exception), (
        f"{entry} raised {res!r} when its last release returned another value\n  case: "
        f"{context}; {pair!r}")
    p0, p1 = outcome.value[1], res.pvalue
    # a simulated p-value (several columns of x or y: the max statistic's null by n_sim
    # draws) has a floor 1 / (n_sim + 1): already there, it cannot move further
    import inspect
    n_sim = inspect.signature(privci.privgcm).parameters["n_sim"].default
    floor = 1.0 / (n_sim + 1)
    if p0 <= floor * (1 + 1e-9) and rel.kind != "noisy_max":
        # there: the last release set to 0 (no evidence) must move it up
        out, info = rel.output
        res = nu.rerun(call, pair.a, log, {len(log.calls) - 1: (0.0 * np.asarray(out), info)})
        assert not isinstance(res, Exception), res
        p1 = res.pvalue
    assert p1 != p0 or p0 == 1.0, (
        f"{entry}: the p-value {p0!r} does not follow the released statistic (the same with "
        f"the released {rel.kind} moved far towards rejection)\n  case: {context}; {pair!r}")


@pytest.mark.parametrize("noise", NOISE)
@pytest.mark.parametrize("kernel", GCM_FITS)
def test_privgcm_neighbours(kernel, noise):
    """Seeded: the released statistic (block sums or products) within its stated
    sensitivity on every pair and, with the hand-made pairs run first, at least half of the
    sharp constant reached (a privgcm whose statistic does not follow the data fails)."""
    seeded = noise == "seeded"
    hand = (_spline_handmade() if kernel == "spline" else _gcm_handmade(DEFAULT_LAMBDA)) \
        if seeded else ()
    _search(lambda pair, opts: check_privgcm(kernel, noise, pair, opts), 25 * FAST,
            pair=GCM_PAIRS, opts=GCM_OPTS, reach=nu.MIN_REACHED_RATIO if seeded else None,
            examples=[{"pair": p, "opts": o} for p, o in hand])


def _sharp_ratio(call, kw, a, ratio, pair):
    """change / the sharp constant of the same data, for a path that states the paper's."""
    if kw["sensitivity"] != "paper":
        return None
    sharp = call(pair.a, sensitivity="sharp").sensitivity
    return ratio * a.result.sensitivity / sharp


def check_residual_products(kernel, pair, opts):
    kw = dict({k: v for k, v in opts.items() if k not in PRIVGCM_ONLY + ("z",)},
              **_kernel_kw(kernel, "seeded"))

    def call(d, **over):
        return privci.residual_products(nu.vec(d["x"]), nu.vec(d["y"]), _z(d, opts),
                                        **dict(kw, **over))

    # without z the constant is 2 for both kinds: a separate entry, reached on its own
    no_z = ", no z" if opts["z"] == "none" else ""
    entry = f"residual_products[{kernel}, {opts['sensitivity']}{no_z}]"
    a, b = _compare(entry, call, pair, f"residual_products {kernel} {opts}",
                    released=lambda rp: (rp.sensitivity,))
    if a.kind == "ok":
        assert a.result.sensitivity == b.result.sensitivity
        ratio = nu.l1_ratio(a.result.products, b.result.products, a.result.sensitivity)
        _ratio_check(entry, ratio, pair, f"residual_products {kernel} {opts}",
                     "the L1 norm of the residual products",
                     _sharp_ratio(call, kw, a, ratio, pair))


@pytest.mark.parametrize("kernel", KERNELS)
def test_residual_products_within_sensitivity(kernel):
    """The search, with the hand-made pairs (below) run first: every constant is reached to
    at least half, so a halved one fails (``reach``)."""
    _search(lambda pair, opts: check_residual_products(kernel, pair, opts), 30 * FAST,
            pair=GCM_PAIRS, opts=GCM_OPTS, reach=nu.MIN_REACHED_RATIO,
            examples=[{"pair": p, "opts": o} for p, o in
                      list(_gcm_handmade(DEFAULT_LAMBDA)) + list(_unconditional_handmade())])


# --------------------------------------------------------------------------- hand-made pairs
#
# Pairs built to come close to the proved KRR constants (issue 21: the random pairs reached
# 0.40 of the sharp constant and 0.007 of the paper's, so a halved constant was invisible).
# Rows at the clipping bounds (|u| = 1) and z in two far-apart clusters (k(0, 100) =
# exp(-10^4) = 0), so each cluster's fit is its sum / (size + n lambda):
#
# * PrivGCM: cluster A (m rows: x = +1, y = -1) and cluster B (m rows: x = -1, y = -1);
#   row j moves from B with (x, y) = (+1, +1) to A with (-1, +1).  Its own product swings
#   by about 2 b^2 and both fits move at every other row in the direction of its residual.
# * PrivCRT: one cluster, y = -1 and model-X residual -1 on every other row; row j has
#   residual +1 and y = +1, its neighbour y = -1: T moves by 2 at row j and by 2 B at the
#   others, against Delta_T* = 2 b^2 = 2 + 4 B + 2 B^2.
#
# Where is a constant attained?  The proofs add triangle inequalities (row j's own product
# at +-b^2 on both sides, every other row's change aligned with its residual) that cannot all
# be tight at once while B_lambda is large: at the default lambda = 5 these pairs reach 0.750
# of C* (GCM) and 0.851 of Delta_T* (CRT), and a hill-climbing search over such cluster
# designs (n <= 80) found no more than 0.745 for GCM.  As lambda grows both constants tend to
# 2 b^2, the own-row term, which is attained: at lambda = 100 the pairs reach 0.980 (GCM) and
# 0.990 (CRT), and 0.9 is required there.  At lambda = 5, 0.5 is required (a constant halved
# by mistake is then exceeded 1.5 and 1.7 times).
#
# The paper's constants are at least 2.0002 times the sharp ones for every lambda (checked on
# 2000 values from 10^-6 to 10^8; the ratio tends to 2 as lambda grows), so no pair can reach
# half of them, and a halved paper constant is still a valid bound (>= the sharp one): not a
# privacy bug.  For them the pairs must reach 0.9 of the *sharp* constant at lambda = 100 (and
# 0.5 at lambda = 5); their ratio to the paper's constant is shown in the summary (0.413 GCM,
# 0.454 CRT at lambda = 100; 0.232 and 0.334 at lambda = 5) and the constants themselves are
# pinned by the formulas in test_krr_constants_are_the_proved_formulas.

DEFAULT_LAMBDA, LARGE_LAMBDA = 5.0, 100.0
REACH = {DEFAULT_LAMBDA: nu.MIN_REACHED_RATIO, LARGE_LAMBDA: 0.9}


def _gcm_handmade(lam, m=40):
    z = np.r_[[100.0], np.zeros(m), np.full(m, 100.0)][:, None]
    x = np.r_[[1.0], np.ones(m), -np.ones(m)][:, None]
    y = np.r_[[1.0], -np.ones(m), -np.ones(m)][:, None]
    a = {"x": x, "y": y, "z": z}
    b = {k: v.copy() for k, v in a.items()}
    b["z"][0], b["x"][0], b["y"][0] = 0.0, -1.0, 1.0
    for kind in ("sharp", "paper"):
        opts = {"x_bound": 1.0, "y_bound": 1.0, "x_center": 0.0, "y_center": 0.0,
                "ridge_lambda": lam, "kernel_sigma": 1.0, "alternative": "two-sided",
                "center_epsilon": None, "sensitivity": kind, "n_blocks": "auto", "z": "given",
                "z_center": 0.0}
        yield nu.Pair(a, b, 0, f"hand-made: two clusters of {m}, row 0 moves, lambda {lam:g}"), \
            opts


def _crt_handmade(lam, n=41):
    z = np.zeros((n, 1))
    x = -np.ones((n, 1))           # sin(0) = 0: the model-X residual is x itself
    x[0] = 1.0
    y = -np.ones((n, 1))
    y[0] = 1.0
    a = {"x": x, "y": y, "z": z, "xr": np.zeros((n, 5))}
    b = {k: v.copy() for k, v in a.items()}
    b["y"][0] = -1.0
    for kind in ("sharp", "paper"):
        opts = {"mean": "sin", "sensitivity": kind, "scale": 1.0, "given_resamples": False,
                "y_bound": 1.0, "x_residual_bound": 1.0, "y_center": 0.0, "ridge_lambda": lam,
                "kernel_sigma": 1.0, "alternative": "two-sided"}
        yield nu.Pair(a, b, 0, f"hand-made: one cluster of {n}, y_0 = 1 -> -1, lambda {lam:g}"), \
            opts


def _spline_handmade(n=2000):
    """The released spline fit (issue 38): x and y zero but on row 0, whose y flips from +1
    to -1 (x = +1); at n = 2000 the released fit predicts little, so the residual scales
    stay near 1 and row 0's product moves by nearly 2, the block sums' L1 sensitivity
    (0.73 of it with the harness's seed; at the harness's n <= 36 the fit's noise makes
    every residual scale 2, and no pair can pass 0.5)."""
    g = np.random.default_rng(5)
    a = {"x": np.zeros((n, 1)), "y": np.zeros((n, 1)), "z": g.normal(size=(n, 1))}
    a["x"][0] = a["y"][0] = 1.0
    b = {k: v.copy() for k, v in a.items()}
    b["y"][0] = -1.0
    opts = {"x_bound": 1.0, "y_bound": 1.0, "x_center": 0.0, "y_center": 0.0,
            "ridge_lambda": 5.0, "kernel_sigma": 1.0, "alternative": "two-sided",
            "center_epsilon": None, "sensitivity": "sharp", "n_blocks": "auto", "z": "given",
            "z_center": 0.0,
            # the public window as given: this pair reaches the statistic's constant in it
            # (tightened, the released quantile of these zero columns is tiny and both
            # neighbours' products shrink); the random draws sample tighten
            "tighten": False}
    yield nu.Pair(a, b, 0, f"hand-made: n = {n}, x, y zero but row 0, y_0 = 1 -> -1"), opts


def _unconditional_handmade(n=10):
    """Without z: ||R - R'||_1 <= 2 (row j's own product, +1 -> -1) is attained exactly."""
    a = {"x": np.ones((n, 1)), "y": np.ones((n, 1)), "z": np.zeros((n, 1))}
    b = {k: v.copy() for k, v in a.items()}
    b["y"][0] = -1.0
    for kind in ("sharp", "paper"):
        opts = {"x_bound": 1.0, "y_bound": 1.0, "x_center": 0.0, "y_center": 0.0,
                "ridge_lambda": 5.0, "kernel_sigma": 1.0, "alternative": "two-sided",
                "center_epsilon": None, "sensitivity": kind, "n_blocks": "auto", "z": "none",
                "z_center": 0.0}
        yield nu.Pair(a, b, 0, "hand-made: no z, y_0 = 1 -> -1"), opts


def _reached(seen, entry):
    s = seen[entry]
    return s["max_sharp_ratio"] if s["max_sharp_ratio"] is not None else s["max_ratio"]


@pytest.mark.parametrize("lam", [DEFAULT_LAMBDA, LARGE_LAMBDA])
@pytest.mark.parametrize("kernel", KERNELS)
def test_krr_constants_reached_by_hand_made_pairs(kernel, lam):
    """The hand-made pairs stay within every stated constant and reach REACH[lam] of the sharp
    one (``sharp``: change / stated constant; ``paper``: change / sharp constant)."""
    with nu.tracking() as seen:
        for pair, opts in _gcm_handmade(lam):
            check_residual_products(kernel, pair, opts)
        for pair, opts in _crt_handmade(lam):
            check_crt_statistics(kernel, pair, opts)
    for what in ("residual_products", "crt_statistics"):
        for kind in ("sharp", "paper"):
            entry = f"{what}[{kernel}, {kind}]"
            assert seen[entry]["ok"] == seen[entry]["pairs"] == 1
            got = _reached(seen, entry)
            print(f"\nhand-made pair, lambda {lam:g}: {entry} change / stated constant "
                  f"{seen[entry]['max_ratio']:.4f}, change / sharp constant {got:.4f}")
            assert got >= REACH[lam], (
                f"{entry} at lambda {lam:g}: the hand-made pair reaches {got:.4f} of the sharp "
                f"constant, below {REACH[lam]}")
    with nu.tracking() as seen:
        for pair, opts in _unconditional_handmade():
            check_residual_products(kernel, pair, opts)
    for kind in ("sharp", "paper"):
        assert seen[f"residual_products[{kernel}, {kind}, no z]"]["max_ratio"] == 1.0


def test_krr_constants_are_the_proved_formulas():
    """The stated constants, written out here from the proofs (docs/sensitivity.rst), so that
    a constant changed in the library is not also changed in the reference of the checks."""
    for lam in (1e-3, 0.25, 0.5, 1.0, 5.0, 100.0, 1e4):
        B = 0.5 / math.sqrt(lam) if lam < 1 else 1.0 / (1.0 + lam)
        b, a = 1.0 + B, 1.0 / math.sqrt(lam)
        sharp_gcm = 2 * b * b + 4 * b * min(b * B, 0.5 / math.sqrt(lam))
        paper_gcm = 4 * (1 + a) * (1 + a + 2 * a ** 3 + 2 / lam)
        sharp_crt, paper_crt = 2 * b * b, 4 * (1 + a + a ** 3 + 1 / lam)
        assert privci.gcm_sensitivity(lam, "sharp") == pytest.approx(sharp_gcm, rel=1e-12)
        assert privci.gcm_sensitivity(lam, "paper") == pytest.approx(paper_gcm, rel=1e-12)
        assert privci.crt_sensitivity(lam, "sharp") == pytest.approx(sharp_crt, rel=1e-12)
        assert privci.crt_sensitivity(lam, "paper") == pytest.approx(paper_crt, rel=1e-12)
        # the paper's constants are more than twice the sharp ones (see the comment above)
        assert paper_gcm > 2 * sharp_gcm and paper_crt > 2 * sharp_crt
    x, y, z = _issue_data(30)
    for kind, f in (("sharp", privci.gcm_sensitivity), ("paper", privci.gcm_sensitivity)):
        rp = privci.residual_products(x, y, z, x_bound=3, y_bound=3, ridge_lambda=5.0,
                                      sensitivity=kind)
        assert rp.sensitivity == f(5.0, kind)
        res = privci.privgcm(x, y, z, epsilon=1.0, x_bound=3, y_bound=3, ridge_lambda=5.0,
                             sensitivity=kind, regression="krr", rng=1)
        assert res.privacy.sensitivity == rp.sensitivity
    mx = privci.GaussianModelX(lambda zz: np.sin(zz[:, 0]), 1.0)
    for kind in ("sharp", "paper"):
        cs = privci.crt_statistics(x, y, z, model_x=mx, y_bound=3, x_residual_bound=3,
                                   ridge_lambda=5.0, sensitivity=kind, rng=1)
        assert cs.sensitivity == privci.crt_sensitivity(5.0, kind)


# --------------------------------------------------------------------------- PrivCRT

def _crt_kw(opts):
    kw = {k: v for k, v in opts.items() if k not in ("mean", "scale", "given_resamples")}
    if opts["mean"] == "Student model-X":
        return StudentModelX(), kw
    return privci.GaussianModelX(MEANS[opts["mean"]], opts["scale"]), kw


def _crt_call(fn, kernel, noise, opts, **extra):
    model, kw = _crt_kw(opts)
    kw.update(_kernel_kw(kernel, noise))
    kw.update(extra)

    def call(d):
        resamples = None
        if opts["given_resamples"]:     # (m, n): column i is the replaced row's resamples
            with np.errstate(all="ignore"):   # the user's own (finite) precomputation
                mu = np.nan_to_num(MEANS.get(opts["mean"], MEANS["sin"])(d["z"]),
                                   posinf=1e300, neginf=-1e300)
                resamples = np.nan_to_num(mu[None, :] + d["xr"].T, posinf=1e300, neginf=-1e300)
        return fn(d["x"][:, 0], d["y"][:, 0], d["z"], model_x=model, x_resamples=resamples,
                  n_resamples=9, **kw)
    return call


def check_privcrt(kernel, noise, pair, opts):
    entry = f"privcrt[{kernel}, {noise}]"
    call = _crt_call(privci.privcrt, kernel, noise, opts, epsilon=1.0, rng=NOISE[noise])
    a, _ = _compare(entry, call, pair, f"privcrt {kernel} {noise} {opts}")
    if noise == "seeded" and a.kind == "ok":
        lam = opts["ridge_lambda"]
        over = privci.crt_sensitivity(lam, opts["sensitivity"]) / privci.crt_sensitivity(
            lam, "sharp")
        _released_check(entry, call, pair, f"privcrt {kernel} {noise} {opts}", over, a)


@pytest.mark.parametrize("noise", NOISE)
@pytest.mark.parametrize("kernel", KERNELS)
def test_privcrt_neighbours(kernel, noise):
    """Seeded: the rank's scores within their sensitivity 1 on every pair and, with the
    hand-made pairs run first, at least half of it reached (scaled to the sharp Delta_T)."""
    seeded = noise == "seeded"
    _search(lambda pair, opts: check_privcrt(kernel, noise, pair, opts), 25 * FAST,
            pair=CRT_PAIRS, opts=CRT_OPTS, reach=nu.MIN_REACHED_RATIO if seeded else None,
            examples=[{"pair": p, "opts": o} for p, o in
                      (_crt_handmade(DEFAULT_LAMBDA) if seeded else ())])


def check_crt_statistics(kernel, pair, opts):
    opts = dict(opts, alternative="two-sided")
    call = _crt_call(privci.crt_statistics, kernel, "seeded",
                     {k: v for k, v in opts.items() if k != "alternative"}, rng=RESAMPLE_SEED)
    entry = f"crt_statistics[{kernel}, {opts['sensitivity']}]"
    a, b = _compare(entry, call, pair, f"crt_statistics {kernel} {opts}",
                    released=lambda cs: (cs.sensitivity,))
    if a.kind == "ok":
        assert a.result.sensitivity == b.result.sensitivity
        ratio = nu.linf_ratio(a.result.statistics, b.result.statistics, a.result.sensitivity)
        sharp = None
        if opts["sensitivity"] == "paper":
            s_call = _crt_call(privci.crt_statistics, kernel, "seeded",
                               {k: v for k, v in dict(opts, sensitivity="sharp").items()
                                if k != "alternative"}, rng=RESAMPLE_SEED)
            sharp = ratio * a.result.sensitivity / s_call(pair.a).sensitivity
        _ratio_check(entry, ratio, pair, f"crt_statistics {kernel} {opts}",
                     "a statistic T_j", sharp)


@pytest.mark.parametrize("kernel", KERNELS)
def test_crt_statistics_within_sensitivity(kernel):
    """The search, with the hand-made pairs run first (see the PrivGCM search)."""
    _search(lambda pair, opts: check_crt_statistics(kernel, pair, opts), 30 * FAST,
            pair=CRT_PAIRS, opts=CRT_OPTS, reach=nu.MIN_REACHED_RATIO,
            examples=[{"pair": p, "opts": o} for p, o in _crt_handmade(DEFAULT_LAMBDA)])


# --------------------------------------------------------------------------- PrivToT

TOT_PAIRS = _pairs(6, 24, x=1, y=1, z=st.integers(1, 2))
TOT_OPTS = st.fixed_dictionaries({
    "ridge_lambda": st.sampled_from((0.5, 0.01, None)),   # None: CV inside each subset
    "center": st.booleans(),
    "alternative": st.sampled_from(("two-sided", "greater")),
})


def check_privtot(kernel, noise, pair, opts):
    kw = dict(opts, **_kernel_kw(kernel, noise))

    def call(d):
        return privtot(d["x"][:, 0], d["y"][:, 0], d["z"], epsilon=1.0, n_subsets=2,
                       alpha0=0.2, rng=NOISE[noise], **kw)

    _compare(f"privtot[{kernel}, {noise}]", call, pair, f"privtot {kernel} {noise} {opts}")


@pytest.mark.parametrize("noise", NOISE)
@pytest.mark.parametrize("kernel", KERNELS)
def test_privtot_neighbours(kernel, noise):
    _search(lambda pair, opts: check_privtot(kernel, noise, pair, opts), 15 * FAST,
            pair=TOT_PAIRS, opts=TOT_OPTS)


# --------------------------------------------------------------------------- private Kendall

# The relation of private_kendall's guarantee: (x_i, y_i) replaced, z (the strata) fixed.
KENDALL_PAIRS = nu.neighbours(min_n=2, max_n=40, shapes={"x": 1, "y": 1})
KENDALL_OPTS = st.fixed_dictionaries({
    "categorical_z": st.booleans(),
    "z_seed": st.integers(0, 1000),
    "alternative": st.sampled_from(("two-sided", "greater", "less")),
})


def _strata(n, categorical, seed):
    rng = np.random.default_rng(seed)
    if categorical:
        return rng.integers(0, 3, size=n).astype(np.float64)
    return rng.normal(size=(n, 2))


def check_private_kendall(noise, pair, opts):
    n = pair.a["x"].shape[0]
    z = _strata(n, opts["categorical_z"], opts["z_seed"])

    def call(d):
        return private_kendall(d["x"][:, 0], d["y"][:, 0], z, epsilon=1.0,
                               categorical_z=opts["categorical_z"], n_clusters=min(3, n),
                               alternative=opts["alternative"], rng=NOISE[noise])

    _compare(f"private_kendall[{noise}]", call, pair, f"private_kendall {noise} {opts}")
    if opts["categorical_z"]:
        labels = z
        a = nu.run_recorded(lambda: kendall_statistic(pair.a["x"][:, 0], pair.a["y"][:, 0],
                                                      labels))
        b = nu.run_recorded(lambda: kendall_statistic(pair.b["x"][:, 0], pair.b["y"][:, 0],
                                                      labels))
        nu.assert_indistinguishable(a, b, f"kendall_statistic; {pair!r}")
        nu.count_pair("kendall_statistic (strata fixed)", ok=a.kind == "ok")
        if a.kind == "ok":
            (ta, sa), (tb, sb) = a.value, b.value
            assert sa == sb
            _ratio_check("kendall_statistic (strata fixed)", abs(ta - tb) / sa, pair,
                         "kendall_statistic", "the conditional Kendall statistic")


@pytest.mark.parametrize("noise", NOISE)
def test_private_kendall_neighbours(noise):
    _search(lambda pair, opts: check_private_kendall(noise, pair, opts), 40 * FAST,
            pair=KENDALL_PAIRS, opts=KENDALL_OPTS)


# --------------------------------------------------------------------------- privci.bounds

# The stand-alone releases of public parameters (issue 21, finding 1): private_bounds,
# private_quantile, private_scale, and candidate_grid (public numbers only).
MAX_FLOAT = float(np.finfo(np.float64).max)
BOUNDS_FUNCTIONS = ("private_bounds", "private_quantile", "private_scale")
BOUNDS_PAIRS = _pairs(2, 40, x=st.sampled_from((1, 1, 2)))
BOUNDS_OPTS = st.fixed_dictionaries({
    "center": st.sampled_from((True, True, 0.0, -1e293, 1e308, -MAX_FLOAT)),
    "bound": st.sampled_from((True, True, True, False)),
    "public_range": st.sampled_from((None, None, (-1e300, 1e300), (-3.0, 3.0),
                                     (-MAX_FLOAT, 0.0), (0.0, 5e-324))),
    "bound_quantile": st.sampled_from((0.8, 0.5, 0.99)),
    "alpha": st.sampled_from((0.5, 0.0, 1.0, 0.9)),
    "candidates": st.sampled_from((None, None, (-MAX_FLOAT, -1.0, 0.0, 1.0, MAX_FLOAT),
                                   (-3.0, -1.0, 1.0, 3.0))),
    "epsilon": st.sampled_from((1.0, 1.0, 0.1, 8.0)),
})


def _bounds_call(function, noise, opts):
    rng = NOISE[noise]
    eps = opts["epsilon"]
    if function == "private_bounds":
        return lambda d: privci.bounds.private_bounds(
            d["x"], epsilon=eps, center=opts["center"], bound=opts["bound"],
            bound_quantile=opts["bound_quantile"], public_range=opts["public_range"], rng=rng)
    if function == "private_quantile":
        return lambda d: privci.bounds.private_quantile(
            d["x"][:, 0], opts["alpha"], epsilon=eps, candidates=opts["candidates"], rng=rng)
    return lambda d: privci.bounds.private_scale(d["x"], epsilon=eps,
                                                 public_range=opts["public_range"], rng=rng)


def _bounds_released(res):
    if isinstance(res, float):
        return (res,)
    return tuple(v for k in ("center", "bound", "scale") for v in (getattr(res, k) or ()))


def _quantile_inputs(call, d):
    """What ``call(d)`` hands to the quantile mechanism: (values, alpha, epsilon, candidates)
    per quantile, every release replaced by a fixed public candidate so that the later
    quantiles of both neighbours are computed from the same released values (the
    sensitivity of adaptive composition is that of each step given the earlier outputs)."""
    from privci import bounds
    seen = []

    def fixed(values, alpha, epsilon, candidates, rng, power=0.0):
        # the bounds' preference (power) enters as a public number: it is checked equal
        # for both neighbours with alpha and epsilon
        seen.append((np.array(values, dtype=np.float64, copy=True), (float(alpha),
                     float(power)), float(epsilon),
                     np.array(candidates, dtype=np.float64, copy=True)))
        # (value, epsilon spent, noise scale), as bounds._quantile returns
        return float(candidates[len(candidates) // 3]), float(epsilon), 2.0 / float(epsilon)

    with pytest.MonkeyPatch.context() as mp, warnings.catch_warnings(), \
            np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        mp.setattr(bounds, "_quantile", fixed)
        try:
            call(d)
        except Exception:   # noqa: BLE001 - both neighbours raise alike (checked by _compare)
            return None
    return seen


def check_bounds(function, noise, pair, opts):
    """Indistinguishable releases, and the quantiles' inputs within their sensitivity: given
    the same earlier releases, the vectors handed to each quantile differ in at most one
    entry (a symmetric distance of 2 at known size, which OpenDP's map(2) is charged for),
    all finite, with the same public alpha, epsilon and strictly increasing finite candidates;
    the epsilons add up to at most ``epsilon`` exactly."""
    from fractions import Fraction
    call = _bounds_call(function, noise, opts)
    context = f"{function} {noise} {opts}"
    a, _ = _compare(f"{function}[{noise}]", call, pair, context, released=_bounds_released)
    if a.kind != "ok":
        return
    ia, ib = _quantile_inputs(call, pair.a), _quantile_inputs(call, pair.b)
    assert ia is not None and ib is not None and len(ia) == len(ib) >= 1, context
    changed = 0
    for (va, al_a, e_a, c_a), (vb, al_b, e_b, c_b) in zip(ia, ib):
        assert (al_a, e_a) == (al_b, e_b) and np.array_equal(c_a, c_b), context
        assert np.all(np.isfinite(c_a)) and np.all(np.diff(c_a) > 0), context
        assert np.all(np.isfinite(va)) and np.all(np.isfinite(vb)), \
            f"a quantile was handed a non-finite value\n  case: {context}; {pair!r}"
        assert va.shape == vb.shape, context
        changed = max(changed, int(np.sum(va != vb)))
    assert sum(Fraction(e) for _, _, e, _ in ia) <= Fraction(opts["epsilon"]), context
    _ratio_check(f"{function} (quantile inputs)", float(changed), pair, context,
                 "the number of entries of a quantile's input vector")


@pytest.mark.parametrize("noise", NOISE)
@pytest.mark.parametrize("function", BOUNDS_FUNCTIONS)
def test_bounds_neighbours(function, noise):
    _search(lambda pair, opts: check_bounds(function, noise, pair, opts), 25 * FAST,
            pair=BOUNDS_PAIRS, opts=BOUNDS_OPTS, reach=1.0)


def test_bounds_issue21_reproductions():
    """Finding 1's reproductions through the harness: the largest float on one row, a far
    public centre (no warning on either neighbour now), and public_range (-1e300, 1e300)."""
    x = np.zeros((100, 1))
    pair = nu.Pair({"x": x}, {"x": x.copy()}, 0, "x_0 = 0 -> largest float")
    pair.b["x"][0] = MAX_FLOAT
    for noise in NOISE:
        for opts in ({"center": -1e293, "public_range": None, "epsilon": 1.0},
                     {"center": True, "public_range": (-1e300, 1e300), "epsilon": 0.1}):
            opts = dict(dict(BOUNDS_OPTS_DEFAULTS), **opts)
            check_bounds("private_bounds", noise, pair, opts)
            check_bounds("private_scale", noise, pair, opts)
            check_bounds("private_quantile", noise, pair, opts)


BOUNDS_OPTS_DEFAULTS = {"center": True, "bound": True, "public_range": None,
                        "bound_quantile": 0.8, "alpha": 0.5, "candidates": None,
                        "epsilon": 1.0}


@settings(max_examples=60, deadline=None, derandomize=True, database=None,
          suppress_health_check=list(HealthCheck))
@given(lo=nu.value, hi=nu.value, positive=st.booleans())
def test_candidate_grid_public_ranges(lo, hi, positive):
    """candidate_grid on any pair of floats: a finite, strictly increasing grid (positive for
    bounds and scales), or a ValueError naming `public_range`; never a numpy warning."""
    out = nu.run_recorded(lambda: privci.bounds.candidate_grid((lo, hi), positive=positive),
                          released=lambda g: (g.size,))
    nu.count_pair("candidate_grid", ok=out.kind == "ok", pairs=1)
    assert not out.warnings, out.describe()
    if out.kind == "error":
        assert out.value[0] == "ValueError" and "`public_range`" in out.value[1], out.describe()
        return
    g = out.result
    assert np.all(np.isfinite(g)) and np.all(np.diff(g) > 0), (lo, hi, positive)
    assert (g[0] > 0) if positive else (g[0] == lo and g[-1] == hi), (lo, hi, positive)


# --------------------------------------------------------------------------- command line

CLI_PAIRS = _pairs(2, 30, x=1, y=1, z=2)
CLI_OPTS = st.fixed_dictionaries({
    "command": st.sampled_from(("privgcm", "privcrt")),
    "formula": st.sampled_from(("0.5 + 1.2*z1 - 0.3*z2", "1e300*z1", "z1 + z2")),
    "center_epsilon": st.sampled_from((None, "0.25")),
})


def _write_csv(path, d, extra_header=(), extra_cols=()):
    with open(path, "w") as fh:
        fh.write(",".join(("x", "y", "z1", "z2") + tuple(extra_header)) + "\n")
        for k in range(d["x"].shape[0]):
            cells = [repr(float(d["x"][k, 0])), repr(float(d["y"][k, 0])),
                     repr(float(d["z"][k, 0])), repr(float(d["z"][k, 1]))]
            cells += [str(c[k]) for c in extra_cols]
            fh.write(",".join(cells) + "\n")


class CliFailure(Exception):
    """The command line exited with a non-zero code; the message is what it printed."""


def run_cli(args):
    """``privci.cli.main(args)``: its released numbers, or CliFailure / SystemExit."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(args)
    if code != 0:
        raise CliFailure(f"exit code {code}: {err.getvalue()}")
    text = out.getvalue()
    stat = re.search(r"statistic=\s*([^,\s]+)", text)
    pval = re.search(r"pvalue=\s*([^,\s]+)", text)
    assert stat and pval, f"the command line printed no statistic and p-value:\n{text}"
    assert err.getvalue() == "", f"the command line wrote to stderr on success:\n{err.getvalue()}"
    return (float(stat.group(1)), float(pval.group(1)))


def _cli_args(path, command, noise, opts):
    # privgcm's spline fit of two columns of z (a stated model: --assume additive) refuses
    # at n <= 30 below epsilon ~ 1.7e3 (see spline_epsilon): 1e4, so that the neighbours
    # are compared on results
    eps = "10000" if command == "privgcm" else "1"
    args = [command, str(path), "--x", "x", "--y", "y", "--z", "z1", "z2", "--epsilon", eps]
    if command == "privgcm":
        args += ["--x-bound", "3", "--y-bound", "3", "--assume", "additive"]
        if opts["center_epsilon"]:
            args += ["--center-epsilon", opts["center_epsilon"]]
    else:
        args += ["--y-bound", "4", "--x-residual-bound", "4", "--x-scale", "1",
                 "--n-resamples", "9", "--x-mean-formula", opts["formula"]]
    if NOISE[noise] is not None:
        args += ["--seed", str(NOISE[noise])]
    return args


def check_cli(tmp_path, noise, pair, opts):
    path = tmp_path / "data.csv"      # one path for both neighbours: it may appear in messages
    args = _cli_args(path, opts["command"], noise, opts)

    def call(d):
        _write_csv(path, d)
        return run_cli(args)

    entry, context = f"cli {opts['command']}[{noise}]", f"cli {noise} {opts}"
    if opts["command"] == "privgcm":
        # the released spline fit's fail-safe warning follows the released values (fresh
        # noise on the hardened path): compared with the releases fixed instead
        a, _ = _compare(entry, _without_failsafe_warning(call), pair, context,
                        released=lambda r: r)
        if a.kind == "ok":
            _failsafe_follows_releases(entry, call, pair, context)
    else:
        _compare(entry, call, pair, context, released=lambda r: r)


@pytest.mark.parametrize("noise", NOISE)
def test_cli_neighbours(tmp_path, noise):
    _search(lambda pair, opts: check_cli(tmp_path, noise, pair, opts), 25 * FAST,
            pair=CLI_PAIRS, opts=CLI_OPTS)


# --------------------------------------------------------------------------- the slow search

@pytest.mark.slow
@pytest.mark.parametrize("noise", NOISE)
@pytest.mark.parametrize("kernel", KERNELS)
def test_slow_search_all_entry_points(tmp_path, kernel, noise):
    """The same properties on ten times as many pairs, with shrinking (--runslow)."""
    _search(lambda pair, opts: check_privgcm(kernel, noise, pair, opts), 30 * SLOW, slow=True,
            pair=GCM_PAIRS, opts=GCM_OPTS)
    if kernel == "exact":
        _search(lambda pair, opts: check_privgcm("spline", noise, pair, opts), 30 * SLOW,
                slow=True, pair=GCM_PAIRS, opts=GCM_OPTS)
    _search(lambda pair, opts: check_privcrt(kernel, noise, pair, opts), 30 * SLOW, slow=True,
            pair=CRT_PAIRS, opts=CRT_OPTS)
    _search(lambda pair, opts: check_privtot(kernel, noise, pair, opts), 20 * SLOW, slow=True,
            pair=TOT_PAIRS, opts=TOT_OPTS)
    if noise == "seeded":
        _search(lambda pair, opts: check_residual_products(kernel, pair, opts), 40 * SLOW,
                slow=True, pair=GCM_PAIRS, opts=GCM_OPTS)
        _search(lambda pair, opts: check_crt_statistics(kernel, pair, opts), 40 * SLOW,
                slow=True, pair=CRT_PAIRS, opts=CRT_OPTS)
    if kernel == "exact":
        _search(lambda pair, opts: check_private_kendall(noise, pair, opts), 40 * SLOW,
                slow=True, pair=KENDALL_PAIRS, opts=KENDALL_OPTS)
        _search(lambda pair, opts: check_cli(tmp_path, noise, pair, opts), 25 * SLOW,
                slow=True, pair=CLI_PAIRS, opts=CLI_OPTS)


# --------------------------------------------------------------------------- the issue's cases

def _issue_data(n=200, seed=0):
    rng = np.random.default_rng(seed)
    return rng.normal(size=n), rng.normal(size=n), rng.normal(size=(n, 1))


def _explicit_pair(x_, y_, z_, i, **new):
    """The pair (x, y, z) and the same data with row i of the named blocks replaced."""
    a = {"x": x_[:, None].copy(), "y": y_[:, None].copy(), "z": z_.copy()}
    b = {k: v.copy() for k, v in a.items()}
    for k, v in new.items():
        b[k][i] = v
    return nu.Pair(a, b, i, "explicit: " + ", ".join(f"{k}_{i} = {v!r}" for k, v in new.items()))


HUGE_Z = [("z = 1e308", {"z": 1e308}), ("z = -1.8e308", {"z": -1.7976931348623157e308}),
          ("z = 1e154", {"z": 1e154})]


@pytest.mark.parametrize("noise", NOISE)
@pytest.mark.parametrize("label,new", HUGE_Z, ids=[h[0] for h in HUGE_Z])
def test_issue_rff_one_huge_finite_z(label, new, noise):
    """Finding 1: with random features, one row's z = 1e308 made w.z overflow (NaN residuals)."""
    x, y, z = _issue_data()
    pair = _explicit_pair(x, y, z, 0, **new)
    kw = {"kernel_approximation": "rff", "feature_rng": None if NOISE[noise] is None else 5}
    _compare(f"privgcm[rff, {noise}]", lambda d: privci.privgcm(
        d["x"][:, 0], d["y"][:, 0], d["z"], epsilon=1.0, x_bound=4, y_bound=4,
        rng=NOISE[noise], regression="krr", **kw), pair, f"issue 12 finding 1, privgcm, {label}")
    # (epsilon 16: the spline rule resolves n = 200 from about 10.5 and refuses below)
    _compare_spline(f"privgcm[spline, {noise}]", lambda d: privci.privgcm(
        d["x"][:, 0], d["y"][:, 0], d["z"], epsilon=16.0, x_bound=4, y_bound=4,
        rng=NOISE[noise]), pair, f"privgcm, released spline fit, {label}")
    mx = privci.GaussianModelX(lambda zz: np.sin(zz[:, 0]), 1.0)
    _compare(f"privcrt[rff, {noise}]", lambda d: privci.privcrt(
        d["x"][:, 0], d["y"][:, 0], d["z"], epsilon=1.0, model_x=mx, y_bound=4,
        x_residual_bound=4, rng=NOISE[noise], **kw), pair, f"issue 12 finding 1, privcrt, {label}")


@pytest.mark.parametrize("at_bounds", [False, True], ids=["normal rows", "rows at the bounds"])
@pytest.mark.parametrize("label,new", HUGE_Z, ids=[h[0] for h in HUGE_Z])
def test_issue_rff_products_within_sensitivity(label, new, at_bounds):
    """Finding 1, un-noised: the products' L1 change (13.9 x the sensitivity in the review)."""
    x, y, z = _issue_data()
    if at_bounds:
        x, y = 4.0 * np.sign(x), 4.0 * np.sign(y)
    pair = _explicit_pair(x, y, z, 0, **new)

    def call(d):
        return privci.residual_products(d["x"][:, 0], d["y"][:, 0], d["z"], x_bound=4,
                                        y_bound=4, kernel_approximation="rff", feature_rng=5)

    a, b = _compare("residual_products[rff, sharp]", call, pair, f"issue 12 finding 1, {label}",
                    released=lambda rp: (rp.sensitivity,))
    ratio = nu.l1_ratio(a.result.products, b.result.products, a.result.sensitivity)
    _ratio_check("residual_products[rff, sharp]", ratio, pair, f"issue 12 finding 1, {label}",
                 "the L1 norm of the residual products")
    mx = privci.GaussianModelX(lambda zz: np.sin(zz[:, 0]), 1.0)
    a, b = _compare("crt_statistics[rff, sharp]", lambda d: privci.crt_statistics(
        d["x"][:, 0], d["y"][:, 0], d["z"], model_x=mx, y_bound=4, x_residual_bound=4, rng=2,
        kernel_approximation="rff", feature_rng=5), pair, f"issue 12 finding 1, {label}",
        released=lambda cs: (cs.sensitivity,))
    ratio = nu.linf_ratio(a.result.statistics, b.result.statistics, a.result.sensitivity)
    _ratio_check("crt_statistics[rff, sharp]", ratio, pair, f"issue 12 finding 1, {label}",
                 "a statistic T_j")


@pytest.mark.parametrize("noise", NOISE)
@pytest.mark.parametrize("kernel", KERNELS)
def test_issue_model_x_mean_overflow(kernel, noise):
    """Finding 3: a public mean exp(z) overflows for z_0 = 800 (against z_0 = 5)."""
    x, y, z = _issue_data()
    z[0, 0] = 5.0
    pair = _explicit_pair(x, y, z, 0, z=800.0)
    mx = privci.GaussianModelX(lambda zz: np.exp(zz[:, 0]), 1)
    kw = _kernel_kw(kernel, noise)
    _compare(f"privcrt[{kernel}, {noise}]", lambda d: privci.privcrt(
        d["x"][:, 0], d["y"][:, 0], d["z"], epsilon=1.0, model_x=mx, y_bound=4,
        x_residual_bound=4, rng=NOISE[noise], **kw), pair, "issue 12 finding 3, exp mean")
    kw = _kernel_kw(kernel, "seeded")
    a, b = _compare(f"crt_statistics[{kernel}, sharp]", lambda d: privci.crt_statistics(
        d["x"][:, 0], d["y"][:, 0], d["z"], model_x=mx, y_bound=4, x_residual_bound=4, rng=2,
        **kw), pair, "issue 12 finding 3, exp mean", released=lambda cs: (cs.sensitivity,))
    ratio = nu.linf_ratio(a.result.statistics, b.result.statistics, a.result.sensitivity)
    _ratio_check(f"crt_statistics[{kernel}, sharp]", ratio, pair, "issue 12 finding 3",
                 "a statistic T_j")


@pytest.mark.parametrize("noise", NOISE)
def test_issue_cholesky_fallback_warning(noise):
    """Finding 3: the Cholesky fallback warned only when one z duplicated another."""
    rng = np.random.default_rng(1)
    n = 12
    x, y = rng.normal(size=n), rng.normal(size=n)
    z = 3.0 * np.arange(n, dtype=np.float64)[:, None]      # distinct and far apart: K ~ I
    pair = _explicit_pair(x, y, z, 1, z=z[0, 0])            # row 1 duplicates row 0
    for lam in (1e-18, 1e-20):
        _compare(f"privgcm[exact, {noise}]", lambda d: privci.privgcm(
            d["x"][:, 0], d["y"][:, 0], d["z"], epsilon=1.0, x_bound=3, y_bound=3,
            ridge_lambda=lam, rng=NOISE[noise], regression="krr"), pair, f"Cholesky fallback, lambda {lam:g}")
        a, b = _compare("residual_products[exact, sharp]", lambda d: privci.residual_products(
            d["x"][:, 0], d["y"][:, 0], d["z"], x_bound=3, y_bound=3, ridge_lambda=lam),
            pair, f"Cholesky fallback, lambda {lam:g}", released=lambda rp: (rp.sensitivity,))


ALL_EQUAL = [(0.0, -0.0), (0.0, 5e-324), (-0.0, -1e308), (5e-324, 1.0), (1e308, -1e308),
             (1e308, 1.0), (-1e308, 1.7976931348623157e308), (1.0, 1e308)]


def _all_equal_pairs(n):
    """n rows all equal to ``base``; in the neighbour, row 0 (x, y and z) is ``new``."""
    for base, new in ALL_EQUAL:
        a = {"x": np.full((n, 1), base), "y": np.full((n, 1), base), "z": np.full((n, 1), base)}
        b = {k: v.copy() for k, v in a.items()}
        for v in b.values():
            v[0] = new
        yield nu.Pair(a, b, 0, f"n = {n}, all rows {base!r}, row 0 -> {new!r}")


@pytest.mark.parametrize("noise", NOISE)
def test_minimum_n_and_all_rows_equal(noise):
    """n = 2 (the minimum of PrivGCM, PrivCRT and the Kendall test), every row equal, one row
    replaced by an extreme, both kernels."""
    mx = privci.GaussianModelX(lambda zz: np.sin(zz[:, 0]), 1.0)
    for pair in _all_equal_pairs(2):
        for kernel in KERNELS:
            kw = _kernel_kw(kernel, noise)
            _compare(f"privgcm[{kernel}, {noise}]", lambda d: privci.privgcm(
                d["x"][:, 0], d["y"][:, 0], d["z"], epsilon=1.0, x_bound=1, y_bound=1,
                rng=NOISE[noise], regression="krr", **kw), pair, "minimum n")
            _compare(f"privcrt[{kernel}, {noise}]", lambda d: privci.privcrt(
                d["x"][:, 0], d["y"][:, 0], d["z"], epsilon=1.0, model_x=mx, y_bound=1,
                x_residual_bound=1, n_resamples=4, rng=NOISE[noise], **kw), pair, "minimum n")
        # the spline path's fail-safe is a function of its releases (on the hardened path it
        # differs between runs on the same data: the stop-52 dry run saw it fire on one
        # neighbour only, with the tightened windows of n = 2), so its warning is compared
        # with the releases fixed, as in check_privgcm
        _compare_spline(f"privgcm[spline, {noise}]", lambda d: privci.privgcm(
            d["x"][:, 0], d["y"][:, 0], d["z"], epsilon=spline_epsilon(2), x_bound=1,
            y_bound=1, rng=NOISE[noise]), pair, "minimum n")
        _compare(f"private_kendall[{noise}]", lambda d: private_kendall(
            d["x"][:, 0], d["y"][:, 0], np.zeros(2), epsilon=1.0, categorical_z=True,
            rng=NOISE[noise]), pair, "minimum n")


@pytest.mark.parametrize("noise", NOISE)
def test_privtot_minimum_n_and_all_rows_equal(noise):
    """n = 6 = 3 m, PrivToT's minimum with m = 2 subsets, every row equal."""
    for pair in _all_equal_pairs(6):
        for kernel in KERNELS:
            _compare(f"privtot[{kernel}, {noise}]", lambda d: privtot(
                d["x"][:, 0], d["y"][:, 0], d["z"], epsilon=1.0, n_subsets=2, alpha0=0.2,
                ridge_lambda=0.5, rng=NOISE[noise], **_kernel_kw(kernel, noise)), pair,
                "minimum n")


# --------------------------------------------------------------------------- OpenDP domain

def test_opendp_never_sees_a_non_finite_value():
    """The hardened path on the issue's NaN-producing neighbour: OpenDP gets finite values."""
    x, y, z = _issue_data()
    z[0, 0] = 1e308
    NONFINITE_TO_OPENDP.clear()
    with np.errstate(all="ignore"):
        privci.privgcm(x, y, z, epsilon=1.0, x_bound=4, y_bound=4, kernel_approximation="rff",
                       regression="krr")
        mx = privci.GaussianModelX(lambda zz: np.exp(zz[:, 0]), 1.0)
        with contextlib.suppress(Exception):
            privci.privcrt(x, y, z, epsilon=1.0, model_x=mx, y_bound=4, x_residual_bound=4,
                           kernel_approximation="rff")
    _assert_opendp_saw_finite_values("rff, z_0 = 1e308, hardened privgcm and privcrt")


# --------------------------------------------------------------------------- guarantees

SEEDED_WORDING = re.compile(
    r"simulation|secret.*(fresh|reuse|re-use)|(fresh|reuse|re-use).*secret",
    re.IGNORECASE | re.DOTALL)


def _seeded_results():
    x, y, z = _issue_data(60)
    mx = privci.GaussianModelX(lambda zz: np.sin(zz[:, 0]), 1.0)
    return {
        # (epsilon 50: the spline rule resolves n = 60 from about 36 and refuses below)
        "privgcm": privci.privgcm(x, y, z, epsilon=50, x_bound=4, y_bound=4, rng=3),
        "privcrt": privci.privcrt(x, y, z, epsilon=1, model_x=mx, y_bound=4,
                                  x_residual_bound=4, rng=3),
        "privtot": privtot(x, y, z, epsilon=1, n_subsets=2, ridge_lambda=0.5, rng=3),
        "private_kendall": private_kendall(x, y, np.zeros(60), epsilon=1, categorical_z=True,
                                           rng=3),
    }


@pytest.mark.parametrize("entry", ["privgcm", "privcrt", "privtot", "private_kendall"])
def test_seeded_guarantee_says_secret_seed_or_simulation_only(entry):
    """Lesser point: the seeded path is deterministic given the seed; the guarantee says so."""
    res = _seeded_results()[entry]
    assert res.privacy.hardened is False
    g = res.privacy.guarantee
    assert SEEDED_WORDING.search(g), (
        f"{entry}: the seeded path's guarantee must say that the seed must be secret, fresh and "
        f"never reused, or that the seeded path is for simulation only; it reads: {g!r}")


@pytest.mark.parametrize("command", ["privgcm", "privcrt"])
def test_cli_seed_help_says_secret_seed_or_simulation_only(command, capsys):
    with pytest.raises(SystemExit):
        cli.main([command, "--help"])
    text = " ".join(capsys.readouterr().out.split())
    m = re.search(r"--seed SEED (.*?)(?= --[a-z]|$)", text)
    assert m, text
    assert SEEDED_WORDING.search(m.group(1)), f"--seed help reads: {m.group(1)!r}"


def test_cv_guarantee_is_conditional():
    """Finding 4: with ridge_lambda="cv" the guarantee line must not claim plain epsilon-DP."""
    x, y, z = _issue_data(60)
    for rng in (None, 3):
        g = privci.privgcm(x, y, z, epsilon=1, x_bound=4, y_bound=4, ridge_lambda="cv", regression="krr",
                           rng=rng).privacy.guarantee
        mentions_tuning = re.search(r"cross-validat|tun|\bcv\b|chosen|selected", g, re.I)
        qualified = re.search(r"\bnot\b|\bno\b|only|conditional|given the|if |unless|except",
                              g, re.I)
        assert mentions_tuning and qualified, (
            "with ridge_lambda='cv' the guarantee must say that it does not cover the tuning "
            f"(or holds only conditionally on it); it reads: {g!r}")


def test_residual_products_refuses_a_tuned_lambda():
    """Finding 4 for the transformation: ``residual_products`` documents a fixed
    ``ridge_lambda`` and returns a *certified* sensitivity, but accepted "cv" and returned
    the grid minimum's constant, which a single replaced row can exceed (the issue's
    example: lambda flips from 20 to 5).  It has no caveat field to say so: refuse."""
    x, y, z = _issue_data(40)
    with pytest.raises(ValueError, match="ridge_lambda"):
        privci.residual_products(x, y, z, x_bound=4, y_bound=4, ridge_lambda="cv")


# --------------------------------------------------------------------------- CLI messages

def _csv_with_cell(path, bad_rows, cell, n=20):
    rng = np.random.default_rng(4)
    cols = {"age": rng.normal(size=n).round(3).astype(object),
            "status": rng.normal(size=n).round(3).astype(object),
            "bmi": rng.normal(size=n).round(3).astype(object)}
    for r in bad_rows:
        cols["status"][r] = cell
    with open(path, "w") as fh:
        fh.write("age,status,bmi\n")
        for k in range(n):
            fh.write(",".join(str(cols[c][k]) for c in ("age", "status", "bmi")) + "\n")


def _cli_failure(args):
    """The message of a failing command line call (SystemExit or exit code and stderr)."""
    out = nu.run_recorded(lambda: run_cli(args), released=lambda r: r)
    assert out.kind == "error", f"the command line accepted a bad cell: {out.describe()}"
    assert not out.warnings, out.warnings
    return re.sub(r"^exit code \d+: ", "", out.value[1])


# (a decimal beyond the float range, "1e999", is no longer a bad cell: it is read as the
# largest float, see test_cli_overflowing_cell_reads_as_the_largest_float)
BAD_CELLS = [("HIV+", r"numer|number"), ("nan", r"nan|non-finite|not finite|missing"),
             ("NA", r"numer|number|missing|nan"), ("inf", r"inf|non-finite|not finite")]


@pytest.mark.parametrize("cell,kind", BAD_CELLS, ids=[c for c, _ in BAD_CELLS])
def test_cli_error_names_column_and_kind_never_value_or_count(tmp_path, cell, kind):
    """Finding 3: the CLI printed private cells ('HIV+') and counts of non-finite cells."""
    path = tmp_path / "clinic.csv"
    args = ["privgcm", str(path), "--x", "age", "--y", "status", "--z", "bmi",
            "--epsilon", "1", "--x-bound", "3", "--y-bound", "3", "--seed", "1"]
    messages = []
    for bad_rows in ([2], [7], [2, 7, 11]):
        _csv_with_cell(path, bad_rows, cell)
        messages.append(_cli_failure(args).replace(str(path), "<file>"))
    msg = messages[0]
    assert messages[1] == msg and messages[2] == msg, (
        "the message depends on where or how often the bad cell occurs:\n" + "\n".join(messages))
    assert "status" in msg, f"the message does not name the column: {msg!r}"
    assert re.search(kind, msg, re.IGNORECASE), f"the message does not say what is wrong: {msg!r}"
    if cell.lower() not in ("nan", "inf"):   # 'NaN' / 'inf' may name the kind of problem
        assert cell.lower() not in msg.lower(), f"the message echoes the cell: {msg!r}"
    assert not re.search(r"\d", msg), \
        f"the message contains a number (a count, a row or a value): {msg!r}"


@pytest.mark.parametrize("noise", NOISE)
@pytest.mark.parametrize("cell", ["1e999", "-1e400", "2e308"])
def test_cli_overflowing_cell_reads_as_the_largest_float(tmp_path, cell, noise):
    """Issue 21, finding 6: a cell 1e400 was read as inf and the command line exited with
    "column ... has a missing (NaN) or infinite value", so one row of otherwise valid data
    decided whether it failed.  The decimal is now clamped to +-largest float at parse
    time: the neighbour with that cell and the one with an ordinary cell both succeed,
    with the same warnings (none)."""
    path = tmp_path / "clinic.csv"
    args = ["privgcm", str(path), "--x", "age", "--y", "status", "--z", "bmi",
            "--epsilon", "1", "--x-bound", "3", "--y-bound", "3"]
    if NOISE[noise] is not None:
        args += ["--seed", str(NOISE[noise])]
    for rows in ([2], [7], [2, 7, 11]):
        pair = nu.Pair({"rows": np.zeros((20, 1))}, {"rows": np.zeros((20, 1))}, rows[0],
                       f"status = {cell} at rows {rows} against 0.5")

        def call(d, rows=rows):
            _csv_with_cell(path, rows, cell if d is pair.a else "0.5")
            return run_cli(args)

        _compare(f"cli privgcm[{noise}]", call, pair, f"cli, cell {cell}",
                 released=lambda r: r)


def test_cli_formula_mean_overflow_is_not_visible(tmp_path):
    """A public x-mean formula that overflows on one extreme row (cf. finding 3)."""
    x, y, z = _issue_data(40)
    zz = np.column_stack([z[:, 0], np.zeros(40)])
    pair = nu.Pair({"x": x[:, None], "y": y[:, None], "z": zz},
                   {"x": x[:, None], "y": y[:, None], "z": zz.copy()}, 0, "z1_0 = 1e10")
    pair.b["z"][0, 0] = 1e10
    for noise in NOISE:
        check_cli(tmp_path, noise, pair, {"command": "privcrt", "formula": "1e300*z1",
                                          "center_epsilon": None})


# --------------------------------------------------------------------------- threads

def _privci_globals_holding(*arrays):
    """Names of privci module globals that hold (or view) one of ``arrays``."""
    found = []
    for name, mod in list(sys.modules.items()):
        if not (name == "privci" or name.startswith("privci.")) or mod is None:
            continue
        for attr, val in list(vars(mod).items()):
            if isinstance(val, np.ndarray) and any(
                    np.shares_memory(val, a) or (val.size == a.size and np.array_equal(
                        val.ravel(), a.ravel())) for a in arrays):
                found.append(f"{name}.{attr}")
    return found


def test_concurrent_releases_use_their_own_data():
    """Finding 2, deterministically: two threads release at once, each on its own data.

    Both threads are held inside OpenDP's sampler until the other has reached
    it too, so both releases are in flight at the same time; at that moment no
    privci module global may hold either caller's data (the old
    ``_POOL_INPUT``), and afterwards each result must be its own data plus
    noise of scale 1 (|noise| > 1000 has probability e^-1000).
    """
    import opendp.core

    data = {"zeros": np.zeros(50), "millions": np.full(50, 1e6)}
    barrier = threading.Barrier(2, timeout=10)
    leaked, results, errors = [], {}, []
    waited = set()
    inner = opendp.core.measurement_invoke     # the module fixture's spy (or OpenDP's own)

    def invoke(this, arg):
        me = threading.current_thread().name
        if me in data and me not in waited:
            waited.add(me)
            try:
                barrier.wait()
            except threading.BrokenBarrierError:
                pass   # releases serialised by a lock: no overlap, nothing to race
            leaked.extend(_privci_globals_holding(*data.values()))
        return inner(this, arg)

    def release(name):
        try:
            results[name] = privci.mechanisms.laplace_mechanism(data[name], 1.0, 1.0)[0]
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(f"{name}: {type(exc).__name__}: {exc}")

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(opendp.core, "measurement_invoke", invoke)
        threads = [threading.Thread(target=release, args=(k,), name=k) for k in data]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
    assert not errors, errors
    assert not leaked, f"a module global holds a caller's data during a release: {leaked}"
    for name, values in data.items():
        assert np.max(np.abs(results[name] - values)) < 1000, \
            f"the {name} caller got back noise on someone else's data"


# --------------------------------------------------------------------------- PrivToT regressors

def _touchy_regressor(mode):
    """A public scikit-learn regressor that warns (UserWarning) or raises on extreme z."""
    from sklearn.base import BaseEstimator, RegressorMixin

    class TouchyRegressor(RegressorMixin, BaseEstimator):
        def __init__(self, mode="warn"):
            self.mode = mode

        def fit(self, z, u):
            if np.max(np.abs(z)) > 1e100:
                if self.mode == "warn":
                    warnings.warn("the design looks ill-conditioned", UserWarning)
                else:
                    raise ValueError("the design is too large to fit")
            self.level_ = float(np.mean(np.clip(u, -1e6, 1e6)))
            return self

        def predict(self, z):
            return np.full(np.shape(z)[0], self.level_)

    return TouchyRegressor(mode)


@pytest.mark.parametrize("noise", NOISE)
@pytest.mark.parametrize("mode", ["warn", "raise"])
def test_privtot_subset_warnings_and_errors_stay_inside(mode, noise):
    """Lesser point: PrivToT silenced only RuntimeWarnings inside a subset; a user's
    regressor can warn (or fail) on one neighbour's subset only."""
    x, y, z = _issue_data(30)
    pair = _explicit_pair(x, y, z, 4, z=1e200)
    reg = _touchy_regressor(mode)
    _compare(f"privtot[regressor, {noise}]", lambda d: privtot(
        d["x"][:, 0], d["y"][:, 0], d["z"], epsilon=1.0, n_subsets=3, alpha0=0.2,
        regressor=reg, rng=NOISE[noise]), pair, f"privtot with a regressor that {mode}s")


def test_kendall_statistic_extreme_pairs_warn_the_same():
    """Found by the slow search: x_i - x_j overflows for x_i = 1e308, x_j = -1e308, so the
    un-noised Kendall transformation warned on one neighbour only (its signs were right)."""
    labels = np.zeros(2)
    pair = nu.Pair({"x": np.array([[-0.74], [-1e308]]), "y": np.array([[-0.80], [1.84]])},
                   {"x": np.array([[1e308], [-1e308]]), "y": np.array([[1e308], [1.84]])}, 0,
                   "x_0 = 1e308 against x_1 = -1e308")
    a, b = _compare("kendall_statistic (strata fixed)", lambda d: kendall_statistic(
        d["x"][:, 0], d["y"][:, 0], labels), pair, "kendall_statistic, opposite extremes")
    (ta, sens), (tb, _) = a.value, b.value
    _ratio_check("kendall_statistic (strata fixed)", abs(ta - tb) / sens, pair,
                 "kendall_statistic", "the conditional Kendall statistic")


# --------------------------------------------------------------------------- stop 45

def _checked_linear_neighbours(d, block, spots, news):
    """Hand-made neighbours of the checked linear fit (row 0 moved between ``spots`` and
    ``news`` in every column, x and y flipped from +2 to -2) through privgcm: both raise
    nothing, release the same values with the same public parameters, every release's
    un-noised input moves by at most its stated sensitivity; returns the largest ratio of
    the fit's releases (the Gram matrices and cross-products)."""
    g = np.random.default_rng(45 + d)
    n = 80
    x_, y_ = np.clip(g.normal(size=n), -2, 2), np.clip(g.normal(size=n), -2, 2)
    z_ = g.normal(size=(n, d))
    des = privci._spline.choose_design(n, d, 1, 1, 1e4, model="linear")
    assert des.checked and privci._spline._blocks(des.key)[-1][0] == block

    def call(dd):
        return privci.privgcm(dd["x"][:, 0], dd["y"][:, 0], dd["z"], epsilon=1e4,
                              x_bound=2, y_bound=2, x_center=0.0, y_center=0.0,
                              z_center=0.0, z_scale=1.0, assume="linear", rng=11)

    best = 0.0
    for old in spots:
        for new in news:
            a = {"x": x_[:, None].copy(), "y": y_[:, None].copy(), "z": z_.copy()}
            a["x"][0], a["y"][0], a["z"][0] = 2.0, 2.0, old
            b = {k: v.copy() for k, v in a.items()}
            b["y"][0], b["z"][0] = -2.0, new
            b["z"][0, 0] = -new if np.isfinite(-new) else new
            pair = nu.Pair(a, b, 0, f"checked linear fit ({block}), d = {d}: z_0 = {old!r} "
                           f"-> {new!r}")
            changes, problems, log = nu.release_changes(call, pair)
            assert not problems, f"{pair!r}: {problems}"
            assert len(changes) >= 5
            for rel, ratio in changes:
                assert nu.within(ratio), f"{pair!r}: {rel.kind} moved {ratio!r} of its bound"
            best = max(best, max(r for rel, r in changes[:4]))
    return best


@pytest.mark.parametrize("d", [2, 3])
def test_checked_linear_fit_quadratic_block_neighbours(d, monkeypatch):
    """The spline check's quadratic interaction block (stop 45), on hand-made neighbours:
    row 0 moved between the box's corners, its edges, the centre, beyond the box and to
    +-1.8e308 (:func:`_checked_linear_neighbours`; the polynomial check is switched off so
    that the rule takes this one).  The fit's releases (the Gram matrices: their changes
    are the largest, 0.76 measured) reach at least 0.6 of the bound (a constant stated
    1.7 times too large would be seen)."""
    monkeypatch.setattr(privci._spline, "POLY_CHECK_MAX_D", None)
    # the rule's resolution of every interaction contrast (stop 56 for "linear") takes this
    # block at three columns only from n epsilon of about 5e7: the block's releases are the
    # subject here, not where the rule takes it
    monkeypatch.setattr(privci._spline, "QUAD_RULE_ALL", False)
    privci._spline._choose_design.cache_clear()
    try:
        best = _checked_linear_neighbours(
            d, "mquad", [1.5, -1.5, 0.75, 0.0, 4.0, -4.0, 1.7976931348623157e308,
                         -1.7976931348623157e308], (1.5, -1.5, 0.0, 4.0, 1e308))
    finally:
        privci._spline._choose_design.cache_clear()
    assert best >= 0.6, best


# --------------------------------------------------------------------------- stop 46

@pytest.mark.parametrize("d", [2, 3])
def test_checked_linear_fit_polynomial_check_neighbours(d):
    """The linear fit's polynomial check (stop 46: the signed block on [-2, 2]^d and the
    cubic Bernstein tensor of clip(t_j / POLY_BOX, -1, 1), s = d + 2 blocks), which the
    rule takes at n = 80, epsilon 10^4: row 0 moved between the signed block's corners
    (+-2, its L1 bound 1 + d), the tensor's box edge, the centre, beyond the box (left out)
    and +-1.8e308; every release within its stated sensitivity, and the fit's releases
    reach at least 0.55 of it (0.6 measured at two and three columns: the signed block's
    constant never changes sign, so the bound's corner-to-corner term is not attained;
    a constant stated 1.8 times too large would be seen)."""
    box = privci._spline.POLY_BOX
    best = _checked_linear_neighbours(
        d, "mcub", [2.0, -2.0, box, -box, 0.0, 4.0, 1.7976931348623157e308,
                    -1.7976931348623157e308], (2.0, -2.0, box, 0.0, 4.0, 1e308))
    assert best >= 0.55, best
