"""Simulation studies: run a grid of tests x replications, serially or on Dask.

The unit of work is one *data cell* (the parameters of the data, e.g.
``n, d, s, beta``) and one replication ``rep``: the data set is drawn once and
every test of the run (each variant at each privacy level, number of
resamples, ...) is applied to it, so tests are compared on common data.

Reproducibility.  All randomness comes from one root
``numpy.random.SeedSequence(seed)``.  The data of (cell, rep) are drawn from
the child with spawn key ``(h(cell), rep)`` and the test noise of (cell, rep,
test) from the child with spawn key ``(h(cell), rep, h(test))``, where ``h``
is a 64-bit hash (two 32-bit words) of the sorted JSON of the parameters.
Every number therefore depends only on the seed and on its own parameters,
not on the grid it was run in, the order of execution, the number of workers
or whether the run was interrupted.  Private tests get a seeded numpy
Generator (reproducible noise, not hardened: fine for simulations, not for
releases).

Distribution.  ``scheduler=None`` (the default) starts a ``dask.distributed.LocalCluster`` with one single-threaded
worker process per core; ``"serial"`` runs in this process without Dask; a ``"tcp://host:port"`` address or a
``dask.distributed.Client`` sends the same run to an existing cluster.
Workers run numba and BLAS with one thread each (``NUMBA_NUM_THREADS``,
``OMP_NUM_THREADS``, ``OPENBLAS_NUM_THREADS``, ``MKL_NUM_THREADS`` = 1), so
processes do not oversubscribe the cores.  On an HPC system, start the
cluster with dask-jobqueue and pass its client::

    from dask_jobqueue import SLURMCluster
    from dask.distributed import Client
    cluster = SLURMCluster(cores=1, processes=1, memory="4GB", walltime="02:00:00",
                           job_script_prologue=["export NUMBA_NUM_THREADS=1",
                                                "export OMP_NUM_THREADS=1"])
    cluster.scale(jobs=100)
    table = experiments.run(tests, grid, n_reps=500, seed=1, out="fig2.csv",
                            scheduler=Client(cluster))

(``PBSCluster``, ``SGECluster``, ``LSFCluster`` work the same way.)  The
workers need ``privci`` installed and, for real data, read access to
nothing: the data table travels with the task.

Checkpointing.  With ``out="results.csv"`` every finished task appends its
rows to the CSV at once; calling :func:`run` again with the same arguments
skips the (cell, rep, test) triples already in the file, so an interrupted
run resumes where it stopped, and a larger ``n_reps`` only adds replications.
:func:`load_results` reads the file back; :func:`summarise` gives rejection
rates with Monte Carlo confidence intervals.
"""

from __future__ import annotations

import hashlib
import inspect
import itertools
import json
import math
import os
import time
import warnings
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from . import _validation as V
from . import simulate

__all__ = ["run", "load_results", "summarise", "wilson_interval", "available_tests",
           "TestSpec", "make_tests"]

_WORKER_ENV = {"NUMBA_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1",
               "MKL_NUM_THREADS": "1"}

RESULT_COLUMNS = ("statistic", "pvalue", "reject", "seconds", "error")
META_COLUMNS = ("seed", "cell_key", "test_key", "rep", "label", "test")


# --------------------------------------------------------------------------- the tests

def _lambda_for(value, n):
    """``ridge_lambda`` may be a number, None (CV) or a string "c/n" (c divided by n)."""
    if isinstance(value, str):
        v = value.replace(" ", "")
        if v.endswith("/n"):
            return float(v[:-2]) / n
        raise ValueError(f"`ridge_lambda` must be a number, None or a string 'c/n'; "
                         f"got {value!r} instead.")
    return value


