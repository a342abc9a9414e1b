"""Fused numba kernels of the released spline regression's two passes (issue 25).

The basis is evaluated inside the kernels, 64 rows at a time: nothing n x P is ever
built, the kernels' memory is O(threads * groups * P^2), and the Python wrappers convert
the inputs chunk by chunk (O(chunk * d)) only when they are not already C-contiguous
float64.  Each row adds only its non-zero block entries (4 per additive block, 16 per
tensor block) at their known offsets.

**Speed (issue 25), without changing a result.**  The span of t is found by counting the
knots below it (few knots) or by stepping from a public table of ``SPAN_CELLS`` cells
(many knots; the step makes it exact whatever the table says).  The products of pass 1 are
summed in float64 first: every product is an integer of at most 2^32 in size and a kernel
call covers at most ``FLOAT_ROWS`` = 2^20 rows, so every partial sum is an integer below
2^53 and exact in any order; they go to the int64 outputs at the end of the call.  For
bases of additive blocks only (PrivGCM's default), a pair of blocks has one compact 4 x 4
accumulator per (span, span), updated 4 entries at a time (``_axpy4``), and pass 2 sums
the predictions of a 64-row block at once (each row's sum in its own order).  The rows are
cut into one contiguous part per thread, each with its own accumulators, and the integer
parts are added at the end: the same integers for any number of threads.

**Basis (fixed point, so every sum is exact).**  With F = ``SCALE_BITS`` = 16:

* a *block* is one column j of z (additive block) or a pair of columns (j, l) (tensor
  block).  Every column of a block has its own clamped cubic knot vector (first and last
  knot repeated 4 times at -T and +T, any interior knots strictly inside (-T, T));
* per row, t_j = (z_j - center_j) / scale_j in float64, NaN -> 0, clipped to [-T, T]
  (+-inf -> +-T); the 4 non-zero cubic B-splines at t_j (Cox-de Boor on the knot span,
  the last span at t = +T; each division by a knot difference is a multiplication by
  its tabulated reciprocal, ``BasisSpec.inv_den``) are clipped to [0, 1] and quantized
  q = floor(v 2^F) (int64);
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

**Clip box.**  A row whose t lies beyond [-T, T] in some column (before the clip; NaN
counts as inside) can be given a label of the caller's (``outside_group`` /
``outside_block``: PrivGCM's discarded group and block), decided inside the kernels from
the t they compute, with a select: every row does the same work.

**Pass 1** (:func:`accumulate`): per group g, G_int[g] = sum q q^T (symmetric, int64) and
B_int[g] = sum q uq^T.  **Pass 2** (:func:`residual_block_sums`): with public coefficients,
pred = clip(phi @ coef, -1, 1) (non-finite -> 0 first; the sum runs over the row's
non-zero features in increasing index), r = clip((uq / 2^F - pred) s, -1, 1) with a public
scale s per column (PrivGCM: s = 1 / c with |u - pred| <= c, so the clip never binds and
E[r | z] = (E[u | z] - pred) s: no clipping bias), and the block
sums of trunc(clip(r_x[a] r_y[b], -1, 1) 2^(2F)) by block label (column a + px b).
All three outputs are integers in units of 2^(-2F): :func:`to_float` converts.

Kernels: no validation, no randomness.  Numpy twins: ``tests/naive_basis.py``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from llvmlite import ir
from numba import get_num_threads, njit, prange, types, uint64
from numba.extending import intrinsic

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
FLOAT_ROWS = 1 << 20                        # rows per kernel call (float64 partial sums exact)
_COMPACT_BYTES = 1 << 20                    # cap per group on the compact Gram accumulators
_PART_BYTES = 256 << 20                     # cap on the per-thread partial outputs
_MIN_ROWS_PER_PART = 1 << 14                # rows per thread below which one thread runs
SPAN_CELLS = 2048                           # cells of the span table on [-T, T]
_LINEAR_SPAN = 24                           # interior knots up to which the span is counted

_INV_ONE = 1.0 / ONE
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
    span_table : (n_kv, SPAN_CELLS) int64, a start for the span search: entry c is the
        span of the left edge of cell c of a uniform grid of SPAN_CELLS cells on [-T, T]
        (the kernels step from it to the exact span, so the table only saves time).
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
    span_table: np.ndarray

    @property
    def n_blocks(self):
        return int(self.block_col.shape[0])

    @property
    def n_runs(self):
        """Runs of 4 consecutive non-zero features per row (1 per additive block, 4 per tensor)."""
        return int(np.sum(np.where(self.block_col[:, 1] < 0, 1, 4)))

    def _arrays(self):
        return (self.knots, self.inv_den, self.span_table, self.knot_len, self.eval_col,
                self.eval_kv,
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
    span_table = np.empty((len(distinct), SPAN_CELLS), dtype=np.int64)
    edges = -T + np.arange(SPAN_CELLS) * (2.0 * T / SPAN_CELLS)
    for i, kv in enumerate(distinct):
        # the largest m in [3, L - 5] with kv[m] <= edge
        span_table[i] = np.clip(np.searchsorted(kv, edges, side="right") - 1, DEGREE,
                                kv.size - DEGREE - 2)
    arrs = [knots, knot_len, block_col, block_kv, block_offset,
            np.ascontiguousarray(ev[:, 0]), np.ascontiguousarray(ev[:, 1]), block_eval, inv_den,
            span_table]
    for a in arrs:
        a.flags.writeable = False
    return BasisSpec(knots=arrs[0], knot_len=arrs[1], block_col=arrs[2], block_kv=arrs[3],
                     block_offset=arrs[4], T=T, n_features=int(block_offset[-1]),
                     n_columns=d, eval_col=arrs[5], eval_kv=arrs[6], block_eval=arrs[7],
                     inv_den=arrs[8], span_table=arrs[9])


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
#
# Rows are processed in blocks of ROW_BLOCK: the basis of every (column, knot vector)
# evaluation is computed for the whole block in loops over rows (which the compiler
# vectorises), then each row's non-zero features are accumulated.

ROW_BLOCK = 64


@njit(cache=True, inline="always", error_model="numpy")
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


@njit(cache=True, inline="always", error_model="numpy")
def _q1(v):
    """floor(clip(v, 0, 1) 2^F) (NaN -> 0), branch-free."""
    v = v if v > 0.0 else 0.0
    v = v if v < 1.0 else 1.0
    return np.int64(math.floor(v * ONE))


@njit(cache=True, inline="always", error_model="numpy")
def _cut_to_one(q0, q1, q2, q3):
    """While the sum exceeds 2^F, decrease the largest (the first on ties) by the excess
    (at most down to 0)."""
    s = q0 + q1 + q2 + q3
    while s > ONE:
        m = max(max(q0, q1), max(q2, q3))
        dec = min(s - ONE, m)
        if q0 == m:
            q0 -= dec
        elif q1 == m:
            q1 -= dec
        elif q2 == m:
            q2 -= dec
        else:
            q3 -= dec
        s -= dec
    return q0, q1, q2, q3


@njit(cache=True, error_model="numpy")
def _quantize4(n0, n1, n2, n3, q, e):
    """q[e] = the quantized values of one evaluation (``_q1`` then ``_cut_to_one``)."""
    q0, q1, q2, q3 = _cut_to_one(_q1(n0), _q1(n1), _q1(n2), _q1(n3))
    q[e, 0] = q0
    q[e, 1] = q1
    q[e, 2] = q2
    q[e, 3] = q3


@njit(cache=True, inline="always", error_model="numpy")
def _eval_block(z, i0, nb, zc, zs, T, knots, inv_den, span_table, knot_len, eval_col, eval_kv, zt,
                outb, tt, S, Q):
    """Spans S[e, r] and quantized values Q[e, a, r] of rows i0 .. i0 + nb - 1.

    Scratch: zt (d, ROW_BLOCK) float64 ends holding every column's clipped t; outb
    (2, ROW_BLOCK) int64: row 0 ends 1 where some column's t = (z - center) / scale lies
    beyond [-T, T] (NaN: inside), else 0 (row 1: the rows to cut); tt (5, ROW_BLOCK)
    float64 (the 4 basis values in rows 1..4)."""
    d = z.shape[1]
    for r in range(nb):
        outb[0, r] = 0
    if d > 1:
        # the block's rows read once, in memory order (then each column is contiguous)
        for r in range(nb):
            for j in range(d):
                zt[j, r] = z[i0 + r, j]
    else:
        for r in range(nb):
            zt[0, r] = z[i0 + r, 0]
    for j in range(d):
        c = zc[j]
        sc = zs[j]
        for r in range(nb):
            v = (zt[j, r] - c) / sc
            v = 0.0 if v != v else v                # NaN -> 0, then clip (inf -> +-T)
            outb[0, r] |= (v > T) | (v < -T)
            v = v if v < T else T
            zt[j, r] = v if v > -T else -T
    for e in range(eval_col.shape[0]):
        j = eval_col[e]
        kv = eval_kv[e]
        L = knot_len[kv]
        # the span: the largest m in [3, L - 5] with knots[m] <= t, stepped to from the
        # table's entry for t's cell (exact whatever the entry)
        if L - 2 * (DEGREE + 1) <= _LINEAR_SPAN:
            # few knots: count them (branch-free, vectorised over the rows)
            for r in range(nb):
                S[e, r] = DEGREE
            for k in range(DEGREE + 1, L - DEGREE - 1):
                kk = knots[kv, k]
                for r in range(nb):
                    S[e, r] += kk <= zt[j, r]
        else:
            ncell = span_table.shape[1]
            inv_h = ncell / (2.0 * T)
            top = L - DEGREE - 2
            for r in range(nb):
                t = zt[j, r]
                c = int((t + T) * inv_h)
                c = c if c < ncell else ncell - 1
                c = c if c > 0 else 0
                m = span_table[kv, c]
                while m < top and knots[kv, m + 1] <= t:
                    m += 1
                while m > DEGREE and knots[kv, m] > t:
                    m -= 1
                S[e, r] = m
        for r in range(nb):
            n0, n1, n2, n3 = _basis4(knots, inv_den, kv, S[e, r], zt[j, r])
            tt[1, r] = n0
            tt[2, r] = n1
            tt[3, r] = n2
            tt[4, r] = n3
        # quantise (a loop the compiler vectorises): floor(clip(v, 0, 1) 2^F); for
        # v in [0, 1] the floor is the truncation of the conversion to an integer
        for a in range(DEGREE + 1):
            for r in range(nb):
                v = tt[1 + a, r]
                v = v if v > 0.0 else 0.0
                v = v if v < 1.0 else 1.0
                Q[e, a, r] = np.int64(v * ONE)
        # the rows whose values sum above 2^F (rare: rounding) found in a vectorised loop,
        # then cut (the same rows and the same cuts as a test per row)
        nover = 0
        for r in range(nb):
            o = (Q[e, 0, r] + Q[e, 1, r] + Q[e, 2, r] + Q[e, 3, r]) > ONE
            outb[1, r] = o
            nover += o
        if nover:
            for r in range(nb):
                if outb[1, r]:
                    Q[e, 0, r], Q[e, 1, r], Q[e, 2, r], Q[e, 3, r] = _cut_to_one(
                        Q[e, 0, r], Q[e, 1, r], Q[e, 2, r], Q[e, 3, r])


@njit(cache=True, inline="always", error_model="numpy")
def _row_runs(S, Q, r, knot_len, block_eval, block_kv, block_offset, run_start, run_val):
    """Row r's non-zero features as runs of 4 consecutive indices, increasing."""
    c = 0
    for b in range(block_eval.shape[0]):
        e1 = block_eval[b, 0]
        e2 = block_eval[b, 1]
        m1 = S[e1, r] - DEGREE
        if e2 < 0:
            run_start[c] = block_offset[b] + m1
            for a in range(DEGREE + 1):
                run_val[c, a] = Q[e1, a, r]
            c += 1
        else:
            w2 = knot_len[block_kv[b, 1]] - (DEGREE + 1)
            m2 = S[e2, r] - DEGREE
            for a in range(DEGREE + 1):
                qa = Q[e1, a, r]
                run_start[c] = block_offset[b] + (m1 + a) * w2 + m2
                for bb in range(DEGREE + 1):
                    run_val[c, bb] = (qa * Q[e2, bb, r]) >> SCALE_BITS
                c += 1
    return c


