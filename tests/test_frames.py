"""The data-frame call form (privci/_frames.py): ``privci.privgcm(data=df, x="a", ...)``.

Every data-frame call is compared with the array call on the same columns: the
same seed must give bit-identical statistics and p-values, and the result must
name the columns.  pandas frames and objects that only offer the dataframe
interchange protocol (``__dataframe__``) are both exercised; a small numpy-backed
implementation of the protocol below covers what pandas does not produce
(bit-packed validity masks, sentinels, several chunks, offsets).
"""

import doctest
import inspect
import warnings

import numpy as np
import pytest

import privci
from privci import _frames
from privci._frames import accepts_data_frames

pd = pytest.importorskip("pandas")


def _df_form(func):
    """The public function with the data-frame form (wrapped here until it is wired in)."""
    if "data" in inspect.signature(func).parameters:
        return func
    return accepts_data_frames(func)


gcm = _df_form(privci.gcm)
privgcm = _df_form(privci.privgcm)
privcrt = _df_form(privci.privcrt)
crt = _df_form(privci.crt)
residual_products = _df_form(privci.residual_products)


@pytest.fixture(scope="module")
def frame():
    rng = np.random.default_rng(160)
    n = 150
    age = rng.normal(size=n)
    sex = rng.integers(0, 2, size=n)  # int64 column
    bmi = np.sin(age) + rng.normal(size=n)
    progression = np.cos(age) + 0.5 * bmi + 0.2 * sex + rng.normal(size=n)
    return pd.DataFrame({"age": age, "sex": sex, "bmi": bmi, "progression": progression,
                         "smoker": sex == 1, "label": ["secret-cell-%d" % i for i in range(n)]})


def _arrays(df, *cols):
    return [df[c].to_numpy(dtype=float) if isinstance(c, str) else
            df[list(c)].to_numpy(dtype=float) for c in cols]


class InterchangeOnly:
    """Exposes a pandas frame through ``__dataframe__`` only (as polars or pyarrow would)."""

    def __init__(self, df):
        self._df = df

    def __dataframe__(self, nan_as_null=False, allow_copy=True):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return self._df.__dataframe__(nan_as_null=nan_as_null, allow_copy=allow_copy)


# ---- a minimal numpy-backed producer of the interchange protocol ----------------------

class _Buffer:
    def __init__(self, arr):
        self._arr = np.ascontiguousarray(arr)
        self.bufsize = self._arr.nbytes
        self.ptr = self._arr.ctypes.data

    def __dlpack_device__(self):
        return (1, None)


_KIND = {"i": 0, "u": 1, "f": 2, "b": 20}


class _Column:
    """One chunk of a column: ``values`` (numpy), optional validity and null convention."""

    def __init__(self, values, offset=0, size=None, null=(0, None), validity=None,
                 bitpacked_bool=False, chunks=None, dtype=None):
        self.values, self.offset = values, offset
        self._size = len(values) - offset if size is None else size
        self.describe_null = null
        self._validity, self._bitpacked, self._chunks = validity, bitpacked_bool, chunks
        if dtype is not None:
            self.dtype = dtype
        elif bitpacked_bool:
            self.dtype = (20, 1, "b", "=")
        else:
            self.dtype = (_KIND[values.dtype.kind], values.dtype.itemsize * 8,
                          values.dtype.str, "=")

    def size(self):
        return self._size

    def num_chunks(self):
        return len(self._chunks) if self._chunks else 1

    def get_chunks(self, n_chunks=None):
        return iter(self._chunks or [self])

    def get_buffers(self):
        data = _Buffer(self.values)
        out = {"data": (data, self.dtype), "validity": None, "offsets": None}
        if self._validity is not None:
            bits = self._validity.dtype == np.uint8 and self.describe_null[0] == 3
            out["validity"] = (_Buffer(self._validity), (20, 1 if bits else 8, "b", "="))
        return out


