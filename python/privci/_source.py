"""Sources: one way to sum row-local maps over the partitions of the rows.

A source holds x, y and z as one or more row partitions and offers two operations:

- ``map_reduce(fn, spec)``: ``fn(x_part, y_part, z_part, spec, start, stop)`` on every
  partition (its global rows ``start:stop``), the results (arrays or tuples of arrays)
  added up;
- ``map_reduce_release(fn, spec, release, rng)``: the same sum handed to
  ``release(total, rng=...)`` where the sum lands (for Dask: on a worker, with the
  seeded generator's state carried there and back), so that only the released value
  leaves it.

:class:`MemorySource` is one partition: the arrays in memory.  The Dask source
(``_dask.DaskSource``) runs the same pass functions over the chunks of Dask arrays.  The
pass functions of the released spline regression (:func:`spline_pass1`,
:func:`spline_pass2`) live here, so that both sources use the same ones; the block labels
of a partition come from :func:`privci._private.block_labels` on its global row range,
so every partitioning gives the same split.
"""

from __future__ import annotations

import numpy as np

from . import _kernels
from .mechanisms import quiet

__all__ = ["MemorySource", "scaled_block", "colsum_pass", "spline_pass1", "spline_pass2",
           "sum_parts"]


def _add(a, b):
    if isinstance(a, tuple):
        return tuple(_add(u, v) for u, v in zip(a, b))
    return a + b


def sum_parts(items):
    """Add a list of partial sums (arrays, or tuples of arrays) in order."""
    out = items[0]
    for it in items[1:]:
        out = _add(out, it)
    return out


def scaled_block(xb, yb, xc, xbound, yc, ybound, means):
    """Clip and scale x and y of one partition to [-1, 1] (and subtract the released
    centres ``means``, clipping again): the (m, p + q) array U."""
    with quiet():
        U = np.concatenate([_kernels.clip_scale(np.ascontiguousarray(xb - xc), xbound),
                            _kernels.clip_scale(np.ascontiguousarray(yb - yc), ybound)], axis=1)
        if means is not None:
            U = np.clip(U - means, -1.0, 1.0)
    return U


def colsum_pass(xb, yb, zb, scaling, start, stop):
    """Column sums of the clipped, scaled x and y of one partition (the private
    re-centring's statistic)."""
    return scaled_block(xb, yb, *scaling, None).sum(axis=0)


_BOX_CHUNK = 1 << 18     # rows per chunk when rows outside the clip box are copied out


def _outside(zb):
    """(flags, count): rows whose scaled z lies beyond the spline's clip box [-4, 4] in
    some column (NaN counts as inside: the basis kernels read it as 0)."""
    from . import _spline as S
    flags = np.empty(zb.shape[0], dtype=np.uint8)
    count = _kernels.rows_outside(zb, S.SPLINE_RANGE, flags) if zb.shape[0] else 0
    return flags.view(bool), count


def _inside_parts(fn, xb, yb, zb, labels, flags, *rest):
    """``fn(xb, yb, zb, labels, *rest)`` on the rows inside the clip box only (the numpy
    path): the rows are taken chunk by chunk (memory O(chunk)) and the chunks' exact
    integer sums added, the same sum in any order."""
    parts = []
    for a in range(0, zb.shape[0], _BOX_CHUNK):
        keep = np.nonzero(~flags[a:a + _BOX_CHUNK])[0] + a
        parts.append(fn(xb[keep], yb[keep], np.ascontiguousarray(zb[keep]), labels[keep],
                        *rest))
    return sum_parts(parts)


def spline_pass1(xb, yb, zb, spec, start, stop):
    """Pass 1 of the released spline regression on one partition: the fit's exact
    sufficient statistics (:func:`privci._spline.partition_stats`; an empty partition
    contributes zero sums), with the half split of the partition's global rows.

    A row whose scaled z lies beyond the clip box [-4, 4] in some column is left out of
    the fit and (pass 2) of the test: its features and products count as zero.  The fused
    kernels sum such rows into a discarded third group (no copy); the numpy path copies
    the kept rows chunk by chunk.  Where every row is inside, nothing changes."""
    from . import _spline as S
    from ._private import block_labels
    design, zb = spec["design"], np.ascontiguousarray(zb)
    group = block_labels(spec["n"], 2, spec["entropy"], start, stop)   # 0: A, 1: B
    flags, count = _outside(zb)
    with quiet():
        if spec["means"] is None and S._fast(design, stop - start):
            # additive designs without re-centring: the fused kernels clip and scale x and y
            # themselves (the same values as scaled_block), so no scaled copy U is made
            if count:
                group[flags] = 2
            return S._stats_rows(zb, np.ascontiguousarray(xb), np.ascontiguousarray(yb),
                                 *spec["scaling"], group, design, left_out=count > 0)
        if count:
            return _inside_parts(_pass1_numpy, xb, yb, zb, group, flags, spec)
        return _pass1_numpy(xb, yb, zb, group, spec)


def _pass1_numpy(xb, yb, zb, group, spec):
    from . import _spline as S
    U = scaled_block(xb, yb, *spec["scaling"], spec["means"])
    return S.partition_stats(zb, U, group == 0, spec["design"], spec["p"])


def spline_pass2(xb, yb, zb, spec, start, stop):
    """Pass 2 on one partition: exact partial block sums of the residual products (rows
    beyond the clip box left out, as in pass 1: the fused kernels sum them into a
    discarded extra block)."""
    from . import _spline as S
    from ._private import block_labels
    design, zb = spec["design"], np.ascontiguousarray(zb)
    k = spec["k"]
    labels = block_labels(spec["n"], k, spec["entropy"], start, stop)
    flags, count = _outside(zb)
    with quiet():
        if spec["means"] is None and S._fast(design, stop - start):
            if count:
                labels[flags] = k
            return S._sums_rows(zb, np.ascontiguousarray(xb), np.ascontiguousarray(yb),
                                *spec["scaling"], labels, design, spec["coef_x"],
                                spec["coef_y"], k, left_out=count > 0)
        if count:
            return _inside_parts(_pass2_numpy, xb, yb, zb, labels, flags, spec)
        return _pass2_numpy(xb, yb, zb, labels, spec)


def _pass2_numpy(xb, yb, zb, labels, spec):
    from . import _spline as S
    U = scaled_block(xb, yb, *spec["scaling"], spec["means"])
    return S.partition_block_sums(zb, U, labels, spec["design"], spec["coef_x"],
                                  spec["coef_y"], spec["p"], spec["k"])


class MemorySource:
    """The rows in memory: one partition.

    Examples
    --------
    >>> import numpy as np
    >>> from privci._source import MemorySource
    >>> src = MemorySource(np.ones((4, 1)), np.zeros((4, 1)), None)
    >>> src.map_reduce(lambda x, y, z, spec, a, b: x[a:b].sum() + spec, 1.0)
    5.0
    """

    n_partitions = 1
    caption = ""

    def __init__(self, x, y, z):
        self.x, self.y, self.z = x, y, z
        self.n = x.shape[0]

    def map_reduce(self, fn, spec):
        return fn(self.x, self.y, self.z, spec, 0, self.n)

    def map_reduce_release(self, fn, spec, release, rng):
        total = fn(self.x, self.y, self.z, spec, 0, self.n)
        with quiet():
            return release(total, rng=rng)