def _t_privgcm(data, rng, alpha, *, epsilon, ridge_lambda=5.0, kernel_sigma=1.0,
               kernel_approximation="exact", n_features=512, alternative="two-sided",
               center_share=None, regression="krr", z_scale=None):
    # The grid runner reproduces the paper: regression="krr" (Algorithm 1) unless the
    # cell asks for the released spline fit (privgcm's own default), which takes z_scale.
    from .gcm import privgcm
    ce = None if center_share is None else float(center_share) * float(epsilon)
    if regression == "spline":
        res = privgcm(data.x, data.y, data.z, epsilon=epsilon, x_bound=data.x_bound,
                      y_bound=data.y_bound, alternative=alternative, rng=rng,
                      center_epsilon=ce, regression="spline", z_scale=z_scale)
        return res.statistic, res.pvalue
    frng = np.random.default_rng(rng.bit_generator.seed_seq.spawn(1)[0]) \
        if kernel_approximation == "rff" else None
    res = privgcm(data.x, data.y, data.z, epsilon=epsilon, x_bound=data.x_bound,
                  y_bound=data.y_bound, ridge_lambda=_lambda_for(ridge_lambda, data.n),
                  kernel_sigma=kernel_sigma, kernel_approximation=kernel_approximation,
                  n_features=n_features, feature_rng=frng, alternative=alternative, rng=rng,
                  center_epsilon=ce, regression="krr")
    return res.statistic, res.pvalue


def _t_gcm(data, rng, alpha, *, ridge_lambda=None, kernel_sigma=1.0,
           kernel_approximation="exact", n_features=512, alternative="two-sided",
           center=False):
    from .gcm import gcm
    frng = np.random.default_rng(rng.bit_generator.seed_seq.spawn(1)[0]) \
        if kernel_approximation == "rff" else None
    res = gcm(data.x, data.y, data.z, kernel_sigma=kernel_sigma,
              ridge_lambda=_lambda_for(ridge_lambda, data.n), alternative=alternative, rng=rng,
              kernel_approximation=kernel_approximation, n_features=n_features,
              feature_rng=frng, center=bool(center))
    return res.statistic, res.pvalue


def _need_model_x(data, name):
    if data.model_x is None or data.x_residual_bound is None:
        raise ValueError(f"{name} needs a model-X law of X given Z; these data have none.")


def _t_privcrt(data, rng, alpha, *, epsilon, m=19, ridge_lambda=5.0, kernel_sigma=1.0,
               kernel_approximation="exact", n_features=512, alternative="two-sided",
               sensitivity=None):
    from .crt import privcrt
    _need_model_x(data, "privcrt")
    frng = np.random.default_rng(rng.bit_generator.seed_seq.spawn(1)[0]) \
        if kernel_approximation == "rff" else None
    res = privcrt(data.x, data.y, data.z, epsilon=epsilon, model_x=data.model_x,
                  y_bound=data.y_bound, x_residual_bound=data.x_residual_bound,
                  n_resamples=int(m), ridge_lambda=_lambda_for(ridge_lambda, data.n),
                  kernel_sigma=kernel_sigma, kernel_approximation=kernel_approximation,
                  n_features=n_features, feature_rng=frng, alternative=alternative, rng=rng,
                  **({} if sensitivity is None else {"sensitivity": sensitivity}))
    return res.statistic, res.pvalue


def _t_crt(data, rng, alpha, *, m=199, ridge_lambda=5.0, kernel_sigma=1.0,
           alternative="two-sided"):
    from .crt import crt
    _need_model_x(data, "crt")
    res = crt(data.x, data.y, data.z, model_x=data.model_x, n_resamples=int(m),
              ridge_lambda=_lambda_for(ridge_lambda, data.n), kernel_sigma=kernel_sigma,
              alternative=alternative, rng=rng)
    return res.statistic, res.pvalue