class _Frame:
    def __init__(self, columns):
        self._columns = columns

    def __dataframe__(self, nan_as_null=False, allow_copy=True):
        return self

    def column_names(self):
        return iter(self._columns)

    def get_column_by_name(self, name):
        return self._columns[name]


def _packbits(flags):
    return np.packbits(np.asarray(flags, dtype=bool), bitorder="little")


# ---- the call form -------------------------------------------------------------------

def test_privgcm_data_frame_matches_arrays_and_names_the_columns(frame):
    x, y, z = _arrays(frame, "bmi", "progression", ("age", "sex"))
    # the KRR path: the data-frame layer is under test, whatever the spline fit's public
    # rule decides at n = 150 (it may refuse an unresolvable design)
    kw = dict(epsilon=2.0, x_bound=4, y_bound=5, rng=11, regression="krr")
    by_name = privgcm(data=frame, x="bmi", y="progression", z=["age", "sex"], **kw)
    by_array = privci.privgcm(x, y, z, **kw)
    assert (by_name.statistic, by_name.pvalue) == (by_array.statistic, by_array.pvalue)
    assert by_name.privacy == by_array.privacy
    assert by_name.data_name == "bmi and progression given age, sex"
    assert by_array.data_name is None
    assert "data_name='bmi and progression given age, sex'" in repr(by_name)
    stat, p = by_name  # still unpacks like scipy's results
    assert (stat, p) == (by_name.statistic, by_name.pvalue)


def test_gcm_positional_names_one_conditioning_column_and_no_z(frame):
    x, y, z = _arrays(frame, "bmi", "progression", "age")
    a = gcm("bmi", "progression", "age", data=frame, ridge_lambda=0.1)
    b = privci.gcm(x, y, z, ridge_lambda=0.1)
    assert (a.statistic, a.pvalue) == (b.statistic, b.pvalue)
    assert a.data_name == "bmi and progression given age"
    np.testing.assert_array_equal(a.resid_x, b.resid_x)
    free = gcm(data=frame, x="bmi", y="progression")
    assert free.data_name == "bmi and progression"
    assert free.statistic == privci.gcm(x, y).statistic
    explicit_none = gcm(data=frame, x="bmi", y="progression", z=None)
    assert explicit_none.statistic == free.statistic


def test_several_columns_for_x_give_the_multivariate_test(frame):
    x, y, z = _arrays(frame, ("bmi", "smoker"), "progression", ("age",))
    a = gcm(data=frame, x=["bmi", "smoker"], y="progression", z=["age"], ridge_lambda=0.1,
            rng=3, n_sim=99)
    b = privci.gcm(x, y, z, ridge_lambda=0.1, rng=3, n_sim=99)
    assert (a.statistic, a.pvalue) == (b.statistic, b.pvalue)
    assert a.resid_x.shape == (len(frame), 2)
    assert a.data_name == "bmi, smoker and progression given age"


def test_crt_privcrt_and_residual_products_accept_data_frames(frame):
    x, y, z = _arrays(frame, "bmi", "progression", "age")
    mx = privci.GaussianModelX(lambda zz: np.sin(np.asarray(zz).reshape(len(zz), -1)[:, 0]), 1.0)
    kw = dict(model_x=mx, n_resamples=29, rng=5)
    a = crt(data=frame, x="bmi", y="progression", z="age", **kw)
    b = privci.crt(x, y, z, **kw)
    assert (a.statistic, a.pvalue) == (b.statistic, b.pvalue)
    assert a.data_name == "bmi and progression given age"
    pkw = dict(epsilon=1.0, model_x=mx, y_bound=6, x_residual_bound=4, rng=5)
    pa = privcrt(data=frame, x="bmi", y="progression", z="age", **pkw)
    pb = privci.privcrt(x, y, z, **pkw)
    assert (pa.statistic, pa.pvalue) == (pb.statistic, pb.pvalue)
    assert pa.data_name == "bmi and progression given age"
    ra = residual_products(data=frame, x="bmi", y="progression", z="age", x_bound=4, y_bound=5)
    rb = privci.residual_products(x, y, z, x_bound=4, y_bound=5)
    np.testing.assert_array_equal(ra.products, rb.products)
    assert ra.sensitivity == rb.sensitivity


