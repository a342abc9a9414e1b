"""Reduced runs of the scripts behind stop 31's level evidence, so they cannot rot:
``vignettes/level_stress.py --break31`` and ``vignettes/demo_oracle.py``."""

import importlib.util
import os
import warnings

import numpy as np
import pytest

import privci

VIG = os.path.join(os.path.dirname(__file__), "..", "vignettes")


def _load(name):
    spec = importlib.util.spec_from_file_location(name, os.path.join(VIG, name + ".py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_break31_designs_run_and_interactions_fail_safe(tmp_path):
    """Every BREAK31 design draws; a reduced run of an interaction design without a
    stated model is refused in every run where its tensor fit does not resolve (n = 3000,
    epsilon 2: stop 54's tensor fit resolves from about epsilon 3.1 there) and never
    rejects."""
    ls = _load("level_stress")
    rng = np.random.default_rng(0)
    for cls in ls.BREAK31:
        x, y, z, zc, zs = ls.draw(cls, 500, rng)
        assert x.shape == y.shape == (500,) and z.shape[0] == 500
        assert np.all(np.isfinite(x)) and np.all(np.isfinite(y))
    rows = ls.main(["--classes", "b_sincos", "b_lognormal", "--n", "3000", "--eps", "2",
                    "--params", "public", "--reps", "3", "--workers", "1", "--seed", "7",
                    "--out", str(tmp_path / "break.csv")])
    by = {r["cls"]: r for r in rows}
    assert by["b_sincos"]["refused"] == 1.0 and by["b_sincos"]["rejections"] == 0
    assert by["b_lognormal"]["reps"] == 3
    assert (tmp_path / "break.csv").exists()


def test_level_stress_study_switches_set_and_restore(tmp_path):
    """``level_stress.py --set NAME=VALUE`` (stop 54's tensor study): the constants of
    privci._spline are set for the run (the tensor fit's box and central functions change
    what the rule asks) and restored after it; an unknown name is refused."""
    import privci._spline as S
    ls = _load("level_stress")
    key = (2, "full", 2, True)
    base = S._central_quotients(key).copy()
    assert S._box(key) == 2.0                   # stop 54's default
    saved = ls.set_constants(S, ["TENSOR_BOX=None", "TENSOR_CENTRAL=3.0"])
    try:
        assert S._box(key) == S.SPLINE_RANGE
        q = S._central_quotients(key)
        assert q.size == 9 * base.size        # three functions per column instead of one
        # on [-4, 4]^2 the central function's quotient counts more rows than on [-2, 2]^2
        assert q.max() > base.max() > 0.0
    finally:
        ls.set_constants(S, [f"{k}={v!r}" for k, v in saved.items()])
    assert S.TENSOR_BOX == 2.0 and S.TENSOR_CENTRAL == 2.0 and S._box(key) == 2.0
    assert np.array_equal(S._central_quotients(key), base)
    with pytest.raises(SystemExit, match="NOPE"):
        ls.set_constants(S, ["NOPE=1"])
    rows = ls.main(["--set", "FULL_MAX_D=1", "--classes", "m_linear2",
                    "--n", "3000", "--eps", "100", "--params", "public", "--reps", "2",
                    "--workers", "1", "--seed", "3", "--out", str(tmp_path / "t.csv")])
    assert rows[0]["reps"] == 2 and rows[0]["refused"] == 1.0    # before stop 54: refused
    rows = ls.main(["--set", "TENSOR_INTERVALS=(4,)", "--classes", "m_linear2",
                    "--n", "3000", "--eps", "100", "--params", "public", "--reps", "2",
                    "--workers", "1", "--seed", "3", "--out", str(tmp_path / "t.csv")])
    assert rows[0]["reps"] == 2 and rows[0]["refused"] == 0.0    # the tensor fit answered
    assert S.FULL_MAX_D == 2 and S.TENSOR_INTERVALS == (2, 4)


def test_demo_oracle_bounds_the_diabetes_rows():
    """The free-fit oracle: epsilon 8 finds both dependences, epsilon 1 is far from 90%
    (measured 0.49 and 0.37 at k = 5 on 4000 draws; at 80 draws a rate of 0.8 or more
    would be more than 4 standard errors away)."""
    pytest.importorskip("sklearn")
    rows = _load("demo_oracle").oracle(draws=80, seed=1, ks=(5,))
    rate = {(x, e): r for x, e, _, r in rows}
    assert rate["bmi", 8.0] >= 0.95 and rate["s3", 8.0] >= 0.95
    assert rate["bmi", 1.0] < 0.8 and rate["s3", 1.0] < 0.8


def test_linear_split_and_diabetes_rows_scripts_run(monkeypatch):
    """Reduced runs of ``vignettes/linear_split.py`` (stops 42-43: the stated linear
    model's nulls, public and released windows) and ``vignettes/diabetes_rows.py`` (the
    demo's rows): every design draws finite data of its column count, a reduced run counts
    rejections and fail-safes within their reps, and a refused epsilon is reported as such."""
    pytest.importorskip("sklearn")
    ls = _load("linear_split")
    cols = {"L2": 2, "L3c": 3, "L2skew": 2, "L3t": 3, "L5c": 5, "L2strong": 2, "D3": 3,
            "W2": 2, "W3": 3}
    for name, d in cols.items():
        x, y, z = ls.design(name, 300, np.random.default_rng(1), beta=0.1)
        assert x.shape == y.shape == (300,) and z.shape == (300, d)
        assert np.all(np.isfinite(x)) and np.all(np.isfinite(y)) and np.all(np.isfinite(z))
    for auto in ("0", "2"):
        monkeypatch.setenv("AUTO", auto)
        rej, fs = ls.run("L2", 2000, 10.0, 3, 5)
        assert 0 <= rej <= 3 and 0 <= fs <= 3
    dr = _load("diabetes_rows")
    rows = dr.run([2.0, 10.0], 2, 7)
    assert [r["rate"] for r in rows[:2]] == ["refused", "refused"]
    assert all(0 <= r["rejections"] <= 2 for r in rows[2:]) and len(rows) == 4


def test_linear_check_box_study_runs():
    """Reduced run of ``vignettes/linear_check_box.py`` (a prediction-only study): with
    the package's box the rule's prediction is the package's own; the [-2, 2] check basis
    predicts a smaller critical value (the study's claim) at n = 10^4, epsilon 5."""
    import subprocess
    import sys
    script = os.path.join(VIG, "linear_check_box.py")
    outs = {}
    for box in ("4", "2"):
        run = subprocess.run([sys.executable, script, box], capture_output=True, text=True,
                             check=True, env=dict(os.environ, PRIVCI_STUDY_CELLS="1"))
        first = run.stdout.splitlines()[0]
        outs[box] = float(first.split("critical ")[1].split(",")[0])
    import privci._spline as S
    saved = S.QUAD_RULE_ALL
    try:
        S.QUAD_RULE_ALL = ("additive",)      # the rule the study pins (before stop 56)
        S._choose_design.cache_clear()
        des = S.choose_design(10_000, 2, 1, 1, 5.0, model="linear")
    finally:
        S.QUAD_RULE_ALL = saved
        S._choose_design.cache_clear()
    assert des.checked and des.intervals == S.LINEAR_CHECK
    assert not S.choose_design(10_000, 2, 1, 1, 5.0, model="linear").checked  # since stop 56
    own = des.predicted["critical"]
    assert abs(outs["4"] - own) < 0.1
    assert outs["2"] < 0.5 * outs["4"]


def test_stop44_false_linear_designs_draw_nulls():
    """The two designs built to break the stated linear model's check (stop 44) are
    nulls with the stated shared nonlinearity: x - f and y - f are independent noise, so
    the residuals of the true regressions are uncorrelated (|r| under 4 / sqrt(n)), while
    the shared nonlinearity makes x and y correlated given a linear fit of z."""
    ls = _load("level_stress")
    n = 20_000
    for cls, shared in (("m_square2", lambda z: (z[:, 0] ** 2 - 1) / 2),
                        ("m_odd2", lambda z: np.tanh(2 * z[:, 0]))):
        x, y, z, zc, zs = ls.draw(cls, n, np.random.default_rng(3))
        f = shared(z)
        ex = x - f - (0.5 if cls == "m_odd2" else 1.0) * z[:, 1]
        ey = y - f + (1.0 if cls == "m_odd2" else 0.5) * z[:, 1]
        assert abs(np.corrcoef(ex, ey)[0, 1]) < 4 / np.sqrt(n)
        Z = np.column_stack([np.ones(n), z])
        rx = x - Z @ np.linalg.lstsq(Z, x, rcond=None)[0]
        ry = y - Z @ np.linalg.lstsq(Z, y, rcond=None)[0]
        assert np.corrcoef(rx, ry)[0, 1] > 0.05     # a linear fit leaves dependence


def test_checked_linear_fit_holds_sin_cos_null_at_epsilon_10(tmp_path):
    """Under assume='linear', the false model sin z1 cos z2 (a null) at n = 10^4,
    epsilon 10, where the rule checks the model: at most 8 rejections of 60 (at a true
    rate of 0.05 more than 8 has chance 0.015).  Stop 44's check (cubic splines per column
    and the multilinear block) rejected 12 of these 60 (0.260 of 200 on other seeds); the
    quadratic interaction block (stop 45) sees the z1 z2^2 part it missed."""
    ls = _load("level_stress")
    rows = ls.main(["--classes", "b_sincos", "--n", "10000", "--eps", "10", "--params",
                    "public", "--reps", "60", "--workers", "1", "--seed", "4510000",
                    "--assume", "linear", "--out", str(tmp_path / "sc.csv")])
    assert rows[0]["rejections"] <= 8


def test_checked_additive_fit_holds_sin_cos_null_at_epsilon_100(tmp_path):
    """Under assume='additive', the same false model (sin z1 cos z2, a null) at n = 10^4,
    epsilon 100, where the rule checks the model (stop 55: from about 80; before, from 6):
    at most 8 rejections of 60 (at a true rate of 0.05 more than 8 has chance 0.015).  With
    the multilinear check (before stop 45) 0.995 of 200 (seed 4620000) were rejected at
    epsilon 10, the check run and blind to it."""
    ls = _load("level_stress")
    rows = ls.main(["--classes", "b_sincos", "--n", "10000", "--eps", "100", "--params",
                    "public", "--reps", "60", "--workers", "1", "--seed", "4520000",
                    "--assume", "additive", "--out", str(tmp_path / "sc.csv")])
    assert rows[0]["rejections"] <= 8


def test_a_checked_additive_result_holds_a_bump_interaction_null():
    """Stop 55: a result that says the additive model was checked must hold its level on
    a false model the check's block can represent.  exp(-(z1^2 + z2^2)) in both
    regressions (a null; its interaction is mostly z1^2 z2^2, a product of quadratics) at
    n = 10^4 under assume='additive', 20 data sets at each of epsilon 8, 20 and 100.  When
    the rule asked only the check block's largest contrast (z1 z2), the fit was called
    checked at all three and 0.42 of 100 (epsilon 8) and 0.17 (20) were rejected; now it
    asks every contrast, so the check is claimed from epsilon about 80 and, where claimed,
    holds (0.000 of 100 at 82-150).  Asserted: the 20 results at 100 are checked, and at
    most 6 of all checked results reject (at a true rate of 0.05 among at most 60, more
    than 6 has chance below 0.04; the old rule gave about 12)."""
    ls = _load("level_stress")
    pub = ls.public("h2_bump")
    checked_rej, checked_at_100 = 0, 0
    for eps in (8.0, 20.0, 100.0):
        for r in range(20):
            rng = np.random.default_rng(55_100_000 + 1000 * int(eps) + r)
            x, y, z, _, _ = ls.draw("h2_bump", 10_000, rng)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                res = privci.privgcm(x, y, z, epsilon=eps, rng=rng, assume="additive", **pub)
            if res.fit_check["checked"]:
                checked_rej += res.pvalue <= 0.05
                checked_at_100 += eps == 100.0
    assert checked_at_100 == 20
    assert checked_rej <= 6, checked_rej


def test_stop45_break_designs_draw_nulls_an_additive_fit_cannot_explain():
    """The designs built to break the quadratic interaction check (stop 45) are nulls: x
    and y minus their true regressions are independent noise (|r| under 4 / sqrt(n)),
    while an additive fit (cubic polynomials per column) leaves x and y correlated (the
    shared interaction); and z1 He3(z2) is orthogonal to z1 times any quadratic in z2
    (a t statistic under 4) but not to z1 z2^3, which is what makes it hard."""
    ls = _load("level_stress")
    n = 20_000
    for cls, fx, fy in (
            ("m_herm13", lambda z: z[:, 0] * (z[:, 1] ** 3 - 3 * z[:, 1]) / 3 + 0.5 * z[:, 1],
             lambda z: z[:, 0] * (z[:, 1] ** 3 - 3 * z[:, 1]) / 3 - 0.5 * z[:, 0]),
            ("m_absprod", lambda z: np.abs(z[:, 0]) * z[:, 1] + 0.5 * z[:, 0],
             lambda z: np.abs(z[:, 0]) * z[:, 1] - 0.5 * z[:, 1])):
        x, y, z, zc, zs = ls.draw(cls, n, np.random.default_rng(4))
        ex, ey = x - fx(z), y - fy(z)
        assert abs(np.corrcoef(ex, ey)[0, 1]) < 4 / np.sqrt(n)
        Z = np.column_stack([np.ones(n)] + [z[:, j] ** p for j in range(2) for p in (1, 2, 3)])
        rx = x - Z @ np.linalg.lstsq(Z, x, rcond=None)[0]
        ry = y - Z @ np.linalg.lstsq(Z, y, rcond=None)[0]
        assert np.corrcoef(rx, ry)[0, 1] > 0.1, cls
    z = np.random.default_rng(5).normal(size=(n, 2))
    h = z[:, 0] * (z[:, 1] ** 3 - 3 * z[:, 1])
    for g in (z[:, 0] * z[:, 1], z[:, 0] * z[:, 1] ** 2, z[:, 0] * (z[:, 1] ** 2 - 1)):
        hg = h * g                         # E[h g] = 0: a t statistic under 4 in size
        assert abs(hg.mean()) < 4 * hg.std() / np.sqrt(n)
    hg = h * z[:, 0] * z[:, 1] ** 3        # not orthogonal to cubics in z2: E = 6
    assert hg.mean() > 4 * hg.std() / np.sqrt(n)


def test_spline_checked_linear_fit_holds_a_cubic_interaction_null_at_epsilon_5():
    """A design built to break the quadratic check (z1 He3(z2) / 3, a null) under
    assume='linear' at n = 10^4, epsilon 5.  From stop 45 to 55 the rule checked the model
    there with the spline check, which missed it: 0.130 [0.090, 0.184] of 200 rejected
    with the fit called checked (a strict xfail kept it in view).  Since stop 56 the rule
    asks that check's every interaction contrast, which it does not resolve there: the
    fit is unchecked and the result says so (``fit_check["checked"]`` False, a caveat that
    the level rests on the assumption); from epsilon 6 the polynomial check holds it
    (``test_spline.py::test_linear_quadratic_check_asks_every_contrast``).  Three data
    sets: each must say so."""
    import privci
    ls = _load("level_stress")
    for seed in range(3):
        rng = np.random.default_rng(4530000 + seed)
        x, y, z, _, _ = ls.draw("m_herm13", 10_000, rng)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            res = privci.privgcm(x, y, z, epsilon=5.0, x_bound=12.0, y_bound=12.0,
                                 z_center=0.0, z_scale=1.0, rng=rng, assume="linear")
        assert res.fit_check["model"] == "linear" and not res.fit_check["checked"]
        assert "the assumption could not be checked" in str(res)


def test_polynomial_check_holds_cubic_and_odd_nulls_and_finds_linear_dependence(tmp_path):
    """The linear fit's polynomial check (stop 46), n = 10^4, assume='linear', 60 data sets
    per cell: the nulls built to break a check, z1 He3(z2) / 3 at epsilon 10 (0.470 of 200
    with the spline check at stop 45) and tanh(2 z1) shared by x and y at epsilon 14 (its
    worst cell, 0.055 of 200), are rejected in at most 8 of 60 each (a true rate of 0.05
    exceeds 8 with chance 0.06, so the bound tolerates a rate up to about 0.08 at a 10%
    error; with the estimate's Gram lowered by the noise edge, as the other fits take
    it, tanh(2 z1) was rejected in 0.63 at epsilon 20); and two linear columns with an
    effect of 0.1 at epsilon 20 are rejected in at least 40 of 60 (0.967 measured; the
    spline check had 0.100 of 200)."""
    ls = _load("level_stress")
    cells = (("m_herm13", "10", "0.0", "4530000"), ("m_odd2", "14", "0.0", "4531000"),
             ("m_linear2", "20", "0.1", "4532000"))
    got = {}
    for cls, eps, beta, seed in cells:
        rows = ls.main(["--classes", cls, "--n", "10000", "--eps", eps, "--params", "public",
                        "--reps", "60", "--workers", "1", "--seed", seed, "--beta", beta,
                        "--assume", "linear", "--out", str(tmp_path / f"{cls}.csv")])
        got[cls] = rows[0]["rejections"]
    assert got["m_herm13"] <= 8 and got["m_odd2"] <= 8, got
    assert got["m_linear2"] >= 40, got


def test_unchecked_additive_fit_holds_the_shared_square_null_with_auto_windows(tmp_path):
    """Stop 47: under assume='additive' at n = 10^4, epsilon 1 ("auto" windows) the fit is
    unchecked, and its ridge shrank (z1^2 - 1) / 2, shared by x and y, in both halves
    alike: 0.210 of 200 nulls rejected (0.150 on another seed) before the unchecked
    additive fit carried its allowance, 0.020 after.  Here 100 data sets, at most 10
    rejections: a true rate of 0.05 exceeds 10 with chance 0.011, and a rate of 0.21 stays
    at or below 10 with chance 0.004."""
    ls = _load("level_stress")
    rows = ls.main(["--classes", "m_square2", "--n", "10000", "--eps", "1", "--params", "auto",
                    "--reps", "100", "--workers", "1", "--seed", "4780000",
                    "--assume", "additive", "--out", str(tmp_path / "sq.csv")])
    assert rows[0]["rejections"] <= 10, rows[0]


def test_split_pilot_forces_a_split_and_restores_the_rule():
    """Reduced run of ``vignettes/split_pilot.py`` (stop 50): the rule's own split, a
    forced resolvable split (its fit share is the one privgcm used), a forced split the
    rule cannot resolve (refused, nothing measured), and the rule's share lists restored."""
    from privci import _spline as S
    before = S.FIT_SHARES, S.GRAM_SHARES
    sp = _load("split_pilot")
    rule = sp.run(("readme", 10_000, 0.5, None, None, 2, 5))
    assert rule["refused"] is False and rule["fit_share"].startswith("rule (0.")
    assert 0.0 <= rule["power"] <= 1.0
    forced = sp.run(("readme", 10_000, 0.5, 0.7, 0.45, 2, 5))
    assert forced["refused"] is False and forced["used_fit_share"] == pytest.approx(0.7)
    refused = sp.run(("readme", 10_000, 0.5, 0.3, 0.3, 2, 5))
    assert refused["refused"] is True and refused["power"] == ""
    assert (S.FIT_SHARES, S.GRAM_SHARES) == before
