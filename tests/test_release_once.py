"""privci.release: release once, test many (issue 24)."""

import itertools

import numpy as np
import pytest

import privci
from privci.budget import BudgetExceededError, PrivacyBudget
from privci.release import (_SCALE_UNIT, ReleasedTable, _gram_int, _scaled, hat_features,
                            release_sensitivity)


def _exact_upper(rows, knots=8, bound=1.0):
    """Exact upper triangle (units 2^-32, int64) of sum f f^T over the given rows."""
    X = np.atleast_2d(np.asarray(rows, dtype=float))
    U = _scaled(X, np.zeros(X.shape[1]), np.full(X.shape[1], bound))
    return _gram_int(hat_features(U, knots))


def _l1_change(d1, d2, knots=8):
    return float(np.abs(_exact_upper(d1, knots) - _exact_upper(d2, knots)).sum()) * _SCALE_UNIT


# --- sensitivity --------------------------------------------------------------------------

@pytest.mark.parametrize("nv", [1, 2, 3, 5])
def test_sensitivity_bound_holds_on_adversarial_neighbours(nv):
    rng = np.random.default_rng(nv)
    bound = release_sensitivity(nv)
    specials = [-1.0, -0.999, -0.75, -0.5, -0.26, 0.0, 0.13, 0.5, 0.74, 1.0, 5.0, -7.0]
    base = rng.uniform(-1, 1, size=(40, nv))
    worst = 0.0
    for _ in range(200):
        a = rng.choice(specials, size=nv) if rng.uniform() < 0.7 else rng.uniform(-2, 2, nv)
        b = rng.choice(specials, size=nv) if rng.uniform() < 0.7 else rng.uniform(-2, 2, nv)
        d1, d2 = base.copy(), base.copy()
        d1[7], d2[7] = a, b
        worst = max(worst, _l1_change(d1, d2))
    assert worst <= bound
    for K in (1, 3, 8, 12, 32, 64):   # every knot count (the rule picks 12 to 64)
        d1, d2 = base.copy(), base.copy()
        d1[0], d2[0] = 1.0, -1.0
        assert _l1_change(d1, d2, K) <= bound


@pytest.mark.parametrize("nv", [1, 2, 5, 8])
def test_hand_made_pair_reaches_the_bound(nv):
    # all columns at +bound versus all at -bound: one hat equal to 1 per column, disjoint
    change = _l1_change(np.full((1, nv), 1.0), np.full((1, nv), -1.0))
    bound = release_sensitivity(nv)
    assert change >= 0.9 * bound
    assert change <= bound


def test_features_nonnegative_and_block_sums_at_most_one():
    u = np.random.default_rng(0).uniform(-1.2, 1.2, size=(500, 3))
    F = hat_features(np.clip(u, -1, 1), 8)
    assert F.min() >= 0
    sums = F.reshape(500, 3, 9).sum(axis=2)
    assert sums.max() <= 1 << 16 and sums.min() >= (1 << 16) - 2
    # u is in the span: sum_k t_k h_k(u) = u up to the 2^-16 grid
    t = np.linspace(-1, 1, 9)
    rec = (F.reshape(500, 3, 9) * t).sum(axis=2) / (1 << 16)
    assert np.max(np.abs(rec - np.clip(u, -1, 1))) < 3e-5


# --- accounting ---------------------------------------------------------------------------

def _table(n=2000, eps=5.0, budget=None, seed=0, **kw):
    rng = np.random.default_rng(seed)
    z = rng.normal(size=n)
    x = z + rng.normal(size=n)
    y = z + rng.normal(size=n)
    w = rng.normal(size=n)
    X = np.column_stack([x / 1.5, y / 1.5, z, w])
    return privci.release(X, epsilon=eps, bounds=4.0, rng=seed + 1, budget=budget, **kw)