@njit(cache=True, inline="always", error_model="numpy")
def _u_block(x, i0, nb, center, bound, off, U):
    """U[off + c, r] = trunc(clip((x - center) / bound, -1, 1) 2^F), NaN -> 0."""
    for c in range(x.shape[1]):
        ce = center[c]
        bo = bound[c]
        for r in range(nb):
            u = (x[i0 + r, c] - ce) / bo
            u = 0.0 if u != u else u
            u = u if u < 1.0 else 1.0
            u = u if u > -1.0 else -1.0
            U[off + c, r] = np.int64(u * ONE)


@njit(cache=True, inline="always", error_model="numpy")
def _label(lab, i, outside, out_label):
    """Row i's label: ``out_label`` where the row lies outside the clip box (``outside``
    non-zero) and ``out_label`` >= 0, else lab[i] (a select: no branch on the data)."""
    own = lab[i]
    return out_label if (outside != 0) & (out_label >= 0) else own


# --------------------------------------------------------------------------- kernels

@njit(cache=True, error_model="numpy")
def features_into(z, zc, zs, T, knots, inv_den, span_table, knot_len, eval_col, eval_kv, block_eval,
                  block_kv, block_offset, n_runs, out):
    """Dense int64 features of every row of z into out (n, P) (one thread: small n)."""
    n = z.shape[0]
    ne = eval_col.shape[0]
    tt = np.empty((DEGREE + 2, ROW_BLOCK))
    zt = np.empty((z.shape[1], ROW_BLOCK))
    outb = np.empty((2, ROW_BLOCK), dtype=np.int64)
    S = np.empty((ne, ROW_BLOCK), dtype=np.int64)
    Q = np.empty((ne, DEGREE + 1, ROW_BLOCK), dtype=np.int64)
    run_start = np.empty(n_runs, dtype=np.int64)
    run_val = np.empty((n_runs, DEGREE + 1), dtype=np.int64)
    for i0 in range(0, n, ROW_BLOCK):
        nb = min(ROW_BLOCK, n - i0)
        _eval_block(z, i0, nb, zc, zs, T, knots, inv_den, span_table, knot_len, eval_col,
                    eval_kv, zt, outb, tt, S, Q)
        for r in range(nb):
            _row_runs(S, Q, r, knot_len, block_eval, block_kv, block_offset, run_start,
                      run_val)
            for p in range(out.shape[1]):
                out[i0 + r, p] = 0
            for k in range(n_runs):
                for a in range(DEGREE + 1):
                    out[i0 + r, run_start[k] + a] = run_val[k, a]
    return out