def test_arrays_are_passed_through_unchanged(frame):
    x, y, z = _arrays(frame, "bmi", "progression", "age")
    a = gcm(x, y, z, ridge_lambda=0.1)
    b = gcm(x, y, z, ridge_lambda=0.1, data=None)
    c = privci.gcm(x, y, z, ridge_lambda=0.1)
    assert a.statistic == b.statistic == c.statistic
    assert a.data_name is None
    with pytest.raises(ValueError, match="`epsilon` must be a positive finite number"):
        privgcm(x, y, z, epsilon=-1, x_bound=1, y_bound=1)


def test_integer_and_boolean_columns_become_float64():
    df = pd.DataFrame({"a": np.arange(6), "b": [True, False] * 3, "c": np.arange(6, dtype="u2")})
    values, names = _frames.select_columns(df, "x", ["a", "b", "c"])
    assert values.dtype == np.float64 and values.shape == (6, 3)
    assert values.flags.c_contiguous
    np.testing.assert_array_equal(values[:, 1], [1, 0] * 3)
    assert names == ["a", "b", "c"]
    one, _ = _frames.select_columns(df, "z", "a")
    assert one.shape == (6,)


def test_interchange_protocol_gives_the_same_test_as_pandas(frame):
    only = InterchangeOnly(frame)
    assert not hasattr(only, "columns")
    a = privgcm(data=only, x="bmi", y="progression", z=["age", "sex"], epsilon=1.0,
                x_bound=4, y_bound=5, rng=2, regression="krr")
    b = privgcm(data=frame, x="bmi", y="progression", z=["age", "sex"], epsilon=1.0,
                x_bound=4, y_bound=5, rng=2, regression="krr")
    assert (a.statistic, a.pvalue, a.data_name) == (b.statistic, b.pvalue, b.data_name)
    vals, _ = _frames.select_columns(only, "x", ["smoker", "sex"])
    np.testing.assert_array_equal(vals, frame[["smoker", "sex"]].to_numpy(dtype=float))


def test_interchange_missing_values_become_nan_and_are_rejected():
    df = pd.DataFrame({"a": pd.array([1.5, None, 3.0], dtype="Float64"),
                       "b": pd.array([1, 2, None], dtype="Int64"), "c": [0.0, 1.0, 2.0]})
    vals, _ = _frames.select_columns(InterchangeOnly(df), "x", ["a", "b"])
    np.testing.assert_array_equal(np.isnan(vals), [[False, False], [True, False], [False, True]])
    assert vals[0, 0] == 1.5 and vals[1, 1] == 2.0
    pvals, _ = _frames.select_columns(df, "x", ["a", "b"])
    np.testing.assert_array_equal(pvals, vals)
    with pytest.raises(ValueError, match="`x` contains NaN"):
        gcm(data=df, x="a", y="c")


def test_interchange_bitmasks_sentinels_chunks_and_offsets():
    # validity bitmask (Arrow's convention: bit 1 = valid), with an offset into the buffers
    values = np.array([9.0, 1.0, 2.0, 3.0, 4.0])
    valid = _packbits([True, True, False, True, True])
    col = _Column(values, offset=1, size=4, null=(3, 0), validity=valid)
    out, _ = _frames.select_columns(_Frame({"v": col}), "y", "v")
    np.testing.assert_array_equal(np.isnan(out), [False, True, False, False])
    np.testing.assert_array_equal(out[[0, 2, 3]], [1.0, 3.0, 4.0])
    # sentinel value marks missing entries; int32 data
    sent = _Column(np.array([5, -1, 7], dtype=np.int32), null=(2, -1))
    out, _ = _frames.select_columns(_Frame({"s": sent}), "y", "s")
    np.testing.assert_array_equal(np.isnan(out), [False, True, False])
    # bit-packed booleans split over two chunks
    chunks = [_Column(_packbits([True, False, True]), size=3, bitpacked_bool=True),
              _Column(_packbits([False, True]), size=2, bitpacked_bool=True)]
    parent = _Column(np.zeros(5), chunks=chunks, dtype=(20, 1, "b", "="))
    out, _ = _frames.select_columns(_Frame({"b": parent}), "z", ["b"])
    np.testing.assert_array_equal(out, [[1.0], [0.0], [1.0], [0.0], [1.0]])
    # big-endian float32
    be = _Column(np.array([1.25, -2.5], dtype=">f4"), dtype=(2, 32, "f", ">"))
    out, _ = _frames.select_columns(_Frame({"e": be}), "x", "e")
    np.testing.assert_array_equal(out, [1.25, -2.5])


