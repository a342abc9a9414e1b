"""Splitting epsilon exactly: shares whose exact (rational) sum is at most the total.

A floating-point ``total - spent`` can round up (``1.0 - 0.1`` does), and so can
``total / k``; the parts of a sequential composition would then add up to more than
``total`` by an ulp.  Every split of a privacy parameter in the package goes through the
two functions here, which start from the rounded float and step down until the exact sum
(:class:`fractions.Fraction`) fits:

- :func:`remaining`: what is left of ``total`` after ``spent`` (the last part of a split);
- :func:`equal_share`: ``k`` equal parts of ``total``.

Both return the largest float with that property.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np


def fits(total, parts):
    """True when the exact sum of the floats ``parts`` is at most ``total``."""
    return sum((Fraction(p) for p in parts), Fraction(0)) <= Fraction(total)


def _down_until(x, ok):
    """The first of x, nextafter(x, -inf), ... for which ``ok`` holds."""
    while not ok(x):
        x = float(np.nextafter(x, -np.inf))
    return x


def remaining(total, spent):
    """The largest float r with spent + r <= total in exact arithmetic.

    Parameters
    ----------
    total : float
        The privacy parameter being split.
    spent : float or sequence of float
        The parts already given out; their exact sum must not exceed ``total``.

    Returns
    -------
    float
        ``total - sum(spent)`` rounded down to a float if rounding to nearest would
        overspend.

    Examples
    --------
    >>> from privci._epsilon import remaining
    >>> 1.0 - 0.1, remaining(1.0, 0.1)     # the float difference rounds up
    (0.9, 0.8999999999999999)
    """
    parts = tuple(spent) if isinstance(spent, (tuple, list)) else (spent,)
    if not fits(total, parts):
        raise ValueError(f"the parts {parts!r} already exceed the total {total!r}.")
    if len(parts) == 1:
        r = total - parts[0]   # correctly rounded: the exact difference, to nearest
    else:                      # a float sum could be far off a tiny remainder: exactly
        r = float(Fraction(total) - sum((Fraction(p) for p in parts), Fraction(0)))
    return _down_until(r, lambda v: fits(total, parts + (v,)))


def equal_share(total, k):
    """The largest float e with k * e <= total in exact arithmetic.

    Examples
    --------
    >>> from privci._epsilon import equal_share
    >>> equal_share(1.0, 3) * 3 <= 1.0
    True
    """
    return _down_until(total / k, lambda v: Fraction(v) * k <= Fraction(total))
