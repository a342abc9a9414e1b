"""One exact split of epsilon (issue 22): every share is checked as Fractions.

``privci._epsilon.remaining`` and ``equal_share`` are the only ways the package splits a
privacy parameter (privgcm, privcrt, the Dask path, the spline fit's split and the private
bounds use them).  Property tests: the exact sum of the shares never exceeds the total,
and each share is the largest float that keeps it so.
"""

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from privci import _epsilon, _spline, bounds

totals = st.floats(min_value=1e-9, max_value=1e9, allow_nan=False, allow_infinity=False)
fractions_ = st.floats(min_value=0.0, max_value=1.0, allow_nan=False)


def _up(x):
    return float(np.nextafter(x, np.inf))


@settings(max_examples=500, deadline=None)
@given(totals, fractions_)
def test_remaining_is_the_largest_float_that_fits(total, f):
    spent = total * f
    if Fraction(spent) > Fraction(total):   # total * f can round above total
        spent = total
    r = _epsilon.remaining(total, spent)
    assert r >= 0.0
    assert Fraction(spent) + Fraction(r) <= Fraction(total)
    assert Fraction(spent) + Fraction(_up(r)) > Fraction(total)


@settings(max_examples=300, deadline=None)
@given(totals, st.lists(fractions_, min_size=1, max_size=6))
def test_a_chain_of_splits_sums_to_at_most_the_total(total, weights):
    """Give out parts one after the other (each a fraction of what is left, the last one
    the remainder): the exact sum is at most the total, as in privgcm's chain
    bounds -> centres -> fit -> test."""
    parts = []
    left = total
    for w in weights:
        part = min(left * w, left)
        parts.append(part)
        left = _epsilon.remaining(total, parts)
    parts.append(left)
    assert _epsilon.fits(total, parts)
    assert sum(Fraction(p) for p in parts) <= Fraction(total)
    assert all(p >= 0.0 for p in parts)


@settings(max_examples=500, deadline=None)
@given(totals, st.integers(min_value=1, max_value=10_000))
def test_equal_share_is_the_largest_float_that_fits(total, k):
    e = _epsilon.equal_share(total, k)
    assert Fraction(e) * k <= Fraction(total)
    assert Fraction(_up(e)) * k > Fraction(total)


def test_examples_that_round_up_in_floating_point():
    assert 1.0 - 0.1 == 0.9 and Fraction(0.9) + Fraction(0.1) > 1
    assert _epsilon.remaining(1.0, 0.1) == float(np.nextafter(0.9, 0.0))
    assert Fraction(1.0 / 3) * 3 <= 1 or _epsilon.equal_share(1.0, 3) < 1.0 / 3


def test_overspent_parts_are_refused():
    with pytest.raises(ValueError, match="exceed"):
        _epsilon.remaining(1.0, [0.6, 0.5])


def test_every_module_uses_the_one_function():
    """The spline fit's split and the private bounds' split are this module's functions."""
    assert _spline._rest is _epsilon.remaining
    assert bounds._split is _epsilon.equal_share
