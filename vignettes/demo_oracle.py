# %% [markdown]
# # The demo's diabetes rows: an upper bound on any private GCM's power (issue 23)
#
# `make demo` tests bmi and s3 against disease progression given age, sex and bp on the
# diabetes data (n = 442) at epsilon 1 and 8, and PrivGCM answers p = 1 (the fail-safe:
# three columns at n = 442 resolve only from epsilon of about 57).  How much power could
# any private GCM have there?  This script gives the test everything but the privacy of
# its last step: the regression is free and exact (a non-private least-squares fit on
# age, sex and bp, the data's own), x and y are scaled by the demo's public windows (4 and
# 3 after standardising) and clipped, and all of epsilon goes to Laplace noise on k block
# sums of the residual products (sensitivity 2), tested with the block t statistic as
# PrivGCM does.  Its rejection rate over noise draws and random block partitions bounds
# what a private fit could add to.
#
#     python vignettes/demo_oracle.py --draws 4000
#
# Measured (4000 draws, seed 5): epsilon 1 rejects at most 0.486 (bmi) and 0.371 (s3)
# over k = 5, 10, 20; epsilon 8 rejects 1.00.

# %%
import argparse

import numpy as np
from scipy.stats import t as t_dist


def oracle(draws=4000, seed=5, eps_list=(1.0, 8.0), ks=(5, 10, 20)):
    from sklearn.datasets import load_diabetes
    data = load_diabetes(scaled=True)
    n = data.data.shape[0]
    F = data.data * np.sqrt(n)
    col = {nm: F[:, i] for i, nm in enumerate(data.feature_names)}
    prog = (data.target - 150.0) / 80.0              # the demo's centring and scale
    Z = np.column_stack([np.ones(n), col["age"], col["sex"], col["bp"]])

    def resid(v, bound):
        r = v - Z @ np.linalg.lstsq(Z, v, rcond=None)[0]
        return np.clip(r / bound, -1.0, 1.0)

    ry = resid(prog, 3.0)
    rng = np.random.default_rng(seed)
    rows = []
    for xname in ("bmi", "s3"):
        prod = resid(col[xname], 4.0) * ry
        for eps in eps_list:
            for k in ks:
                rej = 0
                for _ in range(draws):
                    lab = rng.permutation(np.arange(n) % k)
                    S = np.bincount(lab, weights=prod, minlength=k)
                    S = S + rng.laplace(scale=2.0 / eps, size=k)
                    t = S.sum() / np.sqrt(k * np.var(S, ddof=1))
                    rej += 2.0 * t_dist.sf(abs(t), k - 1) <= 0.05
                rows.append((xname, eps, k, rej / draws))
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--draws", type=int, default=4000)
    ap.add_argument("--seed", type=int, default=5)
    a = ap.parse_args(argv)
    print("| x | epsilon | k | rejection rate (free exact fit, all epsilon on the test) |")
    print("|---|---|---|---|")
    rows = oracle(a.draws, a.seed)
    for xname, eps, k, rate in rows:
        print(f"| {xname} | {eps:g} | {k} | {rate:.3f} |")
    return rows


if __name__ == "__main__":
    main()
