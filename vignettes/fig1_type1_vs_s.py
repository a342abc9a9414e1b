# %% [markdown]
# # Figure 1: type-I error against model complexity s
#
# Paper (Section "Empirical Evaluation", first figure): under the null
# (beta = 0) with n = 10^4 and epsilon = 2, PrivToT and the private Kendall
# test lose type-I error control as s grows (worse at d = 5), while PrivGCM
# and PrivCRT keep it for s in {1, 2, 4, 8, 16, 32} and d in {1, 5}.
#
# Run: `python vignettes/fig1_type1_vs_s.py [--quick] [--reps R] [--n N] [--workers k]`.
# Default ("full") run: the paper's n = 10^4 and 500 replications per point
# (about 40 minutes on 2 Dask workers; `--reps 200` for a shorter run, and a
# later larger --reps only adds the missing replications to the same CSV).
# At n = 10^4 PrivGCM and PrivCRT use random Fourier features (exact KRR costs
# about 11 s per test on one core; `--exact-max-n 10000` runs it exactly);
# PrivToT's regressions are on subsets of n/10 and always exact.

# %%
import vignette_utils as U  # first: sets one thread per process before numpy loads

import numpy as np

U.on_path()

TESTS = [
    {"test": "privgcm", "label": "PrivGCM", **U.PRIVATE},
    {"test": "privcrt", "label": "PrivCRT", "m": 19, **U.PRIVATE},
    {"test": "privtot", "label": "PrivToT", "n_subsets": 10, **U.NONPRIVATE},
    {"test": "private_kendall", "label": "Private Kendall", "n_clusters": 100},
]


def main():
    args = U.parse_args(__doc__ or "Figure 1", lambda ap: ap.add_argument("--n", type=int))
    from privci import experiments

    tests = [t for t in TESTS if t["test"] in experiments.available_tests()]
    if args.quick:
        grid = {"n": [args.n or 300], "d": [1, 5], "s": [1, 4, 32], "beta": [0.0],
                "epsilon": [2.0]}
        reps = args.reps or 5
    else:
        grid = {"n": [args.n or 10000], "d": [1, 5], "s": [1, 2, 4, 8, 16, 32], "beta": [0.0],
                "epsilon": [2.0]}
        reps = args.reps or 500
    with U.Timer() as tm:
        table = U.run_by_size(tests, grid, n_reps=reps, out=U.csv_path(args, "fig1"), args=args)
    U.report("fig1", table, tm, args)
    summ = experiments.summarise(table)
    U.save_summary(summ, args, "fig1")
    plot(summ, args, grid["n"][0], reps)


def plot(summ, args, n, reps):
    plt = U.setup_matplotlib()
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.6), sharey=True)
    for ax, d in zip(axes, (1, 5)):
        for label, g in summ[summ["d"] == d].groupby("label", sort=False):
            U.band(ax, np.log2(g["s"]), g, label, U.COLOURS.get(label))
        ax.axhline(0.05, color="grey", ls="--", lw=1)
        ax.set_xticks(np.log2([1, 2, 4, 8, 16, 32]), [1, 2, 4, 8, 16, 32])
        ax.set_xlabel("model complexity s")
        ax.set_title(f"d = {d}")
    axes[0].set_ylabel("type-I error (beta = 0)")
    axes[1].legend(fontsize=8)
    krr = "random Fourier features" if n > args.exact_max_n else "exact KRR"
    fig.suptitle(f"Type-I error, epsilon = 2, n = {n}, {reps} replications (95% Wilson bands); "
                 f"PrivGCM/PrivCRT: {krr}", fontsize=9)
    U.finish(fig, U.png_path(args, "fig1_type1_vs_s"))


if __name__ == "__main__":
    main()
