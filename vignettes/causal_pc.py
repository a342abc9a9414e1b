# %% [markdown]
# # Private causal discovery: PC with PrivGCM under one privacy budget
#
# Issue 14: the **per-test path** (``method="per-test"``; since issue 24 ``pc``'s
# default is one release of the table, measured in ``release_once_pc.py``).
# ``privci.causal.pc(..., method="per-test")`` runs PC-stable with every conditional
# independence test a PrivGCM release charged to one ``PrivacyBudget`` (OpenDP
# privacy filter, basic composition of pure DP), and splits the total epsilon
# over the tests by a public rule (``split="levels"``: each conditioning order
# gets an equal share of what remains, spread evenly over its tests).
#
# Simulation: random DAGs on p = 6 nodes (Erdos-Renyi, expected degree 2,
# random causal order), a nonlinear additive-noise SEM
# X_j = sum_k w_jk g_jk(X_k) + N(0, 1), g in {tanh(1.5 x), sin(x), x, x^2 - 1}
# (a "linear" SEM uses g(x) = x only), |w| ~ U(0.5, 1.5) with random signs.
# Every node is standardised with its mean and standard deviation from an
# independent pilot draw of the same SEM (public: the design, not the
# analysed data), so bounds = 4 and centres = 0 for every column.
#
# Methods on the same data sets: private PC at total epsilon in {1, 10, 100}
# (PrivGCM, ridge_lambda = 5, kernel_sigma = 1, random Fourier features
# (256 pairs) above n = 2000); non-private PC with the GCM (ridge_lambda =
# 10 / n, the same kernel) through the same PC code.  Metrics against the
# true DAG: adjacency F1 of the skeleton, and the structural Hamming distance
# (SHD) between the estimated and true CPDAGs (node pairs whose edge differs:
# missing, extra or differently oriented).  Monte Carlo intervals: mean +-
# 1.96 standard errors over the graphs.
#
#     python vignettes/causal_pc.py ../shared/data/concrete.csv            # the table (50 graphs)
#     python vignettes/causal_pc.py ../shared/data/concrete.csv --quick    # CI smoke run, < 1 min
#     python vignettes/causal_pc.py DATA --graphs 10 --n 10000 --sem nonlinear linear
#
# Concrete data: PC on the 9 columns, each mapped affinely from its public
# range to [-1, 1] (the ranges of fig5_concrete.py), bounds 1, centres 0,
# kernel_sigma 0.5, at a stated total epsilon, next to non-private PC.

# %%
import vignette_utils as U  # first: sets one thread per process before numpy loads

import math
import time

import numpy as np

U.on_path()

GS = [(lambda x: np.tanh(1.5 * x)), np.sin, (lambda x: x), (lambda x: x * x - 1.0)]
G_NAMES = ["tanh(1.5x)", "sin", "x", "x^2-1"]


def random_dag(p, rng, degree=2.0):
    """Adjacency matrix A (A[k, j] = 1: k -> j) of an Erdos-Renyi DAG, random order."""
    order = rng.permutation(p)
    prob = min(1.0, degree / (p - 1))
    a = np.zeros((p, p), dtype=bool)
    for u in range(p):
        for v in range(u + 1, p):
            if rng.uniform() < prob:
                a[order[u], order[v]] = True
    return a


def sem(a, rng, sem_kind):
    """Functions and weights of an additive-noise SEM on the DAG ``a``."""
    p = a.shape[0]
    w = np.where(a, rng.uniform(0.5, 1.5, size=(p, p)) * rng.choice([-1, 1], size=(p, p)), 0.0)
    g = rng.integers(0, len(GS), size=(p, p)) if sem_kind == "nonlinear" else np.full((p, p), 2)
    return w, g


def topo(a):
    p, seen, out = a.shape[0], set(), []
    while len(out) < p:
        for j in range(p):
            if j not in seen and all(k in seen for k in np.flatnonzero(a[:, j])):
                seen.add(j)
                out.append(j)
    return out


def draw(a, w, g, n, rng):
    p = a.shape[0]
    x = np.zeros((n, p))
    for j in topo(a):
        x[:, j] = rng.normal(size=n)
        for k in np.flatnonzero(a[:, j]):
            x[:, j] += w[k, j] * GS[g[k, j]](x[:, k])
    return x


def true_cpdag(a):
    from privci.causal import _orient
    p = a.shape[0]
    skel = a | a.T
    seps = {}
    for i in range(p):
        for j in range(i + 1, p):
            if not skel[i, j]:
                colliders = {k for k in range(p) if a[i, k] and a[j, k]}
                seps[(i, j)] = tuple(k for k in range(p) if k not in colliders)
    return skel, _orient(skel, seps)


def adjacency_f1(est, true):
    iu = np.triu_indices(est.shape[0], 1)
    e, t = est[iu], true[iu]
    tp = int(np.sum(e & t))
    if e.sum() == 0 and t.sum() == 0:
        return 1.0
    if tp == 0:
        return 0.0
    prec, rec = tp / e.sum(), tp / t.sum()
    return 2 * prec * rec / (prec + rec)


