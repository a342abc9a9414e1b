"""The data-frame call form: ``privci.privgcm(data=df, x="bmi", y="progression", z=["age"])``.

:func:`accepts_data_frames` wraps a public test so that, with ``data=`` given,
``x``, ``y`` and ``z`` name columns of a data frame instead of holding arrays
(pingouin's habit: ``partial_corr(data=df, x="a", y="b", covar=["c"])``).  The
layer is thin: it selects the named columns as float64 arrays, calls the test
with them, and writes the column names into the result's ``data_name``.
Without ``data=`` the call goes to the test unchanged.

Data frames: pandas, and any object with the dataframe interchange protocol
(``__dataframe__``: polars, pyarrow, modin, ...).  Columns must be numeric
(integer, float or boolean); missing values become NaN, which the tests'
validation then rejects.  No error message here ever contains a cell value or
a count that depends on the data: only column names and dtypes.
"""

from __future__ import annotations

import ctypes
import dataclasses
import difflib
import functools
import inspect
import warnings

import numpy as np

__all__ = ["accepts_data_frames", "select_columns"]

# the arguments that hold data, in the order of the tests' signatures
_COLUMN_ARGS = ("x", "y", "z")

_DATA_DOC = """\
data : pandas.DataFrame or object with ``__dataframe__``, optional
    A data frame holding the data (pandas, or anything implementing the
    dataframe interchange protocol).  When given, ``x``, ``y`` and ``z`` are
    column names instead of arrays: one name for a single column, a list of
    names for several (``z=["age", "sex"]``); ``z=None`` where the test allows
    it.  The columns must be numeric (int, float or bool) and are passed on as
    float64 arrays; the result's ``data_name`` records the names
    (``"bmi and progression given age, sex"``).  Default None: ``x``, ``y``,
    ``z`` are arrays, as without this argument.
"""

# dataframe interchange protocol constants (DtypeKind, ColumnNullType)
_INT, _UINT, _FLOAT, _BOOL = 0, 1, 2, 20
_KIND_NAMES = {0: "int", 1: "uint", 2: "float", 20: "bool", 21: "string", 22: "datetime",
               23: "categorical"}
_NON_NULLABLE, _USE_NAN, _USE_SENTINEL, _USE_BITMASK, _USE_BYTEMASK = range(5)
_CPU, _CPU_PINNED = 1, 3


def _is_pandas_frame(data):
    mod = type(data).__module__ or ""
    return mod.split(".")[0] == "pandas" and hasattr(data, "columns") and hasattr(data, "iloc")


def _label(name):
    return repr(name) if isinstance(name, str) else str(name)


def _unknown_column(arg, name, available):
    available = list(available)
    close = difflib.get_close_matches(str(name), [str(a) for a in available], n=3)
    shown = ", ".join(_label(a) for a in available[:8])
    if len(available) > 8:
        shown += f", ... ({len(available)} columns)"
    hint = f" Did you mean {', '.join(repr(c) for c in close)}?" if close else ""
    return ValueError(f"`{arg}`: no column {_label(name)} in `data`; its columns are "
                      f"{shown or 'none'}.{hint}")


def _non_numeric(arg, name, dtype):
    return TypeError(f"`{arg}`: column {_label(name)} of `data` has dtype {dtype}; only "
                     f"numeric (int, float or bool) columns can be tested.")


def _pandas_column(data, arg, name):
    import pandas as pd

    columns = data.columns
    if name not in columns:
        raise _unknown_column(arg, name, columns)
    if not columns.is_unique and int(np.sum(columns == name)) > 1:
        raise ValueError(f"`{arg}`: column {_label(name)} appears more than once in `data`; "
                         f"rename the duplicates first.")
    col = data[name]
    dtype = col.dtype
    if not (pd.api.types.is_numeric_dtype(dtype) or pd.api.types.is_bool_dtype(dtype)) or \
            pd.api.types.is_complex_dtype(dtype):
        raise _non_numeric(arg, name, dtype)
    return col.to_numpy(dtype=np.float64, na_value=np.nan, copy=True)


