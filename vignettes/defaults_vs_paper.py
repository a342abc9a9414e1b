# %% [markdown]
# # The package's defaults next to the paper's mechanisms (issue 13)
#
# Re-runs the private tests of figures 1, 2, 3a, 4 and 5 with the package's defaults on the
# **same data sets** as the committed figures (the grid runner seeds each data cell and
# replication the same way), and draws them next to the committed paper-mechanism curves
# (`results/fig*_summary.csv`):
#
# * PrivGCM default (`regression="spline"`: released additive spline fit, 20 noisy block
#   sums); in the simulations z's public centre 0 and scale 2 (the design's sd); on the
#   Concrete data the default private ('auto') centre and scale of z;
# * PrivCRT default (the package's sharp constant, `sensitivity="sharp"`).
#
# Writes `results/defaults_fig{1,2a,2b,3a,4,5}_summary.csv`, `defaults_vs_paper.png` and
# prints the claims table of `vignettes/README.md` ("PrivGCM's defaults").
#
#     python vignettes/defaults_vs_paper.py ../shared/data/concrete.csv --workers 2
#     python vignettes/defaults_vs_paper.py ../shared/data/concrete.csv --quick   # CI

# %%
import vignette_utils as U  # first: one thread per process

import os

import numpy as np

U.on_path()

SPLINE = {"test": "privgcm", "label": "PrivGCM (default)", "regression": "spline",
          "z_scale": 2.0}
SPLINE_AUTO = {"test": "privgcm", "label": "PrivGCM (default)", "regression": "spline",
               "center_share": 0.1}
CRT_SHARP = {"test": "privcrt", "label": "PrivCRT (sharp)", "m": 19, "sensitivity": "sharp",
             **U.PRIVATE}
BETAS = [0.0, 0.25, 0.5, 0.75, 1.0, 1.25, 1.5]
EPS4 = [2.0 ** k for k in range(-3, 4)]


def main():
    def extra(ap):
        ap.add_argument("data", help="path of concrete.csv (e.g. ../shared/data/concrete.csv)")
        ap.add_argument("--crt-reps", type=int, default=None)
        ap.add_argument("--fig5-null-reps", type=int, default=100)
        ap.add_argument("--fig5-reps", type=int, default=None,
                        help="replications of the Concrete cells (default 200; 7 columns of z "
                             "make each test cost about 0.1-0.2 s: about 25 minutes on 2 workers)")
    args = U.parse_args("Defaults vs the paper's mechanisms", extra)
    from privci import experiments, simulate
    q = args.quick
    reps = args.reps or (4 if q else 500)
    crt_reps = args.crt_reps or (4 if q else 200)
    n4 = 300 if q else 10_000
    grids = {
        "fig1": ([SPLINE], {"n": [n4], "d": [1, 5], "s": [1, 4] if q else [1, 2, 4, 8, 16, 32],
                            "beta": [0.0], "epsilon": [2.0]}, reps),
        "fig2a": ([SPLINE], {"n": [n4], "d": [1, 5], "s": [2.0],
                             "beta": [0.0, 1.5] if q else BETAS, "epsilon": [7.0]}, reps),
        "fig2b": ([SPLINE], {"n": [100, 300] if q else [100, 316, 1000, 3162, 10000],
                             "d": [1, 5], "s": [2.0], "beta": [0.0, 1.0], "epsilon": [7.0]},
                  reps),
        "fig3a": ([CRT_SHARP], {"n": [300 if q else 1000], "d": [1], "s": [2.0],
                                "beta": [0.0, 1.5] if q else BETAS, "epsilon": [2.0]}, reps),
        "fig4": ([SPLINE], {"n": [n4], "d": [1], "s": [2.0], "beta": [0.0, 1.0],
                            "epsilon": [1.0] if q else EPS4}, reps),
        "fig4crt": ([CRT_SHARP], {"n": [n4], "d": [1], "s": [2.0], "beta": [0.0, 1.0],
                                  "epsilon": [1.0] if q else EPS4}, crt_reps),
    }
    summaries = {}
    with U.Timer() as tm:
        for name, (tests, grid, r) in grids.items():
            tab = U.run_by_size(tests, grid, n_reps=r, out=U.csv_path(args, f"defaults_{name}"),
                                args=args)
            summaries[name] = experiments.summarise(tab)
            U.save_summary(summaries[name], args, f"defaults_{name}")
            print(name, "done", flush=True)
        import fig5_concrete as F5
        table, names = F5.scaled_table(args.data)
        sampler = simulate.TableSubsampler(table, names, y="strength",
                                           bounds=(1.0,) * len(names))
        feats = [c for c in names if c != "strength"]
        g5 = ({"n": [100, 300], "x": feats[:2], "epsilon": [4.0]} if q else
              {"n": [100, 200, 400, 700, table.shape[0]], "x": feats, "epsilon": F5.EPSILONS})
        t5 = experiments.run([SPLINE_AUTO], g5, n_reps=(4 if q else args.fig5_reps or 200),
                             data=sampler, out=U.csv_path(args, "defaults_fig5"),
                             **U.run_kwargs(args))
        summaries["fig5"] = experiments.summarise(t5)
        U.save_summary(summaries["fig5"], args, "defaults_fig5")
        # null control: x permuted within the subsample (independent of y and z)
        g5n = ({"n": [300], "x": feats[:2], "epsilon": [4.0], "permute_x": [True]} if q else
               {"n": [400, table.shape[0]], "x": feats, "epsilon": [16.0],
                "permute_x": [True]})
        t5n = experiments.run([SPLINE_AUTO], g5n, n_reps=(4 if q else args.fig5_null_reps),
                              data=sampler, out=U.csv_path(args, "defaults_fig5null"),
                              **U.run_kwargs(args))
        summaries["fig5null"] = experiments.summarise(t5n)
        U.save_summary(summaries["fig5null"], args, "defaults_fig5null")
    print(f"wall {tm.wall:.0f} s")
    plot(summaries, args)


