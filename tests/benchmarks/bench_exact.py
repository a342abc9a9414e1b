"""Exact-kernel path against its hardware floor (issues 3, 4 and 6).

For n in {1000, 2000, 5000, 10000} and d = 5, in one fresh process per n:

* floor: Gram matrix from a plain numba kernel (full n x n, one exp per
  entry), ``K + n lambda I`` factorised by one LAPACK Cholesky (dpotrf, in
  place) and the two triangular solves (dpotrs) for the x and y columns;
* privgcm (seeded noise), privgcm (hardened OpenDP noise), privcrt (m = 19,
  seeded), gcm (fixed lambda = 5): wall time divided by the floor's, the
  calls interleaved and the minimum over repeats taken;
* peak memory of every call divided by 8 n^2 bytes (one n x n float64),
  measured as VmHWM - VmRSS with the peak reset before the call (see
  ``_common.py``).

Then the cold start (``python -c "import privci; privci.privgcm(...)"`` with
a warm numba cache) and ``import privci`` with ``-X importtime``.

Writes vignettes/bench_exact.md, bench_exact.png and bench_exact.json.
Run: ``nice -n 10 python3 tests/benchmarks/bench_exact.py [--sizes 1000,2000]``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common as C  # noqa: E402

SIZES = (1000, 2000, 5000, 10000)
METHODS = ("floor", "privgcm", "privgcm_hardened", "privcrt", "gcm")
LAM = 5.0


def _worker(n):
    import numpy as np
    from numba import njit, prange
    from scipy.linalg import lapack

    import privci

    @njit(parallel=True, cache=True)
    def plain_gram(z, sigma):
        m, d = z.shape
        K = np.empty((m, m))
        for i in prange(m):
            for j in range(m):
                acc = 0.0
                for k in range(d):
                    t = z[i, k] - z[j, k]
                    acc += t * t
                K[i, j] = math.exp(-sigma * acc)
        return K

    def floor(z, U):
        m = z.shape[0]
        K = plain_gram(z, 1.0)
        K.ravel()[:: m + 1] += m * LAM
        c, info = lapack.dpotrf(K.T, lower=0, clean=0, overwrite_a=1)
        assert info == 0
        sol, info = lapack.dpotrs(c, U, lower=0)
        return sol

    rng = np.random.default_rng(n)
    d = 5
    z = rng.normal(scale=2.0, size=(n, d))
    fz = np.exp(-2.0) * np.sin(2.0 * z[:, 0])
    x = fz + rng.normal(size=n)
    y = -fz + rng.normal(size=n)
    U = np.asfortranarray(np.column_stack([x, y]))
    mx = privci.GaussianModelX(lambda zz: np.exp(-2.0) * np.sin(2.0 * zz[:, 0]), 1.0)

    calls = {
        "floor": lambda: floor(z, U),
        "privgcm": lambda: privci.privgcm(x, y, z, epsilon=1.0, x_bound=4.0, y_bound=4.0,
                                          rng=1, regression="krr"),
        "privgcm_hardened": lambda: privci.privgcm(x, y, z, epsilon=1.0, x_bound=4.0,
                                                   y_bound=4.0, rng=None, regression="krr"),
        "privcrt": lambda: privci.privcrt(x, y, z, epsilon=1.0, model_x=mx, y_bound=4.0,
                                          x_residual_bound=4.0, n_resamples=19, rng=2),
        "gcm": lambda: privci.gcm(x, y, z, ridge_lambda=LAM),
    }
    # warm up: load every numba kernel from the cache, build OpenDP measurements
    small = slice(0, 200)
    floor(z[small], np.asfortranarray(U[small]))
    privci.privgcm(x[small], y[small], z[small], epsilon=1.0, x_bound=4.0, y_bound=4.0, rng=1, regression="krr")
    privci.privgcm(x[small], y[small], z[small], epsilon=1.0, x_bound=4.0, y_bound=4.0, regression="krr")
    privci.privcrt(x[small], y[small], z[small], epsilon=1.0, model_x=mx, y_bound=4.0,
                   x_residual_bound=4.0, rng=2)
    privci.gcm(x[small], y[small], z[small], ridge_lambda=LAM)

    reps = 15 if n <= 2000 else (3 if n <= 5000 else 2)
    best = {}
    peak = {}
    for name in METHODS:  # first round: peak memory (and a first timing)
        t, p, _ = C.measure(calls[name], 1)
        best[name], peak[name] = t, p
    for _ in range(reps - 1):  # interleaved repeats
        for name in METHODS:
            t0 = time.perf_counter()
            calls[name]()
            best[name] = min(best[name], time.perf_counter() - t0)
    return {"n": n, "time": best, "peak_bytes": peak, "reps": reps,
            "loadavg": os.getloadavg()}


def _cold_start():
    code_seed = ("import numpy as np, privci; r = np.random.default_rng(0); "
                 "z = r.normal(size=(300, 2)); x = r.normal(size=300); y = r.normal(size=300); "
                 "privci.privgcm(x, y, z, epsilon=1, x_bound=4, y_bound=4, rng=1, regression=\"krr\")")
    code_hard = code_seed.replace(", rng=1,", ",")
    out = {}
    for name, code in [("import privci", "import privci"),
                       ("import + privgcm (seeded noise)", code_seed),
                       ("import + privgcm (hardened noise)", code_hard)]:
        subprocess.run([sys.executable, "-c", code], check=True)  # warm the numba cache
        times = []
        for _ in range(3):
            t0 = time.perf_counter()
            subprocess.run([sys.executable, "-c", code], check=True)
            times.append(time.perf_counter() - t0)
        out[name] = min(times)
    return out


def _importtime():
    res = subprocess.run([sys.executable, "-X", "importtime", "-c", "import privci"],
                         capture_output=True, text=True, check=True)
    rows = []
    for line in res.stderr.splitlines():
        if not line.startswith("import time:") or "cumulative" in line:
            continue
        _, rest = line.split(":", 1)
        self_us, cum_us, name = [s.strip() for s in rest.split("|")]
        rows.append((int(self_us), int(cum_us), name))
    total = max(r[1] for r in rows)
    # top-level packages (no leading spaces beyond one level) by cumulative time
    top = sorted(((c, nm.strip()) for s, c, nm in rows if len(nm) - len(nm.lstrip()) <= 2),
                 reverse=True)
    wanted = ("numba", "scipy", "sklearn", "opendp", "numpy", "privci.")
    keyed = {}
    for c, nm in sorted(((c, nm.strip()) for s, c, nm in rows), reverse=True):
        for w in wanted:
            if (nm == w.rstrip(".") or nm.startswith(w)) and w not in keyed:
                keyed[w] = (nm, c)
    return total, top[:12], keyed


def _plot(results, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ns = [r["n"] for r in results]
    fig, ax = plt.subplots(figsize=(6, 4.2))
    for name, style in [("floor", "k--"), ("privgcm", "o-"), ("privgcm_hardened", "x-"),
                        ("privcrt", "s-"), ("gcm", "^-")]:
        ax.loglog(ns, [r["time"][name] for r in results], style, label=name)
    large = os.path.join(os.path.dirname(path), "bench_large.json")
    if os.path.exists(large):
        with open(large) as fh:
            lg = json.load(fh)["results"]
        ax.loglog([r["n"] for r in lg], [r["time"]["privgcm_rff"] for r in lg], "D-",
                  label="privgcm, rff D=512 (bench_large)")
    C.finish_loglog(fig, ax, path, "Exact kernel path, d = 5 (floor: Gram + Cholesky + solves)", legend_fontsize=8)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--worker", type=int)
    ap.add_argument("--sizes", default=",".join(map(str, SIZES)))
    ap.add_argument("--no-cold", action="store_true")
    ap.add_argument("--cold-only", action="store_true",
                    help="re-measure the cold start and import time only; keep the timing "
                         "table of the last full run (vignettes/bench_exact.json)")
    args = ap.parse_args()
    if args.worker:
        print(json.dumps(_worker(args.worker)))
        return
    sizes = [int(s) for s in args.sizes.split(",")]
    note_before = C.machine_note()
    results = []
    hdr = (f"{'n':>6} {'floor s':>8} " + " ".join(f"{m + ' /floor':>24}" for m in METHODS[1:])
           + "   peak/(8n^2): " + " ".join(METHODS))
    print(hdr)
    if args.cold_only:
        with open(os.path.join(C.vignettes_dir(), "bench_exact.json")) as fh:
            prev = json.load(fh)
        sizes = []
        results = prev["results"]
        note_before = prev["machine_before"]
    for n in sizes:
        r = C.run_worker(os.path.abspath(__file__), [n])
        results.append(r)
        t, p = r["time"], r["peak_bytes"]
        print(f"{n:>6} {t['floor']:>8.3f} "
              + " ".join(f"{t[m] / t['floor']:>24.3f}" for m in METHODS[1:])
              + "   " + " ".join(f"{p[m] / (8.0 * n * n):.3f}" for m in METHODS)
              + f"   (load {r['loadavg'][0]:.1f})", flush=True)
    cold = {} if args.no_cold else _cold_start()
    total, top, keyed = _importtime()
    note_after = C.machine_note()
    for k, v in cold.items():
        print(f"cold start, {k}: {v:.2f} s")
    print(f"import privci (-X importtime, cumulative): {total / 1e6:.2f} s")
    for w, (nm, c) in keyed.items():
        print(f"  {nm:<40} {c / 1e6:.3f} s cumulative")

    out = C.vignettes_dir()
    with open(os.path.join(out, "bench_exact.json"), "w") as fh:
        json.dump({"results": results, "cold": cold, "import_total_s": total / 1e6,
                   "import_top": top, "machine_before": note_before,
                   "machine_after": note_after}, fh, indent=1)
    lines = ["# Exact path against its floor (bench_exact.py)", "",
             "d = 5, lambda = 5, sigma = 1.  Floor = plain numba Gram matrix + one LAPACK "
             "Cholesky (dpotrf) + two triangular solves, measured in the same process. "
             "Time ratios: minimum over interleaved repeats. Peak memory: VmHWM - VmRSS "
             "with the peak reset before the call, divided by 8 n^2 bytes.", "",
             "| n | floor (s) | privgcm / floor | privgcm hardened / floor | privcrt (m=19) / floor "
             "| gcm (fixed lambda) / floor | privcrt / privgcm | peak mem floor | privgcm | "
             "privgcm hardened | privcrt | gcm |",
             "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in results:
        n, t, p = r["n"], r["time"], r["peak_bytes"]
        lines.append(f"| {n} | {t['floor']:.3f} | "
                     + " | ".join(f"{t[m] / t['floor']:.3f}" for m in METHODS[1:])
                     + f" | {t['privcrt'] / t['privgcm']:.3f} | "
                     + " | ".join(f"{p[m] / (8.0 * n * n):.3f}" for m in METHODS) + " |")
    lines += ["", "Cold start (fresh interpreter, warm numba cache, min of 3):", ""]
    lines += [f"- {k}: {v:.2f} s" for k, v in cold.items()]
    lines += ["", f"`python -X importtime -c 'import privci'`: {total / 1e6:.2f} s cumulative; "
              "largest contributors:", ""]
    lines += [f"- {nm}: {c / 1e6:.3f} s" for w, (nm, c) in keyed.items()]
    lines += ["", f"Machine before: {note_before}.", f"Machine after: {note_after}.", ""]
    with open(os.path.join(out, "bench_exact.md"), "w") as fh:
        fh.write("\n".join(lines))
    _plot(results, os.path.join(out, "bench_exact.png"))
    print(f"wrote {out}/bench_exact.md, .png, .json")


if __name__ == "__main__":
    main()
