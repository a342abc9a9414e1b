"""The planner against privgcm (issue 34, item 3): a reduced run of
``vignettes/plan_accuracy.py`` that can fail, and the planner's refusal to give a number for
a case it does not model (``regular=False``)."""

import importlib.util
import math
import os
import warnings

import pytest

from privci.plan import plan

VIG = os.path.join(os.path.dirname(__file__), "..", "vignettes")


def _load(name):
    """Import a vignette module; the vignettes set NUMBA_NUM_THREADS=1 (and BLAS threads)
    in os.environ for their own runs, which must not leak into this process: a numba
    compile after such a change fails ("Cannot set NUMBA_NUM_THREADS to a different
    value once the threads have been launched"; the stop-40 CI dry run, test_r_wrapper)."""
    saved = dict(os.environ)
    try:
        spec = importlib.util.spec_from_file_location(name, os.path.join(VIG, name + ".py"))
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
    finally:
        os.environ.clear()
        os.environ.update(saved)
    return mod


# three cells where the power is neither 0 nor 1, on seeds the grid runs did not use: one
# column with public parameters and with privgcm's default released z parameters, both
# tightened by privgcm's default and modelled by the planner's tighten="auto" (cells of
# stop 52's mid-power grid, `plan_accuracy.py --mid`, where the planner held; on 12 of its
# 38 cells it over-predicts by 0.10 to 0.17: vignettes/README.md, "Stop 52"), two
# columns with assume="additive", and since stop 53 two cells of skewed residuals, the
# planner told their skewness (`residual_skewness`, as `plan_accuracy.py` does): the
# exponential noise of stop 52's grid, where the normal model said 0.613 against 0.49
# measured, and a held-out left-skewed design (skewness -2; normal model 0.543 against
# 0.373 of 150)
CELLS = [("readme", 3000, 1.0, "public"), ("hetero", 1800, 1.5, "zauto"),
         ("additive2", 10_000, 1.0, "public"), ("skewed", 1800, 2.0, "public"),
         ("skew_negative", 2500, 1.25, "zauto")]
REPS = 300
Z = 2.6          # one-sided normal quantile: P(Z > 2.6) = 0.0047


def test_planner_within_tenth_of_privgcm():
    """|predicted - measured| <= 0.10 + Z sd on every cell, sd the binomial sd of the
    measured rate at the power within 0.10 of the prediction nearest to 1/2.  If the
    planner is within 0.10 of the true power on every cell, the test fails by chance with
    probability below 5 x 0.0047 = 0.024 (the seeds are fixed, so it is repeatable)."""
    pa = _load("plan_accuracy")
    bad = []
    for i, (cls, n, eps, params) in enumerate(CELLS):
        facts = pa.design_facts(cls, params)
        pred, ok, _ = pa.predict(cls, n, eps, params, facts)
        assert ok
        rej, _, refused = pa.measure(cls, n, eps, params, facts, REPS, 9_000_000 + 1000 * i)
        assert refused == 0
        meas = rej / REPS
        p = min(max(0.5, pred - 0.10), pred + 0.10)
        tol = 0.10 + Z * math.sqrt(p * (1.0 - p) / REPS)
        print(f"{cls} n={n} eps={eps} {params}: predicted {pred:.3f}, measured {meas:.3f}, "
              f"tolerance {tol:.3f}")
        if abs(pred - meas) > tol:
            bad.append((cls, n, eps, params, round(pred, 3), meas, round(tol, 3)))
    assert not bad, bad


def test_quick_grid_runs(tmp_path):
    pa = _load("plan_accuracy")
    out = tmp_path / "pa.csv"
    rows = pa.main(["--quick", "--reps", "3", "--seed", "4", "--out", str(out),
                    "--no-progress"])
    assert len(rows) == 3 and out.exists()
    assert all(0.0 <= r["predicted"] <= 1.0 and 0.0 <= r["measured"] <= 1.0 for r in rows)


