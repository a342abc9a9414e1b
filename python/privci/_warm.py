"""``python -m privci warm``: compile and cache every numba kernel of the default paths once.

numba compiles a kernel on its first call and caches the machine code on disk
(``cache=True``, in the package's ``__pycache__``, or ``NUMBA_CACHE_DIR``); later
processes load it in milliseconds.  On a fresh install the first ``privgcm`` call
therefore compiles: tens of seconds on a 2-core machine.  ``warm()`` pays that once, at
install time (``make demo`` and the install instructions run it; the R package's
``install_privci()`` too), by running each public test on small synthetic data: public
numbers only, no user data, no privacy spent on anything real.

The steps cover the in-memory paths of :func:`privci.privgcm` (the released spline fit,
serial and multi-threaded passes; ``regression="krr"``; no z), :func:`privci.privcrt`
and :func:`privci.gcm` (exact and random-feature kernels).  Each step is independent: a
step that fails is reported and the others still run.
"""

from __future__ import annotations

import sys
import time

import numpy as np

__all__ = ["STEPS", "warm"]


def _data(n, d=1, seed=0):
    rng = np.random.default_rng(seed)
    z = rng.normal(size=(n, d))
    x = np.sin(z[:, 0]) + rng.normal(size=n)
    y = np.cos(z[:, -1]) + 0.3 * x + rng.normal(size=n)
    return x, y, z


def _spline(n):
    def run():
        import privci
        from privci import _spline as S
        x, y, z = _data(n)
        kernels = S.USE_KERNELS
        S.USE_KERNELS = True     # the fused kernels even where the rule takes numpy passes
        try:
            # rng=None: OpenDP's samplers, as a release would use them
            privci.privgcm(x, y, z, epsilon=2.0, x_bound=4, y_bound=5, z_center=0.0,
                           z_scale=1.0)
        finally:
            S.USE_KERNELS = kernels
    return run


def _twinned():
    """The kernels that small first calls replace by their numpy twins (clip_scale,
    rows_outside, the block labels): compiled here for the large calls."""
    from privci import _kernels, _private
    _kernels._clip_scale_kernel(np.zeros((4, 2)), np.ones(2))
    _kernels._rows_outside_kernel(np.zeros((4, 2)), 4.0, np.zeros(4, np.uint8))
    states, first = _private.label_chunk_states(0, 0, 4)
    _kernels._block_labels_kernel(states, first, _private._LABEL_CHUNK, 4, 2, 0, 4,
                                  np.empty(4, np.int64))


def _spline_additive():
    import privci
    x, y, z = _data(3000, d=2)
    privci.privgcm(x, y, z, epsilon=4.0, x_bound=4, y_bound=5, z_center=0.0, z_scale=1.0,
                   assume_additive=True, rng=0)
    x, y, z = _data(3000, d=3)
    privci.privgcm(x, y, z, epsilon=4.0, x_bound=4, y_bound=5, z_center=0.0, z_scale=1.0,
                   assume="linear", rng=0)


def _krr():
    import privci
    x, y, z = _data(400)
    privci.privgcm(x, y, z, epsilon=2.0, x_bound=4, y_bound=5, regression="krr", rng=0)
    privci.privgcm(x, y, z, epsilon=2.0, x_bound=4, y_bound=5, regression="krr", rng=0,
                   kernel_approximation="rff", n_features=64, feature_rng=0)
    privci.privgcm(x, y, None, epsilon=2.0, x_bound=4, y_bound=5, rng=0)


def _crt():
    import privci
    x, y, z = _data(400)
    mx = privci.GaussianModelX(lambda zz: np.sin(zz[:, 0]), 1.0)
    privci.privcrt(x, y, z, epsilon=2.0, model_x=mx, y_bound=5, x_residual_bound=4)
    privci.crt(x, y, z, model_x=mx, n_resamples=19, rng=0)


def _gcm():
    import privci
    x, y, z = _data(400)
    privci.gcm(x, y, z, ridge_lambda=1e-2)
    privci.gcm(x, y, z, kernel_approximation="rff", ridge_lambda=1e-2, n_features=64,
               feature_rng=0, center=True)
    privci.gcm(np.c_[x, y], y, z, ridge_lambda=1e-2, n_sim=9, rng=0)


# (name, step): run in this order by warm()
STEPS = (
    ("privgcm, released spline fit (n = 2000: one thread)", _spline(2000)),
    ("privgcm, released spline fit (n = 100000: the multi-threaded passes)", _spline(100_000)),
    ("privgcm, two columns of z (additive), three (linear)", _spline_additive),
    ("privgcm, regression='krr' (exact, random features) and without z", _krr),
    ("privcrt and crt", _crt),
    ("gcm (exact, random features, several columns)", _gcm),
    ("kernels that small first calls replace by numpy twins", _twinned),
)


def warm(out=None, steps=None):
    """Run ``steps`` (None: :data:`STEPS`), printing each one's time to ``out``
    (default stdout); returns the number of steps that failed (0: all kernels are
    compiled and cached).

    Examples
    --------
    >>> from privci._warm import warm
    >>> import io
    >>> buf = io.StringIO()
    >>> warm(buf, steps=[("nothing to compile", lambda: None)])
    0
    >>> "nothing to compile" in buf.getvalue()
    True
    """
    import warnings
    out = sys.stdout if out is None else out
    steps = STEPS if steps is None else steps
    failed = 0
    total = time.perf_counter()
    for name, step in steps:
        start = time.perf_counter()
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")   # synthetic data: nothing to warn about
                step()
        except Exception as exc:   # report and go on: each step compiles its own kernels
            failed += 1
            print(f"  FAILED {name}: {type(exc).__name__}: {exc}", file=out, flush=True)
            continue
        print(f"  {time.perf_counter() - start:6.1f} s  {name}", file=out, flush=True)
    print(f"privci warm: {time.perf_counter() - total:.1f} s in all; the kernels are cached "
          "for later processes" + (f" ({failed} step(s) failed)" if failed else ""),
          file=out, flush=True)
    return failed