def _raw(buf, nbytes=None):
    """The bytes of an interchange buffer as a uint8 array (a view: copy before release)."""
    device = buf.__dlpack_device__()[0]
    if int(device) not in (_CPU, _CPU_PINNED):
        raise TypeError("`data` holds a column outside CPU memory; move it to the CPU first.")
    size = int(buf.bufsize if nbytes is None else nbytes)
    if size == 0:
        return np.zeros(0, dtype=np.uint8)
    return np.frombuffer((ctypes.c_char * size).from_address(int(buf.ptr)), dtype=np.uint8)


def _numpy_dtype(kind, bitwidth, endianness):
    order = {"=": "=", "|": "|", "<": "<", ">": ">"}.get(endianness, "=")
    code = {_INT: "i", _UINT: "u", _FLOAT: "f", _BOOL: "u"}[kind]
    return np.dtype(f"{order}{code}{bitwidth // 8}")


def _bits(raw, offset, size):
    return np.unpackbits(raw, bitorder="little")[offset:offset + size].astype(bool)


def _interchange_chunk(chunk, arg, name):
    offset, size = int(chunk.offset), int(chunk.size())
    buffers = chunk.get_buffers()
    buf, (kind, bitwidth, _, endianness) = buffers["data"]
    kind, bitwidth = int(kind), int(bitwidth)
    raw = _raw(buf)
    if kind == _BOOL and bitwidth == 1:
        values = _bits(raw, offset, size).astype(np.float64)
    elif kind in (_INT, _UINT, _FLOAT, _BOOL) and bitwidth in (8, 16, 32, 64):
        dt = _numpy_dtype(kind, bitwidth, endianness)
        values = raw.view(dt)[offset:offset + size].astype(np.float64)
    else:
        raise _non_numeric(arg, name, f"{_KIND_NAMES.get(kind, kind)}{bitwidth}")
    null_kind, null_value = chunk.describe_null
    null_kind = int(null_kind)
    missing = None
    if null_kind == _USE_SENTINEL:
        missing = values == float(null_value)
    elif null_kind in (_USE_BITMASK, _USE_BYTEMASK) and buffers.get("validity") is not None:
        vbuf, (_, vbits, _, _) = buffers["validity"]
        vraw = _raw(vbuf)
        if null_kind == _USE_BITMASK or int(vbits) == 1:
            flags = _bits(vraw, offset, size)
        else:
            flags = vraw[offset:offset + size].astype(bool)
        missing = flags == bool(null_value)
    if missing is not None:
        values[missing] = np.nan
    return values


def _interchange_column(frame, arg, name):
    names = list(frame.column_names())
    if name not in names:
        raise _unknown_column(arg, name, names)
    if names.count(name) > 1:
        raise ValueError(f"`{arg}`: column {_label(name)} appears more than once in `data`; "
                         f"rename the duplicates first.")
    col = frame.get_column_by_name(name)
    kind, bitwidth, fmt, _ = col.dtype
    kind = int(kind)
    if kind not in (_INT, _UINT, _FLOAT, _BOOL):
        raise _non_numeric(arg, name, f"{_KIND_NAMES.get(kind, kind)} (format {fmt!r})")
    parts = [_interchange_chunk(chunk, arg, name) for chunk in col.get_chunks()]
    return np.concatenate(parts) if parts else np.zeros(0)


def _column_names(arg, spec):
    """The column names in ``spec`` as a list, and whether it was a single name."""
    if isinstance(spec, (list, tuple)):
        if not spec:
            raise ValueError(f"`{arg}` must name at least one column of `data`; got an empty "
                             f"{type(spec).__name__} instead.")
        for name in spec:
            if not isinstance(name, (str, int, np.integer)) or isinstance(name, bool):
                raise TypeError(f"`{arg}` must be a column name or a list of column names "
                                f"when `data` is given; got a {type(spec).__name__} holding a "
                                f"{type(name).__name__} instead.")
        return list(spec), False
    if isinstance(spec, (str, int, np.integer)) and not isinstance(spec, bool):
        return [spec], True
    what = type(spec).__name__
    shape = getattr(spec, "shape", None)
    if shape is not None:
        what += f" of shape {tuple(shape)}"
    raise TypeError(f"`{arg}` must be a column name or a list of column names when `data` is "
                    f"given (not an array: give either `data=` with names, or arrays without "
                    f"`data=`); got {what} instead.")