def test_not_regular_is_not_modelled():
    """regular=False: no number (nan), a warning, the regular case's number in details,
    and no solved n or epsilon."""
    kw = dict(effect=0.8, x_bound=3.5, y_bound=4.5)
    with pytest.warns(UserWarning, match="not modelled"):
        p = plan("privgcm", n=2000, epsilon=2.0, regular=False, **kw)
    assert math.isnan(p.power) and p.details["modelled"] is False
    assert "NOT MODELLED" in repr(p)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        q = plan("privgcm", n=2000, epsilon=2.0, **kw)
    assert q.details["modelled"] is True
    assert p.details["regular_case_power"] == pytest.approx(q.power)
    with pytest.raises(ValueError, match="regular=False"):
        plan("privgcm", epsilon=2.0, power=0.8, regular=False, **kw)
    with pytest.raises(TypeError, match="`regular` must be True or False"):
        plan("privgcm", n=2000, epsilon=2.0, regular="no", **kw)


def test_emulation_repeatable():
    """The emulated releases use common random numbers: the same call, the same power."""
    kw = dict(n=2000, epsilon=2.0, effect=0.8, x_bound=3.5, y_bound=4.5)
    a = plan("privgcm", **kw)
    assert 0.0 < a.power <= 1.0 and plan("privgcm", **kw).power == a.power


def test_a_stated_model_clipped_by_its_window_is_not_modelled():
    """A stated model whose regression reaches its window (``ranges`` at least
    ``CLIP_RANGE``): the clip bends a linear or additive regression out of the model, the
    check's fail-safes that follow are not emulated, so no number (nan, a warning, the
    unclipped case's number in details) and no solved n or epsilon.  A function of one
    column stays one through the clip: the full fit and one-column additive are modelled.
    Stop 48 (plan_accuracy.py, seed 48, released windows): linear2 predicted 0.969
    against 0.75 at n = 10^5, epsilon 5, 0.25 of true-linear data failing safe."""
    from privci import plan as P
    kw = dict(effect=0.06, effect_sd=0.74, x_bound=1.92, y_bound=1.93, z_columns=2,
              auto="all")
    with pytest.warns(UserWarning, match="window's edge"):
        p = plan("privgcm", n=10_000, epsilon=20.0, assume="linear", ranges=(1.0, 1.0), **kw)
    assert math.isnan(p.power) and p.details["modelled"] is False and p.details["clipped"]
    assert "the window clips the stated model" in repr(p)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        q = plan("privgcm", n=10_000, epsilon=20.0, assume="linear",
                 ranges=(P.CLIP_RANGE - 0.05, 0.5), **kw)
        full = plan("privgcm", n=10_000, epsilon=20.0, ranges=1.0,
                    **dict(kw, z_columns=1))
        one = plan("privgcm", n=10_000, epsilon=20.0, assume="additive", ranges=1.0,
                   **dict(kw, z_columns=1))
    assert q.details["modelled"] and not q.details["clipped"] and 0.0 <= q.power <= 1.0
    assert full.details["modelled"] and one.details["modelled"]
    assert 0.0 <= p.details["regular_case_power"] <= 1.0
    with pytest.warns(UserWarning, match="window's edge"):
        a = plan("privgcm", n=10_000, epsilon=5.0, assume="additive", ranges=(0.5, 0.95),
                 **kw)
    assert math.isnan(a.power)
    for solve in (dict(n=10_000), dict(epsilon=20.0)):
        with pytest.raises(ValueError, match="cannot solve for .* clipped out of the stated"):
            plan("privgcm", power=0.8, assume="linear", ranges=1.0, **solve, **kw)


def test_released_windows_clip_a_linear_regression_out_of_the_linear_model():
    """The measurement behind CLIP_RANGE, reduced, and what stop 56 changed: two linear
    columns with released windows (the 0.8 quantile of |x - median|, about 1.3 sd of x) at
    n = 10^5, epsilon 5, where E[clip(X) | Z] is not linear.  Stop 48 (the fail-safe on the
    nested estimate itself): the linear model's check failed safe in 0.25 of 100 true
    nulls, against 0.05 with public 4-sd windows.  Since stop 56 it reads the estimate less
    one noise sd: 0.01 of 100 (the clip's bias goes to the allowance), and the level held
    (0.000 of 100 there, at most 0.06 at n = 10^4 and 10^5, epsilon 5 to 100, both stated
    models; ``vignettes/README.md``, "Stop 56").  Here 50 null data sets with released
    windows: at most 7 rejections (at a true level of 0.05, 8 or more has probability
    0.012) and at most 6 fail-safes (at 0.02, 7 or more has probability 0.001; at stop
    48's 0.25 fewer than 7 has 0.01)."""
    pa = _load("plan_accuracy")
    saved = pa.GRID_BETA["linear2"]
    try:
        pa.GRID_BETA["linear2"] = 0.0
        facts = pa.design_facts("linear2", "auto")
        rej, fs, refused = pa.measure("linear2", 100_000, 5.0, "auto", facts, 50, 9_100_000)
    finally:
        pa.GRID_BETA["linear2"] = saved
    assert refused == 0
    assert rej <= 7 and fs <= 6, (rej, fs)


