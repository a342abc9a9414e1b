# %% [markdown]
# # Figure 6 (appendix): PrivCRT against m, and its p-value histograms
#
# Paper: n = 10^3, epsilon = 2.  (a) Power of PrivCRT for beta in
# {0, 0.5, 1.5} decreases as the number of resamples m grows (more
# statistics fall within the noise of T_0); type-I error is unaffected.
# (b) With m = 19 the p-values are uniform on {1/20, ..., 1} under the null
# and pile up at 1/20 = alpha when beta > 0.
#
# Here d = 1, s = 2; default ("full") run with the paper's n = 1000,
# the paper's 500 replications for (a) and for the histograms (b).

# %%
import vignette_utils as U  # first: sets one thread per process before numpy loads

import numpy as np

U.on_path()


def main():
    args = U.parse_args("Figure 6", lambda ap: ap.add_argument("--n", type=int))
    from privci import experiments
    import pandas as pd

    test = [{"test": "privcrt", "label": "PrivCRT", **U.PRIVATE}]
    if args.quick:
        reps_a = reps_b = args.reps or 8
        n = args.n or 300
        grid_a = {"n": [n], "d": [1], "s": [2.0], "beta": [0.0, 1.5], "epsilon": [2.0],
                  "m": [19, 99]}
        betas_b = [0.0, 1.5]
    else:
        reps_a = args.reps or 500
        reps_b = args.reps or 500
        n = args.n or 1000
        grid_a = {"n": [n], "d": [1], "s": [2.0], "beta": [0.0, 0.5, 1.5], "epsilon": [2.0],
                  "m": [9, 19, 49, 99, 199]}
        betas_b = [0.0, 0.25, 0.5, 1.5]
    grid_b = {"n": [n], "d": [1], "s": [2.0], "beta": betas_b, "epsilon": [2.0], "m": [19]}
    kw = U.run_kwargs(args)
    with U.Timer() as tm:
        ta = experiments.run(test, grid_a, n_reps=reps_a, out=U.csv_path(args, "fig6a"), **kw)
        tb = experiments.run(test, grid_b, n_reps=reps_b, out=U.csv_path(args, "fig6b"), **kw)
    U.report("fig6", pd.concat([ta, tb]), tm, args)
    sa, sb = experiments.summarise(ta), experiments.summarise(tb)
    U.save_summary(sa, args, "fig6a")
    U.save_summary(sb, args, "fig6b")

    plt = U.setup_matplotlib()
    fig = plt.figure(figsize=(11, 3.4))
    ax0 = fig.add_subplot(1, 1 + len(betas_b), 1)
    for beta, g in sa.groupby("beta"):
        U.band(ax0, np.log10(g["m"]), g, f"beta = {beta:g}")
    ax0.axhline(0.05, color="grey", ls="--", lw=1)
    ax0.set_xlabel("log10 m")
    ax0.set_ylabel("rejection rate")
    ax0.set_title(f"PrivCRT power vs m ({reps_a} reps)", fontsize=9)
    ax0.legend(fontsize=7)
    edges = (np.arange(21) + 0.5) / 20.0
    for j, beta in enumerate(betas_b):
        ax = fig.add_subplot(1, 1 + len(betas_b), j + 2)
        p = tb.loc[tb["beta"] == beta, "pvalue"].to_numpy()
        ax.hist(p, bins=edges, color="tab:green", edgecolor="white")
        ax.axhline(len(p) / 20.0, color="grey", ls="--", lw=1)
        ax.set_title(f"beta = {beta:g}", fontsize=9)
        ax.set_xlabel("p-value (m = 19)")
    fig.suptitle(f"PrivCRT, n = {n}, epsilon = 2, d = 1; histograms: {reps_b} replications "
                 "(dashed: uniform)", fontsize=10)
    U.finish(fig, U.png_path(args, "fig6_privcrt_m_and_pvalues"))


if __name__ == "__main__":
    main()
