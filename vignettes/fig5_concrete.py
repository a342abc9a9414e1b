# %% [markdown]
# # Figure 5: real data, the Concrete Compressive Strength data
#
# Paper: Y = compressive strength, X one of the other 8 features in turn, Z
# the remaining 7; 1030 rows.  The power of PrivGCM rises to 1 with the
# subsample size n, approaching the non-private GCM.
#
# The data file is read from the path given on the command line (it is not
# part of this repository):
#
#     python vignettes/fig5_concrete.py ../shared/data/concrete.csv [--quick]
#         [--reps R] [--n N1 N2 ...] [--features K]
#
# --quick (CI smoke run, < 1 minute) runs both paths, including the default
# path at n = 1030, epsilon 64, where it resolves.
#
# Public scaling (fixed before the analysis, no statistic of the file is
# used): each column is mapped affinely from a documented public range to
# [-1, 1] (age on the log scale), so every bound is 1.  The ranges are round
# numbers enclosing the ranges documented for this data set (Yeh 1998; UCI
# "Concrete Compressive Strength"): see PUBLIC_RANGES below.  Values outside
# a range would be clipped by the private test.
#
# Subsamples of size n are drawn without replacement, a fresh one per
# replication (n = 1030 is the whole table, so only the privacy noise
# varies).  500 subsamples per point, as in the paper.
#
# Centring.  Kernel ridge regression has no intercept, and the public ranges
# put the means of several columns far from 0 (slag, fly ash and
# superplasticizer are zero for about half of the rows).  Uncentred, the
# residual products then have a non-zero mean even when X is independent of
# (Y, Z), and both tests lose their level (see the null control).  So:
# PrivGCM spends 10% of epsilon on private centres (``center_epsilon``: the
# Laplace-noised means of the scaled columns, sequential composition), and
# the non-private GCM subtracts the sample means (``center=True``).
# PrivGCM: ridge_lambda = 5, kernel_sigma = 0.5 (Z in [-1, 1]^7), epsilon in
# {1, 4, 16} in total; GCM: ridge_lambda = 10 / n, same kernel.
#
# Null control (not in the paper): the same tests with X replaced by a random
# permutation of itself within each subsample (X independent of (Y, Z), same
# marginal), 200 subsamples per point, plus PrivGCM without centring to show
# the failure that the centring removes.  A valid test rejects about 5%.
#
# The default path (issue 35, item 5).  The script also runs privgcm's default,
# the released spline regression (regression="spline"), on the same subsamples
# (the data generator of every (cell, rep) is built as experiments.run builds
# it; checked against the stored GCM statistic), with the same public scaling:
# x_bound = y_bound = 1, no centring (the spline fits an intercept), and for z
# the public z_center = 0, z_scale = 0.5: the public range [-1, 1] read as +-2
# standard deviations, so t = z / 0.5 lies in [-2, 2] -- roughly standard
# (a column spread evenly over its range has sd 1.15 in t), no row is beyond
# |t| > 4, and none is outside the unchecked linear fit's box [-2, 2].  Nothing
# is spent on bounds.  With 7 columns of z the default needs a stated model;
# both rungs, assume="additive" and assume="linear", are run at every cell, and
# the rung *used* is the richest the public rule resolves (additive, else
# linear).  A refusal (UnresolvableDesignError, before any privacy is spent)
# counts as p = 1.  The public rule (privci._spline.smallest_epsilon, d = 7):
#
#     n      additive  linear     (smallest epsilon that resolves)
#     100      510      120
#     200      260       58
#     400      130       29
#     700       72       17
#     1030      49       12
#
# so at the paper's epsilons 1 and 4 the default refuses at every n <= 1030, and at 16
# it resolves the linear rung at n = 1030 only; epsilon = 64 is added to the grid (both
# paths).  At epsilon 64: n = 400 and 700 use linear (unchecked), n = 1030 additive
# (unchecked; linear, also unchecked, is run beside it).  The per-feature table (rung
# or "refused: smallest epsilon ...", rejection rate with its Wilson 95% interval next
# to KRR's) is printed and saved to results/fig5_default_summary.csv and
# fig5_default_null_summary.csv (column ``primary``: the rung used).
#
# Measured (2026-11-27, stop 42's rule; reduced size: 100 subsamples per point and for
# the null, seed 20240601, n in {100, 400, 700, 1030}, null at n >= 400, epsilon 1, 4,
# 16, 64; 7 min for KRR and 4 for the default path on one core; the committed KRR
# summaries are the 500-subsample run):
#
#     python vignettes/fig5_concrete.py DATA --reps 100 --n 100 400 700 1030
#
#   epsilon 1, 4, every n, and 16 below n = 1030: default refused (rate 0).
#   Default rate (fail-safes of 100) at epsilon 64, and at 1030 also epsilon 16:
#     X                 400 lin    700 lin     1030 lin eps16  1030 add   1030 lin
#     cement            0 (100)    0.01 (98)   0 (100)         1.00 (0)   0.23 (75)
#     blast_furnace_slag 0 (100)   0.03 (97)   0 (100)         1.00 (0)   0.27 (68)
#     fly_ash           0 (100)    0 (100)     0 (100)         0.29 (0)   0.10 (89)
#     water             0 (100)    0 (96)      0 (100)         0.95 (0)   0 (76)
#     superplasticizer  0 (100)    0 (100)     0 (100)         0.04 (0)   0 (98)
#     coarse_aggregate  0 (100)    0 (99)      0 (100)         0.10 (0)   0.02 (62)
#     fine_aggregate    0 (100)    0 (96)      0 (100)         0.20 (0)   0.03 (42)
#     age               0 (100)    0 (100)     0 (100)         1.00 (0)   0 (100)
#   PrivGCM (KRR) at epsilon 64 on the same subsamples: 0.13 to 1.00 at n = 400.
#   Null control (X permuted), default: at most 0.05 in all 40 answered cells.
#
#   Stop 47 (the same command; the committed fig5_default_*summary.csv): the unchecked
#   additive rung now carries an allowance for its ridge's shrinkage (privci._spline.
#   ADDITIVE_ALLOWANCE).  At n = 1030, epsilon 64, additive, rate (fail-safes of 100):
#   cement 0.66 (34), slag 0.27 (14), fly ash 0.00 (7), water 0.05 (8),
#   superplasticizer 0.00 (55), coarse aggregate 0.00 (10), fine aggregate 0.00 (6),
#   age 0.99 (1) -- down from the table above: with 7 columns the shrinkage of the
#   nonlinear relations shared by X and Y is a bias the test now counts (the old rates
#   on coarse and fine aggregate, 0.10 and 0.20, stood where the non-private GCM on the
#   full table rejects 0.00).  The linear rung at n = 700: 0.00-0.07 (81-100 fail-safes).
#   Null control: at most 0.01 in every answered cell.
#
#   Stop 53 (the same command, n in {400, 700, 1030}): the additive rung's public
#   windows are now tightened (twice a released quantile; the rule predicts the privacy
#   noise dominant at n = 1030, epsilon 64).  Rate (fail-safes of 100): cement 0.72 (26),
#   slag 0.16 (10), fly ash 0.00 (10), water 0.10 (16), superplasticizer 0.00 (48),
#   coarse aggregate 0.00 (7), fine aggregate 0.00 (7), age 0.99 (1).  Null control
#   (X permuted, n = 1030, epsilon 64): 0.000 for every feature.
#
#   The linear rung fails safe on almost every subsample since stop 41's floor check
#   (stop 40 measured 0.36 / 0.75 / 0.89 for cement at n = 400 / 700 / 1030): the
#   mixture columns are nearly collinear (their sum is nearly constant), so the
#   released Gram of (1, t / 2) has an eigenvalue far below the floor lambda (per row
#   0.004 with age as X, 0.013 with cement, against lambda / m = 0.011 at n = 1030,
#   epsilon 64; the reference's smallest is 0.13), and a floored direction is a bias
#   the unchecked fit cannot bound (correlated true-linear nulls were rejected 0.13 of
#   300 before the check).  Answering here needs a bound on the fit's component along
#   such directions (open, issue 35).  The additive rung (n = 1030) is unaffected.
#   Before stop 40 the checked linear fit (then chosen at n = 1030) returned
#   p = 1 on every data set: its coordinates amplify the Gram noise about 100
#   times and its floor did not (fixed: privci._spline._test_floor).

