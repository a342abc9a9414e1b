"""Compiled kernels (numba).

No validation and no randomness of their own: callers validate inputs once in
Python and pass random draws in as arrays (numba's RNG is separate from
numpy's).  Every kernel here has a slow numpy twin in ``tests/naive.py``.

All kernels are compiled lazily on first call and cached on disk
(``cache=True``), so ``import privci`` stays fast.  Compiling costs seconds per
kernel on the first call after an install (``python -m privci warm`` compiles
and caches them all at once); :func:`ready` says whether a call would compile, so
that small first calls can take an exact numpy twin instead (the block labels
here do).
"""

import math

import numpy as np
from llvmlite import ir
from numba import njit, prange, types
from numba.extending import intrinsic

# alternative codes shared by the kernels
TWO_SIDED, GREATER, LESS = 0, 1, 2


def ready(kernel):
    """Whether calling the numba ``kernel`` needs no compilation: it has a compiled
    signature in this process, or an on-disk cache entry for its current source (numba's
    index of the function, ``cache=True``).  A public fact about the installation, never
    about the data.  Approximate in one direction only: a cache written on another CPU
    or numba version counts as ready and is then recompiled by numba as usual.

    Examples
    --------
    >>> import numpy as np
    >>> from privci import _kernels
    >>> _kernels.rank_scores(np.array([1.0, 0.0]), 1.0).shape   # compiled (or loaded)
    (2,)
    >>> _kernels.ready(_kernels.rank_scores)
    True
    """
    if getattr(kernel, "signatures", None):
        return True
    try:
        return bool(kernel._cache._cache_file._load_index())
    except Exception:   # no cache (cache=False), another numba layout: assume not ready
        return False

# products whose variance is below this fraction of their mean square are constant
DEGENERATE_RTOL = 1e-10


@njit(cache=True, inline="always")
def _sqdist(a, i, b, j):
    """||a_i - b_j||^2 for rows of two (., d) arrays."""
    acc = 0.0
    for k in range(a.shape[1]):
        diff = a[i, k] - b[j, k]
        acc += diff * diff
    return acc


@njit(cache=True, inline="always")
def _fill_gram_row(z, sigma, out, i):
    for j in range(i):
        out[i, j] = math.exp(-sigma * _sqdist(z, i, z, j))
    out[i, i] = 1.0


@njit(parallel=True, cache=True)
def rbf_gram_lower(z, sigma, out):
    """Fill the lower triangle (j <= i) of ``out`` with exp(-sigma ||z_i - z_j||^2).

    The diagonal is exactly 1.  Rows are processed in pairs (t, n-1-t) so that
    threads get equal work on the triangle.  The strict upper triangle of
    ``out`` is left untouched.
    """
    n = z.shape[0]
    half = (n + 1) // 2
    for t in prange(half):
        _fill_gram_row(z, sigma, out, t)
        if n - 1 - t != t:
            _fill_gram_row(z, sigma, out, n - 1 - t)
    return out


@njit(parallel=True, cache=True)
def rbf_gram_cross(a, b, sigma):
    """Full cross Gram matrix exp(-sigma ||a_i - b_j||^2), shape (len(a), len(b))."""
    na = a.shape[0]
    nb = b.shape[0]
    out = np.empty((na, nb))
    for i in prange(na):
        for j in range(nb):
            out[i, j] = math.exp(-sigma * _sqdist(a, i, b, j))
    return out


@njit(parallel=True, cache=True)
def residual_products(rx, ry):
    """Column products R[:, i + p*j] = rx[:, i] * ry[:, j] (x index fastest, as in R)."""
    n, p = rx.shape
    q = ry.shape[1]
    out = np.empty((n, p * q))
    for r in prange(n):
        for j in range(q):
            for i in range(p):
                out[r, i + p * j] = rx[r, i] * ry[r, j]
    return out


