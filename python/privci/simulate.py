"""Data for simulation studies: the paper's data-generating process and real-data subsamples.

:func:`paper_data` draws the synthetic design of Kalemaj, Kasiviswanathan &
Ramdas (Section "Empirical Evaluation", after Shah & Peters):

    f_s(z) = exp(-s^2 / 2) sin(s z),
    Z_1, ..., Z_d ~ N(0, 4) (standard deviation 2), independent,
    X = f_s(Z_1) + N_X,
    Y = -f_s(Z_1) + N_Y + beta N_X,        N_X, N_Y ~ N(0, 1),

so X is independent of Y given Z exactly when beta = 0.  It returns the data
together with the *public* bounds the private tests need and the model-X law
of X given Z (for the CRT), all derived from the known distribution, never
from the sample.

:class:`TableSubsampler` draws subsamples of a fixed, already scaled data
table (the real-data experiment), with public bounds supplied by the user.

Both return a :class:`CIData`, the unit of work of :mod:`privci.experiments`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Optional, Tuple

import numpy as np

from . import _validation as V
from .crt import GaussianModelX

__all__ = ["CIData", "paper_data", "confounded_data", "f_s", "FsMean", "paper_moments",
           "TableSubsampler"]


def f_s(z, s):
    """The paper's regression function f_s(z) = exp(-s^2/2) sin(s z)."""
    return math.exp(-0.5 * s * s) * np.sin(s * np.asarray(z, dtype=np.float64))


@dataclass(frozen=True)
class FsMean:
    """E[X | Z = z] = f_s(z_1) as a picklable callable (the model-X mean).

    Examples
    --------
    >>> import numpy as np
    >>> FsMean(2.0)(np.zeros((3, 1)))
    array([0., 0., 0.])
    """

    s: float

    def __call__(self, z):
        z = np.asarray(z, dtype=np.float64)
        return f_s(z.reshape(z.shape[0], -1)[:, 0], self.s)


@dataclass(frozen=True, repr=False)
class CIData:
    """One data set for a conditional-independence test, with its public side information.

    Attributes
    ----------
    x : ndarray (n,)
    y : ndarray (n,)
    z : ndarray (n, d)
    x_bound, y_bound : float
        Public bounds on |x| and |y| (PrivGCM clips to them).
    x_residual_bound : float or None
        Public bound on |x - E[X | Z]| (PrivCRT); None when no model-X law is known.
    model_x : privci.ModelX or None
        The known law of X given Z (CRT, PrivCRT); None for real data.
    null : bool or None
        True when X is independent of Y given Z by construction, None if unknown.
    params : dict
        The parameters the data were drawn with.
    """

    x: np.ndarray
    y: np.ndarray
    z: np.ndarray
    x_bound: float
    y_bound: float
    x_residual_bound: Optional[float] = None
    model_x: Any = None
    null: Optional[bool] = None
    params: dict = field(default_factory=dict)

    @property
    def n(self):
        return self.x.shape[0]

    def __repr__(self):
        p = ", ".join(f"{k}={v!r}" for k, v in {"n": self.n, "d": self.z.shape[1],
                                                 **self.params}.items())
        return (f"CIData({p}, x_bound={self.x_bound:.4g}, "
                f"y_bound={self.y_bound:.4g}, x_residual_bound={self.x_residual_bound!r}, "
                f"model_x={self.model_x!r}, null={self.null})")


def paper_moments(s, beta=0.0):
    """Exact standard deviations of X, Y and of X - E[X | Z] under :func:`paper_data`.

    With Z_1 ~ N(0, 4): E[sin(s Z_1)] = 0 and E[sin^2(s Z_1)] =
    (1 - exp(-8 s^2)) / 2, so Var f_s(Z_1) = exp(-s^2) (1 - exp(-8 s^2)) / 2,
    Var X = Var f_s + 1 and Var Y = Var f_s + 1 + beta^2.

    Returns
    -------
    dict with keys ``sd_x``, ``sd_y``, ``sd_x_residual`` (= 1) and ``var_f``.
    """
    var_f = math.exp(-s * s) * (1.0 - math.exp(-8.0 * s * s)) / 2.0
    return {"sd_x": math.sqrt(var_f + 1.0), "sd_y": math.sqrt(var_f + 1.0 + beta * beta),
            "sd_x_residual": 1.0, "var_f": var_f}


