# %% [markdown]
# # The documentation's examples: how often they reject (issue 34)
#
# Each example call of the docs, run on 200 fresh data sets of its own design, and the
# rejection rate at 0.05 with its 95% Wilson interval (and the fail-safe share):
#
# * docs/getting_started.rst: n = 2000, epsilon 2, public windows 4 and 5, z's centre and
#   scale released (privgcm's defaults, windows tightened);
# * docs/r_package.rst: the same call on its design, y = cos z + noise (a null: the rate is
#   the level);
# * docs/when_p_is_1.rst: three columns of z, n = 1000, epsilon 8, assume="linear".
#
#     python vignettes/docs_examples_power.py [--reps 200] [--out results/...csv]
#     python vignettes/docs_examples_power.py --quick          # CI smoke run

# %%
import os
for _v in ("NUMBA_NUM_THREADS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")

import argparse
import sys
import warnings

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from level_stress import wilson, write_csv  # noqa: E402


def _readme_like(n, g, beta):
    z = g.normal(size=(n, 1))
    x = np.sin(z[:, 0]) + g.normal(size=n)
    y = np.cos(z[:, 0]) + beta * (x - np.sin(z[:, 0])) + g.normal(size=n)
    return x, y, z


def getting_started(g):
    import privci
    x, y, z = _readme_like(2000, g, 0.8)
    return privci.privgcm(x, y, z, epsilon=2.0, x_bound=4, y_bound=5, rng=g)


def r_package_null(g):
    import privci
    x, y, z = _readme_like(2000, g, 0.0)
    return privci.privgcm(x, y, z, epsilon=2.0, x_bound=4, y_bound=5, rng=g)


def when_p_is_1_linear(g):
    import privci
    z = g.normal(size=(1000, 3))
    x = z[:, 0] + g.normal(size=1000)
    y = x + g.normal(size=1000)
    return privci.privgcm(x, y, z, epsilon=8.0, x_bound=4, y_bound=6, z_center=0.0,
                          z_scale=1.0, assume="linear", rng=g)


EXAMPLES = {"getting_started": (getting_started, 5210000),
            "r_package_null": (r_package_null, 5220000),
            "when_p_is_1_linear": (when_p_is_1_linear, 5230000)}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--reps", type=int, default=200)
    ap.add_argument("--out", default=None)
    ap.add_argument("--no-progress", action="store_true")
    ap.add_argument("--quick", action="store_true", help="CI smoke run: 3 data sets each")
    ap.add_argument("--workers", type=int, default=None, help="(accepted for run_all.sh)")
    args = ap.parse_args(argv)
    if args.quick:
        args.reps = 3
    rows = []
    warnings.simplefilter("ignore")
    for name, (call, seed) in EXAMPLES.items():
        rej = fs = 0
        for r in range(args.reps):
            res = call(np.random.default_rng(seed + r))
            rej += res.pvalue <= 0.05
            fs += res.fit_certified is False
        lo, hi = wilson(rej, args.reps)
        rows.append({"example": name, "reps": args.reps, "rate": rej / args.reps,
                     "lo": round(lo, 3), "hi": round(hi, 3), "failsafe": fs / args.reps,
                     "seed": seed})
        print(f"{name}: {rej / args.reps:.3f} [{lo:.3f}, {hi:.3f}], fail-safe "
              f"{fs / args.reps:.3f}")
    if args.out:
        write_csv(args.out, rows)
    return rows


if __name__ == "__main__":
    main()
