"""The first call after an install (issue 37, item 10): what avoids or pays the compilation.

* ``_kernels.ready`` tells a compiled (or cached) kernel from one whose call would compile;
* the block labels take their exact numpy twin while the kernel is not ready (small n):
  the same labels as the compiled kernel, bit for bit;
* ``privci._warm.STEPS`` (``privci warm``) compile every kernel of the default paths.

Times are measured by ``tests/benchmarks/bench_cold_start.py``, not asserted here.
"""

import numpy as np
import pytest
from numba import njit

import privci
from privci import _kernels, _private

_CHUNK = _private._LABEL_CHUNK


def _states(n, entropy, start=0, stop=None):
    """The chunk states _private.block_labels passes to the kernel."""
    return _private.label_chunk_states(entropy, start, n if stop is None else stop)


@pytest.mark.parametrize("n, k, entropy, start, stop", [
    (1, 1, 0, 0, 1), (7, 3, 5, 0, 7), (1000, 20, 2 ** 127 + 3, 0, 1000),
    (_CHUNK + 1, 5, 99, 0, _CHUNK + 1), (3 * _CHUNK + 17, 20, 42, 70_001, 140_002),
    (200_003, 7, 42, 150_000, 200_003),
])
def test_numpy_labels_equal_the_kernel(n, k, entropy, start, stop):
    states, first = _states(n, entropy, start, stop)
    a = _kernels._block_labels_numpy(states, first, _CHUNK, n, k, start, stop,
                                     np.empty(stop - start, np.int64))
    b = _kernels._block_labels_kernel(states, first, _CHUNK, n, k, start, stop,
                                      np.empty(stop - start, np.int64))
    np.testing.assert_array_equal(a, b)


def test_labels_use_numpy_until_the_kernel_is_ready(monkeypatch):
    calls = []
    numpy_twin = _kernels._block_labels_numpy
    monkeypatch.setattr(_kernels, "_block_labels_numpy",
                        lambda *a: calls.append("numpy") or numpy_twin(*a))
    expected = _private.block_labels(5000, 10, 123)
    monkeypatch.setattr(_kernels, "ready", lambda kernel: False)
    assert np.array_equal(_private.block_labels(5000, 10, 123), expected)
    assert calls == ["numpy"]
    # beyond NUMPY_LABEL_ROWS the kernel runs (compiling if it must)
    monkeypatch.setattr(_kernels, "NUMPY_LABEL_ROWS", 4999)
    assert np.array_equal(_private.block_labels(5000, 10, 123), expected)
    assert calls == ["numpy"]


@pytest.mark.parametrize("d", [1, 3])
def test_rows_outside_numpy_equals_the_kernel(d, monkeypatch):
    """rows_outside's first-call twin against the kernel itself: NaN inside, +-inf and the
    far rows outside, the edge inside; then the dispatch (twin while not ready)."""
    t = np.random.default_rng(d).normal(scale=2.0, size=(5000, d))
    t[[5, 7, 9, 11]] = 0.0
    t[5, 0], t[7, d - 1], t[9, 0], t[11, d - 1] = np.nan, 9.0, -np.inf, 4.0
    a, b = np.empty(5000, np.uint8), np.empty(5000, np.uint8)
    ca = _kernels._rows_outside_kernel(t, 4.0, a)
    monkeypatch.setattr(_kernels, "ready", lambda kernel: False)
    cb = _kernels.rows_outside(t, 4.0, b)
    np.testing.assert_array_equal(a, b)
    assert ca == cb == int(a.sum()) and not a[5] and a[7] and a[9] and not a[11]


def test_ready_tells_compiled_from_not_compiled():
    @njit(cache=False)
    def add_one(a):
        return a + 1

    assert not _kernels.ready(add_one)       # no signature yet, no cache to load
    add_one(1.0)
    assert _kernels.ready(add_one)
    assert not _kernels.ready(object())      # not a numba dispatcher


