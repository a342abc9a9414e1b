"""The noise has the distribution its calibration promises (issue 21).

* Goodness of fit of the seeded Laplace noise: many releases of a constant input, KS test
  against Laplace(sensitivity / epsilon) -- for ``laplace_mechanism`` itself and for every
  Laplace release of the default ``privgcm`` path (noise standardised by the release's
  declared sensitivity / epsilon share, seen through the ledger's spies).
* The private quantile's selection frequencies against exp(epsilon u / 2), with the
  utility u computed here from its definition (chi-square test).
* Report-noisy-max's selection frequency against its closed form.
* The KRR sensitivity constants against the formulas proved on the documentation's
  sensitivity page (the code may state a larger constant, never a smaller one).

Tolerated error: every statistical test here has level alpha = 1e-3 (Bonferroni-corrected
where several are combined) with fixed seeds, so a correct implementation fails with
probability at most 1e-3 per test; the mutants these tests target (a scale off by a
factor of 2) give p-values below 1e-30.
"""

import math

import numpy as np
import pytest
from scipy import stats

import privci
from privci import bounds as B
from privci import mechanisms as M

from test_ledger import (_one_thread, run_ledger, spies, _domain,  # noqa: F401
                         SCENARIOS)

ALPHA = 1e-3


# --------------------------------------------------------------------------- Laplace

@pytest.mark.parametrize("sens,eps,shape,vb", [(2.0, 0.7, (20000,), None),
                                              (11.7, 3.3, (100, 150), 4.0),
                                              (1e-3, 0.05, (5000, 3), 1.0)])
def test_seeded_laplace_noise_is_laplace_of_the_stated_scale(sens, eps, shape, vb):
    value = 0.25 if vb is not None else 3.0
    x = np.full(shape, value)
    out, info = M.laplace_mechanism(x, sens, eps, np.random.default_rng(7), value_bound=vb)
    noise = (out - x).ravel()
    assert out.shape == x.shape and not info.hardened
    # the scale the specification promises, not the one the mechanism reports
    p = stats.kstest(noise, stats.laplace(scale=sens / eps).cdf).pvalue
    assert p > ALPHA, f"KS p = {p:.3g}: the noise is not Laplace({sens / eps:g})"
    assert info.scale == sens / eps


def test_seeded_laplace_noise_is_independent_across_releases_and_entries():
    g = np.random.default_rng(3)
    a = np.stack([M.laplace_mechanism(np.zeros(50), 1.0, 1.0, g)[0] for _ in range(400)])
    r = np.corrcoef(a[:, 0], a[:, 1])[0, 1]
    assert abs(r) < 4 / math.sqrt(400)
    assert abs(np.corrcoef(a[:-1, 0], a[1:, 0])[0, 1]) < 4 / math.sqrt(400)


def test_privgcm_releases_have_laplace_noise_of_their_calibrated_scale(spies):
    """Every Laplace release of the default privgcm path (public parameters, so the
    inputs do not change between runs), 40 seeds on one data set: the noise, divided by the
    release's sensitivity / epsilon share, is Laplace(1) (KS per release site, Bonferroni
    over the sites)."""
    sc = next(s for s in SCENARIOS if s.name == "privgcm-spline-public")
    data = sc.make_data(np.random.default_rng(sc.seed))
    by_site = {}
    for seed in range(40):
        _, led = run_ledger(sc.run, data, 1000 + seed)
        for i, c in enumerate(led.calls):
            if c.kind != "laplace":
                continue
            noisy = np.asarray(c.raw_output[0], dtype=np.float64)
            z = (noisy - _domain(c.value, c.public.get("value_bound"))).ravel()
            by_site.setdefault((i, c.site), []).append(z / (c.sensitivity / c.share))
    assert len(by_site) >= 3
    for key, zs in by_site.items():
        z = np.concatenate(zs)
        p = stats.kstest(z, stats.laplace.cdf).pvalue
        assert p > ALPHA / len(by_site), f"release {key}: KS p = {p:.3g} ({z.size} values)"


# --------------------------------------------------------------------------- quantiles

def utility(values, alpha, candidates):
    """u(c) = -dist(alpha n, [#{x < c}, #{x <= c}]) (the private quantile's definition)."""
    x = np.asarray(values, dtype=np.float64)
    lt = np.array([(x < c).sum() for c in candidates])
    le = np.array([(x <= c).sum() for c in candidates])
    target = alpha * x.size
    return -np.maximum(0.0, np.maximum(lt - target, target - le))


def _chisquare(counts, probs):
    expected = probs * counts.sum()
    keep = expected >= 5
    obs = np.r_[counts[keep], counts[~keep].sum()]
    exp = np.r_[expected[keep], expected[~keep].sum()]
    if exp[-1] == 0:
        obs, exp = obs[:-1], exp[:-1]
    return stats.chisquare(obs, exp).pvalue


