# %% [markdown]
# # Where PrivGCM's power goes: the default against an oracle, loss by loss (issue 34)
#
# For a grid of designs (one to three columns of z, smooth and non-smooth regressions,
# skewed, heteroscedastic, binary and count x), every cell draws `--reps` data sets with a
# dependence of size `beta` and runs
#
# * **the default**: `privci.privgcm` with public 4-sd windows ("public"; the README
#   design uses the README's own windows) or every bound and centre "auto";
# * **the oracle**: the true E[X | Z] and E[Y | Z], all of epsilon on 10 Laplace block sums
#   of the residual products (clipped to [-1, 1], sensitivity 2) in the window the default
#   used, a t test over the blocks: what a private test of this statistic could reach if
#   learning the regressions cost nothing;
# * **the oracle with one of the default's losses** (read from the default's own result,
#   `res.fit_check`): `share` (only the test's share of epsilon), `scale` (residuals
#   divided by the default's residual scales c), `fitvar` (the default's fit-noise shift V
#   and bias allowance B^2 added to the variance), `blocks` (the default's statistic: its
#   k, and for k = 1 one noisy sum with the released sum of squares), and `all` of them.
#   For "auto" cells, and public cells whose windows privgcm tightened (``tighten``, stop
#   51), `oracle_public` is the oracle in the public window (the window's loss).
#
# Power is the share of data sets rejected at alpha = 0.05 (a fail-safe p = 1 counts as not
# rejecting), with a 95% Wilson interval; `ratio` is default / oracle (for "auto" cells,
# default / oracle_public: the oracle is the one in the public window).
#
#     python vignettes/power_decomposition.py --reps 200            # the grid (hours)
#     python vignettes/power_decomposition.py --quick               # CI smoke run
#     python vignettes/power_decomposition.py --classes readme kink --n 10000 --eps 1 2
#
# Writes `results/power_decomposition.csv` (one row per cell) and prints a markdown table.

# %%
import os
for _v in ("NUMBA_NUM_THREADS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")

import argparse
import math
import multiprocessing as mp
import sys
import warnings

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from level_stress import wilson, write_csv  # noqa: E402  (the level grid's helpers)


# --------------------------------------------------------------------------- designs
# each returns z, x, y and the true E[X | Z], E[Y | Z]; y = E[Y | Z] + beta ex + noise, so
# that the dependence is beta var(ex | z)

def _y(my, ex, beta, rng, n):
    return my + beta * ex + rng.normal(size=n)


def d_readme(n, rng, beta):
    z = rng.normal(size=(n, 1))
    mx, my = np.sin(z[:, 0]), np.cos(z[:, 0])
    ex = rng.normal(size=n)
    return z, mx + ex, _y(my, ex, beta, rng, n), mx, my


def d_kink(n, rng, beta):
    z = rng.normal(size=(n, 1))
    mx, my = 2.0 * np.abs(z[:, 0]), np.sin(z[:, 0])
    ex = rng.normal(size=n)
    return z, mx + ex, _y(my, ex, beta, rng, n), mx, my


def d_hetero(n, rng, beta):
    z = rng.normal(size=(n, 1))
    mx, my = np.tanh(z[:, 0]), z[:, 0] ** 2 / 2.0
    ex = np.exp(0.7 * z[:, 0]) * rng.normal(size=n)
    return z, mx + ex, _y(my, ex, beta, rng, n), mx, my


def d_skewed(n, rng, beta):
    z = rng.normal(size=(n, 1))
    mx, my = np.sin(z[:, 0]), 0.5 * z[:, 0]
    ex = rng.exponential(size=n) - 1.0
    return z, mx + ex, _y(my, ex, beta, rng, n), mx, my


def d_binary_x(n, rng, beta):
    z = rng.normal(size=(n, 1))
    mx = 1.0 / (1.0 + np.exp(-2.0 * z[:, 0]))
    my = np.cos(z[:, 0])
    x = (rng.uniform(size=n) < mx).astype(float)
    ex = x - mx
    return z, x, _y(my, 2.0 * ex, beta, rng, n), mx, my


