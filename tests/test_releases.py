"""PrivacyRecord.releases (issue 22): every noisy release of a test, with its epsilon,
sensitivity, noise scale and mechanism.

Every mechanism call is counted (the Laplace, report-noisy-max, quantile and the
baselines' discrete Laplace mechanisms are wrapped where the package calls them): each call must appear in ``releases`` with
its epsilon and noise scale, and the releases, composed exactly as Fractions
(sequentially, the two halves of the spline fit in parallel), must spend at most the
call's epsilon.
"""

import importlib
from collections import Counter
from fractions import Fraction

import numpy as np
import pytest

import privci
from privci import _gcm_pipeline, _spline, _transform, baselines, bounds, mechanisms
from privci.results import PrivacyRecord, Release, composed_epsilon

# the modules (privci.crt and privci.gcm are also the names of functions)
crt = importlib.import_module("privci.crt")
gcm = importlib.import_module("privci.gcm")
N = 1500


@pytest.fixture(scope="module")
def data():
    gen = np.random.default_rng(5)
    z = gen.normal(size=(N, 2))
    x = np.sin(z[:, 0]) + gen.normal(size=N)
    y = np.cos(z[:, 1]) + gen.normal(size=N)
    return x, y, z


@pytest.fixture
def calls(monkeypatch):
    """A list of (epsilon, noise scale) of every mechanism call made during the test."""
    seen = []
    lap, rnm, quant = mechanisms.laplace_mechanism, mechanisms.report_noisy_max, bounds._quantile

    def laplace(values, sensitivity, epsilon, rng=None, **kw):
        out, info = lap(values, sensitivity, epsilon, rng, **kw)
        seen.append((float(epsilon), float(info.scale)))
        return out, info

    def noisy_max(scores, epsilon, rng=None):
        idx, info = rnm(scores, epsilon, rng)
        seen.append((float(epsilon), float(info.scale)))
        return idx, info

    def quantile(values, alpha, epsilon, candidates, rng, power=0.0):
        value, spent, scale = quant(values, alpha, epsilon, candidates, rng, power)
        seen.append((float(epsilon), float(scale)))
        return value, spent, scale

    dlap = baselines._discrete_laplace

    def discrete_laplace(epsilon, rng):
        noise, scale, hardened, mech = dlap(epsilon, rng)
        seen.append((float(epsilon), float(scale)))
        return noise, scale, hardened, mech

    monkeypatch.setattr(baselines, "_discrete_laplace", discrete_laplace)
    for mod in (mechanisms, gcm, _gcm_pipeline, _spline, _transform, baselines):
        if hasattr(mod, "laplace_mechanism"):
            monkeypatch.setattr(mod, "laplace_mechanism", laplace)
    monkeypatch.setattr(mechanisms, "report_noisy_max", noisy_max)
    monkeypatch.setattr(crt, "report_noisy_max", noisy_max)
    monkeypatch.setattr(bounds, "_quantile", quantile)
    return seen


MX = privci.GaussianModelX(lambda zz: np.sin(zz[:, 0]), 1.0)

