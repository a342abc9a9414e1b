"""The fast paths of issue 25 against plain numpy twins (exact equality).

* ``privci._private.block_labels`` (compiled PCG64 + Generator.shuffle) against
  ``Generator.permutation`` on the same seeds;
* ``gcm._finite`` against its numpy definition.
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
    import importlib
    gcm = importlib.import_module("privci.gcm")
    rng = np.random.default_rng(1)
    a = rng.normal(size=shape) * 1e300
    flat = a.reshape(-1)
    flat[::7] = np.inf
    flat[1::7] = -np.inf
    flat[2::7] = np.nan
    with np.errstate(all="ignore"):
        a2 = a * 10.0
    for arr in (a, a2, np.asfortranarray(a2)):
        got = gcm._finite(arr)
        np.testing.assert_array_equal(got, finite_twin(arr))
        assert got.flags.c_contiguous and got.dtype == np.float64
