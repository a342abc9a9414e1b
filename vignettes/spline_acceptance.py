# %% [markdown]
# # PrivGCM's defaults: level grid, power bars and the power frontier (issue 13)
#
# Runs the default PrivGCM (released additive spline regression, 20 noisy block sums)
# and, for comparison, the paper's mechanism (`regression="krr"`, one noisy product per
# row, lambda = 5, random features above n = 2000) on
#
# * the **level grid**: the paper's design, s in {1, 2, 4, 8}, d in {1, 5}, epsilon in
#   {1, 2, 7}, and the confounded design (`simulate.confounded_data`) at epsilon in
#   {1, 2, 7}, n = 10^4; and d = 1, s = 2 at n = 10^3 and 10^5;
# * the **power bars**: n = 10^4, d = 1, s = 2: (epsilon, beta) = (7, 0.25) and (2, 1);
# * the **frontier**: power against n and epsilon for both mechanisms (beta = 0.25 and 1).
#
# Public parameters come from the design: 4-sd bounds, z_scale = the known sd of Z
# (2 in the paper's design, 1 in the confounded one).  Seeded numpy noise (simulation).
# Writes `results/spline_acceptance.csv` (one row per replication) and
# `results/spline_acceptance_summary.csv` (rates with 95% Wilson intervals), and
# `spline_frontier.png`.
#
#     python vignettes/spline_acceptance.py                 # 500 replications (~1 h on 2 cores)
#     python vignettes/spline_acceptance.py --quick         # CI smoke run (seconds)
#     python vignettes/spline_acceptance.py --part level    # one part: level, power, frontier

# %%
import os
for _v in ("NUMBA_NUM_THREADS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")

import argparse
import csv
import math
import multiprocessing as mp
import time
import warnings

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))

ap = argparse.ArgumentParser(description=__doc__)
ap.add_argument("--quick", action="store_true")
ap.add_argument("--reps", type=int, default=500)
ap.add_argument("--frontier-reps", type=int, default=100)
ap.add_argument("--workers", type=int, default=2)
ap.add_argument("--part", choices=("all", "level", "power", "frontier", "auto", "autolevel"),
                default="all",
                help="auto: the defaults as a user gets them, z_center and z_scale released "
                     "privately ('auto', 10%% of epsilon), on a subset of the level grid and "
                     "the power bars; autolevel: the whole level grid with them")
ap.add_argument("--auto-reps", type=int, default=300)
ap.add_argument("--seed", type=int, default=20261126)
ap.add_argument("--out-dir", default=None,
                help="default: vignettes/results (a temporary directory with --quick)")
args, _ = ap.parse_known_args()
if args.out_dir is None:
    import tempfile
    args.out_dir = (tempfile.mkdtemp(prefix="privci-spline-") if args.quick
                    else os.path.join(HERE, "results"))


# %%
def draw(design, n, beta, rng):
    from privci import simulate
    if design == "confounded":
        return simulate.confounded_data(n, beta=beta, rng=rng), 1.0
    s, d = design
    return simulate.paper_data(n, d=d, s=s, beta=beta, rng=rng), 2.0


def run_one(task):
    """One replication: one data set, every (mechanism, epsilon) of the task."""
    import privci
    warnings.simplefilter("ignore")
    part, design, n, beta, epsilons, mechanisms, rep, seed = task
    rng = np.random.default_rng(seed)
    dat, zs = draw(design, n, beta, rng)
    out = []
    for mech in mechanisms:
        for eps in epsilons:
            kw = dict(epsilon=eps, x_bound=dat.x_bound, y_bound=dat.y_bound, rng=rng)
            if part not in ("auto", "autolevel"):   # public centre and scale of z
                kw.update(z_center=0.0, z_scale=zs)
            if mech == "paper":
                kw.update(regression="krr", n_blocks=None, ridge_lambda=5.0, kernel_sigma=0.5)
                if n > 2000:
                    kw.update(kernel_approximation="rff", n_features=256, feature_rng=rng)
            elif np.ndim(dat.z) > 1 and dat.z.shape[1] > 1:
                kw.update(assume="additive")   # several columns: the full fit takes one
            t0 = time.perf_counter()
            try:
                pv = privci.privgcm(dat.x, dat.y, dat.z, **kw).pvalue
            except privci.UnresolvableDesignError:
                pv = 1.0     # refused before anything was spent: counted as not rejecting
            out.append((part, str(design), n, beta, eps, mech, rep, pv,
                        time.perf_counter() - t0))
    return out