@pytest.mark.parametrize("alpha,eps", [(0.5, 1.0), (0.2, 2.5), (0.9, 0.4)])
def test_private_quantile_selection_frequencies(alpha, eps):
    values = np.array([0.0, 1.0, 2.0, 2.0, 3.0, 4.0, 7.0])
    cands = np.array([-1.0, 0.5, 1.0, 2.0, 2.5, 3.5, 5.0, 8.0])
    u = utility(values, alpha, cands)
    assert len(set(u.tolist())) >= 3           # the frequencies are informative
    w = np.exp(eps * (u - u.max()) / 2.0)
    probs = w / w.sum()
    g = np.random.default_rng(int(alpha * 100) + int(eps * 10))
    draws = 20000
    picks = [B.private_quantile(values, alpha, epsilon=eps, candidates=cands, rng=g)
             for _ in range(draws)]
    idx = np.searchsorted(cands, picks)
    assert np.all(cands[idx] == picks)
    counts = np.bincount(idx, minlength=cands.size)
    p = _chisquare(counts, probs)
    assert p > ALPHA, (f"selection frequencies {np.round(counts / draws, 4)} against "
                       f"exp(eps u / 2): {np.round(probs, 4)}; chi-square p = {p:.3g}")


def test_private_bounds_centre_frequencies_match_the_quantile():
    """The same law through private_bounds (the centre is the private median)."""
    values = np.array([[0.0], [1.0], [2.0], [2.0], [3.0]])
    cands = np.array([-1.0, 0.5, 2.0, 2.5, 4.0])
    eps = 1.2
    u = utility(values[:, 0], 0.5, cands)
    probs = np.exp(eps * (u - u.max()) / 2)
    probs /= probs.sum()
    g = np.random.default_rng(17)
    # private_bounds builds its own grid; run the release it uses on these candidates
    picks = [B._quantile(values[:, 0], 0.5, eps, cands, g)[0] for _ in range(15000)]
    counts = np.bincount(np.searchsorted(cands, picks), minlength=cands.size)
    assert _chisquare(counts, probs) > ALPHA


# --------------------------------------------------------------------------- noisy max

@pytest.mark.parametrize("gap,eps", [(1.0, 1.5), (0.5, 4.0)])
def test_report_noisy_max_selection_frequency(gap, eps):
    """Two scores s0 = s1 + gap with Exp(2 / eps) noise: P(pick 0) = 1 - exp(-gap eps / 2) / 2."""
    g = np.random.default_rng(5)
    draws = 20000
    picks = sum(M.report_noisy_max(np.array([gap, 0.0]), eps, g)[0] == 0 for _ in range(draws))
    p0 = 1.0 - 0.5 * math.exp(-gap * eps / 2.0)
    p = stats.binomtest(int(picks), draws, p0).pvalue
    assert p > ALPHA, f"picked 0 in {picks / draws:.4f}, expected {p0:.4f} (p = {p:.3g})"


# --------------------------------------------------------------------------- constants

LAMBDAS = [0.05, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 100.0]


def krr_B(lam):
    """B_lambda = max_{s in [0, n]} sqrt(n s) / (s + n lambda) (the proof's norm bound)."""
    return 1.0 / (1.0 + lam) if lam >= 1.0 else 0.5 / math.sqrt(lam)


@pytest.mark.parametrize("lam", LAMBDAS)
def test_krr_constants_are_at_least_the_proved_ones(lam):
    Bl = krr_B(lam)
    b = 1.0 + Bl
    sharp = 2 * b * b + 4 * b * min(b * Bl, 1 / (2 * math.sqrt(lam)))
    a = 1 / math.sqrt(lam)
    paper = 4 * (1 + a) * (1 + a + 2 * a ** 3 + 2 / lam)
    assert privci.gcm_sensitivity(lam, "sharp") >= sharp * (1 - 1e-12)
    assert privci.gcm_sensitivity(lam, "paper") >= paper * (1 - 1e-12)
    assert privci.crt_sensitivity(lam, "sharp") >= 2 * b * b * (1 - 1e-12)
    assert privci.crt_sensitivity(lam, "paper") >= 4 * (1 + a + a ** 3 + 1 / lam) * (1 - 1e-12)
    # the norm bound itself, numerically: max_s sqrt(n s) / (s + n lambda) over s in [0, n]
    n = 1000.0
    s = np.linspace(0, n, 200001)
    assert krr_B(lam) >= np.max(np.sqrt(n * s) / (s + n * lam)) * (1 - 1e-9)


@pytest.mark.parametrize("kind", ["sharp", "paper"])
def test_privgcm_krr_release_uses_the_proved_constant(spies, kind):
    """The Laplace release of the KRR path is calibrated to at least p q C(lambda)."""
    g = np.random.default_rng(2)
    n, lam = 120, 5.0
    z = g.normal(size=n)
    x, y = g.normal(size=(n, 2)), g.normal(size=n)
    _, led = run_ledger(lambda d, rng: privci.privgcm(
        x, y, z, epsilon=1.0, x_bound=3, y_bound=3, regression="krr", n_blocks=10,
        sensitivity=kind, ridge_lambda=lam, rng=rng), None, 4)
    Bl = krr_B(lam)
    b = 1 + Bl
    a = 1 / math.sqrt(lam)
    C = (2 * b * b + 4 * b * min(b * Bl, 0.5 * a) if kind == "sharp"
         else 4 * (1 + a) * (1 + a + 2 * a ** 3 + 2 / lam))
    (c,) = [c for c in led.calls if c.kind == "laplace"]
    assert c.sensitivity >= 2 * 1 * C * (1 - 1e-12)