@njit(cache=True)
def gcm_univariate(prod):
    """Return (statistic, sd) of sqrt(n) mean(R) / sqrt(mean(R^2) - mean(R)^2).

    Uses R's formula for the population standard deviation.  When the
    variance is not above DEGENERATE_RTOL * mean(R^2) (the level at which the
    formula's cancellation leaves no correct digit worth reporting) the
    products are treated as constant: statistic NaN and sd 0.
    """
    n = prod.shape[0]
    s1 = 0.0
    s2 = 0.0
    for i in range(n):
        s1 += prod[i]
        s2 += prod[i] * prod[i]
    m = s1 / n
    var = s2 / n - m * m
    if not var > DEGENERATE_RTOL * (s2 / n):
        return np.nan, 0.0
    sd = math.sqrt(var)
    return math.sqrt(n) * m / sd, sd


@njit(cache=True)
def standardise_columns(prod):
    """Divide each column by its population sd (R's formula); return (scaled, min_sd)."""
    n, k = prod.shape
    out = np.empty((n, k))
    min_sd = np.inf
    for c in range(k):
        s1 = 0.0
        s2 = 0.0
        for i in range(n):
            s1 += prod[i, c]
            s2 += prod[i, c] * prod[i, c]
        m = s1 / n
        var = s2 / n - m * m
        sd = math.sqrt(var) if var > DEGENERATE_RTOL * (s2 / n) else 0.0
        if sd < min_sd:
            min_sd = sd
        inv = 1.0 / sd if sd > 0.0 else np.nan
        for i in range(n):
            out[i, c] = prod[i, c] * inv
    return out, min_sd


@njit(cache=True)
def _fold_max(vals, mode):
    best = -np.inf
    for v in vals:
        if mode == 0:
            v = abs(v)
        elif mode == 2:
            v = -v
        if v > best:
            best = v
    return best


@njit(parallel=True, cache=True)
def gcm_max_statistic(scaled, draws, mode):
    """Multivariate max statistic and its Gaussian multiplier replicates.

    Parameters
    ----------
    scaled : (n, k) products, each column divided by its population sd.
    draws : (n_sim, n) standard normal multipliers.
    mode : 0 two-sided (max |.|), 1 greater (max), 2 less (max of negatives).

    Returns
    -------
    stat : sqrt(n) * max over columns of the column means (folded by mode).
    sims : (n_sim,) replicates max_k fold(sum_i scaled[i, k] g_i) / sqrt(n).
    """
    n, k = scaled.shape
    nsim = draws.shape[0]
    rootn = math.sqrt(n)
    means = np.empty(k)
    for c in range(k):
        acc = 0.0
        for i in range(n):
            acc += scaled[i, c]
        means[c] = acc / n
    stat = rootn * _fold_max(means, mode)
    sims = np.empty(nsim)
    for b in prange(nsim):
        acc = np.zeros(k)
        for i in range(n):
            g = draws[b, i]
            for c in range(k):
                acc[c] += scaled[i, c] * g
        sims[b] = _fold_max(acc, mode) / rootn
    return stat, sims


@njit(parallel=True, cache=True)
def crt_statistics(rx_all, ry):
    """T_j = sum_i rx_all[j, i] * ry[i] for every row j: one (m+1) x n by n product."""
    m1, n = rx_all.shape
    out = np.empty(m1)
    for j in prange(m1):
        acc = 0.0
        for i in range(n):
            acc += rx_all[j, i] * ry[i]
        out[j] = acc
    return out


@njit(cache=True)
def rank_scores(stats, delta_t):
    """Scores s_c = -|Q_c - T_0| / (2 Delta_T) with Q the statistics in decreasing order."""
    q = -np.sort(-stats)
    t0 = stats[0]
    out = np.empty(stats.shape[0])
    for c in range(stats.shape[0]):
        out[c] = -abs(q[c] - t0) / (2.0 * delta_t)
    return out


# pi/2 split into two 33-bit pieces and a remainder (derived from 60 decimal
# digits of pi): k * _PIO2_1 and k * _PIO2_2 are exact for |k| < 2**20, so the
# Cody-Waite reduction t - k pi/2 loses nothing for |t| <= _SINCOS_LIMIT.
_PIO2_1 = 1.5707963267341256
_PIO2_2 = 6.077100506303966e-11
_PIO2_3 = 2.0222662487959506e-21
_TWO_OVER_PI = 0.6366197723675814
_SINCOS_LIMIT = 1.0e5
# Taylor coefficients (-1)^k / (2k+1)! and (-1)^k / (2k)!; on |r| <= pi/4 the
# truncation errors are below 1e-19.
_S3, _S5, _S7, _S9 = -1.0 / 6.0, 1.0 / 120.0, -1.0 / 5040.0, 1.0 / 362880.0
_S11, _S13, _S15, _S17 = (-1.0 / 39916800.0, 1.0 / 6227020800.0, -1.0 / 1307674368000.0,
                          1.0 / 355687428096000.0)