@njit(cache=True, error_model="numpy")
def _accumulate_part(z, x, y, zc, zs, xc, xb, yc, yb, T, knots, inv_den, span_table, knot_len,
                     eval_col, eval_kv, block_eval, block_kv, block_offset, n_runs, group, out_label, ucols, Gf, Bf,
                     ng, P, pu, part, nparts):
    """Rows [part n / nparts, (part + 1) n / nparts) into the flat G and B of ``part``.

    The products are accumulated in float64 first (every product is an integer of at most
    2^32 in size and a call has at most FLOAT_ROWS rows, so every partial sum is an integer
    below 2^53: exact, in any order) and added to the int64 outputs at the end.  A run's own
    4 x 4 block goes to a compact per-start accumulator (Gd), the later runs' blocks to the
    dense one (Gx); Bx holds the cross-products.
    """
    n = z.shape[0]
    ne = eval_col.shape[0]
    px = x.shape[1]
    lo = part * n // nparts
    hi = (part + 1) * n // nparts
    tt = np.empty((DEGREE + 2, ROW_BLOCK))
    zt = np.empty((z.shape[1], ROW_BLOCK))
    outb = np.empty((2, ROW_BLOCK), dtype=np.int64)
    S = np.empty((ne, ROW_BLOCK), dtype=np.int64)
    Q = np.empty((ne, DEGREE + 1, ROW_BLOCK), dtype=np.int64)
    U = np.empty((pu, ROW_BLOCK), dtype=np.int64)
    Uf = np.empty((ROW_BLOCK, pu))
    run_start = np.empty(n_runs, dtype=np.int64)
    run_val = np.empty((n_runs, DEGREE + 1), dtype=np.int64)
    fv = np.empty(4 * n_runs)
    Gd = np.zeros(ng * P * 16)
    Bx = np.zeros(ng * P * pu)
    Gx = np.zeros(ng * P * P) if n_runs > 1 else np.zeros(0)
    uP = uint64(P)
    upu = uint64(pu)
    u1 = uint64(1)
    u2 = uint64(2)
    u3 = uint64(3)
    u16 = uint64(16)
    for i0 in range(lo, hi, ROW_BLOCK):
        nb = min(ROW_BLOCK, hi - i0)
        _eval_block(z, i0, nb, zc, zs, T, knots, inv_den, span_table, knot_len, eval_col,
                    eval_kv, zt, outb, tt, S, Q)
        _u_block(x, i0, nb, xc, xb, 0, U)
        _u_block(y, i0, nb, yc, yb, px, U)
        for c in range(pu):
            for r in range(nb):
                Uf[r, c] = np.float64(U[c, r])
        for r in range(nb):
            _row_runs(S, Q, r, knot_len, block_eval, block_kv, block_offset, run_start,
                      run_val)
            for k in range(n_runs):
                fv[4 * k] = np.float64(run_val[k, 0])
                fv[4 * k + 1] = np.float64(run_val[k, 1])
                fv[4 * k + 2] = np.float64(run_val[k, 2])
                fv[4 * k + 3] = np.float64(run_val[k, 3])
            g = _label(group, i0 + r, outb[0, r], out_label)
            gP = uint64(g * P)
            for r1 in range(n_runs):
                s1 = uint64(run_start[r1])
                v0 = fv[4 * r1]
                v1 = fv[4 * r1 + 1]
                v2 = fv[4 * r1 + 2]
                v3 = fv[4 * r1 + 3]
                # the run's own 4 x 4 block (all 16 entries; the upper triangle is kept)
                o = (gP + s1) * u16
                for a in range(4):
                    va = fv[4 * r1 + a]
                    oa = o + uint64(4 * a)
                    g0 = Gd[oa]
                    g1 = Gd[oa + u1]
                    g2 = Gd[oa + u2]
                    g3 = Gd[oa + u3]
                    Gd[oa] = g0 + va * v0
                    Gd[oa + u1] = g1 + va * v1
                    Gd[oa + u2] = g2 + va * v2
                    Gd[oa + u3] = g3 + va * v3
                # the later runs' 4 x 4 blocks (all in the upper triangle)
                for r2 in range(r1 + 1, n_runs):
                    w0 = fv[4 * r2]
                    w1 = fv[4 * r2 + 1]
                    w2 = fv[4 * r2 + 2]
                    w3 = fv[4 * r2 + 3]
                    ob = (gP + s1) * uP + uint64(run_start[r2])
                    for a in range(4):
                        va = fv[4 * r1 + a]
                        oa = ob + uint64(a) * uP
                        g0 = Gx[oa]
                        g1 = Gx[oa + u1]
                        g2 = Gx[oa + u2]
                        g3 = Gx[oa + u3]
                        Gx[oa] = g0 + va * w0
                        Gx[oa + u1] = g1 + va * w1
                        Gx[oa + u2] = g2 + va * w2
                        Gx[oa + u3] = g3 + va * w3
                bo = (gP + s1) * upu
                for c in range(ucols[g, 0], ucols[g, 1]):
                    uc = Uf[r, c]
                    uc_ = uint64(c)
                    Bx[bo + uc_] += v0 * uc
                    Bx[bo + upu + uc_] += v1 * uc
                    Bx[bo + u2 * upu + uc_] += v2 * uc
                    Bx[bo + u3 * upu + uc_] += v3 * uc
    # exact integers: into the part's int64 outputs (upper triangle of G)
    base = part * ng * P
    for g in range(ng):
        for s1 in range(P):
            o = ((g * P) + s1) * 16
            for a in range(4):
                if s1 + a >= P:
                    break
                for c in range(a, 4):
                    if s1 + c < P:
                        Gf[((base + g * P) + s1 + a) * P + s1 + c] += np.int64(Gd[o + 4 * a + c])
        if n_runs > 1:
            for i in range(P):
                for j in range(i, P):
                    Gf[((base + g * P) + i) * P + j] += np.int64(Gx[(g * P + i) * P + j])
        for i in range(P):
            for c in range(pu):
                Bf[((base + g * P) + i) * pu + c] += np.int64(Bx[(g * P + i) * pu + c])


