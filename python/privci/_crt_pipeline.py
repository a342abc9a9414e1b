"""PrivCRT as one pipeline: parameters -> release plan -> (statistics, rank) -> result,
shared by the in-memory and the Dask paths.

- :func:`crt_params`: the options, validated before any data are read (the same call
  is accepted or refused in memory and on Dask);
- :func:`crt_plan`: the epsilon shares (the released bounds and centres, the rank), as a
  :class:`privci._plan.ReleasePlan`;
- the statistics T_0..T_m and report-noisy-max: ``crt._crt_statistics`` in memory,
  ``_dask._crt_pass2`` / ``_dask._noisy_rank`` on partitions;
- :func:`crt_result`: the result and its privacy record from the released rank.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from . import _validation as V
from ._epsilon import remaining
from ._params import _check_approximation
from ._plan import ReleasePlan
from ._private import SEEDED_CAVEAT, guarantee_text
from .regression import _check_kind, crt_sensitivity, residual_bound
from .results import PrivacyRecord, PrivateTestResult, Release

__all__ = ["CRTParams", "crt_params", "crt_plan", "RankOutput", "crt_result"]

_BOUNDS = ("y_bound", "x_residual_bound", "y_center")
RANK_CAVEAT = ("the p-value is the privately selected rank; the paper proves accuracy "
               "(Theorem: (gamma, delta)-accuracy), not exact finite-sample level.")


@dataclass(frozen=True)
class CRTParams:
    """PrivCRT's options, validated before any data are read.  ``auto`` maps y_bound,
    x_residual_bound and y_center to whether each is "auto"; ``bounds_epsilon`` is the
    validated part of epsilon for them (None when none is "auto")."""

    epsilon: float
    alternative: str
    mode: str
    rng: object
    auto: dict
    bounds_epsilon: Optional[float]
    y_bound: object
    x_residual_bound: object
    y_center: object
    n_resamples: object
    resamples_given: bool
    ridge_lambda: float
    kernel_sigma: float
    sensitivity: str
    kernel_approximation: str
    n_features: object
    budget: object

    @property
    def any_auto(self):
        return any(self.auto.values())

    def sensitivity_of(self, conditional):
        """The rank scores' sensitivity Delta_T and the residual bound (public)."""
        if not conditional:
            return 2.0, 1.0
        return (crt_sensitivity(self.ridge_lambda, self.sensitivity),
                residual_bound(self.ridge_lambda, self.sensitivity))


def crt_params(*, epsilon, alternative, rng, y_bound, x_residual_bound, y_center,
               bounds_epsilon, budget, n_resamples, x_resamples, ridge_lambda, kernel_sigma,
               sensitivity, kernel_approximation, n_features):
    """Validate privcrt's options (no data read); returns :class:`CRTParams`."""
    eps = V.positive_finite(epsilon, "epsilon")
    mode = V.check_alternative(alternative)
    user_rng = None if rng is None else V.check_rng(rng)
    given = dict(zip(_BOUNDS, (y_bound, x_residual_bound, y_center)))
    auto = {k: isinstance(v, str) for k, v in given.items()}
    eps_b = None
    if any(auto.values()):
        eps_b = 0.1 * eps if bounds_epsilon is None else V.positive_finite(bounds_epsilon,
                                                                            "bounds_epsilon")
        if not eps_b < eps:
            raise ValueError(f"`bounds_epsilon` must be smaller than `epsilon` ({eps:g}), which "
                             f"it is part of; got {eps_b!r} instead.")
    elif bounds_epsilon is not None:
        raise ValueError("`bounds_epsilon` is only used with an 'auto' bound or centre; got "
                         f"{bounds_epsilon!r} with none.")
    for name, v in given.items():
        if isinstance(v, str) and v != "auto":
            raise ValueError(f"`{name}` must be a number or 'auto'; got {v!r} instead.")
    return CRTParams(
        epsilon=eps, alternative=alternative, mode=mode, rng=user_rng, auto=auto,
        bounds_epsilon=eps_b, y_bound=y_bound, x_residual_bound=x_residual_bound,
        y_center=y_center, n_resamples=n_resamples, resamples_given=x_resamples is not None,
        ridge_lambda=V.positive_finite(ridge_lambda, "ridge_lambda"),
        kernel_sigma=V.positive_finite(kernel_sigma, "kernel_sigma"),
        sensitivity=_check_kind(sensitivity), kernel_approximation=kernel_approximation,
        n_features=_check_approximation(kernel_approximation, n_features), budget=budget)


def crt_plan(par):
    """The release plan of privcrt: the released bounds and centres, then the rank."""
    shares = {}
    eps_test = par.epsilon
    if par.bounds_epsilon is not None:
        shares["bounds"] = par.bounds_epsilon
        eps_test = remaining(par.epsilon, par.bounds_epsilon)
    shares["rank"] = eps_test
    m = "given" if par.resamples_given else par.n_resamples
    return ReleasePlan(epsilon=par.epsilon, shares=shares, test_epsilon=eps_test,
                       details=f"m = {m}")


@dataclass
class RankOutput:
    """The released rank and the public numbers of its mechanism."""

    c_hat: int
    noise: object                  # NoiseInfo of report-noisy-max
    m: int
    n: int
    conditional: bool
    sensitivity: float
    sensitivity_kind: str
    ridge_lambda: object
    kernel_sigma: object
    y_bound: float
    y_center: float
    x_residual_bound: float


def crt_result(par, plan, out, released, composition, caption=""):
    """The PrivCRT result and its privacy record (``released``: the "auto" bounds' release
    dict, empty when none)."""
    info, m = out.noise, out.m
    caveats = [SEEDED_CAVEAT] if not info.hardened else []
    caveats.append(RANK_CAVEAT)
    caveats.extend(released.get("caveats", ()))
    eps_test = plan.share("rank")
    releases = tuple(released.get("releases", ())) + (
        Release(f"rank among {m + 1} statistics", eps_test, out.sensitivity, info.scale,
                info.mechanism),)
    comp = ""
    if par.bounds_epsilon is not None:
        comp = (f" (sequential composition: {plan.share('bounds'):g} for the released "
                f"bounds/centres ({', '.join(released.get('released', ()))}), {eps_test:g} "
                "for the rank)")
    record = PrivacyRecord(
        epsilon=par.epsilon, mechanism=f"{info.mechanism} ({out.sensitivity_kind} sensitivity)",
        sensitivity=out.sensitivity, noise_scale=info.scale, hardened=info.hardened,
        ridge_lambda=out.ridge_lambda, kernel_sigma=out.kernel_sigma,
        bounds={"y_bound": out.y_bound, "y_center": out.y_center,
                "x_residual_bound": out.x_residual_bound},
        guarantee=guarantee_text(
            par.epsilon, "rank, pvalue",
            "one row of (x, every resample, y, z)" if out.conditional
            else "one row of (x, every resample, y)", hardened=info.hardened,
            released_bounds=par.bounds_epsilon is not None, composition=comp),
        caveats=tuple(caveats), composition=composition,
        sensitivity_kind=out.sensitivity_kind, releases=releases)
    method = "Private conditional randomization test (PrivCRT)"
    if not out.conditional:
        method = "Private randomization test without conditioning (PrivCRT, z = None)"
    return PrivateTestResult(statistic=float(out.c_hat), pvalue=(1.0 + out.c_hat) / (m + 1.0),
                             alternative=par.alternative, method=method + caption, n=out.n,
                             privacy=record, statistic_name="rank", n_resamples=m)
