# %% [markdown]
# # Figure 3: PrivCRT against the non-private CRT
#
# Paper: n = 10^3, epsilon = 2, m = 19 resamples.  (a) Rejection rate against
# beta in [0, 1.5]: both control type-I error and both powers go to 1, the
# CRT faster.  (b) Against n for beta in {0, 0.5, 1.5}.
#
# Here d = 1 (the paper does not say), the model-X law is the true
# X | Z ~ N(f_s(Z_1), 1) with s = 2, both tests use m = 19 and the statistic
# T = sum_i r_X,i r_Y,i (PrivCRT: clipped and scaled, ridge_lambda = 5;
# CRT: unclipped, ridge_lambda = 10 / n).  Default ("full") run: the paper's
# n = 1000 for (a), n in {100, 316, 1000} for (b), 500 replications (the paper's count).

# %%
import vignette_utils as U  # first: sets one thread per process before numpy loads

import numpy as np

U.on_path()

BETAS = [0.0, 0.25, 0.5, 0.75, 1.0, 1.25, 1.5]
TESTS = [{"test": "privcrt", "label": "PrivCRT", "m": 19, **U.PRIVATE},
         {"test": "crt", "label": "CRT", "m": 19, **U.NONPRIVATE}]


def main():
    args = U.parse_args("Figure 3", lambda ap: ap.add_argument("--n", type=int))
    from privci import experiments
    import pandas as pd

    if args.quick:
        reps = args.reps or 8
        grid_a = {"n": [args.n or 300], "d": [1], "s": [2.0], "beta": [0.0, 0.5, 1.5],
                  "epsilon": [2.0]}
        grid_b = {"n": [100, 300], "d": [1], "s": [2.0], "beta": [0.0, 1.5], "epsilon": [2.0]}
    else:
        reps = args.reps or 500
        grid_a = {"n": [args.n or 1000], "d": [1], "s": [2.0], "beta": BETAS, "epsilon": [2.0]}
        grid_b = {"n": [100, 316, 1000], "d": [1], "s": [2.0], "beta": [0.0, 0.5, 1.5],
                  "epsilon": [2.0]}
    kw = U.run_kwargs(args)
    with U.Timer() as tm:
        ta = experiments.run(TESTS, grid_a, n_reps=reps, out=U.csv_path(args, "fig3a"), **kw)
        tb = experiments.run(TESTS, grid_b, n_reps=reps, out=U.csv_path(args, "fig3b"), **kw)
    U.report("fig3", pd.concat([ta, tb]), tm, args)
    sa, sb = experiments.summarise(ta), experiments.summarise(tb)
    U.save_summary(sa, args, "fig3a")
    U.save_summary(sb, args, "fig3b")

    plt = U.setup_matplotlib()
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.6), sharey=True)
    for label, g in sa.groupby("label", sort=False):
        U.band(axes[0], g["beta"], g, label, U.COLOURS.get(label))
    axes[0].set_xlabel("beta")
    axes[0].set_title(f"n = {grid_a['n'][0]}")
    styles = {0.0: "-", 0.5: "--", 1.5: ":"}
    for (label, beta), g in sb.groupby(["label", "beta"], sort=False):
        U.band(axes[1], np.log10(g["n"]), g, f"{label}, beta = {beta:g}", U.COLOURS.get(label),
               linestyle=styles.get(beta, "-."))
    axes[1].set_xlabel("log10 n")
    axes[1].set_title("against n")
    for ax in axes:
        ax.axhline(0.05, color="grey", ls="--", lw=1)
    axes[0].set_ylabel("rejection rate")
    axes[0].legend(fontsize=8)
    axes[1].legend(fontsize=7)
    fig.suptitle(f"PrivCRT (epsilon = 2, m = 19) vs CRT (m = 19), d = 1, {reps} replications",
                 fontsize=10)
    U.finish(fig, U.png_path(args, "fig3_privcrt_vs_crt"))


if __name__ == "__main__":
    main()
