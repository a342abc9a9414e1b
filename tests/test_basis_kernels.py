"""The fused spline kernels (privci._basis_kernels) against their numpy twins
(tests/naive_basis.py), exactly; the fixed-point facts the privacy proof needs; the
sensitivity bounds on adversarial neighbours; the wrappers' chunking and validation."""

import tracemalloc

import numpy as np
import pytest
from scipy.interpolate import BSpline
from scipy.stats import norm

import naive_basis as NB
from privci import _basis_kernels as K

ONE = K.ONE
T = 4.0
NQ = K.clamped_knots(norm.ppf(np.arange(1, 9) / 9), T)           # PrivGCM's knots today
UNIF = K.clamped_knots(np.linspace(-T, T, 7)[1:-1], T)
RNG_KNOTS = K.clamped_knots(np.sort(np.random.default_rng(5).uniform(-3.9, 3.9, 3)), T)
NONE = K.clamped_knots([], T)                                     # 4 functions, one span
ONEK = K.clamped_knots([0.7], T)
REPEAT = K.clamped_knots([-1.0, 0.5, 0.5, 0.5, 2.0], T)          # a triple interior knot
SKEW = K.clamped_knots([-3.99, -3.98, 0.0, 3.999], T)            # very short spans
MANY = K.clamped_knots(norm.ppf(np.arange(1, 41) / 41) * 1.5, T)  # binary span search
KNOTS = {"normal-quantile": NQ, "uniform": UNIF, "random": RNG_KNOTS, "none": NONE,
         "one": ONEK, "repeated": REPEAT, "skewed": SKEW, "many": MANY}

EXTREME_Z = np.array([0.0, -0.0, 5e-324, 1e-300, 0.13971001688186213, 0.13971029888186212,
                      T, -T, np.nextafter(T, 0), np.nextafter(-T, 0), 4.0000001, 1e308,
                      -1.7976931348623157e308, np.inf, -np.inf, np.nan])
EXTREME_U = np.array([0.0, -0.0, 4.0, -4.0, 3.9999999, 4.0000001, 1e308, -1e308, 5e-324,
                      np.inf, -np.inf, np.nan])


def _special_t(kv):
    """Every knot, its neighbouring floats, the ends, the extremes."""
    inner = np.unique(kv)
    return np.r_[inner, np.nextafter(inner, np.inf), np.nextafter(inner, -np.inf),
                 EXTREME_Z]


def _random_z(rng, n, d, kvs=(NQ,)):
    z = rng.normal(scale=1.6, size=(n, d))
    specials = np.concatenate([_special_t(kv) for kv in kvs])
    mask = rng.random((n, d)) < 0.15
    z[mask] = rng.choice(specials, size=int(mask.sum()))
    return z


def _random_u(rng, n, c):
    u = rng.normal(scale=2.5, size=(n, c))
    mask = rng.random((n, c)) < 0.1
    u[mask] = rng.choice(EXTREME_U, size=int(mask.sum()))
    return u


# (name, additive knot vectors per column, pairs, pair knot vectors)
SPECS = [
    ("d1", [NQ], [], None),
    ("d1-uniform", [UNIF], [], None),
    ("d2-mixed", [NQ, RNG_KNOTS], [], None),
    ("d2-tensor", [NQ, UNIF], [(0, 1)], None),
    ("d2-tensor-own-knots", [NONE, None], [(1, 0)], [(ONEK, REPEAT)]),
    ("d5", [NQ] * 5, [], None),
    ("d5-varied", [NQ, UNIF, RNG_KNOTS, NONE, REPEAT], [(0, 3), (4, 1)], None),
    ("d3-skewed", [SKEW, ONEK, NQ], [(2, 0)], [(UNIF, SKEW)]),
    ("d2-many-knots", [MANY, NQ], [(0, 1)], [(MANY, ONEK)]),
]


def _make(spec_row):
    _, kvs, pairs, pkv = spec_row
    return K.make_basis(kvs, pairs, pkv)


def _twin_features(z, zc, zs, spec_row):
    _, kvs, pairs, pkv = spec_row
    return NB.features(z, zc, zs, kvs, pairs, pkv)


