"""Plain numpy twins of the fused kernels in privci._basis_kernels (tests only).

Written from the definitions, vectorised over rows, dense (n x P): the knot spans by
``np.searchsorted``, the Cox-de Boor recursion as a loop over (j, r), the features of a
tensor block as the dense outer product of the two columns' vectors, the statistics as
integer matrix products.  The arithmetic of every floating-point step is the one the
definitions state, in the same order, so the integers must agree exactly.
"""

import numpy as np

F = 16
ONE = 1 << F
DEG = 3


def clip_t(z, center, scale, T):
    """t = (z - center) / scale, NaN -> 0, clipped to [-T, T]."""
    with np.errstate(all="ignore"):
        t = (np.asarray(z, dtype=np.float64) - center) / scale
    t = np.where(np.isnan(t), 0.0, t)
    return np.clip(t, -T, T)


def outside(z, center, scale, T):
    """(n,) bool: rows whose t = (z - center) / scale lies beyond [-T, T] in some column
    (NaN counts as inside)."""
    with np.errstate(all="ignore"):
        t = (np.asarray(z, dtype=np.float64).reshape(len(z), -1) - center) / scale
    return np.any((t > T) | (t < -T), axis=1)


def basis_values(t, kv):
    """Spans m (n,) and the 4 non-zero cubic B-splines (n, 4) at t on the clamped vector kv.

    N[:, a] is the value of basis function m - 3 + a.
    """
    t = np.asarray(t, dtype=np.float64)
    L = kv.size
    m = np.clip(np.searchsorted(kv, t, side="right") - 1, DEG, L - DEG - 2)
    n = t.size
    N = np.zeros((n, DEG + 1))
    N[:, 0] = 1.0
    left = np.zeros((n, DEG + 1))
    right = np.zeros((n, DEG + 1))
    for j in range(1, DEG + 1):
        left[:, j] = t - kv[m + 1 - j]
        right[:, j] = kv[m + j] - t
        saved = np.zeros(n)
        for r in range(j):
            inv = 1.0 / (kv[m + r + 1] - kv[m + r + 1 - j])
            temp = N[:, r] * inv
            N[:, r] = saved + right[:, r + 1] * temp
            saved = left[:, j - r] * temp
        N[:, j] = saved
    return m, N


def quantize(N):
    """floor(clip(N, 0, 1) 2^F) per value; the largest (first) cut while a row sums > 2^F."""
    N = np.asarray(N, dtype=np.float64)
    v = np.where(N > 0, N, 0.0)          # NaN -> 0
    v = np.minimum(v, 1.0)
    q = np.floor(v * ONE).astype(np.int64)
    for i in np.flatnonzero(q.sum(axis=1) > ONE):
        while q[i].sum() > ONE:
            a = int(np.argmax(q[i]))
            q[i, a] -= min(q[i].sum() - ONE, q[i, a])
    return q


def column_features(t, kv):
    """Dense int64 features (n, K + 4) of one column on one knot vector."""
    m, N = basis_values(t, kv)
    q = quantize(N)
    out = np.zeros((t.size, kv.size - DEG - 1), dtype=np.int64)
    rows = np.arange(t.size)
    for a in range(DEG + 1):
        out[rows, m - DEG + a] = q[:, a]
    return out


