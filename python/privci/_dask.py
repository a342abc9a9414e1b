"""One private test over the partitions of a Dask array, on a Dask cluster (issue 17).

:func:`privci.privgcm`, :func:`privci.privcrt` and :func:`privci.gcm` hand their
call to this module when ``x``, ``y`` or ``z`` is a Dask collection (a
``dask.array.Array``, or a Dask DataFrame / Series whose columns are the
variables).  The test runs as map-reduce passes over the row partitions on the
current Dask client (``distributed.get_client()``; without one, a LocalCluster
with one single-threaded worker per core, started once per process).  z is
shifted and scaled by the public ``z_center`` and ``z_scale`` elementwise (lazily).

PrivGCM with ``regression="spline"`` (the default when z is given; see
:mod:`privci._spline`):

0. (validation) every partition reports whether it holds NaN or inf, so bad
   data raise the in-memory path's error before any budget is charged; with
   ``center_epsilon`` also the column sums of the clipped, scaled data, whose
   noisy means are drawn on a worker;
1. every partition computes the spline basis phi of its rows of z, the labels
   of its rows in the data-independent half split
   (:func:`privci._private.block_labels` on its global row range) and returns
   the upper triangle of phi^T phi and phi^T u over its rows in half A (u = the
   x columns) and in half B (u = the y columns); the sums are reduced by a tree
   of additions and released on the client (Laplace on the Gram matrices and
   cross-products, as :func:`privci._spline.release_fit`), which solves for the
   public coefficients;
2. every partition recomputes phi, its residuals with the released
   coefficients (clipped to [-1, 1]), its products and its partial block sums;
   the final task adds them and draws the Laplace noise (sensitivity 2 p q) on
   its worker; the fit's variance terms, the bias allowance and the t statistic
   run on the client, on released values only.

PrivGCM with ``regression="krr"``, PrivCRT and the GCM test need
``kernel_approximation="rff"`` when z is given:

0. validation, as above;
1. (z given) every partition accumulates G_j = Phi_j^T Phi_j and
   B_j = Phi_j^T U_j (random Fourier features, 2D columns); the sums are
   reduced by a tree of additions and the ridge system (G + n lambda I) w = B
   is solved once on the client (G and B are sums over all rows, D^2 numbers);
2. every partition recomputes its features, its residuals U_j - Phi_j w
   (clipped to the proved bound) and its residual products, and returns
     - with blocks (k < n): its partial block sums (k numbers per product
       column; the labels of its rows come from
       :func:`privci._private.block_labels` on its global row range), reduced
       to the k block sums by the final task, which adds the Laplace noise on
       that worker and returns only the noisy sums;
     - one block per row (k = n): the products plus Laplace noise, drawn on
       the worker (OpenDP's sampler with the scale and grid certified for the
       whole n-vector, or the seeded numpy stream advanced to the partition's
       first row), and only the sum and the sum of squares of the noisy
       products leave the worker;
     - PrivCRT: its partial statistics T_j (m + 1 numbers); the final task
       sums them and runs report-noisy-max on the worker, so only the selected
       rank leaves it.

Runs over at least :data:`PROGRESS_MIN_ROWS` rows show Dask's progress bar for every
pass (``distributed.progress``); the environment variable ``PRIVCI_DASK_PROGRESS=1``
forces it on, ``=0`` off.

No un-noised per-row value leaves a worker: partial block sums, G_j and B_j
(and the spline's per-half Gram matrices and cross-products) are sums over rows,
and the client sees only such sums (the KRR path's G, B do not depend on the
noise-free products; the spline's are released with noise before any use) and
noisy releases.  Memory per worker is bounded by the partition size times the
number of columns and by (2D)^2 (or the spline basis width squared), never by n.

Equality with the in-memory path: the same data, ``rng`` (an int or a
generator) and ``feature_rng`` give the same result up to floating-point
reduction order (the seeded numpy noise is drawn in the in-memory order:
centre noise, block entropy, block noise; with the spline: centre noise, the
half split's entropy, the x fit's noise (Gram, cross-products), the y fit's,
the block entropy, the block noise; per-row noise from the PCG64
stream advanced by the partition's first index).  The sensitivity and the
privacy record are those of the in-memory path; the method says "on Dask".
"""

from __future__ import annotations

import math
import os
import threading

import numpy as np

from . import _kernels, _validation as V

__all__ = ["is_dask", "privgcm", "gcm", "privcrt", "PROGRESS_MIN_ROWS"]

#: Runs over at least this many rows show Dask's progress bar (environment
#: variable PRIVCI_DASK_PROGRESS=1 forces it on, =0 off).
PROGRESS_MIN_ROWS = 1_000_000

_REDUCE_FAN_IN = 8
_LOCAL = {}
_LOCAL_LOCK = threading.Lock()


# --------------------------------------------------------------------------- inputs

def _is_dask_value(value):
    if value is None:
        return False
    mod = type(value).__module__ or ""
    return mod.split(".")[0] in ("dask", "dask_expr") and hasattr(value, "__dask_graph__")


