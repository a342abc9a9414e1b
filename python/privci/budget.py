"""A privacy budget for many private tests on one data set (placeholder interface).

Every private test takes ``budget=``; before it computes anything from the
private data it calls :func:`_charge`, which asks the budget to admit the
release.  A release that would overspend raises :class:`BudgetExceededError`
and nothing is computed.
"""

from __future__ import annotations

__all__ = ["PrivacyBudget", "BudgetExceededError"]


class BudgetExceededError(ValueError):
    """A release would exceed the privacy budget; nothing was computed or released."""


class PrivacyBudget:
    """Placeholder: basic sequential composition of pure epsilon-DP releases."""

    def __init__(self, epsilon):
        from . import _validation as V
        self.epsilon = V.positive_finite(epsilon, "epsilon")
        self._ledger = []

    @property
    def spent(self):
        return sum(r["epsilon"] for r in self._ledger)

    @property
    def remaining(self):
        return max(0.0, self.epsilon - self.spent)

    @property
    def ledger(self):
        return list(self._ledger)

    def _admit(self, epsilon, test, details):
        if self.spent + epsilon > self.epsilon:
            raise BudgetExceededError(
                f"this release of {test} would spend epsilon = {epsilon:g}, but only "
                f"{self.remaining:g} of the budget's {self.epsilon:g} remains; nothing was "
                "computed or released.")
        self._ledger.append({"test": test, "epsilon": epsilon, "details": details,
                             "cumulative": self.spent + epsilon})
        return (f"charged to a PrivacyBudget of epsilon = {self.epsilon:g} (basic sequential "
                f"composition): {self.spent:g} spent in total after this release")


def _charge(budget, epsilon, *, test, details=""):
    """Charge ``epsilon`` to ``budget`` before a release; returns the composition statement.

    ``budget=None`` charges nothing and returns None.  Raises
    :class:`BudgetExceededError` (and records nothing) when the release does not fit.
    """
    if budget is None:
        return None
    if not isinstance(budget, PrivacyBudget):
        raise TypeError("`budget` must be None or a privci.PrivacyBudget; got "
                        f"{type(budget).__name__} instead.")
    return budget._admit(float(epsilon), test, details)