_C2, _C4, _C6, _C8 = -0.5, 1.0 / 24.0, -1.0 / 720.0, 1.0 / 40320.0
_C10, _C12, _C14, _C16, _C18 = (-1.0 / 3628800.0, 1.0 / 479001600.0, -1.0 / 87178291200.0,
                                1.0 / 20922789888000.0, -1.0 / 6402373705728000.0)


@njit(cache=True, inline="always")
def _fill_rff_row(z, freqs_t, scale, i, out_row):
    """Features of row i of z into out_row (length 2D); returns True if some |w.z| is large.

    Branch-free Cody-Waite reduction and Taylor polynomials so LLVM vectorises
    the loop over frequencies (about 10x faster than libm's cos and sin here);
    accuracy about 1 ulp.  Rows with an argument beyond _SINCOS_LIMIT (or not
    finite) are recomputed with libm; a non-finite w.z (overflow for an
    extreme finite z) is replaced by 0, so every row's features stay finite
    with norm 1 (a fixed per-row map: the sensitivity bounds still hold).
    """
    d, nf = freqs_t.shape
    for j in range(nf):
        out_row[j] = freqs_t[0, j] * z[i, 0]
    for k in range(1, d):
        zk = z[i, k]
        for j in range(nf):
            out_row[j] += freqs_t[k, j] * zk
    big = 0
    for j in range(nf):
        t = out_row[j]
        big |= not (abs(t) <= _SINCOS_LIMIT)  # also true for NaN
        kf = math.floor(t * _TWO_OVER_PI + 0.5)
        r = ((t - kf * _PIO2_1) - kf * _PIO2_2) - kf * _PIO2_3
        q = np.int64(kf) & 3
        r2 = r * r
        sp = r + r * r2 * (_S3 + r2 * (_S5 + r2 * (_S7 + r2 * (_S9 + r2 * (
            _S11 + r2 * (_S13 + r2 * (_S15 + r2 * _S17)))))))
        cp = 1.0 + r2 * (_C2 + r2 * (_C4 + r2 * (_C6 + r2 * (_C8 + r2 * (
            _C10 + r2 * (_C12 + r2 * (_C14 + r2 * (_C16 + r2 * _C18))))))))
        odd = (q & 1) == 1
        sv = cp if odd else sp
        cv = sp if odd else cp
        ssign = -scale if (q & 2) == 2 else scale
        csign = -scale if ((q + 1) & 2) == 2 else scale
        out_row[j] = cv * csign
        out_row[nf + j] = sv * ssign
    if big:
        for j in range(nf):
            acc = 0.0
            for k in range(d):
                acc += freqs_t[k, j] * z[i, k]
            if not math.isfinite(acc):
                # w.z overflowed (an extreme but finite z): any fixed unit-norm pair keeps
                # ||phi(z)|| = 1, which is all the sensitivity bounds need, and depends on
                # this row alone.
                acc = 0.0
            out_row[j] = math.cos(acc) * scale
            out_row[nf + j] = math.sin(acc) * scale
    return big


@njit(parallel=True, cache=True)
def rff_features_into(z, freqs_t, start, out):
    """Paired random Fourier features of rows start .. start + len(out) - 1 of z into out.

    ``freqs_t`` has shape (d, D) (the frequencies, transposed); row r of
    ``out`` (shape (m, 2D)) becomes D^-1/2 [cos(w_j . z), sin(w_j . z)]_j for
    z = z[start + r].  Every row has Euclidean norm 1 up to rounding.
    """
    nf = freqs_t.shape[1]
    scale = 1.0 / math.sqrt(nf)
    m = out.shape[0]
    for r in prange(m):
        _fill_rff_row(z, freqs_t, scale, start + r, out[r])
    return out