# ---- errors --------------------------------------------------------------------------

def test_unknown_column_is_named_with_the_available_ones(frame):
    with pytest.raises(ValueError) as info:
        privgcm(data=frame, x="bmii", y="progression", z="age", epsilon=1, x_bound=1, y_bound=1)
    msg = str(info.value)
    assert "`x`: no column 'bmii' in `data`" in msg
    assert "'age', 'sex', 'bmi', 'progression'" in msg and "Did you mean 'bmi'?" in msg
    assert "secret-cell" not in msg
    wide = pd.DataFrame(np.zeros((3, 20)), columns=[f"c{i}" for i in range(20)])
    with pytest.raises(ValueError, match=r"'c7', \.\.\. \(20 columns\)") as info:
        gcm(data=wide, x="c0", y="c1", z=["c2", "nope"])
    assert "`z`: no column 'nope'" in str(info.value)
    with pytest.raises(ValueError, match="`y`: no column 'zz'"):
        gcm(data=InterchangeOnly(frame), x="bmi", y="zz")


def test_non_numeric_column_names_its_dtype_never_a_cell(frame):
    for data in (frame, InterchangeOnly(frame)):
        with pytest.raises(TypeError, match="`z`: column 'label' of `data` has dtype") as info:
            gcm(data=data, x="bmi", y="progression", z=["age", "label"])
        assert "secret-cell" not in str(info.value)
    cat = pd.DataFrame({"a": [1.0, 2.0], "k": pd.Categorical(["private-a", "private-b"])})
    with pytest.raises(TypeError, match="column 'k' of `data` has dtype category") as info:
        _frames.select_columns(cat, "x", "k")
    assert "private" not in str(info.value)
    with pytest.raises(TypeError, match="column 'k' of `data` has dtype categorical"):
        _frames.select_columns(InterchangeOnly(cat), "x", "k")


@pytest.mark.parametrize("kwargs, exc, match", [
    (dict(x=np.zeros(150), y="progression"), TypeError,
     r"`x` must be a column name or a list of column names when `data` is given .*"
     r"got ndarray of shape \(150,\) instead"),
    (dict(x="bmi", y="progression", z=np.zeros((150, 1))), TypeError,
     r"`z` must be a column name .* got ndarray of shape \(150, 1\)"),
    (dict(x="bmi", y="progression", z=[]), ValueError,
     "`z` must name at least one column of `data`; got an empty list instead."),
    (dict(x="bmi", y=["progression", 2.5]), TypeError,
     "`y` must be a column name or a list of column names when `data` is given; got a list "
     "holding a float instead."),
])
def test_data_with_arrays_or_bad_names(frame, kwargs, exc, match):
    with pytest.raises(exc, match=match):
        gcm(data=frame, **kwargs)


