"""Pieces shared by the private tests: the wording of a guarantee, block partitions, and
the test statistic on noisy block sums.

Nothing here sees un-noised data except :func:`block_sums` (a transformation whose L1
sensitivity is that of its input, see its docstring).
"""

from __future__ import annotations

import math
import secrets

import numpy as np

__all__ = ["guarantee_text", "SEEDED_CAVEAT", "block_labels", "block_counts", "block_sums",
           "auto_n_blocks", "block_statistic", "new_entropy", "REGRESSION_CAVEAT"]

SEEDED_CAVEAT = (
    "noise drawn from a seeded numpy generator: for simulation studies only. The seed "
    "determines the noise, so a released result is differentially private only if the seed "
    "is secret, fresh and never reused, and even then the sampler is not hardened against "
    "floating-point attacks; use rng=None for a release.")


REGRESSION_CAVEAT = ("the level of any GCM-type test rests on the quality of the two "
                     "regressions on z (Shah and Peters' no-free-lunch theorem): a regression "
                     "that misses part of E[X | Z] and E[Y | Z] biases the statistic.")


def guarantee_text(epsilon, what, neighbour, *, hardened, covered=True, composition="",
                   not_covered_reason="", released_bounds=False):
    """The one-sentence guarantee of a private result.

    ``covered=False`` (a step the privacy analysis does not cover, e.g. tuning on the
    private data) makes the sentence say there is no guarantee and why.
    ``released_bounds=True``: some bounds or centres were released privately by the test
    (their epsilon is part of ``epsilon``, stated in ``composition``), not given as public.
    """
    if not covered:
        return (f"NO differential privacy guarantee: {not_covered_reason}; only if that step "
                f"had been fixed in advance would ({what}) be {epsilon:g}-differentially "
                f"private under replacement of {neighbour}")
    bounds = ("the bounds and centres (public, or released within this epsilon as stated; "
              "data clipped to them)" if released_bounds else
              "the public bounds (data clipped to them)")
    text = (f"({what}) is {epsilon:g}-differentially private under replacement of "
            f"{neighbour}, given {bounds}{composition}")
    if not hardened:
        text += (", for idealised real-valued noise, and only if the seed is secret, fresh and "
                 "never reused (the seeded path is for simulation studies, not for a release)")
    return text


def new_entropy(user_rng):
    """128 bits for data-independent randomness: from the user's generator, or fresh."""
    if user_rng is not None:
        return int(user_rng.integers(0, 2 ** 63)) * 2 ** 64 + int(user_rng.integers(0, 2 ** 63))
    return secrets.randbits(128)


_LABEL_CHUNK = 1 << 16


def label_chunk_states(entropy, start, stop):
    """The generator state (4 uint64 words) of every 65,536-row chunk that meets rows
    [start, stop), and the first chunk's index: what :func:`block_labels` hands the
    compiled shuffle (which steps numpy's PCG64 and Generator.shuffle exactly: the same
    labels)."""
    first, last = start // _LABEL_CHUNK, (stop - 1) // _LABEL_CHUNK
    states = np.empty((last - first + 1, 4), dtype=np.uint64)
    mask = (1 << 64) - 1
    for i, c in enumerate(range(first, last + 1)):
        st = np.random.PCG64(np.random.SeedSequence(entropy, spawn_key=(c,))).state["state"]
        states[i] = (st["state"] >> 64, st["state"] & mask, st["inc"] >> 64, st["inc"] & mask)
    return states, first