def rff_features(z, freqs):
    """Paired random Fourier features phi(z) = D^-1/2 [cos(w_j.z), sin(w_j.z)].

    ``freqs`` has shape (D, d); the output has shape (n, 2D) and every row has
    Euclidean norm exactly 1 up to rounding.
    """
    out = np.empty((z.shape[0], 2 * freqs.shape[0]))
    return rff_features_into(z, np.ascontiguousarray(freqs.T), 0, out)


@njit(parallel=True, cache=True)
def rff_residuals(z, freqs_t, coef, u):
    """u - phi(z) coef for every row, recomputing the features (nothing n x 2D is stored)."""
    n = z.shape[0]
    nf = freqs_t.shape[1]
    c = u.shape[1]
    scale = 1.0 / math.sqrt(nf)
    out = np.empty((n, c))
    nblk = (n + 255) // 256
    for b in prange(nblk):
        row = np.empty(2 * nf)
        for i in range(b * 256, min(n, b * 256 + 256)):
            _fill_rff_row(z, freqs_t, scale, i, row)
            for col in range(c):
                acc = 0.0
                for j in range(2 * nf):
                    acc += row[j] * coef[j, col]
                out[i, col] = u[i, col] - acc
    return out


def clip_scale(u, bound):
    """Clip each column of u (n, p) to [-bound_c, bound_c] and divide by bound_c: the
    compiled kernel, or its exact numpy twin (the same floats: one clip, one IEEE division)
    for a first call on at most ``NUMPY_FIRST_ROWS`` rows, as :func:`rows_outside`.

    Examples
    --------
    >>> import numpy as np
    >>> from privci import _kernels
    >>> _kernels.clip_scale(np.array([[3.0, -0.5], [-9.0, 1.0]]), np.array([2.0, 1.0]))
    array([[ 1. , -0.5],
           [-1. ,  1. ]])
    """
    if u.shape[0] <= NUMPY_FIRST_ROWS and not ready(_clip_scale_kernel):
        b = np.asarray(bound, dtype=np.float64)
        return np.clip(np.asarray(u, dtype=np.float64), -b, b) / b
    return _clip_scale_kernel(u, bound)


@njit(parallel=True, cache=True)
def _clip_scale_kernel(u, bound):
    """Clip each column of u to [-bound_c, bound_c] and divide by bound_c (the kernel of
    :func:`clip_scale`; tools/mutate.py mutates this body, and tests/test_kernels.py calls
    it by this name as well as through the dispatch)."""
    n, p = u.shape
    out = np.empty((n, p))
    for i in prange(n):
        for c in range(p):
            b = bound[c]
            v = u[i, c]
            if v > b:
                v = b
            elif v < -b:
                v = -b
            out[i, c] = v / b
    return out


# --------------------------------------------------------------------------- block labels
#
# numpy's PCG64 (XSL-RR 128/64) and Generator.shuffle, step for step, so that the labels of
# privci._private.block_labels are those of ``Generator.permutation`` on the same seed (the
# twin in tests/test_kernels_speed.py checks this bit for bit); each chunk of rows has its
# own generator, so the chunks run in parallel.

_U32 = np.uint64(0xFFFFFFFF)
_S32 = np.uint64(32)
_S58 = np.uint64(58)
_S63 = np.uint64(63)
_PCG_MUL_HI = np.uint64(0x2360ED051FC65DA4)
_PCG_MUL_LO = np.uint64(0x4385DF649FCCF645)


@intrinsic
def _lcg128(typingctx, hi, lo, inc_hi, inc_lo):
    """(hi, lo) of (hi 2^64 + lo) M + (inc_hi 2^64 + inc_lo) mod 2^128, M = PCG64's
    multiplier, in native 128-bit integer arithmetic."""
    sig = types.UniTuple(types.uint64, 2)(types.uint64, types.uint64, types.uint64,
                                          types.uint64)

    def codegen(context, builder, sig, args):
        i128 = ir.IntType(128)
        i64 = ir.IntType(64)
        sh = ir.Constant(i128, 64)

        def join(h, l_):
            return builder.or_(builder.shl(builder.zext(h, i128), sh), builder.zext(l_, i128))

        state = join(args[0], args[1])
        inc = join(args[2], args[3])
        mul = ir.Constant(i128, (int(_PCG_MUL_HI) << 64) | int(_PCG_MUL_LO))
        new = builder.add(builder.mul(state, mul), inc)
        n_hi = builder.trunc(builder.lshr(new, sh), i64)
        n_lo = builder.trunc(new, i64)
        return context.make_tuple(builder, sig.return_type, [n_hi, n_lo])

    return sig, codegen


