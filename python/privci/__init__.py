"""privci: differentially private conditional independence testing.

Public tests (data first, everything else keyword-only):

- :func:`gcm`, :func:`gcm_from_residuals`: the non-private Generalised
  Covariance Measure test (parity with R's ``gcm.test``).
- :func:`residual_products`, :func:`privgcm`: PrivGCM (Algorithm 1 of
  Kalemaj, Kasiviswanathan & Ramdas).
- :func:`crt_statistics`, :func:`privcrt`, :func:`crt`, :class:`GaussianModelX`:
  PrivCRT (Algorithm 2) and the non-private conditional randomization test.
- :class:`PrivacyBudget`: one privacy budget for many private tests on one data set.
"""

from .budget import BudgetExceededError, PrivacyBudget
from .crt import GaussianModelX, ModelX, crt, crt_statistics, privcrt
from .gcm import DegenerateStatisticWarning, gcm, gcm_from_residuals, privgcm, residual_products
from .regression import crt_sensitivity, gcm_sensitivity
from ._spline import UnresolvableDesignError
from ._stats import FailSafeWarning
from .results import (CRTResult, CRTStatistics, GCMResult, PrivacyRecord, PrivateTestResult,
                      ResidualProducts)

__version__ = "0.1.0"

_LAZY_SUBMODULES = ("baselines", "simulate", "experiments", "mechanisms", "regression", "cli",
                    "causal", "bounds", "budget", "plan")


def __getattr__(name):
    # submodules with heavier dependencies load on first use, keeping `import privci` fast
    if name in _LAZY_SUBMODULES:
        import importlib

        return importlib.import_module(f"{__name__}.{name}")
    if name == "plan_pc":   # the PC planner (issue 24), lazily with privci.plan
        from .plan import plan_pc

        return plan_pc
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

__all__ = [
    "gcm", "gcm_from_residuals", "residual_products", "privgcm",
    "crt_statistics", "privcrt", "crt", "GaussianModelX", "ModelX",
    "gcm_sensitivity", "crt_sensitivity",
    "GCMResult", "PrivateTestResult", "CRTResult", "PrivacyRecord", "ResidualProducts",
    "CRTStatistics", "DegenerateStatisticWarning", "PrivacyBudget", "BudgetExceededError",
    "FailSafeWarning", "UnresolvableDesignError",
]

# release once, test many (issue 24)
from .release import ReleasedCovariance, ReleasedTable, release  # noqa: E402

__all__ += ["release", "ReleasedTable", "ReleasedCovariance", "plan_pc"]