# --------------------------------------------------------------------------- the basis

@pytest.mark.parametrize("name", list(KNOTS))
def test_twin_basis_is_the_b_spline_basis(name):
    """The twin's Cox-de Boor equals scipy's design matrix (an independent implementation)."""
    kv = KNOTS[name]
    t = np.clip(np.nan_to_num(np.r_[_special_t(kv), np.linspace(-T, T, 301)], nan=0.0,
                              posinf=T, neginf=-T), -T, T)
    m, N = NB.basis_values(t, kv)
    ref = BSpline.design_matrix(t, kv, 3).toarray()
    ours = np.zeros_like(ref)
    for a in range(4):
        ours[np.arange(t.size), m - 3 + a] = N[:, a]
    np.testing.assert_allclose(ours, ref, rtol=0, atol=1e-12)


@pytest.mark.parametrize("spec_row", SPECS, ids=[s[0] for s in SPECS])
def test_features_equal_twin_exactly(spec_row):
    rng = np.random.default_rng(len(spec_row[0]))
    spec = _make(spec_row)
    d = len(spec_row[1])
    kvs = [kv for kv in spec_row[1] if kv is not None] + [k for p in (spec_row[3] or [])
                                                          for k in p]
    z = _random_z(rng, 400, d, kvs)
    q = K.spline_features(z, spec, quantized=True)
    ref = _twin_features(z, 0.0, 1.0, spec_row)
    assert q.shape == (400, spec.n_features) and q.dtype == np.int64
    np.testing.assert_array_equal(q, ref)
    np.testing.assert_array_equal(K.spline_features(z, spec), ref * 2.0 ** -16)


@pytest.mark.parametrize("spec_row", SPECS, ids=[s[0] for s in SPECS])
def test_every_block_sums_to_at_most_one_exactly(spec_row):
    """The fact the privacy proof needs: integer features >= 0, each block's sum <= 2^F."""
    spec = _make(spec_row)
    d = len(spec_row[1])
    rng = np.random.default_rng(7)
    kvs = [kv for kv in spec_row[1] if kv is not None] + [k for p in (spec_row[3] or [])
                                                          for k in p]
    special = np.unique(np.concatenate([_special_t(kv) for kv in kvs]))
    z = np.concatenate([np.repeat(special[:, None], d, axis=1), _random_z(rng, 300, d, kvs),
                        rng.choice(special, size=(300, d))])
    q = K.spline_features(z, spec, quantized=True)
    assert np.all(q >= 0)
    for b in range(spec.n_blocks):
        s = q[:, spec.block_offset[b]:spec.block_offset[b + 1]].sum(axis=1)
        assert np.all(s <= ONE)
        # and nearly a partition of unity: at most 4 (additive) / 24 (tensor) units lost
        assert np.all(s >= ONE - (4 if spec.block_col[b, 1] < 0 else 24))
    tensor = spec.block_col[:, 1] >= 0
    assert np.all((q != 0).sum(axis=1) <= 4 * np.sum(~tensor) + 16 * np.sum(tensor))


