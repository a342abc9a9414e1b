"""Helpers of the neighbour-consistency harness (tests/test_neighbours.py; not a test module).

Two data sets are *neighbours* when they differ in exactly one row, replaced
arbitrarily by another row of finite numbers (the package's domain: non-finite
values are rejected before anything is computed, and that rejection is about
the user's data file, not a release).  A private entry point must behave on
both neighbours in a way an observer cannot tell apart beyond what the noise
allows:

* both calls return a finite statistic and p-value, or both raise the same
  exception type with the same message (so the message cannot depend on the
  replaced row);
* every warning (category and message) is the same in both calls, numpy's
  floating-point warnings included (recorded under numpy's default
  ``errstate``: divide, over and invalid warn);
* the un-noised transformations stay within their stated sensitivity.

A search that can pass vacuously must fail instead: every entry point must
return (not raise) on at least :data:`MIN_SUCCESS_SHARE` of the pairs of a
search (a function that always raises the same error would otherwise pass),
and a sensitivity check must come close enough to its constant to see a
halved one: the largest ratio (change / stated sensitivity) seen must be at
least :data:`MIN_REACHED_RATIO` (see :func:`tracking`).

:func:`run_recorded` captures one call's observable behaviour,
:func:`assert_indistinguishable` compares two, and the hypothesis strategies
below draw neighbouring pairs that mix ordinary values with the extremes of
float64 (+-1e308, +-5e-324, -0.0, duplicated rows, all rows equal, one row far
away).
"""

from __future__ import annotations

import contextlib
import copy
import inspect
import math
import sys
import warnings
from collections import Counter
from dataclasses import dataclass, field

import numpy as np
from hypothesis import strategies as st

# --------------------------------------------------------------------------- bookkeeping

#: per entry point: number of neighbouring pairs compared, how many returned (both
#: neighbours "ok"), the largest (un-noised change) / (stated sensitivity) seen and, for a
#: loose constant, the largest change / (the sharp constant); printed at the end of the
#: module.
STATS: dict = {}
_TRACKERS: list = []

#: least share of the pairs of a search on which an entry point must return, not raise
MIN_SUCCESS_SHARE = 0.5
#: least largest ratio a sensitivity check must reach (a halved constant is then seen)
MIN_REACHED_RATIO = 0.5


def _new_stats():
    return {"pairs": 0, "ok": 0, "max_ratio": None, "max_sharp_ratio": None}


def _raise_max(s, key, value):
    if value is not None and (s[key] is None or not value <= s[key]):
        s[key] = float(value)


def count_pair(entry, ratio=None, *, pairs=1, ok=None, sharp_ratio=None):
    """Count ``pairs`` compared pairs of ``entry`` (``ok``: both returned) and keep the
    largest ``ratio`` (change / stated sensitivity) and ``sharp_ratio`` (change / the sharp
    constant, for an entry whose stated constant is a looser one) seen."""
    for table in [STATS] + _TRACKERS:
        s = table.setdefault(entry, _new_stats())
        s["pairs"] += pairs
        if ok:
            s["ok"] += pairs
        _raise_max(s, "max_ratio", ratio)
        _raise_max(s, "max_sharp_ratio", sharp_ratio)


@contextlib.contextmanager
def tracking():
    """Collect, per entry point, what :func:`count_pair` records inside the block."""
    seen = {}
    _TRACKERS.append(seen)
    try:
        yield seen
    finally:
        _TRACKERS.remove(seen)


def assert_enough_successes(seen, least=MIN_SUCCESS_SHARE, context=""):
    """Every entry compared in ``seen`` returned on at least ``least`` of its pairs."""
    for entry, s in seen.items():
        if s["pairs"]:
            share = s["ok"] / s["pairs"]
            assert share >= least, (
                f"{entry} returned on only {s['ok']} of {s['pairs']} neighbouring pairs "
                f"({share:.0%} < {least:.0%}): a search that mostly compares two identical "
                f"errors says little (an entry point that always raises would pass){context}")


