"""Golden values of about 40 seeded calls: the refactor's safety net (issue 22).

Each case is one seeded call of a public test.  What it stores, flattened to
``key -> string``:

- ``float.hex`` of every float of the result (statistic, p-value, the record's sensitivity,
  noise scale, bounds, the fit check, ...), ``repr`` of every other field (the method, the
  record's mechanism, guarantee and caveats, ...) and the printed result (``repr``);
- the budget's ledger (``format_ledger()`` and its rows) where a budget is used;
- the warnings the call raised;
- the final ``bit_generator.state`` of the ``np.random.Generator`` passed as ``rng``: equal
  states prove that the draws happened in the same order and number.

Usage (from the repository root)::

    python tools/golden.py            # compare with tests/golden/golden.json, list differences
    python tools/golden.py --update   # recompute and rewrite tests/golden/golden.json
    python tools/golden.py --only spline-d1-auto krr-exact-none   # a few cases

``tests/test_golden.py`` runs the same comparison.  When a change of the numbers is
deliberate (a new rule, a fixed surprise), run ``--update`` and commit the new JSON with
the change, saying in the commit what moved and why.

The values depend on the floating-point environment (BLAS, CPU, numpy / scipy / numba
versions).  The file stores a fingerprint of it; on another fingerprint the floats are
compared to a relative ``REL_TOL`` (and the printed text is not compared), everything
else (draw order, texts, ledgers) still exactly.  ``REL_TOL`` was 1e-9 until stop 54,
which ran on a CPU with AVX512-FP16 (the file's has none) and the same versions: four
cases moved, at most 3.4e-4 relative (the fit check's squared estimate, a difference of
two close numbers; the p-values at most 1e-6), so a difference of last bits in the SIMD
loops is amplified that far.  A change of the code moves these numbers by far more.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import difflib
import json
import math
import os
import platform
import sys
import warnings
import zlib

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GOLDEN = os.path.join(ROOT, "tests", "golden", "golden.json")
if os.path.join(ROOT, "python") not in sys.path:   # run from a checkout without installing
    sys.path.insert(0, os.path.join(ROOT, "python"))

import privci  # noqa: E402

FLOAT = "float:"
REL_TOL = 1e-3           # floats on another fingerprint (see the module docstring)


# ----------------------------------------------------------------------------- flattening

def _flat(value, key, out):
    """``out[key...] = string`` for ``value``, recursing into containers and dataclasses."""
    if isinstance(value, (bool, np.bool_)) or value is None:
        out[key] = repr(bool(value) if isinstance(value, np.bool_) else value)
    elif isinstance(value, (float, np.floating)):
        out[key] = FLOAT + float(value).hex()
    elif isinstance(value, (int, np.integer)):
        out[key] = repr(int(value))
    elif isinstance(value, str):
        out[key] = value
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        out[key + ".<type>"] = type(value).__name__
        for f in dataclasses.fields(value):
            _flat(getattr(value, f.name), f"{key}.{f.name}", out)
    elif isinstance(value, dict):
        for k, v in value.items():
            _flat(v, f"{key}[{k!r}]", out)
    elif isinstance(value, (tuple, list)):
        out[key + ".<len>"] = repr(len(value))
        for i, v in enumerate(value):
            _flat(v, f"{key}[{i}]", out)
    elif isinstance(value, np.ndarray):
        out[key + ".<shape>"] = repr(value.shape)
        if value.size <= 64:
            for i, v in enumerate(value.ravel().tolist()):
                _flat(v, f"{key}.flat[{i}]", out)
        else:   # large arrays (the non-private GCM's residuals): sums only
            with np.errstate(all="ignore"):
                _flat(float(np.sum(value)), f"{key}.<sum>", out)
                _flat(float(np.sum(value * value)), f"{key}.<sumsq>", out)
    else:
        out[key] = f"<{type(value).__name__}> " + repr(value)


def _is_dask(value):
    return type(value).__module__.split(".")[0] == "dask"


def _result_fields(res, out):
    for f in dataclasses.fields(res):
        v = getattr(res, f.name)
        if _is_dask(v):   # the Dask gcm's lazy residuals
            v = np.asarray(v.compute())
        _flat(v, f"result.{f.name}", out)
    out["repr"] = repr(res) if not _has_dask(res) else "<dask>"


def _has_dask(res):
    return any(_is_dask(getattr(res, f.name)) for f in dataclasses.fields(res))


# ----------------------------------------------------------------------------- data

def _data(seed, n, p=1, q=1, d=1, dependence=0.0):
    gen = np.random.default_rng(seed)
    z = gen.normal(size=(n, d)) if d else None
    fz = np.zeros(n) if z is None else np.sin(z[:, 0]) + (0.5 * z[:, 1] if d > 1 else 0.0)
    gz = np.zeros(n) if z is None else np.cos(z[:, 0]) + (0.3 * z[:, -1] ** 2 if d > 1 else 0.0)
    x = fz[:, None] + gen.normal(size=(n, p))
    y = gz[:, None] + dependence * x[:, :1] + gen.normal(size=(n, q))
    x = x[:, 0] if p == 1 else x
    y = y[:, 0] if q == 1 else y
    if z is not None and d == 1:
        z = z[:, 0]
    return x, y, z


def _model_x(z):
    zz = z if z.ndim == 2 else z[:, None]
    return privci.GaussianModelX(np.sin(zz[:, 0]), 1.0)


# ----------------------------------------------------------------------------- cases

PUB = dict(z_center=0.0, z_scale=1.0)
KRR = dict(regression="krr")
RFF = dict(regression="krr", kernel_approximation="rff", n_features=32, feature_rng=3)


def _privgcm_call(data, budget, kw, rng, dask_chunks=None):
    kw = dict(kw)
    x, y, z = _data(*data)
    if dask_chunks is not None:
        x, y, z = _to_dask(dask_chunks, x, y, z)
    b = None if budget is None else privci.PrivacyBudget(budget)
    eps = kw.pop("epsilon", 2.0)
    xb = kw.pop("x_bound", 4)
    yb = kw.pop("y_bound", 4)
    return privci.privgcm(x, y, z, epsilon=eps, x_bound=xb, y_bound=yb, rng=rng, budget=b,
                          **kw), b


def _privcrt(data, budget=None, dask_chunks=None, **kw):
    def call(rng):
        x, y, z = _data(*data)
        mx = _model_x(z)
        if dask_chunks is not None:
            x, y, z = _to_dask(dask_chunks, x, y, z)
        b = None if budget is None else privci.PrivacyBudget(budget)
        opts = dict(epsilon=2.0, y_bound=6, x_residual_bound=4)
        opts.update(kw)
        return privci.privcrt(x, y, z, model_x=mx, rng=rng, budget=b, **opts), b
    return call


def _gcm(data, dask_chunks=None, **kw):
    def call(rng):
        x, y, z = _data(*data)
        if dask_chunks is not None:
            x, y, z = _to_dask(dask_chunks, x, y, z)
        return privci.gcm(x, y, z, rng=rng, **kw), None
    return call


def _crt(data, **kw):
    def call(rng):
        x, y, z = _data(*data)
        return privci.crt(x, y, z, model_x=_model_x(z), rng=rng, **kw), None
    return call


def _pc(n, **kw):
    def call(rng):
        from privci import causal
        gen = np.random.default_rng(41)
        a = gen.normal(size=n)
        b = gen.normal(size=n)
        c = a + b + 0.5 * gen.normal(size=n)
        d = 0.8 * c + gen.normal(size=n)
        res = causal.pc(np.column_stack([a, b, c, d]), rng=rng, **kw)
        return res, res.budget
    return call


def _to_dask(chunk, *arrays):
    import dask.array as da
    return [None if a is None else da.from_array(a, chunks=(chunk,) + a.shape[1:])
            for a in arrays]


def _gcm_case(data, budget=None, **kw):
    return lambda rng: _privgcm_call(data, budget, kw, rng)


def _dask_gcm_case(data, chunk, **kw):
    return lambda rng: _privgcm_call(data, None, kw, rng, dask_chunks=chunk)


# (name, call(rng) -> (result, budget or None), needs dask)
N_S = 1200          # the spline path
N_K = 300           # the kernel ridge path (exact: an n x n Cholesky)
CASES = [
    # privgcm, the released spline regression (the default)
    ("spline-d1-auto", _gcm_case((1, N_S), epsilon=20.0)),
    ("spline-d1-failsafe", _gcm_case((2, N_S), epsilon=2.0)),       # p = 1: not resolvable
    ("spline-d1-public", _gcm_case((3, N_S), epsilon=20.0, **PUB)),
    ("spline-d1-public-center-auto-scale", _gcm_case((4, N_S), epsilon=20.0, z_center=0.1)),
    ("spline-d1-auto-center-public-scale", _gcm_case((5, N_S), epsilon=20.0, z_scale=1.5)),
    ("spline-d1-dependent", _gcm_case((6, N_S, 1, 1, 1, 0.4), epsilon=20.0, **PUB)),
    ("spline-d1-greater", _gcm_case((7, N_S), epsilon=20.0, alternative="greater", **PUB)),
    ("spline-d1-less", _gcm_case((8, N_S), epsilon=20.0, alternative="less")),
    ("spline-d2-auto", _gcm_case((9, 3000, 1, 1, 2), epsilon=500.0, assume="additive")),
    ("spline-d2-failsafe", _gcm_case((10, N_S, 1, 1, 2), epsilon=20.0, assume="linear")),
    ("spline-d2-public", _gcm_case((60, 3000, 1, 1, 2), epsilon=500.0, assume="linear",
                                    **PUB)),
    ("spline-d2-additive", _gcm_case((11, N_S, 1, 1, 2), epsilon=20.0, assume_additive=True)),
    ("spline-d3-additive-public", _gcm_case((12, 2000, 1, 1, 3), epsilon=30.0,
                                            assume_additive=True, z_center=[0.0, 0.0, 0.0],
                                            z_scale=[1.0, 1.0, 1.0])),
    ("spline-p2-d1", _gcm_case((13, N_S, 2, 1, 1), epsilon=20.0, **PUB)),
    ("spline-p2q2-d2", _gcm_case((14, 3000, 2, 2, 2), epsilon=500.0, assume="additive")),
    ("spline-p2q2-d2-additive", _gcm_case((15, N_S, 2, 2, 2), epsilon=20.0,
                                          assume_additive=True, **PUB)),
    ("spline-auto-bounds", _gcm_case((16, N_S), epsilon=20.0, x_bound="auto", y_bound="auto")),
    ("spline-auto-centres", _gcm_case((17, N_S), epsilon=20.0, x_center="auto",
                                      y_center="auto", **PUB)),
    ("spline-center-epsilon", _gcm_case((18, N_S), epsilon=20.0, center_epsilon=2.0, **PUB)),
    ("spline-bounds-epsilon", _gcm_case((19, N_S), epsilon=20.0, bounds_epsilon=3.0)),
    ("spline-budget", _gcm_case((20, N_S), epsilon=20.0, budget=50.0)),
    # unconditional
    ("uncond-default", _gcm_case((19, N_S, 1, 1, 0))),
    ("uncond-p2q2", _gcm_case((20, N_S, 2, 2, 0))),
    ("uncond-blocks-none", _gcm_case((21, N_K, 1, 1, 0), n_blocks=None)),
    ("uncond-budget-auto-bounds", _gcm_case((22, N_S, 1, 1, 0), budget=3.0, x_bound="auto")),
    # privgcm, kernel ridge regression (the paper's mechanism)
    ("krr-exact-none", _gcm_case((23, N_K), n_blocks=None, **KRR)),
    ("krr-exact-25", _gcm_case((24, N_K), n_blocks=25, **KRR)),
    ("krr-exact-auto-sharp", _gcm_case((25, N_K), sensitivity="sharp", **KRR)),
    ("krr-exact-d2-zscale", _gcm_case((26, N_K, 1, 1, 2), z_scale=2.0, **KRR)),
    ("krr-rff-none", _gcm_case((27, N_K), n_blocks=None, **RFF)),
    ("krr-rff-25", _gcm_case((28, N_K), n_blocks=25, **RFF)),
    ("krr-cv-none", _gcm_case((29, N_K), n_blocks=None, ridge_lambda="cv", **KRR)),
    ("krr-cv-25", _gcm_case((30, N_K), n_blocks=25, ridge_lambda="cv",
                            cv_lambdas=[1.0, 10.0], **KRR)),
    ("krr-p2-none", _gcm_case((31, N_K, 2, 1, 1), n_blocks=None, n_sim=49, **KRR)),
    ("krr-p2q2-25", _gcm_case((32, N_K, 2, 2, 1), n_blocks=25, n_sim=49, **KRR)),
    ("krr-budget-auto-centres", _gcm_case((33, N_K), budget=4.0, x_center="auto", **KRR)),
    # privcrt
    ("privcrt-exact", _privcrt((34, N_K))),
    ("privcrt-rff-greater", _privcrt((35, N_K), alternative="greater",
                                     kernel_approximation="rff", n_features=32, feature_rng=2)),
    ("privcrt-budget-auto", _privcrt((36, N_K), budget=3.0, y_bound="auto",
                                     sensitivity="paper")),
    # non-private
    ("gcm-exact", _gcm((37, N_K))),
    ("gcm-p2-bootstrap", _gcm((38, N_K, 2, 1, 1), n_sim=49)),
    ("gcm-rff-center", _gcm((39, N_K), kernel_approximation="rff", n_features=32,
                            feature_rng=1, center=True, ridge_lambda=0.05)),
    ("gcm-uncond", _gcm((40, N_K, 1, 1, 0))),
    ("crt", _crt((41, N_K), n_resamples=19)),
    # causal
    ("pc-privgcm", _pc(1000, epsilon=200.0, bounds=4.0, method="per-test")),
    ("pc-krr-split-halves", _pc(300, epsilon=40.0, bounds=4.0, split="halves", regression="krr",
                                n_blocks=25, method="per-test")),
    ("pc-release", _pc(2000, epsilon=5.0, bounds=4.0)),
]
DASK_CASES = [
    ("dask-spline-public", _dask_gcm_case((50, N_S, 1, 1, 2), 500, epsilon=20.0,
                                          assume_additive=True, **PUB)),
    ("dask-spline-d1", _dask_gcm_case((55, N_S), 500, epsilon=20.0, **PUB)),
    ("dask-krr-rff-none", _dask_gcm_case((51, N_K, 1, 1, 1), 110, n_blocks=None, **RFF)),
    ("dask-krr-rff-25", _dask_gcm_case((52, N_K, 1, 1, 1), 110, n_blocks=25,
                                       center_epsilon=0.2, **RFF)),
    ("dask-privcrt-rff", _privcrt((53, N_K), dask_chunks=110, kernel_approximation="rff",
                                  n_features=32, feature_rng=2)),
    ("dask-gcm-rff", _gcm((54, N_K), dask_chunks=110, kernel_approximation="rff",
                          n_features=32, feature_rng=1, ridge_lambda=0.05)),
]


def have_dask():
    try:
        import dask.array  # noqa: F401
        import distributed  # noqa: F401
    except ImportError:
        return False
    return True


@contextlib.contextmanager
def dask_client():
    import distributed
    cluster = distributed.LocalCluster(n_workers=1, threads_per_worker=2, processes=False,
                                       dashboard_address=None)
    client = distributed.Client(cluster)
    try:
        yield client
    finally:
        client.close()
        cluster.close()


def seed_of(name):
    """The seed of a case's rng: from its name, so that adding a case changes no other."""
    return zlib.crc32(name.encode())


