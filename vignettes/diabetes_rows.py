# %% [markdown]
# # The demo's diabetes rows: power of the demo's call (issue 35, stop 43)
#
# `make demo` tests bmi and s3 against disease progression given (age, sex, bp) on
# scikit-learn's diabetes data (n = 442) under `assume="linear"`.  This script draws the
# mechanism's noise `REPS` times per (row, epsilon) on the fixed data and counts how often
# the call rejects at 0.05 (a fail-safe p = 1 counts as not rejecting), for a choice of
# windows:
#
# * `demo`: the demo's call (`privci.cli.DIABETES_CALL`): public centres 0 of the
#   standardised columns, windows released ("auto", 0.1 of epsilon);
# * `fixed`: the fixed windows of stop 42's demo (x_bound 4, y_bound 3).
#
#     python vignettes/diabetes_rows.py EPSILONS REPS SEED [demo|fixed] [--out CSV]
#     python vignettes/diabetes_rows.py 5,6,8,10,16 400 4360000 demo
#
# Measured (stop 43, 400 draws, seed 4360000, `demo`, results/diabetes_rows_demo_s43.csv):
# epsilon 4 refused (smallest 4.7); 5: 0.28 / 0.22; 6: 0.53 / 0.46; 7: 0.80 / 0.74;
# 8: 0.91 / 0.86 (fail-safe 0.06; 0.73 / 0.72 and 0.27 before the edge split that counts
# the chance the floor binds); 10: 0.92 / 0.92; 16: 0.995 / 0.995 (bmi / s3).  `fixed`
# (stop 42's windows, the stop-42 rule): 8: 0.34 / 0.18; 10: 0.64 / 0.42.
import os, sys, csv, math, warnings
for v in ("NUMBA_NUM_THREADS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ.setdefault(v, "1")
import numpy as np
import privci
from privci import cli

FIXED = dict(x_bound=4.0, y_bound=3.0, z_scale=1.0, z_center=0.0, assume="linear")


def wilson(k, n, z=1.96):
    p = k / n; den = 1 + z * z / n; c = (p + z * z / (2 * n)) / den
    h = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / den
    return max(0.0, c - h), min(1.0, c + h)


def run(epsilons, reps, seed, variant="demo"):
    call = cli.DIABETES_CALL if variant == "demo" else FIXED
    col, prog, z = cli.diabetes_columns()
    rows = []
    for eps in epsilons:
        for name in ("bmi", "s3"):
            rej = fs = 0
            try:
                for r in range(reps):
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        res = privci.privgcm(col[name], prog, z, epsilon=eps,
                                             rng=np.random.default_rng(seed + r), **call)
                    rej += res.pvalue <= 0.05
                    fs += res.fit_check.get("certified") is False
            except privci.UnresolvableDesignError:
                rows.append(dict(row=name, epsilon=eps, variant=variant, reps=reps, seed=seed,
                                 rejections="", rate="refused", lo="", hi="", failsafe=""))
                print(f"{name} eps={eps:g} {variant}: refused", flush=True)
                continue
            lo, hi = wilson(rej, reps)
            rows.append(dict(row=name, epsilon=eps, variant=variant, reps=reps, seed=seed,
                             rejections=rej, rate=round(rej / reps, 4), lo=round(lo, 4),
                             hi=round(hi, 4), failsafe=round(fs / reps, 4)))
            print(f"{name} eps={eps:g} {variant}: {rej}/{reps} = {rej / reps:.3f} "
                  f"[{lo:.3f}, {hi:.3f}] fail-safe {fs / reps:.3f}", flush=True)
    return rows


if __name__ == "__main__":
    out = None
    if "--out" in sys.argv:
        i = sys.argv.index("--out"); out = sys.argv[i + 1]; del sys.argv[i:i + 2]
    eps = [float(e) for e in sys.argv[1].split(",")]
    rows = run(eps, int(sys.argv[2]), int(sys.argv[3]),
               sys.argv[4] if len(sys.argv) > 4 else "demo")
    if out:
        with open(out, "w", newline="") as fh:
            w = csv.DictWriter(fh, fieldnames=list(rows[0])); w.writeheader(); w.writerows(rows)
