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


# three cells of the grid where the power is neither 0 nor 1 (one column with public
# parameters, with privgcm's default released z parameters, two columns with
# assume="additive"), on seeds the grid runs did not use
CELLS = [("readme", 10_000, 0.5, "public"), ("skewed", 2000, 5.0, "zauto"),
         ("additive2", 10_000, 1.0, "public")]
REPS = 300
Z = 2.6          # one-sided normal quantile: P(Z > 2.6) = 0.0047


def test_planner_within_tenth_of_privgcm():
    """|predicted - measured| <= 0.10 + Z sd on every cell, sd the binomial sd of the
    measured rate at the power within 0.10 of the prediction nearest to 1/2.  If the
    planner is within 0.10 of the true power on every cell, the test fails by chance with
    probability below 3 x 0.0047 = 0.014 (the seeds are fixed, so it is repeatable)."""
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
    """Why the planner says so (the measurement behind CLIP_RANGE, reduced): two linear
    columns with released windows (the 0.8 quantile of |x - median|, about 1.3 sd of x)
    at n = 10^5, epsilon 5: the linear model's check fails safe on true-linear data
    (E[clip(X) | Z] is not linear), where with public 4-sd windows it does not.  Stop 48:
    0.25 of 100 against 0.05.  Here 50 data sets each; fails if the released windows'
    fail-safes do not outnumber the public windows' by at least 4: with rates 0.25 and
    0.05 that happens with chance 0.027."""
    pa = _load("plan_accuracy")
    out = {}
    for params in ("auto", "public"):
        facts = pa.design_facts("linear2", params)
        _, fs, refused = pa.measure("linear2", 100_000, 5.0, params, facts, 50, 9_100_000)
        assert refused == 0
        out[params] = fs
    print(out)
    assert out["auto"] >= out["public"] + 4, out


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