def test_ready_reads_the_on_disk_cache(tmp_path, monkeypatch):
    """A kernel compiled by an earlier process (its cache index on disk, for this source)
    is ready in a new one before any call: run in a subprocess with its own cache dir."""
    import subprocess
    import sys
    import textwrap
    src = tmp_path / "kmod.py"
    src.write_text(textwrap.dedent("""
        from numba import njit
        @njit(cache=True)
        def twice(a):
            return 2 * a
    """))
    code = ("import sys; sys.path.insert(0, %r); import kmod; from privci import _kernels; "
            "r = _kernels.ready(kmod.twice); kmod.twice(1.0); print(r)") % str(tmp_path)
    env = {"NUMBA_CACHE_DIR": str(tmp_path / "cache")}
    import os
    env = dict(os.environ, **env)
    first = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                           text=True, timeout=300)
    second = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                            text=True, timeout=300)
    assert first.stdout.strip() == "False", first.stderr[-2000:]
    assert second.stdout.strip() == "True", second.stderr[-2000:]


def _dispatchers(module):
    from numba.core.registry import CPUDispatcher
    return {name: obj for name, obj in vars(module).items() if isinstance(obj, CPUDispatcher)}


def test_warm_steps_compile_the_default_paths_kernels():
    """After the warm-up steps every kernel that the default paths call is ready: the
    in-memory kernels of privci._kernels except the RFF/PCG helpers that only run inside
    others, and the basis kernels' entry points (serial; the multi-threaded ones when
    numba has more than one thread)."""
    import numba

    from privci import _basis_kernels, _warm
    failed = _warm.warm(out=__import__("io").StringIO())
    assert failed == 0
    need = ["residual_products", "gcm_univariate", "standardise_columns", "gcm_max_statistic",
            "crt_statistics", "rank_scores", "_clip_scale_kernel", "rff_features_into",
            "rff_residuals", "_rows_outside_kernel", "_block_labels_kernel"]
    kern = _dispatchers(_kernels)
    not_ready = [name for name in need if not _kernels.ready(kern[name])]
    assert not not_ready, not_ready
    basis = _dispatchers(_basis_kernels)
    need_b = ["_accumulate_additive_serial", "_residual_additive_serial"]
    if numba.get_num_threads() > 1:
        need_b += ["accumulate_additive_into", "residual_sums_additive_into"]
    not_ready = [name for name in need_b if name in basis and not _kernels.ready(basis[name])]
    assert not not_ready, not_ready



def test_first_default_call_compiles_nothing(tmp_path):
    """Issue 37, item 10: the README's privgcm call (n = 2000) in a fresh interpreter with
    an empty numba cache compiles no kernel (numpy passes and twins); beyond NUMPY_ROWS
    rows the rule takes the fused kernels."""
    import os
    import subprocess
    import sys
    code = r"""
import numpy as np, privci, sys
from numba.core.registry import CPUDispatcher
from privci import _kernels, _basis_kernels
n = int(sys.argv[1])
rng = np.random.default_rng(0)
z = rng.normal(size=(n, 1))
x = np.sin(z[:, 0]) + rng.normal(size=n)
y = np.cos(z[:, 0]) + 0.8 * (x - np.sin(z[:, 0])) + rng.normal(size=n)
res = privci.privgcm(x, y, z, epsilon=2.0, x_bound=3.5, y_bound=4.5, z_center=0.0,
                     z_scale=1.0, rng=1)
assert 0 <= res.pvalue <= 1
done = sorted(name for mod in (_kernels, _basis_kernels) for name, obj in vars(mod).items()
              if isinstance(obj, CPUDispatcher) and obj.signatures)
print(",".join(done))
"""
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "cache"), NUMBA_NUM_THREADS="1")
    small = subprocess.run([sys.executable, "-c", code, "2000"], env=env,
                           capture_output=True, text=True, timeout=600)
    assert small.returncode == 0, small.stderr[-2000:]
    assert small.stdout.strip() == "", small.stdout
    # the rule's other side (not run: it would compile for tens of seconds)
    from privci import _spline
    design = _spline.choose_design(_spline.NUMPY_ROWS + 1, 1, 1, 1, 2.0)
    assert not _spline._fast(design, _spline.NUMPY_ROWS)
    assert _spline._fast(design, _spline.NUMPY_ROWS + 1)
