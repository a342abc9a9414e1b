"""pc(method="sieve"): Priv-PC's sparse-vector sieve and examination (issue 24).

Definitional checks: the budget charged is what the proof says (one sieve epsilon per
AboveThreshold instance, one examination epsilon per above-threshold answer, never more
than the total), the noise scales are 2/(k eps1) and 4/(k eps1) for the threshold and the
queries and 1/(k eps2) for the examination, the query's sensitivity is 1/k, and every
option is validated before anything is charged.
"""

import numpy as np
import pytest

import privci.causal as C
from privci.budget import PrivacyBudget
from privci.causal import _BlockVotes, pc, sieve_epsilons


def chain(n=4000, seed=0):
    rng = np.random.default_rng(seed)
    a = rng.normal(size=n)
    b = 0.8 * a + 0.6 * rng.normal(size=n)
    c = 0.8 * b + 0.6 * rng.normal(size=n)
    return np.column_stack([a, b, c])


def test_sieve_finds_a_chain_and_charges_what_the_proof_says():
    X = chain()
    res = pc(X, method="sieve", epsilon=6.0, bounds=4.0, rng=3)
    assert res.adjacency.astype(int).tolist() == [[0, 1, 0], [1, 0, 1], [0, 1, 0]]
    split = sieve_epsilons(6.0, 3, C.SIEVE_EXAMINE_SHARE)
    kinds = [r["test"] for r in res.budget.ledger]
    n_inst, n_exam = kinds.count("AboveThreshold"), kinds.count("examination")
    assert set(kinds) <= {"AboveThreshold", "examination"}
    # every examination follows an above-threshold answer, which closes its instance
    assert n_exam <= n_inst <= n_exam + 1
    assert res.budget.spent == pytest.approx(n_inst * split["sieve"] + n_exam * split["examine"])
    assert res.budget.spent <= 6.0
    assert "AboveThreshold" in res.guarantee and res.level_epsilon["sieve"] == split["sieve"]


def test_sieve_budget_runs_out_and_keeps_edges():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(3000, 4))                 # every edge should go
    res = pc(X, method="sieve", epsilon=2.0, bounds=4.0, rng=1, max_removals=2)
    split = sieve_epsilons(2.0, 2, C.SIEVE_EXAMINE_SHARE)
    assert res.budget.spent <= 2.0 + 1e-12
    assert res.budget.spent <= 2 * (split["sieve"] + split["examine"]) + 1e-12
    # at most two removals were paid for: at least 6 - 2 edges stay
    assert res.adjacency[np.triu_indices(4, 1)].sum() >= 4
    assert any("ran out" in c for c in res.caveats)


def test_sieve_noise_scales(monkeypatch):
    calls = []
    import privci.mechanisms as M
    real = M.laplace_mechanism

    def spy(values, sensitivity, epsilon, rng=None, **kw):
        calls.append((float(sensitivity), float(epsilon)))
        return real(values, sensitivity, epsilon, rng, **kw)

    monkeypatch.setattr(M, "laplace_mechanism", spy)
    X = chain(n=2000)
    res = pc(X, method="sieve", epsilon=3.0, bounds=4.0, rng=0, block_rows=100)
    del res
    k = 2000 // 100
    e1 = sieve_epsilons(3.0, 3, C.SIEVE_EXAMINE_SHARE)["sieve"]
    e2 = sieve_epsilons(3.0, 3, C.SIEVE_EXAMINE_SHARE)["examine"]
    scales = {round(s / e, 9) for s, e in calls}
    assert round(2.0 / (k * e1), 9) in scales          # threshold: Lap(2 Delta / eps1)
    assert round(4.0 / (k * e1), 9) in scales          # queries: Lap(4 Delta / eps1)
    assert scales <= {round(2.0 / (k * e1), 9), round(4.0 / (k * e1), 9),
                      round(1.0 / (k * e2), 9)}


def test_block_vote_sensitivity_is_one_over_k():
    X = chain(n=2000, seed=4)
    common = dict(centers=np.zeros(3), bounds=np.full(3, 4.0), block_rows=100, knots=4,
                  responses="quadratic", alpha=0.05)
    v = _BlockVotes(X, **common)
    assert v.k == 20
    for row in (0, 777, 1999):
        Y = X.copy()
        Y[row] = [4.0, -4.0, 4.0]                  # replace one row by an extreme one
        w = _BlockVotes(Y, **common)
        for q in ((0, 2, ()), (0, 2, (1,)), (0, 1, ())):
            assert abs(v(*q) - w(*q)) <= 1.0 / v.k + 1e-12


@pytest.mark.parametrize("kw, msg", [
    (dict(block_rows=5), "block_rows"), (dict(max_removals=0), "max_removals"),
    (dict(examine_share=1.0), "examine_share"), (dict(threshold=0.0), "threshold"),
    (dict(knots=40), "knots"), (dict(responses="cubic"), "responses"),
    (dict(power_rule=0.3), "does not take"), (dict(split="halves"), "does not take"),
    (dict(centers="auto"), "centers"), (dict(alpha=1.5), "alpha"),
])
def test_sieve_validates_before_any_charge(kw, msg):
    outer = PrivacyBudget(10.0)
    with pytest.raises(ValueError, match=msg):
        pc(chain(n=500), method="sieve", epsilon=1.0, bounds=4.0, rng=0, budget=outer, **kw)
    assert outer.spent == 0.0


def test_sieve_outer_budget_charged_once():
    outer = PrivacyBudget(10.0)
    res = pc(chain(n=1000), method="sieve", epsilon=2.0, bounds=4.0, rng=0, budget=outer)
    assert outer.spent == pytest.approx(2.0) and len(outer.ledger) == 1
    assert res.budget.spent <= 2.0


def test_unknown_method_names_sieve():
    with pytest.raises(ValueError, match="sieve"):
        pc(chain(n=500), method="priv-pc", epsilon=1.0, bounds=4.0)


def test_adapter_table_path_applies_the_dependence_veto():
    """With table=, a question with |S| >= 2 answers min(linear pair, squared pairs)."""
    import privci
    from privci.causal import PrivateCITest
    rng = np.random.default_rng(7)
    n = 6000
    z1, z2 = rng.normal(size=n), rng.normal(size=n)
    x = rng.normal(size=n)
    y = x * x - 1 + 0.5 * z1 + 0.5 * rng.normal(size=n)      # no correlation with x
    X = np.column_stack([x, y, z1, z2]) / np.array([1.0, 2.0, 1.0, 1.0])
    tab = privci.release(X, epsilon=50.0, bounds=4.0, rng=3)
    lin = tab.test(0, 1, [2, 3], assume_additive=True).pvalue
    quad = tab._answer(0, 1, [2, 3], "quadratic", 2).pvalue
    eng = PrivateCITest(X, table=tab, power_rule=None)
    assert eng.pvalue(0, 1, (2, 3)) == pytest.approx(min(lin, quad))
    assert quad < 0.05 < lin        # the veto keeps this edge