def select_columns(data, arg, spec):
    """Select the column(s) ``spec`` of ``data`` as a float64 array.

    Parameters
    ----------
    data : pandas.DataFrame or object with ``__dataframe__``
    arg : str
        The argument the columns are for (``"x"``, ``"y"`` or ``"z"``), named
        in error messages.
    spec : str or list of str
        One column name (a 1-D array is returned) or several (2-D, one column
        each, in the order given).

    Returns
    -------
    values : ndarray of float64
    names : list of str
        The column names as text, for the result's description.
    """
    names, single = _column_names(arg, spec)
    if _is_pandas_frame(data):
        cols = [_pandas_column(data, arg, name) for name in names]
    elif hasattr(data, "__dataframe__"):
        with warnings.catch_warnings():
            # pandas >= 3 deprecates its own producer; the protocol itself is what we use
            warnings.simplefilter("ignore", DeprecationWarning)
            warnings.simplefilter("ignore", FutureWarning)
            try:
                from pandas.errors import Pandas4Warning
            except ImportError:  # pragma: no cover - pandas < 3 or absent
                pass
            else:
                warnings.simplefilter("ignore", Pandas4Warning)
            frame = data.__dataframe__(allow_copy=True)
            cols = [_interchange_column(frame, arg, name) for name in names]
    else:
        raise TypeError(f"`data` must be a pandas DataFrame or an object with the dataframe "
                        f"interchange protocol (`__dataframe__`); got "
                        f"{type(data).__name__} instead.")
    values = cols[0] if single else np.column_stack(cols)
    return np.ascontiguousarray(values, dtype=np.float64), [str(n) for n in names]


def describe(names):
    """``"x and y given z1, z2"`` from the column names selected for x, y and z."""
    parts = [", ".join(names[a]) for a in ("x", "y") if a in names]
    text = " and ".join(parts)
    if names.get("z"):
        text += " given " + ", ".join(names["z"])
    return text


def _with_data_doc(doc):
    """``doc`` with the ``data`` parameter added at the end of its Parameters section."""
    if not doc:
        return _DATA_DOC
    lines = doc.splitlines()
    start = None
    for i in range(len(lines) - 1):
        if lines[i].strip() == "Parameters" and set(lines[i + 1].strip()) == {"-"}:
            start, indent = i + 2, lines[i][:len(lines[i]) - len(lines[i].lstrip())]
            break
    entry = [indent + line if line else "" for line in _DATA_DOC.splitlines()] \
        if start is not None else []
    if start is None:
        return doc.rstrip() + "\n\n" + "Parameters\n----------\n" + _DATA_DOC
    end = len(lines)
    for j in range(start, len(lines) - 1):
        if lines[j].strip() and set(lines[j + 1].strip()) == {"-"} and \
                lines[j][:len(indent)] == indent and not lines[j][len(indent):].startswith(" "):
            end = j
            break
    while end > start and not lines[end - 1].strip():
        end -= 1
    return "\n".join(lines[:end] + entry + lines[end:]) + ("\n" if doc.endswith("\n") else "")


def _is_frame(value):
    return _is_pandas_frame(value) or (hasattr(value, "__dataframe__")
                                       and not isinstance(value, np.ndarray))


def _is_names(value, several=True):
    """A column name, or (``several``) a list of them (str only: an int is a number, not a
    name here)."""
    if isinstance(value, str):
        return True
    return several and isinstance(value, (list, tuple)) and bool(value) and \
        all(isinstance(v, str) for v in value)


