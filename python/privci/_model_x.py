"""Model-X laws and the row-local map to clipped model-X residuals (PrivCRT).

The public law of X given Z (:class:`ModelX`, :class:`GaussianModelX`), the checks that it
is applied row by row, and :func:`_private_x_residuals`, the row map whose output PrivCRT's
sensitivity proof is about.  Shared by :mod:`privci.crt` and the Dask path.
"""

from __future__ import annotations

import numbers
from typing import Protocol, runtime_checkable

import numpy as np

from . import _validation as V
from .mechanisms import quiet, sanitize


@runtime_checkable
class ModelX(Protocol):
    """The model-X protocol: the known law of X given Z.

    Any object with these two methods can be passed as ``model_x``:

    ``conditional_mean(z) -> ndarray (n,)``
        E[X | Z = z_i] for each row of z.
    ``sample(z, n_resamples, rng) -> ndarray (n_resamples, n)``
        Independent draws of X given Z = z_i for each row, from the numpy
        Generator ``rng``.
    """

    def conditional_mean(self, z):  # pragma: no cover - protocol
        ...

    def sample(self, z, n_resamples, rng):  # pragma: no cover - protocol
        ...


class GaussianModelX:
    """X | Z = z ~ N(mean(z), scale^2).

    Parameters
    ----------
    mean : callable or array-like
        A function of z (array of shape (n, d)) returning the n conditional
        means, or the array of the n conditional means of the rows.
    scale : float or array-like (n,)
        The conditional standard deviation (> 0).

    Examples
    --------
    >>> import numpy as np, privci
    >>> mx = privci.GaussianModelX(lambda z: np.sin(z[:, 0]), 1.0)
    >>> mx.sample(np.zeros((4, 1)), 3, np.random.default_rng(0)).shape
    (3, 4)
    """

    def __init__(self, mean, scale):
        if not callable(mean):
            # a vector of means computed by a public function of the (private) z may hold
            # an overflow for an extreme row: not rejected here (that would tell data sets
            # apart); the private tests map it to a finite value, the CRT raises
            try:
                arr = np.asarray(mean, dtype=np.float64)
            except (TypeError, ValueError):
                raise TypeError("`mean` must be a callable or a vector of conditional means; "
                                f"got {type(mean).__name__} instead.") from None
            if arr.ndim == 2 and arr.shape[1] == 1:
                arr = arr[:, 0]
            if arr.ndim != 1 or arr.shape[0] < 1:
                raise ValueError(f"`mean` must be a callable or a vector of conditional means; "
                                 f"got shape {arr.shape} instead.")
            mean = np.ascontiguousarray(arr)
        self.mean = mean
        if isinstance(scale, numbers.Real) and not isinstance(scale, bool):
            self.scale = V.positive_finite(scale, "scale")
        else:
            s = V.as_data(scale, "scale")[:, 0]
            if not np.all(s > 0):
                raise ValueError("`scale` must be positive; got a non-positive entry.")
            self.scale = s

    def _raw_mean(self, z):
        z = np.asarray(z, dtype=np.float64)
        n = z.shape[0]
        if callable(self.mean):
            mu = np.asarray(self.mean(z.reshape(n, -1)), dtype=np.float64).ravel()
        else:
            mu = self.mean
        if mu.shape[0] != n:
            raise ValueError(f"the model-X conditional mean has {mu.shape[0]} entries but z has "
                             f"{n} rows.")
        return mu

    def conditional_mean(self, z):
        mu = self._raw_mean(z)
        if not np.all(np.isfinite(mu)):
            raise ValueError("the model-X conditional mean contains NaN or inf.")
        return mu

    def sample(self, z, n_resamples, rng):
        mu = self.conditional_mean(z)
        scale = self.scale
        if not np.isscalar(scale) and np.shape(scale)[0] != mu.shape[0]:
            raise ValueError(f"`scale` has {np.shape(scale)[0]} entries but z has {mu.shape[0]} rows.")
        return mu + scale * rng.standard_normal((n_resamples, mu.shape[0]))

    def __repr__(self):
        mean = getattr(self.mean, "__name__", "callable") if callable(self.mean) else \
            f"array(n={self.mean.shape[0]})"
        scale = self.scale if np.isscalar(self.scale) else f"array(n={np.shape(self.scale)[0]})"
        return f"GaussianModelX(mean={mean}, scale={scale})"