def block_labels(n, n_blocks, entropy, start=0, stop=None):
    """Block of every row in [start, stop) of an n-row data set: a data-independent partition.

    Rows are cut into chunks of 65,536 consecutive indices; chunk c gets the labels
    ``(i mod k for i in the chunk)`` in the random order of a generator seeded by
    ``(entropy, c)``.  So the labels depend only on the row index, n, k and the entropy
    (never on the data), every block's size is the public number
    #{i < n : i mod k = b} (:func:`block_counts`), and any range of rows can compute its own
    labels (the Dask path labels each partition on its worker).
    """
    stop = n if stop is None else stop
    out = np.empty(stop - start, dtype=np.int64)
    if stop <= start:
        return out
    states, first = label_chunk_states(entropy, start, stop)
    from ._kernels import block_labels_into
    return block_labels_into(states, first, _LABEL_CHUNK, int(n), int(n_blocks), int(start),
                             int(stop), out)


def block_counts(n, n_blocks):
    """Public block sizes of :func:`block_labels`: #{i < n : i mod k = b}."""
    q, r = divmod(n, n_blocks)
    return np.array([q + (1 if b < r else 0) for b in range(n_blocks)], dtype=np.float64)


def block_sums(products, labels, n_blocks):
    """Sums of the rows of ``products`` (n, c) within each block: shape (k, c).

    Each row lies in exactly one block, so the L1 change of the block sums under the
    replacement of one row is at most the L1 change of ``products``: the products'
    certified sensitivity holds for the block sums.
    """
    out = np.zeros((n_blocks, products.shape[1]))
    for c in range(products.shape[1]):
        out[:, c] = np.bincount(labels, weights=products[:, c], minlength=n_blocks)
    return out


def auto_n_blocks(n, conditional, regression="spline"):
    """The default number of blocks, a public rule (n, whether z is given, the regression).

    Without conditioning (no regression, so no regression bias): min(n, 20).  With the
    released spline regression privgcm replaces this by the design's own count (5, 10 or
    20, ``privci._spline.choose_design``); min(n, 20) stays the value before the design
    is chosen.  Each block sum gets Laplace(C / epsilon) noise whatever
    its size, so the noise in the statistic grows with the number of blocks k, while the
    t reference with k - 1 degrees of freedom costs power when k is small (critical value
    2.09 at k = 20 against 1.96).

    With the kernel ridge regression (``regression="krr"``): n, one block per row (the
    paper's noise placement).  Measured at n = 10^4 (vignettes/README.md, "level and the
    regression"): with lambda = 5 the un-noised products keep a bias of -92 (paper design,
    s = 1) to +411 (a confounded design) in units of n mean(R), against a sampling sd of
    about 6; fewer blocks shrink the noise that hides it and the level fails (k = 20:
    rejection 0.96 to 1.00 at epsilon = 1).  Level wins, so blocks are opt-in there.
    """
    if conditional and regression == "krr":
        return int(n)
    return int(min(n, 20))


def _t_sf(t, df):
    from scipy.special import stdtr
    return float(stdtr(df, -t))


def block_statistic(sums, counts, n_sim, mode, rng):
    """Test statistic and p-value from noisy block sums (k, c) and public block sizes (k,).

    One column: the one-sample t statistic of the k noisy block means,
    sqrt(k) mean / sd (sd with k - 1 in the denominator), with a t reference on k - 1
    degrees of freedom.  Several columns: the GCM max statistic over the k block means
    with a Gaussian multiplier bootstrap over blocks.  Post-processing of the release.
    Returns (statistic, pvalue, statistic_name).
    """
    means = sums / counts[:, None]
    k, c = means.shape
    if c == 1:
        m = means[:, 0]
        sd = float(np.std(m, ddof=1))
        if not sd > 0:
            return math.nan, math.nan, "t"
        t = math.sqrt(k) * float(np.mean(m)) / sd
        if mode == 0:
            p = min(1.0, 2.0 * _t_sf(abs(t), k - 1))
        elif mode == 1:
            p = _t_sf(t, k - 1)
        else:
            p = _t_sf(-t, k - 1)
        return t, p, "t"
    from ._stats import _statistic_from_products
    stat, p = _statistic_from_products(np.ascontiguousarray(means), n_sim, mode, rng)
    return stat, p, "max|Z|"
