"""One PrivGCM test over 10^6 and 10^7 rows on a 2-worker Dask LocalCluster (issue 17).

Design: d = 5, D = 512 frequencies (1024 features), lambda = 5, x and y depend on z,
PrivGCM with ``kernel_approximation="rff"``, 100 blocks and seeded noise (rng=1, so the
Dask and in-memory results can be compared digit for digit).  The data are generated
inside the graph, partition by partition (250,000 rows each, a generator seeded by the
partition's first row index), as a cluster would read them from storage: no process
ever holds all n rows, and every pass re-generates its partition (a few normals per row,
small against the 1024 features).

For every n, in fresh processes:

* ``dask``: a LocalCluster with 2 worker processes of 1 thread each (numba and BLAS
  limited to 1 thread per worker); wall time of the privgcm call and the peak resident
  set size of each worker (``VmHWM`` after resetting it, minus the idle worker's RSS);
* ``in memory`` (n <= --in-memory-max, default 10^6): the same rows concatenated in one
  process, privgcm on numpy arrays (numba and BLAS on both cores): wall time, peak extra
  memory, and the relative difference of the two statistics.

Writes vignettes/bench_dask.md (table) and .json.
Run: ``nice -n 10 python3 tests/benchmarks/bench_dask.py [--sizes 1000000,10000000]``.

``--regression spline`` runs PrivGCM's default instead (the released spline fit: public
z_center = 0 and z_scale = 1, 100 blocks, the same seeded noise) and writes
vignettes/bench_dask_spline.md / .json.  Five columns of z have no full spline fit, so it
states the additive model (``assume="additive"``, the fit the table was measured with):
at epsilon 1 that fit is resolvable from about 23,000 rows
(``privci._spline.smallest_n(1.0, 5, "additive")``), and privgcm refuses below, so the
spline run needs ``--sizes`` of at least that and warms up on ``WARM_ROWS["spline"]`` rows.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common as C  # noqa: E402

D_Z = 5
LAM = 5.0
SEED = 20260417


def gen_block(start, stop, d=D_Z, seed=SEED):
    """Rows [start, stop) of the synthetic data set: (x, y, z), a function of the range only."""
    import numpy as np
    gen = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(start,)))
    z = gen.normal(size=(stop - start, d))
    x = np.sin(z[:, 0]) + 0.5 * z[:, 1] + gen.normal(size=stop - start)
    y = np.cos(z[:, 0]) - 0.5 * z[:, 2] + gen.normal(size=stop - start)
    return x, y, z


def _ranges(n, chunk):
    return [(a, min(n, a + chunk)) for a in range(0, n, chunk)]


REGRESSION = ["krr"]   # set by --regression (also in the worker processes)
# rows of the warm-up call (numba compilation, imports): the spline fit of 5 columns at
# epsilon 1 refuses fewer than about 23,000 rows (nothing computed, nothing compiled)
WARM_ROWS = {"krr": 2000, "spline": 25_000}


def _kwargs(n_features):
    if REGRESSION[0] == "spline":
        return dict(epsilon=1.0, x_bound=4.0, y_bound=4.0, z_center=0.0, z_scale=1.0,
                    n_blocks=100, rng=1, assume="additive", tighten=False)
    return dict(epsilon=1.0, x_bound=4.0, y_bound=4.0, ridge_lambda=LAM,
                kernel_approximation="rff", n_features=n_features, feature_rng=7,
                n_blocks=100, rng=1, regression="krr")


def _worker_memory():
    return {"rss_kb": C.status_kb("VmRSS"), "hwm_kb": C.status_kb("VmHWM")}


def _worker_reset():
    ok = C.reset_peak()
    return {"ok": ok, "rss_kb": C.status_kb("VmRSS")}


def run_dask(n, chunk, n_features, workers):
    import dask
    import dask.array as da
    import numpy as np
    from distributed import Client, LocalCluster

    import privci

    env = {"NUMBA_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1",
           "MKL_NUM_THREADS": "1", "MALLOC_MMAP_THRESHOLD_": "65536",
           "PYTHONPATH": os.environ.get("PYTHONPATH", "")}
    with dask.config.set({f"distributed.nanny.pre-spawn-environ.{k}": v
                          for k, v in env.items()}):
        cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                               dashboard_address=None, memory_limit="4GiB")
        client = Client(cluster)
    try:
        ranges = _ranges(n, chunk)
        parts = [dask.delayed(gen_block, nout=3)(a, b) for a, b in ranges]
        x = da.concatenate([da.from_delayed(p[0], (b - a,), np.float64)
                            for p, (a, b) in zip(parts, ranges)])
        y = da.concatenate([da.from_delayed(p[1], (b - a,), np.float64)
                            for p, (a, b) in zip(parts, ranges)])
        z = da.concatenate([da.from_delayed(p[2], (b - a, D_Z), np.float64)
                            for p, (a, b) in zip(parts, ranges)])
        # warm-up on a small array: numba compilation and imports on every worker
        warm = WARM_ROWS[REGRESSION[0]]
        small = [da.from_array(a, chunks=warm // 4) for a in gen_block(0, warm)]
        privci.privgcm(*small, **_kwargs(n_features))
        before = client.run(_worker_reset)
        t0 = time.perf_counter()
        res = privci.privgcm(x, y, z, **_kwargs(n_features))
        wall = time.perf_counter() - t0
        after = client.run(_worker_memory)
        mem = []
        for addr, b in before.items():
            a = after[addr]
            mem.append({"idle_rss_mb": b["rss_kb"] / 1024, "peak_rss_mb": a["hwm_kb"] / 1024,
                        "peak_extra_mb": (a["hwm_kb"] - b["rss_kb"]) / 1024,
                        "reset_ok": b["ok"]})
        return {"n": n, "what": "dask", "wall": wall, "workers": workers, "chunk": chunk,
                "partitions": len(ranges), "statistic": res.statistic, "pvalue": res.pvalue,
                "method": res.method, "memory": mem}
    finally:
        client.close()
        cluster.close()


def run_memory(n, chunk, n_features):
    import numpy as np

    import privci

    blocks = [gen_block(a, b) for a, b in _ranges(n, chunk)]
    x = np.concatenate([b[0] for b in blocks])
    y = np.concatenate([b[1] for b in blocks])
    z = np.concatenate([b[2] for b in blocks])
    del blocks
    warm = WARM_ROWS[REGRESSION[0]]
    privci.privgcm(x[:warm], y[:warm], z[:warm], **_kwargs(n_features))   # warm-up
    wall, peak, res = C.measure(lambda: privci.privgcm(x, y, z, **_kwargs(n_features)), 1)
    return {"n": n, "what": "memory", "wall": wall, "peak_extra_mb": peak / 2 ** 20,
            "statistic": res.statistic, "pvalue": res.pvalue}


def render(rows, n_features, out):
    by = {}
    chunk = next((r["chunk"] for r in rows if "chunk" in r), 250000)
    for r in rows:
        by.setdefault(r["n"], {})[r["what"]] = r
    what = (f"PrivGCM's default released spline fit ({D_Z} columns of z, assume='additive', "
            "public centre 0 and scale 1)" if REGRESSION[0] == "spline" else
            f"PrivGCM (KRR), d = {D_Z}, D = {n_features} frequencies ({2 * n_features} "
            f"features), lambda = {LAM}")
    lines = ["# One private test on a Dask cluster (bench_dask.py"
             + (" --regression spline)" if REGRESSION[0] == "spline" else ")"), "",
             f"{what}, 100 blocks, seeded noise; partitions of "
             f"{chunk:,} rows generated inside the graph; LocalCluster of 2 worker "
             "processes x 1 thread (numba and BLAS 1 thread each).  In memory: one process, "
             "numba and BLAS on both cores.", "",
             "| n | Dask wall (s) | us / row | peak RSS per worker (MB) | peak extra per "
             "worker (MB) | in memory (s) | in-memory peak extra (MB) | Dask / in memory "
             "| rel. diff. of statistic |",
             "|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for n in sorted(by):
        d, m = by[n].get("dask"), by[n].get("memory")
        if d is None:
            continue
        peak = " / ".join(f"{w['peak_rss_mb']:.0f}" for w in d["memory"])
        extra = " / ".join(f"{w['peak_extra_mb']:.0f}" for w in d["memory"])
        if m is not None:
            ratio = f"{d['wall'] / m['wall']:.2f}"
            diff = abs(d["statistic"] - m["statistic"]) / max(abs(m["statistic"]), 1e-300)
            mem_cols = f"{m['wall']:.1f} | {m['peak_extra_mb']:.0f} | {ratio} | {diff:.1e}"
        else:
            mem_cols = "not run | | |"
        lines.append(f"| {n:,} | {d['wall']:.1f} | {1e6 * d['wall'] / n:.1f} | {peak} | "
                     f"{extra} | {mem_cols} |")
    lines += ["", "Machine: " + C.machine_note() + "."]
    stem = "bench_dask_spline" if REGRESSION[0] == "spline" else "bench_dask"
    with open(os.path.join(out, stem + ".md"), "w") as fh:
        fh.write("\n".join(lines) + "\n")
    with open(os.path.join(out, stem + ".json"), "w") as fh:
        json.dump(rows, fh, indent=1)
    print("\n".join(lines))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--worker", nargs="*")
    ap.add_argument("--sizes", default="1000000,10000000")
    ap.add_argument("--chunk", type=int, default=250_000)
    ap.add_argument("--n-features", type=int, default=512)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--in-memory-max", type=int, default=1_000_000)
    ap.add_argument("--regression", choices=["krr", "spline"], default="krr")
    ap.add_argument("--dask-first", action="store_true",
                    help="run the Dask case before the in-memory one (order check)")
    args = ap.parse_args()
    REGRESSION[0] = args.regression
    if args.worker is not None:
        what, n = args.worker[0], int(args.worker[1])
        if what == "dask":
            out = run_dask(n, args.chunk, args.n_features, args.workers)
        else:
            out = run_memory(n, args.chunk, args.n_features)
        print(json.dumps(out))
        return
    sizes = [int(float(s)) for s in args.sizes.split(",")]
    chunk = min(args.chunk, max(500, min(sizes) // 4))
    out = C.vignettes_dir()
    rows = []
    here = os.path.abspath(__file__)
    common = ["--chunk", chunk, "--n-features", args.n_features, "--workers", args.workers,
              "--regression", args.regression]
    for n in sizes:
        order = ["dask", "memory"] if args.dask_first else ["memory", "dask"]
        for what in order:
            if what == "dask" or n <= args.in_memory_max:
                rows.append(C.run_worker(here, [what, n, *common]))
                print(rows[-1], flush=True)
        render(rows, args.n_features, out)
    m = {r["n"]: r for r in rows if r["what"] == "memory"}
    for r in rows:
        if r["what"] == "dask" and r["n"] in m:
            print(f"ratio Dask / in memory at n = {r['n']}: {r['wall'] / m[r['n']]['wall']:.2f}")


if __name__ == "__main__":
    main()
