"""privci.causal.pc on the linear rung (issue 36): untested edges, the test cap, the
majority orientation, and the table answering as the run did."""

import numpy as np
import pytest

from privci._pc import PCResult, _orient
from privci.causal import pc
from privci.plan import plan_pc
from privci.release import ReleasedCovariance


def _chain(n, p=6, seed=0):
    """x0 -> x1 -> x2 -> ... (a chain of p standardised columns)."""
    rng = np.random.default_rng(seed)
    X = np.zeros((n, p))
    X[:, 0] = rng.normal(size=n)
    for k in range(1, p):
        X[:, k] = 0.8 * X[:, k - 1] + rng.normal(size=n)
    return (X - X.mean(axis=0)) / X.std(axis=0)


def test_an_unresolvable_run_says_every_edge_is_untested():
    X = np.random.default_rng(1).normal(size=(1000, 12))
    plan = plan_pc(1000, 12, 1.0)
    assert plan.power_class == "inadequate" and "complete graph" in plan.untested
    res = pc(X, epsilon=1.0, bounds=4.0, rng=1)
    m = int(res.adjacency.sum() // 2)
    # (nearly) the complete graph, and every edge of it untested
    assert m >= 60 and len(res.untested) == m and res.edges("found") == []
    text = repr(res)
    assert text.startswith("PCResult(found=[none]") and f"{m} of {m} edges" in text
    assert "not evidence of an edge" in text
    assert res.caveats[0].startswith(f"{m} of the {m} edges are untested")
    assert all(res.untested_reasons[e] for e in res.untested)


def test_a_resolvable_run_finds_its_edges():
    X = _chain(20_000)
    assert plan_pc(20_000, 6, 5.0).power_class == "adequate"
    res = pc(X, epsilon=5.0, bounds=4.0, rng=2)
    skeleton = {(i, j) for i in range(6) for j in range(i + 1, 6) if res.adjacency[i, j]}
    assert skeleton == {(k, k + 1) for k in range(5)}
    assert res.untested == () and "untested" not in repr(res)
    assert res.statistics == "linear" and isinstance(res.table, ReleasedCovariance)
    assert len(res.budget.ledger) == 1 and res.budget.spent <= 5.0
    assert res.edges("found") == res.edges() and res.edges("untested") == []
    with pytest.raises(ValueError, match="which"):
        res.edges("some")


def test_the_table_answers_the_runs_query_the_same_way():
    X = _chain(10_000, p=4)
    res = pc(X, epsilon=3.0, bounds=4.0, rng=3)
    assert res.table.assumptions == {"assume_linear": True}
    for (i, j, s), pv in res.pvalues.items():
        ans = res.table.test(i, j, list(s))
        # the same answer (the run batched its queries: equal up to rounding in the last bit)
        assert ans.pvalue == pytest.approx(pv, rel=1e-12, abs=1e-15)
        assert bool(s) == any("assume_linear" in a for a in ans.assumptions)
    # the additive rung's table likewise (assume_additive, assume_smooth)
    add = pc(X, epsilon=3.0, bounds=4.0, rng=3, statistics="additive")
    assert add.table.assumptions == {"assume_additive": True, "assume_smooth": True}
    key = next(k for k in add.pvalues if len(k[2]) == 1)
    assert add.table.test(key[0], key[1], list(key[2])).pvalue == add.pvalues[key]


def test_the_test_cap_is_public_reported_and_keeps_edges_untested():
    X = _chain(5000, p=8)
    full = pc(X, epsilon=2.0, bounds=4.0, rng=4, plan_orders=False)
    capped = pc(X, epsilon=2.0, bounds=4.0, rng=4, plan_orders=False, max_tests=40)
    assert full.max_tests == 5000 and full.n_tests <= 5000
    assert capped.max_tests == 40 and capped.n_tests <= 40 < full.n_tests
    assert "max_tests=40" in capped.guarantee and "of at most 40" in repr(capped)
    assert any("test cap" in c for c in capped.caveats)
    assert any("test cap" in r for rs in capped.untested_reasons.values() for r in rs)
    # a capped run keeps at least the edges of the full one
    assert np.all(capped.adjacency >= full.adjacency)
    with pytest.raises(ValueError, match="max_tests"):
        pc(X, epsilon=2.0, bounds=4.0, max_tests=0)


def test_bounded_work_at_twelve_variables():
    """A dense, unresolvable start (every order would be asked of a complete graph without
    the plan and the cap): the cap holds and the run stays within a few seconds."""
    import time
    X = np.random.default_rng(6).normal(size=(10_000, 12))
    t0 = time.perf_counter()
    res = pc(X, epsilon=0.05, bounds=4.0, rng=6, plan_orders=False, power_rule=None,
             max_tests=2000)
    assert res.n_tests <= 2000
    assert time.perf_counter() - t0 < 30.0       # loose: a shared 2-core machine


@pytest.mark.parametrize("kw, match", [
    (dict(statistics="quadratic"), "statistics"), (dict(clip=2.0), "clip"),
    (dict(statistics="additive", clip=0.5), "clip"), (dict(blocks=2), "blocks"),
    (dict(orientation="first"), "orientation"), (dict(max_tests=1.5), "max_tests"),
])
def test_release_options_validated_before_any_charge(kw, match):
    from privci.budget import PrivacyBudget
    budget = PrivacyBudget(2.0)
    with pytest.raises((ValueError, TypeError), match=match):
        pc(_chain(500, p=3), epsilon=1.0, bounds=4.0, budget=budget, **kw)
    assert budget.spent == 0


def test_majority_orientation_leaves_a_conflict_undirected():
    # 0 - 2 - 1 and 1 - 2 - 3 are triples with 2 as a collider, and 0 - 3 - 1... a conflict:
    # two colliders would orient 2 - 3 both ways
    adj = np.zeros((4, 4), dtype=bool)
    for a, b in [(0, 2), (1, 2), (2, 3), (1, 3)]:
        adj[a, b] = adj[b, a] = True
    colliders = {(0, 2, 1): True, (0, 2, 3): True, (1, 3, 2): False}
    # triples of this skeleton: (0, 2, 1), (0, 2, 3) and (1, ..) ; mark (2, 3, ?) below
    g_first = _orient(adj, {}, colliders=colliders, conflicts="first")
    g_und = _orient(adj, {}, colliders=colliders, conflicts="undirected")
    # 0 -> 2 <- 1 and 0 -> 2 <- 3: both conflicts-free heads stand
    assert (g_und[0, 2], g_und[2, 0]) == (-1, 1)
    assert (g_und[1, 2], g_und[2, 1]) == (-1, 1) and (g_und[3, 2], g_und[2, 3]) == (-1, 1)
    # now a real conflict: (2, 3, x) would orient 2 -> 3 as well
    adj2 = np.zeros((5, 5), dtype=bool)
    for a, b in [(0, 2), (2, 3), (3, 4)]:
        adj2[a, b] = adj2[b, a] = True
    conflict = {(0, 2, 3): True, (2, 3, 4): True}      # 0 -> 2 <- 3 and 2 -> 3 <- 4
    first = _orient(adj2, {}, colliders=conflict, conflicts="first")
    und = _orient(adj2, {}, colliders=conflict, conflicts="undirected")
    assert first[2, 3] != first[3, 2]                  # the first orientation won
    assert und[2, 3] == und[3, 2] == -1                # the conflict is left undirected
    assert (und[0, 2], und[2, 0]) == (-1, 1) and (und[4, 3], und[3, 4]) == (-1, 1)
    assert g_first.shape == (4, 4)


def test_pcresult_without_untested_prints_as_before():
    from privci.budget import PrivacyBudget
    adj = np.array([[False, True], [True, False]])
    res = PCResult(adjacency=adj, directed=np.where(adj, -1, 0).astype(np.int8), names=["a", "b"],
                   sepsets={}, pvalues={}, level_epsilon={}, n_tests=1, refused=(),
                   epsilon=1.0, alpha=0.05, budget=PrivacyBudget(1.0), guarantee="")
    assert repr(res).startswith("PCResult(edges=[a -- b]")
