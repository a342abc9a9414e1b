# %% [markdown]
# # Random Fourier features against exact KRR at the paper's n = 10^4
#
# The figures run the KRR tests with random Fourier features above
# n = 2000 (exact KRR costs about 11 s per test at n = 10^4).  This script
# runs two n = 10^4 cells of figure 2 both ways on the same data sets (same
# seed, same replications) and compares them:
#
# * the GCM at d = 5, beta = 0 (the level claim of figure 2; no privacy
#   noise, so the two statistics can be compared replication by replication);
# * PrivGCM at d = 1, beta = 1 (its power; the Laplace noise differs between
#   the two runs, so only the rates are compared).
#
#     python vignettes/rff_vs_exact.py [--quick] [--reps 100] [--workers 2]
#
# Full run: 100 replications per cell, about 33 CPU-minutes (17 on 2 workers).

# %%
import vignette_utils as U  # first: sets one thread per process before numpy loads

import numpy as np

U.on_path()

CELLS = [({"test": "gcm", "label": "GCM", **U.NONPRIVATE}, {"d": [5], "beta": [0.0]}),
         ({"test": "privgcm", "label": "PrivGCM", **U.PRIVATE}, {"d": [1], "beta": [1.0]})]


def main():
    args = U.parse_args("RFF against exact KRR", lambda ap: ap.add_argument("--n", type=int))
    import pandas as pd
    from privci import experiments
    n = args.n or (300 if args.quick else 10000)
    reps = args.reps or (4 if args.quick else 100)
    out = U.csv_path(args, "rffcheck")
    rows = []
    for test, cell in CELLS:
        grid = {"n": [n], "s": [2.0], "epsilon": [7.0], **cell}
        kw = U.run_kwargs(args)
        exact = experiments.run([test], grid, n_reps=reps, out=out, **kw)
        rff = experiments.run(U.with_rff([test]), grid, n_reps=reps, out=out, **kw)
        m = exact.merge(rff, on="rep", suffixes=("_exact", "_rff"))
        se, sr = experiments.summarise(exact).iloc[0], experiments.summarise(rff).iloc[0]
        rows.append({"label": test["label"], "n": n, "d": cell["d"][0], "beta": cell["beta"][0],
                     "n_reps": len(m), "rate_exact": se["rate"], "lo_exact": se["lo"],
                     "hi_exact": se["hi"], "rate_rff": sr["rate"], "lo_rff": sr["lo"],
                     "hi_rff": sr["hi"],
                     "same_decision": float(np.mean(m["reject_exact"] == m["reject_rff"])),
                     "stat_correlation": float(np.corrcoef(m["statistic_exact"],
                                                           m["statistic_rff"])[0, 1]),
                     "seconds_exact": float(exact["seconds"].mean()),
                     "seconds_rff": float(rff["seconds"].mean())})
    tab = pd.DataFrame(rows)
    print(tab.to_string(index=False), flush=True)
    U.save_summary(tab, args, "rffcheck")


if __name__ == "__main__":
    main()
