"""The fast paths of issue 25 against plain numpy twins (exact equality).

* ``privci._private.block_labels`` (compiled PCG64 + Generator.shuffle) against
  ``Generator.permutation`` on the same seeds;
* ``_gcm_pipeline.finite`` against its numpy definition.
"""

from __future__ import annotations

import numpy as np
import pytest

from privci import _private

_CHUNK = _private._LABEL_CHUNK


def labels_twin(n, k, entropy, start=0, stop=None):
    """block_labels as numpy would draw them: one Generator.permutation per chunk."""
    stop = n if stop is None else stop
    out = np.empty(stop - start, dtype=np.int64)
    first, last = start // _CHUNK, (max(stop, start + 1) - 1) // _CHUNK
    for c in range(first, last + 1):
        a, b = c * _CHUNK, min(n, (c + 1) * _CHUNK)
        gen = np.random.Generator(np.random.PCG64(np.random.SeedSequence(entropy, spawn_key=(c,))))
        lab = gen.permutation(np.arange(a, b, dtype=np.int64) % k)
        lo, hi = max(a, start), min(b, stop)
        if hi > lo:
            out[lo - start:hi - start] = lab[lo - a:hi - a]
    return out


@pytest.mark.parametrize("n, k", [(1, 1), (2, 2), (7, 3), (1000, 20), (_CHUNK, 2),
                                  (_CHUNK + 1, 5), (3 * _CHUNK + 17, 20), (200_003, 100)])
@pytest.mark.parametrize("entropy", [0, 99, 2 ** 127 + 12345])
def test_block_labels_equal_numpy_permutation(n, k, entropy):
    np.testing.assert_array_equal(_private.block_labels(n, k, entropy),
                                  labels_twin(n, k, entropy))


@pytest.mark.parametrize("start, stop", [(0, 1), (5, 5), (_CHUNK - 3, _CHUNK + 4),
                                         (70_001, 140_002), (2 * _CHUNK, 3 * _CHUNK),
                                         (150_000, 200_003)])
def test_block_labels_ranges_equal_numpy(start, stop):
    n = 200_003
    got = _private.block_labels(n, 7, 42, start, stop)
    np.testing.assert_array_equal(got, labels_twin(n, 7, 42, start, stop))
    np.testing.assert_array_equal(got, _private.block_labels(n, 7, 42)[start:stop])


def test_block_labels_sizes_and_thread_count():
    import numba
    n, k = 3 * _CHUNK + 5, 20
    lab = _private.block_labels(n, k, 7)
    np.testing.assert_array_equal(np.bincount(lab, minlength=k), _private.block_counts(n, k))
    old = numba.get_num_threads()
    try:
        numba.set_num_threads(1)
        one = _private.block_labels(n, k, 7)
    finally:
        numba.set_num_threads(old)
    np.testing.assert_array_equal(lab, one)


def test_pcg64_draws_equal_numpy():
    from privci._kernels import _pcg64_next
    from numba import njit

    @njit
    def draws(st, m):
        out = np.empty(m, dtype=np.uint64)
        for i in range(m):
            out[i] = _pcg64_next(st)
        return out

    for seed in (0, 1, 2 ** 100):
        bg = np.random.PCG64(seed)
        s = bg.state["state"]
        mask = (1 << 64) - 1
        st = np.array([s["state"] >> 64, s["state"] & mask, s["inc"] >> 64, s["inc"] & mask],
                      dtype=np.uint64)
        np.testing.assert_array_equal(draws(st, 1000), bg.random_raw(1000))


def finite_twin(a):
    big = np.finfo(np.float64).max
    return np.ascontiguousarray(np.clip(np.nan_to_num(a, nan=0.0, posinf=big, neginf=-big),
                                        -big, big))


