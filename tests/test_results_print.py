"""What the printed results say next to the p-value (issue 37, items 5, 6 and 11).

* PrivCRT (and the CRT): the smallest attainable p-value, 1 / (m + 1), and that the test
  rejects at p <= alpha;
* a fail-safe p = 1 of the released regression: "fail-safe, not evidence" and why, on the
  p-value's own line;
* the non-private GCM from n = 3000 on: what is faster than the exact kernel regression.

The printed texts are built from the result's public fields only; the records below are
made by hand so that every branch is reached whatever the tests' own rules decide.
"""

import dataclasses

import numpy as np
import pytest

import privci
from privci.results import (CRTResult, GCMResult, PrivacyRecord, PrivateTestResult,
                            failsafe_reason, smallest_pvalue)

RECORD = PrivacyRecord(epsilon=1.0, mechanism="laplace", sensitivity=2.0, noise_scale=2.0,
                       hardened=False, ridge_lambda=None, kernel_sigma=None, bounds={},
                       guarantee="(statistic, pvalue) is 1-differentially private")


def _private(pvalue, fit_check=None, **kw):
    base = dict(statistic=4.26, pvalue=pvalue, alternative="two-sided", method="PrivGCM",
                n=442, privacy=RECORD, statistic_name="t", fit_check=fit_check)
    base.update(kw)
    return PrivateTestResult(**base)


def _pvalue_line(res):
    return next(line for line in repr(res).splitlines() if line.strip().startswith("pvalue="))


@pytest.mark.parametrize("fit_check, reason", [
    ({"certified": False, "resolvable": False, "columns": 3, "assume_additive": False},
     "the interactions of two or more columns of z cannot be certified (state "
     "assume_additive=True"),
    ({"certified": False, "resolvable": False, "columns": 3, "assume_additive": True},
     "cannot be resolved at this n, epsilon and number of columns of z"),
    ({"certified": False, "resolvable": False, "columns": 2, "assume": "additive"},
     "cannot be resolved at this n, epsilon and number of columns of z"),
    ({"certified": False, "resolvable": False, "columns": 1},
     "cannot be resolved at this n, epsilon and number of columns of z"),
    ({"certified": False, "resolvable": True, "columns": 1},
     "the nested fits disagree"),
])
def test_failsafe_is_named_on_the_pvalue_line(fit_check, reason):
    res = _private(1.0, fit_check)
    line = _pvalue_line(res)
    assert line.startswith("    pvalue=1  (fail-safe, not evidence: ")
    assert reason in line and res.failsafe in line
    assert res.fit_certified is False
    # the fit check's own line still follows
    assert "fit check: NOT certified" in repr(res)


@pytest.mark.parametrize("fit_check, pvalue", [
    ({"certified": True, "resolvable": True, "columns": 1}, 1.0),      # a genuine p = 1
    ({"certified": True, "resolvable": True, "columns": 1}, 0.03),
    (None, 1.0),                                                        # no released fit
])
def test_no_failsafe_note_when_the_fit_is_certified_or_absent(fit_check, pvalue):
    res = _private(pvalue, fit_check)
    assert res.failsafe is None
    assert "fail-safe" not in _pvalue_line(res)
    assert _pvalue_line(res) == f"    pvalue={pvalue:.6g},"


def test_failsafe_reason_needs_p_one():
    fc = {"certified": False, "resolvable": True}
    assert failsafe_reason(fc, 1.0) is not None
    assert failsafe_reason(fc, 0.5) is None           # not the fail-safe's value


def test_statistic_name_is_printed():
    assert "statistic=4.26 (t)," in repr(_private(0.2))
    assert "statistic=4.26," in repr(_private(0.2, statistic_name="statistic"))


@pytest.mark.parametrize("m", [9, 19, 49, 99])
def test_rank_tests_print_the_smallest_attainable_pvalue(m):
    res = _private((1 + 2.0) / (m + 1), statistic=2.0, statistic_name="rank", n_resamples=m)
    assert res.min_pvalue == 1.0 / (m + 1) == smallest_pvalue(m)
    line = _pvalue_line(res)
    assert (f"(the smallest attainable with {m} resamples is 1/{m + 1} = "
            f"{1.0 / (m + 1):.6g}; reject at level alpha when p <= alpha)") in line
    # other private tests have no such floor
    assert _private(0.2).min_pvalue is None


def test_crt_result_prints_its_smallest_pvalue():
    res = CRTResult(statistic=1.0, pvalue=0.01, alternative="two-sided", method="CRT", n=10,
                    n_resamples=199, resampled_statistics=np.zeros(199))
    assert res.min_pvalue == 1 / 200
    assert "pvalue=0.01  (the smallest attainable with 199 resamples is 1/200 = 0.005)" in \
        repr(res)


def test_privcrt_default_floor_is_alpha_and_rejects_at_p_le_alpha():
    """The README's PrivCRT call on a strong alternative: with m = 19 the p-value can be
    no smaller than 0.05, so only ``p <= 0.05`` rejects; the printed line says both."""
    rng = np.random.default_rng(0)
    n = 2000
    z = rng.normal(size=(n, 1))
    x = np.sin(z[:, 0]) + rng.normal(size=n)
    y = np.cos(z[:, 0]) + 0.8 * (x - np.sin(z[:, 0])) + rng.normal(size=n)
    mx = privci.GaussianModelX(lambda zz: np.sin(zz[:, 0]), 1.0)
    res = privci.privcrt(x, y, z, epsilon=2.0, model_x=mx, y_bound=5, x_residual_bound=4,
                         rng=1)
    assert res.n_resamples == 19 and res.min_pvalue == 0.05
    assert res.pvalue >= res.min_pvalue
    assert "smallest attainable with 19 resamples is 1/20 = 0.05" in _pvalue_line(res)
    more = privci.privcrt(x, y, z, epsilon=2.0, model_x=mx, y_bound=5, x_residual_bound=4,
                          rng=1, n_resamples=39)
    assert more.min_pvalue == 1 / 40 and "1/40 = 0.025" in _pvalue_line(more)


def test_gcm_note_from_large_n_on_after_the_exact_kernel_regression():
    base = dict(statistic=0.5, pvalue=0.6, alternative="two-sided", n=5000)
    cv = GCMResult(method="Generalised covariance measure test, kernel ridge regression, "
                          "lambda by 10-fold cross-validation over 11 values", **base)
    assert "cross-validated lambda (R's default)" in cv.note
    assert "kernel_approximation='rff', ridge_lambda=1e-5, center=True" in repr(cv)
    fixed = dataclasses.replace(cv, method="Generalised covariance measure test, kernel "
                                           "ridge regression, lambda 0.001")
    assert fixed.note is not None and "cross-validated" not in fixed.note
    rff = dataclasses.replace(cv, method="Generalised covariance measure test, kernel ridge "
                                         "regression on 512 random Fourier features, "
                                         "lambda 0.001, x and y centred")
    small = dataclasses.replace(cv, n=2999)
    plain = dataclasses.replace(cv, method="Generalised covariance measure test")
    for res in (rff, small, plain):
        assert res.note is None and "note:" not in repr(res)