def shd(g_est, g_true):
    p = g_est.shape[0]
    return sum(1 for i in range(p) for j in range(i + 1, p)
               if (g_est[i, j], g_est[j, i]) != (g_true[i, j], g_true[j, i]))


def gcm_test(lam_of_n, rff, kernel_sigma, center=False):
    """A non-private GCM in PC's test interface (the run's budget is ignored by it)."""
    import privci

    def test(x, y, z, *, epsilon, rng, **_):
        opts = {"ridge_lambda": lam_of_n(len(x)), "kernel_sigma": kernel_sigma}
        if rff:
            opts.update(U.RFF)
        if center:
            opts["center"] = True
        return privci.gcm(x, y, z, **opts)
    test.__name__ = "gcm (non-private)"
    return test


def run_simulation(args):
    import pandas as pd
    from privci.causal import pc

    rows = []
    root = np.random.SeedSequence(args.seed)
    for sem_kind in args.sem:
        for n in args.n:
            rff = n > args.exact_max_n
            if args.regression == "krr":   # the paper's mechanism
                priv_opts = {"regression": "krr", "ridge_lambda": 5.0, "kernel_sigma": 1.0,
                             **(U.RFF if rff else {})}
            else:                           # the default: the released spline fit; the data
                priv_opts = {"z_center": 0.0, "z_scale": 1.0}   # are on a public unit scale
            nonpriv = gcm_test(lambda m: 10.0 / m, rff, 1.0)
            for gi, ss in enumerate(root.spawn(args.graphs)):
                g_rng, pilot_rng, data_rng, noise_rng = (np.random.default_rng(s)
                                                         for s in ss.spawn(4))
                a = random_dag(args.nodes, g_rng)
                w, g = sem(a, g_rng, sem_kind)
                pilot = draw(a, w, g, 20000, pilot_rng)
                mu, sd = pilot.mean(axis=0), pilot.std(axis=0)
                x = (draw(a, w, g, n, data_rng) - mu) / sd
                skel, cp = true_cpdag(a)
                methods = [("GCM (non-private)", math.inf, nonpriv, {})]
                methods += [(f"PrivGCM eps={e:g}", e, "privgcm", priv_opts) for e in args.eps]
                for name, eps, test, opts in methods:
                    t0 = time.perf_counter()
                    res = pc(x, epsilon=1e9 if eps == math.inf else eps, bounds=4.0,
                             centers=0.0, alpha=0.05, test=test, rng=noise_rng,
                             method="per-test", **opts)
                    secs = time.perf_counter() - t0
                    rows.append({"sem": sem_kind, "n": n, "graph": gi, "method": name,
                                 "epsilon": eps, "true_edges": int(skel.sum() // 2),
                                 "est_edges": int(res.adjacency.sum() // 2),
                                 "f1": adjacency_f1(res.adjacency, skel),
                                 "shd": shd(res.directed, cp), "n_tests": res.n_tests,
                                 "spent": res.budget.spent if eps != math.inf else float("nan"),
                                 "seconds": secs})
                if not args.no_progress:
                    done = rows[-1]
                    print(f"  {sem_kind} n={n} graph {gi + 1}/{args.graphs} "
                          f"({done['seconds']:.1f}s last)", flush=True)
    return pd.DataFrame(rows)


def summarise(df):
    import pandas as pd
    out = []
    for (sem_kind, n, method, eps), d in df.groupby(["sem", "n", "method", "epsilon"],
                                                    sort=False):
        g = len(d)
        f1m, f1s = d["f1"].mean(), d["f1"].std(ddof=1) if g > 1 else float("nan")
        shm, shs = d["shd"].mean(), d["shd"].std(ddof=1) if g > 1 else float("nan")
        out.append({"sem": sem_kind, "n": n, "method": method, "epsilon": eps, "graphs": g,
                    "f1": f1m, "f1_lo": f1m - 1.96 * f1s / math.sqrt(g),
                    "f1_hi": f1m + 1.96 * f1s / math.sqrt(g),
                    "shd": shm, "shd_lo": shm - 1.96 * shs / math.sqrt(g),
                    "shd_hi": shm + 1.96 * shs / math.sqrt(g),
                    "tests": d["n_tests"].mean(), "max_spent": d["spent"].max(),
                    "seconds": d["seconds"].sum()})
    return pd.DataFrame(out)


def plot(summ, args):
    plt = U.setup_matplotlib()
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for (sem_kind, n), s in summ.groupby(["sem", "n"], sort=False):
        priv = s[np.isfinite(s["epsilon"])].sort_values("epsilon")
        base = s[~np.isfinite(s["epsilon"])]
        for ax, col in zip(axes, ["f1", "shd"]):
            line = ax.errorbar(priv["epsilon"], priv[col],
                               yerr=[priv[col] - priv[col + "_lo"], priv[col + "_hi"] - priv[col]],
                               marker="o", capsize=3, label=f"private PC, {sem_kind}, n={n}")
            if len(base):
                ax.axhline(base[col].iloc[0], linestyle="--", color=line[0].get_color(),
                           label=f"non-private PC (GCM), {sem_kind}, n={n}")
    for ax, lab in zip(axes, ["adjacency F1", "SHD (CPDAG)"]):
        ax.set_xscale("log")
        ax.set_xlabel("total epsilon of the PC run")
        ax.set_ylabel(lab)
    axes[0].set_ylim(-0.02, 1.02)
    axes[0].legend(fontsize=7)
    fig.suptitle(f"Private PC on random {args.nodes}-node DAGs ({args.graphs} graphs, "
                 "mean and 95% Monte Carlo interval)", fontsize=10)
    U.finish(fig, U.png_path(args, "causal_pc_simulation"), rect=(0, 0, 1, 0.94))


def run_concrete(args):
    import pandas as pd
    from fig5_concrete import scaled_table
    from privci.causal import pc

    table, names = scaled_table(args.data)
    if args.quick:
        table = table[np.random.default_rng(args.seed).permutation(len(table))[:400]]
    rows = []
    rng = np.random.default_rng(args.seed + 1)
    # columns mapped from public ranges to [-1, 1]: public centre 0, scale 0.5
    opts = ({"regression": "krr", "ridge_lambda": 5.0, "kernel_sigma": 0.5}
            if args.regression == "krr" else {"z_center": 0.0, "z_scale": 0.5})
    for name, eps, test, o in [("GCM (non-private)", math.inf,
                                gcm_test(lambda m: 10.0 / m, False, 0.5, center=True), {}),
                               (f"PrivGCM eps={args.concrete_eps:g}", args.concrete_eps,
                                "privgcm", opts)]:
        t0 = time.perf_counter()
        res = pc(table, epsilon=1e9 if eps == math.inf else eps, bounds=1.0, centers=0.0,
                 alpha=0.05, test=test, rng=rng, method="per-test", **o)
        edges = "; ".join(f"{names[a]} {m} {names[b]}" for a, m, b in res.edges())
        rows.append({"method": name, "epsilon": eps, "n": len(table),
                     "edges": int(res.adjacency.sum() // 2), "tests": res.n_tests,
                     "spent": res.budget.spent if eps != math.inf else float("nan"),
                     "seconds": time.perf_counter() - t0, "cpdag": edges})
        print(f"[concrete] {name}: {edges or 'no edges'}", flush=True)
        if eps != math.inf and args.show_ledger:
            print(res.budget.format_ledger())
    return pd.DataFrame(rows)


def main():
    def extra(ap):
        ap.add_argument("data", help="path to concrete.csv")
        ap.add_argument("--graphs", type=int, default=None, help="DAGs per setting (default 50)")
        ap.add_argument("--n", type=int, nargs="+", default=None, help="sample sizes")
        ap.add_argument("--eps", type=float, nargs="+", default=None, help="total epsilons")
        ap.add_argument("--nodes", type=int, default=None, help="nodes per DAG (default 6)")
        ap.add_argument("--sem", nargs="+", default=None, choices=["nonlinear", "linear"])
        ap.add_argument("--concrete-eps", type=float, default=100.0,
                        help="total epsilon of the private PC on the Concrete data")
        ap.add_argument("--show-ledger", action="store_true", help="print the Concrete ledger")
        ap.add_argument("--skip-concrete", action="store_true")
        ap.add_argument("--regression", choices=["spline", "krr"], default="spline",
                        help="PrivGCM's regression: the default released spline fit, or krr "
                             "(the paper's mechanism)")

    args = U.parse_args("Private PC: adjacency F1 and SHD against total epsilon", extra)
    q = args.quick
    args.graphs = args.graphs or (2 if q else 50)
    args.n = args.n or ([1000] if q else [10000])
    args.eps = args.eps or ([10.0] if q else [1.0, 10.0, 100.0])
    args.nodes = args.nodes or (5 if q else 6)
    args.sem = args.sem or ["nonlinear"]
    with U.Timer() as timer:
        df = run_simulation(args)
        df.to_csv(U.csv_path(args, "causal_pc_runs"), index=False, float_format="%.6g")
        summ = summarise(df)
        print(U.save_summary(summ, args, "causal_pc"))
        print(summ.drop(columns=["seconds"]).to_string(index=False, float_format="%.3f"))
        plot(summ, args)
        if not args.skip_concrete:
            conc = run_concrete(args)
            print(U.save_summary(conc, args, "causal_concrete"))
    print(f"[causal_pc] wall={timer.wall:.1f}s cpu={timer.cpu:.1f}s out={args.out_dir}",
          flush=True)


if __name__ == "__main__":
    main()