@pytest.mark.parametrize("shape", [(0, 1), (5,), (6, 1), (1000, 3)])
def test_finite_equals_numpy(shape):
    from privci import _gcm_pipeline
    rng = np.random.default_rng(1)
    a = rng.normal(size=shape) * 1e300
    flat = a.reshape(-1)
    flat[::7] = np.inf
    flat[1::7] = -np.inf
    flat[2::7] = np.nan
    with np.errstate(all="ignore"):
        a2 = a * 10.0
    for arr in (a, a2, np.asfortranarray(a2)):
        got = _gcm_pipeline.finite(arr)
        np.testing.assert_array_equal(got, finite_twin(arr))
        assert got.flags.c_contiguous and got.dtype == np.float64


# --------------------------------------------------------------------------- fused kernels

import naive_basis as NB  # noqa: E402
from test_basis_kernels import _data, _make, _twin_features  # noqa: E402

from privci import _basis_kernels as K  # noqa: E402
from privci import _spline as S  # noqa: E402

RICH_8 = np.asarray(S._knots(8), dtype=np.float64)       # 11 interior knots: counted
RICH_128 = np.asarray(S._knots(128), dtype=np.float64)   # 191 interior knots: the table


def _spec_rows():
    rows = []
    for d in (1, 2, 3, 5):
        rows.append((f"d{d}-r8", [RICH_8] * d, [], None))
    for d in (1, 2):
        rows.append((f"d{d}-r128", [RICH_128] * d, [], None))
    rows.append(("d2-tensor", [RICH_8, RICH_8], [(0, 1)], None))
    rows.append(("d3-tensor", [RICH_8] * 3, [(0, 2), (1, 0)], None))
    rows.append(("d3-partial", [RICH_128, None, RICH_8], [(1, 2)], [(RICH_8, RICH_8)]))
    return rows


ROWS = _spec_rows()


def _with_threads(k, fn):
    import numba
    old = numba.get_num_threads()
    try:
        numba.set_num_threads(min(k, numba.config.NUMBA_NUM_THREADS))
        return fn()
    finally:
        numba.set_num_threads(old)


@pytest.mark.parametrize("row", ROWS, ids=[r[0] for r in ROWS])
@pytest.mark.parametrize("n, chunk", [(1, 7), (2, 1), (1501, 500)])
def test_parallel_kernels_equal_twin(row, n, chunk, monkeypatch):
    """Both passes, split over threads (small parts), over chunks and over float64 partial
    sums (FLOAT_ROWS small), equal the numpy twins exactly for any thread count."""
    monkeypatch.setattr(K, "_MIN_ROWS_PER_PART", 128)
    monkeypatch.setattr(K, "FLOAT_ROWS", 300)
    rng = np.random.default_rng(n + len(row[0]))
    spec = _make(row)
    z, x, y, zc, zs, xc, xb, yc, yb = _data(rng, n, row, 1, 2)
    group = rng.integers(0, 2, size=n)
    block = rng.integers(0, 9, size=n)
    Phi = _twin_features(z, zc, zs, row)
    uq = np.hstack([NB.quantize_u(x, xc, xb), NB.quantize_u(y, yc, yb)])
    Gr, Br = NB.accumulate(Phi, uq, group, 2)
    P = spec.n_features
    cx = rng.normal(size=(P, 1))
    cy = rng.normal(size=(P, 2))
    Sr = NB.residual_block_sums(Phi, uq[:, :1], uq[:, 1:], cx, cy, block, 9)
    for threads in (1, 2):
        G, B = _with_threads(threads, lambda: K.accumulate(
            z, x, y, zc, zs, xc, xb, yc, yb, spec, group, 2, chunk_rows=chunk))
        np.testing.assert_array_equal(G, Gr)
        np.testing.assert_array_equal(B, Br)
        Sk = _with_threads(threads, lambda: K.residual_block_sums(
            z, x, y, zc, zs, xc, xb, yc, yb, spec, cx, cy, block, 9, chunk_rows=chunk))
        np.testing.assert_array_equal(Sk, Sr)