def _t_privtot(data, rng, alpha, *, epsilon, n_subsets=10, ridge_lambda=None,
               kernel_sigma=1.0, alternative="two-sided"):
    from .baselines import privtot
    n_sub = max(2, data.n // int(n_subsets))
    res = privtot(data.x, data.y, data.z, epsilon=epsilon, n_subsets=int(n_subsets),
                  alpha=alpha, rng=rng, ridge_lambda=_lambda_for(ridge_lambda, n_sub),
                  kernel_sigma=kernel_sigma, alternative=alternative)
    return res.statistic, res.pvalue


def _t_private_kendall(data, rng, alpha, *, epsilon, n_clusters=100, alternative="two-sided"):
    from .baselines import private_kendall
    res = private_kendall(data.x, data.y, data.z, epsilon=epsilon, n_clusters=int(n_clusters),
                          alternative=alternative, rng=rng)
    return res.statistic, res.pvalue


_TESTS: Dict[str, Callable] = {
    "privgcm": _t_privgcm, "gcm": _t_gcm, "privcrt": _t_privcrt, "crt": _t_crt,
    "privtot": _t_privtot, "private_kendall": _t_private_kendall,
}


def _baselines_available():
    try:
        from . import baselines  # noqa: F401
    except ImportError:
        return False
    return True


def available_tests():
    """Names of the tests :func:`run` knows (the baselines only if ``privci.baselines`` exists)."""
    names = ["privgcm", "gcm", "privcrt", "crt"]
    if _baselines_available():
        names += ["privtot", "private_kendall"]
    return names


def _test_options(name):
    sig = inspect.signature(_TESTS[name])
    return {k for k, p in sig.parameters.items() if p.kind == p.KEYWORD_ONLY}


# --------------------------------------------------------------------------- specs and keys

@dataclass(frozen=True)
class TestSpec:
    """One concrete test: a registered test name, a label and its options."""

    __test__ = False  # not a pytest test class

    label: str
    test: str
    options: Tuple[Tuple[str, Any], ...]

    @property
    def key(self):
        return _hash_hex({"label": self.label, "test": self.test, **dict(self.options)})


def _canonical(v):
    if isinstance(v, (np.integer,)):
        return int(v)
    if isinstance(v, (np.floating,)):
        return float(v)
    if isinstance(v, float) and v.is_integer() and abs(v) < 2 ** 53:
        return v  # json keeps 2.0 distinct from 2: both stable
    return v


def _json(params):
    return json.dumps({k: _canonical(params[k]) for k in sorted(params)}, sort_keys=True,
                      separators=(",", ":"))


def _hash_words(params):
    h = hashlib.sha256(_json(params).encode()).digest()
    return (int.from_bytes(h[:4], "little"), int.from_bytes(h[4:8], "little"))


def _hash_hex(params):
    return hashlib.sha256(_json(params).encode()).hexdigest()[:16]


def _data_params(data_fn):
    sig = inspect.signature(data_fn)
    return {k for k, p in sig.parameters.items()
            if k != "rng" and p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)}


def _expand_grid(grid):
    if isinstance(grid, dict):
        keys = list(grid)
        vals = [v if isinstance(v, (list, tuple, np.ndarray)) else [v] for v in grid.values()]
        return [dict(zip(keys, combo)) for combo in itertools.product(*vals)]
    cells = [dict(c) for c in grid]
    if not cells:
        raise ValueError("`grid` is empty.")
    return cells


def make_tests(tests, test_grid_keys, cell):
    """Expand the test list at one grid point into :class:`TestSpec` objects (deduplicated)."""
    out, seen = [], set()
    for t in tests:
        t = {"test": t} if isinstance(t, str) else dict(t)
        name = t.pop("test", None)
        if name not in _TESTS:
            raise ValueError(f"unknown test {name!r}; available: {sorted(_TESTS)}.")
        if name in ("privtot", "private_kendall") and not _baselines_available():
            raise ValueError(f"test {name!r} needs privci.baselines, which is not installed.")
        label = t.pop("label", name)
        accepted = _test_options(name)
        bad = set(t) - accepted
        if bad:
            raise ValueError(f"test {name!r} does not take option(s) {sorted(bad)}; it takes "
                             f"{sorted(accepted)}.")
        opts = dict(t)
        for k in test_grid_keys:
            if k in accepted and k not in opts:
                opts[k] = _canonical(cell[k])
        spec = TestSpec(label=label, test=name, options=tuple(sorted(opts.items())))
        if spec.key not in seen:
            seen.add(spec.key)
            out.append(spec)
    return out


@dataclass(frozen=True)
class _Task:
    cell: Tuple[Tuple[str, Any], ...]      # data parameters
    cell_key: str
    words: Tuple[int, int]
    reps: Tuple[int, ...]
    specs: Tuple[TestSpec, ...]