def test_one_charge_queries_free():
    budget = PrivacyBudget(epsilon=3.0)
    tab = _table(eps=2.0, budget=budget)
    assert len(budget.ledger) == 1 and budget.spent == pytest.approx(2.0)
    for i, j in itertools.combinations(range(4), 2):
        rest = [k for k in range(4) if k not in (i, j)]
        for r in range(3):
            for s in itertools.combinations(rest, r):
                res = tab.test(i, j, list(s), assume_additive=True)
                assert 0.0 <= res.pvalue <= 1.0
    assert len(budget.ledger) == 1 and budget.spent == pytest.approx(2.0)
    assert tab.n_queries == 24
    assert tab.epsilon_spent_by_queries == 0.0
    assert "epsilon 0" in tab.privacy["queries"]
    assert tab.privacy["epsilon"] == 2.0
    assert tab.privacy["charged"].startswith("charged epsilon = 2")


def test_budget_refusal_releases_nothing():
    budget = PrivacyBudget(epsilon=1.0)
    with pytest.raises(BudgetExceededError):
        _table(eps=2.0, budget=budget)
    assert budget.ledger == []


@pytest.mark.parametrize("kwargs, match", [
    ({"epsilon": -1.0}, "epsilon"),
    ({"epsilon": float("nan")}, "epsilon"),
    ({"bounds": [1.0, 2.0]}, "bounds"),
    ({"bounds": -3.0}, "bounds"),
    ({"bounds": None}, "bounds"),
    ({"centers": [0.0, np.inf, 0.0]}, "centers"),
    ({"blocks": 0}, "blocks"),
    ({"blocks": 2000}, "blocks"),
    ({"knots": 0}, "knots"),
    ({"knots": 100}, "knots"),
    ({"rng": "seed"}, "rng"),
    ({"budget": 3.0}, "budget"),
])
def test_validation_before_any_charge(kwargs, match):
    budget = PrivacyBudget(epsilon=10.0)
    X = np.random.default_rng(0).normal(size=(100, 3))
    args = {"epsilon": 1.0, "bounds": 4.0, "rng": 1, "budget": budget}
    args.update(kwargs)
    with pytest.raises((TypeError, ValueError), match=match):
        privci.release(X, **args)
    assert budget.ledger == []


@pytest.mark.parametrize("data, match", [
    (np.ones((50, 1)), "2 columns"),
    (np.array([[1.0, np.nan], [2.0, 3.0], [1.0, 1.0]]), "NaN"),
    ("abc", "data"),
])
def test_bad_data_before_any_charge(data, match):
    budget = PrivacyBudget(epsilon=10.0)
    with pytest.raises((TypeError, ValueError), match=match):
        privci.release(data, epsilon=1.0, bounds=4.0, budget=budget)
    assert budget.ledger == []


def test_query_validation_and_names():
    pd = pytest.importorskip("pandas")
    rng = np.random.default_rng(3)
    df = pd.DataFrame(rng.normal(size=(400, 3)), columns=["a", "b", "c"])
    tab = privci.release(df, epsilon=5.0, bounds=4.0, rng=1, blocks=4)
    res = tab.test("a", "b", ["c"])
    assert res.query == ("a", "b", ("c",))
    assert tab.test("a", "b", "c").pvalue == pytest.approx(tab.test(0, 1, [2]).pvalue,
                                                            abs=0.2)
    for bad in [("a", "a", ()), ("a", "b", ["a"]), ("a", "zz", ())]:
        with pytest.raises(ValueError):
            tab.test(*bad)


# --- no data retained ---------------------------------------------------------------------

def test_no_raw_data_retained():
    n = 1500
    tab = _table(n=n)
    pf = 4 * (tab.knots + 1)
    seen = []

    def walk(obj, depth=0):
        if depth > 4:
            return
        if isinstance(obj, np.ndarray):
            seen.append(obj.shape)
        elif isinstance(obj, dict):
            for v in obj.values():
                walk(v, depth + 1)
        elif isinstance(obj, (list, tuple)):
            for v in obj:
                walk(v, depth + 1)

    for name, value in vars(tab).items():
        walk(value)
    # only the released Gram matrices (k, pf, pf), per-column public vectors and the
    # public knots (a function of knots and grid)
    for shape in seen:
        assert shape in {(tab.blocks, pf, pf), (4,), (tab.knots + 1,)}, shape
    np.testing.assert_array_equal(tab.knot_values, np.linspace(-1, 1, tab.knots + 1))
    assert all(s[0] != n for s in seen if len(s))
    assert set(vars(tab)) == {"_grams", "names", "bounds", "centers", "knots", "block_rows",
                              "n", "epsilon", "sensitivity", "noise_scale", "mechanism",
                              "hardened", "_boot_seed", "n_queries", "_groups", "privacy",
                              "auto_epsilon", "knot_values", "assumptions"}
    assert tab.assumptions == {"assume_additive": False, "assume_smooth": False}


