"""Slow, obvious numpy twins of the compiled kernels and of the KRR procedures.

Each function here is written for clarity, not speed, and is used only to
check the fast implementations in python/privci.
"""

import numpy as np
from scipy.special import ndtr


def rbf_gram(a, b, sigma):
    d2 = ((a[:, None, :] - b[None, :, :]) ** 2).sum(axis=2)
    return np.exp(-sigma * d2)


def residual_products(rx, ry):
    cols = []
    for j in range(ry.shape[1]):
        for i in range(rx.shape[1]):
            cols.append(rx[:, i] * ry[:, j])
    return np.column_stack(cols)


def gcm_univariate(R):
    n = R.size
    m = R.mean()
    return np.sqrt(n) * m / np.sqrt(np.mean(R ** 2) - m ** 2)


def gcm_pvalue(stat, alternative):
    if alternative == "two-sided":
        return 2 * ndtr(-abs(stat))
    if alternative == "greater":
        return ndtr(-stat)
    return ndtr(stat)


def gcm_max(Rmat, draws, alternative="two-sided"):
    n = Rmat.shape[0]
    sd = np.sqrt(np.mean(Rmat ** 2, axis=0) - np.mean(Rmat, axis=0) ** 2)
    S = Rmat / sd
    fold = {"two-sided": np.abs, "greater": lambda v: v, "less": lambda v: -v}[alternative]
    stat = np.sqrt(n) * fold(S.mean(axis=0)).max()
    sims = fold(draws @ S).max(axis=1) / np.sqrt(n)
    return stat, sims


def crt_statistics(rx_all, ry):
    return np.array([np.sum(row * ry) for row in rx_all])


def rank_scores(stats, delta_t):
    q = np.sort(stats)[::-1]
    return -np.abs(q - stats[0]) / (2 * delta_t)


def clip_scale(u, bound):
    return np.clip(u, -bound, bound) / bound


def krr_residuals(z, u, sigma, lam):
    """Textbook KRR: alpha = (K + n lam I)^-1 u, residual u - K alpha."""
    n = z.shape[0]
    K = rbf_gram(z, z, sigma)
    alpha = np.linalg.solve(K + n * lam * np.eye(n), u)
    return u - K @ alpha


def cvst_folds(n, folds):
    """CVST::CV folds, written from R's `seq((f-1)*size + 1, f*size)` semantics."""
    size = n / folds
    out = []
    for f in range(1, folds + 1):
        a = (f - 1) * size + 1
        b = f * size
        vals = []
        v = a
        while v <= b + 1e-10:
            vals.append(int(v) - 1)   # R truncates fractional indices
            v += 1
        out.append(sorted(set(vals)))
    return out


def cvst_cv_lambda(z, u, sigma, lambdas, folds):
    """Plain CVST CV: one solve per lambda per fold; returns the chosen lambda."""
    n = z.shape[0]
    K = rbf_gram(z, z, sigma)
    means = []
    for lam in lambdas:
        errs = []
        for v in cvst_folds(n, folds):
            t = np.setdiff1d(np.arange(n), v)
            N = t.size
            alpha = np.linalg.solve(K[np.ix_(t, t)] + N * lam * np.eye(N), u[t])
            pred = K[np.ix_(v, t)] @ alpha
            errs.append(np.mean((pred - u[v]) ** 2))
        means.append(np.mean(errs))
    return lambdas[int(np.argmin(means))], np.array(means)


def rff_features(z, freqs):
    D = freqs.shape[0]
    proj = z @ freqs.T
    return np.hstack([np.cos(proj), np.sin(proj)]) / np.sqrt(D)


def gcm_sensitivity(lam, kind="sharp"):
    if kind == "paper":
        c1 = 2 + 2 / np.sqrt(lam)
        c2 = 4 / lam ** 1.5 + 4 / lam
        return c1 ** 2 + c1 * c2
    B = min(1 / (1 + lam), 1 / (2 * np.sqrt(lam))) if lam >= 1 else 1 / (2 * np.sqrt(lam))
    b = 1 + B
    return 2 * b * b + 4 * b * min(b * B, 1 / (2 * np.sqrt(lam)))


def crt_sensitivity(lam, kind="sharp"):
    if kind == "paper":
        c1 = 2 + 2 / np.sqrt(lam)
        c2 = 4 / lam ** 1.5 + 4 / lam
        return 2 * c1 + c2
    B = 1 / (1 + lam) if lam >= 1 else 1 / (2 * np.sqrt(lam))
    return 2 * (1 + B) ** 2


def krr_norm_bound_numeric(n, lam):
    """max over s in [0, n] of sqrt(n s) / (s + n lam), by a fine grid (the spectral bound)."""
    s = np.linspace(0, n, 200001)
    return float(np.max(np.sqrt(n * s) / (s + n * lam)))


def paper_data(rng, n, d=1, s=2.0, beta=0.0):
    """The paper's simulation: Z_j ~ N(0, 4), X = f_s(Z_1) + N_X, Y = -f_s(Z_1) + N_Y + beta N_X."""
    z = rng.normal(scale=2.0, size=(n, d))
    f = np.exp(-s ** 2 / 2) * np.sin(s * z[:, 0])
    nx = rng.normal(size=n)
    x = f + nx
    y = -f + rng.normal(size=n) + beta * nx
    return x, y, z