def features(z, z_center, z_scale, knot_vectors, pairs=(), pair_knot_vectors=None):
    """Dense int64 features (n, P): additive blocks (columns with a knot vector, in order),
    then one tensor block per pair, feature a (K2 + 4) + b = (q_a q_b) >> F."""
    z = np.asarray(z, dtype=np.float64).reshape(len(z), -1)
    d = z.shape[1]
    zc = np.broadcast_to(np.asarray(z_center, dtype=np.float64), (d,))
    zs = np.broadcast_to(np.asarray(z_scale, dtype=np.float64), (d,))
    kvs = [None if kv is None else np.asarray(kv, dtype=np.float64) for kv in knot_vectors]
    T = next(-kv[0] for kv in kvs + [p[0] for p in (pair_knot_vectors or [])]
             if kv is not None)
    t = np.column_stack([clip_t(z[:, j], zc[j], zs[j], T) for j in range(d)])
    blocks = [column_features(t[:, j], kv) for j, kv in enumerate(kvs) if kv is not None]
    if pair_knot_vectors is None:
        pair_knot_vectors = [(kvs[j], kvs[l]) for j, l in pairs]
    for (j, l), (k1, k2) in zip(pairs, pair_knot_vectors):
        A = column_features(t[:, j], np.asarray(k1, dtype=np.float64))
        B = column_features(t[:, l], np.asarray(k2, dtype=np.float64))
        blocks.append(((A[:, :, None] * B[:, None, :]) >> F).reshape(len(z), -1))
    return np.concatenate(blocks, axis=1)


def quantize_u(x, center, bound):
    """trunc(clip((x - center) / bound, -1, 1) 2^F), NaN -> 0 (int64, (n, c))."""
    x = np.asarray(x, dtype=np.float64).reshape(len(x), -1)
    with np.errstate(all="ignore"):
        u = (x - np.asarray(center, dtype=np.float64)) / np.asarray(bound, dtype=np.float64)
    u = np.clip(np.where(np.isnan(u), 0.0, u), -1.0, 1.0)
    return (u * ONE).astype(np.int64)


def accumulate(Phi, uq, group, n_groups):
    """Per group: G = Phi^T Phi and B = Phi^T uq, exact int64."""
    P = Phi.shape[1]
    G = np.zeros((n_groups, P, P), dtype=np.int64)
    B = np.zeros((n_groups, P, uq.shape[1]), dtype=np.int64)
    for g in range(n_groups):
        rows = group == g
        G[g] = Phi[rows].T @ Phi[rows]
        B[g] = Phi[rows].T @ uq[rows]
    return G, B


def predictions(Phi, coef):
    """clip(phi @ coef, -1, 1) with phi = Phi / 2^F, summed over the non-zero features in
    increasing index; non-finite -> 0 before the clip."""
    phi = Phi * 2.0 ** -F
    pred = np.zeros((Phi.shape[0], coef.shape[1]))
    with np.errstate(all="ignore"):
        for p in range(Phi.shape[1]):
            nz = Phi[:, p] != 0
            pred[nz] += phi[nz, p][:, None] * coef[p][None, :]
    pred = np.where(np.isfinite(pred), pred, 0.0)
    return np.clip(pred, -1.0, 1.0)


def residual_block_sums(Phi, uqx, uqy, coef_x, coef_y, block, k, residual_scale=None,
                        squares=False):
    """(k, px py) int64 block sums of trunc(clip(r_x[a] r_y[b], -1, 1) 2^(2F)); with
    ``squares`` also those of trunc(clip(r_x[a] r_y[b], -1, 1)^2 2^(2F)) (a pair)."""
    px = uqx.shape[1]
    rs = np.ones(px + uqy.shape[1]) if residual_scale is None else np.asarray(residual_scale)
    rx = np.clip((uqx * 2.0 ** -F - predictions(Phi, coef_x)) * rs[:px], -1.0, 1.0)
    ry = np.clip((uqy * 2.0 ** -F - predictions(Phi, coef_y)) * rs[px:], -1.0, 1.0)
    px, py = rx.shape[1], ry.shape[1]
    S = np.zeros((k, px * py), dtype=np.int64)
    Q = np.zeros((k, px * py), dtype=np.int64)
    for b in range(py):
        for a in range(px):
            prod = np.clip(rx[:, a] * ry[:, b], -1.0, 1.0)
            np.add.at(S[:, a + px * b], block, (prod * 2.0 ** (2 * F)).astype(np.int64))
            np.add.at(Q[:, a + px * b], block, (prod * prod * 2.0 ** (2 * F)).astype(np.int64))
    return (S, Q) if squares else S
