"""PrivGCM's released spline regression (``regression="spline"``, the default with z).

Definitional checks of every bound the privacy proof uses (basis, Gram matrix,
cross-products, residual products), the release's accounting, validation, and
small level/power studies (each states the error rate it tolerates).
"""

import math

import numpy as np
import pytest
from scipy import stats

import privci
from privci import _spline as S
from privci import simulate

EXTREMES = np.array([0.0, -0.0, 5e-324, 1e-300, 0.3, -2.7, 4.0, -4.0, 4.0000001, 1e308,
                     -1.7976931348623157e308, np.inf, -np.inf, np.nan])


def _upper(phi):
    return (phi.T @ phi)[np.triu_indices(phi.shape[1])]


@pytest.mark.parametrize("d", [1, 2, 3, 5])
def test_basis_is_a_nonnegative_partition_with_row_sum_d(d):
    rng = np.random.default_rng(d)
    t = np.concatenate([rng.normal(scale=2.0, size=(300, d)),
                        rng.choice(EXTREMES, size=(60, d))])
    phi = S.spline_basis(t)
    assert phi.shape == (360, S.n_basis(d))
    assert np.all(np.isfinite(phi)) and np.all(phi >= 0) and np.all(phi <= 1)
    # sum phi = d exactly for every row (the dropped functions are zero only at the edges)
    full = S.spline_basis(t[:, :1])
    assert np.allclose(full.sum(axis=1), 1.0, atol=1e-12)
    assert np.all(phi.sum(axis=1) <= d + 1e-12)
    # sum_{a <= c} phi_a phi_c <= (d^2 + d) / 2: the bound behind the Gram sensitivity
    tri = 0.5 * (phi.sum(axis=1) ** 2 + (phi ** 2).sum(axis=1))
    assert np.all(tri <= (d * d + d) / 2 + 1e-9)


def _neighbour_sets(d, rng, n=40):
    """Adversarial neighbours: the replaced row moves from a knot / an edge / the centre to
    far away, every other row sits at one z, and random cases."""
    kn = S._knots()
    spots = np.r_[kn[3:-3], 0.0, -4.0, 4.0, 1e308, -1e308, np.nan]
    for a in spots:
        for b in spots[::3]:
            z = np.full((n, d), a)
            z2 = z.copy()
            z2[0] = b
            yield z, z2, 0
    for _ in range(30):
        z = rng.normal(scale=1.5, size=(n, d))
        z2 = z.copy()
        i = int(rng.integers(n))
        z2[i] = rng.choice(EXTREMES, size=d)
        yield z, z2, i


@pytest.mark.parametrize("d", [1, 2, 4])
def test_gram_and_cross_sensitivities_hold_on_adversarial_neighbours(d):
    rng = np.random.default_rng(10 + d)
    worst_g = worst_b = 0.0
    for z, z2, i in _neighbour_sets(d, rng):
        for cols in (1, 3):
            u = rng.choice([-1.0, 1.0], size=(z.shape[0], cols))
            u2 = u.copy()
            u2[i] = -u[i]
            p1, p2 = S.spline_basis(z), S.spline_basis(z2)
            dg = np.abs(_upper(p1) - _upper(p2)).sum()
            db = np.abs(p1.T @ u - p2.T @ u2).sum()
            worst_g = max(worst_g, dg / S.gram_sensitivity(d))
            worst_b = max(worst_b, db / S.cross_sensitivity(d, cols))
    assert worst_g <= 1.0 + 1e-12 and worst_b <= 1.0 + 1e-12
    # the bounds are nearly attained (a row moving between disjoint supports)
    assert worst_g > 0.5 and worst_b > 0.5


