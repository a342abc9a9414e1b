"""privci.causal: private PC, the shared engine, and the causal-learn / pgmpy / tigramite adapters.

The 4-node DAG of issue 14: A -> C <- B, C -> D, n = 500.  Every peer's PC
runs end to end with privci's private tests charged to one budget, and the
total epsilon is reported and never exceeded.
"""

import itertools
import threading

import numpy as np
import pytest

from privci.budget import BudgetExceededError, PrivacyBudget
from privci.causal import (PrivateCITest, _check_version, _orient, pc, pgmpy_ci_test,
                           register_causallearn, tigramite_ci_test, worst_case_tests)

NAMES = ["A", "B", "C", "D"]
TRUE_SKELETON = {frozenset(e) for e in [(0, 2), (1, 2), (2, 3)]}


def four_node(n=500, seed=0):
    rng = np.random.default_rng(seed)
    a, b = rng.normal(size=n), rng.normal(size=n)
    c = a + b + 0.5 * rng.normal(size=n)
    d = c + 0.5 * rng.normal(size=n)
    return np.column_stack([a, b, c, d])


BOUNDS = [4.0, 4.0, 6.0, 7.0]


# --- d-separation oracle: tests PC's logic without statistics -------------------------------

DAG = {2: (0, 1), 3: (2,)}   # parents


def _dsep_4node(i, j, s):
    """d-separation in A -> C <- B, C -> D (enumerated by hand)."""
    i, j, s = min(i, j), max(i, j), set(s)
    adjacent = {(0, 2), (1, 2), (2, 3)}
    if (i, j) in adjacent:
        return False
    if (i, j) == (0, 1):           # A, B: separated unless C or D (its descendant) is given
        return not ({2, 3} & s)
    if (i, j) in {(0, 3), (1, 3)}:   # via C (a chain): separated iff C given
        return 2 in s
    raise AssertionError((i, j, s))


def oracle_test(data):
    """A 'test' that answers d-separation exactly (p = 1 or 0), locating columns by value."""
    cols = [data[:, k].tobytes() for k in range(data.shape[1])]
    calls = []

    def test(x, y, z, *, epsilon, rng, **_):
        i, j = cols.index(x.tobytes()), cols.index(y.tobytes())
        s = () if z is None else tuple(cols.index(z[:, k].tobytes()) for k in range(z.shape[1]))
        calls.append((i, j, s, epsilon))

        class R:
            pvalue = 1.0 if _dsep_4node(i, j, s) else 0.0
        return R()
    test.calls = calls
    return test


def test_pc_recovers_the_cpdag_with_an_oracle_and_charges_each_test_once():
    data = four_node()
    test = oracle_test(data)
    res = pc(data, epsilon=2.0, bounds=BOUNDS, test=test, method="per-test")
    edges = {frozenset(e) for e in zip(*np.nonzero(np.triu(res.adjacency)))}
    assert edges == TRUE_SKELETON
    np.testing.assert_array_equal(res.adjacency, res.adjacency.T)
    g = res.directed
    # A -> C <- B (v-structure), C -> D (Meek rule 1), causal-learn's encoding
    assert (g[0, 2], g[2, 0]) == (-1, 1) and (g[1, 2], g[2, 1]) == (-1, 1)
    assert (g[2, 3], g[3, 2]) == (-1, 1)
    assert res.edges() == [(0, "->", 2), (1, "->", 2), (2, "->", 3)]
    keys = [(i, j, s) for i, j, s, _ in test.calls]
    assert len(keys) == len(set(keys)) == res.n_tests == len(res.budget.ledger)
    assert res.budget.spent <= 2.0
    assert res.sepsets[(0, 1)] == () and res.sepsets[(0, 3)] == (2,)
    # the split is public: order 0 gets 1 / (L + 1) of 2.0 over its 6 tests
    assert res.level_epsilon[0] == pytest.approx(2.0 / 3 / 6, rel=1e-9)
    assert "post-processing" in res.guarantee and "PCResult" in repr(res)


