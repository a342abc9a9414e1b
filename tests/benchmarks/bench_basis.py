"""PrivGCM's default path and the fused spline kernels against reading the data twice
(issue 25).

For n in {10^4, 10^5, 10^6, 10^7} (``--quick``: 10^4 and 10^5) and d in {1, 5, 20}, one
fresh process per (n, d) (so earlier sizes leave no heap), on z ~ N(0, I_d), x and y
depending on z_1 (one column each), it times:

* (a) ``privci.privgcm(x, y, z, epsilon=1, x_bound=4, y_bound=4, z_center=0, z_scale=1,
  rng=0)``: the default path, whatever it is when the benchmark runs;
* (b) the two fused kernels of ``privci._basis_kernels`` alone: ``accumulate`` (Gram
  matrix and cross-products of two groups, the halves) and ``residual_block_sums`` (100
  blocks), on the additive cubic basis with 8 interior knots at the normal quantiles per
  column (P = 12 d); labels and coefficients are computed before the clock starts;
* (c) the floor: two passes over the same arrays (``np.sum`` of z, x and y, twice), the
  strict one: every byte of the data read twice at memory speed;
* (c') a second, looser floor: two passes that read z column by column (``np.sum`` of
  every ``z[:, j]``, then x and y, twice), i.e. what a per-column pass reads (the issue's
  own floor, 31 ms at d = 5, looks like this one); the ratios are given against both;
* (d) what a user would write: ``scipy.interpolate.BSpline.design_matrix`` per column
  (densified) and the dense ``B.T @ B``, on the same basis;

and prints one markdown table with the ratios (a)/(c), (a)/(c'), (b)/(c), (d)/(a) and (d)/(b) and each
method's peak extra memory (``VmHWM``, see ``_common``).  Numba is warmed up on a few
thousand rows before any clock starts; the environment is left as it is (numba and BLAS
use every core they see).  Times are the minimum over interleaved repeats (5 / 3 / 3 / 1
at n = 10^4 / 10^5 / 10^6 / 10^7).

A method is skipped at a size where its memory would exceed ``--mem-gb`` (default 8 GB):
predicted from its measured peaks at the previous sizes of the same d (or, before any
measurement, for (d), from the dense design matrix it builds); or where one call would
take longer than ``--max-call-s`` (default 1800 s), predicted linearly in n from the
previous size.

Run: ``nice -n 10 python3 tests/benchmarks/bench_basis.py [--quick] [--n 10000,100000]
[--d 1,5] [--out DIR]``.  The table is printed; with ``--out`` (or $PRIVCI_BENCH_OUT) it is
also written to DIR/bench_basis.md and .json.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common as C  # noqa: E402

SIZES = (10_000, 100_000, 1_000_000, 10_000_000)
QUICK = (10_000, 100_000)
DIMS = (1, 5, 20)
METHODS = ("privgcm", "kernels", "floor", "scipy", "floor_cols")
K_BLOCKS = 100
T = 4.0
N_KNOTS = 8


def _reps(n):
    return 5 if n <= 10_000 else (3 if n <= 1_000_000 else 1)


def _knots():
    import numpy as np
    from scipy.stats import norm
    inner = norm.ppf(np.arange(1, N_KNOTS + 1) / (N_KNOTS + 1))
    return np.r_[[-T] * 4, inner, [T] * 4]


def _data(n, d):
    import numpy as np
    rng = np.random.default_rng(n + 7 * d)
    z = rng.normal(size=(n, d))
    f = np.sin(z[:, 0])
    x = f + rng.normal(size=n)
    y = -f + rng.normal(size=n)
    return x, y, z


def _worker(n, d, skip):
    import numpy as np
    from scipy.interpolate import BSpline

    import privci
    from privci import _basis_kernels as K

    x, y, z = _data(n, d)
    kv = _knots()
    spec = K.make_basis([kv] * d)
    P = spec.n_features
    rng = np.random.default_rng(1)
    half = rng.integers(0, 2, size=n)
    block = rng.integers(0, K_BLOCKS, size=n)

    def kernels(coef=None):
        G, B = K.accumulate(z, x, y, 0.0, 1.0, 0.0, 4.0, 0.0, 4.0, spec, half, 2)
        if coef is None:        # a fit from the halves' statistics (not timed: public step)
            coef = []
            for g, c in ((0, 0), (1, 1)):
                Gf = K.to_float(G[g]) + np.eye(P)
                coef.append(np.linalg.solve(Gf, K.to_float(B[g][:, [c]])))
        S = K.residual_block_sums(z, x, y, 0.0, 1.0, 0.0, 4.0, 0.0, 4.0, spec, coef[0],
                                  coef[1], block, K_BLOCKS)
        return G, B, S, coef

    def floor():
        s = 0.0
        for _ in range(2):
            for a in (z, x, y):
                s += float(np.sum(a))
        return s

    def floor_cols():
        s = 0.0
        for _ in range(2):
            for j in range(d):
                s += float(np.sum(z[:, j]))
            for a in (x, y):
                s += float(np.sum(a))
        return s

    def scipy_gram():
        t = np.clip(z, -T, T)
        B = np.hstack([BSpline.design_matrix(np.ascontiguousarray(t[:, j]), kv, 3).toarray()
                       for j in range(d)])
        return B.T @ B

    def default():
        return privci.privgcm(x, y, z, epsilon=1, x_bound=4, y_bound=4, z_center=0,
                              z_scale=1, rng=0)

    # warm-up (numba compiles or loads its cache; BLAS and scipy import) on a few rows
    w = min(n, 3000)
    K.accumulate(z[:w], x[:w], y[:w], 0.0, 1.0, 0.0, 4.0, 0.0, 4.0, spec, half[:w], 2)
    K.accumulate(z[:5000], x[:5000], y[:5000], 0.0, 1.0, 0.0, 4.0, 0.0, 4.0, spec,
                 half[:5000], 2)
    c0 = np.zeros((P, 1))
    K.residual_block_sums(z[:5000], x[:5000], y[:5000], 0.0, 1.0, 0.0, 4.0, 0.0, 4.0, spec,
                          c0, c0, block[:5000], K_BLOCKS)
    if "privgcm" not in skip:
        privci.privgcm(x[:w], y[:w], z[:w], epsilon=1, x_bound=4, y_bound=4, z_center=0,
                       z_scale=1, rng=0)
    if "scipy" not in skip:
        BSpline.design_matrix(np.clip(z[:w, 0], -T, T), kv, 3)
    coef = kernels()[3]

    calls = {"privgcm": default, "kernels": lambda: kernels(coef), "floor": floor,
             "scipy": scipy_gram, "floor_cols": floor_cols}
    run = [m for m in METHODS if m not in skip]
    best, peak = {}, {}
    for m in run:                      # first call: time and peak extra memory
        best[m], peak[m], _ = C.measure(calls[m], 1)
    for _ in range(_reps(n) - 1):     # further repeats, interleaved
        for m in run:
            t0 = time.perf_counter()
            calls[m]()
            best[m] = min(best[m], time.perf_counter() - t0)
    import numba
    return {"n": n, "d": d, "P": P, "time": best, "peak": peak, "skipped": sorted(skip),
            "reps": _reps(n), "threads": numba.get_num_threads(),
            "data_bytes": int(x.nbytes + y.nbytes + z.nbytes), "loadavg": os.getloadavg()}


def _env_note():
    keys = ("NUMBA_NUM_THREADS", "OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS")
    return ", ".join(f"{k}={os.environ.get(k, 'unset')}" for k in keys)


def _mem_available():
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return math.inf


def _predict(method, n, d, hist):
    """Predicted peak bytes of ``method`` at n rows from its measured peaks at the previous
    sizes of this d (linear through the last two, or proportional to the last one), or
    (before any measurement) the dense design matrix scipy builds."""
    data = n * (d + 2) * 8
    pts = [(r["n"], r["peak"][method]) for r in hist
           if method in r["peak"] and math.isfinite(r["peak"][method])]
    if len(pts) >= 2:
        (n1, p1), (n2, p2) = pts[-2:]
        slope = max(0.0, (p2 - p1) / (n2 - n1))
        return data + max(p2, 0) + slope * (n - n2)
    if pts:
        return data + max(pts[-1][1], 0) / pts[-1][0] * n
    if method == "scipy":
        return data + n * 12 * d * 8 * 2 + n * 4 * d * 16
    return data


def _predict_time(method, n, hist):
    """Predicted seconds of one call at n rows, linear in n from the last measured size."""
    pts = [(r["n"], r["time"][method]) for r in hist if r["time"].get(method) is not None]
    if not pts:
        return 0.0
    n0, t0 = pts[-1]
    return t0 * n / n0


def _fmt_t(v, why=None):
    if v is None:
        return f"skipped ({why})" if why else "skipped"
    return f"{v * 1e3:.3g} ms" if v < 1 else f"{v:.3g} s"


def _fmt_mb(v):
    return "-" if v is None or not math.isfinite(v) else f"{v / 2**20:.0f} MB"


def _ratio(a, b):
    return "-" if a is None or b is None else f"{a / b:.1f}x"


def _table(results):
    lines = ["| n | d | P | (a) privgcm | (b) kernels | (c) floor | (c') floor per column | "
             "(d) scipy | (a)/(c) | (a)/(c') | (b)/(c) | (d)/(a) | (d)/(b) | peak (a) | "
             "peak (b) | peak (d) |",
             "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
             "---:|"]
    for r in results:
        t, p = r["time"], r["peak"]
        a, b, c, dd, c2 = (t.get(m) for m in METHODS)
        why = r.get("why", {})
        lines.append(f"| {r['n']:.0e} | {r['d']} | {r['P']} | {_fmt_t(a, why.get('privgcm'))} "
                     f"| {_fmt_t(b, why.get('kernels'))} | {_fmt_t(c)} | {_fmt_t(c2)} | "
                     f"{_fmt_t(dd, why.get('scipy'))} | {_ratio(a, c)} | {_ratio(a, c2)} | "
                     f"{_ratio(b, c)} | {_ratio(dd, a)} | {_ratio(dd, b)} | "
                     f"{_fmt_mb(p.get('privgcm'))} | "
                     f"{_fmt_mb(p.get('kernels'))} | {_fmt_mb(p.get('scipy'))} |")
    return lines


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--worker", nargs=3, metavar=("N", "D", "SKIP"))
    ap.add_argument("--quick", action="store_true", help="n in {10^4, 10^5} only")
    ap.add_argument("--n", help="comma-separated sizes (overrides the defaults and --quick)")
    ap.add_argument("--d", default=",".join(map(str, DIMS)), help="comma-separated d")
    ap.add_argument("--mem-gb", type=float, default=8.0,
                    help="skip a method where its predicted memory exceeds this")
    ap.add_argument("--max-call-s", type=float, default=1800.0,
                    help="skip a method where one call is predicted to take longer (s)")
    ap.add_argument("--out", default=os.environ.get("PRIVCI_BENCH_OUT"),
                    help="also write bench_basis.md / .json here")
    args = ap.parse_args()
    if args.worker:
        n, d, skip = args.worker
        skip = set(s for s in skip.split(",") if s and s != "-")
        print(json.dumps(_worker(int(n), int(d), skip)))
        return
    sizes = [int(float(s)) for s in args.n.split(",")] if args.n else \
        list(QUICK if args.quick else SIZES)
    dims = [int(s) for s in args.d.split(",")]
    limit = min(args.mem_gb * 2**30, _mem_available() - 2**30)
    note_before = C.machine_note()
    results, hist = [], {d: [] for d in dims}
    print("| n | d | method times ... (one line per (n, d); the table follows)", flush=True)
    for n in sizes:
        for d in dims:
            why = {}
            for m in ("privgcm", "scipy", "kernels"):
                if _predict(m, n, d, hist[d]) > limit:
                    why[m] = f"> {limit / 2**30:.0f} GB"
                elif _predict_time(m, n, hist[d]) > args.max_call_s:
                    why[m] = f"> {args.max_call_s:g} s"
            skip = sorted(why)
            if n * (d + 2) * 8 * 1.2 > limit:
                print(f"n = {n}, d = {d}: the data alone exceed the memory limit; skipped")
                continue
            r = C.run_worker(os.path.abspath(__file__), [n, d, ",".join(skip) or "-"])
            for m in METHODS:
                r["time"].setdefault(m, None)
            r["why"] = why
            results.append(r)
            hist[d].append(r)
            print(" ".join(f"{m}={_fmt_t(r['time'][m], why.get(m))}" for m in METHODS),
                  f"n={n} d={d} (load {r['loadavg'][0]:.1f})", flush=True)
    note_after = C.machine_note()
    table = _table(results)
    text = ["# PrivGCM's default path and the fused spline kernels (bench_basis.py)", "",
            "(a) `privgcm(x, y, z, epsilon=1, x_bound=4, y_bound=4, z_center=0, z_scale=1, "
            "rng=0)`; (b) `_basis_kernels.accumulate` + `residual_block_sums` (additive "
            f"cubic basis, {N_KNOTS} interior knots per column, P = 12 d; 2 groups, "
            f"{K_BLOCKS} blocks); (c) two passes over z, x, y (`np.sum`; the strict floor); "
            "(c') two passes reading z column by column (`np.sum(z[:, j])` per column, then "
            "x and y; a looser floor); (d) scipy's "
            "`BSpline.design_matrix` per column, densified, and `B.T @ B`.  Minimum over "
            "interleaved repeats; peak = extra resident memory of the first call.  "
            f"Threads: {_env_note()}.", "",
            *table, "", f"Machine before: {note_before}.", f"Machine after: {note_after}.",
            f"Memory limit for a method: {limit / 2**30:.1f} GB (skipped above it).", ""]
    print("\n" + "\n".join(text))
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, "bench_basis.md"), "w") as fh:
            fh.write("\n".join(text))
        with open(os.path.join(args.out, "bench_basis.json"), "w") as fh:
            json.dump({"results": results, "machine_before": note_before,
                       "machine_after": note_after}, fh, indent=1)
        print(f"wrote {args.out}/bench_basis.md and .json")


if __name__ == "__main__":
    main()