def test_residual_products_move_only_the_replaced_row_by_at_most_2():
    rng = np.random.default_rng(3)
    n, d = 50, 2
    z = rng.normal(size=(n, d))
    for scale in (0.1, 10.0, 1e6):       # any public fit, however wild
        coef_x = rng.normal(scale=scale, size=(S.n_basis(d), 2))
        coef_y = rng.normal(scale=scale, size=(S.n_basis(d), 1))
        u = rng.uniform(-1, 1, size=(n, 3))
        z2, u2 = z.copy(), u.copy()
        z2[7], u2[7] = [1e308, -4.5], [-1.0, 1.0, -1.0]
        def prods(zz, uu):
            phi = S.spline_basis(zz)
            rx = S.residuals(uu[:, :2], phi, coef_x)
            ry = S.residuals(uu[:, 2:], phi, coef_y)
            assert np.all(np.abs(rx) <= 1) and np.all(np.abs(ry) <= 1)
            return (rx[:, :, None] * ry[:, None, :]).reshape(n, -1)
        a, b = prods(z, u), prods(z2, u2)
        diff = np.abs(a - b)
        assert np.all(diff[np.arange(n) != 7] == 0)
        assert diff.sum() <= 2.0 * 2 * 1 + 1e-12


def test_release_accounting_and_record():
    d = simulate.paper_data(3000, d=2, s=2, rng=1)
    res = privci.privgcm(d.x, d.y, d.z, epsilon=2.0, x_bound=d.x_bound, y_bound=d.y_bound,
                         z_center=0.0, z_scale=2.0, rng=5)
    pr = res.privacy
    eps_fit = S.FIT_SHARE * 2.0
    assert pr.n_blocks == 20 and pr.sensitivity == 2.0
    assert pr.sensitivity_kind == "released spline fit" and pr.ridge_lambda is None
    assert pr.noise_scale == pytest.approx(2.0 / (2.0 - eps_fit), rel=1e-12)
    assert f"{eps_fit:g} for the released regression" in pr.guarantee
    assert f"L1 sensitivity {S.gram_sensitivity(2):g}" in pr.mechanism
    assert "Shah and Peters" in " ".join(pr.caveats)
    assert res.method.endswith("released spline regression, 20 noisy block sums")
    again = privci.privgcm(d.x, d.y, d.z, epsilon=2.0, x_bound=d.x_bound, y_bound=d.y_bound,
                           z_center=0.0, z_scale=2.0, rng=5)
    assert (again.statistic, again.pvalue) == (res.statistic, res.pvalue)
    hard = privci.privgcm(d.x, d.y, d.z, epsilon=2.0, x_bound=d.x_bound, y_bound=d.y_bound,
                          z_center=0.0, z_scale=2.0)
    assert hard.privacy.hardened and "OpenDP" in hard.privacy.mechanism


def test_default_releases_z_centre_and_scale_within_epsilon():
    """z_center / z_scale default to private 'auto' values with the spline fit: 10% of epsilon
    (bounds_epsilon), stated in the guarantee and the record; the parts add up to epsilon."""
    from fractions import Fraction
    rng = np.random.default_rng(5)
    z = rng.normal(loc=[100.0, -3.0], scale=[20.0, 0.01], size=(4000, 2))
    x = np.sin((z[:, 0] - 100) / 20) + rng.normal(size=4000)
    y = np.sin((z[:, 0] - 100) / 20) + rng.normal(size=4000)
    res = privci.privgcm(x, y, z, epsilon=3.0, x_bound=4, y_bound=4, rng=2)
    pr = res.privacy
    zc, zs = pr.bounds["z_center"], pr.bounds["z_scale"]
    assert abs(zc[0] - 100) < 2 and abs(zc[1] + 3) < 0.002
    assert 0.8 < zs[0] / 20 < 1.25 and 0.8 < zs[1] / 0.01 < 1.25
    g = pr.guarantee
    assert "for the released centres of z" in g and "for the released scales of z" in g
    assert "released within this epsilon" in g
    import re
    parts = [float(v) for v in re.findall(r"([0-9.e-]+) for the", g)]
    assert len(parts) == 4
    assert sum(Fraction(v) for v in parts) <= Fraction(3.0) * (1 + 1e-6)
    assert sum(parts) == pytest.approx(3.0, rel=1e-5)
    # the KRR path uses z as given (no release) unless asked
    krr = privci.privgcm(x, y, z, epsilon=3.0, x_bound=4, y_bound=4, rng=2, regression="krr")
    assert "z_center" not in krr.privacy.bounds