@njit(cache=True, inline="always")
def _pcg64_next(st):
    """One draw of numpy's PCG64: st = [state_hi, state_lo, inc_hi, inc_lo] (uint64),
    advanced in place (state = state * M + inc mod 2^128, then the XSL-RR output)."""
    n_hi, n_lo = _lcg128(st[0], st[1], st[2], st[3])
    st[0] = n_hi
    st[1] = n_lo
    rot = n_hi >> _S58
    x = n_hi ^ n_lo
    return (x >> rot) | (x << ((np.uint64(64) - rot) & _S63))


_DRAWS = 256     # 64-bit draws generated at a time by _shuffle_mod


@njit(cache=True)
def _shuffle_mod(st, a, b, k, buf):
    """buf[:b - a] = numpy's Generator(PCG64 with state st).permutation(arange(a, b) % k).

    Generator.shuffle: for i = m - 1 .. 1, j = random_interval(i) (mask rejection on the
    buffered 32-bit draws, as every i < 2^32 here: the low half of a 64-bit draw, then its
    high half), swap buf[i], buf[j].

    The same draws and swaps in three branch-poor steps: the 32-bit values are generated
    ``_DRAWS`` 64-bit draws at a time; every value is tried against the current i (the
    mask is the same for all i between two powers of 2), j[i] is overwritten by every try
    and i moves on only when the try is accepted, so j[i] ends as the accepted value; then
    the swaps run in the original order.  (The draws left over in the last batch are never
    used: the generator state is the chunk's own and is discarded.)
    """
    m = b - a
    lab = a % k
    for i in range(m):
        buf[i] = lab
        lab += 1
        if lab == k:
            lab = 0
    if m < 2:
        return
    jarr = np.empty(m, dtype=np.int64)
    vals = np.empty(2 * _DRAWS, dtype=np.uint64)
    nv = 0
    p = 0
    i = m - 1
    while i > 0:
        mask = np.uint64(i)
        mask |= mask >> np.uint64(1)
        mask |= mask >> np.uint64(2)
        mask |= mask >> np.uint64(4)
        mask |= mask >> np.uint64(8)
        mask |= mask >> np.uint64(16)
        low = np.int64((mask >> np.uint64(1)) + np.uint64(1))   # the least i of this mask
        while i >= low:
            if p == nv:
                for h in range(_DRAWS):
                    w = _pcg64_next(st)
                    vals[2 * h] = w & _U32
                    vals[2 * h + 1] = w >> _S32
                nv = 2 * _DRAWS
                p = 0
            v = np.int64(vals[p] & mask)
            p += 1
            jarr[i] = v
            i -= 1 if v <= i else 0
    for i in range(m - 1, 0, -1):
        j = jarr[i]
        t = buf[i]
        buf[i] = buf[j]
        buf[j] = t


# below this many rows, a call whose kernel is not compiled yet (:func:`ready`) takes the
# kernel's exact numpy twin instead of compiling it (the labels, about 2 s of compiling, and
# rows_outside, about 0.5 s; more on a loaded machine): about 1 ms per 65,536-row chunk
NUMPY_FIRST_ROWS = 1 << 20
NUMPY_LABEL_ROWS = NUMPY_FIRST_ROWS


def block_labels_into(states, first, chunk, n, k, start, stop, out):
    """Labels of rows [start, stop) into out: chunk c = first + row of ``states`` covers rows
    [c chunk, min(n, (c + 1) chunk)) and is shuffled with its own generator state.

    The compiled kernel (:func:`_block_labels_kernel`), or, while it is not compiled yet
    (:func:`ready`) and for at most ``NUMPY_LABEL_ROWS`` rows, its exact numpy twin
    (``Generator.permutation`` with each chunk's PCG64 state): the same labels either
    way (``tests/test_cold_start.py`` checks both against each other)."""
    if stop - start <= NUMPY_LABEL_ROWS and not ready(_block_labels_kernel):
        return _block_labels_numpy(states, first, chunk, n, k, start, stop, out)
    return _block_labels_kernel(states, first, chunk, n, k, start, stop, out)


