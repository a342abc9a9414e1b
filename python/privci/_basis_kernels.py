"""Fused numba kernels of the released spline regression's two passes (issue 25).

The basis is evaluated row by row inside the kernels: nothing n x P is ever built, the
kernels' memory is O(threads * groups * P^2), and the Python wrappers convert the inputs
chunk by chunk (O(chunk * d)) only when they are not already C-contiguous float64.

**Basis (fixed point, so every sum is exact).**  With F = ``SCALE_BITS`` = 16:

* a *block* is one column j of z (additive block) or a pair of columns (j, l) (tensor
  block).  Every column of a block has its own clamped cubic knot vector (first and last
  knot repeated 4 times at -T and +T, any interior knots strictly inside (-T, T));
* per row, t_j = (z_j - center_j) / scale_j in float64, NaN -> 0, clipped to [-T, T]
  (+-inf -> +-T); the 4 non-zero cubic B-splines at t_j (Cox-de Boor on the knot span,
  the last span at t = +T) are clipped to [0, 1] and quantized q = floor(v 2^F) (int64);
  if sum q > 2^F the largest q (the first, on ties) is decreased until the sum is 2^F;
* an additive block's features are the q's at their span (K + 4 features for K interior
  knots); a tensor block's are (q_a q_b) >> F at index a (K2 + 4) + b.

So every row's feature vector is non-negative integers and each block sums to at most
2^F exactly: phi = q / 2^F has L1 norm <= s (s = the number of blocks), the upper
triangle of phi phi^T has L1 norm <= (s^2 + s) / 2, and replacing one row moves the Gram
matrix's upper triangle by at most s^2 + s, the cross-products by at most 2 s per u
column and the residual products by at most 2 per pair (in units of 2^(-2F) * integers).

**u columns.**  u = clip((x - center) / bound, -1, 1) (NaN -> 0, overflow -> +-1), quantized
uq = trunc(u 2^F) in [-2^F, 2^F]; the u columns are [x columns, y columns].

**Pass 1** (:func:`accumulate`): per group g, G_int[g] = sum q q^T (symmetric, int64) and
B_int[g] = sum q uq^T.  **Pass 2** (:func:`residual_block_sums`): with public coefficients,
pred = clip(phi @ coef, -1, 1) (non-finite -> 0 first; the sum runs over the row's
non-zero features in increasing index), r = clip(uq / 2^F - pred, -1, 1), and the block
sums of trunc(clip(r_x[a] r_y[b], -1, 1) 2^(2F)) by block label (column a + px b).
All three outputs are integers in units of 2^(-2F): :func:`to_float` converts.

Kernels: no validation, no randomness.  Numpy twins: ``tests/naive_basis.py``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numba import get_num_threads, njit, prange

__all__ = ["SCALE_BITS", "ONE", "MAX_ROWS", "BasisSpec", "clamped_knots", "make_basis",
           "spline_features", "accumulate", "residual_block_sums", "to_float",
           "gram_sensitivity", "cross_sensitivity", "product_sensitivity"]

SCALE_BITS = 16
ONE = 1 << SCALE_BITS                      # 2^F: a block's features sum to at most this
DEGREE = 3
# every per-row term of G_int, B_int and S_int lies in [-2^(2F), 2^(2F)]: a call over
# MAX_ROWS rows cannot overflow int64
MAX_ROWS = (2 ** 63 - 1) >> (2 * SCALE_BITS)
CHUNK_ROWS = 1 << 18                        # rows per conversion chunk of the wrappers
_PART_BYTES = 256 << 20                     # cap on the per-thread partial outputs
_MIN_ROWS_PER_PART = 2048
_LINEAR_SPAN = 24                           # interior knots up to which the span is counted

_INV_ONE = 1.0 / ONE
_INV_ONE2 = 1.0 / (ONE * ONE)
_ONE2_F = float(ONE * ONE)


# --------------------------------------------------------------------------- the spec

@dataclass(frozen=True)
class BasisSpec:
    """A basis of additive and tensor B-spline blocks, as plain arrays numba can take.

    knots : (n_kv, L_max) float64, each distinct knot vector padded with +T.
    knot_len : (n_kv,) int64, the length of each knot vector (K + 8 for K interior knots).
    block_col : (n_blocks, 2) int64, the column(s) of z of each block (-1: none).
    block_kv : (n_blocks, 2) int64, the knot vector(s) of each block (-1: none).
    block_offset : (n_blocks + 1,) int64, the first feature of each block; the last entry
        is n_features.
    T : float, the clip range of t = (z - center) / scale.
    n_features : int, P.
    n_columns : int, d (columns of z the spec expects).
    eval_col, eval_kv : (n_eval,) int64, the distinct (column, knot vector) evaluations
        of a row; block_eval : (n_blocks, 2) int64, the evaluation(s) of each block.
    inv_den : (n_kv, L_max, 6) float64, the reciprocal knot differences of every span
        used by the Cox-de Boor recursion (see ``_basis4``); 0 outside the spans 3..L-5.
    """

    knots: np.ndarray
    knot_len: np.ndarray
    block_col: np.ndarray
    block_kv: np.ndarray
    block_offset: np.ndarray
    T: float
    n_features: int
    n_columns: int
    eval_col: np.ndarray
    eval_kv: np.ndarray
    block_eval: np.ndarray
    inv_den: np.ndarray

    @property
    def n_blocks(self):
        return int(self.block_col.shape[0])

    @property
    def n_runs(self):
        """Runs of 4 consecutive non-zero features per row (1 per additive block, 4 per tensor)."""
        return int(np.sum(np.where(self.block_col[:, 1] < 0, 1, 4)))

    def _arrays(self):
        return (self.knots, self.inv_den, self.knot_len, self.eval_col, self.eval_kv,
                self.block_eval, self.block_kv, self.block_offset)


def clamped_knots(interior, T):
    """The clamped cubic knot vector [-T]*4 + interior + [T]*4 (float64)."""
    interior = np.asarray(interior, dtype=np.float64).ravel()
    return np.r_[[-float(T)] * (DEGREE + 1), interior, [float(T)] * (DEGREE + 1)]


def _check_knots(kv, what):
    kv = np.asarray(kv, dtype=np.float64)
    if kv.ndim != 1 or kv.size < 2 * (DEGREE + 1):
        raise ValueError(f"{what}: a clamped cubic knot vector needs at least 8 knots")
    if not np.all(np.isfinite(kv)):
        raise ValueError(f"{what}: knots must be finite")
    T = -kv[0]
    if not T > 0 or np.any(kv[:DEGREE + 1] != -T) or np.any(kv[-DEGREE - 1:] != T):
        raise ValueError(f"{what}: the first and last knots must be -T and +T (T > 0), "
                         "each repeated 4 times")
    inner = kv[DEGREE + 1:-DEGREE - 1]
    if np.any(np.diff(kv) < 0):
        raise ValueError(f"{what}: knots must be non-decreasing")
    if inner.size and not (inner[0] > -T and inner[-1] < T):
        raise ValueError(f"{what}: interior knots must lie strictly inside (-T, T)")
    return kv, float(T)


def make_basis(knot_vectors_per_column, pairs=(), pair_knot_vectors=None):
    """Build a :class:`BasisSpec`.

    Parameters
    ----------
    knot_vectors_per_column : sequence of length d; entry j is the clamped cubic knot
        vector of column j's additive block (see :func:`clamped_knots`), or None for no
        additive block of column j.
    pairs : sequence of (j, l), j != l: one tensor block per pair, after the additive
        blocks, in this order.
    pair_knot_vectors : None (each pair uses its columns' additive knot vectors) or a
        sequence of (knots_j, knots_l), one per pair.

    All knot vectors must share T.  An additive block on a vector with K interior knots
    has K + 4 features; a tensor block (K1 + 4)(K2 + 4), feature a (K2 + 4) + b.
    """
    kvs = list(knot_vectors_per_column)
    d = len(kvs)
    pairs = [tuple(int(v) for v in pr) for pr in pairs]
    if pair_knot_vectors is None:
        pkv = []
        for j, l in pairs:
            if not (0 <= j < d and 0 <= l < d) or kvs[j] is None or kvs[l] is None:
                raise ValueError(f"pair {(j, l)}: pass pair_knot_vectors for columns without "
                                 "an additive knot vector")
            pkv.append((kvs[j], kvs[l]))
    else:
        pkv = [tuple(p) for p in pair_knot_vectors]
        if len(pkv) != len(pairs) or any(len(p) != 2 for p in pkv):
            raise ValueError("pair_knot_vectors needs one (knots_j, knots_l) per pair")
    distinct, kv_index, Ts = [], {}, set()

    def kv_id(kv, what):
        kv, T = _check_knots(kv, what)
        Ts.add(T)
        key = kv.tobytes()
        if key not in kv_index:
            kv_index[key] = len(distinct)
            distinct.append(kv)
        return kv_index[key]

    cols, kvi = [], []
    for j, kv in enumerate(kvs):
        if kv is not None:
            cols.append((j, -1))
            kvi.append((kv_id(kv, f"column {j}"), -1))
    for (j, l), (k1, k2) in zip(pairs, pkv):
        if not (0 <= j < d and 0 <= l < d) or j == l:
            raise ValueError(f"pair {(j, l)}: needs two different columns among 0..{d - 1}")
        cols.append((j, l))
        kvi.append((kv_id(k1, f"pair {(j, l)}"), kv_id(k2, f"pair {(j, l)}")))
    if not cols:
        raise ValueError("the basis has no block")
    if len(Ts) != 1:
        raise ValueError(f"all knot vectors must share T; got {sorted(Ts)}")
    T = Ts.pop()
    knot_len = np.array([kv.size for kv in distinct], dtype=np.int64)
    knots = np.full((len(distinct), int(knot_len.max())), T)
    for i, kv in enumerate(distinct):
        knots[i, :kv.size] = kv
    width = knot_len - (DEGREE + 1)
    block_col = np.array(cols, dtype=np.int64).reshape(-1, 2)
    block_kv = np.array(kvi, dtype=np.int64).reshape(-1, 2)
    sizes = [width[a] if b < 0 else width[a] * width[b] for a, b in block_kv]
    block_offset = np.r_[0, np.cumsum(sizes)].astype(np.int64)
    evals, eval_index = [], {}
    block_eval = np.full_like(block_col, -1)
    for b in range(block_col.shape[0]):
        for s in range(2):
            if block_col[b, s] >= 0:
                key = (int(block_col[b, s]), int(block_kv[b, s]))
                if key not in eval_index:
                    eval_index[key] = len(evals)
                    evals.append(key)
                block_eval[b, s] = eval_index[key]
    ev = np.array(evals, dtype=np.int64).reshape(-1, 2)
    inv_den = np.zeros(knots.shape + (6,))
    for i, kv in enumerate(distinct):
        for m in range(DEGREE, kv.size - DEGREE - 1):
            if kv[m] < kv[m + 1]:
                inv_den[i, m] = [1.0 / (kv[m + r + 1] - kv[m + r + 1 - j])
                                 for j in range(1, DEGREE + 1) for r in range(j)]
    arrs = [knots, knot_len, block_col, block_kv, block_offset,
            np.ascontiguousarray(ev[:, 0]), np.ascontiguousarray(ev[:, 1]), block_eval, inv_den]
    for a in arrs:
        a.flags.writeable = False
    return BasisSpec(knots=arrs[0], knot_len=arrs[1], block_col=arrs[2], block_kv=arrs[3],
                     block_offset=arrs[4], T=T, n_features=int(block_offset[-1]),
                     n_columns=d, eval_col=arrs[5], eval_kv=arrs[6], block_eval=arrs[7],
                     inv_den=arrs[8])


def gram_sensitivity(spec):
    """L1 sensitivity of the upper triangle of sum phi phi^T: s^2 + s (s blocks)."""
    s = spec.n_blocks
    return float(s * s + s)


def cross_sensitivity(spec, cols):
    """L1 sensitivity of sum phi u^T for ``cols`` columns of u in [-1, 1]: 2 s cols."""
    return float(2 * spec.n_blocks * cols)


def product_sensitivity(px, py):
    """L1 sensitivity of the residual products' block sums: 2 per (x, y) pair."""
    return float(2 * px * py)


def to_float(a):
    """Integer statistics (G_int, B_int, S_int; units 2^(-2F)) as float64."""
    return np.ldexp(np.asarray(a).astype(np.float64), -2 * SCALE_BITS)


# --------------------------------------------------------------------------- row kernels

@njit(cache=True, inline="always")
def _find_span(knots, kv, L, t):
    """Largest m in [3, L - 5] with knots[kv, m] <= t (t in [-T, T]): a non-empty span."""
    lo = DEGREE
    hi = L - DEGREE - 2
    if hi - lo <= _LINEAR_SPAN:
        # branch-free count of the interior knots <= t (few knots)
        m = lo
        for k in range(lo + 1, hi + 1):
            m += knots[kv, k] <= t
        return m
    if t >= knots[kv, hi]:
        return hi
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if knots[kv, mid] <= t:
            lo = mid
        else:
            hi = mid
    return lo


@njit(cache=True, inline="always")
def _basis4(knots, inv_den, kv, m, t):
    """The 4 non-zero cubic B-splines at t on span m (Cox-de Boor, unrolled).

    The textbook recursion N[0] = 1; for j = 1..3: left_j = t - U[m+1-j],
    right_j = U[m+j] - t, and for r < j: temp = N[r] / (U[m+r+1] - U[m+r+1-j]),
    N[r] = saved + right_{r+1} temp, saved = left_{j-r} temp; N[j] = saved, with the six
    reciprocal knot differences of the span tabulated (``inv_den[kv, m]``, in the order
    (j, r) = (1, 0), (2, 0), (2, 1), (3, 0), (3, 1), (3, 2)).
    """
    left1 = t - knots[kv, m]
    right1 = knots[kv, m + 1] - t
    temp = inv_den[kv, m, 0]
    n0 = 0.0 + right1 * temp
    n1 = left1 * temp
    left2 = t - knots[kv, m - 1]
    right2 = knots[kv, m + 2] - t
    temp = n0 * inv_den[kv, m, 1]
    n0 = 0.0 + right1 * temp
    saved = left2 * temp
    temp = n1 * inv_den[kv, m, 2]
    n1 = saved + right2 * temp
    n2 = left1 * temp
    left3 = t - knots[kv, m - 2]
    right3 = knots[kv, m + 3] - t
    temp = n0 * inv_den[kv, m, 3]
    n0 = 0.0 + right1 * temp
    saved = left3 * temp
    temp = n1 * inv_den[kv, m, 4]
    n1 = saved + right2 * temp
    saved = left2 * temp
    temp = n2 * inv_den[kv, m, 5]
    n2 = saved + right3 * temp
    n3 = left1 * temp
    return n0, n1, n2, n3


@njit(cache=True, inline="always")
def _q1(v):
    """floor(clip(v, 0, 1) 2^F) (NaN -> 0)."""
    if not v > 0.0:
        return np.int64(0)
    if v > 1.0:
        return np.int64(ONE)
    return np.int64(math.floor(v * ONE))


@njit(cache=True, inline="always")
def _quantize4(n0, n1, n2, n3, q, e):
    """q[e] = floor(clip(n, 0, 1) 2^F), then the largest (first on ties) decreased until
    the sum is at most 2^F."""
    q[e, 0] = _q1(n0)
    q[e, 1] = _q1(n1)
    q[e, 2] = _q1(n2)
    q[e, 3] = _q1(n3)
    s = q[e, 0] + q[e, 1] + q[e, 2] + q[e, 3]
    while s > ONE:
        am = 0
        for a in range(1, DEGREE + 1):
            if q[e, a] > q[e, am]:
                am = a
        dec = min(s - ONE, q[e, am])
        q[e, am] -= dec
        s -= dec


@njit(cache=True, inline="always")
def _clip_t(v, T):
    if v != v:
        return 0.0
    if v > T:
        return T
    if v < -T:
        return -T
    return v


@njit(cache=True, inline="always")
def _eval_row(z, i, zc, zs, T, knots, inv_den, knot_len, eval_col, eval_kv, tt, span, q):
    """Spans and quantized basis values of row i for every (column, knot vector) pair."""
    for j in range(z.shape[1]):
        tt[j] = _clip_t((z[i, j] - zc[j]) / zs[j], T)
    for e in range(eval_col.shape[0]):
        t = tt[eval_col[e]]
        kv = eval_kv[e]
        m = _find_span(knots, kv, knot_len[kv], t)
        n0, n1, n2, n3 = _basis4(knots, inv_den, kv, m, t)
        _quantize4(n0, n1, n2, n3, q, e)
        span[e] = m


@njit(cache=True, inline="always")
def _row_runs(span, q, knot_len, block_eval, block_kv, block_offset, run_start, run_val):
    """The row's non-zero features as runs of 4 consecutive indices, increasing."""
    c = 0
    for b in range(block_eval.shape[0]):
        e1 = block_eval[b, 0]
        e2 = block_eval[b, 1]
        m1 = span[e1] - DEGREE
        if e2 < 0:
            run_start[c] = block_offset[b] + m1
            for a in range(DEGREE + 1):
                run_val[c, a] = q[e1, a]
            c += 1
        else:
            w2 = knot_len[block_kv[b, 1]] - (DEGREE + 1)
            m2 = span[e2] - DEGREE
            for a in range(DEGREE + 1):
                qa = q[e1, a]
                run_start[c] = block_offset[b] + (m1 + a) * w2 + m2
                for bb in range(DEGREE + 1):
                    run_val[c, bb] = (qa * q[e2, bb]) >> SCALE_BITS
                c += 1
    return c


@njit(cache=True, inline="always")
def _quantize_u(v, c, b):
    """trunc(clip((v - c) / b, -1, 1) 2^F), NaN -> 0."""
    u = (v - c) / b
    if u != u:
        u = 0.0
    elif u > 1.0:
        u = 1.0
    elif u < -1.0:
        u = -1.0
    return np.int64(u * ONE)


@njit(cache=True, inline="always")
def _row_u(x, y, i, xc, xb, yc, yb, uq):
    px = x.shape[1]
    for c in range(px):
        uq[c] = _quantize_u(x[i, c], xc[c], xb[c])
    for c in range(y.shape[1]):
        uq[px + c] = _quantize_u(y[i, c], yc[c], yb[c])


# --------------------------------------------------------------------------- kernels

@njit(cache=True)
def features_into(z, zc, zs, T, knots, inv_den, knot_len, eval_col, eval_kv, block_eval,
                  block_kv, block_offset, n_runs, out):
    """Dense int64 features of every row of z into out (n, P) (one thread: small n)."""
    n = z.shape[0]
    ne = eval_col.shape[0]
    tt = np.empty(z.shape[1])
    span = np.empty(ne, dtype=np.int64)
    q = np.empty((ne, DEGREE + 1), dtype=np.int64)
    run_start = np.empty(n_runs, dtype=np.int64)
    run_val = np.empty((n_runs, DEGREE + 1), dtype=np.int64)
    for i in range(n):
        _eval_row(z, i, zc, zs, T, knots, inv_den, knot_len, eval_col, eval_kv, tt, span, q)
        _row_runs(span, q, knot_len, block_eval, block_kv, block_offset, run_start,
                  run_val)
        for p in range(out.shape[1]):
            out[i, p] = 0
        for r in range(n_runs):
            for a in range(DEGREE + 1):
                out[i, run_start[r] + a] = run_val[r, a]
    return out


@njit(parallel=True, cache=True)
def accumulate_into(z, x, y, zc, zs, xc, xb, yc, yb, T, knots, inv_den, knot_len, eval_col,
                    eval_kv, block_eval, block_kv, block_offset, n_runs, group, G, B):
    """Add the rows' upper-triangle Gram and cross-product terms into G[part], B[part].

    G : (parts, n_groups, P, P) int64, B : (parts, n_groups, P, px + py) int64; the rows
    are cut into ``parts`` contiguous ranges, one per thread.  Only entries (a, c) with
    a <= c of G are touched.
    """
    n = z.shape[0]
    nparts = G.shape[0]
    ne = eval_col.shape[0]
    pu = B.shape[3]
    for part in prange(nparts):
        lo = part * n // nparts
        hi = (part + 1) * n // nparts
        tt = np.empty(z.shape[1])
        span = np.empty(ne, dtype=np.int64)
        q = np.empty((ne, DEGREE + 1), dtype=np.int64)
        run_start = np.empty(n_runs, dtype=np.int64)
        run_val = np.empty((n_runs, DEGREE + 1), dtype=np.int64)
        uq = np.empty(pu, dtype=np.int64)
        for i in range(lo, hi):
            g = group[i]
            _eval_row(z, i, zc, zs, T, knots, inv_den, knot_len, eval_col, eval_kv, tt, span, q)
            _row_runs(span, q, knot_len, block_eval, block_kv, block_offset, run_start,
                      run_val)
            _row_u(x, y, i, xc, xb, yc, yb, uq)
            for r1 in range(n_runs):
                s1 = run_start[r1]
                for a in range(DEGREE + 1):
                    va = run_val[r1, a]
                    if va == 0:
                        continue
                    ra = s1 + a
                    # the run's own 4 x 4 block: upper triangle only
                    for c in range(a, DEGREE + 1):
                        G[part, g, ra, s1 + c] += va * run_val[r1, c]
                    for r2 in range(r1 + 1, n_runs):
                        s2 = run_start[r2]
                        for c in range(DEGREE + 1):
                            G[part, g, ra, s2 + c] += va * run_val[r2, c]
                    for c in range(pu):
                        B[part, g, ra, c] += va * uq[c]
    return G, B


@njit(parallel=True, cache=True)
def residual_sums_into(z, x, y, zc, zs, xc, xb, yc, yb, T, knots, inv_den, knot_len,
                       eval_col, eval_kv, block_eval, block_kv, block_offset, n_runs, coef_x,
                       coef_y, block, S):
    """Add the rows' quantized residual products into S[part, block[i]] (k columns px*py)."""
    n = z.shape[0]
    nparts = S.shape[0]
    ne = eval_col.shape[0]
    px = x.shape[1]
    py = y.shape[1]
    for part in prange(nparts):
        lo = part * n // nparts
        hi = (part + 1) * n // nparts
        tt = np.empty(z.shape[1])
        span = np.empty(ne, dtype=np.int64)
        q = np.empty((ne, DEGREE + 1), dtype=np.int64)
        run_start = np.empty(n_runs, dtype=np.int64)
        run_val = np.empty((n_runs, DEGREE + 1), dtype=np.int64)
        uq = np.empty(px + py, dtype=np.int64)
        px_acc = np.empty(px)
        py_acc = np.empty(py)
        rx = np.empty(px)
        ry = np.empty(py)
        for i in range(lo, hi):
            _eval_row(z, i, zc, zs, T, knots, inv_den, knot_len, eval_col, eval_kv, tt, span, q)
            _row_runs(span, q, knot_len, block_eval, block_kv, block_offset, run_start,
                      run_val)
            _row_u(x, y, i, xc, xb, yc, yb, uq)
            for c in range(px):
                px_acc[c] = 0.0
            for c in range(py):
                py_acc[c] = 0.0
            for r in range(n_runs):
                s0 = run_start[r]
                for a in range(DEGREE + 1):
                    v = run_val[r, a]
                    if v == 0:
                        continue
                    ph = v * _INV_ONE
                    for c in range(px):
                        px_acc[c] += ph * coef_x[s0 + a, c]
                    for c in range(py):
                        py_acc[c] += ph * coef_y[s0 + a, c]
            for c in range(px):
                pr = px_acc[c]
                if not math.isfinite(pr):
                    pr = 0.0
                pr = min(max(pr, -1.0), 1.0)
                rx[c] = min(max(uq[c] * _INV_ONE - pr, -1.0), 1.0)
            for c in range(py):
                pr = py_acc[c]
                if not math.isfinite(pr):
                    pr = 0.0
                pr = min(max(pr, -1.0), 1.0)
                ry[c] = min(max(uq[px + c] * _INV_ONE - pr, -1.0), 1.0)
            blk = block[i]
            for b in range(py):
                for a in range(px):
                    prod = min(max(rx[a] * ry[b], -1.0), 1.0)
                    S[part, blk, a + px * b] += np.int64(prod * _ONE2_F)
    return S


# the same kernels compiled without threads: small calls skip the parallel region's
# start-up and barrier (milliseconds when the cores are busy)
_accumulate_serial = njit(cache=True)(accumulate_into.py_func)
_residual_serial = njit(cache=True)(residual_sums_into.py_func)


# --------------------------------------------------------------------------- wrappers

def _cols(a, n, name):
    """(n, c) view of a 1-D / 2-D array (None -> (n, 0))."""
    if a is None:
        return np.empty((n, 0))
    a = np.asarray(a)
    if a.ndim == 1:
        a = a.reshape(-1, 1)
    if a.ndim != 2 or a.shape[0] != n:
        raise ValueError(f"`{name}` must have {n} rows (1-D or 2-D); got shape {a.shape}")
    return a


def _public(v, c, name, positive=False):
    v = np.ascontiguousarray(np.broadcast_to(np.asarray(v, dtype=np.float64), (c,)))
    if not np.all(np.isfinite(v)) or (positive and not np.all(v > 0)):
        raise ValueError(f"`{name}` must be finite" + (" and positive" if positive else ""))
    return v


def _inputs(z, x, y, z_center, z_scale, x_center, x_bound, y_center, y_bound, spec):
    z = np.asarray(z)
    if z.ndim == 1:
        z = z.reshape(-1, 1)
    if z.ndim != 2 or z.shape[1] != spec.n_columns:
        raise ValueError(f"`z` must have {spec.n_columns} columns; got shape {z.shape}")
    n = z.shape[0]
    x = _cols(x, n, "x")
    y = _cols(y, n, "y")
    px, py = x.shape[1], y.shape[1]
    d = spec.n_columns
    pub = (_public(z_center, d, "z_center"), _public(z_scale, d, "z_scale", True),
           _public(x_center, px, "x_center"), _public(x_bound, px, "x_bound", True),
           _public(y_center, py, "y_center"), _public(y_bound, py, "y_bound", True))
    if n > MAX_ROWS:
        raise OverflowError(f"{n} rows in one call could overflow the int64 sums "
                            f"(at most {MAX_ROWS}); split the rows and add the results")
    return z, x, y, n, px, py, pub


def _chunks(n, chunk_rows):
    step = max(1, int(chunk_rows))
    for a in range(0, n, step):
        yield a, min(n, a + step)


def _f64(a, lo, hi):
    return np.ascontiguousarray(a[lo:hi], dtype=np.float64)


def _labels(lab, n, lo, hi, n_labels, name):
    if lab is None:
        return np.zeros(hi - lo, dtype=np.int64)
    out = np.ascontiguousarray(lab[lo:hi], dtype=np.int64)
    if out.size and (out.min() < 0 or out.max() >= n_labels):
        raise ValueError(f"`{name}` must lie in [0, {n_labels})")
    return out


def _n_parts(n, per_part_bytes):
    by_rows = max(1, -(-n // _MIN_ROWS_PER_PART))
    by_mem = max(1, _PART_BYTES // max(1, per_part_bytes))
    return int(max(1, min(get_num_threads(), by_rows, by_mem)))


def spline_features(t, spec, quantized=False):
    """Dense features of t = (z - center) / scale, shape (n, d) -> (n, P).

    float64 phi = q / 2^F (exact), or the int64 q with ``quantized=True``.  For tests and
    small n: memory is n * P.
    """
    t = np.asarray(t, dtype=np.float64)
    if t.ndim == 1:
        t = t.reshape(-1, 1)
    if t.ndim != 2 or t.shape[1] != spec.n_columns:
        raise ValueError(f"`t` must have {spec.n_columns} columns; got shape {t.shape}")
    out = np.empty((t.shape[0], spec.n_features), dtype=np.int64)
    features_into(np.ascontiguousarray(t), np.zeros(spec.n_columns), np.ones(spec.n_columns),
                  spec.T, *spec._arrays(), spec.n_runs, out)
    return out if quantized else np.ldexp(out.astype(np.float64), -SCALE_BITS)


def accumulate(z, x, y, z_center, z_scale, x_center, x_bound, y_center, y_bound, spec,
               group=None, n_groups=1, *, chunk_rows=CHUNK_ROWS):
    """Pass 1: per group, G_int = sum q q^T and B_int = sum q uq^T over the rows.

    Parameters
    ----------
    z : (n, d) (or (n,) for d = 1); x : (n, px), y : (n, py) raw (None: no columns).
    z_center, z_scale : public, per column of z (or scalars); t = (z - center) / scale.
    x_center, x_bound, y_center, y_bound : public, per column; u = clip((x - c) / b, -1, 1).
    spec : :class:`BasisSpec`.
    group : (n,) integers in [0, n_groups) (None: all rows in group 0).

    Returns
    -------
    G_int : (n_groups, P, P) int64, symmetric; B_int : (n_groups, P, px + py) int64
    (u columns [x, y]).  Units 2^(-2F) (:func:`to_float`).  Memory: O(threads *
    n_groups * P^2) plus O(chunk_rows * d) for inputs that are not C-contiguous float64.
    """
    z, x, y, n, px, py, pub = _inputs(z, x, y, z_center, z_scale, x_center, x_bound,
                                      y_center, y_bound, spec)
    P, pu, ng = spec.n_features, px + py, int(n_groups)
    if ng < 1:
        raise ValueError("`n_groups` must be at least 1")
    if group is not None:
        group = np.asarray(group)
        if group.shape != (n,):
            raise ValueError(f"`group` must have shape ({n},); got {group.shape}")
    nparts = _n_parts(n, ng * P * (P + pu) * 8)
    G = np.zeros((nparts, ng, P, P), dtype=np.int64)
    B = np.zeros((nparts, ng, P, pu), dtype=np.int64)
    for lo, hi in _chunks(n, chunk_rows):
        k = min(_n_parts(hi - lo, 0), nparts)
        kern = accumulate_into if k > 1 else _accumulate_serial
        kern(_f64(z, lo, hi), _f64(x, lo, hi), _f64(y, lo, hi), *pub, spec.T, *spec._arrays(),
             spec.n_runs, _labels(group, n, lo, hi, ng, "group"), G[:k], B[:k])
    G = G.sum(axis=0) if nparts > 1 else G[0]
    B = B.sum(axis=0) if nparts > 1 else B[0]
    iu = np.triu_indices(P, 1)
    for g in range(ng):
        G[g].T[iu] = G[g][iu]
    return G, B


def residual_block_sums(z, x, y, z_center, z_scale, x_center, x_bound, y_center, y_bound,
                        spec, coef_x, coef_y, block, k, *, chunk_rows=CHUNK_ROWS):
    """Pass 2: block sums of the quantized residual products, (k, px * py) int64.

    With phi = q / 2^F, pred = clip(phi @ coef, -1, 1) (non-finite -> 0 first),
    r = clip(uq / 2^F - pred, -1, 1) per column, and per row the products
    trunc(clip(r_x[a] r_y[b], -1, 1) 2^(2F)) are added to row block[i] of the output,
    column a + px b.  ``coef_x`` (P, px), ``coef_y`` (P, py) are public; ``block`` (n,)
    integers in [0, k).  Units 2^(-2F) (:func:`to_float`).
    """
    z, x, y, n, px, py, pub = _inputs(z, x, y, z_center, z_scale, x_center, x_bound,
                                      y_center, y_bound, spec)
    P, k = spec.n_features, int(k)
    cx = np.ascontiguousarray(coef_x, dtype=np.float64)
    cy = np.ascontiguousarray(coef_y, dtype=np.float64)
    if cx.shape != (P, px) or cy.shape != (P, py):
        raise ValueError(f"`coef_x` and `coef_y` must have shapes ({P}, {px}) and ({P}, {py}); "
                         f"got {cx.shape} and {cy.shape}")
    if k < 1:
        raise ValueError("`k` must be at least 1")
    block = np.asarray(block)
    if block.shape != (n,):
        raise ValueError(f"`block` must have shape ({n},); got {block.shape}")
    nparts = _n_parts(n, k * px * py * 8)
    S = np.zeros((nparts, k, px * py), dtype=np.int64)
    for lo, hi in _chunks(n, chunk_rows):
        kk = min(_n_parts(hi - lo, 0), nparts)
        kern = residual_sums_into if kk > 1 else _residual_serial
        kern(_f64(z, lo, hi), _f64(x, lo, hi), _f64(y, lo, hi), *pub, spec.T, *spec._arrays(),
             spec.n_runs, cx, cy, _labels(block, n, lo, hi, k, "block"), S[:kk])
    return S.sum(axis=0) if nparts > 1 else S[0]