def d_count_x(n, rng, beta):
    z = rng.normal(size=(n, 1))
    mx = np.exp(0.5 * z[:, 0])
    my = np.tanh(z[:, 0])
    x = rng.poisson(mx).astype(float)
    ex = x - mx
    return z, x, _y(my, ex, beta, rng, n), mx, my


def d_linear2(n, rng, beta):
    z = rng.normal(size=(n, 2))
    mx, my = z[:, 0] + 0.5 * z[:, 1], -0.5 * z[:, 0] + z[:, 1]
    ex = rng.normal(size=n)
    return z, mx + ex, _y(my, ex, beta, rng, n), mx, my


def d_tanh3(n, rng, beta):
    c = np.array([[1.0, 0.5, 0.3], [0.5, 1.0, 0.5], [0.3, 0.5, 1.0]])
    z = rng.normal(size=(n, 3)) @ np.linalg.cholesky(c).T
    mx = np.tanh(z).sum(axis=1)
    my = np.tanh(z[:, 0]) - np.tanh(z[:, 2])
    ex = rng.normal(size=n)
    return z, mx + ex, _y(my, ex, beta, rng, n), mx, my


DESIGNS = {"readme": d_readme, "kink": d_kink, "hetero": d_hetero, "skewed": d_skewed,
           "binary_x": d_binary_x, "count_x": d_count_x, "linear2": d_linear2,
           "tanh3": d_tanh3}
# the dependence of each class (beta), chosen so that the oracle's power at n = 10^4 lies
# between 0.5 and 1 for epsilon 0.5 to 5 on most cells
BETA = {"readme": 0.2, "kink": 0.1, "hetero": 0.2, "skewed": 0.15, "binary_x": 0.15,
        "count_x": 0.1, "linear2": 0.1, "tanh3": 0.1}
# the README's own call (README.md: x_bound=3.5, y_bound=4.5, z on its unit scale)
README_WINDOWS = dict(x_center=0.0, x_bound=3.5, y_center=0.0, y_bound=4.5)


def public_windows(cls, beta):
    """4-sd windows around the design's means (a large public pilot draw)."""
    if cls == "readme":
        return dict(README_WINDOWS)
    _, x, y, _, _ = DESIGNS[cls](200_000, np.random.default_rng(1), beta)
    return dict(x_center=float(x.mean()), x_bound=4.0 * float(x.std()),
                y_center=float(y.mean()), y_bound=4.0 * float(y.std()))


# --------------------------------------------------------------------------- the oracle

def _oracle_p(prod, eps, k, rng, sq_share=0.0, extra_var=0.0, mode=0):
    """p-value of the oracle's test on residual products in [-1, 1] (sensitivity 2)."""
    from privci._private import _t_sf
    from privci._stats import normal_laplace_pvalue
    n = prod.shape[0]
    if k == 1:
        e_s = (1.0 - sq_share) * eps
        e_q = sq_share * eps
        b_s, b_q = 2.0 / e_s, 1.0 / e_q
        s = prod.sum() + rng.laplace(0.0, b_s)
        q = max(float((prod * prod).sum() + rng.laplace(0.0, b_q)), 0.0) + b_q
        return normal_laplace_pvalue(s, math.sqrt(q + extra_var), b_s, mode)
    lab = rng.permutation(np.arange(n) % k)
    sums = np.bincount(lab, weights=prod, minlength=k) + rng.laplace(0.0, 2.0 / eps, k)
    t = sums.sum() / math.sqrt(k * np.var(sums, ddof=1) + extra_var)
    return min(1.0, 2.0 * _t_sf(abs(t), k - 1))


def oracle_products(x, y, mx, my, w, scale=(1.0, 1.0)):
    """Residual products of the true regressions in the window w, divided by ``scale``."""
    u = np.clip((x - w["x_center"]) / w["x_bound"], -1.0, 1.0)
    v = np.clip((y - w["y_center"]) / w["y_bound"], -1.0, 1.0)
    rx = np.clip((u - (mx - w["x_center"]) / w["x_bound"]) / scale[0], -1.0, 1.0)
    ry = np.clip((v - (my - w["y_center"]) / w["y_bound"]) / scale[1], -1.0, 1.0)
    return rx * ry