def _require_protocol(model_x):
    if not (isinstance(model_x, ModelX) and callable(model_x.conditional_mean)
            and callable(model_x.sample)):
        raise TypeError("`model_x` must follow the model-X protocol (methods conditional_mean(z) "
                        "and sample(z, n_resamples, rng)), e.g. privci.GaussianModelX; got "
                        f"{type(model_x).__name__} instead.")


def _check_resamples(x_resamples, n):
    """``x_resamples`` as a finite float (m, n) array (they are part of the data set)."""
    xr = np.asarray(x_resamples, dtype=np.float64) if not isinstance(x_resamples, np.ndarray) \
        else x_resamples.astype(np.float64, copy=False)
    if xr.ndim != 2 or xr.shape[1] != n or xr.shape[0] < 1:
        raise ValueError(f"`x_resamples` must have shape (m, n) = (m, {n}) with m >= 1; "
                         f"got shape {xr.shape} instead.")
    if not np.all(np.isfinite(xr)):
        raise ValueError("`x_resamples` contains NaN or inf; the data (and the resamples, "
                         "which are part of the protected data set) must be finite.")
    return xr


def _resamples_and_mean(model_x, za, n, n_resamples, x_resamples, rng):
    """Return (conditional means (n,), resamples (m, n))."""
    if x_resamples is not None:
        xr = _check_resamples(x_resamples, n)
        if hasattr(model_x, "conditional_mean") and callable(model_x.conditional_mean):
            mu = np.asarray(model_x.conditional_mean(za), dtype=np.float64).ravel()
        else:
            mu = V.as_data(model_x, "model_x")[:, 0]
        if mu.shape[0] != n:
            raise ValueError(f"the conditional means (`model_x`) have {mu.shape[0]} entries; "
                             f"expected {n}.")
        return mu, np.ascontiguousarray(xr)
    _require_protocol(model_x)
    m = V.check_int(n_resamples, "n_resamples", 1)
    mu = np.asarray(model_x.conditional_mean(za), dtype=np.float64).ravel()
    xr = np.asarray(model_x.sample(za, m, rng), dtype=np.float64)
    if mu.shape != (n,) or xr.shape != (m, n):
        raise ValueError(f"`model_x` returned means of shape {mu.shape} and resamples of shape "
                         f"{xr.shape}; expected ({n},) and ({m}, {n}).")
    if not (np.all(np.isfinite(mu)) and np.all(np.isfinite(xr))):
        raise ValueError("`model_x` returned NaN or inf.")
    return mu, np.ascontiguousarray(xr)


_PROBE_SEED = 20240601


def _check_rowwise(fn, d, what):
    """Check on a public probe (never the data) that ``fn`` maps z row by row.

    The sensitivity analysis of PrivCRT treats the model-X law as public and
    applied to each row on its own: a function of the whole z (a fitted sampler,
    a normalisation by the sample mean) lets one row move every other row's
    residual.  The probe is drawn from a fixed seed, so the check and its
    outcome are the same on every data set.
    """
    gen = np.random.default_rng(_PROBE_SEED)
    probe = gen.normal(size=(7, d)) * np.array([0.1, 1.0, 3.0, 1.0, 0.5, 2.0, 1.0])[:, None]
    probe[3] = probe[1]   # a duplicated row
    msg = (f"{what} must be a public function applied row by row (the value for a row may "
           "depend only on that row's z, e.g. lambda z: np.sin(z[:, 0])); it failed the "
           "row-by-row check on a public probe input.")
    try:
        with quiet():
            whole = np.asarray(fn(probe), dtype=np.float64).ravel()
            rev = np.asarray(fn(probe[::-1].copy()), dtype=np.float64).ravel()[::-1]
            rows = np.array([np.asarray(fn(probe[i:i + 1]), dtype=np.float64).ravel()[0]
                             for i in range(probe.shape[0])])
    except Exception:
        raise TypeError(msg) from None
    if not (whole.shape == (7,) and rev.shape == (7,)
            and np.allclose(whole, rows, rtol=1e-9, atol=1e-12, equal_nan=True)
            and np.allclose(whole, rev, rtol=1e-9, atol=1e-12, equal_nan=True)):
        raise TypeError(msg)


