"""Shared settings, command line and plotting for the vignette scripts.

Only the vignette scripts import this module; Dask workers never need it
(the tasks only carry privci functions and objects).

Hyper-parameters (fixed before seeing any data, the same in every figure):

* Private tests (PrivGCM, PrivCRT): ``ridge_lambda = 5`` (the package minimum
  that enters the sensitivity bound; the paper's lambda_K = 10) and
  ``kernel_sigma = 0.5``, i.e. the Gaussian kernel exp(-||z - z'||^2 / 2),
  bandwidth 1 = half the known standard deviation (2) of each Z_j.
* Non-private tests (GCM, CRT) and the GCM inside PrivToT:
  ``ridge_lambda = 10 / n`` (n the sample size the regression sees) and the
  same kernel.  In the package's normalised objective
  (1/n) sum (u - f)^2 + lambda ||f||^2 this is scikit-learn's
  ``KernelRidge(alpha=10)``, i.e. the paper's "lambda >= 10" read in the
  un-normalised parameterisation; it is close to what 10-fold CV picks on
  independent pilot data sets at n = 2000, d = 1 (0.01 / 0.001) and avoids
  the 10x cost of cross-validating every replication.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

# One thread per process: the vignettes get their parallelism from Dask workers
# (--workers), and nested numba/BLAS threads oversubscribe a shared machine.
# Must run before numpy/numba are imported, so import this module first.
for _var in ("NUMBA_NUM_THREADS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

HERE = os.path.dirname(os.path.abspath(__file__))

PRIVATE = {"ridge_lambda": 5.0, "kernel_sigma": 0.5}
NONPRIVATE = {"ridge_lambda": "10/n", "kernel_sigma": 0.5}

# Exact KRR up to this n; above it the KRR tests (PrivGCM, PrivCRT, GCM, CRT) use
# random Fourier features: 256 frequency pairs (512 features), the same kernel,
# lambda and sensitivity constant.  Exact KRR at n = 10^4 costs about 11 s per
# test on one core, RFF about 0.13 s (measured 2026-11-26 on this machine).
EXACT_MAX_N = 2000
RFF = {"kernel_approximation": "rff", "n_features": 256}
KRR_TESTS = ("privgcm", "privcrt", "gcm", "crt")

COLOURS = {"PrivGCM": "tab:blue", "GCM": "tab:orange", "PrivCRT": "tab:green",
           "CRT": "tab:red", "PrivToT": "tab:purple", "Private Kendall": "tab:brown"}


def parse_args(description, extra=None):
    """Common options: --quick, --reps, --seed, --workers, --scheduler, --out-dir."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--quick", action="store_true",
                    help="few replications and small n (CI smoke run, < 1 minute)")
    ap.add_argument("--reps", type=int, default=None, help="replications per grid point")
    ap.add_argument("--seed", type=int, default=20240601, help="root SeedSequence seed")
    ap.add_argument("--workers", type=int, default=0,
                    help="0: run serially (default); k > 0: a Dask LocalCluster with k workers")
    ap.add_argument("--scheduler", default=None,
                    help="address of a running Dask scheduler (tcp://host:port); overrides --workers")
    ap.add_argument("--out-dir", default=None,
                    help="where CSVs and PNGs go (default: vignettes/ for full runs, a temporary "
                         "directory for --quick)")
    ap.add_argument("--no-progress", action="store_true", help="no progress bar")
    ap.add_argument("--exact-max-n", type=int, default=None,
                    help="largest n run with exact KRR; larger n use random Fourier features "
                         f"(default {EXACT_MAX_N}; 200 with --quick, so CI runs both paths)")
    if extra is not None:
        extra(ap)
    args = ap.parse_args()
    if args.exact_max_n is None:
        args.exact_max_n = 200 if args.quick else EXACT_MAX_N
    if args.out_dir is None:
        args.out_dir = tempfile.mkdtemp(prefix="privci-vignette-") if args.quick else HERE
    os.makedirs(os.path.join(args.out_dir, "results"), exist_ok=True)
    return args


def scheduler_of(args):
    if args.scheduler:
        return args.scheduler
    return None if args.workers > 0 else "serial"


def run_kwargs(args):
    return {"seed": args.seed, "scheduler": scheduler_of(args),
            "n_workers": args.workers or None, "progress": False if args.no_progress else None}


def with_rff(tests):
    """The KRR tests of ``tests`` switched to random Fourier features (others unchanged)."""
    return [{**t, **RFF} if t["test"] in KRR_TESTS else dict(t) for t in tests]


def run_by_size(tests, grid, *, n_reps, out, args, **kw):
    """``experiments.run`` with exact KRR for n <= --exact-max-n and RFF above.

    Both parts append to the same CSV ``out`` (their options differ, so their
    rows never collide) and the returned table holds both.
    """
    import pandas as pd
    from privci import experiments
    small = [n for n in grid["n"] if n <= args.exact_max_n]
    large = [n for n in grid["n"] if n > args.exact_max_n]
    opts = {**run_kwargs(args), **kw}
    parts = []
    if small:
        parts.append(experiments.run(tests, {**grid, "n": small}, n_reps=n_reps, out=out, **opts))
    if large:
        parts.append(experiments.run(with_rff(tests), {**grid, "n": large}, n_reps=n_reps,
                                     out=out, **opts))
    return pd.concat(parts, ignore_index=True)


def uses_rff(summ):
    """Boolean mask of the summary rows computed with random Fourier features."""
    return summ["options"].str.contains('"kernel_approximation":"rff"', regex=False)


def csv_path(args, name):
    return os.path.join(args.out_dir, "results", name + ".csv")


def png_path(args, name):
    return os.path.join(args.out_dir, name + ".png")


def save_summary(summary, args, name):
    path = os.path.join(args.out_dir, "results", name + "_summary.csv")
    summary.to_csv(path, index=False, float_format="%.6g")
    return path


class Timer:
    """Wall and CPU time of a block (CPU time of this process and its children)."""

    def __enter__(self):
        self.t0 = time.perf_counter()
        self.c0 = _cpu()
        return self

    def __exit__(self, *exc):
        self.wall = time.perf_counter() - self.t0
        self.cpu = _cpu() - self.c0


def _cpu():
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def report(name, table, timer, args):
    """One line for the README: rows run, wall/CPU seconds, total test seconds."""
    line = (f"[{name}] rows={len(table)} wall={timer.wall:.1f}s cpu(this process)={timer.cpu:.1f}s "
            f"sum(test seconds)={table['seconds'].sum():.1f}s out={args.out_dir}")
    print(line, flush=True)
    return line


def band(ax, x, summ, label, colour=None, marker="o", linestyle="-"):
    """Rejection rate with its Wilson 95% band."""
    import numpy as np
    order = np.argsort(np.asarray(x, dtype=float))
    x = np.asarray(x, dtype=float)[order]
    rate = summ["rate"].to_numpy()[order]
    lo, hi = summ["lo"].to_numpy()[order], summ["hi"].to_numpy()[order]
    ax.plot(x, rate, marker=marker, linestyle=linestyle, label=label, color=colour, ms=4)
    ax.fill_between(x, lo, hi, alpha=0.2, color=colour, linewidth=0)


def finish(fig, path, rect=None):
    fig.tight_layout(rect=rect)
    fig.savefig(path, dpi=110)
    print(f"wrote {path}", flush=True)


def setup_matplotlib():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def on_path():
    """Make ``import privci`` work from a source checkout without installation."""
    src = os.path.join(os.path.dirname(HERE), "python")
    if os.path.isdir(os.path.join(src, "privci")) and src not in sys.path:
        sys.path.insert(0, src)