# %%
import vignette_utils as U  # first: sets one thread per process before numpy loads

import functools
import math

import numpy as np

U.on_path()

# column: (low, high, transform) -- public ranges, units kg/m^3, days, MPa
PUBLIC_RANGES = {
    "cement": (100.0, 550.0, None),
    "blast_furnace_slag": (0.0, 400.0, None),
    "fly_ash": (0.0, 250.0, None),
    "water": (100.0, 250.0, None),
    "superplasticizer": (0.0, 35.0, None),
    "coarse_aggregate": (800.0, 1150.0, None),
    "fine_aggregate": (550.0, 1000.0, None),
    "age": (1.0, 365.0, "log"),
    "strength": (0.0, 100.0, None),
}
EPSILONS = [1.0, 4.0, 16.0]
CENTER_SHARE = 0.1   # fraction of epsilon spent on PrivGCM's private centres
# The default path (privgcm's released spline regression) resolves nothing with 7
# columns of z below epsilon = 20 at n <= 1030 (privci._spline.smallest_epsilon), so
# this script adds epsilon = 64 to the grid of both paths.
DEFAULT_EPSILONS = EPSILONS + [64.0]
RUNGS = ("additive", "linear")   # the stated models, richest first
Z_CENTER = 0.0       # public: the centre of the public range [-1, 1]
Z_SCALE = 0.5        # public: [-1, 1] read as +-2 sd, so t = z / 0.5 lies in [-2, 2]
N_Z = len(PUBLIC_RANGES) - 2     # columns of z: 7


