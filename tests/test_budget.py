"""The privacy budget: OpenDP's filter, refusals that spend nothing, ledger, threads, zCDP."""

import copy
import math
import pickle
import threading

import numpy as np
import pytest

from privci.budget import BudgetExceededError, PrivacyBudget, _charge


def test_pure_budget_accumulates_and_refuses_without_recording():
    b = PrivacyBudget(epsilon=1.0, name="d")
    assert b.spent == 0.0 and b.remaining == 1.0 and b.ledger == []
    s = b.charge(0.25, test="t1", details="first")
    assert "basic sequential composition" in s and "jointly 1-DP" in s
    b.charge(0.5, test="t2")
    assert b.spent == pytest.approx(0.75) and b.remaining == pytest.approx(0.25)
    with pytest.raises(BudgetExceededError, match="nothing was computed or released"):
        b.charge(0.3, test="t3")
    assert len(b.ledger) == 2 and b.spent == pytest.approx(0.75)
    # the refusal did not exhaust OpenDP's filter: a release that fits is still admitted
    b.charge(0.25, test="t4")
    assert b.spent <= 1.0 and len(b.ledger) == 3
    with pytest.raises(BudgetExceededError):
        b.charge(1e-9, test="t5")


def test_budget_exceeded_is_a_value_error_and_never_echoes_data():
    assert issubclass(BudgetExceededError, ValueError)
    b = PrivacyBudget(epsilon=0.5)
    with pytest.raises(ValueError) as err:
        b.charge(0.75, test="privgcm", details="a _||_ b")
    msg = str(err.value)
    assert "0.75" in msg and "privgcm" in msg


def test_ledger_records_cumulative_loss_and_prints():
    b = PrivacyBudget(epsilon=2.0)
    for i in range(4):
        b.charge(0.5, test="t", details=f"q{i}")
    led = b.ledger
    assert [r["index"] for r in led] == [1, 2, 3, 4]
    assert [r["cumulative"] for r in led] == pytest.approx([0.5, 1.0, 1.5, 2.0])
    assert all(r["charged"] >= r["epsilon"] for r in led)   # OpenDP's map never undercharges
    text = str(b)
    assert "q3" in text and "spent 2 of 2" in text
    df = b.ledger_frame()
    assert list(df["cumulative_epsilon"]) == pytest.approx([0.5, 1.0, 1.5, 2.0])
    led[0]["epsilon"] = 99.0                       # a copy: the budget's own ledger is intact
    assert b.ledger[0]["epsilon"] == 0.5


@pytest.mark.parametrize("k", [1, 3, 7, 10, 100, 240])
def test_per_test_epsilon_fits_exactly_k_releases(k):
    b = PrivacyBudget(epsilon=1.0)
    e = b.per_test_epsilon(k)
    assert 0.0 < e <= 1.0 / k and e > (1.0 / k) * (1 - 1e-9)
    for _ in range(k):
        b.charge(e, test="t")
    assert b.spent <= 1.0
    with pytest.raises(BudgetExceededError):
        b.charge(e, test="one too many")


def test_per_test_epsilon_share():
    b = PrivacyBudget(epsilon=4.0)
    assert b.per_test_epsilon(2, share=0.5) == pytest.approx(1.0)
    with pytest.raises(ValueError, match="share"):
        b.per_test_epsilon(2, share=0.0)


def test_zcdp_budget_converts_with_opendp_and_beats_basic_composition_for_many_tests():
    z = PrivacyBudget(epsilon=1.0, delta=1e-6)
    assert z.composition == "zcdp" and 0.0 < z.rho < 1.0
    # crossover: fewer than ~20 tests favour basic composition, 100 tests favour zCDP
    assert z.per_test_epsilon(10) < 1.0 / 10
    assert z.per_test_epsilon(100) > 2.0 * (1.0 / 100)
    e = z.per_test_epsilon(100)
    for _ in range(100):
        s = z.charge(e, test="t")
    assert "zero-concentrated" in s and "(1, 1e-06)-DP" in s
    assert z.spent <= 1.0 and z.rho_spent <= z.rho
    with pytest.raises(BudgetExceededError):
        z.charge(1e-3, test="more")