def _seedseq(seed, *key):
    root = np.random.SeedSequence(seed)
    return np.random.SeedSequence(root.entropy, spawn_key=tuple(root.spawn_key) + tuple(key))


def _limit_threads():
    """Inside a Dask worker: one numba thread (BLAS threads are set by the nanny env)."""
    try:
        from distributed import get_worker
        get_worker()
    except (ImportError, ValueError):
        return
    try:
        import numba
        if numba.get_num_threads() != 1:
            numba.set_num_threads(1)
    except Exception:  # pragma: no cover - numba always present with privci
        pass


def _run_task(task, data_fn, seed, alpha, test_grid_keys):
    """Run every test of one (cell, reps) task; returns a list of row dicts."""
    _limit_threads()
    cell = dict(task.cell)
    rows = []
    for rep in task.reps:
        data = data_fn(rng=np.random.default_rng(_seedseq(seed, *task.words, rep)), **cell)
        for spec in task.specs:
            rng = np.random.default_rng(_seedseq(seed, *task.words, rep,
                                                 *_hash_words({"key": spec.key})))
            t0 = time.perf_counter()
            err = ""
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                try:
                    stat, pval = _TESTS[spec.test](data, rng, alpha, **dict(spec.options))
                except Exception as exc:  # recorded, not raised: one bad cell must not kill a run
                    stat, pval, err = math.nan, math.nan, f"{type(exc).__name__}: {exc}"
            secs = time.perf_counter() - t0
            opts = dict(spec.options)
            row = {"seed": seed, "cell_key": task.cell_key, "test_key": spec.key, "rep": rep,
                   "label": spec.label, "test": spec.test}
            row.update(cell)
            for k in test_grid_keys:
                row[k] = opts.get(k, math.nan)
            row["options"] = _json({k: v for k, v in opts.items() if k not in test_grid_keys})
            pval = float(pval) if pval is not None else math.nan
            row.update({"statistic": float(stat), "pvalue": pval,
                        "reject": int(pval <= alpha) if np.isfinite(pval) else -1,
                        "seconds": secs, "error": err})
            rows.append(row)
    return rows


# --------------------------------------------------------------------------- CSV

def load_results(path):
    """Read a results CSV written by :func:`run` (full float precision)."""
    import pandas as pd
    _repair_tail(path)
    extra = {} if int(pd.__version__.split(".")[0]) >= 3 else {"float_precision": "round_trip"}
    df = pd.read_csv(path, keep_default_na=True, **extra,
                     dtype={"cell_key": str, "test_key": str, "label": str, "test": str,
                            "options": str, "error": str})
    df["error"] = df["error"].fillna("")
    return df


def _repair_tail(path):
    """Drop a partially written last line (a run killed mid-write)."""
    with open(path, "rb+") as fh:
        data = fh.read()
        if data and not data.endswith(b"\n"):
            cut = data.rfind(b"\n")
            fh.truncate(cut + 1 if cut >= 0 else 0)


def _append_rows(path, rows, columns, write_header):
    import pandas as pd
    df = pd.DataFrame(rows, columns=list(columns))
    with open(path, "a", newline="") as fh:
        df.to_csv(fh, header=write_header, index=False)
        fh.flush()
        os.fsync(fh.fileno())


# --------------------------------------------------------------------------- the runner

