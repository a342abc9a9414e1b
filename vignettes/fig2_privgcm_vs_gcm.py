# %% [markdown]
# # Figure 2: PrivGCM against the non-private GCM
#
# Paper: (a) rejection rate against beta in [0, 1.5] at n = 10^4, epsilon = 7,
# d in {1, 5}: both go from 0.05 to 1 at d = 1 (GCM faster); at d = 5 the
# GCM rejects too often at beta = 0 while PrivGCM keeps the level.
# (b) against n in [10^2, 10^4] for beta = 0 and beta > 0: at d = 5 the GCM's
# type-I error grows with n.
#
# Default ("full") run here: (a) n = 1000; (b) n in {100, 316, 1000}
# with exact KRR (other sizes with --n-grid), 100 replications per point;
# (c) beta = 0 at n in {3162, 10^4}, d in {1, 5} with random Fourier
# features (D = 256 frequency pairs, same lambda and kernel) for the claim
# that needs large n, 200 replications (--reps-large); (d) the beta sweep of
# (a) at the paper's n = 10^4, d = 1, with the same random features, 100
# replications (squares in the d = 1 panel of (a)).  Paper scale:
# `--n 10000 --n-grid 100 316 1000 3162 10000 --reps 500`.

# %%
import vignette_utils as U  # first: sets one thread per process before numpy loads

import numpy as np

U.on_path()

BETAS = [0.0, 0.25, 0.5, 0.75, 1.0, 1.25, 1.5]


def tests(approx="exact"):
    extra = {} if approx == "exact" else {"kernel_approximation": "rff", "n_features": 256}
    return [{"test": "privgcm", "label": "PrivGCM", **U.PRIVATE, **extra},
            {"test": "gcm", "label": "GCM", **U.NONPRIVATE, **extra}]


def main():
    def extra(ap):
        ap.add_argument("--n", type=int, help="sample size of part (a)")
        ap.add_argument("--n-grid", type=int, nargs="+", help="sample sizes of part (b)")
        ap.add_argument("--reps-large", type=int, help="replications of part (c)")
    args = U.parse_args("Figure 2", extra)
    from privci import experiments

    if args.quick:
        reps = args.reps or 8
        grid_a = {"n": [args.n or 300], "d": [1, 5], "s": [2.0], "beta": [0.0, 0.75, 1.5],
                  "epsilon": [7.0]}
        grid_b = {"n": [100, 300], "d": [1, 5], "s": [2.0], "beta": [0.0, 1.0], "epsilon": [7.0]}
        grid_c = {"n": [1000], "d": [5], "s": [2.0], "beta": [0.0], "epsilon": [7.0]}
        reps_c = args.reps_large or 8
        grid_d = {"n": [1000], "d": [1], "s": [2.0], "beta": [1.5], "epsilon": [7.0]}
    else:
        reps = args.reps or 100
        grid_a = {"n": [args.n or 1000], "d": [1, 5], "s": [2.0], "beta": BETAS, "epsilon": [7.0]}
        grid_b = {"n": args.n_grid or [100, 316, 1000], "d": [1, 5], "s": [2.0],
                  "beta": [0.0, 1.0], "epsilon": [7.0]}
        grid_c = {"n": [3162, 10000], "d": [1, 5], "s": [2.0], "beta": [0.0], "epsilon": [7.0]}
        reps_c = args.reps_large or 200
        grid_d = {"n": [10000], "d": [1], "s": [2.0], "beta": [0.0, 0.5, 1.0, 1.5],
                  "epsilon": [7.0]}
    kw = U.run_kwargs(args)
    with U.Timer() as tm:
        ta = experiments.run(tests(), grid_a, n_reps=reps, out=U.csv_path(args, "fig2a"), **kw)
        tb = experiments.run(tests(), grid_b, n_reps=reps, out=U.csv_path(args, "fig2b"), **kw)
        tc = experiments.run(tests("rff"), grid_c, n_reps=reps_c,
                             out=U.csv_path(args, "fig2c"), **kw)
        td = experiments.run(tests("rff"), grid_d, n_reps=reps,
                             out=U.csv_path(args, "fig2d"), **kw)
    import pandas as pd
    U.report("fig2", pd.concat([ta, tb, tc, td]), tm, args)
    sa, sb, sc, sd = (experiments.summarise(t) for t in (ta, tb, tc, td))
    for s, name in ((sa, "fig2a"), (sb, "fig2b"), (sc, "fig2c"), (sd, "fig2d")):
        U.save_summary(s, args, name)
    plot_beta(sa, sd, args, grid_a["n"][0], reps)
    plot_n(sb, sc, args, reps, reps_c)


def plot_beta(summ, summ_rff, args, n, reps):
    plt = U.setup_matplotlib()
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.6), sharey=True)
    for ax, d in zip(axes, (1, 5)):
        for label, g in summ[summ["d"] == d].groupby("label", sort=False):
            U.band(ax, g["beta"], g, label, U.COLOURS.get(label))
        for label, g in summ_rff[summ_rff["d"] == d].groupby("label", sort=False):
            ax.errorbar(g["beta"], g["rate"], yerr=[g["rate"] - g["lo"], g["hi"] - g["rate"]],
                        fmt="s", mfc="none", color=U.COLOURS.get(label), capsize=3,
                        label=f"{label}, n = {int(g['n'].iloc[0])} (RFF)")
        ax.axhline(0.05, color="grey", ls="--", lw=1)
        ax.set_xlabel("beta")
        ax.set_title(f"d = {d}")
    axes[0].set_ylabel("rejection rate")
    axes[0].legend(fontsize=7, loc=(0.03, 0.5))
    fig.suptitle(f"PrivGCM (epsilon = 7) vs GCM, n = {n}, {reps} replications "
                 "(squares: random Fourier features)", fontsize=10)
    U.finish(fig, U.png_path(args, "fig2a_privgcm_vs_gcm_beta"))


def plot_n(summ, summ_rff, args, reps, reps_c):
    plt = U.setup_matplotlib()
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.6), sharey=True, sharex=True)
    for ax, d in zip(axes, (1, 5)):
        sd = summ[summ["d"] == d]
        for (label, beta), g in sd.groupby(["label", "beta"], sort=False):
            U.band(ax, np.log10(g["n"]), g, f"{label}, beta = {beta:g}", U.COLOURS.get(label),
                   linestyle="-" if beta == 0 else ":")
        rf = summ_rff[summ_rff["d"] == d]
        for label, g in rf.groupby("label", sort=False):
            x = np.log10(g["n"].to_numpy(float))
            ax.errorbar(x, g["rate"], yerr=[g["rate"] - g["lo"], g["hi"] - g["rate"]],
                        fmt="s", mfc="none", color=U.COLOURS.get(label), capsize=3,
                        label=f"{label}, beta = 0 (RFF, {reps_c} reps)")
        ax.axhline(0.05, color="grey", ls="--", lw=1)
        ax.set_xlabel("log10 n")
        ax.set_title(f"d = {d}")
    axes[0].set_ylabel("rejection rate")
    axes[1].legend(fontsize=7)
    fig.suptitle(f"PrivGCM (epsilon = 7) vs GCM against n; exact KRR: {reps} replications, "
                 "squares: random Fourier features", fontsize=10)
    U.finish(fig, U.png_path(args, "fig2b_privgcm_vs_gcm_n"))


if __name__ == "__main__":
    main()