def is_dask(*values):
    """True when any of ``values`` is a Dask collection (without importing Dask)."""
    return any(_is_dask_value(v) for v in values)


def _client():
    """The current Dask client, or a LocalCluster started once for this process."""
    from distributed import Client, LocalCluster, get_client
    try:
        return get_client()
    except ValueError:
        pass
    with _LOCAL_LOCK:
        if "client" not in _LOCAL:
            workers = max(1, min(os.cpu_count() or 1, 8))
            cluster = LocalCluster(n_workers=workers, threads_per_worker=1,
                                   dashboard_address=None)
            _LOCAL["client"] = Client(cluster)
        return _LOCAL["client"]


def _as_dask(value, name, *, allow_none=False, min_rows=1):
    """``value`` as a float64 Dask array (n, p) with known chunk sizes.

    The type, shape and dtype checks (and their messages) are those of
    :func:`privci._validation.as_data`; the finiteness check runs as a pass
    over the partitions (:func:`_check_finite`).  Non-Dask inputs are validated
    in memory and wrapped.
    """
    import dask.array as da
    if value is None:
        if allow_none:
            return None
        raise TypeError(f"`{name}` must be array-like; got None instead.")
    if not _is_dask_value(value):
        return da.from_array(V.as_data(value, name, min_rows=min_rows), chunks=(-1, -1))
    if hasattr(value, "to_dask_array"):      # Dask DataFrame or Series
        value = value.to_dask_array(lengths=True)
    if not isinstance(value, da.Array):
        raise TypeError(f"`{name}` must be a Dask array, DataFrame or Series; got "
                        f"{type(value).__name__} instead.")
    dt = value.dtype
    if dt == object or not (np.issubdtype(dt, np.number) or dt == bool):
        raise TypeError(f"`{name}` must be numeric; got an array of dtype {dt} instead.")
    if np.issubdtype(dt, np.complexfloating):
        raise TypeError(f"`{name}` must be real-valued; got dtype {dt} instead.")
    if any(math.isnan(c) for cs in value.chunks for c in cs):
        value = value.compute_chunk_sizes()
    if value.ndim == 1:
        value = value.reshape(-1, 1)
    elif value.ndim != 2:
        raise ValueError(f"`{name}` must be 1-D (n,) or 2-D (n, p); got shape {value.shape} "
                         "instead.")
    if value.shape[0] < min_rows or value.shape[1] < 1:
        raise ValueError(f"`{name}` must have at least {min_rows} rows and 1 column; "
                         f"got shape {value.shape} instead.")
    return value.astype(np.float64)


def _align(*arrays, ref=0):
    """Rechunk every array to the row partitions of ``arrays[ref]``, columns in one chunk."""
    rows = arrays[ref].chunks[0]
    return [None if a is None else a.rechunk((rows, (a.shape[1],))) for a in arrays]


def _blocks(arr):
    """The row partitions of an aligned array as a list of delayed numpy blocks."""
    return list(arr.to_delayed().ravel())


def _offsets(arr):
    starts = np.concatenate([[0], np.cumsum(arr.chunks[0])]).astype(np.int64)
    return list(zip(starts[:-1].tolist(), starts[1:].tolist()))


def _finite_flags(block):
    return np.array([bool(np.isnan(block).any()), bool(np.isinf(block).any())])


def _tree_sum(parts):
    """Sum a list of delayed values by a tree of additions (fan-in 8)."""
    from dask import delayed
    parts = list(parts)
    while len(parts) > 1:
        parts = [delayed(_sum_list)(parts[i:i + _REDUCE_FAN_IN])
                 for i in range(0, len(parts), _REDUCE_FAN_IN)]
    return parts[0]


def _sum_list(items):
    from ._source import sum_parts
    return sum_parts(items)


def _show_progress(n):
    flag = os.environ.get("PRIVCI_DASK_PROGRESS")
    if flag is not None:
        return flag not in ("0", "", "false", "False")
    return n >= PROGRESS_MIN_ROWS


def _run(client, objs, n):
    """Compute delayed objects on the client (progress bar for long runs); gather results."""
    futures = client.compute(list(objs))
    if _show_progress(n):
        from distributed import progress
        progress(futures)
    return client.gather(futures)


def _check_finite(client, named, n):
    """Raise the in-memory path's error when an input holds NaN or inf (one pass)."""
    from dask import delayed
    tasks = [_tree_sum([delayed(_finite_flags)(b) for b in _blocks(a)])
             for _, a in named]
    flags = _run(client, tasks, n)
    for (name, _), f in zip(named, flags):
        if f.any():
            kinds = [k for k, bad in zip(("NaN", "inf"), f) if bad]
            raise ValueError(f"`{name}` contains {' and '.join(kinds)}; the data must be "
                             "finite numbers: remove or impute them first.")


def _rng_state(rng):
    return None if rng is None else rng.bit_generator.state


def _restore(user_rng, state):
    if user_rng is not None and state is not None:
        user_rng.bit_generator.state = state


