"""The PrivGCM transformation: validated inputs and the row-local maps.

:class:`_GCMInputs` validates the data and the public parameters (nothing is computed from
the data there) and applies the row maps of the kernel ridge path: clip and scale, the
private re-centring, the regression on z, the clipped residuals and their products, whose
L1 sensitivity it certifies.  Used by :func:`privci.privgcm`,
:func:`privci.residual_products` and the Dask path.
"""

from __future__ import annotations

import numpy as np

from . import _kernels, _validation as V
from ._params import _check_approximation, _check_lambda
from .mechanisms import laplace_mechanism, quiet
from .regression import (_check_kind, gcm_sensitivity, krr_cv_residuals, krr_residuals,
                         residual_bound, rff_frequencies)
from .results import ResidualProducts


class _GCMInputs:
    """Validated inputs of the PrivGCM transformation (nothing computed from the data yet)."""

    def __init__(self, x, y, z, x_bound, y_bound, ridge_lambda, kernel_sigma, cv_lambdas,
                 kernel_approximation, n_features, feature_rng, x_center, y_center,
                 sensitivity, min_n=2):
        self.xa = V.as_data(x, "x", min_rows=1)
        self.ya = V.as_data(y, "y", min_rows=1)
        self.za = V.as_data(z, "z", allow_none=True, min_rows=1)
        self.n = V.check_same_rows(x=self.xa, y=self.ya, z=self.za)
        V.check_min_n(self.n, min_n, "PrivGCM")
        self.p, self.q = self.xa.shape[1], self.ya.shape[1]
        self.xb = V.positive_bounds(x_bound, "x_bound", self.p)
        self.yb = V.positive_bounds(y_bound, "y_bound", self.q)
        self.xc = V.public_centres(x_center, "x_center", self.p)
        self.yc = V.public_centres(y_center, "y_center", self.q)
        self.sigma = V.positive_finite(kernel_sigma, "kernel_sigma")
        self.kind = _check_kind(sensitivity)
        self.kernel_approximation = kernel_approximation
        self.n_features = _check_approximation(kernel_approximation, n_features)
        self.feature_rng = V.check_rng(feature_rng) if kernel_approximation == "rff" else None
        if self.za is None:
            self.lam, self.grid = None, None
        else:
            self.lam, self.grid = _check_lambda(ridge_lambda, kernel_approximation, cv_lambdas,
                                                self.n)
        # the certified bounds: |residual| <= rbound, L1 sensitivity of the products
        if self.za is None:
            self.rbound = 1.0
            self.sensitivity = 2.0 * self.p * self.q
        else:
            self.rbound = residual_bound(self.lam, self.kind)
            self.sensitivity = self.p * self.q * gcm_sensitivity(self.lam, self.kind)

    def transform(self, centre_noise=None):
        """Clip, scale, (privately re-centre), regress, clip residuals, multiply.

        Returns (ResidualProducts, caveats, centre NoiseInfo or None).  Every warning and
        floating-point message is silenced (:func:`privci.mechanisms.quiet`).
        """
        with quiet():
            return self._transform(centre_noise)

    def scaled(self, centre_noise=None):
        """Clip and scale x and y (and privately re-centre): (U, x centres, y centres, info)."""
        p, q, n = self.p, self.q, self.n
        xc, yc = self.xc, self.yc
        U = np.concatenate([_kernels.clip_scale(self.xa - xc, self.xb),
                            _kernels.clip_scale(self.ya - yc, self.yb)], axis=1)
        centre_info = None
        if centre_noise is not None:
            # Private re-centring (privgcm's center_epsilon): the column means of the
            # clipped, scaled data (each in [-1, 1], so replacing one row moves the
            # vector of p + q means by at most 2 (p + q) / n in L1) are released
            # with Laplace noise; the released shift m is then public, and
            # clip(U - m, -1, 1) keeps |u| <= 1, so the products' sensitivity holds.
            eps_c, crng = centre_noise
            means, centre_info = laplace_mechanism(U.mean(axis=0), 2.0 * (p + q) / n, eps_c,
                                                   crng, value_bound=1.0)
            U = np.clip(U - means, -1.0, 1.0)
            xc = xc + self.xb * means[:p]
            yc = yc + self.yb * means[p:]
        return U, xc, yc, centre_info

    def _transform(self, centre_noise):
        p, q = self.p, self.q
        U, xc, yc, centre_info = self.scaled(centre_noise)
        caveats = []
        if self.za is None:
            resid = U
        elif self.grid is not None:
            resid, _, _ = krr_cv_residuals(self.za, U, self.sigma, self.grid, 10)
            caveats.append("ridge_lambda was tuned by cross-validation on the private data "
                           "(opt-in): the privacy guarantee does NOT cover the tuning step; "
                           f"the sensitivity uses the grid minimum lambda = {self.lam:g}.")
        else:
            freqs = None
            if self.kernel_approximation == "rff":
                freqs = rff_frequencies(self.za.shape[1], self.n_features, self.sigma,
                                        self.feature_rng)
            resid = krr_residuals(self.za, U, self.sigma, self.lam,
                                  kernel_approximation=self.kernel_approximation, freqs=freqs,
                                  warn=False)
        # |r| <= rbound is proved; clipping makes it exact in floating point (a per-row,
        # 1-Lipschitz map: every bound of the proof still holds) and maps a non-finite
        # value (none can arise) into the domain.
        resid = np.clip(np.nan_to_num(resid, nan=0.0), -self.rbound, self.rbound)
        prod = _kernels.residual_products(np.ascontiguousarray(resid[:, :p]),
                                          np.ascontiguousarray(resid[:, p:]))
        rp = ResidualProducts(products=prod if prod.shape[1] > 1 else prod[:, 0],
                              sensitivity=self.sensitivity, ridge_lambda=self.lam,
                              kernel_sigma=self.sigma, x_bound=self.xb, y_bound=self.yb,
                              shape_xy=(p, q), kernel_approximation=self.kernel_approximation,
                              x_center=xc, y_center=yc, residual_bound=self.rbound,
                              sensitivity_kind=self.kind)
        return rp, caveats, centre_info
