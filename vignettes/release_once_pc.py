# %% [markdown]
# # Release once, test many: level of `ReleasedTable.test` and private PC on one release
#
# Issue 24.  ``privci.release`` publishes the Gram matrices of per-column hat features
# once (epsilon-DP); every CI test is post-processing.  Two studies:
#
# * ``level``: null rejection rate at alpha = 0.05 of ``.test`` on small null designs
#   (linear / nonlinear / heteroscedastic, |S| = 0, 1, 2), a table of V = 5 columns
#   (unused columns are independent noise), n = 10^4, eps in {1, 5, 20}, with 95%
#   Monte Carlo (Wilson) intervals.
# * ``pc``: adjacency F1 and precision of ``privci.causal.pc(method="release")`` on random
#   5-node DAGs (Erdos-Renyi, expected degree 2), linear and nonlinear additive SEMs
#   (g in {tanh(1.5x), sin, x, x^2 - 1}, |w| ~ U(0.5, 1.5)), n = 10^4, columns standardised
#   with constants from an independent pilot draw (public), bounds = 4.
#
#     python vignettes/release_once_pc.py --quick                 # smoke run, < 1 min
#     python vignettes/release_once_pc.py level --reps 200
#     python vignettes/release_once_pc.py pc --graphs 12
#
# Single process, numpy noise (rng given): simulation only.

# %%
from __future__ import annotations

import argparse
import math
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))

import privci  # noqa: E402
from privci.causal import pc  # noqa: E402

GS = [lambda x: np.tanh(1.5 * x), np.sin, lambda x: x, lambda x: x * x - 1.0]


def wilson(k, m, zq=1.96):
    if m == 0:
        return (math.nan, math.nan)
    p = k / m
    den = 1 + zq * zq / m
    mid = (p + zq * zq / (2 * m)) / den
    half = zq * math.sqrt(p * (1 - p) / m + zq * zq / (4 * m * m)) / den
    return max(0.0, mid - half), min(1.0, mid + half)


# %% null designs: columns x, y, then S, padded with noise to V = 5

def null_design(kind, s, n, rng):
    z = rng.normal(size=(n, s))
    e1, e2 = rng.normal(size=n), rng.normal(size=n)
    if kind == "linear":
        coef_x = np.array([1.0, -0.7][:s])
        coef_y = np.array([0.8, 0.9][:s])
        x = z @ coef_x + e1 if s else e1
        y = z @ coef_y + e2 if s else e2
    elif kind == "nonlinear":
        if s == 0:
            x, y = np.tanh(2 * e1) * 1.5, e2 ** 2 - 1
        else:
            x = np.tanh(1.5 * z[:, 0]) + (np.sin(z[:, 1]) if s > 1 else 0) + e1
            y = z[:, 0] ** 2 - 1 + (0.7 * z[:, 1] if s > 1 else 0) + e2
    elif kind == "hetero":
        zz = z[:, 0] if s else rng.normal(size=n)
        x, y = (0.3 + np.abs(zz)) * e1, (0.3 + np.abs(zz)) * e2
        if s == 2:
            x = x + 0.5 * z[:, 1]
    else:
        raise ValueError(kind)
    cols = [x, y] + [z[:, k] for k in range(s)]
    while len(cols) < 5:
        cols.append(rng.normal(size=n))
    X = np.column_stack(cols)
    return X


def design_scales(kind, s):
    """Public standardisation constants from a pilot draw (not the analysed data)."""
    X = null_design(kind, s, 200_000, np.random.default_rng(12345))
    return X.mean(axis=0), X.std(axis=0)


def run_level(args):
    rows = []
    for kind in args.kinds:
        for s in args.sizes:
            mu, sd = design_scales(kind, s)
            for eps in args.eps:
                for blocks in args.blocks:
                    rng = np.random.default_rng(1000 + 7 * s + int(eps))
                    rej, untrusted, t0 = 0, 0, time.time()
                    for r in range(args.reps):
                        X = (null_design(kind, s, args.n, rng) - mu) / sd
                        tab = privci.release(X, epsilon=eps, bounds=4.0, rng=rng,
                                             blocks=blocks, knots=args.knots)
                        res = tab.test(0, 1, list(range(2, 2 + s)))
                        rej += res.pvalue <= 0.05
                        untrusted += not res.trusted
                    lo, hi = wilson(rej, args.reps)
                    rows.append((kind, s, eps, blocks, rej / args.reps, lo, hi,
                                 untrusted / args.reps))
                    print(f"{kind:9s} |S|={s} eps={eps:<4g} blocks={blocks:<2d} "
                          f"rejection {rej / args.reps:.3f} [{lo:.3f}, {hi:.3f}]  "
                          f"untrusted {untrusted / args.reps:.2f}  ({time.time() - t0:.0f} s)",
                          flush=True)
    print("\n| design | S | eps | blocks | rejection at 0.05 | 95% MC interval | untrusted |")
    print("|---|---|---|---|---|---|---|")
    for kind, s, eps, blocks, rate, lo, hi, un in rows:
        print(f"| {kind} | {s} | {eps:g} | {blocks} | {rate:.3f} | [{lo:.3f}, {hi:.3f}] | "
              f"{un:.2f} |")
    return rows