def test_compact_layout_and_dense_fallback_agree(monkeypatch):
    """The additive kernel's compact accumulators and the generic dense one give the same
    integers (the cap _COMPACT_BYTES picks between them)."""
    rng = np.random.default_rng(3)
    row = ("d5", [RICH_8] * 5, [], None)
    spec = _make(row)
    z, x, y, zc, zs, xc, xb, yc, yb = _data(rng, 5000, row, 2, 1)
    group = rng.integers(0, 3, size=5000)
    assert K._pair_layout(spec) is not None
    compact = K.accumulate(z, x, y, zc, zs, xc, xb, yc, yb, spec, group, 3)
    monkeypatch.setattr(K, "_COMPACT_BYTES", 0)
    assert K._pair_layout(spec) is None
    dense = K.accumulate(z, x, y, zc, zs, xc, xb, yc, yb, spec, group, 3)
    for a, b in zip(compact, dense):
        np.testing.assert_array_equal(a, b)


def test_span_table_gives_the_searched_span():
    """Spans from the table (many knots) equal the largest m with knots[m] <= t, at every
    knot, its neighbours, cell edges and random points."""
    kv = RICH_128
    spec = K.make_basis([kv])
    T = spec.T
    edges = -T + np.arange(K.SPAN_CELLS + 1) * (2 * T / K.SPAN_CELLS)
    t = np.r_[kv, np.nextafter(kv, np.inf), np.nextafter(kv, -np.inf), edges,
              np.nextafter(edges, np.inf), np.nextafter(edges, -np.inf),
              np.random.default_rng(0).uniform(-T, T, 5000)]
    t = np.clip(t, -T, T)
    q = K.spline_features(t, spec, quantized=True)
    ref = NB.features(t, 0.0, 1.0, [kv])
    np.testing.assert_array_equal(q, ref)


@pytest.mark.parametrize("d", [1, 3])
def test_privgcm_fused_path_equals_numpy_path(d, monkeypatch):
    """privgcm's default path (x, y clipped and scaled inside the kernels) gives the same
    seeded result as the numpy row passes of privci._spline."""
    import privci
    rng = np.random.default_rng(d)
    n = 20_000
    z = rng.normal(size=(n, d))
    x = np.sin(z[:, 0]) + rng.normal(size=n) * 3
    y = -np.sin(z[:, 0]) + rng.normal(size=n) * 3
    x[:50] = 1e6                      # clipped
    kw = dict(epsilon=2.0, x_bound=4, y_bound=3, z_center=0, z_scale=1, rng=5,
              x_center=0.3, y_center=-0.2, assume_additive=True)
    fast = privci.privgcm(x, y, z, **kw)
    monkeypatch.setattr(S, "USE_KERNELS", False)
    slow = privci.privgcm(x, y, z, **kw)
    assert fast.statistic == slow.statistic and fast.pvalue == slow.pvalue


@pytest.mark.parametrize("row", [ROWS[2], ROWS[-2]], ids=[ROWS[2][0], ROWS[-2][0]])
def test_u_columns_per_group(row):
    """u_columns: each group's cross-products for its own u columns only, the others 0."""
    rng = np.random.default_rng(8)
    spec = _make(row)
    z, x, y, zc, zs, xc, xb, yc, yb = _data(rng, 3000, row, 2, 3)
    group = rng.integers(0, 3, size=3000)
    full = K.accumulate(z, x, y, zc, zs, xc, xb, yc, yb, spec, group, 3)
    cols = ((0, 2), (2, 5), (1, 1))
    part = K.accumulate(z, x, y, zc, zs, xc, xb, yc, yb, spec, group, 3, u_columns=cols)
    np.testing.assert_array_equal(part[0], full[0])
    for g, (lo, hi) in enumerate(cols):
        want = np.zeros_like(full[1][g])
        want[:, lo:hi] = full[1][g][:, lo:hi]
        np.testing.assert_array_equal(part[1][g], want)
    with pytest.raises(ValueError, match="u_columns"):
        K.accumulate(z, x, y, zc, zs, xc, xb, yc, yb, spec, group, 3, u_columns=((0, 9),) * 3)
