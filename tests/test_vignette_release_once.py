"""A reduced run of ``vignettes/release_once_pc.py`` (its stress and level studies), so the
scripts behind the release's measured level cannot rot.  The full runs are in the
vignettes and their results files; this checks the plumbing, not the rates."""

import importlib.util
import os
import warnings

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "..", "vignettes", "release_once_pc.py")


@pytest.fixture(scope="module")
def script():
    spec = importlib.util.spec_from_file_location("release_once_pc", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _args(script, argv):
    ns = {}

    def grab(args):
        ns["args"] = args
    orig = script.run_stress, script.run_level, script.run_pc
    script.run_stress = script.run_level = script.run_pc = grab
    try:
        script.main(argv)
    finally:
        script.run_stress, script.run_level, script.run_pc = orig
    return ns["args"]


def test_stress_study_reduced(script, capsys):
    args = _args(script, ["stress", "--reps", "3", "--n", "2000", "--eps", "20", "100",
                          "--classes", "osc3", "product2", "--beta", "0.5"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rows = script.run_stress(args)
    assert [(r[0], r[2]) for r in rows] == [("osc3", 20.0), ("osc3", 100.0),
                                           ("product2", 20.0), ("product2", 100.0)]
    for cls, d, eps, rate, lo, hi, untrusted in rows:
        assert 0.0 <= lo <= rate <= hi <= 1.0 and 0.0 <= untrusted <= 1.0
    # the product class gets the default (no additivity assumed): every answer refused
    assert all(r[3] == 0.0 and r[6] == 1.0 for r in rows if r[0] == "product2")
    assert "| osc3 | 1 | 20 |" in capsys.readouterr().out


def test_level_study_reduced(script):
    args = _args(script, ["level", "--reps", "3", "--n", "2000", "--eps", "50",
                          "--kinds", "linear", "--sizes", "0", "1"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rows = script.run_level(args)
    assert [(r[0], r[1]) for r in rows] == [("linear", 0), ("linear", 1)]
    assert all(0.0 <= r[4] <= 1.0 for r in rows)


def test_level_study_of_the_linear_rung_reduced(script):
    args = _args(script, ["level", "--statistics", "linear", "--clip", "0.5", "--reps", "3",
                          "--n", "2000", "--eps", "5", "--kinds", "hetero", "--sizes", "2"])
    assert args.statistics == "linear" and args.clip == 0.5
    rows = script.run_level(args)
    assert [(r[0], r[1]) for r in rows] == [("hetero", 2)] and 0.0 <= rows[0][4] <= 1.0


def test_causal_compare_reduced(capsys):
    """``vignettes/causal_compare.py`` (issue 36): every method on two small graphs, and the
    baseline as written there (its noise at the stated L1 bound, Fisher-z PC)."""
    import numpy as np

    spec = importlib.util.spec_from_file_location(
        "causal_compare", os.path.join(HERE, "..", "vignettes", "causal_compare.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    rows = mod.main(["--quick"])
    assert [r["method"] for r in rows] == list(mod.METHODS)
    for r in rows:
        assert 0.0 <= r["f1"] <= 1.0 and r["time_mean"] >= 0.0
    assert "privci" in capsys.readouterr().out
    # the baseline's noise: scale p (p + 1) / epsilon on the upper triangle (tight: half)
    X = np.zeros((400, 4))
    draws = {}

    class Spy:
        def laplace(self, loc, scale, size):
            draws["scale"] = scale
            return np.zeros(size)
    mod.baseline_pc(X + 0.1, 2.0, Spy())
    assert draws["scale"] == 4 * 5 / 2.0
    mod.baseline_pc(X + 0.1, 2.0, Spy(), tight=True)
    assert draws["scale"] == 4 * 5 / 2.0 / 2