# %% random DAGs

def random_dag(p, rng, degree=2.0):
    order = rng.permutation(p)
    prob = min(1.0, degree / (p - 1))
    a = np.zeros((p, p), dtype=bool)
    for u in range(p):
        for v in range(u + 1, p):
            if rng.uniform() < prob:
                a[order[u], order[v]] = True
    return a


def sample_sem(a, w, g, n, rng):
    p = a.shape[0]
    x = np.zeros((n, p))
    done = []
    while len(done) < p:
        for j in range(p):
            if j not in done and all(k in done for k in np.flatnonzero(a[:, j])):
                x[:, j] = rng.normal(size=n)
                for k in np.flatnonzero(a[:, j]):
                    x[:, j] += w[k, j] * GS[g[k, j]](x[:, k])
                done.append(j)
    return x


def f1_precision(est, true):
    iu = np.triu_indices(est.shape[0], 1)
    e, t = est[iu], true[iu]
    tp = int(np.sum(e & t))
    prec = tp / e.sum() if e.sum() else 1.0
    rec = tp / t.sum() if t.sum() else 1.0
    f1 = 0.0 if prec + rec == 0 else 2 * prec * rec / (prec + rec)
    return f1, prec


def run_pc(args):
    out = []
    for kind in args.sems:
        for eps in args.eps:
            for method in args.methods:
                rng = np.random.default_rng(77)
                f1s, precs, t0 = [], [], time.time()
                for gi in range(args.graphs):
                    a = random_dag(args.p, rng)
                    w = np.where(a, rng.uniform(0.5, 1.5, (args.p, args.p))
                                 * rng.choice([-1, 1], (args.p, args.p)), 0.0)
                    g = (rng.integers(0, 4, (args.p, args.p)) if kind == "nonlinear"
                         else np.full((args.p, args.p), 2))
                    pilot = sample_sem(a, w, g, 50_000, rng)
                    mu, sd = pilot.mean(axis=0), pilot.std(axis=0)
                    X = (sample_sem(a, w, g, args.n, rng) - mu) / sd
                    kw = dict(epsilon=eps, bounds=4.0, rng=rng)
                    if method == "release":
                        res = pc(X, method="release", **kw)
                    else:
                        res = pc(X, **kw)
                    f1, prec = f1_precision(res.adjacency, a | a.T)
                    f1s.append(f1)
                    precs.append(prec)
                m, se = np.mean(f1s), np.std(f1s, ddof=1) / math.sqrt(len(f1s))
                mp, sep = np.mean(precs), np.std(precs, ddof=1) / math.sqrt(len(precs))
                out.append((kind, eps, method, m, se, mp, sep))
                print(f"{kind:9s} eps={eps:<4g} {method:8s} F1 {m:.2f} +- {1.96 * se:.2f}  "
                      f"precision {mp:.2f} +- {1.96 * sep:.2f}  ({time.time() - t0:.0f} s)",
                      flush=True)
    print(f"\n| SEM | eps | method | adjacency F1 (+- 1.96 se) | precision | graphs = {args.graphs},"
          f" n = {args.n} |")
    print("|---|---|---|---|---|---|")
    for kind, eps, method, m, se, mp, sep in out:
        print(f"| {kind} | {eps:g} | {method} | {m:.2f} +- {1.96 * se:.2f} | "
              f"{mp:.2f} +- {1.96 * sep:.2f} | |")
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("study", nargs="?", choices=["level", "pc", "both"], default="both")
    ap.add_argument("--quick", action="store_true", help="smoke run (< 1 min)")
    ap.add_argument("--reps", type=int, default=200)
    ap.add_argument("--graphs", type=int, default=12)
    ap.add_argument("--n", type=int, default=10_000)
    ap.add_argument("--p", type=int, default=5)
    ap.add_argument("--eps", type=float, nargs="+", default=[1.0, 5.0, 20.0])
    ap.add_argument("--blocks", type=int, nargs="+", default=[1])
    ap.add_argument("--knots", type=int, default=8)
    ap.add_argument("--kinds", nargs="+", default=["linear", "nonlinear", "hetero"])
    ap.add_argument("--sizes", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--sems", nargs="+", default=["linear", "nonlinear"])
    ap.add_argument("--methods", nargs="+", default=["release", "per-test"])
    args = ap.parse_args(argv)
    if args.quick:
        args.reps, args.graphs, args.n = 10, 2, 3000
        args.eps, args.kinds, args.sizes = [5.0], ["linear", "nonlinear"], [0, 1]
        args.methods = ["release"]
    if args.study in ("level", "both"):
        run_level(args)
    if args.study in ("pc", "both"):
        run_pc(args)


if __name__ == "__main__":
    main()
