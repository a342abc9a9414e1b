# %% [markdown]
# # Figure 4: PrivCRT against PrivGCM across privacy levels
#
# Paper: n = 10^4, m = 19, epsilon in 2^-3, ..., 2^3: both control type-I
# error and PrivCRT is more powerful than PrivGCM at every epsilon.
#
# Here d = 1, s = 2, beta in {0, 1} (the paper does not give its beta).  The
# two tests see the same data set in each replication (common random
# numbers), at every epsilon.  Default ("full") run: the paper's n = 10^4 and
# 500 replications (about 17 minutes on 2 Dask workers), with
# random Fourier features (256 frequency pairs, same kernel, lambda and
# sensitivity) because exact KRR costs about 11 s per test at that size
# (`--exact-max-n 10000` runs it exactly).

# %%
import vignette_utils as U  # first: sets one thread per process before numpy loads

import numpy as np

U.on_path()

EPSILONS = [2.0 ** k for k in range(-3, 4)]
TESTS = [{"test": "privcrt", "label": "PrivCRT", "m": 19, **U.PRIVATE},
         {"test": "privgcm", "label": "PrivGCM", **U.PRIVATE}]


def main():
    args = U.parse_args("Figure 4", lambda ap: ap.add_argument("--n", type=int))
    from privci import experiments

    if args.quick:
        reps = args.reps or 8
        grid = {"n": [args.n or 300], "d": [1], "s": [2.0], "beta": [0.0, 1.0],
                "epsilon": [0.125, 1.0, 8.0]}
    else:
        reps = args.reps or 500
        grid = {"n": [args.n or 10000], "d": [1], "s": [2.0], "beta": [0.0, 1.0],
                "epsilon": EPSILONS}
    with U.Timer() as tm:
        tab = U.run_by_size(TESTS, grid, n_reps=reps, out=U.csv_path(args, "fig4"), args=args)
    U.report("fig4", tab, tm, args)
    summ = experiments.summarise(tab)
    U.save_summary(summ, args, "fig4")

    plt = U.setup_matplotlib()
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.6), sharey=True)
    for ax, beta in zip(axes, (0.0, 1.0)):
        for label, g in summ[summ["beta"] == beta].groupby("label", sort=False):
            U.band(ax, np.log2(g["epsilon"]), g, label, U.COLOURS.get(label))
        ax.axhline(0.05, color="grey", ls="--", lw=1)
        ax.set_xlabel("log2 epsilon")
        ax.set_title("beta = 0 (null)" if beta == 0 else f"beta = {beta:g}")
    axes[0].set_ylabel("rejection rate")
    axes[1].legend(fontsize=8)
    n = grid["n"][0]
    krr = "random Fourier features" if n > args.exact_max_n else "exact KRR"
    fig.suptitle(f"PrivCRT (m = 19) vs PrivGCM against epsilon, n = {n}, d = 1, "
                 f"{reps} replications, {krr}", fontsize=9)
    U.finish(fig, U.png_path(args, "fig4_power_vs_epsilon"))


if __name__ == "__main__":
    main()