TIGHTEN = None   # --tighten: privgcm's ``tighten`` on public windows (None: its default)
STATED = {"linear2": "linear", "tanh3": "additive"}   # the model each multi-column class states


def run_one(task):
    import privci
    warnings.simplefilter("ignore")
    cls, n, eps, params, beta, seed, pub = task
    rng = np.random.default_rng(seed)
    z, x, y, mx, my = DESIGNS[cls](n, rng, beta)
    zkw = dict(z_center=0.0, z_scale=1.0)
    if params == "public":
        kw = dict(pub, **zkw)
        if TIGHTEN is not None:
            kw["tighten"] = TIGHTEN
    else:
        kw = dict(x_bound="auto", y_bound="auto", x_center="auto", y_center="auto")
    # several columns of z need a stated model (the default refuses without one)
    from privci._spline import UnresolvableDesignError
    try:
        res = privci.privgcm(x, y, z, epsilon=eps, rng=rng, assume=STATED.get(cls), **kw)
    except UnresolvableDesignError:
        # refused before anything is spent (n epsilon too small for the fit): the default
        # does not reject; the oracle on the public windows (nothing was released), and
        # no decomposition (the default has no split to apply)
        return {"default": False, "failsafe": True, "refused": True,
                "oracle": _oracle_p(oracle_products(x, y, mx, my, pub), eps, 10,
                                    rng) <= 0.05}
    b = res.privacy.bounds
    w = {k_: float(np.ravel(b[k_])[0]) for k_ in ("x_center", "x_bound", "y_center",
                                                   "y_bound")}
    fc = res.fit_check or {}
    parts = fc.get("variance_parts") or {}
    rs = fc.get("residual_scales") or (1.0, 1.0)
    c = (1.0 / rs[0], 1.0 / rs[-1])
    k = int(fc.get("n_blocks", 10))
    sq = float(fc.get("squares_share", 0.0))
    share = 1.0 - float(fc.get("fit_share", 0.0))
    # the default's fit terms in unscaled product units (they are stated for the scaled ones)
    fitvar = (parts.get("shift", 0.0) + parts.get("allowance", 0.0)) * (c[0] * c[1]) ** 2
    failsafe = res.fit_certified is False
    p0 = oracle_products(x, y, mx, my, w)
    out = {"default": res.pvalue <= 0.05, "failsafe": failsafe,
           "oracle": _oracle_p(p0, eps, 10, rng) <= 0.05,
           "share": _oracle_p(p0, share * eps, 10, rng) <= 0.05,
           "scale": _oracle_p(oracle_products(x, y, mx, my, w, c), eps, 10, rng) <= 0.05,
           "fitvar": _oracle_p(p0, eps, 10, rng, extra_var=fitvar) <= 0.05,
           "blocks": _oracle_p(p0, eps, k, rng, sq_share=sq) <= 0.05,
           "all": _oracle_p(oracle_products(x, y, mx, my, w, c), share * eps, k, rng,
                            sq_share=sq, extra_var=fitvar / (c[0] * c[1]) ** 2) <= 0.05}
    if params != "public" or any(abs(w[k_] - pub[k_]) > 1e-12 for k_ in w):
        # "auto" windows, or public ones tightened by privgcm (tighten="auto", stop 51):
        # the oracle is the one in the public window
        out["oracle_public"] = _oracle_p(oracle_products(x, y, mx, my, pub), eps, 10,
                                         rng) <= 0.05
    return out


