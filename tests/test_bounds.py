"""privci.bounds: private centres, bounds and Z scales (issue 15)."""

import math
from fractions import Fraction

import numpy as np
import pytest

import privci
from privci import bounds
from privci.budget import BudgetExceededError, PrivacyBudget


# --------------------------------------------------------------------------- grids

def test_default_grid_spans_many_orders_of_magnitude():
    g = bounds.candidate_grid()
    assert np.all(np.diff(g) > 0)
    assert 0.0 in g and g[0] == -1e9 and g[-1] == 1e9
    pos = g[g > 0]
    assert pos[0] == pytest.approx(1e-6)
    # relative spacing 10^(1/1000) - 1 = 0.23%
    assert np.max(pos[1:] / pos[:-1]) == pytest.approx(10 ** 0.001)


def test_public_range_grid_is_linear_inside_the_range():
    g = bounds.candidate_grid((-3.0, 7.0))
    assert g[0] == -3.0 and g[-1] == 7.0 and g.size == 10001
    assert np.allclose(np.diff(g), 0.001)
    gp = bounds.candidate_grid((-3.0, 7.0), positive=True)
    assert gp[0] > 0 and gp[-1] == pytest.approx(10.0)


# --------------------------------------------------------------------------- validation

BAD = [
    (lambda: bounds.private_quantile([1.0, 2.0], 0.5, epsilon=-1.0), ValueError, "epsilon"),
    (lambda: bounds.private_quantile([1.0, 2.0], 1.5, epsilon=1.0), ValueError, "alpha"),
    (lambda: bounds.private_quantile([1.0, 2.0], "half", epsilon=1.0), TypeError, "alpha"),
    (lambda: bounds.private_quantile(np.ones((3, 2)), 0.5, epsilon=1.0), ValueError, "one column"),
    (lambda: bounds.private_quantile([1.0, np.nan], 0.5, epsilon=1.0), ValueError, "values"),
    (lambda: bounds.private_quantile([1.0, 2.0], 0.5, epsilon=1.0, candidates=[]), ValueError,
     "candidates"),
    (lambda: bounds.private_bounds([1.0, 2.0], epsilon=1.0, bound_quantile=1.0), ValueError,
     "bound_quantile"),
    (lambda: bounds.private_bounds([1.0, 2.0], epsilon=1.0, bound_quantile=0.3), ValueError,
     "bound_quantile"),
    (lambda: bounds.private_bounds([1.0, 2.0], epsilon=1.0, bound="yes"), TypeError, "bound"),
    (lambda: bounds.private_bounds([1.0, 2.0], epsilon=1.0, public_range=(3, 1)), ValueError,
     "public_range"),
    (lambda: bounds.private_bounds([1.0, 2.0], epsilon=1.0, public_range="wide"), TypeError,
     "public_range"),
    (lambda: bounds.private_bounds(np.ones((4, 2)), epsilon=1.0,
                                   public_range=[(0, 1), (0, 1), (0, 1)]), ValueError,
     "public_range"),
    (lambda: bounds.private_bounds([1.0, 2.0], epsilon=1.0, center=[0.0, 1.0]), ValueError,
     "center"),
    (lambda: bounds.private_bounds([1.0, 2.0], epsilon=1.0, center=0.0, bound=False), ValueError,
     "nothing to release"),
    (lambda: bounds.private_bounds([1.0, 2.0], epsilon=1.0, budget=3), TypeError, "budget"),
    (lambda: bounds.candidate_grid(points_per_decade=0), ValueError, "points_per_decade"),
    (lambda: bounds.private_scale([[1.0, 2.0], [3.0, 4.0]], epsilon=0.0), ValueError, "epsilon"),
]