def _client_for(scheduler, n_workers):
    """Return (client, cleanup callable) for the scheduler argument."""
    from dask.distributed import Client, LocalCluster
    if isinstance(scheduler, Client):
        return scheduler, (lambda: None)
    if isinstance(scheduler, str):
        client = Client(scheduler)
        return client, client.close
    if scheduler is None:
        import dask
        # Dask's Nanny writes pre-spawn-environ into *this* process's os.environ and never
        # restores it; a leaked NUMBA_NUM_THREADS=1 breaks later numba compiles here.
        saved = {k: os.environ.get(k) for k in _WORKER_ENV}

        def restore_env():
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
        try:
            with dask.config.set({f"distributed.nanny.pre-spawn-environ.{k}": v
                                  for k, v in _WORKER_ENV.items()}):
                cluster = LocalCluster(n_workers=n_workers or os.cpu_count() or 1,
                                       threads_per_worker=1, processes=True,
                                       dashboard_address=None, env=dict(_WORKER_ENV))
        finally:
            restore_env()
        client = Client(cluster)

        def cleanup():
            client.close()
            cluster.close()
            restore_env()
        return client, cleanup
    raise TypeError("`scheduler` must be None (local Dask cluster), 'serial', a 'tcp://...' "
                    f"address or a dask.distributed.Client; got {scheduler!r} instead.")


