"""Sensitivity-audit helper shared by the PrivGCM test modules (not a test module)."""

import numpy as np

import privci


def products_l1_ratio(x, y, z, i, new_row, **kw):
    """L1 change of ``residual_products`` when row i becomes ``new_row``, over the sensitivity."""
    a = privci.residual_products(x, y, z, **kw)
    x2, y2, z2 = x.copy(), y.copy(), z.copy()
    x2[i], y2[i], z2[i] = new_row
    b = privci.residual_products(x2, y2, z2, **kw)
    assert a.sensitivity == b.sensitivity
    return np.abs(a.products - b.products).sum() / a.sensitivity