def scaled_table(path):
    """Read the CSV and map every column from its public range to [-1, 1]."""
    import pandas as pd
    raw = pd.read_csv(path)
    missing = [c for c in PUBLIC_RANGES if c not in raw.columns]
    if missing:
        raise SystemExit(f"{path} lacks the column(s) {missing}")
    cols = []
    for name, (lo, hi, tr) in PUBLIC_RANGES.items():
        v = raw[name].to_numpy(dtype=float)
        if tr == "log":
            v, lo, hi = np.log(v), math.log(lo), math.log(hi)
        cols.append(np.clip(2.0 * (v - lo) / (hi - lo) - 1.0, -1.0, 1.0))
    return np.column_stack(cols), tuple(PUBLIC_RANGES)


# %% the default path: privgcm's released spline regression with a stated model

@functools.lru_cache(maxsize=None)
def rung_status(n, epsilon, rung, d=N_Z):
    """The public rule's verdict for one rung (no data): "resolved, checked",
    "resolved, unchecked" or "refused: smallest epsilon E" (E at this n; None above 10^4)."""
    from privci import _spline
    des = _spline.choose_design(n, d, 1, 1, epsilon, model=rung)
    if des.certified:
        return "resolved, " + ("checked" if des.checked else "unchecked")
    e = _spline.smallest_epsilon(n, d, model=rung)
    return f"refused: smallest epsilon {e:g}" if e is not None else \
        "refused: smallest epsilon > 1e4"


def primary_rung(n, epsilon):
    """The rung the default path uses: the richest stated model the public rule resolves
    (additive, else linear); None where both are refused."""
    for rung in RUNGS:
        if rung_status(n, epsilon, rung).startswith("resolved"):
            return rung
    return None


