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


def _inside(zb, box=None):
    """(m,) bool: rows whose scaled z lies in the design's clip box [-box, box]^d (default
    the spline's 4; NaN counts as inside: the basis kernels read it as 0)."""
    from . import _spline as S
    flags = np.zeros(zb.shape[0], dtype=np.uint8)
    if zb.shape[0]:
        _kernels.rows_outside(zb, S.SPLINE_RANGE if box is None else float(box), flags)
    return flags == 0


def spline_pass1(xb, yb, zb, spec, start, stop):
    """Pass 1 of the released spline regression on one partition: the fit's exact
    sufficient statistics (:func:`privci._spline.partition_stats`; an empty partition
    contributes zero sums), with the half split of the partition's global rows.

    A row whose scaled z lies beyond the design's clip box in some column ([-4, 4]; the
    two-column tensor fit's [-2, 2], on both paths since stop 57) is left out of the fit
    and (pass 2) of the test: its features and products count as zero.  Every row is
    evaluated the same way, inside or not (the fused kernels decide it from the t they
    compute, the tensor box from one more pass over t, and sum left-out rows into a
    discarded third group, with a select), so nothing is copied and the work does not
    depend on how many rows are left out; where every row is inside, the sums are those
    without the rule."""
    from . import _spline as S
    from ._private import block_labels
    design, zb = spec["design"], np.ascontiguousarray(zb)
    group = block_labels(spec["n"], 2, spec["entropy"], start, stop)   # 0: A, 1: B
    with quiet():
        if spec["means"] is None and S._fast(design, stop - start):
            # additive designs without re-centring: the fused kernels clip and scale x and y
            # themselves (the same values as scaled_block), so no scaled copy U is made, and
            # they send the rows beyond the box to the discarded group themselves
            return S._stats_rows(zb, np.ascontiguousarray(xb), np.ascontiguousarray(yb),
                                 *spec["scaling"], group, design, left_out=True)
        U = scaled_block(xb, yb, *spec["scaling"], spec["means"])
        return S.partition_stats(zb, U, group == 0, design, spec["p"],
                                 keep=_inside(zb, design.box))


def spline_pass2(xb, yb, zb, spec, start, stop):
    """Pass 2 on one partition: exact partial block sums of the residual products (rows
    beyond the clip box left out, as in pass 1: the fused kernels sum them into a
    discarded extra block)."""
    from . import _spline as S
    from ._private import block_labels
    design, zb = spec["design"], np.ascontiguousarray(zb)
    k = spec["k"]
    labels = block_labels(spec["n"], k, spec["entropy"], start, stop)
    with quiet():
        if spec["means"] is None and S._fast(design, stop - start):
            return S._sums_rows(zb, np.ascontiguousarray(xb), np.ascontiguousarray(yb),
                                *spec["scaling"], labels, design, spec["coef_x"],
                                spec["coef_y"], k, left_out=True,
                                residual_scale=spec.get("res_scale"))
        U = scaled_block(xb, yb, *spec["scaling"], spec["means"])
        return S.partition_block_sums(zb, U, labels, design, spec["coef_x"], spec["coef_y"],
                                      spec["p"], k, keep=_inside(zb, design.box),
                                      residual_scale=spec.get("res_scale"))


class MemorySource:
    """The rows in memory: one partition.

    Examples
    --------
    >>> import numpy as np
    >>> from privci._source import MemorySource
    >>> src = MemorySource(np.ones((4, 1)), np.zeros((4, 1)), None)
    >>> float(src.map_reduce(lambda x, y, z, spec, a, b: x[a:b].sum() + spec, 1.0))
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
