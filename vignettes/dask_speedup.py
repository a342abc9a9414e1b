# %% [markdown]
# # Speed-up of a Dask LocalCluster over the serial run
#
# Runs the same small grid (PrivGCM and PrivCRT, n = 2000 by default; random
# Fourier features above --exact-max-n, as in the figures) serially
# and on a LocalCluster with `--workers` single-threaded workers, checks that
# the two tables agree, and prints the wall times: the whole call (including
# starting the cluster and compiling the numba kernels in each worker) and the
# compute alone (a warmed-up cluster passed as a Client).
#
#     python vignettes/dask_speedup.py [--quick] [--workers 2] [--reps 30]

# %%
import vignette_utils as U  # first: sets one thread per process before numpy loads

import time

import numpy as np

U.on_path()


def main():
    args = U.parse_args("Dask speed-up", lambda ap: ap.add_argument("--n", type=int))
    from dask.distributed import Client, LocalCluster
    from privci import experiments
    import pandas as pd

    workers = args.workers or 2
    n = args.n or (300 if args.quick else 2000)
    reps = args.reps or (4 if args.quick else 30)
    tests = [{"test": "privgcm", **U.PRIVATE}, {"test": "privcrt", "m": 19, **U.PRIVATE}]
    if n > args.exact_max_n:          # as in the figures: random Fourier features above
        tests = U.with_rff(tests)
    grid = {"n": [n], "d": [1], "s": [2.0], "beta": [0.0, 1.0], "epsilon": [2.0]}
    kw = dict(n_reps=reps, seed=args.seed, progress=False, chunk_size=1)
    experiments.run(tests, {**grid, "n": [200]}, n_reps=1, seed=0, scheduler="serial",
                    progress=False)   # compile the kernels in this process
    t0 = time.perf_counter()
    serial = experiments.run(tests, grid, scheduler="serial", **kw)
    t_serial = time.perf_counter() - t0
    t0 = time.perf_counter()
    cold = experiments.run(tests, grid, scheduler=None, n_workers=workers, **kw)
    t_cold = time.perf_counter() - t0
    with LocalCluster(n_workers=workers, threads_per_worker=1, dashboard_address=None,
                      env=dict(experiments._WORKER_ENV)) as cluster, Client(cluster) as client:
        experiments.run(tests, {**grid, "n": [200]}, n_reps=workers * 2, seed=0,
                        scheduler=client, progress=False, chunk_size=1)   # warm the workers
        t0 = time.perf_counter()
        warm = experiments.run(tests, grid, scheduler=client, **kw)
        t_warm = time.perf_counter() - t0
    for t in (cold, warm):
        pd.testing.assert_frame_equal(t.drop(columns="seconds"), serial.drop(columns="seconds"),
                                      check_exact=False, rtol=1e-9)
    print(f"grid: {len(serial)} tests at n = {n}; sum of test times (serial) "
          f"{serial['seconds'].sum():.1f} s")
    print(f"serial wall {t_serial:.1f} s")
    print(f"LocalCluster({workers} workers) incl. start-up and JIT: {t_cold:.1f} s "
          f"(speed-up {t_serial / t_cold:.2f})")
    print(f"LocalCluster({workers} workers) warmed up: {t_warm:.1f} s "
          f"(speed-up {t_serial / t_warm:.2f}); tables equal: yes")
    with open("/proc/loadavg") as fh:
        print("load average at the end:", fh.read().split()[:3])


if __name__ == "__main__":
    main()