def test_budget_is_charged_the_whole_epsilon():
    d = simulate.paper_data(500, d=1, s=2, rng=2)
    b = privci.PrivacyBudget(3.0)
    privci.privgcm(d.x, d.y, d.z, epsilon=1.25, x_bound=4, y_bound=4, budget=b, rng=1)
    assert b.spent == pytest.approx(1.25)


def test_released_statistic_matches_the_documented_steps():
    """Re-implements the path from the module doc with the same draws: any silent change of
    the mechanism or the test makes this fail."""
    from privci._private import block_labels, new_entropy
    d = simulate.confounded_data(1200, beta=0.5, rng=4)
    eps = 3.0
    res = privci.privgcm(d.x, d.y, d.z, epsilon=eps, x_bound=d.x_bound, y_bound=d.y_bound,
                         z_center=0.0, z_scale=1.0, rng=np.random.default_rng(11))
    rng = np.random.default_rng(11)
    n = 1200
    u = np.clip(d.x / d.x_bound, -1, 1)[:, None]
    v = np.clip(d.y / d.y_bound, -1, 1)[:, None]
    phi = S.spline_basis(d.z)
    half = block_labels(n, 2, new_entropy(rng)) == 0
    ef = S.FIT_SHARE * eps
    rx_ = S.release_fit(phi[half], u[half], ef, rng)
    ry_ = S.release_fit(phi[~half], v[~half], ef, rng)
    r = S.residuals(u, phi, rx_.coef)[:, 0] * S.residuals(v, phi, ry_.coef)[:, 0]
    lab = block_labels(n, 20, new_entropy(rng))
    sums = np.bincount(lab, r, 20) + rng.laplace(0.0, 2.0 / (eps - ef), 20)
    shift2 = S.shift_second_moment(rx_, ry_, S.N_BOOT, rng)
    t = sums.sum() / math.sqrt(20 * np.var(sums, ddof=1) + shift2[0, 0])
    assert res.statistic == pytest.approx(t, rel=1e-9)
    assert res.pvalue == pytest.approx(2 * stats.t.sf(abs(t), 19), rel=1e-9)


def test_multicolumn_bonferroni():
    rng = np.random.default_rng(6)
    z = rng.normal(size=(800, 1))
    x = rng.normal(size=(800, 2))
    y = rng.normal(size=(800, 3))
    res = privci.privgcm(x, y, z, epsilon=2.0, x_bound=4, y_bound=4, rng=3)
    assert res.statistic_name == "max t (Bonferroni)"
    assert res.privacy.sensitivity == 2.0 * 2 * 3
    assert 0 <= res.pvalue <= 1


@pytest.mark.parametrize("kwargs, match", [
    ({"ridge_lambda": 1.0}, r"`ridge_lambda` applies to regression='krr' only; got ridge_lambda=1.0"),
    ({"kernel_sigma": 0.5}, r"`kernel_sigma` applies to regression='krr' only"),
    ({"sensitivity": "sharp"}, r"`sensitivity` applies to regression='krr' only"),
    ({"kernel_approximation": "rff"}, r"`kernel_approximation` applies"),
    ({"regression": "gam"}, r"`regression` must be 'spline' .* got 'gam'"),
    ({"n_blocks": None}, r"`n_blocks=None` .* needs regression='krr'"),
    ({"z_center": [0.0, 1.0]}, r"z_center"),
    ({"z_center": np.nan}, r"z_center"),
])
def test_spline_bad_input(kwargs, match):
    rng = np.random.default_rng(0)
    z = rng.normal(size=(50, 1))
    with pytest.raises(ValueError, match=match):
        privci.privgcm(rng.normal(size=50), rng.normal(size=50), z, epsilon=1.0, x_bound=4,
                       y_bound=4, rng=0, **kwargs)


def test_z_center_without_z_is_refused():
    with pytest.raises(ValueError, match=r"`z_center` needs z; got z = None and z_center=1"):
        privci.privgcm(np.zeros(10), np.zeros(10), None, epsilon=1.0, x_bound=1, y_bound=1,
                       z_center=1.0)