def _names_without_data(fname, args, kwargs, bound, column_args):
    """The TypeError for column names given without ``data=`` (or None when there are
    none): it names the argument and, with a data frame passed first (``f(df, "a", "b")``),
    spells out the call with ``data=``.  ``bound``: the arguments bound to the signature,
    or None when they do not bind."""
    if args and _is_frame(args[0]) and any(_is_names(a) for a in args[1:]):
        # f(df, "a", "b", ...): the data frame took x's place, the names moved one along
        given = dict(zip(column_args, args[1:]))
        given.update({a: kwargs[a] for a in column_args if a in kwargs and a not in given})
        parts = [f"{a}={given[a]!r}" for a in column_args if a in given]
        first = next(a for a in args[1:] if _is_names(a))
        return TypeError(
            f"the first argument is a data frame and the next are column names ({first!r}, "
            f"...): to name columns of a data frame, pass it as `data=`: "
            f"{fname}(data=df, {', '.join(parts)}, ...).")
    if bound is None:
        return None
    # without a data frame in sight, a list of strings for x or y is more likely data of the
    # wrong type (Python's "must be numeric" says so) than names; z=["age", "sex"] is names
    named = [a for a in column_args if _is_names(bound.arguments.get(a), several=a == "z")]
    if not named:
        return None
    arg = named[0]
    return TypeError(
        f"`{arg}` must be array-like with one row per observation; got the column name "
        f"{bound.arguments[arg]!r} but no data frame: pass the data frame as `data=` (e.g. "
        f"{fname}(data=df, x=\"a\", y=\"b\", z=[\"c\"], ...)), or arrays as `x`, `y` and "
        f"`z`.")


def accepts_data_frames(func):
    """Let ``func`` also be called as ``func(data=df, x="a", y="b", z=["c", "d"], ...)``.

    The wrapper keeps ``func``'s name, docstring (with a ``data`` parameter
    added), signature (with keyword-only ``data=None`` added) and
    ``__wrapped__``.  Without ``data`` (or with ``data=None``) it calls
    ``func`` with the arguments unchanged.  With ``data``, the arguments ``x``,
    ``y`` and ``z`` (positional or keyword) must be column names; they are
    replaced by the selected columns as float64 arrays, and the result's
    ``data_name`` field, when it has one, is set to
    ``"<x names> and <y names> given <z names>"``.

    Examples
    --------
    >>> import inspect
    >>> import numpy as np
    >>> from privci._frames import accepts_data_frames
    >>> @accepts_data_frames
    ... def mean_difference(x, y, z=None):
    ...     # the mean of x - y
    ...     return float(np.mean(np.asarray(x) - np.asarray(y)))
    >>> str(inspect.signature(mean_difference))
    '(x, y, z=None, *, data=None)'
    >>> mean_difference([1.0, 2.0], [0.0, 0.0])
    1.5

    With pandas installed, ``mean_difference(data=df, x="a", y="b")`` selects
    the columns ``a`` and ``b`` of ``df``.
    """
    sig = inspect.signature(func)
    if "data" in sig.parameters:
        raise TypeError(f"{func.__name__} already has a `data` parameter.")
    column_args = tuple(a for a in _COLUMN_ARGS if a in sig.parameters)
    params = list(sig.parameters.values())
    data_param = inspect.Parameter("data", inspect.Parameter.KEYWORD_ONLY, default=None)
    if params and params[-1].kind is inspect.Parameter.VAR_KEYWORD:
        params.insert(len(params) - 1, data_param)
    else:
        params.append(data_param)

    @functools.wraps(func)
    def wrapper(*args, data=None, **kwargs):
        if data is None:
            try:
                bound = sig.bind_partial(*args, **kwargs)
            except TypeError:
                bound = None            # func reports the bad call itself
            err = _names_without_data(func.__name__, args, kwargs, bound, column_args)
            if err is not None:
                raise err
            return func(*args, **kwargs)
        bound = sig.bind_partial(*args, **kwargs)
        names = {}
        for arg in column_args:
            if arg not in bound.arguments:
                continue
            spec = bound.arguments[arg]
            if spec is None and arg == "z":
                continue
            bound.arguments[arg], names[arg] = select_columns(data, arg, spec)
        result = func(*bound.args, **bound.kwargs)
        if dataclasses.is_dataclass(result) and \
                "data_name" in {f.name for f in dataclasses.fields(result)}:
            result = dataclasses.replace(result, data_name=describe(names))
        return result

    wrapper.__signature__ = sig.replace(parameters=params)
    wrapper.__doc__ = _with_data_doc(func.__doc__)
    return wrapper