def test_thread_safety_never_overspends():
    b = PrivacyBudget(epsilon=1.0)
    e = b.per_test_epsilon(50)
    admitted, refused = [], []

    def worker():
        for _ in range(20):
            try:
                b.charge(e, test="t")
                admitted.append(1)
            except BudgetExceededError:
                refused.append(1)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(admitted) == 50 and len(refused) == 30
    assert len(b.ledger) == 50 and b.spent <= 1.0


def test_budget_is_never_copied():
    b = PrivacyBudget(epsilon=1.0)
    assert copy.copy(b) is b and copy.deepcopy({"b": b})["b"] is b
    with pytest.raises(TypeError, match="cannot be pickled"):
        pickle.dumps(b)


@pytest.mark.parametrize("kwargs, exc, match", [
    ({"epsilon": -1.0}, ValueError, "epsilon"),
    ({"epsilon": math.inf}, ValueError, "epsilon"),
    ({"epsilon": 1.0, "composition": "rdp"}, ValueError, "composition"),
    ({"epsilon": 1.0, "composition": "zcdp"}, ValueError, "delta"),
    ({"epsilon": 1.0, "delta": 1.5}, ValueError, "delta"),
    ({"epsilon": 1.0, "delta": "small"}, TypeError, "delta"),
    ({"epsilon": 1.0, "delta": 1e-6, "composition": "pure"}, ValueError, "delta"),
    ({"epsilon": 1.0, "name": 3}, TypeError, "name"),
])
def test_constructor_validation(kwargs, exc, match):
    with pytest.raises(exc, match=match):
        PrivacyBudget(**kwargs)


def test_charge_validation_and_module_level_charge():
    b = PrivacyBudget(epsilon=1.0)
    with pytest.raises(ValueError, match="epsilon"):
        b.charge(0.0, test="t")
    with pytest.raises(TypeError, match="test"):
        b.charge(0.1, test=3)
    assert _charge(None, 0.5, test="t") is None
    with pytest.raises(TypeError, match="budget"):
        _charge(1.0, 0.5, test="t")
    assert "charged epsilon = 0.5" in _charge(b, 0.5, test="t")
    assert b.spent == 0.5


def test_privgcm_charges_the_budget_before_computing(monkeypatch):
    import importlib

    import privci

    gcm_module = importlib.import_module("privci.gcm")   # privci.gcm is also the function

    import inspect

    if "budget" not in inspect.signature(privci.privgcm).parameters:
        pytest.skip("privgcm has no budget= yet")
    rng = np.random.default_rng(11)
    x, y, z = rng.normal(size=(3, 300))
    # epsilon 8: the spline rule (private z centre and scale) resolves n = 300 rows from
    # about 7 and refuses below (before any charge)
    b = PrivacyBudget(epsilon=10.0)
    res = privci.privgcm(x, y, z, epsilon=8.0, x_bound=4, y_bound=4, rng=1, budget=b)
    assert len(b.ledger) == 1 and b.spent == pytest.approx(8.0)
    assert "PrivacyBudget" in repr(res.privacy)   # the composition statement is on the record
    # spy on the first step that reads the data: a refused release never reaches it
    calls = []
    target = getattr(gcm_module, "_GCMInputs", None)
    if target is None or not hasattr(target, "transform"):
        pytest.skip("privgcm's data step is not where this test expects it")
    original = target.transform

    def spy(self, *a, **k):
        calls.append(1)
        return original(self, *a, **k)

    monkeypatch.setattr(target, "transform", spy)
    with pytest.raises(BudgetExceededError):
        privci.privgcm(x, y, z, epsilon=8.0, x_bound=4, y_bound=4, rng=1, budget=b)
    assert calls == [] and len(b.ledger) == 1
    privci.privgcm(x, y, None, epsilon=2.0, x_bound=4, y_bound=4, rng=1, budget=b)
    assert calls == [1] and b.spent <= 10.0