# %%
def tasks():
    reps = 4 if args.quick else args.reps
    freps = 2 if args.quick else args.frontier_reps
    n4 = 1000 if args.quick else 10_000
    ss = np.random.SeedSequence(args.seed)
    seq = iter(ss.spawn(100_000))
    out = []
    eps3 = (1.0, 2.0, 7.0)
    if args.part == "autolevel":
        designs = [(s, d) for s in (1, 2, 4, 8) for d in (1, 5)] + ["confounded"]
        for design in designs:
            for r in range(reps):
                out.append(("autolevel", design, n4, 0.0, eps3, ("spline",), r,
                            next(seq).generate_state(1)[0]))
        for n in ((300, 3000) if args.quick else (1000, 100_000)):
            for r in range(reps):
                out.append(("autolevel", (2, 1), n, 0.0, eps3, ("spline",), r,
                            next(seq).generate_state(1)[0]))
    if args.part in ("all", "level"):
        designs = [(s, d) for s in (1, 2, 4, 8) for d in (1, 5)] + ["confounded"]
        for design in designs:
            for r in range(reps):
                out.append(("level", design, n4, 0.0, eps3, ("spline",), r,
                            next(seq).generate_state(1)[0]))
        for n in ((300, 3000) if args.quick else (1000, 100_000)):
            for r in range(reps):
                out.append(("level", (2, 1), n, 0.0, eps3, ("spline",), r,
                            next(seq).generate_state(1)[0]))
    if args.part == "auto":
        areps = 4 if args.quick else args.auto_reps
        for design in [(1, 5), (2, 1), (8, 5), "confounded"]:
            for r in range(areps):
                out.append(("auto", design, n4, 0.0, eps3, ("spline",), r,
                            next(seq).generate_state(1)[0]))
        for eps, beta in ((7.0, 0.25), (2.0, 1.0)):
            for r in range(areps):
                out.append(("auto", (2, 1), n4, beta, (eps,), ("spline",), r,
                            next(seq).generate_state(1)[0]))
    if args.part in ("all", "power"):
        for eps, beta in ((7.0, 0.25), (2.0, 1.0)):
            for r in range(reps):
                out.append(("power", (2, 1), n4, beta, (eps,), ("spline",), r,
                            next(seq).generate_state(1)[0]))
    if args.part in ("all", "frontier"):
        ns = (300, 1000) if args.quick else (1000, 3162, 10_000, 31_623, 100_000)
        for n in ns:
            for beta in (0.25, 1.0):
                mechs = ("spline", "paper") if n <= 10_000 or args.quick else ("spline",)
                for r in range(freps):
                    out.append(("frontier", (2, 1), n, beta, (0.5, 1.0, 2.0, 7.0), mechs, r,
                                next(seq).generate_state(1)[0]))
    return out


def wilson(k, m, z=1.959964):
    if m == 0:
        return (math.nan, math.nan)
    p = k / m
    den = 1 + z * z / m
    c = (p + z * z / (2 * m)) / den
    h = z * math.sqrt(p * (1 - p) / m + z * z / (4 * m * m)) / den
    return (max(0.0, c - h), min(1.0, c + h))


# %%
if __name__ == "__main__":
    os.makedirs(args.out_dir, exist_ok=True)
    tag = ("_quick" if args.quick else "") + {"auto": "_auto", "autolevel": "_autolevel"}.get(
        args.part, "")
    raw = os.path.join(args.out_dir, f"spline_acceptance{tag}.csv")
    todo = tasks()
    t0 = time.time()
    rows = []
    with mp.get_context("spawn").Pool(max(1, args.workers)) as pool:
        for i, res in enumerate(pool.imap_unordered(run_one, todo, chunksize=4)):
            rows.extend(res)
            if (i + 1) % 500 == 0:
                print(f"{i + 1}/{len(todo)} replications, {time.time() - t0:.0f} s", flush=True)
    with open(raw, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["part", "design", "n", "beta", "epsilon", "mechanism", "rep", "pvalue",
                    "seconds"])
        w.writerows(rows)
    groups = {}
    for part, design, n, beta, eps, mech, rep, p, sec in rows:
        g = groups.setdefault((part, design, n, beta, eps, mech), [0, 0, 0.0])
        g[0] += int(p <= 0.05)
        g[1] += 1
        g[2] += sec
    summ = os.path.join(args.out_dir, f"spline_acceptance{tag}_summary.csv")
    with open(summ, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["part", "design", "n", "beta", "epsilon", "mechanism", "reps", "rejection",
                    "lower95", "upper95", "mean_seconds"])
        for key in sorted(groups, key=str):
            k, m, sec = groups[key]
            lo, hi = wilson(k, m)
            w.writerow(list(key) + [m, f"{k / m:.4f}", f"{lo:.4f}", f"{hi:.4f}",
                                    f"{sec / m:.4f}"])
            print(*key, m, f"{k / m:.3f} [{lo:.3f}, {hi:.3f}]", f"{sec / m:.3f}s")
    print(f"wrote {raw} and {summ} in {time.time() - t0:.0f} s")

    # the frontier figure
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise SystemExit(0)
    fr = {k: v for k, v in groups.items() if k[0] == "frontier"}
    if fr:
        fig, axes = plt.subplots(1, 2, figsize=(10, 4), sharey=True)
        for ax, beta in zip(axes, (0.25, 1.0)):
            for mech, ls in (("spline", "-"), ("paper", "--")):
                for eps, col in zip((0.5, 1.0, 2.0, 7.0), ("C0", "C1", "C2", "C3")):
                    pts = sorted((k[2], v[0] / v[1]) for k, v in fr.items()
                                 if k[3] == beta and k[5] == mech and k[4] == eps)
                    if pts:
                        ax.plot([p[0] for p in pts], [p[1] for p in pts], ls, color=col,
                                marker="o", ms=3,
                                label=f"{'default' if mech == 'spline' else 'paper'}, "
                                      f"eps={eps:g}")
            ax.set_xscale("log")
            ax.set_xlabel("n")
            ax.set_title(f"power, d = 1, s = 2, beta = {beta:g}")
            ax.axhline(0.05, color="grey", lw=0.5)
        axes[0].set_ylabel("rejection rate (alpha = 0.05)")
        axes[1].legend(fontsize=7, ncol=2)
        fig.tight_layout()
        png = os.path.join(HERE if not args.quick else args.out_dir, "spline_frontier.png")
        fig.savefig(png, dpi=110)
        print("wrote", png)
