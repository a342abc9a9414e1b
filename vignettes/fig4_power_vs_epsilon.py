# %% [markdown]
# # Figure 4: PrivCRT against PrivGCM across privacy levels
#
# Paper: n = 10^4, m = 19, epsilon in 2^-3, ..., 2^3: both control type-I
# error and PrivCRT is more powerful than PrivGCM at every epsilon.
#
# Here d = 1, s = 2, beta in {0, 1} (the paper does not give its beta).  The
# two tests see the same data set in each replication (common random
# numbers), at every epsilon.  Default ("full") run: n = 1000 (not 10^4, for
# cost; use --n 10000), 100 replications; plus beta = 1 at the paper's
# n = 10^4 with random Fourier features (D = 256 pairs; squares), 50
# replications (--reps-large).

# %%
import vignette_utils as U  # first: sets one thread per process before numpy loads

import numpy as np

U.on_path()

EPSILONS = [2.0 ** k for k in range(-3, 4)]
TESTS = [{"test": "privcrt", "label": "PrivCRT", "m": 19, **U.PRIVATE},
         {"test": "privgcm", "label": "PrivGCM", **U.PRIVATE}]


def main():
    def extra(ap):
        ap.add_argument("--n", type=int)
        ap.add_argument("--reps-large", type=int, help="replications at n = 10^4 (RFF)")
    args = U.parse_args("Figure 4", extra)
    from privci import experiments

    if args.quick:
        reps = args.reps or 8
        grid = {"n": [args.n or 300], "d": [1], "s": [2.0], "beta": [0.0, 1.0],
                "epsilon": [0.125, 1.0, 8.0]}
    else:
        reps = args.reps or 100
        grid = {"n": [args.n or 1000], "d": [1], "s": [2.0], "beta": [0.0, 1.0],
                "epsilon": EPSILONS}
    rff = {"kernel_approximation": "rff", "n_features": 256}
    grid_l = {"n": [1000 if args.quick else 10000], "d": [1], "s": [2.0], "beta": [1.0],
              "epsilon": grid["epsilon"]}
    with U.Timer() as tm:
        tab = experiments.run(TESTS, grid, n_reps=reps, out=U.csv_path(args, "fig4"),
                              **U.run_kwargs(args))
        reps_l = args.reps_large or (reps if args.quick else 50)
        tl = experiments.run([{**t, **rff} for t in TESTS], grid_l, n_reps=reps_l,
                             out=U.csv_path(args, "fig4large"), **U.run_kwargs(args))
    import pandas as pd
    U.report("fig4", pd.concat([tab, tl]), tm, args)
    summ = experiments.summarise(tab)
    sl = experiments.summarise(tl)
    U.save_summary(summ, args, "fig4")
    U.save_summary(sl, args, "fig4large")

    plt = U.setup_matplotlib()
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.6), sharey=True)
    for ax, beta in zip(axes, (0.0, 1.0)):
        for label, g in summ[summ["beta"] == beta].groupby("label", sort=False):
            U.band(ax, np.log2(g["epsilon"]), g, label, U.COLOURS.get(label))
        for label, g in sl[sl["beta"] == beta].groupby("label", sort=False):
            ax.errorbar(np.log2(g["epsilon"]), g["rate"],
                        yerr=[g["rate"] - g["lo"], g["hi"] - g["rate"]], fmt="s", mfc="none",
                        color=U.COLOURS.get(label), capsize=3,
                        label=f"{label}, n = {int(g['n'].iloc[0])} (RFF)")
        ax.axhline(0.05, color="grey", ls="--", lw=1)
        ax.set_xlabel("log2 epsilon")
        ax.set_title("beta = 0 (null)" if beta == 0 else f"beta = {beta:g}")
    axes[0].set_ylabel("rejection rate")
    axes[1].legend(fontsize=8)
    fig.suptitle(f"PrivCRT (m = 19) vs PrivGCM against epsilon, n = {grid['n'][0]}, d = 1, "
                 f"{reps} replications", fontsize=10)
    U.finish(fig, U.png_path(args, "fig4_power_vs_epsilon"))


if __name__ == "__main__":
    main()