COLUMNS = ("default", "oracle", "share", "scale", "fitvar", "blocks", "all", "oracle_public")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--classes", nargs="+", default=list(DESIGNS))
    ap.add_argument("--n", nargs="+", type=int, default=[2000, 10_000, 100_000])
    ap.add_argument("--eps", nargs="+", type=float, default=[0.5, 1.0, 2.0, 5.0])
    ap.add_argument("--params", nargs="+", default=["public", "auto"])
    ap.add_argument("--reps", type=int, default=200)
    ap.add_argument("--seed", type=int, default=340_000)
    ap.add_argument("--jobs", type=int, default=max(1, (os.cpu_count() or 1)))
    ap.add_argument("--out", default=os.path.join(
        os.environ.get("PRIVCI_BENCH_OUT", os.path.join(HERE, "results")),
        "power_decomposition.csv"))
    ap.add_argument("--quick", action="store_true", help="CI smoke run: one small cell")
    ap.add_argument("--tighten", choices=["auto", "true", "false"], default=None,
                    help="privgcm's tighten on public windows (default: privgcm's own, "
                         "'auto'); 'false' gives the default before stops 51 and 53")
    ap.add_argument("--no-progress", action="store_true", help="(accepted for run_all.sh)")
    ap.add_argument("--workers", type=int, default=None, help="run_all.sh's name of --jobs")
    args = ap.parse_args(argv)
    global TIGHTEN
    TIGHTEN = {None: None, "auto": "auto", "true": True, "false": False}[args.tighten]
    if "additive2" in args.classes and "additive2" not in DESIGNS:
        # stop 53: plan_accuracy.py's two-column additive design (assume="additive"), on
        # request (the default grid is unchanged)
        from plan_accuracy import d_additive2
        DESIGNS["additive2"], BETA["additive2"] = d_additive2, 0.1
        STATED["additive2"] = "additive"
    if args.workers:
        args.jobs = args.workers
    if args.quick:
        args.classes, args.n, args.eps, args.params, args.reps = (["readme"], [2000], [2.0],
                                                                   ["public", "auto"], 6)
    rows = []
    tasks, keys = [], []
    for cls in args.classes:
        beta = BETA[cls]
        pub = public_windows(cls, beta)
        for n in args.n:
            for eps in args.eps:
                for params in args.params:
                    base = args.seed + 1000 * len(keys)
                    keys.append((cls, n, eps, params, beta))
                    tasks.append([(cls, n, eps, params, beta, base + r, pub)
                                  for r in range(args.reps)])
    flat = [t for ts in tasks for t in ts]
    if args.jobs > 1:
        with mp.get_context("fork").Pool(args.jobs) as pool:
            res = pool.map(run_one, flat, chunksize=4)
    else:
        res = [run_one(t) for t in flat]
    i = 0
    for key, ts in zip(keys, tasks):
        got = res[i:i + len(ts)]
        i += len(ts)
        cls, n, eps, params, beta = key
        row = {"class": cls, "n": n, "epsilon": eps, "params": params, "beta": beta,
               "reps": len(got), "failsafe": sum(g["failsafe"] for g in got) / len(got),
               "refused": sum(bool(g.get("refused")) for g in got) / len(got)}
        for col in COLUMNS:
            vals = [g[col] for g in got if col in g]
            if not vals:
                row[col] = ""
                continue
            kk = int(sum(vals))
            lo, hi = wilson(kk, len(vals))
            row[col] = round(kk / len(vals), 3)
            if col in ("default", "oracle"):
                row[col + "_lo"], row[col + "_hi"] = round(lo, 3), round(hi, 3)
        # the comparison: the oracle in the public window (for "auto" cells the
        # oracle in the released window is no reference: its residuals x - E[X | Z] are
        # clipped where the window is tight, which biases it; a binary x's released window
        # maps {0, 1} to about {-1, 1}, where that clip leaves it no signal)
        ref = row.get("oracle_public") or row["oracle"]
        row["ratio"] = (round(row["default"] / ref, 3) if ref else "")
        rows.append(row)
    write_csv(args.out, rows)
    cols = ["class", "n", "epsilon", "params", "default", "oracle", "ratio", "share", "scale",
            "fitvar", "blocks", "all", "oracle_public", "failsafe"]
    print("| " + " | ".join(cols) + " |")
    print("|" + "---|" * len(cols))
    for r in rows:
        print("| " + " | ".join(str(r.get(c, "")) for c in cols) + " |")
    return rows


if __name__ == "__main__":
    main()