def test_z_center_and_scale_make_the_fit_unit_free():
    """Shifting and scaling z by public values given to the test leaves the result unchanged."""
    d = simulate.confounded_data(2000, rng=8)
    a = privci.privgcm(d.x, d.y, d.z, epsilon=2.0, x_bound=d.x_bound, y_bound=d.y_bound,
                       z_center=0.0, z_scale=1.0, rng=4)
    b = privci.privgcm(d.x, d.y, 50.0 + 3.0 * d.z, epsilon=2.0, x_bound=d.x_bound,
                       y_bound=d.y_bound, z_center=50.0, z_scale=3.0, rng=4)
    assert b.statistic == pytest.approx(a.statistic, rel=1e-8)


def _rejections(draw, reps, eps, zs, seed):
    rng = np.random.default_rng(seed)
    rej = 0
    for _ in range(reps):
        dat = draw(rng)
        res = privci.privgcm(dat.x, dat.y, dat.z, epsilon=eps, x_bound=dat.x_bound,
                             y_bound=dat.y_bound, z_scale=zs, rng=rng)
        rej += res.pvalue <= 0.05
    return rej


def test_level_quick_confounded():
    """Confounded null at n = 2000, epsilon = 2, 150 data sets.  At a true level of 0.05
    P(rejections >= 17) = 0.005; the KRR path with the sharp constant and 20 blocks rejects
    nearly all of them at n = 10^4."""
    rej = _rejections(lambda r: simulate.confounded_data(2000, rng=r), 150, 2.0, 1.0, 21)
    assert rej < 17


def test_power_quick():
    """Paper design d = 1, s = 2, n = 10^4, epsilon = 7, beta = 0.25: measured 1.00 over 500
    data sets; 20 data sets, require >= 12 (fails with probability < 1e-6 at power 0.9)."""
    rej = _rejections(lambda r: simulate.paper_data(10_000, d=1, s=2, beta=0.25, rng=r), 20,
                      7.0, 2.0, 22)
    assert rej >= 12


@pytest.mark.slow
@pytest.mark.parametrize("design", ["s1d5", "confounded"])
@pytest.mark.parametrize("eps", [1.0, 7.0])
def test_level_slow(design, eps):
    """n = 10^4, 300 null data sets: rejection in [0.01, 0.10] (at a true 0.05 the chance of
    leaving it is about 0.0007)."""
    draw = ((lambda r: simulate.paper_data(10_000, d=5, s=1, rng=r)) if design == "s1d5"
            else (lambda r: simulate.confounded_data(10_000, rng=r)))
    rej = _rejections(draw, 300, eps, 2.0 if design == "s1d5" else 1.0, 23)
    assert 3 <= rej <= 30


@pytest.mark.parametrize("eps", [0.1, 0.3, 0.7, 1.0, 2.9, 7.0, 1e-3])
def test_fit_split_never_exceeds_its_epsilon_in_exact_arithmetic(eps):
    from fractions import Fraction
    eg = S.GRAM_SHARE * eps
    eb = S._rest(eps, eg)
    assert Fraction(eg) + Fraction(eb) <= Fraction(eps)
    assert eb > 0 and eb == pytest.approx(eps - eg, rel=1e-12)


@pytest.mark.parametrize("z_scale", [None, 1e-300, 2.0])
def test_public_shift_that_overflows_is_mapped_back(z_scale):
    """Found by the neighbour harness: z = 1e308 with z_center = -1e308 overflowed to inf,
    and the private scale then raised on that neighbour only."""
    rng = np.random.default_rng(1)
    x, y = rng.normal(size=12), rng.normal(size=12)
    for zval in (1e308, 6.1e-05, -1.7976931348623157e308):
        z = np.full((12, 1), 1e308)
        z[2] = zval
        res = privci.privgcm(x, y, z, epsilon=1.0, x_bound=2, y_bound=2, z_center=-1e308,
                             z_scale=z_scale)
        assert 0 <= res.pvalue <= 1 or np.isnan(res.pvalue)