class _one_thread:
    """BLAS and numba on one thread while a case runs: a multi-threaded BLAS sums in an
    order that depends on the thread count, which moves the last bits of the KRR solves
    (found by a CI run with two threads against a golden file written with one)."""

    def __enter__(self):
        self._stack = []
        import scipy.linalg  # noqa: F401 - load scipy's own BLAS first, so that it is limited
        try:
            from threadpoolctl import threadpool_limits
            self._stack.append(threadpool_limits(limits=1))
        except ImportError:  # pragma: no cover - threadpoolctl comes with scikit-learn
            pass
        try:
            import numba
            self._numba = numba.get_num_threads()
            numba.set_num_threads(1)
        except ImportError:  # pragma: no cover
            self._numba = None
        return self

    def __exit__(self, *exc):
        for limit in self._stack:
            limit.restore_original_limits()
        if self._numba is not None:
            import numba
            numba.set_num_threads(self._numba)
        return False


def run_case(call, seed):
    """The flattened record of one case, its rng a fresh ``default_rng(seed)``."""
    rng = np.random.default_rng(seed)
    out = {}
    with warnings.catch_warnings(record=True) as caught, _one_thread():
        warnings.simplefilter("always")
        res, budget = call(rng)
    if dataclasses.is_dataclass(res):
        _result_fields(res, out)
    else:
        for name, v in vars(res).items():
            if name == "budget":
                continue
            _flat(v, f"result.{name}", out)
    if budget is not None:
        out["ledger.text"] = budget.format_ledger()
        _flat(budget.ledger, "ledger.rows", out)
    noise = (DeprecationWarning, PendingDeprecationWarning, FutureWarning, ResourceWarning)
    own = [w for w in caught if not issubclass(w.category, noise)
           and not any(f"{os.sep}{lib}{os.sep}" in (w.filename or "")
                       for lib in ("dask", "distributed", "tornado"))]
    _flat([f"{w.category.__name__}: {w.message}" for w in own], "warnings", out)
    _flat(rng.bit_generator.state, "rng_state", out)
    return out


