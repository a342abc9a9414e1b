"""Public-number warnings and the z_center record of privgcm (issue 21, findings 4 and 7).

Finding 4: with a public ``z_scale`` and ``z_center="auto"`` the centre is
released on z / z_scale; the record must state it in z's own units, so that
passing it back as a public ``z_center`` reproduces the centring.

Finding 7: :class:`privci.bounds.UnreliableQuantileWarning` depends only on
public numbers (n, epsilon and what is released), but ``quiet()`` inside the
entry points swallowed it.  It must reach the user, be stated among the
record's caveats, and be the same on neighbouring data sets.
"""

import importlib
import warnings

import numpy as np
import pytest

import privci
from privci import bounds
from neighbours_util import assert_indistinguishable, run_recorded

UQW = bounds.UnreliableQuantileWarning
gcm_module = importlib.import_module("privci.gcm")   # privci.gcm is also the function gcm


def _recorded(fn):
    """fn()'s result and the (category, message) of every warning it let out."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = fn()
    return out, caught


def _unreliable(caught):
    return [w for w in caught if issubclass(w.category, UQW)]


def _design(n, seed=1, z_loc=0.0, z_sd=1.0):
    rng = np.random.default_rng(seed)
    z = rng.normal(z_loc, z_sd, size=n)
    s = (z - z_loc) / z_sd
    return np.sin(s) + rng.normal(size=n), np.cos(s) + rng.normal(size=n), z


# --------------------------------------------------------------------------- finding 4

class _Captured(Exception):
    pass


def _z_handed_to_the_spline(monkeypatch, *args, **kw):
    """The z (centred and scaled) that privgcm hands to the spline fit."""
    seen = {}

    def spy(par, plan, inp):
        seen["z"] = np.array(inp.za, copy=True)
        raise _Captured

    monkeypatch.setattr(gcm_module, "_spline_mechanism", spy)
    with pytest.raises(_Captured):
        privci.privgcm(*args, **kw)
    monkeypatch.undo()
    return seen["z"]


def test_z_center_record_is_in_z_units_with_a_public_z_scale(monkeypatch):
    """z ~ N(100, 10^2) with z_scale=10: the record said 9.98 (the centre of z / 10).  Two
    columns (one per scale) under assume='additive' (the full fit takes one column);
    epsilon 3."""
    rng = np.random.default_rng(3)
    n = 4000
    z = rng.normal([100.0, -3.0], [10.0, 0.01], size=(n, 2))
    x = np.sin((z[:, 0] - 100) / 10) + rng.normal(size=n)
    y = np.cos((z[:, 0] - 100) / 10) + rng.normal(size=n)
    kw = dict(epsilon=3.0, x_bound=4, y_bound=4, z_scale=[10.0, 0.01], rng=4,
              assume="additive")
    res = privci.privgcm(x, y, z, **kw)
    zc = res.privacy.bounds["z_center"]
    assert abs(zc[0] - 100) < 1 and abs(zc[1] + 3) < 0.005, zc
    assert "z_scale" not in res.privacy.bounds      # public: not a released value
    # passing the record back as a public centre reproduces the centring (up to rounding)
    auto_z = _z_handed_to_the_spline(monkeypatch, x, y, z, **kw)
    reused = _z_handed_to_the_spline(monkeypatch, x, y, z, **{**kw, "z_center": zc})
    np.testing.assert_allclose(reused, auto_z, rtol=0, atol=1e-9)
    assert abs(auto_z.mean(axis=0)).max() < 0.1     # centred: |mean| << 1 on a unit scale


def test_z_center_record_unchanged_when_z_scale_is_released_too(monkeypatch):
    """Both 'auto': the centre is released on z itself (before the scale), already in z's
    units; reusing both values of the record reproduces the centring and scaling."""
    x, y, z = _design(4000, seed=6, z_loc=100.0, z_sd=10.0)
    res = privci.privgcm(x, y, z, epsilon=2.0, x_bound=4, y_bound=4, rng=5, tighten=False)
    zc, zs = res.privacy.bounds["z_center"], res.privacy.bounds["z_scale"]
    assert abs(zc[0] - 100) < 1 and 0.8 < zs[0] / 10 < 1.25
    auto_z = _z_handed_to_the_spline(monkeypatch, x, y, z, epsilon=2.0, x_bound=4, y_bound=4,
                                     rng=5, tighten=False)
    reused = _z_handed_to_the_spline(monkeypatch, x, y, z, epsilon=2.0, x_bound=4, y_bound=4,
                                     rng=5, z_center=zc, z_scale=zs, tighten=False)
    np.testing.assert_allclose(reused, auto_z, rtol=0, atol=1e-9)


# --------------------------------------------------------------------------- finding 7

def test_default_auto_call_warns_at_small_n_epsilon():
    """The issue's reproduction: all-'auto' at n = 2000, epsilon = 1 released its values
    silently (x_bound = 7.2e-5 and z_scale = 6.9 were seen).  That call is now refused
    before anything is released (the spline fit needs epsilon about 1.2 there), so the
    warning is checked at n = 3000, epsilon = 1: the same split of bounds_epsilon, every
    n x epsilon per quantile still below 60."""
    x, y, z = _design(2000)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(privci.UnresolvableDesignError, match="nothing was charged"):
            privci.privgcm(x, y, z, epsilon=1.0, x_bound="auto", y_bound="auto",
                           x_center="auto", y_center="auto", rng=3)
    assert not _unreliable(caught)          # refused before any release
    x, y, z = _design(3000)
    with pytest.warns(UQW, match=r"privgcm: n x epsilon per quantile is below 60") as rec:
        res = privci.privgcm(x, y, z, epsilon=1.0, x_bound="auto", y_bound="auto",
                             x_center="auto", y_center="auto", rng=3)
    msgs = [str(w.message) for w in rec if issubclass(w.category, UQW)]
    assert len(msgs) == 1, msgs     # one warning naming every unreliable release
    for name in ("z_center", "z_scale", "x_bound", "y_bound"):
        assert name in msgs[0]
    # it points at the caller, not into the package
    assert all(w.filename == __file__ for w in rec if issubclass(w.category, UQW))
    caveats = [c for c in res.privacy.caveats if "n x epsilon" in c]
    # 0.1 of epsilon, shared by 2 z items and 4 x/y items: 1/60 per quantile
    assert any(c.startswith("the released z_scale used epsilon 0.0167 per quantile on 1500 "
                            "paired differences: n x epsilon = 25 is below 60") for c in caveats)
    assert any(c.startswith("the released z_center used epsilon 0.0167 per quantile on 3000 "
                            "rows: n x epsilon = 50 is below 60") for c in caveats)
    assert any("x_center/y_center/x_bound/y_bound used epsilon 0.0167" in c for c in caveats)
    assert all("see privci.bounds" in c for c in caveats)
    text = repr(res)
    assert "caveat: the released z_scale used epsilon" in text


def test_small_n_krr_path_warns_too():
    """n = 300 (the issue saw y_bound = 8.7e6): the KRR path releases through the same code."""
    x, y, z = _design(300, seed=2)
    with pytest.warns(UQW, match="x_bound"):
        res = privci.privgcm(x, y, z, epsilon=1.0, x_bound="auto", y_bound="auto",
                             regression="krr", rng=1)
    assert any("x_bound/y_bound used epsilon" in c for c in res.privacy.caveats)


def test_no_warning_at_large_n_epsilon():
    x, y, z = _design(5000, seed=4)
    res, caught = _recorded(lambda: privci.privgcm(
        x, y, z, epsilon=4.0, x_bound="auto", y_bound="auto", x_center="auto",
        y_center="auto", rng=2))
    assert not _unreliable(caught), [str(w.message) for w in caught]
    assert not any("n x epsilon" in c for c in res.privacy.caveats)
    # no 'auto' at all: nothing released, nothing to warn about (small n: at n = 300 and
    # epsilon 8 the spline fit answers, and released quantiles would have n x epsilon = 40
    # each with the default 0.1 of epsilon over six of them)
    xs, ys, zs = _design(300, seed=4)
    res, caught = _recorded(lambda: privci.privgcm(xs, ys, zs, epsilon=8.0, x_bound=4,
                                                   y_bound=4, z_center=0.0, z_scale=1.0,
                                                   rng=2))
    assert not _unreliable(caught)
    assert not any("n x epsilon" in c for c in res.privacy.caveats)


@pytest.mark.parametrize("bounds_epsilon, warns", [(0.0999, True), (0.1001, False)])
def test_warning_is_exactly_the_public_threshold(bounds_epsilon, warns):
    """Only z_center released (public z_scale, bounds): n x epsilon = 600 x bounds_epsilon
    against 60, whatever the data (epsilon 4: the spline fit at n = 600 needs about 3.2 for
    the test, so privgcm answers on both sides of the threshold)."""
    x, y, z = _design(600, seed=7)
    _, caught = _recorded(lambda: privci.privgcm(x, y, z, epsilon=4.0, x_bound=4, y_bound=4,
                                                 z_scale=1.0, bounds_epsilon=bounds_epsilon,
                                                 rng=1, tighten=False))
    assert bool(_unreliable(caught)) is warns


def test_privcrt_warns_and_states_it():
    rng = np.random.default_rng(5)
    mx = privci.GaussianModelX(lambda zz: np.sin(zz[:, 0]), 1.0)

    def run(n):
        z = rng.normal(size=n)
        x = np.sin(z) + rng.normal(size=n)
        y = rng.normal(size=n)
        return _recorded(lambda: privci.privcrt(x, y, z, epsilon=1.0, model_x=mx,
                                                y_bound="auto", x_residual_bound="auto",
                                                y_center="auto", rng=1))

    res, caught = run(300)
    w = _unreliable(caught)
    assert len(w) == 1 and str(w[0].message).startswith("privcrt: n x epsilon")
    assert w[0].filename == __file__
    assert any(c.startswith("the released y_center/x_residual_bound/y_bound used epsilon 0.0333 "
                            "per quantile on 300 rows: n x epsilon = 10 is below 60")
               for c in res.privacy.caveats)
    assert "caveat: the released y_center/x_residual_bound/y_bound" in repr(res)
    res, caught = run(3000)
    assert not _unreliable(caught)
    assert not any("n x epsilon" in c for c in res.privacy.caveats)


# --------------------------------------------------------------------------- neighbours

_EXTREME_ROWS = (1e308, -1.7976931348623157e308, 1e154, 5e-324, 800.0, 0.0)


@pytest.mark.parametrize("extreme", _EXTREME_ROWS)
@pytest.mark.parametrize("entry", ["privgcm", "privgcm-public-scale", "privcrt"])
def test_neighbours_give_the_same_warnings(entry, extreme):
    """One row replaced by an extreme of float64 (in x, y and z): the same warnings, and
    the unreliable-quantile warning is among them (the comparison is not vacuous).

    privgcm at n = 300 answers from epsilon about 7 (the spline fit needs 6.3 for the test):
    it runs at epsilon 8, where every released quantile still has n x epsilon below 60; at
    epsilon 1 it refuses, and the refusal (before anything is released) is the same on both
    neighbours, with no warning."""
    n = 300
    rng = np.random.default_rng(11)
    a = {k: rng.normal(size=n) for k in "xyz"}
    b = {k: v.copy() for k, v in a.items()}
    for v in b.values():
        v[17] = extreme
    mx = privci.GaussianModelX(lambda zz: np.sin(np.clip(zz[:, 0], -10, 10)), 1.0)

    def call(d, epsilon=8.0):
        if entry == "privcrt":
            return lambda: privci.privcrt(d["x"], d["y"], d["z"], epsilon=1.0, model_x=mx,
                                          y_bound="auto", x_residual_bound="auto",
                                          y_center="auto", rng=3)
        extra = {"z_scale": 2.0} if entry == "privgcm-public-scale" else {}
        return lambda: privci.privgcm(d["x"], d["y"], d["z"], epsilon=epsilon, x_bound="auto",
                                      y_bound="auto", x_center="auto", y_center="auto",
                                      rng=3, **extra)

    if entry != "privcrt":
        ra, rb = run_recorded(call(a, 1.0)), run_recorded(call(b, 1.0))
        assert ra.kind == rb.kind == "error", (ra.describe(), rb.describe())
        assert ra.value[0] == "UnresolvableDesignError", ra.describe()
        assert_indistinguishable(ra, rb, context=f"{entry} refused, row 17 -> {extreme!r}")
        assert not ra.warnings, ra.warnings
    ra, rb = run_recorded(call(a)), run_recorded(call(b))
    assert ra.kind == rb.kind == "ok", (ra.describe(), rb.describe())
    assert_indistinguishable(ra, rb, context=f"{entry}, row 17 -> {extreme!r}")
    assert any(c == "UnreliableQuantileWarning" for c, _ in ra.warnings), ra.warnings
    # the record's caveats about reliability are public too
    ca = [c for c in ra.result.privacy.caveats if "n x epsilon" in c]
    cb = [c for c in rb.result.privacy.caveats if "n x epsilon" in c]
    assert ca and ca == cb


def test_standalone_bounds_still_warn():
    """The stand-alone functions run outside quiet() and keep their own warning."""
    x = np.random.default_rng(0).normal(size=100)
    with pytest.warns(UQW, match="n x epsilon per quantile"):
        bounds.private_bounds(x, epsilon=0.1, rng=1)
    with pytest.warns(UQW):
        bounds.private_scale(x, epsilon=0.1, rng=1)
