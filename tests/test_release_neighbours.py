"""Neighbour-harness configuration (issue 12's harness) for issue 24's releases.

* ``privci.release``: on neighbouring tables (one row replaced arbitrarily, extremes of
  float64 included) both calls return or raise the same error with the same warnings,
  and the un-noised upper triangle of the Gram matrices moves by at most the stated L1
  sensitivity V^2 + V.
* ``pc(method="sieve")``: the sieve's query (the share of blocks voting "independent")
  moves by at most 1/k, and whole runs on neighbours are indistinguishable (same error or
  both finite, same warnings).
* ``privci.release(statistics="linear")`` (issue 36, pc's default rung): the same
  indistinguishability, and the un-noised released moments (the upper triangle of
  sum f f^T, f = (1/2, u), without its public entry (0, 0)) move by at most
  ``covariance_sensitivity(V)`` in L1, at every clip; whole ``pc`` runs on neighbours
  are indistinguishable.
"""

import numpy as np
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import given
from hypothesis import strategies as st

import neighbours_util as nu
import privci
from privci.causal import _BlockVotes, pc
from privci.release import (_cov_features, _gram_int, _scaled, covariance_sensitivity,
                            hat_features, release_sensitivity)

PAIRS = nu.neighbours(min_n=20, max_n=120, shapes={"x": 3})
CENTERS = np.array([0.5, -1.0, 0.0])
BOUNDS = np.array([2.0, 3.0, 1e300])


def _search(check, max_examples):
    @settings(max_examples=max_examples, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck), print_blob=False)
    @given(pair=PAIRS)
    def run(pair):
        check(pair)

    with nu.tracking() as seen:
        run()
    nu.assert_enough_successes(seen)
    return seen


def _exact_upper(X, knots=6):
    F = hat_features(_scaled(X, CENTERS, BOUNDS), knots)
    return _gram_int(F) * (1.0 / float(1 << 32))


def test_release_neighbours_indistinguishable_and_within_sensitivity():
    sens = release_sensitivity(3)

    def check(pair):
        call = (lambda X: privci.release(X, epsilon=1.0, bounds=BOUNDS, centers=CENTERS,
                                         rng=1))
        a = nu.run_recorded(lambda: call(pair.a["x"]), released=lambda t: (t.gram.sum(),))
        b = nu.run_recorded(lambda: call(pair.b["x"]), released=lambda t: (t.gram.sum(),))
        nu.count_pair("privci.release", ok=a.kind == "ok" and b.kind == "ok")
        nu.assert_indistinguishable(a, b, repr(pair))
        if a.kind == "ok":
            ratio = nu.l1_ratio(_exact_upper(pair.a["x"]), _exact_upper(pair.b["x"]), sens)
            nu.count_pair("privci.release", ratio, pairs=0)
            assert nu.within(ratio), f"Gram change {ratio} x sensitivity; {pair!r}"

    _search(check, 40)


def test_sieve_query_within_one_over_k_and_runs_indistinguishable():
    def check(pair):
        va = _BlockVotes(pair.a["x"], CENTERS, BOUNDS, 10, 4, "quadratic", 0.05)
        vb = _BlockVotes(pair.b["x"], CENTERS, BOUNDS, 10, 4, "quadratic", 0.05)
        for q in ((0, 1, ()), (0, 1, [2]), (1, 2, [0])):
            ratio = abs(va(*q) - vb(*q)) * va.k
            nu.count_pair("sieve query", ratio, pairs=0)
            assert nu.within(ratio), f"sieve query moved {ratio}/k; {pair!r}"

        def run(X):
            return pc(X, method="sieve", epsilon=1.0, bounds=BOUNDS, centers=CENTERS,
                      rng=2, block_rows=10)
        a = nu.run_recorded(lambda: run(pair.a["x"]), released=lambda r: (r.budget.spent,))
        b = nu.run_recorded(lambda: run(pair.b["x"]), released=lambda r: (r.budget.spent,))
        nu.count_pair("pc(method='sieve')", ok=a.kind == "ok" and b.kind == "ok")
        nu.assert_indistinguishable(a, b, repr(pair))

    _search(check, 30)


@pytest.mark.parametrize("row", [[1e308, -1e308, 5e-324], [0.0, 0.0, 0.0]])
def test_sieve_query_hand_made_pair(row):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 3))
    Y = X.copy()
    Y[57] = row
    va = _BlockVotes(X, CENTERS, BOUNDS, 10, 4, "quadratic", 0.05)
    vb = _BlockVotes(Y, CENTERS, BOUNDS, 10, 4, "quadratic", 0.05)
    for q in ((0, 1, ()), (0, 1, [2])):
        assert abs(va(*q) - vb(*q)) <= 1.0 / va.k + 1e-12


def _exact_moments(X, clip):
    F = _cov_features(_scaled(X, CENTERS, clip * BOUNDS))
    iu = np.triu_indices(F.shape[1])
    keep = ~((iu[0] == 0) & (iu[1] == 0))
    return _gram_int(F)[keep] * (1.0 / float(1 << 32))


def test_linear_release_neighbours_indistinguishable_and_within_sensitivity():
    sens = covariance_sensitivity(3)

    def check(pair):
        for clip in (1.0, 0.375):
            call = (lambda X: privci.release(X, epsilon=1.0, bounds=BOUNDS, centers=CENTERS,
                                             rng=1, statistics="linear", clip=clip))
            a = nu.run_recorded(lambda: call(pair.a["x"]),
                                released=lambda t: (t.moments.sum(),))
            b = nu.run_recorded(lambda: call(pair.b["x"]),
                                released=lambda t: (t.moments.sum(),))
            nu.count_pair("privci.release(linear)", ok=a.kind == "ok" and b.kind == "ok")
            nu.assert_indistinguishable(a, b, repr(pair))
            if a.kind == "ok":
                ratio = nu.l1_ratio(_exact_moments(pair.a["x"], clip),
                                    _exact_moments(pair.b["x"], clip), sens)
                nu.count_pair("privci.release(linear)", ratio, pairs=0)
                assert nu.within(ratio), f"moment change {ratio} x sensitivity; {pair!r}"

        def run(X):
            return pc(X, epsilon=1.0, bounds=BOUNDS, centers=CENTERS, rng=2)
        a = nu.run_recorded(lambda: run(pair.a["x"]), released=lambda r: (r.budget.spent,))
        b = nu.run_recorded(lambda: run(pair.b["x"]), released=lambda r: (r.budget.spent,))
        nu.count_pair("pc(linear rung)", ok=a.kind == "ok" and b.kind == "ok")
        nu.assert_indistinguishable(a, b, repr(pair))

    _search(check, 30)


@pytest.mark.parametrize("row", [[1e308, -1e308, 5e-324], [np.inf, -np.inf, 0.0],
                                 [2.0, -3.0, 0.0]])
def test_linear_release_hand_made_pair(row):
    X = np.random.default_rng(1).normal(size=(50, 3))
    Y = X.copy()
    Y[7] = row
    with np.errstate(invalid="ignore"):
        change = float(np.abs(_exact_moments(X, 1.0) - _exact_moments(Y, 1.0)).sum())
    assert change <= covariance_sensitivity(3)