@pytest.mark.parametrize("call, match", [
    # the data frame passed first, the column names after it (issue 37, item 9)
    (lambda f: privci.privgcm(f, "bmi", "progression", epsilon=1, x_bound=4, y_bound=4),
     r"the first argument is a data frame and the next are column names \('bmi', \.\.\.\): "
     r"to name columns of a data frame, pass it as `data=`: "
     r"privgcm\(data=df, x='bmi', y='progression', \.\.\.\)\."),
    (lambda f: privci.gcm(f, "bmi", "progression", ["age", "sex"]),
     r"gcm\(data=df, x='bmi', y='progression', z=\['age', 'sex'\], \.\.\.\)"),
    (lambda f: privci.privcrt(f, "bmi", "progression", z=["age"], epsilon=1, model_x=None,
                              y_bound=4, x_residual_bound=4),
     r"privcrt\(data=df, x='bmi', y='progression', z=\['age'\], \.\.\.\)"),
    # names without any data frame
    (lambda f: privci.gcm(x="bmi", y="progression"),
     r"`x` must be array-like with one row per observation; got the column name 'bmi' but "
     r"no data frame: pass the data frame as `data=`"),
    (lambda f: privci.crt(f["bmi"].to_numpy(), f["progression"].to_numpy(), ["age"],
                          model_x=None),
     r"`z` must be array-like .* got the column name \['age'\] but no data frame"),
])
def test_column_names_without_data_say_to_pass_data(frame, call, match):
    with pytest.raises(TypeError, match=match):
        call(frame)


def test_arrays_and_frames_as_data_still_work_without_data(frame):
    """A one-column data frame or arrays as x, y, z are data, not names: no hint."""
    a = privci.gcm(frame[["bmi"]], frame["progression"].to_numpy(), frame[["age"]],
                   ridge_lambda=0.1)
    b = privci.gcm(frame["bmi"].to_numpy(), frame["progression"].to_numpy(),
                   frame["age"].to_numpy(), ridge_lambda=0.1)
    assert a.statistic == b.statistic


def test_data_that_is_not_a_data_frame(frame):
    with pytest.raises(TypeError, match="`data` must be a pandas DataFrame or an object with "
                                        "the dataframe interchange protocol .* got dict"):
        gcm(data={"a": [1.0]}, x="a", y="a")
    dup = pd.DataFrame(np.zeros((4, 3)), columns=["a", "a", "b"])
    with pytest.raises(ValueError, match="column 'a' appears more than once"):
        gcm(data=dup, x="a", y="b")


# ---- the wrapper itself --------------------------------------------------------------

def test_wrapper_keeps_name_doc_signature_and_wrapped():
    for name in ["gcm", "privgcm", "privcrt", "crt", "residual_products"]:
        original = getattr(privci, name)
        original = inspect.unwrap(original)
        wrapped = accepts_data_frames(original)
        assert wrapped.__wrapped__ is original
        assert wrapped.__name__ == name and wrapped.__module__ == original.__module__
        params = inspect.signature(wrapped).parameters
        assert list(params)[:-1] == list(inspect.signature(original).parameters)
        assert params["data"].kind is inspect.Parameter.KEYWORD_ONLY
        assert params["data"].default is None
        doc = wrapped.__doc__
        assert doc.startswith(original.__doc__.split("\n")[0])
        # `data` is the last entry of the Parameters section, before Returns
        assert doc.index("    data : pandas.DataFrame") < doc.index("    Returns\n")
        assert doc.index("    data : pandas.DataFrame") > doc.index("    Parameters\n")
        assert doc.count(">>>") == original.__doc__.count(">>>") > 0
    with pytest.raises(TypeError, match="already has a `data` parameter"):
        accepts_data_frames(accepts_data_frames(inspect.unwrap(privci.gcm)))


def test_the_wrapped_docstring_examples_still_run():
    wrapped = accepts_data_frames(inspect.unwrap(privci.privgcm))
    finder = doctest.DocTestFinder()
    tests = finder.find(wrapped, "privgcm", globs={})
    assert tests and tests[0].examples
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    for t in tests:
        runner.run(t)
    assert runner.failures == 0


def test_frames_module_doctests():
    result = doctest.testmod(_frames)
    assert result.attempted > 0 and result.failed == 0


def test_docstring_without_sections_gets_a_parameters_section():
    def f(x, y):
        """Only a summary."""
    g = accepts_data_frames(f)
    assert "Parameters\n----------\ndata : pandas.DataFrame" in g.__doc__