@intrinsic
def _axpy4(typingctx, dst, doff, s, src, soff):
    """dst[doff:doff + 4] += s * src[soff:soff + 4] on 1-D float64 arrays, as one 4-wide
    multiply and one 4-wide add (no fused multiply-add; no bounds check: the callers'
    offsets are in range by construction)."""
    sig = types.void(dst, types.uint64, types.float64, src, types.uint64)

    def codegen(context, builder, sig, args):
        d_v, doff, sv, s_v, soff = args
        da = context.make_array(sig.args[0])(context, builder, d_v)
        sa = context.make_array(sig.args[3])(context, builder, s_v)
        vty = ir.VectorType(ir.DoubleType(), 4)
        pd = builder.bitcast(builder.gep(da.data, [doff]), vty.as_pointer())
        ps = builder.bitcast(builder.gep(sa.data, [soff]), vty.as_pointer())
        vd = builder.load(pd, align=8)
        vs = builder.load(ps, align=8)
        sp = ir.Constant(vty, ir.Undefined)
        for i in range(4):
            sp = builder.insert_element(sp, sv, ir.Constant(ir.IntType(32), i))
        builder.store(builder.fadd(vd, builder.fmul(sp, vs)), pd, align=8)
        return context.get_dummy_value()

    return sig, codegen