def _advanced(state, steps):
    """A generator at ``state`` advanced by ``steps`` 64-bit draws (PCG64 / PCG64DXSM)."""
    name = state["bit_generator"]
    bg = getattr(np.random, name)()
    bg.state = state
    if steps:
        bg.advance(int(steps))
    return np.random.Generator(bg)


# --------------------------------------------------------------------------- per partition

def _scaled_block(xb, yb, xc, xbound, yc, ybound, means):
    from ._source import scaled_block
    return scaled_block(xb, yb, xc, xbound, yc, ybound, means)


def _raw_block(xb, yb, centre):
    U = np.concatenate([xb, yb], axis=1)
    return U if centre is None else U - centre


def _raw_colsum_block(xb, yb):
    return np.concatenate([xb, yb], axis=1).sum(axis=0)


def _gram_block(zb, U, freqs_t):
    """Pass 1 on one partition: (Phi^T Phi upper triangle, Phi^T U)."""
    from .regression import _RFF_CHUNK_BYTES, blas
    from .mechanisms import quiet
    zb = np.ascontiguousarray(zb)
    m = 2 * freqs_t.shape[1]
    nb = zb.shape[0]
    rows = max(256, min(nb, _RFF_CHUNK_BYTES // (8 * m)))
    buf = np.empty((rows, m))
    G = np.zeros((m, m), order="F")
    B = np.zeros((m, U.shape[1]))
    with quiet():
        for start in range(0, nb, rows):
            stop = min(nb, start + rows)
            P = buf[: stop - start]
            _kernels.rff_features_into(zb, freqs_t, start, P)
            G = blas.dsyrk(1.0, P.T, beta=1.0, c=G, trans=0, lower=0, overwrite_c=1)
            B += P.T @ U[start:stop]
    return np.asarray(G), B


def _solve(G, B, shift):
    from .regression import lapack
    m = G.shape[0]
    G = np.array(G, order="F", copy=True)
    G.ravel(order="F")[:: m + 1] += shift
    c, info = lapack.dpotrf(G, lower=0, clean=0, overwrite_a=1)
    if info != 0:  # pragma: no cover - G + shift I is positive definite for shift > 0
        raise np.linalg.LinAlgError("ridge system on random features is not positive definite")
    w, info = lapack.dpotrs(c, np.asfortranarray(B), lower=0)
    if info != 0:  # pragma: no cover
        raise np.linalg.LinAlgError("ridge system on random features could not be solved")
    return np.ascontiguousarray(w)


def _residual_block(U, zb, freqs_t, w, rbound):
    """Residuals of one partition (clipped to ``rbound`` when given)."""
    from .mechanisms import quiet
    with quiet():
        if zb is None:
            resid = U
        else:
            resid = _kernels.rff_residuals(np.ascontiguousarray(zb), freqs_t, w,
                                           np.ascontiguousarray(U))
        if rbound is not None:
            resid = np.clip(np.nan_to_num(resid, nan=0.0), -rbound, rbound)
    return resid


def _products(resid, p):
    return _kernels.residual_products(np.ascontiguousarray(resid[:, :p]),
                                      np.ascontiguousarray(resid[:, p:]))


def _gcm_pass2(xb, yb, zb, spec, start, stop):
    """Pass 2 of PrivGCM on one partition; returns aggregates only (see module doc)."""
    from ._private import block_labels, block_sums
    from .mechanisms import _noise_chunk, quiet, sanitize
    U = _scaled_block(xb, yb, *spec["scaling"], spec["means"])
    resid = _residual_block(U, zb, spec["freqs_t"], spec["w"], spec["rbound"])
    prod = _products(resid, spec["p"])
    del U, resid
    if spec["mode"] == "blocks":
        labels = block_labels(spec["n"], spec["k"], spec["entropy"], start, stop)
        with quiet():
            return block_sums(prod, labels, spec["k"])
    # one block per row: noise here, only sufficient statistics leave the worker
    with quiet():
        vals = sanitize(prod, spec["value_bound"])
    if spec["state"] is not None:
        gen = _advanced(spec["state"], start * vals.shape[1])
        noisy = vals + gen.laplace(0.0, spec["scale"], size=vals.shape)
    else:
        noisy = _noise_chunk(np.ascontiguousarray(vals).ravel(), spec["scale"],
                             spec["grid"]).reshape(vals.shape)
    col = noisy[:, 0]
    return np.array([float(np.sum(col)), float(np.sum(col * col))])


def _noisy_reduce(parts, sensitivity, epsilon, state, value_bound):
    """Final task: sum partial aggregates and add Laplace noise on this worker."""
    from .mechanisms import laplace_mechanism, quiet
    total = _sum_list(parts)
    rng = None if state is None else _advanced(state, 0)
    with quiet():
        released, info = laplace_mechanism(total, sensitivity, epsilon, rng,
                                           value_bound=value_bound)
    return released, info, _rng_state(rng)


def _gcm_plain_pass2(xb, yb, zb, centre, freqs_t, w, p):
    U = _raw_block(xb, yb, centre)
    resid = _residual_block(U, zb, freqs_t, w, None)
    col = _products(resid, p)[:, 0]
    return np.array([float(np.sum(col)), float(np.sum(col * col))])


def _gcm_resid_block(xb, yb, zb, centre, freqs_t, w):
    return _residual_block(_raw_block(xb, yb, centre), zb, freqs_t, w, None)


def _release_on_worker(parts, release, state):
    """Final task of ``DaskSource.map_reduce_release``: add the partial sums and release
    them here, with the seeded generator's state (None: OpenDP) carried in and out."""
    from .mechanisms import quiet
    total = _sum_list(parts)
    rng = None if state is None else _advanced(state, 0)
    with quiet():
        out = release(total, rng=rng)
    return out, _rng_state(rng)


class DaskSource:
    """The rows of aligned Dask arrays: the pass functions run on every partition (its
    global row range given), partial sums are added by a tree, and a release runs on the
    worker where the sum lands (see ``privci._source``)."""

    def __init__(self, client, xd, yd, zd, n):
        self.client, self.n = client, n
        self.xbl, self.ybl = _blocks(xd), _blocks(yd)
        self.zbl = _blocks(zd) if zd is not None else [None] * len(self.xbl)
        self.offsets = _offsets(xd)
        self.n_partitions = len(self.xbl)
        self.caption = _dask_caption(self.n_partitions)

    def _parts(self, fn, spec):
        from dask import delayed
        return [delayed(fn)(a, b, zz, spec, s, e)
                for a, b, zz, (s, e) in zip(self.xbl, self.ybl, self.zbl, self.offsets)]

    def map_reduce(self, fn, spec):
        return _run(self.client, [_tree_sum(self._parts(fn, spec))], self.n)[0]

    def map_reduce_release(self, fn, spec, release, rng):
        from dask import delayed
        task = delayed(_release_on_worker)(self._parts(fn, spec), release, _rng_state(rng))
        out, state = _run(self.client, [task], self.n)[0]
        _restore(rng, state)
        return out


# --------------------------------------------------------------------------- shared steps

def _inputs(x, y, z, zname_required=False):
    xd = _as_dask(x, "x", min_rows=1)
    yd = _as_dask(y, "y", min_rows=1)
    zd = _as_dask(z, "z", allow_none=not zname_required, min_rows=1)
    n = xd.shape[0]
    items = [("x", xd), ("y", yd)] + ([("z", zd)] if zd is not None else [])
    for name, a in items[1:]:
        if a.shape[0] != n:
            lens = ", ".join(f"`{k}` has {v.shape[0]}" for k, v in items)
            raise ValueError(f"`x`, `y` and `z` must have the same number of rows; {lens}.")
    ref = next((i for i, v in enumerate((x, y, z)) if _is_dask_value(v)), 0)
    xd, yd, zd = _align(xd, yd, zd, ref=ref)
    return xd, yd, zd, n


def _need_rff(zd, kernel_approximation, test):
    if zd is not None and kernel_approximation != "rff":
        raise ValueError(f"{test} on Dask arrays needs kernel_approximation='rff' (the exact "
                         "kernel builds an n x n Gram matrix on one machine); got "
                         f"kernel_approximation={kernel_approximation!r} instead.")


def _ridge_weights(client, zd, U_blocks, freqs, shift, n):
    """Pass 1: reduce (G, B) over partitions and solve once on the client."""
    from dask import delayed
    freqs_t = np.ascontiguousarray(freqs.T)
    parts = [delayed(_gram_block)(zb, ub, freqs_t) for zb, ub in zip(_blocks(zd), U_blocks)]
    G, B = _run(client, [_tree_sum(parts)], n)[0]
    return freqs_t, _solve(G, B, shift)


def _dask_caption(n_parts):
    return f" (on Dask, {n_parts} partitions)"


# --------------------------------------------------------------------------- PrivGCM

def _krr_mechanism(source, zd, plan, par, inp, scaling, means, xc, yc, centre):
    """The kernel ridge mechanism of privgcm on Dask (random features, two passes)."""
    from dask import delayed

    from . import _gcm_pipeline as P
    from ._private import block_counts, block_statistic, new_entropy
    from ._stats import _statistic_from_sums
    from .mechanisms import NoiseInfo, _grid_exponent, _opendp_laplace
    from .regression import rff_frequencies
    from .results import Release

    n, k, p, q, user_rng = plan.n, plan.k, inp.p, inp.q, par.rng
    eps_test, c = plan.test_epsilon, inp.p * inp.q
    client, xbl, ybl = source.client, source.xbl, source.ybl
    zbl, offsets = source.zbl, source.offsets
    freqs_t = w = None
    if zd is not None:
        freqs = rff_frequencies(zd.shape[1], inp.n_features, inp.sigma, inp.feature_rng)
        U_parts = [delayed(_scaled_block)(a, b, *scaling, means) for a, b in zip(xbl, ybl)]
        freqs_t, w = _ridge_weights(client, zd, U_parts, freqs, n * inp.lam, n)
    spec = {"scaling": scaling, "means": means, "freqs_t": freqs_t, "w": w,
            "rbound": inp.rbound, "p": p, "n": n, "k": k}
    value_bound = inp.rbound ** 2
    if k == n:
        spec["mode"] = "rows"
        spec["value_bound"] = value_bound
        if user_rng is None:
            _, scale, spent = _opendp_laplace(float(inp.sensitivity), float(eps_test), n * c)
            grid = _grid_exponent(n * c, float(inp.sensitivity))
            spec.update(state=None, scale=scale, grid=grid)
            info = NoiseInfo(f"laplace (OpenDP make_laplace, grid 2^{grid}, drawn on the Dask "
                             "workers)", scale, True, spent)
        else:
            state = user_rng.bit_generator.state
            if state.get("bit_generator") not in ("PCG64", "PCG64DXSM"):
                raise TypeError("`rng` for PrivGCM on Dask with one block per row must be an "
                                "int or a numpy Generator on PCG64 (its stream is advanced to "
                                f"each partition); got a {state.get('bit_generator')} "
                                "generator instead.")
            scale = inp.sensitivity / eps_test
            spec.update(state=state, scale=scale, grid=None)
            info = NoiseInfo("laplace (numpy)", scale, False, eps_test)
        parts = [delayed(_gcm_pass2)(a, b, zz, spec, s, e)
                 for a, b, zz, (s, e) in zip(xbl, ybl, zbl, offsets)]
        s1, s2 = _run(client, [_tree_sum(parts)], n)[0]
        if user_rng is not None:
            _restore(user_rng, _rng_state(_advanced(state, n * c)))
        stat, pval = _statistic_from_sums(s1, s2, n, par.mode, stacklevel=5)
        stat_name = "Z"
    else:
        spec["mode"] = "blocks"
        spec["entropy"] = new_entropy(user_rng)
        counts = block_counts(n, k)
        parts = [delayed(_gcm_pass2)(a, b, zz, spec, s, e)
                 for a, b, zz, (s, e) in zip(xbl, ybl, zbl, offsets)]
        task = delayed(_noisy_reduce)(parts, inp.sensitivity, eps_test, _rng_state(user_rng),
                                      value_bound * counts.max())
        released, info, state = _run(client, [task], n)[0]
        _restore(user_rng, state)
        boot_rng = user_rng if user_rng is not None else np.random.default_rng()
        stat, pval, stat_name = block_statistic(released, counts, par.n_sim, par.mode,
                                                boot_rng)
    what = "block sums" if k < n else "residual products"
    releases = ((centre,) if centre is not None else ()) + (
        Release(f"{k} {what}", eps_test, inp.sensitivity, info.scale, info.mechanism),)
    return P.MechanismOutput(
        statistic=stat, pvalue=pval, statistic_name=stat_name, noise=info,
        hardened=info.hardened,
        mechanism=f"{info.mechanism} on {k} {what} ({inp.kind} sensitivity)",
        sensitivity=inp.sensitivity, sensitivity_kind=inp.kind, x_bound=inp.xb,
        y_bound=inp.yb, x_center=np.asarray(xc), y_center=np.asarray(yc), releases=releases,
        ridge_lambda=inp.lam, kernel_sigma=inp.sigma if zd is not None else None,
        n_sim=par.n_sim if c > 1 else None)


def _shift_scale(block, zc, zs):
    """(z - zc) / zs of one partition, without warnings, overflow mapped to +-max float
    (``_gcm_pipeline.finite``, as in memory)."""
    from ._gcm_pipeline import finite
    with np.errstate(all="ignore"):
        out = block - zc
        if zs is not None:
            out = out / zs
        return finite(out)


def privgcm(x, y, z=None, **call):
    """:func:`privci.privgcm` over the partitions of Dask arrays (see the module doc): the
    same parameters, release plan and result as in memory; only the passes differ."""
    from dask import delayed

    from . import _gcm_pipeline as P
    z_scale, z_center = call.get("z_scale"), call.get("z_center")
    if call.get("regression") == "spline" and z is not None and (z_scale is None
                                                                 or z_center is None):
        raise ValueError("on Dask arrays the spline fit needs public `z_center` and `z_scale` "
                         "(in memory they default to private 'auto' values, not available on "
                         "Dask yet: release them on a sample with privci.bounds.private_bounds "
                         "and private_scale, or pass known values, both in z's own units as "
                         "privgcm's privacy.bounds states them); got "
                         f"z_center={z_center!r}, z_scale={z_scale!r}.")
    if call.get("bounds_epsilon") is not None or any(
            isinstance(call.get(v), str) for v in ("x_bound", "y_bound", "x_center",
                                                   "y_center", "z_scale", "z_center")):
        raise ValueError("'auto' bounds, centres and z scales are not available on Dask arrays "
                         "yet: release them first with privci.bounds.private_bounds (or "
                         "private_scale) on a sample or pass public values.")
    if call.get("tighten", "auto") is True:
        raise ValueError("`tighten=True` is not available on Dask arrays yet (it releases a "
                         "private quantile of the rows); pass tighten='auto' (on Dask: the "
                         "public windows as given) or False.")
    call = dict(call, tighten=False if call.get("tighten", "auto") == "auto"
                else call.get("tighten"))
    par = P.gcm_params(conditional=z is not None, **call)
    xd, yd, zd, n = _inputs(x, y, z)
    if par.regression == "krr":
        _need_rff(zd, par.krr["kernel_approximation"], "PrivGCM with regression='krr'")
    V.check_min_n(n, 2, "PrivGCM")
    p, q, d = xd.shape[1], yd.shape[1], 0 if zd is None else zd.shape[1]
    # the in-memory validation of every option, on placeholder rows; then the row count
    inp = par.inputs(np.zeros((2, p)), np.zeros((2, q)), None if zd is None else np.zeros((2, d)))
    inp.n = n
    zc, zs = P.public_z(par, d)
    plan = P.gcm_plan(par, n, d, p, q)
    if plan.k == n and p * q > 1 and not par.spline:
        raise ValueError("PrivGCM on Dask arrays with one block per row (n_blocks=None, or "
                         "'auto' with z and regression='krr') supports univariate x and y only "
                         "(the max statistic needs every noisy product); give an integer "
                         f"`n_blocks` for multivariate x or y (got {p} x {q} columns).")
    client = _client()
    _check_finite(client, [("x", xd), ("y", yd)] + ([("z", zd)] if zd is not None else []), n)
    composition = plan.charge(par.budget, "privgcm")
    if zd is not None and (np.any(zc != 0) or zs is not None):
        # public shift and scale of z, as in memory: (z - z_center) / z_scale, elementwise
        # (silently, and mapped back into the finite numbers: 1e308 - (-1e308) overflows)
        zd = zd.map_blocks(_shift_scale, zc, zs, dtype=np.float64)
    source = DaskSource(client, xd, yd, zd, n)
    # drawn first, as in memory: the released means of the clipped, scaled columns, then
    # U = clip(U - means, -1, 1) in every later pass
    means, xc, yc, centre = P.release_centres(source, plan, inp, par.rng)
    scaling = (inp.xc, inp.xb, inp.yc, inp.yb)
    if par.spline:
        out = P.spline_mechanism(source, plan, inp, scaling, means, xc, yc, centre, par.rng,
                                 par.mode)
    else:
        out = _krr_mechanism(source, zd, plan, par, inp, scaling, means, xc, yc, centre)
    return P.gcm_result(par, plan, inp, P.PublicReleases(), out, composition,
                        caption=source.caption)


# --------------------------------------------------------------------------- GCM

def gcm(x, y, z=None, **call):
    """:func:`privci.gcm` over the partitions of Dask arrays (univariate x and y, random
    Fourier features), with the in-memory options check (``_params.GCMOptions``).

    The residuals in the result are lazy Dask arrays (nothing n-long is
    gathered on the client).
    """
    import dask.array as da
    from dask import delayed

    from ._params import GCMOptions
    from ._stats import _method_name, _statistic_from_sums
    from .regression import rff_frequencies
    from .results import GCMResult

    xd, yd, zd, n = _inputs(x, y, z)
    conditional = zd is not None
    if conditional and not isinstance(call.get("regressor"), str):
        raise TypeError("`regressor` must be 'kernel_ridge' on Dask arrays (a scikit-learn "
                        "regressor needs all rows on one machine); got "
                        f"{type(call.get('regressor')).__name__} instead.")
    if conditional and call.get("regressor") == "kernel_ridge":
        _need_rff(zd, call.get("kernel_approximation"), "The GCM test")
    opt = GCMOptions(n, conditional, **call)
    p, q = xd.shape[1], yd.shape[1]
    if p * q > 1:
        raise ValueError("the GCM test on Dask arrays supports univariate x and y only (the "
                         "multivariate statistic needs every residual product on one machine); "
                         f"got {p} x {q} columns.")
    client = _client()
    named = [("x", xd), ("y", yd)] + ([("z", zd)] if conditional else [])
    _check_finite(client, named, n)
    xbl, ybl = _blocks(xd), _blocks(yd)
    zbl = _blocks(zd) if conditional else [None] * len(xbl)
    centre = None
    if opt.center:
        parts = [delayed(_raw_colsum_block)(a, b) for a, b in zip(xbl, ybl)]
        centre = _run(client, [_tree_sum(parts)], n)[0] / n
    freqs_t = w = None
    if conditional:
        freqs = rff_frequencies(zd.shape[1], opt.n_features, opt.sigma,
                                V.check_rng(opt.feature_rng))
        U_parts = [delayed(_raw_block)(a, b, centre) for a, b in zip(xbl, ybl)]
        freqs_t, w = _ridge_weights(client, zd, U_parts, freqs, n * opt.lam, n)
    parts = [delayed(_gcm_plain_pass2)(a, b, zz, centre, freqs_t, w, p)
             for a, b, zz in zip(xbl, ybl, zbl)]
    s1, s2 = _run(client, [_tree_sum(parts)], n)[0]
    stat, pval = _statistic_from_sums(s1, s2, n, opt.mode, stacklevel=3)
    zarg = zd if conditional else da.zeros((n, 1), chunks=(xd.chunks[0], 1))
    resid = da.map_blocks(
        lambda a, b, zz: _gcm_resid_block(a, b, zz if conditional else None, centre, freqs_t, w),
        xd, yd, zarg, chunks=(xd.chunks[0], (p + q,)), dtype=np.float64)
    lam_t = (opt.lam,) if conditional else None
    return GCMResult(statistic=stat, pvalue=pval, alternative=call.get("alternative"),
                     method=_method_name(1) + _dask_caption(len(xbl)), n=n,
                     ridge_lambda_x=lam_t, ridge_lambda_y=lam_t,
                     resid_x=resid[:, :p], resid_y=resid[:, p:], n_sim=None)


# --------------------------------------------------------------------------- PrivCRT

def _crt_pass2(xb, yb, zb, xrb_block, mean_block, scale_block, spec, part_index):
    """PrivCRT on one partition: the partial statistics T_j (m + 1 sums)."""
    from ._model_x import GaussianModelX, _private_x_residuals
    from .mechanisms import quiet
    nb = xb.shape[0]
    zz = np.zeros((nb, 0)) if zb is None else np.ascontiguousarray(zb)
    model_x = spec["model_x"]
    if spec["gaussian"] and scale_block is not None:
        model_x = GaussianModelX(model_x.mean if mean_block is None else mean_block,
                                 scale_block)
    plan = {"model_x": model_x, "gaussian": spec["gaussian"], "mean_arr": mean_block,
            "m": spec["m"], "xr": None if xrb_block is None else np.ascontiguousarray(
                xrb_block.T)}
    rng = None
    if plan["xr"] is None:
        rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence(
            spec["entropy"], spawn_key=(part_index,))))
    rx_all = _private_x_residuals(plan, np.ascontiguousarray(xb[:, 0]), zz, rng, spec["xrb"])
    with quiet():
        u = _crt_u(yb, spec["yc"], spec["yb"])
        ry = _residual_block(u, zb, spec["freqs_t"], spec["w"], spec["rbound"])[:, 0]
        return _kernels.crt_statistics(rx_all, np.ascontiguousarray(ry))