def test_knot_and_edge_values():
    """t exactly on a knot (and the issue's near-knot value), at -T, at +T (last span)."""
    spec = K.make_basis([NQ])
    t = np.array([0.13971001688186213, NQ[8], -T, T, np.inf, -np.inf, np.nan, 1e308])
    q = K.spline_features(t, spec, quantized=True)
    assert q.sum(axis=1).max() <= ONE
    assert q[2, 0] == ONE and q[3, -1] == ONE and q[4, -1] == ONE and q[5, 0] == ONE
    assert q[7, -1] == ONE
    np.testing.assert_array_equal(q[6], K.spline_features(np.zeros(1), spec, True)[0])
    # on an interior knot of a uniform vector the cubic values are 1/6, 2/3, 1/6
    qu = K.spline_features(np.array([UNIF[6]]), K.make_basis([UNIF]), True)[0]
    assert sorted(qu[qu > 0]) == [ONE // 6, ONE // 6, 2 * ONE // 3]


def test_quantize_fixup_matches_twin():
    """The cut of the largest value (first on ties) when clipped values sum above one."""
    rng = np.random.default_rng(3)
    cases = [np.array(c, dtype=float) for c in (
        [1, 1, 1, 1], [0.7, 0.7, 0.0, 0.0], [1.5, 0.3, 0.3, 0.3], [0.5, 0.5, 0.5, -0.2],
        [np.nan, 1.0, 0.5, 0.0], [0.25, 0.25, 0.25, 0.25], [1e-300, 1 - 1e-16, 0, 0],
        [np.inf, np.inf, -np.inf, 0.2])]
    cases += list(rng.uniform(-0.3, 1.3, size=(200, 4)))
    q = np.zeros((1, 4), dtype=np.int64)
    for c in cases:
        K._quantize4(c[0], c[1], c[2], c[3], q, 0)
        ref = NB.quantize(c[None, :])[0]
        np.testing.assert_array_equal(q[0], ref)
        assert 0 <= q[0].min() and q[0].sum() <= ONE


# --------------------------------------------------------------------------- pass 1

def _data(rng, n, spec_row, px, py):
    d = len(spec_row[1])
    kvs = [kv for kv in spec_row[1] if kv is not None] + [k for p in (spec_row[3] or [])
                                                          for k in p]
    zc = rng.normal(scale=0.3, size=d)
    zs = rng.uniform(0.5, 2.0, size=d)
    with np.errstate(over="ignore", invalid="ignore"):
        z = _random_z(rng, n, d, kvs) * zs + zc
    x, y = _random_u(rng, n, px), _random_u(rng, n, py)
    xc, yc = rng.normal(scale=0.5, size=px), rng.normal(scale=0.5, size=py)
    xb, yb = rng.uniform(1, 4, size=px), rng.uniform(1, 4, size=py)
    return z, x, y, zc, zs, xc, xb, yc, yb


@pytest.mark.parametrize("spec_row", SPECS, ids=[s[0] for s in SPECS])
@pytest.mark.parametrize("n_groups,px,py", [(1, 1, 1), (2, 2, 1), (5, 1, 3)])
def test_accumulate_equals_twin_exactly(spec_row, n_groups, px, py):
    rng = np.random.default_rng(hash((spec_row[0], n_groups)) % 2**32)
    spec = _make(spec_row)
    n = 600
    z, x, y, zc, zs, xc, xb, yc, yb = _data(rng, n, spec_row, px, py)
    group = rng.integers(0, n_groups, size=n)
    G, B = K.accumulate(z, x, y, zc, zs, xc, xb, yc, yb, spec, group, n_groups,
                        chunk_rows=173)
    Phi = _twin_features(z, zc, zs, spec_row)
    uq = np.hstack([NB.quantize_u(x, xc, xb), NB.quantize_u(y, yc, yb)])
    Gr, Br = NB.accumulate(Phi, uq, group, n_groups)
    assert G.dtype == B.dtype == np.int64
    np.testing.assert_array_equal(G, Gr)
    np.testing.assert_array_equal(B, Br)
    assert np.array_equal(G, np.swapaxes(G, 1, 2))


def test_accumulate_threads_and_layouts(monkeypatch):
    """Several row parts (threads), every input layout and dtype, 1-D columns, None."""
    monkeypatch.setattr(K, "_MIN_ROWS_PER_PART", 512)
    rng = np.random.default_rng(11)
    row = SPECS[3]
    spec = _make(row)
    n = 3 * K._MIN_ROWS_PER_PART + 17
    z, x, y, zc, zs, xc, xb, yc, yb = _data(rng, n, row, 1, 1)
    group = rng.integers(0, 2, size=n)
    ref = K.accumulate(z, x, y, zc, zs, xc, xb, yc, yb, spec, group, 2)
    Phi = _twin_features(z, zc, zs, row)
    uq = np.hstack([NB.quantize_u(x, xc, xb), NB.quantize_u(y, yc, yb)])
    Gr, Br = NB.accumulate(Phi, uq, group, 2)
    np.testing.assert_array_equal(ref[0], Gr)
    np.testing.assert_array_equal(ref[1], Br)
    variants = [
        (np.asfortranarray(z), x.ravel(), y[:, 0], group.astype(np.int32), 10**6),
        (z, x, y, list(group), 777),
        (z[::1], np.asfortranarray(x), y.astype(np.float64), group.astype(np.uint8), 1000),
    ]
    for zz, xx, yy, gg, ch in variants:
        G, B = K.accumulate(zz, xx, yy, zc, zs, xc, xb, yc, yb, spec, np.asarray(gg), 2,
                            chunk_rows=ch)
        np.testing.assert_array_equal(G, ref[0])
        np.testing.assert_array_equal(B, ref[1])
    # no u columns at all (the Gram of the bases only), and no groups
    G, B = K.accumulate(z, None, None, zc, zs, [], [], [], [], spec)
    assert B.shape == (1, spec.n_features, 0)
    np.testing.assert_array_equal(G[0], Gr.sum(axis=0))
    # float32 inputs are converted (per chunk) exactly as numpy would
    with np.errstate(over="ignore"):
        z32 = z.astype(np.float32)
    G32, _ = K.accumulate(z32, x, y, zc, zs, xc, xb, yc, yb, spec, group, 2, chunk_rows=500)
    G64, _ = K.accumulate(z32.astype(np.float64), x, y, zc, zs, xc, xb, yc, yb, spec, group,
                          2)
    np.testing.assert_array_equal(G32, G64)


def test_float_statistics_are_exact_scalings():
    rng = np.random.default_rng(2)
    row = SPECS[6]
    spec = _make(row)
    z, x, y, zc, zs, xc, xb, yc, yb = _data(rng, 300, row, 1, 2)
    G, B = K.accumulate(z, x, y, zc, zs, xc, xb, yc, yb, spec)
    phi = K.spline_features((z - zc) / zs, spec)
    u = np.hstack([NB.quantize_u(x, xc, xb), NB.quantize_u(y, yc, yb)]) * 2.0 ** -16
    # every product and partial sum here is a multiple of 2^-32 below 2^21: exact in float64
    np.testing.assert_array_equal(K.to_float(G[0]), phi.T @ phi)
    np.testing.assert_array_equal(K.to_float(B[0]), phi.T @ u)


# --------------------------------------------------------------------------- pass 2

@pytest.mark.parametrize("spec_row", SPECS, ids=[s[0] for s in SPECS])
@pytest.mark.parametrize("px,py,k", [(1, 1, 7), (2, 3, 1), (3, 1, 40)])
def test_residual_block_sums_equal_twin_exactly(spec_row, px, py, k):
    rng = np.random.default_rng(hash((spec_row[0], px, k)) % 2**32)
    spec = _make(spec_row)
    n = 500
    z, x, y, zc, zs, xc, xb, yc, yb = _data(rng, n, spec_row, px, py)
    P = spec.n_features
    cx = rng.normal(scale=1.5, size=(P, px))
    cy = rng.normal(scale=1.5, size=(P, py))
    # extreme public coefficients: overflowing predictions and NaN entries
    cx[rng.integers(P), 0] = 1e308
    cx[rng.integers(P), 0] = -1e308
    cy[rng.integers(P), -1] = np.nan
    block = rng.integers(0, k, size=n)
    S = K.residual_block_sums(z, x, y, zc, zs, xc, xb, yc, yb, spec, cx, cy, block, k,
                              chunk_rows=211)
    Phi = _twin_features(z, zc, zs, spec_row)
    ref = NB.residual_block_sums(Phi, NB.quantize_u(x, xc, xb), NB.quantize_u(y, yc, yb),
                                 cx, cy, block, k)
    assert S.shape == (k, px * py) and S.dtype == np.int64
    np.testing.assert_array_equal(S, ref)
    # the squared products: the same sums, and the squares' twin
    S2, Q = K.residual_block_sums(z, x, y, zc, zs, xc, xb, yc, yb, spec, cx, cy, block, k,
                                  chunk_rows=211, squares=True)
    _, Qref = NB.residual_block_sums(Phi, NB.quantize_u(x, xc, xb), NB.quantize_u(y, yc, yb),
                                     cx, cy, block, k, squares=True)
    np.testing.assert_array_equal(S2, ref)
    np.testing.assert_array_equal(Q, Qref)
    assert Q.shape == S.shape and np.all(Q >= 0) and np.any(Q > 0)
    # each row's square is at most 1 (2^32 units): the released Q's sensitivity
    counts = np.bincount(block, minlength=k)
    assert np.all(Q.sum(axis=1) <= counts * px * py * 2 ** 32)


def test_residual_block_sums_threads(monkeypatch):
    monkeypatch.setattr(K, "_MIN_ROWS_PER_PART", 512)
    rng = np.random.default_rng(4)
    row = SPECS[5]
    spec = _make(row)
    n = 3 * K._MIN_ROWS_PER_PART + 5
    z, x, y, zc, zs, xc, xb, yc, yb = _data(rng, n, row, 2, 2)
    cx = rng.normal(size=(spec.n_features, 2))
    cy = rng.normal(size=(spec.n_features, 2))
    block = rng.integers(0, 30, size=n)
    S, Q = K.residual_block_sums(z, x, y, zc, zs, xc, xb, yc, yb, spec, cx, cy, block, 30,
                                 squares=True)
    Phi = _twin_features(z, zc, zs, row)
    ref, Qref = NB.residual_block_sums(Phi, NB.quantize_u(x, xc, xb),
                                       NB.quantize_u(y, yc, yb), cx, cy, block, 30,
                                       squares=True)
    np.testing.assert_array_equal(S, ref)
    np.testing.assert_array_equal(Q, Qref)
    S2 = K.residual_block_sums(np.asfortranarray(z), np.asfortranarray(x), y,
                               zc, zs, xc, xb, yc, yb, spec, cx, cy, block.astype(np.int16),
                               30, chunk_rows=1000)
    np.testing.assert_array_equal(S2, ref)


# --------------------------------------------------------------------------- clip box

@pytest.mark.parametrize("spec_row", SPECS, ids=[s[0] for s in SPECS])
def test_outside_label_equals_twin_exactly(spec_row, monkeypatch):
    """Rows whose t lies beyond [-T, T] in some column go to ``outside_group`` (pass 1) and
    ``outside_block`` (pass 2): the sums equal the twins' on labels changed by the numpy
    rule (z has +-inf, NaN and values far beyond the box), on one part and on several."""
    rng = np.random.default_rng(hash(("box", spec_row[0])) % 2**32)
    spec = _make(spec_row)
    n = 700
    z, x, y, zc, zs, xc, xb, yc, yb = _data(rng, n, spec_row, 1, 2)
    z[rng.integers(n, size=20), rng.integers(z.shape[1], size=20)] = 1e6
    out = NB.outside(z, zc, zs, spec.T)
    assert 0 < out.sum() < n
    group = rng.integers(0, 3, size=n)
    block = rng.integers(0, 6, size=n)
    Phi = _twin_features(z, zc, zs, spec_row)
    uq = np.hstack([NB.quantize_u(x, xc, xb), NB.quantize_u(y, yc, yb)])
    Gr, Br = NB.accumulate(Phi, uq, np.where(out, 1, group), 3)
    P = spec.n_features
    cx, cy = rng.normal(size=(P, 1)), rng.normal(size=(P, 2))
    Sr = NB.residual_block_sums(Phi, uq[:, :1], uq[:, 1:], cx, cy, np.where(out, 4, block), 6)
    for min_rows in (K._MIN_ROWS_PER_PART, 128):
        monkeypatch.setattr(K, "_MIN_ROWS_PER_PART", min_rows)
        G, B = K.accumulate(z, x, y, zc, zs, xc, xb, yc, yb, spec, group, 3, chunk_rows=250,
                            outside_group=1)
        np.testing.assert_array_equal(G, Gr)
        np.testing.assert_array_equal(B, Br)
        S = K.residual_block_sums(z, x, y, zc, zs, xc, xb, yc, yb, spec, cx, cy, block, 6,
                                  chunk_rows=250, outside_block=4)
        np.testing.assert_array_equal(S, Sr)
    # without the rule every row keeps its label (and is clipped to the box)
    G0, _ = K.accumulate(z, x, y, zc, zs, xc, xb, yc, yb, spec, group, 3)
    np.testing.assert_array_equal(G0, NB.accumulate(Phi, uq, group, 3)[0])


@pytest.mark.parametrize("bad", [3, -1, 1.0, True, "1"])
def test_outside_label_is_checked(bad):
    spec = _make(SPECS[0])
    z = np.zeros((5, 1))
    x = np.zeros((5, 1))
    with pytest.raises(ValueError, match="`outside_group` must be None or an integer in "
                                         r"\[0, n_groups = 3\)"):
        K.accumulate(z, x, x, 0, 1, 0, 1, 0, 1, spec, np.zeros(5, int), 3, outside_group=bad)
    c = np.zeros((spec.n_features, 1))
    with pytest.raises(ValueError, match=r"`outside_block` must be None or an integer in "
                                         r"\[0, k = 3\)"):
        K.residual_block_sums(z, x, x, 0, 1, 0, 1, 0, 1, spec, c, c, np.zeros(5, int), 3,
                              outside_block=bad)


# --------------------------------------------------------------------------- sensitivity

def _upper_l1(Ga, Gb):
    P = Ga.shape[0]
    iu = np.triu_indices(P)
    return int(np.abs(Ga[iu] - Gb[iu]).sum())


def _neighbours(rng, spec_row, n=24):
    """Adversarial neighbours: every other row at one point, the replaced row moving
    between knots, edges, the centre and the extremes; and random ones."""
    d = len(spec_row[1])
    kvs = [kv for kv in spec_row[1] if kv is not None] + [k for p in (spec_row[3] or [])
                                                          for k in p]
    spots = np.unique(np.r_[np.concatenate([kv[3:-3] for kv in kvs]), 0.0, -T, T, 1e308,
                            -1e308, np.nan, 0.13971001688186213])
    spots = spots[np.linspace(0, spots.size - 1, min(spots.size, 9)).astype(int)]
    for a in spots:
        for b in spots[::2]:
            z = np.full((n, d), a)
            z2 = z.copy()
            z2[0] = b
            if d > 1:
                z2[0, 1:] = rng.choice(spots, size=d - 1)
            yield z, z2, 0
    for _ in range(15):
        z = _random_z(rng, n, d, kvs)
        z2 = z.copy()
        i = int(rng.integers(n))
        z2[i] = rng.choice(EXTREME_Z, size=d)
        yield z, z2, i


@pytest.mark.parametrize("spec_row", [SPECS[0], SPECS[3], SPECS[5], SPECS[6]],
                         ids=["d1", "d2-tensor", "d5", "d5-varied"])
def test_sensitivities_hold_on_adversarial_neighbours(spec_row):
    """Replace one row: upper triangle of G moves <= s^2 + s, B <= 2 s per u column, the
    residual block sums <= 2 per pair (all in units of 2^-32, checked in integers)."""
    spec = _make(spec_row)
    s = spec.n_blocks
    rng = np.random.default_rng(s)
    unit = 1 << 32
    worst = {"G": 0.0, "B": 0.0, "S": 0.0}
    px, py = 2, 1
    for z, z2, i in _neighbours(rng, spec_row):
        n = z.shape[0]
        x = rng.choice([-4.0, 4.0, 0.0, np.nan, 1e308], size=(n, px))
        y = rng.choice([-4.0, 4.0, 0.0], size=(n, py))
        x2, y2 = x.copy(), y.copy()
        x2[i] = rng.choice(EXTREME_U, size=px)
        y2[i] = -y[i]
        args = (0.0, 1.0, 0.0, 4.0, 0.0, 4.0, spec)
        group = np.arange(n) % 2
        G1, B1 = K.accumulate(z, x, y, *args, group, 2)
        G2, B2 = K.accumulate(z2, x2, y2, *args, group, 2)
        dG = sum(_upper_l1(G1[g], G2[g]) for g in range(2))
        assert dG <= (s * s + s) * unit
        worst["G"] = max(worst["G"], dG / ((s * s + s) * unit))
        for c in range(px + py):
            dB = int(np.abs(B1[:, :, c] - B2[:, :, c]).sum())
            assert dB <= 2 * s * unit
            worst["B"] = max(worst["B"], dB / (2 * s * unit))
        cx = rng.normal(scale=3, size=(spec.n_features, px))
        cy = rng.normal(scale=3, size=(spec.n_features, py))
        block = np.arange(n) % 5
        S1 = K.residual_block_sums(z, x, y, *args, cx, cy, block, 5)
        S2 = K.residual_block_sums(z2, x2, y2, *args, cx, cy, block, 5)
        dS = np.abs(S1 - S2).sum(axis=0)
        assert np.all(dS <= 2 * unit)
        worst["S"] = max(worst["S"], dS.max() / (2 * unit))
    # the residual products' bound is attained: the replaced row moves from z = -T to +T,
    # where the public fits predict +1 / -1 (x) and -1 / -1 (y); with x = -4 then +4 and
    # y = +4, its residuals (u - pred) / 2 go from (-1, 1) to (1, 1)
    n, d = 6, spec.n_columns
    z = np.zeros((n, d))
    z2 = z.copy()
    z[0], z2[0] = -T, T
    phl, phr = (K.spline_features(np.full((1, d), v), spec)[0] for v in (-T, T))
    cx = 10.0 * (phl - phr)[:, None] * np.ones((1, px))
    cy = -10.0 * np.ones((spec.n_features, py))
    x, y = np.zeros((n, px)), np.full((n, py), 4.0)
    x2 = x.copy()
    x[0], x2[0] = -4.0, 4.0
    args = (0.0, 1.0, 0.0, 4.0, 0.0, 4.0, spec)
    block = np.arange(n) % 5
    dS = np.abs(K.residual_block_sums(z, x, y, *args, cx, cy, block, 5)
                - K.residual_block_sums(z2, x2, y, *args, cx, cy, block, 5)).sum(axis=0)
    worst["S"] = max(worst["S"], dS.max() / (2 * unit))
    # the bounds are nearly attained (the replaced row moves between disjoint supports)
    assert worst["G"] > 0.4 and worst["B"] > 0.4 and worst["S"] > 0.99, worst


@pytest.mark.parametrize("spec_row", SPECS, ids=[s[0] for s in SPECS])
def test_one_rows_upper_triangle_is_at_most_half_s2_plus_s(spec_row):
    """Per row: sum over a <= c of phi_a phi_c <= (s^2 + s) / 2, exactly (integers)."""
    spec = _make(spec_row)
    s = spec.n_blocks
    d = len(spec_row[1])
    rng = np.random.default_rng(1)
    kvs = [kv for kv in spec_row[1] if kv is not None] + [k for p in (spec_row[3] or [])
                                                          for k in p]
    special = np.unique(np.concatenate([_special_t(kv) for kv in kvs]))
    z = np.concatenate([np.repeat(special[:, None], d, axis=1), rng.choice(special, (60, d))])
    z = z[rng.permutation(len(z))[:120]]
    # one group per row: G[i] is row i's own phi phi^T
    G, _ = K.accumulate(z, None, None, 0.0, 1.0, [], [], [], [], spec, np.arange(len(z)),
                        len(z))
    tri = np.triu(G).sum(axis=(1, 2))
    assert np.all(2 * tri <= (s * s + s) * (1 << 32))


# --------------------------------------------------------------------------- wrappers

def test_overflow_guard(monkeypatch):
    spec = K.make_basis([NQ])
    monkeypatch.setattr(K, "MAX_ROWS", 10)
    z = np.zeros((11, 1))
    with pytest.raises(OverflowError):
        K.accumulate(z, z, z, 0, 1, 0, 1, 0, 1, spec)
    with pytest.raises(OverflowError):
        K.residual_block_sums(z, z, z, 0, 1, 0, 1, 0, 1, spec, np.zeros((12, 1)),
                              np.zeros((12, 1)), np.zeros(11, int), 1)
    K.accumulate(z[:10], z[:10], z[:10], 0, 1, 0, 1, 0, 1, spec)
    assert K.MAX_ROWS * (1 << 32) <= 2**63 - 1     # the real bound


def test_memory_is_per_chunk():
    """A float32, Fortran-ordered z is converted chunk by chunk, never whole."""
    rng = np.random.default_rng(0)
    n, d = 200_000, 5
    spec = K.make_basis([NQ] * d)
    z = np.asfortranarray(rng.normal(size=(n, d)).astype(np.float32))
    x = rng.normal(size=n).astype(np.float32)
    group = (np.arange(n) % 2).astype(np.int32)
    for m in (10, 3 * K._MIN_ROWS_PER_PART):       # compile the serial and parallel kernels
        K.accumulate(z[:m], x[:m], x[:m], 0, 1, 0, 4, 0, 4, spec, group[:m], 2)
    tracemalloc.start()
    K.accumulate(z, x, x, 0, 1, 0, 4, 0, 4, spec, group, 2, chunk_rows=8192)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    whole = n * d * 8
    assert peak < whole / 4, (peak, whole)


def test_make_basis_layout_and_validation():
    spec = K.make_basis([NQ, None, UNIF], [(0, 2), (2, 1)], [(NQ, UNIF), (UNIF, ONEK)])
    assert spec.n_blocks == 4 and spec.n_columns == 3
    np.testing.assert_array_equal(spec.block_col, [[0, -1], [2, -1], [0, 2], [2, 1]])
    sizes = [12, 9, 12 * 9, 9 * 5]
    np.testing.assert_array_equal(spec.block_offset, np.r_[0, np.cumsum(sizes)])
    assert spec.n_features == sum(sizes) and spec.T == T
    assert spec.knots.shape[0] == 3                      # distinct knot vectors, shared
    assert K.gram_sensitivity(spec) == 20 and K.cross_sensitivity(spec, 2) == 16
    assert not spec.knots.flags.writeable
    bad = [
        ([NQ[1:]], (), None),                              # not clamped
        ([np.r_[NQ[:5], NQ[4] - 1, NQ[6:]]], (), None),   # decreasing
        ([K.clamped_knots([0.0], 3.0), NQ], (), None),    # two values of T
        ([K.clamped_knots([4.0], 4.0)], (), None),        # interior knot on the edge
        ([NQ, NQ], [(0, 0)], None),                       # a pair of one column
        ([NQ, None], [(0, 1)], None),                     # no knots for column 1
        ([None], (), None),                               # no block
        ([np.r_[NQ[:5], np.nan, NQ[6:]]], (), None),
    ]
    for kvs, pairs, pkv in bad:
        with pytest.raises(ValueError):
            K.make_basis(kvs, pairs, pkv)


def test_wrapper_validation():
    spec = K.make_basis([NQ, NQ])
    z = np.zeros((5, 2))
    x = np.zeros((5, 1))
    ok = (z, x, x, 0, 1, 0, 1, 0, 1, spec)
    with pytest.raises(ValueError, match="group"):
        K.accumulate(*ok, np.array([0, 1, 2, 0, 0]), 2)
    with pytest.raises(ValueError, match="group"):
        K.accumulate(*ok, np.array([0, -1, 0, 0, 0]), 2)
    with pytest.raises(ValueError, match="columns"):
        K.accumulate(np.zeros((5, 3)), x, x, 0, 1, 0, 1, 0, 1, spec)
    with pytest.raises(ValueError, match="z_scale"):
        K.accumulate(z, x, x, 0, 0.0, 0, 1, 0, 1, spec)
    with pytest.raises(ValueError, match="x_bound"):
        K.accumulate(z, x, x, 0, 1, 0, np.inf, 0, 1, spec)
    with pytest.raises(ValueError, match="rows"):
        K.accumulate(z, np.zeros((4, 1)), x, 0, 1, 0, 1, 0, 1, spec)
    c = np.zeros((spec.n_features, 1))
    with pytest.raises(ValueError, match="block"):
        K.residual_block_sums(*ok, c, c, np.array([0, 0, 0, 0, 3]), 3)
    with pytest.raises(ValueError, match="coef"):
        K.residual_block_sums(*ok, c[1:], c, np.zeros(5, int), 1)