def _auto_chunk(n):
    # aim at tasks of roughly 1e7 n-squared units (~0.1-1 s of KRR) to amortise overhead
    return int(max(1, min(50, 1e7 // max(int(n), 1) ** 2)))


def run(tests, grid, *, n_reps, seed, data=simulate.paper_data, alpha=0.05, out=None,
        scheduler=None, n_workers=None, chunk_size=None, progress=None):
    """Run a simulation grid: every test at every grid point, ``n_reps`` times.

    Parameters
    ----------
    tests : list of str or dict
        Test names (see :func:`available_tests`) or dicts
        ``{"test": name, "label": ..., **fixed options}``, e.g.
        ``{"test": "privgcm", "ridge_lambda": 5.0, "kernel_sigma": 0.5}``.
        Options are the keyword arguments of the test (``epsilon``, ``m``,
        ``ridge_lambda``, ``kernel_sigma``, ``kernel_approximation``,
        ``n_features``, ``alternative``, ``n_subsets``, ``n_clusters``,
        ``center`` for the GCM, ``center_share`` for PrivGCM: the fraction of
        epsilon given to ``center_epsilon``);
        ``ridge_lambda`` may be the string ``"c/n"`` for c divided by the
        sample size.
    grid : dict of lists (Cartesian product) or list of dicts
        Keys that are parameters of ``data`` (for :func:`privci.simulate.paper_data`:
        ``n, d, s, beta, bound_sd``) define data cells; the other keys (e.g.
        ``epsilon``, ``m``) are test options, applied to the tests that take
        them (a test that does not take a key is run once per data cell and
        gets NaN in that column).
    n_reps : int
        Replications per data cell.
    seed : int
        Root of the ``numpy.random.SeedSequence`` (see the module docstring).
    data : callable, default :func:`privci.simulate.paper_data`
        ``data(rng=Generator, **cell) -> CIData``.  Must be picklable for
        Dask (module-level functions and :class:`privci.simulate.TableSubsampler` are).
    alpha : float, default 0.05
        Rejection means ``pvalue <= alpha``.
    out : path, optional
        CSV file to append results to and to resume from.
    scheduler : None, "serial", "tcp://..." or dask.distributed.Client, default None
        None starts a LocalCluster with ``n_workers`` (default: all cores)
        single-threaded worker processes and closes it at the end;
        ``"serial"`` runs in this process without Dask.
    n_workers : int, optional
        Workers of the LocalCluster (``scheduler=None`` only).
    chunk_size : int, optional
        Replications per task; default chosen from n (many per task at small n).
    progress : bool or None
        tqdm progress bar; None shows it when stderr is a terminal.

    Returns
    -------
    pandas.DataFrame
        One row per (cell, rep, test), sorted by grid order, rep, test order:
        ``seed, cell_key, test_key, rep, label, test``, the data parameters,
        the test-level grid parameters, ``options`` (JSON of the fixed
        options), ``statistic, pvalue, reject`` (1/0, -1 if the test failed),
        ``seconds`` (wall time of the test) and ``error``.  With ``out``, rows
        of this grid finished by earlier calls are read back from the file
        (replications >= ``n_reps`` and other grids in the file are left out).

    Examples
    --------
    >>> from privci import experiments
    >>> tab = experiments.run(["privgcm"], {"n": [100], "epsilon": [1.0]}, n_reps=3, seed=1,
    ...                       scheduler="serial", progress=False)
    >>> tab[["rep", "test", "n", "epsilon"]].values.tolist()
    [[0, 'privgcm', 100, 1.0], [1, 'privgcm', 100, 1.0], [2, 'privgcm', 100, 1.0]]
    """
    import pandas as pd
    n_reps = V.check_int(n_reps, "n_reps", 1)
    seed = V.check_int(seed, "seed", 0)
    if not (isinstance(alpha, (int, float)) and 0 < alpha < 1):
        raise ValueError(f"`alpha` must be in (0, 1); got {alpha!r} instead.")
    if isinstance(tests, (str, dict)):
        tests = [tests]
    if not callable(data):
        raise TypeError(f"`data` must be callable; got {type(data).__name__} instead.")
    dkeys = _data_params(data)
    cells = _expand_grid(grid)
    gkeys = []
    for c in cells:
        for k in c:
            if k not in gkeys:
                gkeys.append(k)
    data_keys = [k for k in gkeys if k in dkeys]
    test_grid_keys = [k for k in gkeys if k not in dkeys]
    all_opts = set().union(*(_test_options(n) for n in _TESTS))
    bad = [k for k in test_grid_keys if k not in all_opts]
    if bad:
        raise ValueError(f"grid key(s) {bad} are neither parameters of the data function "
                         f"({sorted(dkeys)}) nor options of any test.")

    # data cells in grid order, each with the union of its test specs
    order: List[str] = []
    cell_info: Dict[str, dict] = {}
    for c in cells:
        dcell = {k: _canonical(c[k]) for k in data_keys if k in c}
        ckey = _hash_hex(dcell)
        specs = make_tests(tests, test_grid_keys, c)
        if ckey not in cell_info:
            order.append(ckey)
            cell_info[ckey] = {"cell": dcell, "specs": []}
        have = {s.key for s in cell_info[ckey]["specs"]}
        cell_info[ckey]["specs"].extend(s for s in specs if s.key not in have)

    columns = list(META_COLUMNS) + data_keys + test_grid_keys + ["options"] + list(RESULT_COLUMNS)
    done = set()
    write_header = True
    if out is not None and os.path.exists(out) and os.path.getsize(out) > 0:
        prev = load_results(out)
        if list(prev.columns) != columns:
            raise ValueError(f"{out} has columns {list(prev.columns)}, which do not match this "
                             f"run's {columns}; use another file.")
        prev = prev[prev["seed"] == seed]
        done = set(zip(prev["cell_key"], prev["test_key"], prev["rep"].astype(int)))
        write_header = False

    tasks = []
    for ckey in order:
        info = cell_info[ckey]
        words = _hash_words(info["cell"])
        chunk = chunk_size or _auto_chunk(info["cell"].get("n", 1000))
        pending: Dict[Tuple[str, ...], List[int]] = {}
        for rep in range(n_reps):
            missing = tuple(s.key for s in info["specs"] if (ckey, s.key, rep) not in done)
            if missing:
                pending.setdefault(missing, []).append(rep)
        for missing, reps in pending.items():
            specs = tuple(s for s in info["specs"] if s.key in missing)
            for i in range(0, len(reps), chunk):
                tasks.append(_Task(cell=tuple(info["cell"].items()), cell_key=ckey, words=words,
                                   reps=tuple(reps[i:i + chunk]), specs=specs))

    new_rows: List[dict] = []
    n_total = sum(len(t.reps) * len(t.specs) for t in tasks)
    bar = _progress(progress, n_total)

    def consume(rows):
        new_rows.extend(rows)
        if out is not None:
            nonlocal write_header
            _append_rows(out, rows, columns, write_header)
            write_header = False
        if bar is not None:
            bar.update(len(rows))

    try:
        if tasks and scheduler == "serial":
            for t in tasks:
                consume(_run_task(t, data, seed, alpha, test_grid_keys))
        elif tasks:
            from dask.distributed import as_completed
            client, cleanup = _client_for(scheduler, n_workers)
            try:
                data_f = client.scatter(data, broadcast=True) \
                    if isinstance(data, simulate.TableSubsampler) else data
                futs = [client.submit(_run_task, t, data_f, seed, alpha, test_grid_keys,
                                      pure=False) for t in tasks]
                for fut in as_completed(futs):
                    consume(fut.result())
                    fut.release()
            finally:
                cleanup()
    finally:
        if bar is not None:
            bar.close()

    table = pd.DataFrame(new_rows, columns=columns)
    if out is not None:
        # exactly this run's rows: the file may hold more replications or other grids
        table = load_results(out)
        wanted = {(ck, s.key) for ck in order for s in cell_info[ck]["specs"]}
        keep = [(c, t) in wanted for c, t in zip(table["cell_key"], table["test_key"])]
        table = table[np.asarray(keep, dtype=bool) & (table["seed"] == seed).to_numpy()
                      & (table["rep"] < n_reps).to_numpy()]
        table = table.drop_duplicates(["cell_key", "test_key", "rep"])
    return _sort(table, order, cell_info)


def _progress(progress, total):
    if progress is False or total == 0:
        return None
    try:
        from tqdm.auto import tqdm
    except ImportError:  # pragma: no cover
        return None
    return tqdm(total=total, unit="test", disable=None if progress is None else False,
                smoothing=0.05)


def _sort(table, order, cell_info):
    pos = {k: i for i, k in enumerate(order)}
    tpos = {}
    for ckey in order:
        for j, s in enumerate(cell_info[ckey]["specs"]):
            tpos[(ckey, s.key)] = j
    t = table.copy()
    t["_c"] = t["cell_key"].map(pos).fillna(len(order))
    t["_t"] = [tpos.get((c, k), 10 ** 6) for c, k in zip(t["cell_key"], t["test_key"])]
    t = t.sort_values(["_c", "rep", "_t"], kind="stable").drop(columns=["_c", "_t"])
    return t.reset_index(drop=True)


# --------------------------------------------------------------------------- summaries

def wilson_interval(k, n, level=0.95):
    """Wilson score interval for a binomial proportion k / n (vectorised)."""
    from scipy.special import ndtri
    k = np.asarray(k, dtype=np.float64)
    n = np.asarray(n, dtype=np.float64)
    z = ndtri(0.5 + level / 2.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        p = k / n
        den = 1.0 + z * z / n
        centre = (p + z * z / (2.0 * n)) / den
        half = z / den * np.sqrt(p * (1.0 - p) / n + z * z / (4.0 * n * n))
    return centre - half, centre + half


def summarise(table, *, level=0.95, by=None):
    """Rejection rates with Wilson Monte Carlo confidence intervals.

    Parameters
    ----------
    table : pandas.DataFrame
        The output of :func:`run` or :func:`load_results`.
    level : float, default 0.95
    by : list of str, optional
        Grouping columns; default: label, test, the data and grid parameters
        and ``options``.

    Returns
    -------
    pandas.DataFrame
        ``by`` columns, ``n_reps`` (successful replications), ``n_failed``,
        ``rejections``, ``rate``, ``lo``, ``hi`` (the interval) and
        ``mean_seconds``.
    """
    import pandas as pd
    if by is None:
        skip = set(META_COLUMNS) | set(RESULT_COLUMNS) | {"options"}
        by = ["label", "test"] + [c for c in table.columns if c not in skip] + ["options"]
    ok = table["reject"] >= 0
    g = table.assign(_ok=ok.astype(int), _rej=(table["reject"] == 1).astype(int),
                     _fail=(~ok).astype(int))
    s = g.groupby(by, dropna=False, sort=False).agg(
        n_reps=("_ok", "sum"), n_failed=("_fail", "sum"), rejections=("_rej", "sum"),
        mean_seconds=("seconds", "mean")).reset_index()
    s["rate"] = s["rejections"] / s["n_reps"]
    s["lo"], s["hi"] = wilson_interval(s["rejections"].to_numpy(), s["n_reps"].to_numpy(), level)
    cols = by + ["n_reps", "n_failed", "rejections", "rate", "lo", "hi", "mean_seconds"]
    return pd.DataFrame(s[cols])
