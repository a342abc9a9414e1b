"""privci.gcm with R's defaults against a plain scipy CVST implementation (issue 2).

R's ``gcm.test(X, Y, Z, regr.method = "kernel.ridge")`` tunes lambda over
10^-6, ..., 10^4 by CVST's 10-fold cross-validation (contiguous, unshuffled
folds) for X on Z and for Y on Z, then refits with the chosen lambda.  The
reference below does the same thing the plain way: the fold Gram matrices
are built once per fold (shared by both regressions and all lambdas, which
favours the reference), then one ``scipy.linalg.solve`` of
(K_tt + n_train lambda I) alpha = u_t per lambda per fold per regression,
as R does, and one full solve per regression for the final residuals.

privci.gcm shares one eigen-decomposition of the full Gram matrix between all
lambdas, folds and both regressions (block-inverse hold-out formula; see
``privci.regression.krr_cv_residuals``).

Prints, for n = 1000 and 4000 (d = 1): both times, the ratio (target >= 20 at
n = 1000, privci under 1 s there), the chosen lambdas of both (must agree) and
the largest residual difference.  ``--quick`` times the reference's solves for
the first lambda only and extrapolates (no lambda comparison at that n).
Run: ``nice -n 10 python3 tests/benchmarks/bench_gcm_cv.py [--sizes 1000] [--quick]``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np
import scipy.linalg

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common as C  # noqa: E402

import privci  # noqa: E402
from privci.regression import DEFAULT_CV_LAMBDAS, cvst_folds  # noqa: E402


def gram(a, b, sigma=1.0):
    d2 = (a * a).sum(1)[:, None] + (b * b).sum(1)[None, :] - 2.0 * a @ b.T
    return np.exp(-sigma * np.maximum(d2, 0.0))


def reference_cvst(z, U, lambdas=DEFAULT_CV_LAMBDAS, folds=10, n_lambdas=None):
    """Plain CVST: returns (residuals, chosen lambdas, solve count)."""
    n = z.shape[0]
    lambdas = list(lambdas)[: n_lambdas or len(lambdas)]
    K = gram(z, z)
    allidx = np.arange(n)
    fold_mats = []
    for v in cvst_folds(n, folds):
        t = np.setdiff1d(allidx, v)
        fold_mats.append((t, v, K[np.ix_(t, t)], K[np.ix_(v, t)]))
    chosen, nsolve = [], 0
    resid = np.empty_like(U)
    for c in range(U.shape[1]):
        u = U[:, c]
        errs = []
        for lam in lambdas:
            e = []
            for t, v, Ktt, Kvt in fold_mats:
                A = Ktt + t.size * lam * np.eye(t.size)
                alpha = scipy.linalg.solve(A, u[t], assume_a="gen")
                nsolve += 1
                e.append(np.mean((u[v] - Kvt @ alpha) ** 2))
            errs.append(np.mean(e))
        lam = lambdas[int(np.argmin(errs))]
        chosen.append(lam)
        alpha = scipy.linalg.solve(K + n * lam * np.eye(n), u, assume_a="gen")
        resid[:, c] = u - K @ alpha
    return resid, np.array(chosen), nsolve


def data(n, seed):
    rng = np.random.default_rng(seed)
    z = rng.normal(size=(n, 1))
    x = np.sin(2.0 * z[:, 0]) + 0.5 * rng.normal(size=n)
    y = z[:, 0] ** 2 + 0.3 * x + rng.normal(size=n)
    return x, y, z


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="1000,4000")
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    print(C.machine_note())
    x0, y0, z0 = data(200, 0)
    privci.gcm(x0, y0, z0)  # load the numba kernels
    rows = []
    for n in [int(s) for s in args.sizes.split(",")]:
        x, y, z = data(n, n)
        U = np.column_stack([x, y])
        times = []
        for _ in range(3 if n <= 1000 else 2):
            t0 = time.perf_counter()
            res = privci.gcm(x, y, z)
            times.append(time.perf_counter() - t0)
        tp = min(times)
        quick = args.quick and n > 1000
        t0 = time.perf_counter()
        ref_resid, ref_lam, nsolve = reference_cvst(z, U, n_lambdas=1 if quick else None)
        tr = time.perf_counter() - t0
        if quick:
            tr *= len(DEFAULT_CV_LAMBDAS)  # the solves dominate; all have the same size
        lam_p = (res.ridge_lambda_x[0], res.ridge_lambda_y[0])
        same = None if quick else bool(np.allclose(lam_p, ref_lam, rtol=0, atol=0))
        dres = None if quick else float(np.max(np.abs(
            np.column_stack([res.resid_x[:, 0], res.resid_y[:, 0]]) - ref_resid)))
        rows.append((n, tp, tr, tr / tp, lam_p, None if quick else tuple(float(v) for v in ref_lam), same, dres,
                     quick))
        print(f"n = {n}: privci.gcm {tp:.3f} s; plain scipy CVST {tr:.2f} s "
              f"({'extrapolated from 1 of 11 lambdas' if quick else f'{nsolve} solves'}); "
              f"ratio {tr / tp:.1f}x; lambdas privci {lam_p} reference "
              f"{'-' if quick else tuple(float(v) for v in ref_lam)} same: {same}; max |resid diff| "
              f"{'-' if quick else f'{dres:.2e}'}; {C.machine_note()[:60]}", flush=True)
    out = C.vignettes_dir()
    lines = ["# privci.gcm (R defaults) against a plain scipy CVST (bench_gcm_cv.py)", "",
             "kernel_ridge, sigma = 1, lambda by 10-fold CVST CV over 10^-6..10^4, d = 1.", "",
             "| n | privci.gcm (s) | plain scipy CVST (s) | ratio | lambdas privci | "
             "lambdas reference | same | max resid diff |", "|---:|---:|---:|---:|---|---|---|---:|"]
    for n, tp, tr, ratio, lp, lr, same, dres, quick in rows:
        lines.append(f"| {n} | {tp:.3f} | {tr:.2f}{' (extrapolated)' if quick else ''} | "
                     f"{ratio:.1f} | {lp} | {lr if lr else '-'} | {same if same is not None else '-'} "
                     f"| {'-' if dres is None else f'{dres:.1e}'} |")
    lines += ["", f"Machine: {C.machine_note()}.", ""]
    with open(os.path.join(out, "bench_gcm_cv.md"), "w") as fh:
        fh.write("\n".join(lines))
    print(f"wrote {out}/bench_gcm_cv.md")


if __name__ == "__main__":
    main()
