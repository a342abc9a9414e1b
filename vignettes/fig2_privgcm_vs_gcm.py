# %% [markdown]
# # Figure 2: PrivGCM against the non-private GCM
#
# Paper: (a) rejection rate against beta in [0, 1.5] at n = 10^4, epsilon = 7,
# d in {1, 5}: both go from 0.05 to 1 at d = 1 (GCM faster); at d = 5 the
# GCM rejects too often at beta = 0 while PrivGCM keeps the level.
# (b) against n in [10^2, 10^4] for beta = 0 and beta > 0: at d = 5 the GCM's
# type-I error grows with n.
#
# Default ("full") run: the paper's sizes and 500 replications per point
# (about 22 minutes on 2 Dask workers): (a) n = 10^4;
# (b) n in {100, 316, 1000, 3162, 10^4}.  Exact KRR up to n = 2000, random
# Fourier features (256 frequency pairs, same kernel and lambda) above
# (`--exact-max-n`).  Both parts share one CSV, so the n = 10^4, beta in
# {0, 1} cells of (b) are the same replications as in (a).

# %%
import vignette_utils as U  # first: sets one thread per process before numpy loads

import numpy as np

U.on_path()

BETAS = [0.0, 0.25, 0.5, 0.75, 1.0, 1.25, 1.5]


TESTS = [{"test": "privgcm", "label": "PrivGCM", **U.PRIVATE},
         {"test": "gcm", "label": "GCM", **U.NONPRIVATE}]


def main():
    def extra(ap):
        ap.add_argument("--n", type=int, help="sample size of part (a)")
        ap.add_argument("--n-grid", type=int, nargs="+", help="sample sizes of part (b)")
    args = U.parse_args("Figure 2", extra)
    from privci import experiments

    if args.quick:
        reps = args.reps or 8
        grid_a = {"n": [args.n or 300], "d": [1, 5], "s": [2.0], "beta": [0.0, 0.75, 1.5],
                  "epsilon": [7.0]}
        grid_b = {"n": args.n_grid or [100, 300], "d": [1, 5], "s": [2.0], "beta": [0.0, 1.0],
                  "epsilon": [7.0]}
    else:
        reps = args.reps or 500
        grid_a = {"n": [args.n or 10000], "d": [1, 5], "s": [2.0], "beta": BETAS,
                  "epsilon": [7.0]}
        grid_b = {"n": args.n_grid or [100, 316, 1000, 3162, 10000], "d": [1, 5], "s": [2.0],
                  "beta": [0.0, 1.0], "epsilon": [7.0]}
    out = U.csv_path(args, "fig2")
    with U.Timer() as tm:
        ta = U.run_by_size(TESTS, grid_a, n_reps=reps, out=out, args=args)
        tb = U.run_by_size(TESTS, grid_b, n_reps=reps, out=out, args=args)
    import pandas as pd
    U.report("fig2", pd.concat([ta, tb]).drop_duplicates(["cell_key", "test_key", "rep"]), tm,
             args)
    sa, sb = experiments.summarise(ta), experiments.summarise(tb)
    U.save_summary(sa, args, "fig2a")
    U.save_summary(sb, args, "fig2b")
    plot_beta(sa, args, grid_a["n"][0], reps)
    plot_n(sb, args, reps)


def plot_beta(summ, args, n, reps):
    plt = U.setup_matplotlib()
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.6), sharey=True)
    for ax, d in zip(axes, (1, 5)):
        for label, g in summ[summ["d"] == d].groupby("label", sort=False):
            U.band(ax, g["beta"], g, label, U.COLOURS.get(label))
        ax.axhline(0.05, color="grey", ls="--", lw=1)
        ax.set_xlabel("beta")
        ax.set_title(f"d = {d}")
    axes[0].set_ylabel("rejection rate")
    axes[0].legend(fontsize=8)
    krr = "random Fourier features" if n > args.exact_max_n else "exact KRR"
    fig.suptitle(f"PrivGCM (epsilon = 7) vs GCM, n = {n}, {reps} replications, {krr} "
                 "(95% Wilson bands)", fontsize=9)
    U.finish(fig, U.png_path(args, "fig2a_privgcm_vs_gcm_beta"))


def plot_n(summ, args, reps):
    plt = U.setup_matplotlib()
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.6), sharey=True, sharex=True)
    rff = U.uses_rff(summ)
    for ax, d in zip(axes, (1, 5)):
        for (label, beta), g in summ[summ["d"] == d].groupby(["label", "beta"], sort=False):
            colour = U.COLOURS.get(label)
            U.band(ax, np.log10(g["n"].to_numpy(float)), g, f"{label}, beta = {beta:g}", colour,
                   linestyle="-" if beta == 0 else ":")
            r = g[rff[g.index]]
            ax.plot(np.log10(r["n"].to_numpy(float)), r["rate"], "s", mfc="none", ms=8,
                    color=colour)
        ax.axhline(0.05, color="grey", ls="--", lw=1)
        ax.set_xlabel("log10 n")
        ax.set_title(f"d = {d}")
    axes[0].set_ylabel("rejection rate")
    axes[1].legend(fontsize=7)
    fig.suptitle(f"PrivGCM (epsilon = 7) vs GCM against n, {reps} replications; "
                 f"squares: random Fourier features (n > {args.exact_max_n})", fontsize=9)
    U.finish(fig, U.png_path(args, "fig2b_privgcm_vs_gcm_n"))


if __name__ == "__main__":
    main()