def fingerprint():
    import numba
    import scipy
    return {"numpy": np.__version__, "scipy": scipy.__version__, "numba": numba.__version__,
            "machine": platform.machine(), "python": platform.python_version(),
            "blas": _blas(), "simd": _simd()}


def _simd():
    """The CPU features numpy dispatches on (its SIMD loops for exp, log, power and the
    sums round the last bit differently with and without AVX-512: stop 52 found three
    cases one ulp apart on an AVX-512 machine with the same versions as the file's)."""
    try:
        from numpy._core._multiarray_umath import __cpu_features__ as feats
    except ImportError:   # numpy < 2
        try:
            from numpy.core._multiarray_umath import __cpu_features__ as feats
        except ImportError:   # pragma: no cover
            return "unknown"
    return ",".join(sorted(k for k, v in feats.items() if v))


def _blas():
    try:
        cfg = np.show_config(mode="dicts")
        b = cfg["Build Dependencies"]["blas"]
        return f"{b.get('name')} {b.get('version')}"
    except Exception:   # pragma: no cover - older numpy
        return "unknown"


def compute(only=None, use_dask=None):
    """{case name: flattened record} for every case (the Dask ones when Dask is installed)."""
    use_dask = have_dask() if use_dask is None else use_dask
    cases = [(seed_of(name), name, call) for name, call in CASES + (DASK_CASES if use_dask else [])]
    cases = [c for c in cases if only is None or c[1] in only]
    values = {}
    ctx = dask_client() if use_dask and any(c[1].startswith("dask-") for c in cases) \
        else contextlib.nullcontext()
    with ctx:
        for seed, name, call in cases:
            values[name] = run_case(call, seed)
    return values