def _crt_u(yb, yc, ybound):
    return _kernels.clip_scale(np.ascontiguousarray(yb - yc), np.array([ybound]))


def _noisy_rank(parts, mode, sensitivity, epsilon, state):
    """Final task of PrivCRT: sum T, report-noisy-max on this worker; returns the rank."""
    from ._stats import _oriented
    from .mechanisms import report_noisy_max
    stats = _sum_list(parts)
    scores = _kernels.rank_scores(_oriented(stats, mode), sensitivity)
    rng = None if state is None else _advanced(state, 0)
    c_hat, info = report_noisy_max(scores, epsilon, rng)
    return c_hat, info, stats.shape[0] - 1, _rng_state(rng)


def privcrt(x, y, z=None, *, model_x, x_resamples=None, feature_rng=None, **call):
    """:func:`privci.privcrt` over the partitions of Dask arrays: the same parameters,
    release plan and result as in memory; the statistics are summed over partitions and
    report-noisy-max runs on a worker.

    With ``x_resamples`` given (an (m, n) array, Dask or numpy) the result
    equals the in-memory path's for the same ``rng``.  When the resamples are
    drawn from ``model_x``, every partition draws its own from a stream
    derived from ``rng`` and its index: the same law, not the in-memory draws.
    """
    if call.get("bounds_epsilon") is not None or any(
            isinstance(call.get(v), str) for v in ("y_bound", "x_residual_bound", "y_center")):
        raise ValueError("'auto' bounds and centres are not available on Dask arrays yet: "
                         "release them first with privci.bounds.private_bounds on a sample "
                         "or pass public values.")
    from dask import delayed

    from . import _crt_pipeline as CP
    from ._private import new_entropy
    from .regression import rff_frequencies

    par = CP.crt_params(x_resamples=x_resamples, **call)
    plan = CP.crt_plan(par)
    xd, yd, zd, n = _inputs(x, y, z)
    for name, a in (("x", xd), ("y", yd)):
        if a.shape[1] != 1:
            raise ValueError(f"`{name}` must be univariate (n,) for the CRT; got shape "
                             f"{a.shape} instead.")
    V.check_min_n(n, 2, "PrivCRT")
    conditional = zd is not None
    _need_rff(zd, par.kernel_approximation, "PrivCRT")
    d = zd.shape[1] if conditional else 0
    yb = V.positive_finite(par.y_bound, "y_bound")
    yc = float(V.public_centres(par.y_center, "y_center", 1)[0])
    xrb = V.positive_finite(par.x_residual_bound, "x_residual_bound")
    frng = V.check_rng(feature_rng) if (par.kernel_approximation == "rff"
                                        and conditional) else None
    sens, rbound = par.sensitivity_of(conditional)
    xr_d, m, spec_model, mean_d, scale_d = _crt_model_x(model_x, x_resamples, par.n_resamples,
                                                        n, d)
    client = _client()
    named = [("x", xd), ("y", yd)] + ([("z", zd)] if conditional else [])
    if xr_d is not None:
        named.append(("x_resamples", xr_d.T))
    _check_finite(client, named, n)
    charged = plan.charge(par.budget, "privcrt")
    rows = xd.chunks[0]
    xbl, ybl = _blocks(xd), _blocks(yd)
    zbl = _blocks(zd) if conditional else [None] * len(xbl)
    xrbl = _blocks(xr_d.T.rechunk((rows, (m,)))) if xr_d is not None else [None] * len(xbl)

    def _split(vec):
        if vec is None:
            return [None] * len(xbl)
        if _is_dask_value(vec):
            return list(vec.rechunk((rows,)).to_delayed().ravel())
        vec = np.asarray(vec, dtype=np.float64)
        return [vec[s:e] for s, e in _offsets(xd)]

    mbl, sbl = _split(mean_d), _split(scale_d)
    freqs_t = w = None
    if conditional:
        freqs = rff_frequencies(d, par.n_features, par.kernel_sigma, frng)
        U_parts = [delayed(_crt_u)(b, yc, yb) for b in ybl]
        freqs_t, w = _ridge_weights(client, zd, U_parts, freqs, n * par.ridge_lambda, n)
    from ._model_x import GaussianModelX
    spec = {"model_x": spec_model, "gaussian": isinstance(model_x, GaussianModelX), "m": m,
            "xrb": xrb, "yc": yc, "yb": yb, "freqs_t": freqs_t, "w": w, "rbound": rbound,
            "entropy": new_entropy(par.rng) if xr_d is None else None}
    parts = [delayed(_crt_pass2)(a, b, zz, r, mb, sb, spec, i)
             for i, (a, b, zz, r, mb, sb) in enumerate(zip(xbl, ybl, zbl, xrbl, mbl, sbl))]
    task = delayed(_noisy_rank)(parts, par.mode, sens, plan.test_epsilon, _rng_state(par.rng))
    c_hat, info, m_out, state = _run(client, [task], n)[0]
    _restore(par.rng, state)
    out = CP.RankOutput(c_hat=c_hat, noise=info, m=m_out, n=n, conditional=conditional,
                        sensitivity=sens, sensitivity_kind=par.sensitivity,
                        ridge_lambda=par.ridge_lambda if conditional else None,
                        kernel_sigma=par.kernel_sigma if conditional else None, y_bound=yb,
                        y_center=yc, x_residual_bound=xrb)
    return CP.crt_result(par, plan, out, {}, charged, caption=_dask_caption(len(xbl)))