@pytest.mark.parametrize("call, exc, match", BAD)
def test_bad_inputs_raise_clear_errors(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


def test_errors_do_not_echo_private_values():
    x = np.array([123.456789, 2.0, np.inf])
    with pytest.raises(ValueError) as info:
        bounds.private_bounds(x, epsilon=1.0)
    assert "123.45" not in str(info.value)


# --------------------------------------------------------------------------- the mechanism

def _scores(values, alpha, candidates):
    """The numpy path's scores (the same formula as bounds._numpy_quantile)."""
    xs = np.sort(values)
    lt = np.searchsorted(xs, candidates, side="left")
    le = np.searchsorted(xs, candidates, side="right")
    t = alpha * xs.size
    return -np.maximum(0.0, np.maximum(lt - t, t - le))


def test_numpy_scores_have_sensitivity_one_and_the_selection_is_epsilon_dp():
    # Gumbel-max with scale 2/eps samples softmax(eps * u / 2): the exact selection
    # probabilities of neighbouring data sets must differ by a factor of at most e^eps.
    rng = np.random.default_rng(11)
    cands = bounds.candidate_grid(points_per_decade=20, min_exponent=-2, max_exponent=3)
    eps = 0.7
    worst_u, worst_log = 0.0, 0.0
    for trial in range(200):
        x = rng.normal(rng.uniform(-5, 5), rng.uniform(0.1, 10), size=rng.integers(2, 40))
        x2 = x.copy()
        x2[rng.integers(x.size)] = rng.choice([1e3, -1e3, 0.0, rng.normal()])
        for alpha in (0.5, 0.8, 0.99):
            u, u2 = _scores(x, alpha, cands), _scores(x2, alpha, cands)
            worst_u = max(worst_u, np.max(np.abs(u - u2)))
            lp = eps * u / 2 - np.logaddexp.reduce(eps * u / 2)
            lp2 = eps * u2 / 2 - np.logaddexp.reduce(eps * u2 / 2)
            worst_log = max(worst_log, np.max(np.abs(lp - lp2)))
    assert worst_u <= 1.0 + 1e-12
    assert worst_log <= eps + 1e-9


def test_numpy_path_uses_the_documented_scores():
    rng = np.random.default_rng(3)
    x = rng.normal(size=50)
    cands = np.linspace(-3, 3, 61)
    # with a huge epsilon the mechanism returns the best-scoring candidate
    got = bounds._numpy_quantile(x, 0.5, 1e9, cands, np.random.default_rng(0))
    assert got == cands[np.argmax(_scores(x, 0.5, cands))]


@pytest.mark.parametrize("rng", [None, 5])
def test_private_median_is_accurate(rng):
    # n = 5000, epsilon = 1: the selected rank is within a few of n/2; a failure of
    # |m - 50| < 0.3 (0.3 sd, i.e. the 38th-62nd percentile) has probability < 1e-12.
    x = np.random.default_rng(0).normal(50, 1, size=5000)
    m = bounds.private_quantile(x, 0.5, epsilon=1.0, rng=rng)
    assert abs(m - 50) < 0.3
    assert m in bounds.candidate_grid()


def test_seeded_path_is_reproducible_and_hardened_path_is_labelled():
    x = np.random.default_rng(1).normal(size=(300, 2))
    a = bounds.private_bounds(x, epsilon=1.0, rng=9)
    b = bounds.private_bounds(x, epsilon=1.0, rng=9)
    assert a == b
    assert not a.hardened and "not hardened" in a.mechanism and a.caveats
    h = bounds.private_bounds(x, epsilon=1.0)
    assert h.hardened and "OpenDP" in h.mechanism and h.caveats == ()


# --------------------------------------------------------------------------- bounds

def test_private_bounds_release_centre_then_bound_and_compose():
    rng = np.random.default_rng(2)
    x = np.column_stack([rng.normal(50, 2, 20000), rng.normal(-3, 0.01, 20000)])
    rel = bounds.private_bounds(x, epsilon=0.8, rng=4)
    assert rel.released == ("center[0]", "bound[0]", "center[1]", "bound[1]")
    assert rel.epsilon_each == 0.2
    assert Fraction(rel.epsilon_each) * 4 <= Fraction(0.8) and rel.epsilon <= 0.8
    assert rel.center[0] == pytest.approx(50, abs=0.2)
    assert rel.center[1] == pytest.approx(-3, abs=0.01)
    # 0.8 quantile of |N(0, s^2)| is 1.2816 s; the bound grid has a 4.7% spacing
    assert rel.bound[0] == pytest.approx(1.2816 * 2, rel=0.1)
    assert rel.bound[1] == pytest.approx(1.2816 * 0.01, rel=0.1)
    assert rel.bound_quantile == 0.8
    rec = rel.as_record()
    assert rec["center"] == rel.center and rec["epsilon"] == rel.epsilon


def test_public_centre_releases_only_the_bound():
    x = np.random.default_rng(3).normal(0, 1, 5000)
    rel = bounds.private_bounds(x, epsilon=0.5, center=0.0, bound_quantile=0.9, rng=1)
    assert rel.released == ("bound[0]",) and rel.center == (0.0,)
    assert rel.epsilon_each == 0.5
    assert rel.bound[0] == pytest.approx(1.645, rel=0.1)


def test_public_range_keeps_the_release_inside_it():
    x = np.random.default_rng(4).uniform(100, 550, 3000)
    rel = bounds.private_bounds(x, epsilon=1.0, public_range=(100, 550), rng=2)
    assert 100 <= rel.center[0] <= 550 and 0 < rel.bound[0] <= 450
    assert rel.center[0] == pytest.approx(325, abs=15)


def test_small_n_epsilon_caps_the_upper_quantile_with_public_numbers_only():
    q = bounds._effective_bound_quantile(0.99, 100, 0.1, 751)
    assert q == 0.5
    q = bounds._effective_bound_quantile(0.99, 10**6, 1.0, 751)
    assert q == 0.99
    q = bounds._effective_bound_quantile(0.95, 1000, 0.25, 751)
    assert q == pytest.approx(1 - 2 * (math.log(751) + 5) / 250)


def test_no_absurd_bound_at_moderate_n():
    # n = 1000, epsilon 0.1 per quantity (n eps = 100): the cap lowers 0.99 to about 0.77
    # and keeps the bound near the data, where an uncapped 0.99 quantile (score gap of
    # 10 x 0.1 / 2 = 0.5 nats against ~400 tied candidates above the data) would pick a
    # candidate far beyond it most of the time.
    rng = np.random.default_rng(5)
    worst = max(bounds.private_bounds(rng.normal(size=1000), epsilon=0.2, bound_quantile=0.99,
                                      rng=s).bound[0] for s in range(50))
    assert worst < 10


def test_bound_preference_is_public_and_the_selection_stays_epsilon_dp():
    # The bounds' preference for small candidates is a base measure: weights
    # (c / c_min)^-power that depend on the candidates only.  The exact selection
    # probabilities softmax(eps u / 2 + log weights) of neighbouring data sets (binary
    # columns, whose scores tie above the data, and continuous ones, one row replaced by
    # an extreme) must differ by a factor of at most e^eps.
    cands = bounds.candidate_grid(points_per_decade=20, min_exponent=-3, max_exponent=4,
                                  positive=True)
    pref = bounds._log_preference(cands, 1.0)
    assert np.allclose(pref, -np.log(cands / cands.min()))
    assert np.all(bounds._log_preference(cands, 0.0) == 0.0)
    rng = np.random.default_rng(12)
    eps, worst = 0.6, 0.0
    for trial in range(200):
        n = int(rng.integers(2, 40))
        x = (np.abs(rng.normal(size=n)) if trial % 2 else
             (rng.uniform(size=n) < 0.5).astype(float))
        x2 = x.copy()
        x2[rng.integers(n)] = rng.choice([1e4, 0.0, 1.0, abs(rng.normal())])
        for alpha in (0.5, 0.8):
            lp = [eps * _scores(v, alpha, cands) / 2 + pref for v in (x, x2)]
            lp = [v - np.logaddexp.reduce(v) for v in lp]
            worst = max(worst, np.max(np.abs(lp[0] - lp[1])))
    assert worst <= eps + 1e-9


def test_numpy_path_adds_the_preference_to_the_scores():
    rng = np.random.default_rng(3)
    x = np.abs(rng.normal(size=50))
    cands = np.linspace(0.05, 3, 60)
    pref = bounds._log_preference(cands, 1.0)
    # with a huge epsilon the scores dominate; with a tiny one the preference does
    got = bounds._numpy_quantile(x, 0.8, 1e9, cands, np.random.default_rng(0), 1.0)
    assert got == cands[np.argmax(_scores(x, 0.8, cands))]
    draws = [bounds._numpy_quantile(x, 0.8, 1e-9, cands, np.random.default_rng(s), 1.0)
             for s in range(400)]
    # weights proportional to 1 / c: the smallest candidate (0.05) carries 0.21 of the
    # mass, the upper half of the range (1.5 to 3) 0.15; each frequency of 400 draws
    # within 4 binomial sds of its weight (a chance below 1e-4 to fail)
    w = np.exp(pref) / np.exp(pref).sum()
    draws = np.array(draws)
    for hit, p in ((draws == cands[0], w[0]), (draws > 1.5, w[cands > 1.5].sum())):
        assert abs(np.mean(hit) - p) < 4 * np.sqrt(p * (1 - p) / 400)
    assert w[0] > 10 * w[-1]


@pytest.mark.parametrize("power,lo,hi", [(None, 0, 6), (0.0, 50, 100)],
                         ids=["default", "no-preference"])
def test_a_balanced_binary_column_gets_a_bound_near_its_values(monkeypatch, power, lo, hi):
    # x in {0, 1} with P(1) = 0.5, n = 2000, epsilon 0.05 per quantity: every candidate
    # above max |x - c| has the same score, and without the preference the bound was drawn
    # log-uniformly up to 10^9 (more than 10 times max |x - c| in 0.86 of 100 draws; no
    # power left for PrivGCM).  With it: 0.01 of 400.  Tolerated: at most 6 of 100 (at a
    # rate of 0.01, a chance of 1e-5 to fail); the no-preference run shows the test sees
    # the flaw (at least 50 of 100).
    if power is not None:
        monkeypatch.setattr(bounds, "BOUND_PRIOR_POWER", power)
    x = (np.random.default_rng(3).uniform(size=2000) < 0.5).astype(float)
    far = 0
    for seed in range(100):
        rel = bounds.private_bounds(x, epsilon=0.1, rng=seed)
        far += rel.bound[0] > 10 * np.max(np.abs(x - rel.center[0]))
    assert lo <= far <= hi


def test_hardened_bound_of_a_binary_column_and_its_spent_epsilon():
    # The OpenDP path builds the same mechanism from its parts (scores, the public
    # preference, noisy max): it spends at most its epsilon with scale 2 / epsilon, and a
    # balanced binary column gets a bound near its values (4 draws: at a rate of about
    # 0.01 all four fail to be near with chance 1e-8; at least 3 of 4 asked).
    x = (np.random.default_rng(4).uniform(size=2000) < 0.5).astype(float)
    v = np.abs(x - 0.3)
    cands = bounds.candidate_grid(points_per_decade=50, positive=True)
    value, scale, spent = bounds._opendp_quantile(v, 0.77, 0.05, cands, 1.0)
    assert spent <= 0.05 and scale == pytest.approx(2.0 / 0.05, rel=1e-9)
    assert value in cands
    near = sum(bounds.private_bounds(x, epsilon=0.1).bound[0] <= 10.0 for _ in range(4))
    assert near >= 3


def test_small_n_epsilon_warns_with_public_numbers_only():
    x = np.random.default_rng(5).normal(size=200) * 1234.5
    with pytest.warns(bounds.UnreliableQuantileWarning, match="n x epsilon") as rec:
        bounds.private_bounds(x, epsilon=0.2, rng=1)
    assert "1234" not in str(rec[0].message)


@pytest.mark.parametrize("rng", [None, 7])
def test_private_scale_standardises_z_wherever_it_sits(rng):
    z = np.random.default_rng(1).normal([10, -2e6], [300, 0.5], size=(4000, 2))
    rel = bounds.private_scale(z, epsilon=1.0, rng=rng)
    assert rel.released == ("scale[0]", "scale[1]") and rel.epsilon_each == 0.5
    assert rel.scale[0] == pytest.approx(300, rel=0.12)
    assert rel.scale[1] == pytest.approx(0.5, rel=0.12)
    t = rel.transform(z)
    assert np.allclose(t.std(axis=0), 1.0, atol=0.15)
    with pytest.raises(ValueError, match="columns"):
        rel.transform(np.ones((3, 3)))
    with pytest.raises(ValueError, match="scales"):
        bounds.private_bounds(z, epsilon=1.0, rng=1).transform(z)


def test_budget_is_charged_first_and_refuses_overspending():
    b = PrivacyBudget(1.0)
    x = np.random.default_rng(6).normal(size=500)
    bounds.private_bounds(x, epsilon=0.6, budget=b, rng=1)
    with pytest.raises(BudgetExceededError):
        bounds.private_bounds(x, epsilon=0.6, budget=b, rng=1)


# --------------------------------------------------------------------------- for the lead

def test_auto_public_parameters_for_the_tests():
    d = privci.simulate.paper_data(10_000, beta=1.0, rng=0)
    r = bounds._auto_public_parameters(d.x + 50, d.y - 50, epsilon=0.4, rng=1)
    assert r["released"] == ("x_center[0]", "x_bound[0]", "y_center[0]", "y_bound[0]")
    assert r["x_center"][0] == pytest.approx(50, abs=0.2)
    assert r["y_center"][0] == pytest.approx(-50, abs=0.2)
    assert r["epsilon"] <= 0.4 and r["epsilon_each"] == 0.1 and not r["hardened"]
    assert r["x_bound"].shape == (1,) and 0.8 < r["x_bound"][0] < 2.0
    # PrivCRT: a bound on |x - E[X|Z]| around the public centre 0, and y's centre + bound
    resid = d.x - d.model_x.conditional_mean(d.z)
    r2 = bounds._auto_public_parameters(resid, d.y, epsilon=0.3, want_center=(False, True))
    assert r2["x_center"] is None and r2["released"] == ("x_bound[0]", "y_center[0]",
                                                         "y_bound[0]")
    assert r2["x_bound"][0] == pytest.approx(1.2816, rel=0.1) and r2["hardened"]
    with pytest.warns(bounds.UnreliableQuantileWarning):
        r3 = bounds._auto_public_parameters(np.ones((10, 2)), np.ones(10), epsilon=1.0,
                                            want_center=(False, False), want_bound=(True, False))
    assert r3["released"] == ("x_bound[0]", "x_bound[1]") and r3["y_bound"] is None


def test_auto_parameters_feed_privgcm_with_sequential_composition():
    d = privci.simulate.paper_data(2000, beta=0.0, rng=3)
    r = bounds._auto_public_parameters(d.x, d.y, epsilon=0.2, rng=2)
    # epsilon 2: the spline rule (private z centre and scale) resolves n = 2000 rows from
    # about 1.05 and refuses below
    res = privci.privgcm(d.x, d.y, d.z, epsilon=2.0, x_bound=r["x_bound"], y_bound=r["y_bound"],
                         x_center=r["x_center"], y_center=r["y_center"], rng=4)
    assert 0 <= res.pvalue <= 1
    assert res.privacy.bounds["x_center"] == tuple(r["x_center"].tolist())


# --------------------------------------------------------------------------- level (slow)

def _level(shift, d, n, epsilon, reps, seed):
    rej = 0
    kw = {"ridge_lambda": 5.0, "kernel_sigma": 0.5}
    for rep in range(reps):
        ss = np.random.SeedSequence([seed, rep])
        s1, s2, s3 = ss.spawn(3)
        dat = privci.simulate.paper_data(n, d=d, beta=0.0, rng=s1)
        x, y = dat.x + shift, dat.y + shift
        r = bounds._auto_public_parameters(x, y, epsilon=0.1 * epsilon, rng=s2)
        # the recommended wiring: the released window, then private means inside it
        res = privci.privgcm(x, y, dat.z, epsilon=0.9 * epsilon, x_bound=r["x_bound"],
                             y_bound=r["y_bound"], x_center=r["x_center"],
                             y_center=r["y_center"], center_epsilon=0.1 * epsilon, rng=s3,
                             **kw)
        rej += res.pvalue <= 0.05
    return rej / reps


@pytest.mark.slow
@pytest.mark.parametrize("epsilon", [1.0, 8.0])
@pytest.mark.parametrize("shift, d", [(0.0, 1), (0.0, 5), (50.0, 1)])
def test_level_with_automatic_bounds(shift, d, epsilon):
    # 500 replications at n = 1000: a valid 5% test lands in [0.02, 0.08] with
    # probability 0.9996 (binomial sd 0.0097).
    rate = _level(shift, d, 1000, epsilon, 500, 15)
    assert 0.02 <= rate <= 0.08, rate


def test_private_scale_of_opposite_extremes_is_finite_and_silent():
    """|z_i - z_j| of 1e308 and -1e308 overflows; it is mapped to the largest float (found by
    the neighbour harness through privgcm's default 'auto' z scale)."""
    import warnings
    z = np.array([1e308, -1e308, 1e308, -1e308, 0.5, -1.7976931348623157e308])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warnings.simplefilter("ignore", bounds.UnreliableQuantileWarning)   # public: n, epsilon
        with np.errstate(all="raise"):
            rel = bounds.private_scale(z, epsilon=1.0, rng=1)
    assert np.all(np.isfinite(rel.scale)) and rel.scale[0] > 0


# --------------------------------------------------------------------------- issue 21, finding 1

MAX = np.finfo(np.float64).max


def _observed(call, fp="warn"):
    """(outcome, warnings, value) of ``call()`` with numpy's floating-point errors set to
    ``fp`` ("warn": numpy's defaults; "raise": an exception) and every Python warning
    recorded; the outcome is 'ok' or the exception's type and message."""
    import warnings
    with warnings.catch_warnings(record=True) as caught, \
            np.errstate(divide=fp, over=fp, invalid=fp, under="ignore"):
        warnings.simplefilter("always")
        try:
            value = call()
            outcome = "ok"
        except Exception as exc:   # noqa: BLE001 - compared between the neighbours
            value, outcome = None, (type(exc).__name__, str(exc))
    return outcome, [(w.category.__name__, str(w.message)) for w in caught], value


@pytest.mark.parametrize("rng", [None, 5], ids=["hardened", "seeded"])
def test_issue21_private_bounds_extreme_row_warns_like_its_neighbour(rng):
    """Issue 21, finding 1: |x - c| overflowed (RuntimeWarning on one neighbour only, inf
    handed to OpenDP) when one row held the largest float and the centre was far away."""
    x = np.zeros(100)
    x2 = x.copy()
    x2[0] = MAX
    seen = []
    for data in (x, x2):
        outcome, warned, rel = _observed(
            lambda: bounds.private_bounds(data, epsilon=1.0, center=-1e293, rng=rng))
        assert outcome == "ok"
        assert np.isfinite(rel.bound[0])
        seen.append(warned)
    assert seen[0] == seen[1] == [], seen


def test_issue21_private_bounds_public_range_extreme_row_warns_like_its_neighbour():
    """The issue's second reproduction: public_range (-1e300, 1e300), n = 20, eps = 0.1, the
    released centre far from the extreme row; 30 seeded runs on each neighbour."""
    import warnings
    x = np.zeros(20)
    x2 = x.copy()
    x2[0] = MAX
    counts = []
    for data in (x, x2):
        other = 0
        for seed in range(30):
            outcome, warned, _ = _observed(lambda: bounds.private_bounds(
                data, epsilon=0.1, public_range=(-1e300, 1e300), rng=seed))
            assert outcome == "ok"
            other += sum(c != "UnreliableQuantileWarning" for c, _ in warned)
        counts.append(other)
    assert counts == [0, 0], counts
    # and no numpy floating-point error at all, even with errors raised
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", bounds.UnreliableQuantileWarning)
        with np.errstate(all="raise"):
            for seed in range(5):
                bounds.private_bounds(x2, epsilon=0.1, public_range=(-1e300, 1e300), rng=seed)


def test_issue21_opendp_gets_finite_values_from_private_bounds(monkeypatch):
    """On the hardened path OpenDP is handed |x - c| clamped to the largest float, never inf."""
    import opendp.core
    seen = []
    original = opendp.core.measurement_invoke

    def spy(this, arg):
        if isinstance(arg, list):
            seen.append(all(np.isfinite(arg)))
        return original(this, arg)

    monkeypatch.setattr(opendp.core, "measurement_invoke", spy)
    x = np.zeros(100)
    x[0] = MAX
    with np.errstate(all="ignore"):
        bounds.private_bounds(x, epsilon=1.0, center=-1e293)
    assert seen and all(seen), seen


@pytest.mark.parametrize("rng", [None, 5], ids=["hardened", "seeded"])
def test_issue21_private_quantile_and_scale_extreme_rows_silent(rng):
    """The audit of the other public functions: extremes of float64 on one row change no
    warning and give a finite release (private_quantile on the values, private_scale on
    the paired differences, with and without a public range)."""
    base = np.linspace(-1.0, 1.0, 40)
    for new in (MAX, -MAX, 1e308, 5e-324):
        other = base.copy()
        other[3] = new
        for call in (
                lambda d: bounds.private_quantile(d, 0.5, epsilon=1.0, rng=rng),
                lambda d: bounds.private_quantile(d, 0.9, epsilon=1.0, rng=rng,
                                                  candidates=[-MAX, 0.0, MAX]),
                lambda d: bounds.private_scale(np.column_stack([d, -d]), epsilon=2.0, rng=rng),
                lambda d: bounds.private_scale(d, epsilon=1.0, rng=rng,
                                               public_range=(-1e300, 1e300)),
                lambda d: bounds.private_bounds(d, epsilon=1.0, rng=rng),
                lambda d: bounds.private_bounds(d, epsilon=1.0, rng=rng, center=MAX,
                                                public_range=(-1e300, 1e300))):
            # a numpy floating-point error raises: FloatingPointError on one neighbour
            (oa, wa, a), (ob, wb, b) = (_observed(lambda: call(base), fp="raise"),
                                        _observed(lambda: call(other), fp="raise"))
            assert oa == ob == "ok", (oa, ob)
            assert wa == wb, (wa, wb)             # public warnings only (n, epsilon)
            assert all(c == "UnreliableQuantileWarning" for c, _ in wa), wa
            for res in (a, b):
                vals = [res] if isinstance(res, float) else [
                    v for k in ("center", "bound", "scale") for v in (getattr(res, k) or ())]
                assert np.all(np.isfinite(vals)), vals


@pytest.mark.parametrize("value", [(-1e308, 1e308), (-MAX, MAX), (0.0, np.inf),
                                   (-1.5e308, 0.5e308)])
def test_issue21_candidate_grid_rejects_a_range_whose_width_overflows(value):
    """candidate_grid((-1e308, 1e308)) returned NaN candidates with a numpy warning; the width
    upper - lower must be a finite float.  The error names the argument and the value."""
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for positive in (False, True):
            with pytest.raises(ValueError, match=r"`public_range`.*(width|finite)") as info:
                bounds.candidate_grid(value, positive=positive)
            assert "e+308" in str(info.value) or "inf" in str(info.value)


@pytest.mark.parametrize("value", [(0.0, 5e-324), (1e300, 1e300 * (1 + 1e-15))])
def test_issue21_candidate_grid_rejects_a_range_too_narrow_for_distinct_candidates(value):
    """OpenDP needs strictly increasing candidates: a range narrower than 10,000 ulps gave
    duplicates and OpenDP's error after the budget was charged (numpy path: a 0 bound)."""
    for positive in (False, True):
        with pytest.raises(ValueError, match=r"`public_range`.*(narrow|distinct)"):
            bounds.candidate_grid(value, positive=positive)


def test_issue21_overflowing_public_range_refused_before_the_budget_is_charged():
    budget = PrivacyBudget(1.0)
    for call in (lambda: bounds.private_bounds(np.zeros(10), epsilon=0.5, budget=budget,
                                               public_range=(-1e308, 1e308)),
                 lambda: bounds.private_scale(np.zeros(10), epsilon=0.5, budget=budget,
                                              public_range=(-1e308, 1e308)),
                 lambda: bounds.private_bounds(np.zeros((10, 2)), epsilon=0.5, budget=budget,
                                               public_range=[(0, 1), (-MAX, 1e300)])):
        with pytest.raises(ValueError, match="`public_range`"):
            call()
    assert budget.spent == 0


def test_issue21_transform_maps_overflow_to_the_largest_float():
    """ReleasedParameters.transform: (z - centre) / scale of an extreme row is finite and
    silent (the Dask path's z shift does the same)."""
    import warnings
    rel = bounds.ReleasedParameters(center=(-1e308,), bound=None, scale=(1e-10,), epsilon=1.0,
                                    epsilon_each=1.0, released=("scale[0]",),
                                    bound_quantile=None, mechanism="m", hardened=True,
                                    guarantee="g")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = rel.transform(np.array([[MAX], [0.0], [-MAX]]))
    assert out[0, 0] == MAX and out[2, 0] == -MAX and np.isfinite(out).all()


def test_hardened_bounds_from_threads_restore_opendp_features():
    # The hardened bound enables OpenDP's "honest-but-curious" feature only while it builds
    # its public-weights step (the feature set is global): from four threads at once no
    # call fails, and the feature is off again afterwards unless the caller had it on.
    import threading
    from opendp import mod
    had = "honest-but-curious" in mod.GLOBAL_FEATURES
    x = (np.random.default_rng(1).uniform(size=500) < 0.5).astype(float)
    errors, got = [], []

    def work():
        try:
            for _ in range(3):
                got.append(bounds.private_bounds(x, epsilon=1.0).bound[0])
        except Exception as exc:   # noqa: BLE001 - collected and asserted below
            errors.append(repr(exc))

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and len(got) == 12
    assert ("honest-but-curious" in mod.GLOBAL_FEATURES) == had
