"""Splitting epsilon exactly: shares whose exact (rational) sum is at most the total.

A floating-point ``total - spent`` can round up (``1.0 - 0.1`` does), and the parts of a
sequential composition would then add up to more than ``total`` by an ulp.  Every split of
a privacy parameter in the package goes through this module.
"""

from __future__ import annotations

import numpy as np


def _remaining_budget(total, spent):
    """The largest float r with spent + r <= total in exact arithmetic.

    ``total - spent`` in floating point can round up (1.0 - 0.1 does), and
    the two parts of a sequential composition would then add up to more than
    ``total`` by an ulp.
    """
    from fractions import Fraction
    r = total - spent
    while Fraction(r) + Fraction(spent) > Fraction(total):
        r = float(np.nextafter(r, 0.0))
    return r