def test_power_decomposition_counts_a_refused_cell_as_not_rejecting(tmp_path):
    """power_decomposition.py on a cell the default refuses from public numbers (one column
    at n = 2000, epsilon 0.5: the rule's smallest epsilon there is about 0.95): the default
    does not reject, the cell is marked refused, and the oracle is still measured (it
    stopped with an error before stop 48)."""
    from privci._spline import UnresolvableDesignError
    import numpy as np
    import privci
    pd = _load("power_decomposition")
    pub = pd.public_windows("readme", pd.BETA["readme"])
    z, x, y, _, _ = pd.DESIGNS["readme"](2000, np.random.default_rng(0), pd.BETA["readme"])
    with pytest.raises(UnresolvableDesignError):
        privci.privgcm(x, y, z, epsilon=0.5, z_center=0.0, z_scale=1.0, **pub)
    rows = pd.main(["--classes", "readme", "--n", "2000", "--eps", "0.5", "--params",
                    "public", "--reps", "4", "--jobs", "1", "--out", str(tmp_path / "pd.csv")])
    assert rows[0]["refused"] == 1.0 and rows[0]["default"] == 0.0
    assert rows[0]["failsafe"] == 1.0 and 0.0 <= rows[0]["oracle"] <= 1.0
    assert rows[0]["share"] == ""             # no decomposition without a released fit


# --- the reference shapes of the regressions (stop 50) ------------------------------------

def _shape_design(shape, n, r, beta, rng):
    """Two columns of z, E[X | Z] = 4 r mean_j g(z_j) and E[Y | Z] its negative, g the
    planner's reference shape (range r in the public window 4), dependence beta."""
    import numpy as np
    z = rng.normal(size=(n, 2))
    if shape == "clipped line":
        g = np.clip(z / 2.0, -1.0, 1.0)
    else:
        g = np.sin(np.pi * np.clip(z, -4.0, 4.0) / 4.0)
    f = 4.0 * r * g.mean(axis=1)
    ex = rng.normal(size=n)
    return z, f + ex, -f + beta * ex + rng.normal(size=n)


SHAPE_CELL = dict(n=10_000, epsilon=1.0, r=0.4, beta=0.15)


def _shape_plan():
    import numpy as np
    c = SHAPE_CELL
    return dict(effect=c["beta"], effect_sd=float(np.sqrt(2 * c["beta"] ** 2 + 1)),
                x_bound=4.0, y_bound=4.0, z_columns=2, assume="additive", auto="none",
                ranges=c["r"])


def test_the_plan_gives_the_least_power_of_its_reference_shapes():
    """Definitional: the spline planner emulates each reference shape, reports the least
    power and names the shape; the linear model has its one shape; a solved n reaches the
    target for every shape."""
    import privci.plan as P
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pl = plan("privgcm", n=SHAPE_CELL["n"], epsilon=SHAPE_CELL["epsilon"], **_shape_plan())
    sp = pl.details["shape_powers"]
    assert tuple(sp) == P.REFERENCE_SHAPES
    assert pl.power == min(sp.values())
    assert pl.details["shape"] == min(sp, key=sp.get)
    # the curved shape costs power here (its allowance is larger): clipped line 0.57 and
    # half sine 0.34 when written
    assert sp["half sine"] < sp["clipped line"] - 0.1
    lin = plan("privgcm", n=10_000, epsilon=5.0, effect=0.1, effect_sd=1.0, x_bound=4.0,
               y_bound=4.0, z_columns=2, assume="linear", auto="none", ranges=0.3)
    assert tuple(lin.details["shape_powers"]) == ("linear",)
    solved = plan("privgcm", epsilon=2.0, power=0.8, effect=0.2, effect_sd=1.0, x_bound=4.0,
                  y_bound=4.0)
    assert min(solved.details["shape_powers"].values()) >= 0.8
    below = plan("privgcm", n=solved.n - 1, epsilon=2.0, effect=0.2, effect_sd=1.0,
                 x_bound=4.0, y_bound=4.0)
    assert below.power < 0.8


