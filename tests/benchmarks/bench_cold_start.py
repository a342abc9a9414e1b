"""The first privgcm call after an install (issue 37, item 10): cold, warm and projected.

Each measurement runs in a fresh interpreter with its own numba cache directory
(``NUMBA_CACHE_DIR``): an empty one is what a fresh ``pip install`` has (the package's
``__pycache__`` holds no compiled kernels yet).  The call is the README's
``privci.privgcm(x, y, z, epsilon=2.0, x_bound=3.5, y_bound=4.5, z_center=0.0,
z_scale=1.0)`` at n = 2000, hardened noise, timed from before ``import privci``.

Modes (each repeated ``--reps`` times, fresh cache per repeat where it says so):

* ``cold``: empty cache: import + first call (numba compiles the kernels it meets);
* ``warm``: the cache that ``cold`` left: import + first call (kernels loaded);
* ``after privci warm``: ``python -m privci warm`` once on an empty cache (its time is
  printed), then import + first call;
* ``cold, numpy passes``: empty cache, with the released spline's numpy passes forced
  (``privci._spline.USE_KERNELS = False``).  Since stop 40 the package's own rule
  (``USE_KERNELS = None``) takes the numpy passes for partitions of at most
  ``privci._spline.NUMPY_ROWS`` rows, and ``clip_scale`` has a numpy twin for first
  calls, so ``cold`` at n = 2000 compiles nothing on the default path: the two modes
  should agree.

``--fresh-venv`` first creates a virtual environment and ``pip install``s the checkout
into it (as a user would), and measures with its interpreter.

usage: python tests/benchmarks/bench_cold_start.py [--reps 3] [--fresh-venv]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))

WORKER = r"""
import json, sys, time
t0 = time.perf_counter()
import numpy as np
import privci
t_import = time.perf_counter() - t0
if sys.argv[1] == "numpy":
    from privci import _spline
    _spline.USE_KERNELS = False
rng = np.random.default_rng(0)
z = rng.normal(size=(2000, 1))
x = np.sin(z[:, 0]) + rng.normal(size=2000)
y = np.cos(z[:, 0]) + 0.8 * (x - np.sin(z[:, 0])) + rng.normal(size=2000)
t1 = time.perf_counter()
res = privci.privgcm(x, y, z, epsilon=2.0, x_bound=3.5, y_bound=4.5, z_center=0.0,
                     z_scale=1.0)
t2 = time.perf_counter()
print(json.dumps({"import": t_import, "call": t2 - t1, "total": t2 - t0,
                  "pvalue": float(res.pvalue)}))
"""


def _run(python, cache, mode="kernels", env_extra=None):
    env = dict(os.environ, NUMBA_CACHE_DIR=cache, **(env_extra or {}))
    wall = time.perf_counter()
    out = subprocess.run([python, "-c", WORKER, mode], capture_output=True, text=True,
                         env=env, timeout=1800)
    wall = time.perf_counter() - wall
    if out.returncode != 0:
        raise RuntimeError(out.stderr[-3000:])
    rec = json.loads(out.stdout.strip().splitlines()[-1])
    rec["process"] = wall
    return rec


def _warm(python, cache, env_extra=None):
    env = dict(os.environ, NUMBA_CACHE_DIR=cache, **(env_extra or {}))
    t = time.perf_counter()
    out = subprocess.run([python, "-m", "privci", "warm"], capture_output=True, text=True,
                         env=env, timeout=3600)
    if out.returncode != 0:
        raise RuntimeError(out.stdout[-2000:] + out.stderr[-2000:])
    return time.perf_counter() - t


def _fresh_venv(tmp):
    venv = os.path.join(tmp, "venv")
    subprocess.run([sys.executable, "-m", "venv", venv], check=True)
    py = os.path.join(venv, "bin", "python")
    t = time.perf_counter()
    subprocess.run([py, "-m", "pip", "install", "--quiet", ROOT], check=True)
    print(f"pip install of the checkout into a fresh venv: {time.perf_counter() - t:.0f} s")
    return py


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--fresh-venv", action="store_true")
    ap.add_argument("--modes", default="cold,warm,after-warm,numpy")
    args = ap.parse_args(argv)
    modes = args.modes.split(",")
    rows = {}
    with tempfile.TemporaryDirectory(prefix="privci-cold-") as tmp:
        python = _fresh_venv(tmp) if args.fresh_venv else sys.executable
        env_extra = {} if args.fresh_venv else {"PYTHONPATH": os.path.join(ROOT, "python")}
        warm_times = []
        for r in range(args.reps):
            cache = os.path.join(tmp, f"cache{r}")
            if "cold" in modes or "warm" in modes:
                rows.setdefault("cold", []).append(_run(python, cache, env_extra=env_extra))
            if "warm" in modes:
                rows.setdefault("warm", []).append(_run(python, cache, env_extra=env_extra))
            if "after-warm" in modes:
                cache_w = os.path.join(tmp, f"cachew{r}")
                warm_times.append(_warm(python, cache_w, env_extra))
                rows.setdefault("after privci warm", []).append(
                    _run(python, cache_w, env_extra=env_extra))
            if "numpy" in modes:
                cache_n = os.path.join(tmp, f"cachen{r}")
                rows.setdefault("cold, numpy passes", []).append(
                    _run(python, cache_n, "numpy", env_extra=env_extra))
    la = os.getloadavg()
    print(f"\nfirst privgcm call (README call, n = 2000), {args.reps} runs each; "
          f"2 cores shared, load average {la[0]:.1f} / {la[1]:.1f} / {la[2]:.1f}")
    print(f"{'mode':24s} {'import s':>14s} {'first call s':>16s} {'process s':>16s}")
    med = {}
    for mode, recs in rows.items():
        imp = [r["import"] for r in recs]
        call = [r["call"] for r in recs]
        proc = [r["process"] for r in recs]
        med[mode] = statistics.median(proc)
        print(f"{mode:24s} {statistics.median(imp):6.2f} ({min(imp):5.2f}) "
              f"{statistics.median(call):8.2f} ({min(call):5.2f}) "
              f"{statistics.median(proc):8.2f} ({min(proc):5.2f})   median (min)")
    if warm_times:
        print(f"python -m privci warm on an empty cache: median {statistics.median(warm_times):.1f} s")
    if "cold" in med and "warm" in med:
        print(f"ratio cold / warm (process, medians): {med['cold'] / med['warm']:.1f}")
    if "cold" in med and "cold, numpy passes" in med:
        print(f"ratio cold / cold with numpy passes: {med['cold'] / med['cold, numpy passes']:.1f}")


if __name__ == "__main__":
    main()