def load():
    with open(GOLDEN, encoding="utf-8") as fh:
        return json.load(fh)


def save(values):
    os.makedirs(os.path.dirname(GOLDEN), exist_ok=True)
    with open(GOLDEN, "w", encoding="utf-8") as fh:
        json.dump({"fingerprint": fingerprint(), "cases": values}, fh, indent=1, sort_keys=True)
        fh.write("\n")


def _same(a, b, exact, rel_tol=REL_TOL):
    if a == b:
        return True
    if exact or a is None or b is None or not (a.startswith(FLOAT) and b.startswith(FLOAT)):
        return False
    fa, fb = float.fromhex(a[len(FLOAT):]), float.fromhex(b[len(FLOAT):])
    return math.isclose(fa, fb, rel_tol=rel_tol, abs_tol=1e-300) or (fa != fa and fb != fb)


def differences(stored, values, rel_tol=None):
    """Lines describing every difference of ``values`` from the ``stored`` golden file
    (``rel_tol``: floats compared to that relative tolerance and the printed text skipped,
    whatever the fingerprint)."""
    exact = stored.get("fingerprint") == fingerprint() and rel_tol is None
    lines = []
    for name, got in values.items():
        want = stored["cases"].get(name)
        if want is None:
            lines.append(f"{name}: not in the golden file")
            continue
        lines.extend(case_differences(name, want, got, exact,
                                      REL_TOL if rel_tol is None else rel_tol))
    return lines