def _safe_call(fn, za, expect_shape, per_row_shape, default):
    """``fn(za)`` as a float array of ``expect_shape``; never raises on the data.

    If the vectorised call fails or returns the wrong shape, every row is
    evaluated on its own, and a row whose call fails gets ``default`` (a fixed,
    per-row replacement).  Non-finite values are mapped into the finite range
    (:func:`privci.mechanisms.sanitize`).  Runs silenced (:func:`quiet`).
    """
    with quiet():
        try:
            out = np.asarray(fn(za), dtype=np.float64).reshape(expect_shape)
        except Exception:
            n = za.shape[0]
            out = np.empty(expect_shape)
            for i in range(n):
                try:
                    out[..., i] = np.asarray(fn(za[i:i + 1]), dtype=np.float64).reshape(
                        per_row_shape)
                except Exception:
                    out[..., i] = default
        return sanitize(out)


def _model_x_plan(model_x, za, n, n_resamples, x_resamples):
    """Validate the model-X inputs (data-independent checks only); returns a plan dict."""
    gaussian = isinstance(model_x, GaussianModelX)
    xr = None
    if x_resamples is not None:
        xr = _check_resamples(x_resamples, n)
        m = xr.shape[0]
        mean_fn = getattr(model_x, "conditional_mean", None)
        mean_arr = None
        if gaussian and not callable(model_x.mean):
            mean_arr = model_x.mean
        elif callable(mean_fn):
            _check_rowwise(mean_fn, za.shape[1], "`model_x.conditional_mean`")
        else:
            mean_arr = V.as_data(model_x, "model_x")[:, 0]
        if mean_arr is not None and mean_arr.shape[0] != n:
            raise ValueError(f"the conditional means (`model_x`) have {mean_arr.shape[0]} entries; "
                             f"expected {n}.")
    else:
        _require_protocol(model_x)
        m = V.check_int(n_resamples, "n_resamples", 1)
        if gaussian:
            mean_arr = None if callable(model_x.mean) else model_x.mean
            if mean_arr is not None and mean_arr.shape[0] != n:
                raise ValueError(f"the model-X conditional mean has {mean_arr.shape[0]} entries "
                                 f"but z has {n} rows.")
            if mean_arr is None:
                _check_rowwise(model_x.mean, za.shape[1], "the model-X mean")
            scale = model_x.scale
            if not np.isscalar(scale) and np.shape(scale)[0] != n:
                raise ValueError(f"`scale` has {np.shape(scale)[0]} entries but z has {n} rows.")
        else:
            mean_arr = None
            _check_rowwise(model_x.conditional_mean, za.shape[1], "`model_x.conditional_mean`")
    return {"model_x": model_x, "gaussian": gaussian, "mean_arr": mean_arr, "m": m, "xr": xr}


def _private_x_residuals(plan, xa, za, rng, xrb):
    """Clipped model-X residuals (m + 1, n) in [-1, 1]: row 0 observed, then the resamples.

    The public model-X law is applied row by row, with non-finite means or
    draws mapped to finite values and every residual clipped to [-1, 1] after
    dividing by ``x_residual_bound``: no warning, no exception and no NaN
    depends on one row of the data.
    """
    model_x, gaussian, mean_arr, m, xr = (plan["model_x"], plan["gaussian"], plan["mean_arr"],
                                          plan["m"], plan["xr"])
    n = xa.shape[0]
    if mean_arr is not None:
        mu = sanitize(mean_arr)
    else:
        fn = model_x.mean if gaussian else model_x.conditional_mean
        mu = _safe_call(fn, za, (n,), (1,), 0.0)
    with quiet():
        if xr is not None:
            dev = np.vstack([xa[None, :] - mu[None, :], xr - mu[None, :]])
        elif gaussian:
            g = rng.standard_normal((m, n))
            dev = np.vstack([xa[None, :] - mu[None, :], model_x.scale * g])
        else:
            xs = _safe_call(lambda zz: model_x.sample(zz, m, rng), za, (m, n), (m,), np.nan)
            dev = np.vstack([xa[None, :] - mu[None, :], xs - mu[None, :]])
        dev = np.nan_to_num(dev, nan=0.0)
        return np.clip(dev / xrb, -1.0, 1.0)