def run_default(sampler, cells, epsilons, *, n_reps, seed, out=None):
    """privgcm(..., assume=rung) for both rungs on the subsamples that experiments.run
    draws for the same (cell, rep, seed): the data generator is built exactly as there
    (experiments._seedseq of the cell's hash and rep), so both paths see the same rows.
    A refusal (UnresolvableDesignError, raised before any privacy is spent) counts as
    p = 1.  Serial (each test takes milliseconds to a few seconds).  Rows in
    experiments.run's layout plus ``rung``, ``status`` and ``fail_safe``."""
    import time
    import warnings
    import pandas as pd
    import privci
    from privci import experiments as E
    rows = []
    for cell in cells:
        cell = {k: E._canonical(v) for k, v in cell.items()}
        words = E._hash_words(cell)
        ckey = E._hash_hex(cell)
        for rep in range(n_reps):
            data = sampler(rng=np.random.default_rng(E._seedseq(seed, *words, rep)), **cell)
            for eps in epsilons:
                for rung in RUNGS:
                    label = f"PrivGCM default, assume={rung}"
                    opts = {"assume": rung, "regression": "spline", "z_center": Z_CENTER,
                            "z_scale": Z_SCALE}
                    tkey = E._hash_hex({"label": label, "test": "privgcm", "epsilon": eps,
                                        **opts})
                    rng = np.random.default_rng(
                        E._seedseq(seed, *words, rep, *E._hash_words({"key": tkey})))
                    status = rung_status(data.n, eps, rung)
                    t0 = time.perf_counter()
                    stat, pval, err, fail_safe = math.nan, 1.0, "", 0
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        try:
                            res = privci.privgcm(
                                data.x, data.y, data.z, epsilon=eps, x_bound=data.x_bound,
                                y_bound=data.y_bound, z_center=Z_CENTER, z_scale=Z_SCALE,
                                assume=rung, rng=rng)
                            stat, pval = float(res.statistic), float(res.pvalue)
                            fail_safe = int(not res.fit_check["certified"])
                            if status.startswith("refused"):
                                err = "ran although the rule refuses"
                        except privci.UnresolvableDesignError:
                            err = "refused (p = 1)"
                            if not status.startswith("refused"):
                                err = "refused although the rule resolves (p = 1)"
                    rows.append({"seed": seed, "cell_key": ckey, "test_key": tkey, "rep": rep,
                                 "label": label, "test": "privgcm", **cell, "epsilon": eps,
                                 "options": E._json(opts), "rung": rung, "status": status,
                                 "statistic": stat, "pvalue": pval, "reject": int(pval <= 0.05),
                                 "seconds": time.perf_counter() - t0, "error": err,
                                 "fail_safe": fail_safe})
    tab = pd.DataFrame(rows)
    if out is not None:
        tab.to_csv(out, index=False, float_format="%.10g")
    return tab


def summarise_default(tab):
    """experiments.summarise of the default path, with the fail-safe count and the rung
    the default uses (``primary``)."""
    from privci import experiments as E
    keys = [c for c in ("label", "test", "n", "x", "permute_x", "epsilon", "options", "rung",
                        "status") if c in tab.columns]
    s = E.summarise(tab.drop(columns=["fail_safe"]), by=keys)
    fs = tab.groupby(keys, sort=False, dropna=False)["fail_safe"].sum().reset_index()
    s = s.merge(fs.rename(columns={"fail_safe": "n_fail_safe"}), on=keys, how="left")
    s["primary"] = [primary_rung(int(n), float(e)) == r
                    for n, e, r in zip(s["n"], s["epsilon"], s["rung"])]
    return s


def _fmt(row):
    return f"{row['rate']:.3f} [{row['lo']:.3f}, {row['hi']:.3f}]"


def print_comparison(sdef, skrr, title, flag_level=None):
    """Per X, n and epsilon: the rung used and the default's rejection rate next to KRR's."""
    print(f"\n{title}", flush=True)
    print(f"{'X':<20}{'n':>6}{'eps':>5}  {'rung (status)':<44}{'default':<24}"
          f"{'other rung':<38}{'PrivGCM KRR':<24}{'GCM':<20}")
    bad = []
    for (x, n, eps), g in sdef.groupby(["x", "n", "epsilon"], sort=False):
        prim = g[g["primary"]]
        if len(prim):
            p = prim.iloc[0]
            rung = f"{p['rung']} ({p['status']})"
            d_txt = _fmt(p)
            if p["n_fail_safe"]:
                d_txt += f" fs={int(p['n_fail_safe'])}"
            other = g[(~g["primary"]) & g["status"].str.startswith("resolved")]
            o_txt = "" if other.empty else \
                f"{other.iloc[0]['rung']}: {_fmt(other.iloc[0])}"
            if flag_level is not None and p["rate"] > flag_level:
                bad.append((x, n, eps, p["rung"], _fmt(p)))
        else:
            lin = g[g["rung"] == "linear"].iloc[0]
            rung = f"{lin['status']} (linear)"
            d_txt, o_txt = "p = 1: rate 0", ""
        k = skrr[(skrr["x"] == x) & (skrr["n"] == n)]
        kp = k[(k["label"] == "PrivGCM") & (k["epsilon"] == eps)]
        kg = k[k["label"] == "GCM"]
        print(f"{x:<20}{n:>6}{eps:>5g}  {rung:<44}{d_txt:<24}{o_txt:<38}"
              f"{_fmt(kp.iloc[0]) if len(kp) else '':<24}"
              f"{_fmt(kg.iloc[0]) if len(kg) else '':<20}")
    if bad:
        print(f"\n!!! LEVEL: the default path's null-control rejection rate is above "
              f"{flag_level} in {len(bad)} cell(s):", flush=True)
        for b in bad:
            print("!!!   X = %s, n = %d, epsilon = %g, assume=%s: %s" % b, flush=True)
    return bad