def _paper(name):
    import pandas as pd
    path = os.path.join(U.HERE, "results", f"{name}_summary.csv")
    return pd.read_csv(path) if os.path.exists(path) else None


def plot(S, args):
    plt = U.setup_matplotlib()
    fig, ax = plt.subplots(2, 3, figsize=(13, 7))
    # (a) figure 1: type-I error against s
    p1 = _paper("fig1")
    for d, ls in ((1, "-"), (5, "--")):
        g = S["fig1"][S["fig1"]["d"] == d]
        ax[0, 0].plot(g["s"], g["rate"], ls, marker="o", color="C0",
                      label=f"PrivGCM default, d={d}")
        if p1 is not None:
            h = p1[(p1["label"] == "PrivGCM") & (p1["d"] == d)]
            ax[0, 0].plot(h["s"], h["rate"], ls, marker="x", color="C1",
                          label=f"PrivGCM paper, d={d}")
    ax[0, 0].set_xscale("log", base=2)
    ax[0, 0].axhline(0.05, color="grey", lw=0.8)
    ax[0, 0].set_title("fig 1: type-I error vs s (eps = 2)")
    # (b) figure 2a: power against beta, d = 1 and 5
    p2 = _paper("fig2a")
    for d, ls in ((1, "-"), (5, "--")):
        g = S["fig2a"][S["fig2a"]["d"] == d]
        ax[0, 1].plot(g["beta"], g["rate"], ls, marker="o", color="C0",
                      label=f"PrivGCM default, d={d}")
        if p2 is not None:
            for lab, col in (("PrivGCM", "C1"), ("GCM", "k")):
                h = p2[(p2["label"] == lab) & (p2["d"] == d)]
                ax[0, 1].plot(h["beta"], h["rate"], ls, marker="x", color=col,
                              label=f"{lab}{' paper' if lab == 'PrivGCM' else ''}, d={d}")
    ax[0, 1].set_title("fig 2a: power vs beta (eps = 7)")
    # (c) figure 2b: against n
    p2b = _paper("fig2b")
    for beta, ls in ((0.0, "--"), (1.0, "-")):
        g = S["fig2b"][(S["fig2b"]["d"] == 1) & (S["fig2b"]["beta"] == beta)]
        ax[0, 2].plot(g["n"], g["rate"], ls, marker="o", color="C0",
                      label=f"PrivGCM default, beta={beta:g}")
        if p2b is not None:
            for lab, col in (("PrivGCM", "C1"), ("GCM", "k")):
                h = p2b[(p2b["label"] == lab) & (p2b["d"] == 1) & (p2b["beta"] == beta)]
                ax[0, 2].plot(h["n"], h["rate"], ls, marker="x", color=col,
                              label=f"{lab}{' paper' if lab == 'PrivGCM' else ''}, beta={beta:g}")
    ax[0, 2].set_xscale("log")
    ax[0, 2].set_title("fig 2b: rejection vs n (d = 1, eps = 7)")
    # (d) figure 3a: PrivCRT against beta
    p3 = _paper("fig3a")
    g = S["fig3a"]
    ax[1, 0].plot(g["beta"], g["rate"], "-o", color="C2", label="PrivCRT sharp (default)")
    if p3 is not None:
        for lab, col in (("PrivCRT", "C3"), ("CRT", "k")):
            h = p3[p3["label"] == lab]
            ax[1, 0].plot(h["beta"], h["rate"], "-x", color=col,
                          label=f"{lab}{' paper constant' if lab == 'PrivCRT' else ''}")
    ax[1, 0].set_title("fig 3a: PrivCRT vs beta (n = 1000, eps = 2)")
    # (e) figure 4: power against epsilon, beta = 1
    p4 = _paper("fig4")
    for key, lab, col in (("fig4", "PrivGCM default", "C0"), ("fig4crt", "PrivCRT sharp", "C2")):
        g = S[key][S[key]["beta"] == 1.0]
        ax[1, 1].plot(g["epsilon"], g["rate"], "-o", color=col, label=lab)
    if p4 is not None:
        for lab, col in (("PrivGCM", "C1"), ("PrivCRT", "C3")):
            h = p4[(p4["label"] == lab) & (p4["beta"] == 1.0)]
            ax[1, 1].plot(h["epsilon"], h["rate"], "-x", color=col, label=f"{lab} paper")
    ax[1, 1].set_xscale("log", base=2)
    ax[1, 1].set_title("fig 4: power vs epsilon (beta = 1, n = 10^4)")
    # (f) figure 5: Concrete data, power at the largest n against epsilon, per feature
    p5 = _paper("fig5")
    g = S["fig5"]
    nmax = g["n"].max()
    for i, (feat, gg) in enumerate(g[g["n"] == nmax].groupby("x")):
        ax[1, 2].plot(gg["epsilon"], gg["rate"], "-o", color=f"C{i}", label=f"{feat} default")
        if p5 is not None:
            h = p5[(p5["label"] == "PrivGCM") & (p5["x"] == feat) & (p5["n"] == nmax)]
            ax[1, 2].plot(h["epsilon"], h["rate"], ":x", color=f"C{i}")
    ax[1, 2].set_xscale("log", base=2)
    ax[1, 2].set_title(f"fig 5: Concrete, n = {nmax} (dotted: paper)")
    for a in ax.ravel():
        a.set_ylim(-0.02, 1.02)
        a.legend(fontsize=6)
    fig.tight_layout()
    U.finish(fig, U.png_path(args, "defaults_vs_paper"))


if __name__ == "__main__":
    main()