@intrinsic
def _outer16(typingctx, dst, doff, src, o1, o2):
    """dst[doff + 4 a + c] += src[o1 + a] * src[o2 + c], a, c in 0..3 (one 16-wide
    multiply and add; no fused multiply-add; no bounds check)."""
    sig = types.void(dst, types.uint64, src, types.uint64, types.uint64)

    def codegen(context, builder, sig, args):
        d_v, doff, s_v, o1, o2 = args
        da = context.make_array(sig.args[0])(context, builder, d_v)
        sa = context.make_array(sig.args[2])(context, builder, s_v)
        v4 = ir.VectorType(ir.DoubleType(), 4)
        v16 = ir.VectorType(ir.DoubleType(), 16)
        p1 = builder.bitcast(builder.gep(sa.data, [o1]), v4.as_pointer())
        p2 = builder.bitcast(builder.gep(sa.data, [o2]), v4.as_pointer())
        pd = builder.bitcast(builder.gep(da.data, [doff]), v16.as_pointer())
        a = builder.load(p1, align=8)
        b = builder.load(p2, align=8)
        i32 = ir.IntType(32)
        ma = ir.Constant(ir.VectorType(i32, 16), [i // 4 for i in range(16)])
        mb = ir.Constant(ir.VectorType(i32, 16), [i % 4 for i in range(16)])
        ra = builder.shuffle_vector(a, a, ma)
        rb = builder.shuffle_vector(b, b, mb)
        vd = builder.load(pd, align=8)
        builder.store(builder.fadd(vd, builder.fmul(ra, rb)), pd, align=8)
        return context.get_dummy_value()

    return sig, codegen


@njit(cache=True, error_model="numpy")
def _accumulate_part_additive(z, x, y, zc, zs, xc, xb, yc, yb, T, knots, inv_den, span_table,
                              knot_len, eval_col, eval_kv, block_eval, block_kv, block_offset,
                              pair_base, n_comp, group, out_label, ucols, Gf, Bf, ng, P, pu, part, nparts):
    """:func:`_accumulate_part` for a basis of additive blocks only (block b = run b).

    Every pair of blocks b1 <= b2 has a compact float64 accumulator of 4 x 4 blocks, one per
    (span of b1, span of b2) (b1 == b2: one per span), at ``pair_base[b1, b2]``; a row adds
    q_b1 q_b2^T to one of them as one 16-wide multiply and add (:func:`_outer16`: the
    operands are loaded once, before the store; four 4-wide steps reloaded them after every
    store), and u_c q_b[0:4] to the cross-products (:func:`_axpy4`; layout (group, u
    column, P)).  The updates run pair by pair over a block's 64 rows, with the rows'
    labels and spans found first.  Exact as in
    :func:`_accumulate_part`; folded into the int64 G (upper triangle) and B at the end.
    """
    n = z.shape[0]
    ne = eval_col.shape[0]
    nbk = block_eval.shape[0]
    px = x.shape[1]
    lo = part * n // nparts
    hi = (part + 1) * n // nparts
    tt = np.empty((DEGREE + 2, ROW_BLOCK))
    zt = np.empty((z.shape[1], ROW_BLOCK))
    outb = np.empty((2, ROW_BLOCK), dtype=np.int64)
    S = np.empty((ne, ROW_BLOCK), dtype=np.int64)
    Q = np.empty((ne, DEGREE + 1, ROW_BLOCK), dtype=np.int64)
    U = np.empty((pu, ROW_BLOCK), dtype=np.int64)
    nspan = np.empty(nbk, dtype=np.int64)
    for b in range(nbk):
        nspan[b] = knot_len[block_kv[b, 0]] - 2 * (DEGREE + 1) + 1
    ne4 = 4 * ne
    Qf = np.empty(ROW_BLOCK * ne4)           # row r, evaluation e, value a at r ne4 + 4 e + a
    Uf = np.empty(ROW_BLOCK * pu)
    loc = np.empty((nbk, ROW_BLOCK), dtype=np.int64)
    grow = np.empty(ROW_BLOCK, dtype=np.int64)
    gcr = np.empty(ROW_BLOCK, dtype=np.int64)
    ulo = np.empty(ng, dtype=np.int64)
    uhi = np.empty(ng, dtype=np.int64)
    for g in range(ng):
        ulo[g] = ucols[g, 0]
        uhi[g] = ucols[g, 1]
    Gc = np.zeros(ng * n_comp)
    Bx = np.zeros(ng * pu * P)
    for i0 in range(lo, hi, ROW_BLOCK):
        nb = min(ROW_BLOCK, hi - i0)
        _eval_block(z, i0, nb, zc, zs, T, knots, inv_den, span_table, knot_len, eval_col,
                    eval_kv, zt, outb, tt, S, Q)
        _u_block(x, i0, nb, xc, xb, 0, U)
        _u_block(y, i0, nb, yc, yb, px, U)
        for e in range(ne):
            for a in range(DEGREE + 1):
                for r in range(nb):
                    Qf[r * ne4 + 4 * e + a] = np.float64(Q[e, a, r])
        for c in range(pu):
            for r in range(nb):
                Uf[r * pu + c] = np.float64(U[c, r])
        # the rows' labels and spans, then the updates pair by pair over the block's rows
        # (the same sums: the loops' bookkeeping is paid once per pair, not once per row)
        for r in range(nb):
            g = _label(group, i0 + r, outb[0, r], out_label)
            grow[r] = g
            gcr[r] = g * n_comp
        for b1 in range(nbk):
            e1 = block_eval[b1, 0]
            pb = pair_base[b1, b1]
            for r in range(nb):
                loc[b1, r] = S[e1, r] - DEGREE
            for r in range(nb):
                q1 = uint64(r * ne4 + 4 * e1)
                _outer16(Gc, uint64(gcr[r] + pb + 16 * loc[b1, r]), Qf, q1, q1)
        for b1 in range(nbk):
            e1 = block_eval[b1, 0]
            for b2 in range(b1 + 1, nbk):
                e2 = block_eval[b2, 0]
                pb = pair_base[b1, b2]
                ns2 = nspan[b2]
                for r in range(nb):
                    _outer16(Gc, uint64(gcr[r] + pb + 16 * (loc[b1, r] * ns2 + loc[b2, r])), Qf,
                             uint64(r * ne4 + 4 * e1), uint64(r * ne4 + 4 * e2))
        for b1 in range(nbk):
            e1 = block_eval[b1, 0]
            off = block_offset[b1]
            for r in range(nb):
                g = grow[r]
                for c in range(ulo[g], uhi[g]):
                    _axpy4(Bx, uint64((g * pu + c) * P + off + loc[b1, r]), Uf[r * pu + c], Qf,
                           uint64(r * ne4 + 4 * e1))
    # exact integers: into the part's int64 outputs
    base = part * ng * P
    for g in range(ng):
        gc = g * n_comp
        for b1 in range(nbk):
            o1 = block_offset[b1]
            for b2 in range(b1, nbk):
                o2 = block_offset[b2]
                pb = gc + pair_base[b1, b2]
                if b1 == b2:
                    for s1 in range(nspan[b1]):
                        for a in range(4):
                            for c in range(a, 4):
                                Gf[(base + g * P + o1 + s1 + a) * P + o1 + s1 + c] += np.int64(
                                    Gc[pb + 16 * s1 + 4 * a + c])
                else:
                    for s1 in range(nspan[b1]):
                        for s2 in range(nspan[b2]):
                            oc = pb + 16 * (s1 * nspan[b2] + s2)
                            for a in range(4):
                                for c in range(4):
                                    Gf[(base + g * P + o1 + s1 + a) * P + o2 + s2 + c] += \
                                        np.int64(Gc[oc + 4 * a + c])
        for i in range(P):
            for c in range(pu):
                Bf[(base + g * P + i) * pu + c] += np.int64(Bx[(g * pu + c) * P + i])


@njit(parallel=True, cache=True, error_model="numpy")
def accumulate_additive_into(z, x, y, zc, zs, xc, xb, yc, yb, T, knots, inv_den, span_table,
                             knot_len, eval_col, eval_kv, block_eval, block_kv, block_offset,
                             pair_base, n_comp, group, out_label, ucols, G, B):
    """:func:`accumulate_into` for additive bases (:func:`_accumulate_part_additive`)."""
    nparts = G.shape[0]
    Gf = G.reshape(-1)
    Bf = B.reshape(-1)
    for part in prange(nparts):
        _accumulate_part_additive(z, x, y, zc, zs, xc, xb, yc, yb, T, knots, inv_den,
                                  span_table, knot_len, eval_col, eval_kv, block_eval, block_kv,
                                  block_offset, pair_base, n_comp, group, out_label, ucols, Gf, Bf, G.shape[1],
                                  G.shape[2], B.shape[3], part, nparts)
    return G, B


@njit(cache=True, error_model="numpy")
def _accumulate_additive_serial(z, x, y, zc, zs, xc, xb, yc, yb, T, knots, inv_den, span_table,
                                knot_len, eval_col, eval_kv, block_eval, block_kv, block_offset,
                                pair_base, n_comp, group, out_label, ucols, G, B):
    """:func:`accumulate_additive_into` on one thread."""
    _accumulate_part_additive(z, x, y, zc, zs, xc, xb, yc, yb, T, knots, inv_den, span_table,
                              knot_len, eval_col, eval_kv, block_eval, block_kv, block_offset,
                              pair_base, n_comp, group, out_label, ucols, G.reshape(-1), B.reshape(-1),
                              G.shape[1], G.shape[2], B.shape[3], 0, 1)
    return G, B


def _pair_layout(spec):
    """(pair_base (n_blocks, n_blocks) int64, n_comp) of the compact accumulators of an
    additive spec, or None when the spec has tensor blocks or they would exceed
    _COMPACT_BYTES per group."""
    if np.any(spec.block_col[:, 1] >= 0):
        return None
    ns = spec.knot_len[spec.block_kv[:, 0]] - 2 * (DEGREE + 1) + 1
    nb = ns.size
    base = np.zeros((nb, nb), dtype=np.int64)
    tot = 0
    for b1 in range(nb):
        for b2 in range(b1, nb):
            base[b1, b2] = tot
            tot += 16 * (int(ns[b1]) if b1 == b2 else int(ns[b1]) * int(ns[b2]))
    if tot * 8 > _COMPACT_BYTES:
        return None
    return base, tot


@njit(parallel=True, cache=True, error_model="numpy")
def accumulate_into(z, x, y, zc, zs, xc, xb, yc, yb, T, knots, inv_den, span_table, knot_len, eval_col,
                    eval_kv, block_eval, block_kv, block_offset, n_runs, group, out_label, ucols, G, B):
    """Add the rows' upper-triangle Gram and cross-product terms into G[part], B[part].

    G : (parts, n_groups, P, P) int64, B : (parts, n_groups, P, px + py) int64, both
    C-contiguous; the rows are cut into ``parts`` contiguous ranges, one per thread.  Only
    entries (a, c) with a <= c of G are touched.
    """
    nparts = G.shape[0]
    Gf = G.reshape(-1)
    Bf = B.reshape(-1)
    for part in prange(nparts):
        _accumulate_part(z, x, y, zc, zs, xc, xb, yc, yb, T, knots, inv_den, span_table, knot_len,
                         eval_col, eval_kv, block_eval, block_kv, block_offset, n_runs, group,
                         out_label, ucols, Gf, Bf, G.shape[1], G.shape[2], B.shape[3], part,
                         nparts)
    return G, B


@njit(cache=True, error_model="numpy")
def _accumulate_serial(z, x, y, zc, zs, xc, xb, yc, yb, T, knots, inv_den, span_table, knot_len, eval_col,
                       eval_kv, block_eval, block_kv, block_offset, n_runs, group, out_label, ucols, G, B):
    """:func:`accumulate_into` on one thread (G, B with one part); small calls."""
    _accumulate_part(z, x, y, zc, zs, xc, xb, yc, yb, T, knots, inv_den, span_table, knot_len, eval_col,
                     eval_kv, block_eval, block_kv, block_offset, n_runs, group, out_label, ucols,
                     G.reshape(-1), B.reshape(-1), G.shape[1], G.shape[2], B.shape[3], 0, 1)
    return G, B


@njit(cache=True, error_model="numpy", inline="always")
def _add_residual_products(res, U, r, pu, px, py, blk, rs, S_out):
    """One row's tail of the residual pass: ``res`` holds the predictions of its pu = px +
    py columns; the residuals clip((u - clip(prediction, -1, 1)) rs, -1, 1) replace them (a
    non-finite prediction counts as 0), and each clipped product r_x r_y is added, on the
    grid 2^-32, to block ``blk`` of S_out."""
    for c in range(pu):
        pr = res[c]
        pr = pr if math.isfinite(pr) else 0.0
        pr = min(max(pr, -1.0), 1.0)
        res[c] = min(max((U[c, r] * _INV_ONE - pr) * rs[c], -1.0), 1.0)
    pq = px * py
    for b in range(py):
        ryb = res[px + b]
        for a in range(px):
            prod = min(max(res[a] * ryb, -1.0), 1.0)
            S_out[blk, a + px * b] += np.int64(prod * _ONE2_F)
            S_out[blk, pq + a + px * b] += np.int64(prod * prod * _ONE2_F)


@njit(cache=True, error_model="numpy")
def _residual_part(z, x, y, zc, zs, xc, xb, yc, yb, T, knots, inv_den, span_table, knot_len, eval_col,
                   eval_kv, block_eval, block_kv, block_offset, n_runs, coef, block, out_label, rs, S_out,
                   part, nparts):
    """Rows [part n / nparts, (part + 1) n / nparts) into S_out (k, 2 px py): the products, then
    their squares."""
    n = z.shape[0]
    ne = eval_col.shape[0]
    px = x.shape[1]
    py = y.shape[1]
    pu = px + py
    lo = part * n // nparts
    hi = (part + 1) * n // nparts
    tt = np.empty((DEGREE + 2, ROW_BLOCK))
    zt = np.empty((z.shape[1], ROW_BLOCK))
    outb = np.empty((2, ROW_BLOCK), dtype=np.int64)
    S = np.empty((ne, ROW_BLOCK), dtype=np.int64)
    Q = np.empty((ne, DEGREE + 1, ROW_BLOCK), dtype=np.int64)
    U = np.empty((pu, ROW_BLOCK), dtype=np.int64)
    run_start = np.empty(n_runs, dtype=np.int64)
    run_val = np.empty((n_runs, DEGREE + 1), dtype=np.int64)
    res = np.empty(pu)
    for i0 in range(lo, hi, ROW_BLOCK):
        nb = min(ROW_BLOCK, hi - i0)
        _eval_block(z, i0, nb, zc, zs, T, knots, inv_den, span_table, knot_len, eval_col,
                    eval_kv, zt, outb, tt, S, Q)
        _u_block(x, i0, nb, xc, xb, 0, U)
        _u_block(y, i0, nb, yc, yb, px, U)
        for r in range(nb):
            _row_runs(S, Q, r, knot_len, block_eval, block_kv, block_offset, run_start,
                      run_val)
            # phi @ coef over the non-zero features in increasing index, two columns at
            # a time in registers
            for c0 in range(0, pu, 2):
                c1 = min(c0 + 1, pu - 1)
                acc0 = 0.0
                acc1 = 0.0
                for k in range(n_runs):
                    s0 = run_start[k]
                    for a in range(DEGREE + 1):
                        v = run_val[k, a]
                        if v == 0:
                            continue
                        ph = v * _INV_ONE
                        acc0 += ph * coef[s0 + a, c0]
                        acc1 += ph * coef[s0 + a, c1]
                res[c0] = acc0
                res[c1] = acc1
            _add_residual_products(res, U, r, pu, px, py, _label(block, i0 + r, outb[0, r], out_label),
                                   rs, S_out)


@njit(parallel=True, cache=True, error_model="numpy")
def residual_sums_into(z, x, y, zc, zs, xc, xb, yc, yb, T, knots, inv_den, span_table, knot_len,
                       eval_col, eval_kv, block_eval, block_kv, block_offset, n_runs, coef,
                       block, out_label, rs, S_out):
    """Add the rows' quantized residual products into S_out[part, block[i]] (px*py columns),
    then their squares (px*py more columns).

    ``coef`` (P, px + py) holds the x columns' coefficients, then the y columns'.
    """
    nparts = S_out.shape[0]
    for part in prange(nparts):
        _residual_part(z, x, y, zc, zs, xc, xb, yc, yb, T, knots, inv_den, span_table, knot_len, eval_col,
                       eval_kv, block_eval, block_kv, block_offset, n_runs, coef, block, out_label, rs,
                       S_out[part], part, nparts)
    return S_out


@njit(cache=True, error_model="numpy")
def _residual_serial(z, x, y, zc, zs, xc, xb, yc, yb, T, knots, inv_den, span_table, knot_len, eval_col,
                     eval_kv, block_eval, block_kv, block_offset, n_runs, coef, block, out_label, rs, S_out):
    """:func:`residual_sums_into` on one thread (S_out with one part); small calls."""
    _residual_part(z, x, y, zc, zs, xc, xb, yc, yb, T, knots, inv_den, span_table, knot_len, eval_col,
                   eval_kv, block_eval, block_kv, block_offset, n_runs, coef, block, out_label, rs, S_out[0],
                   0, 1)
    return S_out


@njit(cache=True, error_model="numpy")
def _residual_part_additive(z, x, y, zc, zs, xc, xb, yc, yb, T, knots, inv_den, span_table,
                            knot_len, eval_col, eval_kv, block_eval, block_kv, block_offset,
                            coef_t, block, out_label, rs, S_out, part, nparts):
    """:func:`_residual_part` for a basis of additive blocks only; ``coef_t`` (px + py, P).

    The same operations in the same order (the prediction sums the row's features in
    increasing index; a zero feature adds nothing, as a select instead of a branch: the
    result differs at most in the sign of a zero prediction, which the residual
    u - pred does not see).
    """
    n = z.shape[0]
    ne = eval_col.shape[0]
    nbk = block_eval.shape[0]
    px = x.shape[1]
    py = y.shape[1]
    pu = px + py
    lo = part * n // nparts
    hi = (part + 1) * n // nparts
    tt = np.empty((DEGREE + 2, ROW_BLOCK))
    zt = np.empty((z.shape[1], ROW_BLOCK))
    outb = np.empty((2, ROW_BLOCK), dtype=np.int64)
    S = np.empty((ne, ROW_BLOCK), dtype=np.int64)
    Q = np.empty((ne, DEGREE + 1, ROW_BLOCK), dtype=np.int64)
    U = np.empty((pu, ROW_BLOCK), dtype=np.int64)
    pred = np.empty((pu, ROW_BLOCK))
    qp = np.empty(ROW_BLOCK, dtype=np.int64)
    qs = np.empty(ROW_BLOCK, dtype=np.int64)
    pq = px * py
    idx = np.empty((nbk, ROW_BLOCK), dtype=np.int64)
    phf = np.empty((ne, DEGREE + 1, ROW_BLOCK))
    for i0 in range(lo, hi, ROW_BLOCK):
        nb = min(ROW_BLOCK, hi - i0)
        _eval_block(z, i0, nb, zc, zs, T, knots, inv_den, span_table, knot_len, eval_col,
                    eval_kv, zt, outb, tt, S, Q)
        _u_block(x, i0, nb, xc, xb, 0, U)
        _u_block(y, i0, nb, yc, yb, px, U)
        # the predictions, for all rows of the block at once (independent chains; each
        # row's sum still runs over its features in increasing index): the features'
        # indices and values found once, then each column's sums
        for b in range(nbk):
            e = block_eval[b, 0]
            off = block_offset[b] - DEGREE
            for r in range(nb):
                idx[b, r] = off + S[e, r]
        for e in range(ne):
            for a in range(DEGREE + 1):
                for r in range(nb):
                    phf[e, a, r] = Q[e, a, r] * _INV_ONE
        for c in range(pu):
            cc = coef_t[c]
            for r in range(nb):
                pred[c, r] = 0.0
            for b in range(nbk):
                e = block_eval[b, 0]
                for a in range(DEGREE + 1):
                    for r in range(nb):
                        term = phf[e, a, r] * cc[uint64(idx[b, r] + a)]
                        pred[c, r] += term if Q[e, a, r] != 0 else 0.0
        # the tail of _add_residual_products, column by column over the block's rows (the
        # same operations on every value; the products' integer sums in any order)
        for c in range(pu):
            sc = rs[c]
            for r in range(nb):
                pr = pred[c, r]
                pr = pr if math.isfinite(pr) else 0.0
                pr = min(max(pr, -1.0), 1.0)
                pred[c, r] = min(max((U[c, r] * _INV_ONE - pr) * sc, -1.0), 1.0)
        for b in range(py):
            for a in range(px):
                col = a + px * b
                for r in range(nb):
                    prod = min(max(pred[a, r] * pred[px + b, r], -1.0), 1.0)
                    qp[r] = np.int64(prod * _ONE2_F)
                    qs[r] = np.int64(prod * prod * _ONE2_F)
                for r in range(nb):
                    lab = _label(block, i0 + r, outb[0, r], out_label)
                    S_out[lab, col] += qp[r]
                    S_out[lab, pq + col] += qs[r]


@njit(parallel=True, cache=True, error_model="numpy")
def residual_sums_additive_into(z, x, y, zc, zs, xc, xb, yc, yb, T, knots, inv_den,
                                span_table, knot_len, eval_col, eval_kv, block_eval, block_kv,
                                block_offset, coef_t, block, out_label, rs, S_out):
    """:func:`residual_sums_into` for additive bases (:func:`_residual_part_additive`)."""
    nparts = S_out.shape[0]
    for part in prange(nparts):
        _residual_part_additive(z, x, y, zc, zs, xc, xb, yc, yb, T, knots, inv_den,
                                span_table, knot_len, eval_col, eval_kv, block_eval, block_kv,
                                block_offset, coef_t, block, out_label, rs, S_out[part], part, nparts)
    return S_out


@njit(cache=True, error_model="numpy")
def _residual_additive_serial(z, x, y, zc, zs, xc, xb, yc, yb, T, knots, inv_den, span_table,
                              knot_len, eval_col, eval_kv, block_eval, block_kv, block_offset,
                              coef_t, block, out_label, rs, S_out):
    """:func:`residual_sums_additive_into` on one thread."""
    _residual_part_additive(z, x, y, zc, zs, xc, xb, yc, yb, T, knots, inv_den, span_table,
                            knot_len, eval_col, eval_kv, block_eval, block_kv, block_offset,
                            coef_t, block, out_label, rs, S_out[0], 0, 1)
    return S_out


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
    # always a fresh writeable copy: one compiled signature whatever the caller passes
    v = np.array(np.broadcast_to(np.asarray(v, dtype=np.float64), (c,)), dtype=np.float64)
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


def _labels(lab, n, lo, hi, n_labels, name, check=True):
    if lab is None:
        return np.zeros(hi - lo, dtype=np.int64)
    part = np.asarray(lab[lo:hi])
    if not check and part.dtype == np.int64:
        return np.ascontiguousarray(part)
    if part.size and part.dtype.kind not in "iub":
        raise ValueError(f"`{name}` must hold integers; got dtype {part.dtype}")
    out = np.ascontiguousarray(part, dtype=np.int64)
    if out.size and (out.min() < 0 or out.max() >= n_labels):
        raise ValueError(f"`{name}` must lie in [0, {n_labels})")
    return out


def _outside_label(label, n_labels, name, what):
    """The kernels' ``out_label``: -1 (no box rule) or the checked label."""
    if label is None:
        return -1
    if isinstance(label, (bool, np.bool_)) or not isinstance(label, (int, np.integer)) or \
            not 0 <= int(label) < n_labels:
        raise ValueError(f"`{name}` must be None or an integer in [0, {what} = {n_labels}); "
                         f"got {label!r}")
    return int(label)


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
               group=None, n_groups=1, *, chunk_rows=CHUNK_ROWS, check_labels=True,
               u_columns=None, outside_group=None):
    """Pass 1: per group, G_int = sum q q^T and B_int = sum q uq^T over the rows.

    Parameters
    ----------
    z : (n, d) (or (n,) for d = 1); x : (n, px), y : (n, py) raw (None: no columns).
    z_center, z_scale : public, per column of z (or scalars); t = (z - center) / scale.
    x_center, x_bound, y_center, y_bound : public, per column; u = clip((x - c) / b, -1, 1).
    spec : :class:`BasisSpec`.
    group : (n,) integers in [0, n_groups) (None: all rows in group 0).
    check_labels : False skips the range check of an int64 ``group`` (for labels the
        caller made, e.g. :func:`privci._private.block_labels`; out-of-range labels would
        then write out of bounds).
    u_columns : None (every group, every u column) or one (lo, hi) per group: group g's
        cross-products only for the u columns lo..hi-1 (the others stay 0).  PrivGCM's
        halves: x for half A, y for half B.
    outside_group : None, or a group in [0, n_groups): rows whose t lies beyond [-T, T] in
        some column (the clip box; NaN counts as inside) are summed into this group
        instead of their own (PrivGCM's rows left out of the fit).  Decided inside the
        kernels from the t they compute anyway, with a select: every row does the same
        work.

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
    out_label = _outside_label(outside_group, ng, "outside_group", "n_groups")
    nparts = _n_parts(n, ng * P * (P + pu) * 8)
    G = np.zeros((nparts, ng, P, P), dtype=np.int64)
    B = np.zeros((nparts, ng, P, pu), dtype=np.int64)
    layout = _pair_layout(spec)
    if u_columns is None:
        ucols = np.tile(np.array([0, pu], dtype=np.int64), (ng, 1))
    else:
        ucols = np.array(u_columns, dtype=np.int64).reshape(-1, 2)
        if ucols.shape[0] != ng or np.any(ucols[:, 0] < 0) or np.any(ucols[:, 1] > pu) or \
                np.any(ucols[:, 0] > ucols[:, 1]):
            raise ValueError(f"`u_columns` needs one (lo, hi) per group, 0 <= lo <= hi <= {pu}")
    for lo, hi in _chunks(n, min(int(chunk_rows), FLOAT_ROWS)):
        k = min(_n_parts(hi - lo, 0), nparts)
        args = (_f64(z, lo, hi), _f64(x, lo, hi), _f64(y, lo, hi), *pub, spec.T,
                *spec._arrays())
        lab = _labels(group, n, lo, hi, ng, "group", check_labels)
        if layout is not None:
            kern = accumulate_additive_into if k > 1 else _accumulate_additive_serial
            kern(*args, *layout, lab, out_label, ucols, G[:k], B[:k])
        else:
            kern = accumulate_into if k > 1 else _accumulate_serial
            kern(*args, spec.n_runs, lab, out_label, ucols, G[:k], B[:k])
    G = G.sum(axis=0) if nparts > 1 else G[0]
    B = B.sum(axis=0) if nparts > 1 else B[0]
    iu = np.triu_indices(P, 1)
    for g in range(ng):
        G[g].T[iu] = G[g][iu]
    return G, B


def residual_block_sums(z, x, y, z_center, z_scale, x_center, x_bound, y_center, y_bound,
                        spec, coef_x, coef_y, block, k, *, chunk_rows=CHUNK_ROWS,
                        check_labels=True, outside_block=None, residual_scale=None,
                        squares=False):
    """Pass 2: block sums of the quantized residual products, (k, px * py) int64.

    With phi = q / 2^F, pred = clip(phi @ coef, -1, 1) (non-finite -> 0 first),
    r = clip((uq / 2^F - pred) s, -1, 1) per column (s: ``residual_scale``, default 1; with
    s = 1 / c and |u - pred| <= c the clip only guards rounding), and per row the products
    trunc(clip(r_x[a] r_y[b], -1, 1) 2^(2F)) are added to row block[i] of the output,
    column a + px b.  ``coef_x`` (P, px), ``coef_y`` (P, py) are public; ``block`` (n,)
    integers in [0, k) (``check_labels`` as in :func:`accumulate`); ``outside_block``: None or
    a block in [0, k) that takes the rows beyond the clip box (as ``outside_group`` of
    :func:`accumulate`).  Units 2^(-2F) (:func:`to_float`).  With ``squares=True`` also the
    block sums of the squared products, trunc(clip(r_x[a] r_y[b], -1, 1)^2 2^(2F)) (each in
    [0, 2^(2F)]): a pair of (k, px * py) arrays (the kernels always compute both).
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
    coef = np.ascontiguousarray(np.hstack([cx, cy]))
    block = np.asarray(block)
    if block.shape != (n,):
        raise ValueError(f"`block` must have shape ({n},); got {block.shape}")
    out_label = _outside_label(outside_block, k, "outside_block", "k")
    if residual_scale is None:
        rs = np.ones(px + py)
    else:
        rs = np.array(residual_scale, dtype=np.float64).reshape(-1)
        if rs.shape != (px + py,) or not np.all(np.isfinite(rs)) or np.any(rs <= 0) or \
                np.any(rs > 1):
            raise ValueError(f"`residual_scale` must be {px + py} numbers in (0, 1] (the x "
                             f"columns', then the y columns'); got {residual_scale!r}")
    nparts = _n_parts(n, 2 * k * px * py * 8)
    S = np.zeros((nparts, k, 2 * px * py), dtype=np.int64)
    additive = not np.any(spec.block_col[:, 1] >= 0)
    coef_t = np.ascontiguousarray(coef.T)
    for lo, hi in _chunks(n, chunk_rows):
        kk = min(_n_parts(hi - lo, 0), nparts)
        args = (_f64(z, lo, hi), _f64(x, lo, hi), _f64(y, lo, hi), *pub, spec.T,
                *spec._arrays())
        lab = _labels(block, n, lo, hi, k, "block", check_labels)
        if additive:
            kern = residual_sums_additive_into if kk > 1 else _residual_additive_serial
            kern(*args, coef_t, lab, out_label, rs, S[:kk])
        else:
            kern = residual_sums_into if kk > 1 else _residual_serial
            kern(*args, spec.n_runs, coef, lab, out_label, rs, S[:kk])
    S = S.sum(axis=0) if nparts > 1 else S[0]
    pq = px * py
    if squares:
        return np.ascontiguousarray(S[:, :pq]), np.ascontiguousarray(S[:, pq:])
    return np.ascontiguousarray(S[:, :pq])
