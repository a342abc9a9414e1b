"""Privacy noise: the Laplace mechanism and report-noisy-max.

Two paths, chosen by ``rng``:

* ``rng is None`` (default): OpenDP's samplers, which are exact and safe
  against floating-point attacks (Mironov 2012).  The privacy map of the
  OpenDP measurement is evaluated at the certified sensitivity and must give
  at most the requested epsilon; when OpenDP's rounding needs a slightly
  larger scale, the smallest float scale that passes is used and recorded.
* ``rng`` given: numpy draws from that generator with scale exactly
  sensitivity / epsilon (Laplace) or 2 / epsilon (report-noisy-max).
  Reproducible, for simulation studies, but *not hardened*: the result says so.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

__all__ = ["NoiseInfo", "laplace_mechanism", "report_noisy_max"]


@dataclass(frozen=True)
class NoiseInfo:
    mechanism: str
    scale: float
    hardened: bool
    epsilon_spent: float


def _dp():
    import opendp.prelude as dp

    dp.enable_features("contrib")
    return dp


@lru_cache(maxsize=64)
def _opendp_laplace(sensitivity, epsilon):
    """Build OpenDP's vector Laplace measurement whose map(sensitivity) <= epsilon."""
    dp = _dp()
    space = dp.vector_domain(dp.atom_domain(T=float, nan=False)), dp.l1_distance(T=float)
    scale = sensitivity / epsilon
    for _ in range(64):
        meas = dp.m.make_laplace(*space, scale=scale)
        spent = meas.map(sensitivity)
        if spent <= epsilon:
            return meas, scale, spent
        scale = float(np.nextafter(scale, np.inf)) if _ < 8 else scale * (1 + 1e-12 * 2 ** (_ - 8))
    raise RuntimeError("could not calibrate OpenDP's Laplace scale to the requested epsilon")


@lru_cache(maxsize=64)
def _opendp_noisy_max(epsilon):
    """OpenDP's report-noisy-max (exponential noise) for scores of sensitivity 1."""
    dp = _dp()
    space = (dp.vector_domain(dp.atom_domain(T=float, nan=False)),
             dp.linf_distance(T=float, monotonic=False))
    scale = 2.0 / epsilon
    for _ in range(64):
        meas = dp.m.make_noisy_max(*space, dp.max_divergence(), scale=scale)
        spent = meas.map(1.0)
        if spent <= epsilon:
            return meas, scale, spent
        scale = float(np.nextafter(scale, np.inf)) if _ < 8 else scale * (1 + 1e-12 * 2 ** (_ - 8))
    raise RuntimeError("could not calibrate OpenDP's noisy-max scale to the requested epsilon")


_CHUNK = 65536


def laplace_mechanism(values, sensitivity, epsilon, rng=None):
    """Add Laplace noise calibrated to an L1 ``sensitivity`` to every entry of ``values``.

    Parameters
    ----------
    values : ndarray
        Any shape; noise is added entry-wise.  Its L1 sensitivity over all
        entries must be at most ``sensitivity``.
    sensitivity, epsilon : float
    rng : numpy Generator or None
        None selects OpenDP's hardened sampler.

    Returns
    -------
    noisy : ndarray of the same shape;  info : NoiseInfo
    """
    values = np.asarray(values, dtype=np.float64)
    if rng is None:
        meas, scale, spent = _opendp_laplace(float(sensitivity), float(epsilon))
        flat = values.ravel()
        out = np.empty_like(flat)
        for start in range(0, flat.size, _CHUNK):
            out[start:start + _CHUNK] = meas(flat[start:start + _CHUNK].tolist())
        return out.reshape(values.shape), NoiseInfo("laplace (OpenDP make_laplace)", scale, True, spent)
    scale = sensitivity / epsilon
    noisy = values + rng.laplace(0.0, scale, size=values.shape)
    return noisy, NoiseInfo("laplace (numpy)", scale, False, epsilon)


def report_noisy_max(scores, epsilon, rng=None):
    """Index of the largest ``score + Exp(2/epsilon)``; scores must have sensitivity <= 1.

    Returns
    -------
    index : int;  info : NoiseInfo
    """
    scores = np.asarray(scores, dtype=np.float64)
    if rng is None:
        meas, scale, spent = _opendp_noisy_max(float(epsilon))
        idx = int(meas(scores.tolist()))
        return idx, NoiseInfo("report-noisy-max (OpenDP make_noisy_max, exponential)", scale, True, spent)
    scale = 2.0 / epsilon
    idx = int(np.argmax(scores + rng.exponential(scale, size=scores.shape)))
    return idx, NoiseInfo("report-noisy-max (numpy exponential)", scale, False, epsilon)