# the spline cases: two columns of z need a stated model; assume="additive" (checked)
# resolves n = 1500 from epsilon about 2.0 with public z centre and scale
# (privci._spline.smallest_epsilon), more with private ones, and refuses below
CASES = {
    "spline public z": lambda x, y, z: privci.privgcm(
        x, y, z, epsilon=3.0, x_bound=4, y_bound=4, z_center=0.0, z_scale=1.0,
        assume="additive", rng=1),
    "spline auto z": lambda x, y, z: privci.privgcm(
        x, y, z, epsilon=3.0, x_bound=4, y_bound=4, assume="additive", rng=2),
    "spline auto z, bounds and centres": lambda x, y, z: privci.privgcm(
        x, y, z, epsilon=4.0, x_bound="auto", y_bound="auto", center_epsilon=0.2,
        assume="additive", rng=3),
    "krr auto bounds": lambda x, y, z: privci.privgcm(
        x, y, z, epsilon=2.0, x_bound="auto", y_bound="auto", regression="krr",
        kernel_approximation="rff", n_features=32, feature_rng=0, rng=4),
    "krr per row": lambda x, y, z: privci.privgcm(
        x, y, z, epsilon=1.0, x_bound=4, y_bound=4, regression="krr", n_blocks=None,
        kernel_approximation="rff", n_features=32, feature_rng=0, center_epsilon=0.1, rng=5),
    "unconditional": lambda x, y, z: privci.privgcm(
        x, y, epsilon=1.0, x_bound=4, y_bound=4, rng=6),
    "unconditional auto": lambda x, y, z: privci.privgcm(
        np.column_stack([x, y]), y, epsilon=1.0, x_bound="auto", y_bound="auto", rng=7),
    "privcrt": lambda x, y, z: privci.privcrt(
        x, y, z, epsilon=2.0, model_x=MX, y_bound=4, x_residual_bound=4, n_resamples=9,
        kernel_approximation="rff", n_features=32, feature_rng=0, rng=8),
    "privcrt auto": lambda x, y, z: privci.privcrt(
        x, y, z, epsilon=2.0, model_x=MX, y_bound="auto", x_residual_bound="auto",
        n_resamples=9, kernel_approximation="rff", n_features=32, feature_rng=0, rng=9),
    "privtot baseline": lambda x, y, z: baselines.privtot(
        x, y, z[:, 0], epsilon=1.0, n_subsets=5, rng=10),
    "private kendall baseline": lambda x, y, z: baselines.private_kendall(
        x, y, z[:, 0], epsilon=1.0, n_clusters=5, rng=11),
}


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("case", sorted(CASES))
def test_releases_cover_every_mechanism_call(data, calls, case):
    res = CASES[case](*data)
    rec = res.privacy
    assert rec.releases and all(isinstance(r, Release) for r in rec.releases)
    # every call, with its epsilon and scale, is one entry (as multisets)
    listed = Counter((float(r.epsilon), float(r.noise_scale)) for r in rec.releases)
    assert Counter(calls) == listed, (case, calls, rec.releases)
    # the releases compose (exactly) to at most the call's epsilon
    assert composed_epsilon(rec.releases) <= Fraction(rec.epsilon)
    assert all(r.epsilon > 0 and r.sensitivity > 0 and r.noise_scale > 0 and r.mechanism
               for r in rec.releases)
    # the last release is the test's own: the record's summary fields
    assert rec.releases[-1].sensitivity == rec.sensitivity
    assert rec.releases[-1].noise_scale == rec.noise_scale
    # the printed result shows them as a table
    text = repr(res)
    assert "releases:" in text and "noise scale" in text
    for r in rec.releases:
        assert r.name in text
    assert "releases:" in repr(rec)


def test_spline_halves_compose_in_parallel(data):
    rec = CASES["spline public z"](*data).privacy
    halves = Counter(r.rows for r in rec.releases)
    # the fit's Gram matrix and cross-products per half; on all rows the test's releases
    # (k = 1 here: the sum of the squared residual products and the sum of the products)
    # and, since stop 53, the two tightened bounds (the public windows tightened under
    # assume="additive")
    assert halves == {"half A": 2, "half B": 2, "all": 4}
    assert sorted(r.name for r in rec.releases if "bound" in r.name) == ["x_bound[0]",
                                                                        "y_bound[0]"]
    fit = sum(Fraction(r.epsilon) for r in rec.releases if r.rows == "half A")
    test = sum(Fraction(r.epsilon) for r in rec.releases if r.rows == "all")
    assert composed_epsilon(rec.releases) == fit + test <= Fraction(rec.epsilon)
    assert rec.epsilon == 3.0
    assert "(half A)" in repr(rec) and "(half B)" in repr(rec)


def test_composed_epsilon_rules():
    r = lambda e, rows="all": Release("r", e, 1.0, 1.0, "m", rows)   # noqa: E731
    assert composed_epsilon(()) == 0
    assert composed_epsilon((r(0.25), r(0.5))) == Fraction(3, 4)
    assert composed_epsilon((r(0.25), r(0.5, "a"), r(0.25, "a"), r(0.5, "b"))) == 1


def test_record_default_has_no_releases():
    rec = PrivacyRecord(epsilon=1.0, mechanism="m", sensitivity=1.0, noise_scale=1.0,
                        hardened=True, ridge_lambda=None, kernel_sigma=None, bounds={},
                        guarantee="g")
    assert rec.releases == () and "releases" not in repr(rec)