def paper_data(n, *, d=1, s=2.0, beta=0.0, bound_sd=4.0, rng=None):
    """Draw one data set from the paper's simulation design.

    Parameters
    ----------
    n : int
        Sample size (>= 2).
    d : int, default 1
        Dimension of Z (the paper uses 1 and 5); only Z_1 enters X and Y.
    s : float, default 2
        Model complexity of f_s (the paper: 1, 2, ..., 32; s = 2 elsewhere).
    beta : float, default 0
        Strength of the dependence of Y on N_X; beta = 0 is the null.
    bound_sd : float, default 4
        The public bounds are ``bound_sd`` exact standard deviations (see Notes).
    rng : None, int, SeedSequence or numpy Generator

    Returns
    -------
    CIData
        x, y (n,), z (n, d); ``x_bound = bound_sd * sd(X)``,
        ``y_bound = bound_sd * sd(Y)``, ``x_residual_bound = bound_sd`` (the
        sd of X - E[X | Z] = N_X is 1), ``model_x`` =
        ``GaussianModelX(mean=FsMean(s), scale=1.0)`` and ``null = (beta == 0)``.

    Notes
    -----
    The bounds are computed from the known distribution (:func:`paper_moments`),
    not from the sample, so they are public.  The paper rescales to |x|, |y| <= 1
    and notes that sqrt(C log n) standard deviations suffice with high
    probability; 4 sd equals sqrt(2 log n) at n ~ 3000 and exceeds the
    expected maximum of |N(0, 1)| over 10^4 draws (about 3.9).  The few values
    beyond the bound are clipped by the private tests, which keeps the
    privacy guarantee and, being a function of X alone (or of Y alone), the
    null hypothesis.  Tighter bounds raise the power of PrivGCM (the signal
    scales with 1 / (x_bound y_bound) while the noise does not); a bound
    that depends on beta is legitimate here because beta is a public design
    parameter of the simulation.

    Examples
    --------
    >>> from privci import simulate
    >>> dat = simulate.paper_data(500, d=5, s=2, beta=0.5, rng=0)
    >>> dat.z.shape, round(dat.x_bound, 3), dat.null
    ((500, 5), 4.018, False)
    """
    n = V.check_int(n, "n", 2)
    d = V.check_int(d, "d", 1)
    s = V.positive_finite(s, "s")
    if isinstance(beta, bool) or not isinstance(beta, (int, float, np.integer, np.floating)) \
            or not np.isfinite(beta) or beta < 0:
        raise ValueError(f"`beta` must be a non-negative finite number; got {beta!r} instead.")
    beta = float(beta)
    bound_sd = V.positive_finite(bound_sd, "bound_sd")
    rng = V.check_rng(rng)
    z = 2.0 * rng.standard_normal((n, d))
    noise_x = rng.standard_normal(n)
    noise_y = rng.standard_normal(n)
    f = f_s(z[:, 0], s)
    x = f + noise_x
    y = -f + noise_y + beta * noise_x
    mom = paper_moments(s, beta)
    return CIData(x=x, y=y, z=z, x_bound=bound_sd * mom["sd_x"], y_bound=bound_sd * mom["sd_y"],
                  x_residual_bound=bound_sd * mom["sd_x_residual"],
                  model_x=GaussianModelX(mean=FsMean(s), scale=1.0), null=(beta == 0.0),
                  params={"n": n, "d": d, "s": s, "beta": beta})


# Var(1.5 sin Z + 0.5 Z), Z ~ N(0, 1): 1.125 (1 - e^-2) + 0.25 + 1.5 e^-1/2
_CONF_VAR_F = 1.125 * (1.0 - math.exp(-2.0)) + 0.25 + 1.5 * math.exp(-0.5)