def assert_ratio_reached(seen, least=MIN_REACHED_RATIO, context=""):
    """Every sensitivity check in ``seen`` reached ``least`` of its constant.

    For a stated constant that is the sharp one, the largest ratio change / constant must
    reach ``least``; for a looser constant (the paper's, at least twice the sharp one for
    every lambda, so no pair can reach half of it), the largest change / the sharp constant
    must.  Below ``least`` a constant halved by mistake would go unnoticed.
    """
    for entry, s in seen.items():
        reached = s["max_sharp_ratio"] if s["max_sharp_ratio"] is not None else s["max_ratio"]
        if s["max_ratio"] is None and s["max_sharp_ratio"] is None:
            continue
        assert reached is not None and reached >= least, (
            f"{entry}: the largest sensitivity ratio seen is {reached!r} < {least}: the "
            f"pairs do not come close enough to the constant to notice it halved (or the "
            f"released values do not follow the data){context}")


def summary_lines():
    lines = ["neighbour-consistency harness: pairs searched (returned), largest sensitivity "
             "ratio (change / stated constant) and change / sharp constant"]
    width = max([len(k) for k in STATS] + [10])
    for entry in sorted(STATS):
        s = STATS[entry]
        ratio = "-" if s["max_ratio"] is None else f"{s['max_ratio']:.6g}"
        line = (f"  {entry.ljust(width)}  pairs {s['pairs']:6d} ({s['ok']:6d} returned)  "
                f"max ratio {ratio}")
        if s["max_sharp_ratio"] is not None:
            line += f"  (of the sharp constant: {s['max_sharp_ratio']:.6g})"
        lines.append(line)
    return lines


# --------------------------------------------------------------------------- one call

@dataclass
class Outcome:
    """What an observer sees of one call: its result or exception, and its warnings."""

    kind: str                     # "ok" or "error"
    value: tuple                  # ("ok") released numbers; ("error") (type name, message)
    warnings: tuple = ()          # ((category name, message), ...), in order
    result: object = field(default=None, repr=False)

    def describe(self):
        w = "".join(f"\n      warning {c}: {m}" for c, m in self.warnings)
        if self.kind == "error":
            return f"raised {self.value[0]}: {self.value[1]}{w}"
        return f"returned {self.value}{w}"


def _numbers(result):
    """The released numbers of a result (statistic, p-value), or the result itself."""
    if hasattr(result, "statistic") and hasattr(result, "pvalue"):
        return (result.statistic, result.pvalue)
    if isinstance(result, tuple):
        return result
    return (result,)


def run_recorded(fn, *, released=_numbers):
    """Call ``fn()`` and return its :class:`Outcome`.

    Warnings are recorded with every filter set to "always" and numpy's
    floating-point error handling at its defaults, so a warning the library
    lets out is seen however the surrounding test session is configured.
    ``SystemExit`` (the CLI's way of failing) counts as an error.
    """
    with warnings.catch_warnings(record=True) as caught, \
            np.errstate(divide="warn", over="warn", invalid="warn", under="ignore"):
        warnings.simplefilter("always")
        try:
            result = fn()
        except (Exception, SystemExit) as exc:  # noqa: BLE001 - the harness compares any failure
            return Outcome("error", (type(exc).__name__, str(exc)),
                           tuple((w.category.__name__, str(w.message)) for w in caught))
    return Outcome("ok", tuple(released(result)),
                   tuple((w.category.__name__, str(w.message)) for w in caught), result)


def all_finite(values):
    try:
        return all(math.isfinite(float(v)) for v in values)
    except (TypeError, ValueError):
        return False


def assert_indistinguishable(a, b, context=""):
    """Both calls finite, or the same exception and message; the same warnings."""
    where = f"\n  case: {context}" if context else ""
    detail = f"\n  first neighbour  {a.describe()}\n  second neighbour {b.describe()}{where}"
    assert a.kind == b.kind, "one neighbour raised and the other did not:" + detail
    if a.kind == "error":
        assert a.value == b.value, "the neighbours raised different errors:" + detail
    else:
        assert all_finite(a.value) and all_finite(b.value), \
            "a release is not finite on one of the neighbours:" + detail
    assert a.warnings == b.warnings, "the neighbours gave different warnings:" + detail


# --------------------------------------------------------------------------- values