def test_shapes_far_apart_warn_and_close_ones_do_not():
    """A UserWarning names both powers where they differ by more than SHAPE_SPREAD; the
    README's one-column case at n = 10^4, epsilon 2 (shapes within 0.01) does not warn."""
    with pytest.warns(UserWarning, match="depends on the shape of the regressions"):
        plan("privgcm", n=SHAPE_CELL["n"], epsilon=SHAPE_CELL["epsilon"], **_shape_plan())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        pl = plan("privgcm", n=10_000, epsilon=2.0, effect=0.2, effect_sd=1.0, x_bound=3.5,
                  y_bound=4.5, ranges=0.3)
    sp = pl.details["shape_powers"]
    assert max(sp.values()) - min(sp.values()) <= 0.1


def test_reference_shapes_have_the_stated_range():
    """Definitional: each reference regression's cross-products b / m = E[phi f], solved
    against the reference Gram, give back its function: r clip(t / 2, -1, 1) or
    r sin(pi t / 4), range r on the central box |t| <= 2 (the meaning of ``ranges``)."""
    import numpy as np
    import privci.plan as P
    from privci import _spline as S
    key = (1, "full", 8, True)
    G = S._reference(key)
    t = np.linspace(-2.0, 2.0, 81)
    phi = S._features_int(key, t[:, None]) * (1.0 / S._ONE)
    want = {"clipped line": np.clip(t / 2.0, -1.0, 1.0), "half sine": np.sin(np.pi * t / 4.0)}
    for shape in P.REFERENCE_SHAPES:
        b = P._reference_regression(key, 0.3, shape)
        f = phi @ np.linalg.lstsq(G, b, rcond=None)[0]
        assert np.max(np.abs(f - 0.3 * want[shape])) < 0.02, shape
        assert np.max(np.abs(f)) == pytest.approx(0.3, abs=0.02)
    with pytest.raises(ValueError, match="unknown reference shape"):
        P._reference_regression(key, 0.3, "wiggle")


def test_a_curved_regression_has_the_power_the_plan_gives_not_the_lines():
    """Statistical (200 data sets per shape, two additive columns, n = 10^4, epsilon 1,
    public windows): privgcm's power is lower for the half sine than for the clipped line
    of the same range (when written: 0.495 against 0.26), and the plan's number (the
    least over the shapes, 0.34) is not above the half sine's measured power by more
    than 0.15 (the clipped line alone said 0.57).  Fails by chance: the difference below
    0.10 has probability about 0.002 at the rates written; the measured half sine below
    0.19 about 0.01."""
    import numpy as np
    import privci
    c = SHAPE_CELL
    reps = 200
    rate = {}
    for shape in ("clipped line", "half sine"):
        rej = 0
        for i in range(reps):
            rng = np.random.default_rng(9_300_000 + i)
            z, x, y = _shape_design(shape, c["n"], c["r"], c["beta"], rng)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                res = privci.privgcm(x, y, z, epsilon=c["epsilon"], rng=rng, x_center=0.0,
                                     x_bound=4.0, y_center=0.0, y_bound=4.0, z_center=0.0,
                                     z_scale=1.0, assume="additive")
            rej += res.pvalue <= 0.05
        rate[shape] = rej / reps
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pl = plan("privgcm", n=c["n"], epsilon=c["epsilon"], **_shape_plan())
    print(rate, pl.details["shape_powers"])
    assert rate["clipped line"] - rate["half sine"] >= 0.10, rate
    assert pl.power <= rate["half sine"] + 0.15, (pl.power, rate)