def test_pc_on_the_four_node_dag_with_privgcm_never_exceeds_epsilon():
    data = four_node()
    res = pc(data, epsilon=10.0, bounds=BOUNDS, rng=3, method="per-test")
    assert res.budget.spent <= 10.0 and res.budget.epsilon == 10.0
    assert res.adjacency.dtype == bool and res.adjacency.shape == (4, 4)
    assert not res.adjacency.diagonal().any()
    np.testing.assert_array_equal(res.adjacency, res.adjacency.T)
    assert set(np.unique(res.directed)) <= {-1, 0, 1}
    assert res.n_tests == len(res.budget.ledger) >= 6
    assert any("seeded" in c for c in res.caveats)


def test_pc_with_an_outer_budget_charges_the_run_once():
    outer = PrivacyBudget(epsilon=3.0)
    res = pc(four_node(), epsilon=2.0, bounds=BOUNDS, test=oracle_test(four_node()),
             budget=outer, method="per-test")
    assert outer.spent == 2.0 and len(outer.ledger) == 1
    assert "outer budget" in res.guarantee
    with pytest.raises(BudgetExceededError):
        pc(four_node(), epsilon=2.0, bounds=BOUNDS, test=oracle_test(four_node()), budget=outer,
           method="per-test")


def test_pc_zcdp_run():
    res = pc(four_node(), epsilon=2.0, delta=1e-6, bounds=BOUNDS, test=oracle_test(four_node()),
             method="per-test")
    assert res.budget.composition == "zcdp" and res.budget.spent <= 2.0
    assert "(2, 1e-06)-DP" in res.guarantee


@pytest.mark.parametrize("kwargs, exc, match", [
    ({"epsilon": 0.0}, ValueError, "epsilon"),
    ({"alpha": 1.5}, ValueError, "alpha"),
    ({"split": "even"}, ValueError, "split"),
    ({"bounds": [1.0, 2.0]}, ValueError, "bounds"),
    ({"bounds": None}, TypeError, "bounds"),
    ({"test": "kci"}, ValueError, "test"),
    ({"on_exhausted": "guess"}, ValueError, "on_exhausted"),
    ({"max_order": -1}, ValueError, "max_order"),
    ({"budget": 1.0}, TypeError, "budget"),
    ({"x_bound": 3.0}, TypeError, "x_bound"),
])
def test_pc_validation(kwargs, exc, match):
    outer = PrivacyBudget(epsilon=10.0)
    args = {"epsilon": 1.0, "bounds": BOUNDS, "method": "per-test", **kwargs}
    if "budget" not in kwargs:
        args["budget"] = outer
    with pytest.raises(exc, match=match):
        pc(four_node(), **args)
    assert outer.ledger == []


def test_pc_rejects_bad_data():
    with pytest.raises(ValueError, match="at least 2 columns"):
        pc(np.zeros((10, 1)), epsilon=1.0, bounds=1.0)
    bad = four_node()
    bad[3, 1] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        pc(bad, epsilon=1.0, bounds=BOUNDS)


# --- the engine: cache, refusals, threads ---------------------------------------------------


def test_cache_answers_repeats_and_mirrors_without_a_charge():
    data = four_node()
    test = oracle_test(data)
    b = PrivacyBudget(epsilon=1.0)
    ci = PrivateCITest(data, budget=b, bounds=BOUNDS, epsilon_per_test=0.1, test=test)
    ci.pvalue(0, 3, [2])
    ci.pvalue(3, 0, (2,))
    ci.pvalue(np.int64(3), 0, [2, 2])
    assert len(test.calls) == 1 and len(b.ledger) == 1 and ci.n_released == 1
    assert ci.cache == {(0, 3, (2,)): 1.0}
    assert b.ledger[0]["details"] == "0 _||_ 3 | 2"


def test_refused_release_computes_nothing_and_spends_nothing():
    data = four_node()
    test = oracle_test(data)
    b = PrivacyBudget(epsilon=1.0)
    ci = PrivateCITest(data, budget=b, bounds=BOUNDS, epsilon_per_test=0.3, test=test,
                       on_exhausted="raise")
    for k, (i, j) in enumerate([(0, 1), (0, 2), (0, 3)]):
        ci.pvalue(i, j)
    assert len(test.calls) == 3 and b.spent == pytest.approx(0.9)
    with pytest.raises(BudgetExceededError, match="nothing was computed or released"):
        ci.pvalue(1, 2)
    assert len(test.calls) == 3 and len(b.ledger) == 3 and b.spent == pytest.approx(0.9)
    # data-independent answers when asked to keep going
    keep = PrivateCITest(data, budget=b, bounds=BOUNDS, epsilon_per_test=0.3, test=test,
                         on_exhausted="dependent")
    assert keep.pvalue(1, 2) == 0.0 and len(test.calls) == 3 and keep.n_released == 0


