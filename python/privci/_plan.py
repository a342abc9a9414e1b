"""The release plan: every epsilon share of one private test, fixed before any release.

A test's plan names each release (the released bounds and centres, the fit, the block
sums, the rank, ...) with its epsilon share.  The shares are computed once, from public
numbers only, with the exact-remainder functions of :mod:`privci._epsilon`; on
construction the plan checks, in exact rational arithmetic, that they add up to at most
the test's epsilon.  The plan charges the whole epsilon to a
:class:`privci.PrivacyBudget` in one call, before anything is computed from the data,
and the result builders read every share they state (composition text, the record's
``releases``) from it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction

from ._epsilon import fits
from .budget import _charge

__all__ = ["ReleasePlan"]


@dataclass
class ReleasePlan:
    """Every epsilon share of one test.

    Attributes
    ----------
    epsilon : float
        The test's epsilon (what a budget is charged).
    shares : dict
        Release name -> epsilon share, in the order drawn; their exact sum is at most
        ``epsilon`` (checked on construction, as Fractions).
    test_epsilon : float
        What is left for the test itself after the released bounds and centres.
    details : str
        The ledger's description of the call (public numbers only).
    k, n, design
        PrivGCM: the number of noisy block sums, the number of rows, and the released
        regression's public design (None on the kernel ridge path).
    notes : list
        Public reliability notes of the released bounds (see ``bounds._reliability``).

    Examples
    --------
    >>> from privci._plan import ReleasePlan
    >>> plan = ReleasePlan(1.0, {"bounds": 0.1, "rank": 0.8999999999999999}, 0.8999999999999999)
    >>> plan.exact_total() <= 1
    True
    >>> ReleasePlan(1.0, {"bounds": 0.1, "rank": 0.9}, 0.9)     # 0.1 + 0.9 > 1 exactly
    Traceback (most recent call last):
    ...
    AssertionError: the shares {'bounds': 0.1, 'rank': 0.9} exceed epsilon 1.0
    """

    epsilon: float
    shares: dict
    test_epsilon: float
    details: str = ""
    k: object = None
    n: object = None
    design: object = None
    notes: list = field(default_factory=list)

    def __post_init__(self):
        if not fits(self.epsilon, [e for e in self.shares.values() if e]):
            raise AssertionError(f"the shares {self.shares!r} exceed epsilon {self.epsilon!r}")

    def share(self, name):
        """The epsilon share of the release ``name`` (None when the plan has no such
        release)."""
        return self.shares.get(name)

    def exact_total(self):
        """The exact (rational) sum of the shares."""
        return sum((Fraction(e) for e in self.shares.values() if e), Fraction(0))

    def charge(self, budget, test):
        """Charge the whole epsilon to ``budget`` (None: nothing) before any release;
        returns the composition statement (or None)."""
        return _charge(budget, self.epsilon, test=test, details=self.details)