def check_same_subsamples(sampler, tab, seed):
    """The default path's subsample of (first cell, rep 0) is the one experiments.run drew:
    the non-private GCM statistic recomputed on it equals the stored one."""
    from privci import experiments as E
    from privci.gcm import gcm
    row = tab[(tab["label"] == "GCM") & (tab["rep"] == 0)].iloc[0]
    cell = {"n": int(row["n"]), "x": row["x"]}
    data = sampler(rng=np.random.default_rng(E._seedseq(seed, *E._hash_words(cell), 0)), **cell)
    opts = U.NONPRIVATE
    res = gcm(data.x, data.y, data.z, kernel_sigma=opts["kernel_sigma"],
              ridge_lambda=E._lambda_for(opts["ridge_lambda"], data.n), center=True)
    if not math.isclose(res.statistic, row["statistic"], rel_tol=1e-9, abs_tol=1e-12):
        raise RuntimeError(f"the default path's subsample differs from experiments.run's "
                           f"({res.statistic} != {row['statistic']})")


def main():
    def extra(ap):
        ap.add_argument("data", help="path of concrete.csv (e.g. ../shared/data/concrete.csv)")
        ap.add_argument("--n", type=int, nargs="+", default=None,
                        help="subsample sizes (default 100 200 400 700 1030; --quick 100 300 "
                             "and 1030 for the default path)")
        ap.add_argument("--features", type=int, default=None,
                        help="use the first k features as X (default all 8; --quick 2)")
    args = U.parse_args("Figure 5 (Concrete data)", extra)
    from privci import experiments, simulate

    table, names = scaled_table(args.data)
    sampler = simulate.TableSubsampler(table, names, y="strength", bounds=(1.0,) * len(names))
    features = [c for c in names if c != "strength"]
    N = table.shape[0]
    if args.quick:
        reps = args.reps or 5
        ns = args.n or [100, 300, N]
        features = features[:args.features or 2]
        eps_krr = [4.0, 64.0]
        ns_null = [ns[-1]]
    else:
        reps = args.reps or 500
        ns = args.n or [100, 200, 400, 700, N]
        features = features[:args.features or len(features)]
        eps_krr = DEFAULT_EPSILONS
        # with --n: the null at n >= 400 only (below, the default path refuses at every
        # epsilon of the grid, so its null rate is 0 by construction)
        ns_null = [100, 400, N] if args.n is None else ([n for n in ns if n >= 400] or ns)
    grid = {"n": ns, "x": features, "epsilon": eps_krr}
    eps_null = [16.0, 64.0] if not args.quick else [64.0]
    grid_null = {"n": ns_null, "x": features, "epsilon": eps_null, "permute_x": [True]}
    reps_null = args.reps or (5 if args.quick else 200)
    tests = [{"test": "privgcm", "label": "PrivGCM", "center_share": CENTER_SHARE, **U.PRIVATE},
             {"test": "gcm", "label": "GCM", "center": True, **U.NONPRIVATE}]
    tests_null = tests + [{"test": "privgcm", "label": "PrivGCM, uncentred", **U.PRIVATE}]
    with U.Timer() as tm:
        tab = experiments.run(tests, grid, n_reps=reps, data=sampler,
                              out=U.csv_path(args, "fig5"), **U.run_kwargs(args))
        tnull = experiments.run(tests_null, grid_null, n_reps=reps_null, data=sampler,
                                out=U.csv_path(args, "fig5null"), **U.run_kwargs(args))
    import pandas as pd
    U.report("fig5", pd.concat([tab, tnull]), tm, args)
    summ = experiments.summarise(tab)
    snull = experiments.summarise(tnull)
    U.save_summary(summ, args, "fig5")
    U.save_summary(snull, args, "fig5null")

    # the default path on the same subsamples (same seed, cells and reps)
    check_same_subsamples(sampler, tab, args.seed)
    with U.Timer() as tmd:
        tdef = run_default(sampler, [{"n": n, "x": x} for n in ns for x in features],
                           eps_krr, n_reps=reps, seed=args.seed,
                           out=U.csv_path(args, "fig5_default"))
        tdnull = run_default(sampler, [{"n": n, "x": x, "permute_x": True}
                                       for n in ns_null for x in features],
                             eps_null, n_reps=reps_null, seed=args.seed,
                             out=U.csv_path(args, "fig5_default_null"))
    U.report("fig5_default", pd.concat([tdef, tdnull]), tmd, args)
    sdef = summarise_default(tdef)
    sdnull = summarise_default(tdnull)
    U.save_summary(sdef, args, "fig5_default")
    U.save_summary(sdnull, args, "fig5_default_null")
    print(f"\nseed {args.seed}; {reps} subsamples per point ({reps_null} for the null); "
          f"z_center = {Z_CENTER:g}, z_scale = {Z_SCALE:g}; rate [Wilson 95%]; "
          "fs = fail-safe count")
    print_comparison(sdef, summ, "Power: default path (privgcm, assume=rung) vs KRR")
    print_comparison(sdnull, snull, "Null control (X permuted within the subsample)",
                     flag_level=0.08)
    plot(summ, snull, args, grid["x"], reps, reps_null)