def test_default_split_plans_for_the_worst_case():
    assert worst_case_tests(4) == 24 and worst_case_tests(6, max_order=2) == 165
    b = PrivacyBudget(epsilon=2.4)
    ci = PrivateCITest(four_node(), budget=b, bounds=BOUNDS, test=oracle_test(four_node()))
    assert ci.max_tests == 24 and ci.epsilon_per_test == pytest.approx(0.1, rel=1e-9)
    # every distinct question of the worst case fits, and not one more
    for i, j in itertools.combinations(range(4), 2):
        others = [k for k in range(4) if k not in (i, j)]
        for r in range(3):
            for s in itertools.combinations(others, r):
                ci.pvalue(i, j, s)
    assert len(b.ledger) == 24 and b.spent <= 2.4


def test_threads_share_one_budget_and_one_answer_per_question():
    data = four_node()
    test = oracle_test(data)
    b = PrivacyBudget(epsilon=1.0)
    ci = PrivateCITest(data, budget=b, bounds=BOUNDS, epsilon_per_test=0.05, test=test)
    questions = [(0, 1, ()), (0, 3, (2,)), (1, 3, (2,)), (0, 1, (2,))] * 10

    def run(qs):
        for q in qs:
            ci.pvalue(*q)

    threads = [threading.Thread(target=run, args=(questions[k::4],)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(test.calls) == 4 and len(b.ledger) == 4


def test_engine_validation():
    data = four_node()
    with pytest.raises(TypeError, match="budget"):
        PrivateCITest(data, budget=None, bounds=BOUNDS)
    b = PrivacyBudget(epsilon=1.0)
    ci = PrivateCITest(data, budget=b, bounds=BOUNDS, epsilon_per_test=0.1)
    with pytest.raises(ValueError, match="different columns"):
        ci.pvalue(0, 0)
    with pytest.raises(ValueError, match="column index"):
        ci.pvalue(0, 7)
    with pytest.raises(ValueError, match="names"):
        PrivateCITest(data, budget=b, bounds=BOUNDS, names=["a"])
    with pytest.raises(TypeError, match="epsilon"):
        PrivateCITest(data, budget=b, bounds=BOUNDS, epsilon=1.0)


def test_orient_meek_rules():
    # chain with a v-structure upstream: a -> c <- b, c - d - e  =>  c -> d -> e (R1 twice)
    adj = np.zeros((5, 5), dtype=bool)
    for i, j in [(0, 2), (1, 2), (2, 3), (3, 4)]:
        adj[i, j] = adj[j, i] = True
    seps = {(0, 1): (), (0, 3): (2,), (0, 4): (2,), (1, 3): (2,), (1, 4): (2,), (2, 4): (3,)}
    g = _orient(adj, seps)
    for i, j in [(0, 2), (1, 2), (2, 3), (3, 4)]:
        assert (g[i, j], g[j, i]) == (-1, 1), (i, j)
    # no v-structure (chain a - b - c with b in the sepset): stays undirected
    adj = np.zeros((3, 3), dtype=bool)
    adj[0, 1] = adj[1, 0] = adj[1, 2] = adj[2, 1] = True
    g = _orient(adj, {(0, 2): (1,)})
    assert g[0, 1] == g[1, 0] == -1 and g[1, 2] == g[2, 1] == -1


def test_version_ranges_are_enforced():
    _check_version("pgmpy", "1.1.2")
    with pytest.raises(ImportError, match="tested with pgmpy"):
        _check_version("pgmpy", "2.0.0")
    with pytest.raises(ImportError, match="causal-learn"):
        _check_version("causal-learn", "0.1.3.9")


# --- peers ----------------------------------------------------------------------------------


def test_causallearn_pc_and_fci_run_with_one_budget():
    pytest.importorskip("causallearn")
    from causallearn.search.ConstraintBased.FCI import fci
    from causallearn.search.ConstraintBased.PC import pc as cl_pc

    register_causallearn()
    data = four_node()
    budget = PrivacyBudget(epsilon=5.0)
    cg = cl_pc(data, 0.05, "privgcm", budget=budget, bounds=BOUNDS, rng=1,
               show_progress=False)
    assert cg.G.graph.shape == (4, 4)
    n_pc = len(budget.ledger)
    assert 6 <= n_pc <= 24 and budget.spent <= 5.0
    # the same budget keeps paying for FCI; each test was planned at 5 / 24
    g, edges = fci(data, "privgcm", 0.05, budget=budget, bounds=BOUNDS, rng=2,
                   show_progress=False, verbose=False)
    assert budget.spent <= 5.0 and len(budget.ledger) >= n_pc


def test_causallearn_refuses_the_release_that_would_overspend():
    pytest.importorskip("causallearn")
    from causallearn.search.ConstraintBased.PC import pc as cl_pc

    register_causallearn()
    data = four_node()
    test = oracle_test(data)
    budget = PrivacyBudget(epsilon=1.0)
    with pytest.raises(BudgetExceededError):
        # planned for 3 tests: the 4th of PC's 6 order-0 tests is refused before it is run
        cl_pc(data, 0.05, "privgcm", budget=budget, bounds=BOUNDS, max_tests=3, test=test,
              on_exhausted="raise", show_progress=False)
    assert len(test.calls) == 3 and len(budget.ledger) == 3 and budget.spent <= 1.0


def test_pgmpy_pc_runs_on_threads_with_one_budget():
    pytest.importorskip("pgmpy")
    pd = pytest.importorskip("pandas")
    from pgmpy.causal_discovery import PC

    df = pd.DataFrame(four_node(), columns=NAMES)
    budget = PrivacyBudget(epsilon=5.0)
    test = pgmpy_ci_test(df, budget=budget, bounds=BOUNDS, rng=1)
    est = PC(ci_test=test, variant="parallel", n_jobs=2, show_progress=False).fit(df)
    assert set(est.causal_graph_.nodes()) == set(NAMES)
    assert budget.spent <= 5.0 and len(budget.ledger) == test.private.n_released >= 6
    details = [r["details"] for r in budget.ledger]
    assert len(details) == len(set(details))        # never charged twice for one question


def test_pgmpy_estimators_pc_estimate_with_a_callable():
    pytest.importorskip("pgmpy")
    pd = pytest.importorskip("pandas")
    import warnings

    from pgmpy.estimators import PC as OldPC

    df = pd.DataFrame(four_node(), columns=NAMES)
    budget = PrivacyBudget(epsilon=5.0)
    test = pgmpy_ci_test(df, budget=budget, bounds=BOUNDS, rng=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        model = OldPC(df).estimate(ci_test=test, variant="stable", show_progress=False)
    assert set(model.nodes()) <= set(NAMES) and budget.spent <= 5.0
    assert len(budget.ledger) >= 6


def test_tigramite_pc_runs_with_one_budget():
    pytest.importorskip("tigramite")
    from tigramite.data_processing import DataFrame
    from tigramite.pcmci import PCMCI

    budget = PrivacyBudget(epsilon=5.0)
    test = tigramite_ci_test(budget=budget, bounds=BOUNDS, rng=1)
    pcmci = PCMCI(DataFrame(four_node(), var_names=NAMES), cond_ind_test=test, verbosity=0)
    out = pcmci.run_pcalg_non_timeseries_data(pc_alpha=0.05)
    assert out["graph"].shape[:2] == (4, 4)
    engine = pcmci.cond_ind_test.private      # PCMCI deep-copies the test; the budget is shared
    assert engine.budget is budget
    assert budget.spent <= 5.0 and len(budget.ledger) == engine.n_released >= 6
    with pytest.raises(ValueError, match="lag 0"):
        pcmci.cond_ind_test.run_test([(0, -1)], [(1, 0)], [])


def test_pgmpy_labels_are_labels_not_positions():
    pytest.importorskip("pgmpy")
    pd = pytest.importorskip("pandas")
    data = four_node()
    df = pd.DataFrame(data, columns=[3, 2, 1, 0])     # integer labels, not positions
    test = oracle_test(data)
    b = PrivacyBudget(epsilon=1.0)
    ci = pgmpy_ci_test(df, budget=b, bounds=BOUNDS, epsilon_per_test=0.1, test=test)
    assert ci(3, 0, [1], significance_level=0.05) is True     # A _||_ D | C
    assert test.calls[-1][:3] == (0, 3, (2,))
    with pytest.raises(ValueError, match="not a column"):
        ci("A", 0, [])


@pytest.mark.parametrize("split", ["levels", "halves", "tests"])
def test_every_split_rule_recovers_the_oracle_graph_within_budget(split):
    data = four_node()
    res = pc(data, epsilon=1.0, bounds=BOUNDS, test=oracle_test(data), split=split,
             method="per-test")
    edges = {frozenset(e) for e in zip(*np.nonzero(np.triu(res.adjacency)))}
    assert edges == TRUE_SKELETON and res.budget.spent <= 1.0
    assert not res.refused and all(e > 0 for e in res.level_epsilon.values())


def test_public_z_options_reach_each_conditional_test(monkeypatch):
    """Per-column z_center / z_scale: each conditional test gets its conditioning columns'
    values; unconditional tests get none (privgcm refuses z_scale without z)."""
    import sys
    import privci.causal  # noqa: F401  (loads privci.gcm)
    from privci.causal import pc
    G = sys.modules["privci.gcm"]
    seen = []
    real = G.privgcm

    def spy(x, y, z=None, **kw):
        seen.append((None if z is None else z.shape[1], kw.get("z_center"), kw.get("z_scale")))
        return real(x, y, z, **kw)

    monkeypatch.setattr(G, "privgcm", spy)
    rng = np.random.default_rng(3)
    x0 = rng.normal(size=3000)
    x1 = x0 + 0.3 * rng.normal(size=3000)
    data = np.column_stack([x0, 2.0 * x1, 3.0 * (x1 + 0.3 * rng.normal(size=3000))]) / 4
    pc(data, epsilon=300.0, bounds=2.0, rng=1, z_center=[0.0, 0.5, -0.5],
       z_scale=[1.0, 2.0, 3.0], method="per-test")
    assert any(s[0] is None for s in seen) and any(s[0] is not None for s in seen)
    for d, zc, zs in seen:
        if d is None:
            assert zc is None and zs is None
        else:
            assert len(zc) == d and len(zs) == d and set(zs) <= {1.0, 2.0, 3.0}


# --- issue 24: the release-once default and the user stumbles --------------------------------


def test_pc_defaults_to_one_release():
    import inspect
    assert inspect.signature(pc).parameters["method"].default == "release"
    assert '``method="release"`` (default)' in pc.__doc__
    rng = np.random.default_rng(4)
    n = 6000
    a, b = rng.normal(size=n), rng.normal(size=n)
    c = (a + b) / 1.5 + 0.5 * rng.normal(size=n)
    res = pc(np.column_stack([a, b, c]), epsilon=5.0, bounds=4.0, rng=2)
    assert len(res.budget.ledger) == 1 and res.budget.ledger[0]["test"] == "privci.release"
    assert res.table is not None and res.n_tests >= 3
    assert res.edges() == [(0, "->", 2), (1, "->", 2)]


def test_one_on_exhausted_default():
    import inspect
    assert inspect.signature(pc).parameters["on_exhausted"].default == "dependent"
    assert inspect.signature(PrivateCITest).parameters["on_exhausted"].default == "dependent"
    # an adapter's budget that runs out gives a graph back instead of raising mid-search
    pytest.importorskip("causallearn")
    from causallearn.search.ConstraintBased.PC import pc as cl_pc
    register_causallearn()
    data = four_node()
    budget = PrivacyBudget(epsilon=1.0)
    cg = cl_pc(data, 0.05, "privgcm", budget=budget, bounds=BOUNDS, max_tests=3,
               test=oracle_test(data), show_progress=False)
    assert cg.G.graph.shape == (4, 4) and len(budget.ledger) == 3


@pytest.mark.parametrize("kwargs, exc, match", [
    ({"ridge_lamda": 5.0}, TypeError, "ridge_lamda"),                 # misspelled
    ({"ridge_lambda": 2.0}, ValueError, "regression='krr'"),          # KRR option, spline fit
    ({"kernel_sigma": 2.0}, ValueError, "regression='krr'"),
    ({"z_scale": [1.0, 2.0]}, ValueError, "z_scale"),                 # wrong length
    ({"bounds": "auto"}, ValueError, "method='release'"),
    ({"centers": "auto"}, ValueError, "method='release'"),
])
def test_per_test_options_checked_before_any_charge(kwargs, exc, match):
    outer = PrivacyBudget(epsilon=50.0)
    args = {"epsilon": 10.0, "bounds": BOUNDS, "method": "per-test", "rng": 1, "budget": outer,
            **kwargs}
    with pytest.raises(exc, match=match):
        pc(four_node(), **args)
    assert outer.ledger == []


@pytest.mark.parametrize("kwargs, match", [
    ({"knots": 0}, "knots"), ({"untrusted": "drop"}, "untrusted"),
    ({"responses": "cubic"}, "responses"), ({"auto_share": 1.5}, "auto_share"),
    ({"ridge_lambda": 2.0}, "ridge_lambda"), ({"split": "tests"}, "split"),
    ({"on_exhausted": "raise"}, "on_exhausted"), ({"bounds": "aut"}, "bounds"),
])
def test_release_options_checked_before_any_charge(kwargs, match):
    outer = PrivacyBudget(epsilon=50.0)
    args = {"epsilon": 10.0, "bounds": BOUNDS, "rng": 1, "budget": outer, **kwargs}
    with pytest.raises((TypeError, ValueError), match=match):
        pc(four_node(), **args)
    assert outer.ledger == []


def test_auto_bounds_and_centres_on_unstandardised_data():
    rng = np.random.default_rng(8)
    n = 8000
    a, b = rng.normal(size=n), rng.normal(size=n)
    c = (a + b) / 1.5 + 0.5 * rng.normal(size=n)
    X = np.column_stack([50 + 10 * a, -30 + 0.01 * b, 1000 + 200 * c])   # far from 0, +-4
    res = pc(X, epsilon=8.0, bounds="auto", centers="auto", rng=3)
    assert res.edges() == [(0, "->", 2), (1, "->", 2)]
    assert res.table.auto_epsilon == pytest.approx(0.8) and res.budget.spent <= 8.0
    assert "private centres/bounds" in res.guarantee and not any("clipping" in c
                                                                  for c in res.caveats)
    # the same data with the default centres 0 and bounds 4: the clipping is named
    bad = pc(X, epsilon=8.0, bounds=4.0, rng=3)
    assert sum("clipping bound" in c for c in bad.caveats) == 3


def test_causallearn_accepts_a_dataframe_and_a_shared_release():
    pytest.importorskip("causallearn")
    pd = pytest.importorskip("pandas")
    import privci
    from causallearn.search.ConstraintBased.FCI import fci
    from causallearn.search.ConstraintBased.PC import pc as cl_pc
    register_causallearn()
    df = pd.DataFrame(four_node(n=4000), columns=NAMES)
    # causal-learn's own search asserts a numpy array: our test takes the frame's names
    with pytest.raises(AssertionError):
        cl_pc(df, 0.05, "privgcm", budget=PrivacyBudget(epsilon=5.0), bounds=BOUNDS, rng=1,
              show_progress=False)
    budget = PrivacyBudget(epsilon=5.0)
    cit = register_causallearn()(df, budget=budget, bounds=BOUNDS, rng=1)
    assert cit.private.names == NAMES and budget.ledger == []
    X = df.to_numpy()
    # release once, then PC and FCI ask any number of questions without another charge
    outer = PrivacyBudget(epsilon=50.0)
    # PC's resolution (knots=6), at which its F1 was measured (the release's own rule
    # picks a finer basis here, whose noise drowns C | D, a response explained at
    # R^2 = 0.97)
    tab = privci.release(df, epsilon=50.0, bounds=BOUNDS, rng=2, budget=outer, knots=6)
    cg = cl_pc(X, 0.05, "privgcm", table=tab, show_progress=False)
    fci(X, "privgcm", 0.05, table=tab, show_progress=False, verbose=False)
    assert len(outer.ledger) == 1 and tab.n_queries >= 6
    edges = {frozenset(map(int, e)) for e in zip(*np.nonzero(np.triu(cg.G.graph != 0)))}
    assert TRUE_SKELETON <= edges
    with pytest.raises(ValueError, match="do not apply"):
        cl_pc(X, 0.05, "privgcm", table=tab, bounds=4.0, show_progress=False)


def test_tigramite_list_pc_alpha_refused_before_any_charge():
    pytest.importorskip("tigramite")
    from tigramite.data_processing import DataFrame
    from tigramite.pcmci import PCMCI

    budget = PrivacyBudget(epsilon=5.0)
    test = tigramite_ci_test(budget=budget, bounds=BOUNDS, rng=1)
    pcmci = PCMCI(DataFrame(four_node()), cond_ind_test=test, verbosity=0)
    with pytest.raises(ValueError, match="one number as pc_alpha"):
        pcmci.run_pcalg_non_timeseries_data(pc_alpha=[0.01, 0.05])
    assert budget.ledger == []


def test_pgmpy_and_tigramite_on_a_release():
    import privci
    pd = pytest.importorskip("pandas")
    data = four_node(n=4000)
    tab = privci.release(data, epsilon=5.0, bounds=BOUNDS, rng=2)
    pytest.importorskip("tigramite")
    from tigramite.data_processing import DataFrame
    from tigramite.pcmci import PCMCI
    pcmci = PCMCI(DataFrame(data), cond_ind_test=tigramite_ci_test(table=tab), verbosity=0)
    pcmci.run_pcalg_non_timeseries_data(pc_alpha=0.05)
    assert pcmci.cond_ind_test.private.n_released >= 6
    pytest.importorskip("pgmpy")
    from pgmpy.causal_discovery import PC
    df = pd.DataFrame(data, columns=NAMES)
    test = pgmpy_ci_test(df, table=tab)
    PC(ci_test=test, variant="stable", show_progress=False).fit(df)
    assert test.private.n_released >= 6


def test_power_rule_keeps_edges_that_no_adequate_test_removed():
    rng = np.random.default_rng(10)
    n = 3000
    a, b = rng.normal(size=n), rng.normal(size=n)
    c = (a + b) / 1.5 + 0.5 * rng.normal(size=n)
    X = np.column_stack([a, b, c, rng.normal(size=n)])
    from privci.release import DEFAULT_POWER_RULE
    add = dict(statistics="additive")     # the additive rung (the linear one: test_causal_untested)
    low = pc(X, epsilon=0.2, bounds=4.0, rng=1, plan_orders=False, **add)
    assert any("power rule" in c for c in low.caveats)
    assert low.adjacency.sum() >= pc(X, epsilon=0.2, bounds=4.0, rng=1,
                                     power_rule=None, **add).adjacency.sum()
    # every removal was made by a test that could see a partial correlation of 0.45
    for (i, j), s in low.sepsets.items():
        assert low.table.test(i, j, list(s)).detectable_correlation <= DEFAULT_POWER_RULE
    # plan_orders (default): plan_pc says no order is resolvable here, so only order 0
    planned = pc(X, epsilon=0.2, bounds=4.0, rng=1, **add)
    assert planned.n_tests == 6 and {len(k[2]) for k in planned.pvalues} == {0}
    assert any("plan_pc" in c for c in planned.caveats)


def test_plan_orders_skips_only_unresolvable_orders():
    from privci.plan import plan_pc
    from privci.release import DEFAULT_POWER_RULE, PLAN_MARGIN
    rng = np.random.default_rng(3)
    X = rng.normal(size=(10_000, 8))
    res = pc(X, epsilon=2.0, bounds=4.0, rng=1)
    pl = plan_pc(10_000, 8, 2.0, power_rule=PLAN_MARGIN * DEFAULT_POWER_RULE, max_order=6,
                 draws=3)
    last = max(o["order"] for o in pl.orders if o["resolvable"])
    assert max(len(k[2]) for k in res.pvalues) <= last
    with pytest.raises(ValueError, match="plan_orders"):
        pc(X, epsilon=2.0, bounds=4.0, plan_orders="yes")
