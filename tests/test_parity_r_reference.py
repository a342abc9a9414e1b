"""Parity with R's GeneralisedCovarianceMeasure 0.2.0 (stored outputs in ../shared/r-parity).

Deterministic quantities (univariate statistics and p-values, KRR residuals
for fixed and CV-chosen lambda, multivariate statistics) must match to an
absolute 1e-9.  Multivariate p-values are Monte Carlo: they must lie within
4 * sqrt(p_R (1 - p_R) / nsim) + 2 / nsim of R's (a 4-sigma band: a correct
implementation fails it with probability below 1e-4 per case).
"""

import json
import os

import numpy as np
import pytest

import privci
from conftest import SHARED

REF = os.path.join(SHARED, "r-parity", "gcm_reference.json")
pytestmark = pytest.mark.skipif(not os.path.exists(REF), reason=f"{REF} not found")


def _cases():
    if not os.path.exists(REF):
        return []
    with open(REF) as fh:
        return json.load(fh)["cases"]


CASES = _cases()
TOL = 1e-9


def run_case(case, rng=0):
    """Run one stored case through privci; return (result, r_output)."""
    inp, out = case["inputs"], case["r_output"]
    kind = case["kind"]
    if kind == "gcm_residuals":
        res = privci.gcm_from_residuals(inp["resid_x"], inp["resid_y"])
    elif kind == "gcm_residuals_multivariate":
        res = privci.gcm_from_residuals(inp["resid_x"], inp["resid_y"], n_sim=inp["nsim"], rng=rng)
    elif kind == "gcm_krr_fixed":
        p = inp["regr_pars"]
        res = privci.gcm(inp["X"], inp["Y"], inp["Z"], kernel_sigma=p["sigma"], ridge_lambda=p["lambda"])
    elif kind == "gcm_krr_cv_default":
        p = inp["regr_pars"]
        assert p["lambdas_cv"] == pytest.approx(list(10.0 ** np.arange(-6, 5)))
        res = privci.gcm(inp["X"], inp["Y"], inp["Z"])  # package defaults = R's defaults
    else:  # pragma: no cover
        raise AssertionError(kind)
    return res, out


def test_reference_has_39_cases():
    assert len(CASES) == 39


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_gcm_matches_r(case):
    res, out = run_case(case)
    assert abs(res.statistic - out["statistic"]) <= TOL
    if case["kind"] == "gcm_residuals_multivariate":
        p_r, nsim = out["p_value"], case["inputs"]["nsim"]
        assert res.n_sim == nsim
        assert abs(res.pvalue - p_r) <= 4 * np.sqrt(p_r * (1 - p_r) / nsim) + 2 / nsim
    else:
        assert abs(res.pvalue - out["p_value"]) <= TOL
    if "resid_x" in out:
        assert np.max(np.abs(res.resid_x[:, 0] - np.asarray(out["resid_x"]))) <= TOL
        assert np.max(np.abs(res.resid_y[:, 0] - np.asarray(out["resid_y"]))) <= TOL
    if "reject" in out:
        assert (res.pvalue < 0.05) == out["reject"]


def max_deviations():
    """Largest absolute deviation per kind (used for the closing note)."""
    dev = {}
    for case in CASES:
        res, out = run_case(case)
        k = case["kind"]
        d = dev.setdefault(k, {"statistic": 0.0, "pvalue": 0.0, "resid": 0.0})
        d["statistic"] = max(d["statistic"], abs(res.statistic - out["statistic"]))
        d["pvalue"] = max(d["pvalue"], abs(res.pvalue - out["p_value"]))
        if "resid_x" in out:
            d["resid"] = max(d["resid"], np.max(np.abs(res.resid_x[:, 0] - out["resid_x"])),
                             np.max(np.abs(res.resid_y[:, 0] - out["resid_y"])))
    return dev


if __name__ == "__main__":
    for k, v in max_deviations().items():
        print(k, {a: f"{b:.2e}" for a, b in v.items()})