# --- level and power ----------------------------------------------------------------------

def test_level_two_sided_small():
    """Null rejection rate at alpha = 0.05 (two-sided test), 120 tables, n = 3000, eps = 5.

    Tolerance: at most 14 rejections of 120.  If the true level were 0.05, the chance of
    14 or more is about 0.6% (binomial), the tolerated false-failure rate of this check.
    """
    rng = np.random.default_rng(11)
    rej = 0
    reps = 120
    for r in range(reps):
        n = 3000
        z = rng.normal(size=(n, 2))
        x = np.tanh(1.5 * z[:, 0]) + 0.5 * z[:, 1] + rng.normal(size=n)
        y = z[:, 0] - 0.5 * z[:, 1] + rng.normal(size=n)
        X = np.column_stack([x / 1.3, y / 1.6, z, rng.normal(size=n)])
        # 12 knots (the rule's choice here before the resolution fail-safe) under the
        # assumptions this design meets (additive, smooth): the calibration's own level
        tab = privci.release(X, epsilon=5.0, bounds=4.0, rng=rng, knots=12)
        res = tab.test(0, 1, [2, 3], assume_additive=True, assume_smooth=True)
        assert res.component_pvalues                 # answered, not the fail-safe
        rej += res.pvalue <= 0.05
    assert rej <= 14


def test_power_strong_dependence():
    tab = _table(n=4000, eps=20.0)
    assert tab.test(0, 2).pvalue < 1e-3          # x depends on z
    assert tab.test(0, 1).pvalue < 1e-3          # x, y depend through z


# --- PC -----------------------------------------------------------------------------------

def test_pc_release_one_charge():
    from privci.causal import pc
    rng = np.random.default_rng(1)
    n = 4000
    a = rng.normal(size=n)
    b = rng.normal(size=n)
    c = (a + b) / 1.4 + 0.5 * rng.normal(size=n)
    outer = PrivacyBudget(epsilon=20.0)
    res = pc(np.column_stack([a, b, c]), epsilon=10.0, bounds=4.0, rng=2, method="release",
             budget=outer)
    assert res.adjacency.astype(int).tolist() == [[0, 0, 1], [0, 0, 1], [1, 1, 0]]
    assert len(res.budget.ledger) == 1 and res.n_tests >= 3
    assert len(outer.ledger) == 1 and outer.spent == pytest.approx(10.0)


def test_pc_release_validates_before_charging():
    from privci.causal import pc
    outer = PrivacyBudget(epsilon=20.0)
    X = np.random.default_rng(0).normal(size=(200, 3))
    with pytest.raises(ValueError, match="method"):
        pc(X, epsilon=1.0, bounds=4.0, method="nope", budget=outer)
    with pytest.raises(ValueError, match="release"):
        pc(X, epsilon=1.0, bounds=4.0, method="release", budget=outer, ridge_lambda=5.0)
    with pytest.raises(ValueError, match="bounds"):
        pc(X, epsilon=1.0, bounds=[1.0, 2.0], method="release", budget=outer)
    assert outer.ledger == []


def test_released_table_is_post_processing_only():
    assert isinstance(_table(), ReleasedTable)
    tab = _table()
    r1 = tab.test(0, 1, [2])
    r2 = tab.test(1, 0, [2])
    assert r1.pvalue == pytest.approx(r2.pvalue, abs=0.15)   # bootstrap draws differ


# --- issue 24, second round: quadratic responses, power read-out, "auto" --------------------

