# %% [markdown]
# # Level and the regression (issue 13)
#
# The un-noised bias n mean(R) of PrivGCM's residual products under the null, for the
# default kernel ridge regression, and the level each noise placement would have
# (normal approximation for one block per row, noncentral t for k blocks).  Prints a table
# and writes `results/level_bias_summary.csv`.
#
#     python vignettes/level_bias.py            # n = 10^4, 8 data sets per design (~2 min)
#     python vignettes/level_bias.py --quick    # n = 1000, 2 data sets (CI)

# %%
import argparse
import math
import os
import warnings

import numpy as np
from scipy import stats

import privci
from privci import simulate

# %%
parser = argparse.ArgumentParser(description=__doc__)
parser.add_argument("--quick", action="store_true")
parser.add_argument("--n", type=int, default=10_000)
parser.add_argument("--reps", type=int, default=8)
args, _ = parser.parse_known_args()
n, reps = (1000, 2) if args.quick else (args.n, args.reps)
warnings.simplefilter("ignore")

designs = {
    "paper s=1 d=1": lambda r: simulate.paper_data(n, d=1, s=1, rng=r),
    "paper s=1 d=5": lambda r: simulate.paper_data(n, d=5, s=1, rng=r),
    "paper s=2 d=1": lambda r: simulate.paper_data(n, d=1, s=2, rng=r),
    "paper s=2 d=5": lambda r: simulate.paper_data(n, d=5, s=2, rng=r),
    "confounded": lambda r: simulate.confounded_data(n, rng=r),
}

# %%
bias = {}
for name, draw in designs.items():
    rng = np.random.default_rng(3)
    sums, variances = [], []
    for _ in range(reps):
        d = draw(rng)
        rp = privci.residual_products(d.x, d.y, d.z, x_bound=d.x_bound, y_bound=d.y_bound,
                                      kernel_approximation="rff", n_features=256,
                                      feature_rng=rng)
        sums.append(rp.products.sum())
        variances.append(rp.products.var() * n)
    bias[name] = (float(np.mean(sums)), float(np.mean(variances)),
                  float(np.std(sums) / math.sqrt(reps)))
    print(f"{name}: n mean(R) = {bias[name][0]:.1f} (se {bias[name][2]:.1f}), "
          f"n var(R) = {bias[name][1]:.1f}")


# %%
def level(total_bias, sampling_var, C, eps, k):
    """Two-sided 5% rejection rate of the released test with this bias (approximation)."""
    z = total_bias / math.sqrt(sampling_var + 2 * k * (C / eps) ** 2)
    if k >= n:
        return stats.norm.sf(1.96 - z) + stats.norm.cdf(-1.96 - z)
    c = stats.t.ppf(0.975, k - 1)
    rate = stats.nct.sf(c, k - 1, z) + stats.nct.cdf(-c, k - 1, z)
    return 1.0 if not np.isfinite(rate) else float(rate)   # scipy's nct fails far in the tail


rows = []
mechanisms = [("paper constant, k = n", privci.gcm_sensitivity(5.0, "paper"), n),
              ("sharp, k = n", privci.gcm_sensitivity(5.0, "sharp"), n),
              ("sharp, k = 20", privci.gcm_sensitivity(5.0, "sharp"), 20)]
for eps in (1.0, 2.0, 7.0):
    for name, (b, v, se) in bias.items():
        for label, C, k in mechanisms:
            rows.append((name, eps, label, b, se, level(b, v, C, eps, k)))
            print(f"eps={eps:g} {name:15s} {label:22s} level {rows[-1][-1]:.3f}")

out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results",
                   "level_bias_quick_summary.csv" if args.quick else "level_bias_summary.csv")
os.makedirs(os.path.dirname(out), exist_ok=True)
with open(out, "w") as fh:
    fh.write("design,epsilon,mechanism,n_mean_R,se,predicted_level\n")
    for r in rows:
        fh.write(f"{r[0]},{r[1]:g},{r[2]},{r[3]:.4f},{r[4]:.4f},{r[5]:.4f}\n")
print("wrote", out)