def _block_labels_numpy(states, first, chunk, n, k, start, stop, out):
    """:func:`_block_labels_kernel` with numpy: chunk c's labels are
    ``Generator(PCG64 with state states[c - first]).permutation(arange(a, b) % k)``."""
    for ci in range(states.shape[0]):
        c = first + ci
        a = c * chunk
        b = min(n, a + chunk)
        lo, hi = max(a, start), min(b, stop)
        if hi <= lo:
            continue
        hi_s, lo_s, hi_i, lo_i = (int(v) for v in states[ci])
        bg = np.random.PCG64()
        bg.state = {"bit_generator": "PCG64", "state": {"state": (hi_s << 64) | lo_s,
                                                        "inc": (hi_i << 64) | lo_i},
                    "has_uint32": 0, "uinteger": 0}
        lab = np.random.Generator(bg).permutation(np.arange(a, b, dtype=np.int64) % k)
        out[lo - start:hi - start] = lab[lo - a:hi - a]
    return out


@njit(parallel=True, cache=True)
def _block_labels_kernel(states, first, chunk, n, k, start, stop, out):
    """Labels of rows [start, stop) into out: chunk c = first + row of ``states`` covers rows
    [c chunk, min(n, (c + 1) chunk)) and is shuffled with its own generator state."""
    nc = states.shape[0]
    for ci in prange(nc):
        c = first + ci
        a = c * chunk
        b = min(n, a + chunk)
        st = states[ci].copy()
        lo = max(a, start)
        hi = min(b, stop)
        if hi <= lo:
            continue
        if lo == a and hi == b:
            # a whole chunk: shuffled in place in the output
            _shuffle_mod(st, a, b, k, out[a - start:b - start])
            continue
        buf = np.empty(b - a, dtype=np.int64)
        _shuffle_mod(st, a, b, k, buf)
        for i in range(lo, hi):
            out[i - start] = buf[i - a]
    return out


@njit(parallel=True, cache=True)
def finite_clip(a, big, out):
    """out = clip(nan_to_num(a, nan=0, posinf=big, neginf=-big), -big, big), one pass."""
    n = a.shape[0]
    m = a.shape[1]
    for i in prange(n):
        for j in range(m):
            v = a[i, j]
            v = 0.0 if v != v else v
            v = v if v < big else big
            out[i, j] = v if v > -big else -big
    return out


def rows_outside(t, T, out):
    """out[i] = 1 where some |t[i, j]| > T (NaN counts as inside), else 0; returns the
    number of such rows: the compiled kernel, or its exact numpy twin for a first call on at
    most ``NUMPY_FIRST_ROWS`` rows."""
    if t.shape[0] <= NUMPY_FIRST_ROWS and not ready(_rows_outside_kernel):
        hit = np.any(np.abs(t) > T, axis=1)      # NaN > T is False: inside, as below
        out[:] = hit
        return int(np.count_nonzero(hit))
    return _rows_outside_kernel(t, T, out)


@njit(cache=True)
def _rows_outside_kernel(t, T, out):
    """out[i] = 1 where some |t[i, j]| > T (NaN counts as inside, as the basis kernels read
    it as 0), else 0; returns the number of such rows.  One pass over t (m, d): one column
    as a flat (vectorised) loop, several by the row's largest |t| (a NaN never wins a
    comparison)."""
    m = t.shape[0]
    d = t.shape[1]
    count = 0
    if d == 1:
        for i in range(m):
            v = t[i, 0]
            out[i] = (v > T) | (v < -T)
        for i in range(m):
            count += np.int64(out[i])
        return count
    for i in range(m):
        a = 0.0
        for j in range(d):
            v = abs(t[i, j])
            a = v if v > a else a
        o = 1 if a > T else 0
        out[i] = o
        count += o
    return count