def confounded_data(n, *, beta=0.0, bound_sd=4.0, rng=None):
    """A confounded design: Z drives both X and Y (issue 13's level check).

    Z ~ N(0, I_2), f(z) = 1.5 sin(z_1) + 0.5 z_1, X = f(Z) + N_X,
    Y = f(Z) + N_Y + beta N_X; X is independent of Y given Z exactly when beta = 0.
    Public bounds: ``bound_sd`` exact standard deviations of X and Y.

    Examples
    --------
    >>> from privci import simulate
    >>> dat = simulate.confounded_data(300, rng=0)
    >>> dat.z.shape, round(dat.x_bound, 3), dat.null
    ((300, 2), 7.08, True)
    """
    n = V.check_int(n, "n", 2)
    beta = float(beta)
    rng = V.check_rng(rng)
    z = rng.standard_normal((n, 2))
    f = 1.5 * np.sin(z[:, 0]) + 0.5 * z[:, 0]
    nx = rng.standard_normal(n)
    x = f + nx
    y = f + rng.standard_normal(n) + beta * nx
    return CIData(x=x, y=y, z=z, x_bound=bound_sd * math.sqrt(_CONF_VAR_F + 1.0),
                  y_bound=bound_sd * math.sqrt(_CONF_VAR_F + 1.0 + beta * beta),
                  null=(beta == 0.0), params={"n": n, "design": "confounded", "beta": beta})


@dataclass(frozen=True, eq=False, repr=False)
class TableSubsampler:
    """Subsamples without replacement from a fixed, already scaled data table.

    Parameters
    ----------
    table : ndarray (N, k)
        The data, already transformed with a public (data-independent) scaling.
    columns : tuple of str
        Column names of ``table``.
    y : str
        The response column.  For ``x = name``, Z is every column other than
        ``x`` and ``y``.
    bounds : tuple of float
        A public bound on |column| for each column (after the scaling).

    Calling ``sampler(n=..., x=..., rng=...)`` returns a :class:`CIData` with
    ``null=None`` (unknown) and no model-X law.  ``n = N`` returns the whole
    table in a random order.  ``permute_x=True`` replaces x by a random
    permutation of itself within the subsample: X is then independent of
    (Y, Z) with its marginal law kept, a null control on real data
    (``null=True``).

    Examples
    --------
    >>> import numpy as np
    >>> t = np.random.default_rng(0).uniform(-1, 1, size=(50, 3))
    >>> sub = TableSubsampler(t, ("a", "b", "c"), y="c", bounds=(1.0, 1.0, 1.0))
    >>> dat = sub(n=20, x="a", rng=1)
    >>> dat.z.shape, dat.params
    ((20, 1), {'n': 20, 'x': 'a'})
    """

    table: np.ndarray
    columns: Tuple[str, ...]
    y: str
    bounds: Tuple[float, ...]

    def __post_init__(self):
        t = V.as_data(self.table, "table", min_rows=2)
        object.__setattr__(self, "table", t)
        object.__setattr__(self, "columns", tuple(self.columns))
        object.__setattr__(self, "bounds", tuple(float(b) for b in self.bounds))
        if len(self.columns) != t.shape[1] or len(self.bounds) != t.shape[1]:
            raise ValueError("`columns` and `bounds` must have one entry per column of `table`; "
                             f"got {len(self.columns)} and {len(self.bounds)} for {t.shape[1]} "
                             "columns.")
        if self.y not in self.columns:
            raise ValueError(f"`y` must be one of {self.columns}; got {self.y!r} instead.")

    def __call__(self, *, n, x, permute_x=False, rng=None):
        n = V.check_int(n, "n", 2)
        N = self.table.shape[0]
        if n > N:
            raise ValueError(f"`n` must be at most the table size {N}; got {n} instead.")
        if x not in self.columns or x == self.y:
            raise ValueError(f"`x` must be a column other than {self.y!r}; got {x!r} instead.")
        rng = V.check_rng(rng)
        idx = rng.choice(N, size=n, replace=False)
        ix, iy = self.columns.index(x), self.columns.index(self.y)
        iz = [j for j in range(len(self.columns)) if j not in (ix, iy)]
        sub = self.table[idx]
        xs = np.ascontiguousarray(sub[:, ix])
        params = {"n": n, "x": x}
        if permute_x:
            xs = np.ascontiguousarray(rng.permutation(xs))
            params["permute_x"] = True
        return CIData(x=xs, y=np.ascontiguousarray(sub[:, iy]),
                      z=np.ascontiguousarray(sub[:, iz]), x_bound=self.bounds[ix],
                      y_bound=self.bounds[iy], null=True if permute_x else None, params=params)

    def __repr__(self):
        return (f"TableSubsampler(N={self.table.shape[0]}, columns={self.columns}, "
                f"y={self.y!r})")
