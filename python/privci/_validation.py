"""Input checks shared by the public functions.

Every check raises before any kernel runs, with a message that names the
argument and the value received (scikit-learn style).
"""

from __future__ import annotations

import numbers

import numpy as np

ALTERNATIVES = ("two-sided", "greater", "less")
_ALT_CODE = {"two-sided": 0, "greater": 1, "less": 2}


def _short(value):
    r = repr(value)
    return r if len(r) <= 60 else r[:57] + "..."


def as_data(value, name, *, allow_none=False, min_rows=1):
    """Return ``value`` as a C-contiguous float64 array of shape (n, p).

    Accepts numpy arrays, nested lists, pandas Series and DataFrames.  A 1-D
    input becomes one column.  Raises ``TypeError`` for non-numeric input and
    ``ValueError`` for wrong dimensions, empty input, NaN or inf.
    """
    if value is None:
        if allow_none:
            return None
        raise TypeError(f"`{name}` must be array-like; got None instead.")
    if isinstance(value, (str, bytes)) or isinstance(value, numbers.Number):
        raise TypeError(f"`{name}` must be array-like with one row per observation; "
                        f"got {type(value).__name__} {_short(value)} instead.")
    try:
        arr = np.asarray(value)
    except Exception as exc:  # pragma: no cover - exotic objects
        raise TypeError(f"`{name}` could not be converted to an array: {exc}") from None
    if arr.dtype == object or not (np.issubdtype(arr.dtype, np.number) or arr.dtype == bool):
        raise TypeError(f"`{name}` must be numeric; got an array of dtype {arr.dtype} instead.")
    if np.issubdtype(arr.dtype, np.complexfloating):
        raise TypeError(f"`{name}` must be real-valued; got dtype {arr.dtype} instead.")
    if arr.ndim == 1:
        arr = arr.reshape(-1, 1)
    elif arr.ndim != 2:
        raise ValueError(f"`{name}` must be 1-D (n,) or 2-D (n, p); got shape {arr.shape} instead.")
    if arr.shape[0] < min_rows or arr.shape[1] < 1:
        raise ValueError(f"`{name}` must have at least {min_rows} rows and 1 column; "
                         f"got shape {arr.shape} instead.")
    arr = np.ascontiguousarray(arr, dtype=np.float64)
    bad = ~np.isfinite(arr)
    if bad.any():
        kinds = []
        if np.isnan(arr).any():
            kinds.append("NaN")
        if np.isinf(arr).any():
            kinds.append("inf")
        raise ValueError(f"`{name}` contains {' and '.join(kinds)}; the data must be finite "
                         "numbers: remove or impute them first.")
    return arr


def check_same_rows(**arrays):
    items = [(k, v) for k, v in arrays.items() if v is not None]
    n0 = items[0][1].shape[0]
    for k, v in items[1:]:
        if v.shape[0] != n0:
            lens = ", ".join(f"`{a}` has {b.shape[0]}" for a, b in items)
            raise ValueError(f"`x`, `y` and `z` must have the same number of rows; {lens}.")
    return n0


def positive_finite(value, name, *, allow_none=False):
    """A positive finite real number, as float."""
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"`{name}` must be a positive finite number; got "
                        f"{type(value).__name__} {_short(value)} instead.")
    v = float(value)
    if not (np.isfinite(v) and v > 0):
        raise ValueError(f"`{name}` must be a positive finite number; got {_short(value)} instead.")
    return v


def positive_bounds(value, name, ncol):
    """A public bound: a positive finite number or one per column; returns an (ncol,) array."""
    if value is None:
        raise TypeError(f"`{name}` is required: a public bound on the magnitude of the data, "
                        "fixed before seeing the data; got None instead.")
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        v = positive_finite(value, name)
        return np.full(ncol, v)
    try:
        arr = np.asarray(value, dtype=np.float64).ravel()
    except (TypeError, ValueError):
        raise TypeError(f"`{name}` must be a positive number or one per column; "
                        f"got {_short(value)} instead.") from None
    if arr.shape[0] != ncol:
        raise ValueError(f"`{name}` must be a number or have one entry per column ({ncol}); "
                         f"got {arr.shape[0]} entries instead.")
    if not (np.all(np.isfinite(arr)) and np.all(arr > 0)):
        raise ValueError(f"`{name}` must contain positive finite numbers; got {_short(value)} instead.")
    return arr


def public_centres(value, name, ncol):
    """A public centre: None (0), a finite number, or one per column; returns an (ncol,) array."""
    if value is None:
        return np.zeros(ncol)
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        v = float(value)
        if not np.isfinite(v):
            raise ValueError(f"`{name}` must be a finite number; got {_short(value)} instead.")
        return np.full(ncol, v)
    try:
        arr = np.asarray(value, dtype=np.float64).ravel()
    except (TypeError, ValueError):
        raise TypeError(f"`{name}` must be a number or one per column; got {_short(value)} instead.") from None
    if arr.shape[0] != ncol or not np.all(np.isfinite(arr)):
        raise ValueError(f"`{name}` must be a finite number or have one finite entry per column "
                         f"({ncol}); got {_short(value)} instead.")
    return arr


def check_int(value, name, minimum):
    if isinstance(value, (bool, np.bool_)):          # True is not the integer 1 here
        raise TypeError(f"`{name}` must be an integer; got {value!r} instead.")
    if not isinstance(value, numbers.Integral):
        if isinstance(value, numbers.Real) and float(value).is_integer():
            value = int(value)
        else:
            raise TypeError(f"`{name}` must be an integer; got {type(value).__name__} "
                            f"{_short(value)} instead.")
    value = int(value)
    if value < minimum:
        raise ValueError(f"`{name}` must be an integer >= {minimum}; got {value} instead.")
    return value


def check_alternative(alternative):
    if alternative not in ALTERNATIVES:
        raise ValueError(f"`alternative` must be one of {ALTERNATIVES}; got {_short(alternative)} instead.")
    return _ALT_CODE[alternative]


def check_rng(rng):
    """Normalise ``rng`` (None, int, SeedSequence, Generator) with ``np.random.default_rng``."""
    if isinstance(rng, np.random.RandomState):
        raise TypeError("`rng` must be None, an int, a SeedSequence or a numpy Generator; "
                        "got a legacy RandomState instead (use np.random.default_rng).")
    try:
        return np.random.default_rng(rng)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"`rng` must be None, an int, a SeedSequence or a numpy Generator; "
                        f"got {_short(rng)} instead ({exc}).") from None


def check_min_n(n, minimum, what):
    if n < minimum:
        raise ValueError(f"too few samples: {what} needs at least {minimum} rows; got n = {n}.")