def test_quadratic_responses_see_a_dependence_without_correlation():
    rng = np.random.default_rng(5)
    n = 10_000
    x = rng.normal(size=n)
    y = (x * x - 1.0) / 1.4 + 0.5 * rng.normal(size=n)
    X = np.column_stack([x, y, rng.normal(size=n)])
    tab = privci.release(X, epsilon=5.0, bounds=4.0, rng=2)
    assert tab.test(0, 1, responses="linear").pvalue > 0.05       # no correlation to see
    res = tab.test(0, 1)
    assert res.pvalue < 1e-4 and len(res.component_pvalues) == 3
    assert res.pvalue == pytest.approx(min(1.0, 3 * min(res.component_pvalues)))
    # with two or more columns in S only the linear pair is tested
    assert len(tab.test(0, 1, [2, 2]).component_pvalues) == 3
    X4 = np.column_stack([X, rng.normal(size=n)])
    tab4 = privci.release(X4, epsilon=5.0, bounds=4.0, rng=2)
    assert len(tab4.test(0, 1, [2, 3], assume_additive=True,
                         assume_smooth=True).component_pvalues) == 1
    with pytest.raises(ValueError, match="responses"):
        tab.test(0, 1, responses="cubic")


def test_repeated_and_mirrored_queries_agree():
    tab = _table()
    p = tab.test(0, 1, [2]).pvalue
    assert tab.test(0, 1, [2]).pvalue == p
    assert tab.test(1, 0, [2]).pvalue == pytest.approx(p, rel=1e-9)


def test_detectable_correlation_shrinks_with_epsilon():
    small = _table(n=4000, eps=1.0).test(0, 1, [2]).detectable_correlation
    large = _table(n=4000, eps=50.0).test(0, 1, [2]).detectable_correlation
    assert 0 < large < small
    assert large > 2.0 / np.sqrt(4000)        # never below the sampling limit


def test_auto_bounds_and_centres_are_charged_inside_epsilon():
    rng = np.random.default_rng(6)
    n = 5000
    z = rng.normal(size=n)
    X = np.column_stack([100 + 5 * (z + rng.normal(size=n)), -40 + 0.1 * z, z])
    budget = PrivacyBudget(epsilon=5.0)
    tab = privci.release(X, epsilon=5.0, bounds="auto", centers="auto", rng=1, budget=budget)
    assert budget.spent == pytest.approx(5.0) and len(budget.ledger) == 1
    assert tab.auto_epsilon == pytest.approx(0.5) and tab.epsilon == 5.0
    assert abs(tab.centers[0] - 100) < 1.0 and 15 < tab.bounds[0] < 40
    assert tab.caveats == ()
    assert tab.test(0, 1).pvalue < 1e-3
    fixed = privci.release(X, epsilon=5.0, bounds=4.0, rng=1)     # centres 0: clipped
    assert len(fixed.caveats) == 2 and fixed.edge_share(0) > 0.9
    with pytest.raises(ValueError, match="auto_share"):
        privci.release(X, epsilon=5.0, bounds="auto", auto_share=0.0)


def test_two_conditioning_columns_are_fail_safe_unless_additive_is_assumed():
    """The release's regression is additive in the columns of S: with a product of two
    conditioning columns (x = y-noise-free function z1 z2 + noise) a true null is rejected
    (measured: up to 100%).  The default answers |S| >= 2 with p = 1 and says why; the
    user's assume_additive=True gets the additive test (which then rejects here)."""
    rng = np.random.default_rng(21)
    n = 20_000
    z = rng.normal(size=(n, 2))
    f = z[:, 0] * z[:, 1]
    x, y = f + 0.5 * rng.normal(size=n), f + 0.5 * rng.normal(size=n)
    X = np.column_stack([x / 1.2, y / 1.2, z])
    tab = privci.release(X, epsilon=50.0, bounds=4.0, rng=4)
    safe = tab.test(0, 1, [2, 3])
    assert safe.pvalue == 1.0 and not safe.trusted
    assert "assume_additive=True" in safe.caveats[0]
    assumed = tab.test(0, 1, [2, 3], assume_additive=True)
    assert assumed.pvalue < 0.05          # the product is shared by x and y: a false rejection
    assert tab.test(0, 1, [2]).pvalue <= 1.0        # one column: answered as before
    with pytest.raises(TypeError, match="assume_additive"):
        tab.test(0, 1, [2, 3], assume_additive="yes")