def case_differences(name, want, got, exact=True, rel_tol=REL_TOL):
    """Lines describing every difference of one case's record ``got`` from ``want``."""
    lines = []
    for key in sorted(set(want) | set(got)):
        if not exact and key == "repr":
            continue
        a, b = want.get(key), got.get(key)
        if not _same(a, b, exact, rel_tol):
            lines.append(f"{name}: {key}")
            if a is not None and b is not None and "\n" in a + b:
                lines.extend("    " + d for d in difflib.unified_diff(
                    a.splitlines(), b.splitlines(), "golden", "now", lineterm="", n=0))
            else:
                lines.append(f"    golden: {a!r}\n    now:    {b!r}")
    return lines


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--update", action="store_true", help="rewrite tests/golden/golden.json")
    ap.add_argument("--only", nargs="+", help="case names (with --update: merged into the file)")
    ap.add_argument("--no-dask", action="store_true", help="skip the Dask cases")
    ap.add_argument("--rel-tol", type=float, default=None,
                    help="compare floats to this relative tolerance (and skip the printed "
                         "text) even on the same fingerprint: shows that a change moved "
                         "only rounding")
    args = ap.parse_args(argv)
    values = compute(only=args.only, use_dask=False if args.no_dask else None)
    if args.update:
        old = load()["cases"] if (args.only or args.no_dask) and os.path.exists(GOLDEN) else {}
        old.update(values)
        save(old)
        print(f"wrote {len(values)} cases to {os.path.relpath(GOLDEN, ROOT)}")
        return 0
    lines = differences(load(), values, args.rel_tol)
    print("\n".join(lines) if lines else f"all {len(values)} cases equal the golden file")
    return 1 if lines else 0


if __name__ == "__main__":
    sys.exit(main())