#: the extremes of float64 an adversary would try (all finite)
EXTREMES = (1e308, -1e308, 1.7976931348623157e308, -1.7976931348623157e308,
            5e-324, -5e-324, 2.2250738585072014e-308, 0.0, -0.0, 1e154, -1e154,
            1e-300, 710.0, 800.0, -800.0, 1e16, 3.0e5)

extreme = st.sampled_from(EXTREMES)
ordinary = st.floats(-6.0, 6.0, allow_nan=False, allow_infinity=False)
any_finite = st.floats(allow_nan=False, allow_infinity=False)
#: a replacement value: ordinary, an extreme of float64, or any finite float
value = st.one_of(ordinary, extreme, any_finite)

BASE_KINDS = ("normal", "normal", "integers", "duplicated", "all equal", "with extremes")
ROW_KINDS = ("arbitrary", "arbitrary", "extreme", "far away", "duplicate of another row",
             "ordinary")


def _base(kind, n, cols, seed, draw):
    rng = np.random.default_rng(seed)
    if kind == "normal":
        return rng.normal(size=(n, cols))
    if kind == "integers":
        return rng.integers(-2, 3, size=(n, cols)).astype(np.float64)
    if kind == "duplicated":
        a = rng.normal(size=((n + 1) // 2, cols))
        return np.repeat(a, 2, axis=0)[:n].copy()
    if kind == "all equal":
        row = np.array([draw(value) for _ in range(cols)])
        return np.tile(row, (n, 1))
    a = rng.normal(size=(n, cols))                 # "with extremes"
    mask = rng.random(size=a.shape) < 0.15
    a[mask] = rng.choice(np.array(EXTREMES), size=int(mask.sum()))
    return a


def _row(kind, cols, base, draw):
    """A replacement row of ``cols`` values for a data block ``base`` (n, cols)."""
    if kind == "arbitrary":
        return np.array([draw(value) for _ in range(cols)])
    if kind == "extreme":
        return np.array([draw(extreme) for _ in range(cols)])
    if kind == "far away":
        sign = draw(st.sampled_from((1.0, -1.0)))
        return np.full(cols, sign * draw(st.sampled_from((1e308, 1.7976931348623157e308, 1e154))))
    if kind == "duplicate of another row":
        return base[draw(st.integers(0, base.shape[0] - 1))].copy()
    return np.array([draw(ordinary) for _ in range(cols)])


@dataclass
class Pair:
    """Two neighbouring data sets: blocks ``a[name]`` and ``b[name]`` differ in row ``i`` only."""

    a: dict
    b: dict
    i: int
    note: str

    def __repr__(self):  # what hypothesis prints for a falsifying example
        with np.printoptions(precision=17, threshold=200):
            blocks = "; ".join(f"{k}: row {self.i} {self.a[k][self.i].tolist()} -> "
                               f"{self.b[k][self.i].tolist()}" for k in self.a)
        return f"Pair(n={len(next(iter(self.a.values())))}, {self.note}; {blocks})"


@st.composite
def neighbours(draw, *, min_n, max_n, shapes, replaced=None):
    """A neighbouring pair of data sets.

    ``shapes`` maps a block name ("x", "y", "z", ...) to its number of columns
    (an int, or a strategy of ints); every block has n rows.  ``replaced``
    names the blocks whose row i is replaced (default: all of them, the
    package's neighbour relation); the others are identical in both.
    """
    n = draw(st.integers(min_n, max_n))
    seed = draw(st.integers(0, 2**32 - 1))
    i = draw(st.integers(0, n - 1))
    a, b, notes = {}, {}, []
    for k, (name, cols) in enumerate(shapes.items()):
        cols = draw(cols) if isinstance(cols, st.SearchStrategy) else cols
        kind = draw(st.sampled_from(BASE_KINDS))
        base = _base(kind, n, cols, seed + k, draw)
        a[name] = base
        new = base.copy()
        if replaced is None or name in replaced:
            rkind = draw(st.sampled_from(ROW_KINDS))
            new[i] = _row(rkind, cols, base, draw)
            notes.append(f"{name}: {kind} base, {rkind} row")
        else:
            notes.append(f"{name}: {kind} base, fixed")
        b[name] = new
    if draw(st.booleans()):   # sometimes swap, so that the extreme row is in the first call
        a, b = b, a
    return Pair(a, b, i, ", ".join(notes))


def vec(block):
    """An (n, 1) block as a 1-D vector; wider blocks unchanged."""
    return block[:, 0] if block.shape[1] == 1 else block


# --------------------------------------------------------------------------- sensitivity

def l1_ratio(prod_a, prod_b, sensitivity):
    """||prod_a - prod_b||_1 / sensitivity (nan when a product is not finite)."""
    d = np.abs(np.asarray(prod_a, dtype=np.float64) - np.asarray(prod_b, dtype=np.float64))
    with np.errstate(invalid="ignore", over="ignore"):
        total = float(np.sum(d))
    return total / sensitivity


def linf_ratio(stats_a, stats_b, sensitivity):
    d = np.abs(np.asarray(stats_a, dtype=np.float64) - np.asarray(stats_b, dtype=np.float64))
    with np.errstate(invalid="ignore"):
        return float(np.max(d)) / sensitivity


def within(ratio, slack=1e-9):
    """True when ``ratio`` (change / sensitivity) is a number <= 1 + slack (nan fails)."""
    return ratio <= 1.0 + slack


# --------------------------------------------------------------------------- released values
#
# Issue 38: for privgcm and privcrt the harness compared finiteness, warnings and errors
# only, so a privgcm returning p = 0.5 whatever the data passed.  On the seeded path the
# harness now also logs what each noise mechanism is handed (the un-noised values, their
# stated sensitivity and public parameters), runs the second neighbour with the same seed
# and every release returning the first neighbour's output (the adaptive-composition view:
# earlier releases fixed, the generator advanced as before), and compares the un-noised
# values release by release with the stated sensitivity.

_FLOAT_MAX = float(np.finfo(np.float64).max)


@dataclass
class Released:
    """One call of a noise mechanism: what it was handed and what it returned."""

    kind: str                 # "laplace", "noisy_max" or "quantile"
    values: np.ndarray        # the un-noised input, in the mechanism's domain
    sensitivity: float        # L1 (Laplace), per score (noisy max), elements (quantile)
    public: dict              # parameters that must not depend on the data
    output: object = field(default=None, repr=False)

    def change(self, other):
        """The change from this release's input to ``other``'s, in units of the stated
        sensitivity (at most 1 is required; nan / inf fail)."""
        if self.kind == "quantile":     # a data set of known size: one replaced element
            extra = Counter(self.values.tolist()) - Counter(other.values.tolist())
            return float(sum(extra.values())) / self.sensitivity
        d = np.abs(self.values - other.values)
        with np.errstate(over="ignore", invalid="ignore"):
            total = float(np.max(d)) if self.kind == "noisy_max" else float(np.sum(d))
        return total / self.sensitivity


class ReleaseLog:
    """The releases of one call; with ``reference``, each returns the reference's output
    (``overrides``: index -> the output to return instead)."""

    def __init__(self, reference=None, overrides=None):
        self.calls, self.reference, self.errors = [], reference, []
        self.overrides = dict(overrides or {})

    def add(self, rel, out):
        rel.output = out
        i = len(self.calls)
        self.calls.append(rel)
        if i in self.overrides:
            return copy.deepcopy(self.overrides[i])
        if self.reference is None:
            return out
        if i >= len(self.reference.calls):
            self.errors.append(f"an extra release on the second neighbour: {rel}")
            return out
        return copy.deepcopy(self.reference.calls[i].output)


def _privci_modules():
    return [m for name, m in sorted(sys.modules.items()) if m is not None
            and (name == "privci" or name.startswith("privci.")) and not name.endswith("__main__")]


def _originals():
    import privci.bounds
    import privci.mechanisms
    return (privci.mechanisms.laplace_mechanism, privci.mechanisms.report_noisy_max,
            privci.bounds._numpy_quantile)


_ORIGINALS = _originals()


@contextlib.contextmanager
def released(reference=None, overrides=None):
    """Log every seeded noise mechanism privci calls inside the block (a :class:`ReleaseLog`;
    with ``reference``, the releases return the reference's outputs, with ``overrides``
    the given ones).  The spies replace
    every privci module attribute that is the mechanism, so a new module is covered."""
    import privci.mechanisms as M
    laplace, noisy_max, quantile = _ORIGINALS
    log = ReleaseLog(reference, overrides)
    sig = {f: inspect.signature(f) for f in _ORIGINALS}

    def spy_laplace(*args, **kwargs):
        b = sig[laplace].bind(*args, **kwargs)
        b.apply_defaults()
        a = b.arguments
        vb = a["value_bound"]
        vals = M.sanitize(a["values"], vb)
        return log.add(Released("laplace", vals.ravel(), float(a["sensitivity"]),
                                {"epsilon": float(a["epsilon"]), "shape": vals.shape,
                                 "value_bound": None if vb is None else float(vb)}),
                       laplace(*args, **kwargs))

    def spy_noisy_max(*args, **kwargs):
        b = sig[noisy_max].bind(*args, **kwargs)
        b.apply_defaults()
        a = b.arguments
        vals = np.clip(M.sanitize(a["scores"]), -_FLOAT_MAX / 4, _FLOAT_MAX / 4)
        return log.add(Released("noisy_max", vals.ravel(), 1.0,
                                {"epsilon": float(a["epsilon"]), "shape": vals.shape}),
                       noisy_max(*args, **kwargs))

    def spy_quantile(*args, **kwargs):
        b = sig[quantile].bind(*args, **kwargs)
        a = b.arguments
        vals = np.array(a["values"], dtype=np.float64, copy=True).ravel()
        return log.add(Released("quantile", vals, 1.0,
                                {"epsilon": float(a["epsilon"]), "alpha": float(a["alpha"]),
                                 "size": vals.size,
                                 "candidates": tuple(np.asarray(a["candidates"]).tolist())}),
                       quantile(*args, **kwargs))

    spies = {id(laplace): spy_laplace, id(noisy_max): spy_noisy_max,
             id(quantile): spy_quantile}
    with contextlib.ExitStack() as stack:
        mp = stack.enter_context(_monkeypatch())
        hits = set()
        for mod in _privci_modules():
            for name, val in list(vars(mod).items()):
                if id(val) in spies and val in _ORIGINALS:
                    mp.setattr(mod, name, spies[id(val)])
                    hits.add(id(val))
        assert hits == set(spies), "a noise mechanism is no longer found in privci"
        yield log


def _monkeypatch():
    import pytest
    return pytest.MonkeyPatch.context()


def release_changes(call, pair):
    """Run ``call`` on both neighbours of ``pair`` (the second with the first's release
    outputs) and compare what each noise mechanism was handed.

    Returns (changes, problems, log): changes[i] = (release i on the first neighbour, its
    change in units of the stated sensitivity); problems: differences an observer could use
    (another number of releases, public parameters that depend on the data, a call that
    fails on one side only); log: the first neighbour's :class:`ReleaseLog`.
    """
    problems = []
    logs = []
    for d, ref in ((pair.a, None), (pair.b, "a")):
        with warnings.catch_warnings(), np.errstate(all="ignore"), \
                released(logs[0] if ref else None) as log:
            warnings.simplefilter("ignore")
            try:
                call(d)
            except Exception as exc:  # noqa: BLE001 - reported as a problem
                problems.append(f"{'second' if ref else 'first'} neighbour raised with the "
                                f"releases fixed: {type(exc).__name__}: {exc}")
        logs.append(log)
    a, b = logs
    problems += b.errors
    if len(a.calls) != len(b.calls):
        problems.append(f"{len(a.calls)} releases on the first neighbour, {len(b.calls)} on "
                        "the second")
    changes = []
    for ra, rb in zip(a.calls, b.calls):
        if (ra.kind, ra.sensitivity, ra.public) != (rb.kind, rb.sensitivity, rb.public):
            problems.append(f"public parameters of a release depend on the data: {ra} / {rb}")
            continue
        changes.append((ra, ra.change(rb)))
    return changes, problems, a


def rerun(call, d, reference, overrides):
    """``call(d)`` with every release returning ``reference``'s output, or ``overrides[i]``
    for release i: the result, or the exception raised."""
    with warnings.catch_warnings(), np.errstate(all="ignore"), \
            released(reference, overrides):
        warnings.simplefilter("ignore")
        try:
            return call(d)
        except Exception as exc:  # noqa: BLE001 - the caller reports it
            return exc
