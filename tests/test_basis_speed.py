"""The speed changes of issue 25 (second round) against their plain definitions.

* ``_basis_kernels._outer16`` (a pair's 4 x 4 Gram block in one step) against numpy;
* ``_kernels._shuffle_mod`` (batched draws, then the swaps) against
  ``Generator.permutation`` at the sizes where the rejection mask changes;
* the kernels' integers and a seeded privgcm do not depend on the number of numba threads
  or on the chunk size (fresh processes with NUMBA_NUM_THREADS=1 and 2);
* the test operator kept on a released fit is the one computed afresh, and a release
  with another Gram matrix gets its own.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys

import numpy as np
import pytest
from numba import njit, uint64

from privci import _basis_kernels as K
from privci import _kernels
from privci import _spline as S

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@njit(cache=False)
def _outer16_many(dst, doffs, src, o1s, o2s):
    for i in range(doffs.shape[0]):
        K._outer16(dst, uint64(doffs[i]), src, uint64(o1s[i]), uint64(o2s[i]))


def test_outer16_equals_numpy():
    rng = np.random.default_rng(5)
    src = rng.integers(0, 1 << 16, size=64).astype(np.float64)
    dst = rng.integers(0, 1 << 20, size=16 * 9).astype(np.float64)
    m = 200
    doffs = 16 * rng.integers(0, 9, size=m)
    o1s = rng.integers(0, 61, size=m)
    o2s = rng.integers(0, 61, size=m)
    ref = dst.copy()
    for d_, a, b in zip(doffs, o1s, o2s):
        ref[d_:d_ + 16] += np.outer(src[a:a + 4], src[b:b + 4]).ravel()
    got = dst.copy()
    _outer16_many(got, doffs, src, o1s, o2s)
    np.testing.assert_array_equal(got, ref)


def _pcg_state(entropy, chunk):
    st = np.random.PCG64(np.random.SeedSequence(entropy, spawn_key=(chunk,))).state["state"]
    mask = (1 << 64) - 1
    return np.array([st["state"] >> 64, st["state"] & mask, st["inc"] >> 64,
                     st["inc"] & mask], dtype=np.uint64)


@pytest.mark.parametrize("a, b, k", [(0, 1, 1), (0, 2, 2), (0, 3, 3), (0, 4, 2), (0, 5, 5),
                                     (3, 12, 4), (0, 17, 17), (0, 257, 3), (0, 1024, 1024),
                                     (0, 1025, 7), (65_536, 131_072, 20),
                                     (0, 65_536, 65_536), (131_072, 140_000, 2)])
@pytest.mark.parametrize("entropy", [1, 2 ** 100 + 3])
def test_shuffle_equals_numpy_permutation(a, b, k, entropy):
    chunk = a // 65_536
    buf = np.empty(b - a, dtype=np.int64)
    _kernels._shuffle_mod(_pcg_state(entropy, chunk), a, b, k, buf)
    gen = np.random.Generator(np.random.PCG64(np.random.SeedSequence(entropy,
                                                                      spawn_key=(chunk,))))
    np.testing.assert_array_equal(buf, gen.permutation(np.arange(a, b, dtype=np.int64) % k))


_CHILD = r"""
import hashlib, json, sys
import numpy as np
sys.path.insert(0, sys.argv[1])
import numba
import privci
from privci import _basis_kernels as K
from privci._private import block_labels
from privci._spline import _kernel_spec
K._MIN_ROWS_PER_PART = 1000          # several row parts even at this n
rng = np.random.default_rng(3)
n, d = 70_001, 5
z = rng.normal(size=(n, d))
x = rng.normal(size=(n, 2))
y = rng.normal(size=(n, 1))
# the additive rich basis of 16 intervals per column (key: d columns, model, test
# intervals 8 -> rich 16, not checked: no interaction block beyond 4 columns)
spec, _ = _kernel_spec((d, "additive", 8, False))
group = block_labels(n, 2, 11)
blocks = block_labels(n, 20, 12)
out = {"threads": numba.get_num_threads()}
for chunk in (K.CHUNK_ROWS, 9_999):
    G, B = K.accumulate(z, x, y, 0.0, 1.0, 0.0, 4.0, 0.0, 4.0, spec, group, 2,
                        chunk_rows=chunk, u_columns=((0, 2), (2, 3)))
    cx = np.random.default_rng(1).normal(size=(spec.n_features, 2))
    cy = np.random.default_rng(2).normal(size=(spec.n_features, 1))
    Sm = K.residual_block_sums(z, x, y, 0.0, 1.0, 0.0, 4.0, 0.0, 4.0, spec, cx, cy, blocks,
                               20, chunk_rows=chunk)
    h = hashlib.sha256(G.tobytes() + B.tobytes() + Sm.tobytes() + group.tobytes()
                       + blocks.tobytes()).hexdigest()
    out[f"kernels_{chunk}"] = h
# the default path's fused kernels: d = 1 (the full fit) and d = 5 (the additive design:
# five columns have no full fit, privgcm refuses them without a stated model)
for zz, model in ((z[:, 0], None), (z, "additive")):
    r = privci.privgcm(x[:, 0], y[:, 0], zz, epsilon=2.0, x_bound=4, y_bound=4, z_center=0,
                       z_scale=1, rng=5, assume=model)
    out[f"privgcm_{zz.ndim}"] = [float(r.statistic).hex(), float(r.pvalue).hex(),
                                 r.privacy.mechanism]
print(json.dumps(out))
"""


def _child(threads):
    env = dict(os.environ, NUMBA_NUM_THREADS=str(threads), OPENBLAS_NUM_THREADS="1",
               OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    res = subprocess.run([sys.executable, "-c", _CHILD, os.path.join(ROOT, "python")],
                         capture_output=True, text=True, env=env, timeout=600, check=True)
    return json.loads(res.stdout.strip().splitlines()[-1])


def test_results_do_not_depend_on_threads_or_chunks():
    one, two = _child(1), _child(2)
    assert one.pop("threads") == 1 and two.pop("threads") == 2
    assert one == two
    assert one[f"kernels_{K.CHUNK_ROWS}"] == one["kernels_9999"]


def _release(seed, design):
    rng = np.random.default_rng(seed)
    p = design.n_features()
    Z = rng.normal(size=(4 * p, p))
    return S.FitRelease(gram=Z.T @ Z, cross=rng.normal(size=(p, 1)), gram_scale=3.0,
                        cross_scale=1.0, gram_sensitivity=2.0, cross_sensitivity=2.0,
                        gram_epsilon=1.0, cross_epsilon=1.0, hardened=False,
                        mechanism="Laplace", rows=1000)


def test_test_operator_is_kept_per_release_and_gram():
    design = S.choose_design(20_000, 2, 1, 1, 5.0, assume_additive=True)
    rel = _release(0, design)
    fresh = S._test_operator_uncached(rel, design)
    first = S._test_operator(rel, design)
    np.testing.assert_array_equal(first, fresh)
    assert S._test_operator(rel, design) is first          # kept, not recomputed
    assert not first.flags.writeable
    np.testing.assert_array_equal(S.fit_coefficients(rel, design), fresh @ rel.cross)
    # another Gram matrix (a replaced release): its own operator
    other = dataclasses.replace(rel, gram=_release(1, design).gram)
    np.testing.assert_array_equal(S._test_operator(other, design),
                                  S._test_operator_uncached(other, design))
    assert not np.array_equal(S._test_operator(other, design), first)