def _crt_model_x(model_x, x_resamples, n_resamples, n, d):
    """The model-X law on Dask: (resamples as Dask or None, m, the model for the workers,
    conditional means and scales given as arrays, or None)."""
    from ._model_x import GaussianModelX, _check_rowwise, _model_x_plan
    gaussian = isinstance(model_x, GaussianModelX)
    xr_d = mean_d = scale_d = None
    if x_resamples is not None:
        xr_d = _as_dask(x_resamples, "x_resamples")
        if xr_d.ndim != 2 or xr_d.shape[1] != n or xr_d.shape[0] < 1:
            raise ValueError(f"`x_resamples` must have shape (m, n) = (m, {n}) with m >= 1; "
                             f"got shape {xr_d.shape} instead.")
        m = xr_d.shape[0]
        mean_fn = getattr(model_x, "conditional_mean", None)
        if gaussian and not callable(model_x.mean):
            mean_d = model_x.mean
        elif callable(mean_fn):
            _check_rowwise(mean_fn, d, "`model_x.conditional_mean`")
        else:
            mean_d = _as_dask(model_x, "model_x")[:, 0]
        if mean_d is not None and mean_d.shape[0] != n:
            raise ValueError(f"the conditional means (`model_x`) have {mean_d.shape[0]} "
                             f"entries; expected {n}.")
        # means given as an array with x_resamples: no callable needed on the workers
        spec_model = model_x if callable(mean_fn) and not (gaussian and mean_d is not None) \
            else None
        return xr_d, m, spec_model, mean_d, scale_d
    plan = _model_x_plan(model_x, np.zeros((0, d)), n, n_resamples, None) if not gaussian or \
        callable(model_x.mean) else None
    if gaussian:
        m = V.check_int(n_resamples, "n_resamples", 1)
        if not callable(model_x.mean):
            mean_d = model_x.mean
            if mean_d.shape[0] != n:
                raise ValueError(f"the model-X conditional mean has {mean_d.shape[0]} "
                                 f"entries but z has {n} rows.")
        if not np.isscalar(model_x.scale):
            if np.shape(model_x.scale)[0] != n:
                raise ValueError(f"`scale` has {np.shape(model_x.scale)[0]} entries but z "
                                 f"has {n} rows.")
            scale_d = model_x.scale
    else:
        m = plan["m"]
    return xr_d, m, model_x, mean_d, scale_d