def plot(summ, snull, args, features, reps, reps_null):
    plt = U.setup_matplotlib()
    ncol = 4 if len(features) > 2 else len(features)
    nrow = math.ceil(len(features) / ncol)
    fig, axes = plt.subplots(nrow, ncol, figsize=(3 * ncol, 2.6 * nrow), sharey=True,
                             squeeze=False)
    styles = {1.0: ":", 4.0: "--", 16.0: "-", 64.0: "-."}
    for ax, feat in zip(axes.ravel(), features):
        s = summ[summ["x"] == feat]
        g = s[s["label"] == "GCM"]
        U.band(ax, g["n"], g, "GCM", U.COLOURS["GCM"])
        for eps, gp in s[s["label"] == "PrivGCM"].groupby("epsilon"):
            U.band(ax, gp["n"], gp, f"PrivGCM, eps = {eps:g}", U.COLOURS["PrivGCM"],
                   linestyle=styles.get(eps, "-"))
        sn = snull[snull["x"] == feat]
        for lab, mk, col in (("GCM", "x", "black"), ("PrivGCM", "^", "black"),
                             ("PrivGCM, uncentred", "v", "tab:red")):
            g0 = sn[sn["label"] == lab]
            ax.plot(g0["n"], g0["rate"], mk, color=col, ms=5, ls="none",
                    label=f"{lab}, permuted X (null)" + ("" if lab == "GCM" else
                                                          f", eps = {g0['epsilon'].max():g}"))
        ax.axhline(0.05, color="grey", ls="--", lw=1)
        ax.set_title(f"X = {feat}", fontsize=9)
        ax.set_xlabel("subsample size n", fontsize=8)
    for ax in axes.ravel()[len(features):]:
        ax.axis("off")
    axes[0, 0].set_ylabel("rejection rate")
    handles, labels = axes[0, 0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=4, fontsize=7, frameon=False)
    fig.suptitle(f"Concrete data: Y = strength, Z = the other 7 features; {reps} subsamples "
                 f"per point ({reps_null} for the permuted-X null control); centred tests",
                 fontsize=10)
    U.finish(fig, U.png_path(args, "fig5_concrete"), rect=(0, 0.07, 1, 1))


if __name__ == "__main__":
    main()
