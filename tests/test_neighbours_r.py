"""Neighbour consistency of the R functions (issue 12), driven through rpy2.

The R package calls the Python functions through reticulate, turns Python
warnings into R warnings and Python exceptions into R errors, and evaluates
an R mean function of ``gaussian_model_x`` in R.  Each of these is a channel
through which a release could tell neighbouring data sets apart, so a handful
of the issue's neighbouring pairs (one row replaced by an extreme finite
value) are run through ``privci::privgcm`` and ``privci::privcrt`` in R, for
both kernels and both noise paths (``seed = NULL``: OpenDP; a seed: numpy).
Both calls must return a finite statistic and p-value or raise the same R
error class with the same message, and give the same R warnings.  The search
over many pairs is in tests/test_neighbours.py; this module checks that the R
layer adds no channel of its own.

R is driven with the GIL-safe bridge of tests/test_r_wrapper.py (see its
docstring: reticulate 1.28 under rpy2 must be evaluated with the GIL held).
"""

import json
import shutil
import subprocess

import numpy as np
import pytest

import neighbours_util as nu

pytestmark = pytest.mark.r

rpy2 = pytest.importorskip(
    "rpy2", reason="rpy2 is not installed in this interpreter (use the numpy<2 environment "
                   "with rpy2<3.6; see .ci/run)")

from test_r_wrapper import R_WRAPPER, RBridge  # noqa: E402  (after the rpy2 skip)

# Runs f() in R and returns what an observer sees: result or error, and every warning.
_OUTCOME = r"""
assign(".nb_outcome", function(f) {
  warns <- character(0)
  res <- withCallingHandlers(
    tryCatch(f(), error = function(e) e),
    warning = function(w) {
      warns <<- c(warns, paste0(class(w)[1], ": ", conditionMessage(w)))
      invokeRestart("muffleWarning")
    })
  w <- paste(warns, collapse = "\n")
  if (inherits(res, "error")) {
    return(c(kind = "error", a = class(res)[1], b = conditionMessage(res), warnings = w))
  }
  c(kind = "ok", a = format(unname(res$statistic), digits = 17),
    b = format(res$p.value, digits = 17), warnings = w)
}, envir = globalenv())
NULL
"""


@pytest.fixture(scope="module")
def r(tmp_path_factory):
    if shutil.which("R") is None:
        pytest.skip("R is not installed")
    lib = str(tmp_path_factory.mktemp("rlib"))
    proc = subprocess.run(["R", "CMD", "INSTALL", "--no-test-load", "-l", lib, R_WRAPPER],
                          capture_output=True, text=True)
    assert proc.returncode == 0, f"R CMD INSTALL r-wrapper failed:\n{proc.stdout}\n{proc.stderr}"
    bridge = RBridge()
    bridge.eval(f"library(privci, lib.loc = {json.dumps(lib)}); NULL")
    assert bridge.numbers("c(ok = privci_available())")["ok"] == 1.0
    bridge.eval(_OUTCOME)
    yield bridge
    bridge.eval("NULL")  # a last collection with the GIL held
    print("\n" + "\n".join(nu.summary_lines()))


def _outcome(r, call):
    out = r.eval(f".nb_outcome(function() {call})")
    d = dict(zip(tuple(out.names), tuple(out)))
    warns = tuple(("R warning", w) for w in d["warnings"].split("\n") if w)
    if d["kind"] == "error":
        return nu.Outcome("error", (d["a"], d["b"]), warns)
    return nu.Outcome("ok", (float(d["a"]), float(d["b"])), warns)


def _issue_data(n=200, seed=0):
    rng = np.random.default_rng(seed)
    return rng.normal(size=n), rng.normal(size=n), rng.normal(size=(n, 1))


def _put_pair(r, x_, y_, z_, i, **new):
    """Bind xa, ya, za and xb, yb, zb (row i of the named blocks replaced) in R."""
    a = {"x": x_, "y": y_, "z": z_}
    b = {k: v.copy() for k, v in a.items()}
    for k, v in new.items():
        b[k][i] = v
    for k in a:
        r.assign(f"{k}a", a[k])
        r.assign(f"{k}b", b[k])
    return ", ".join(f"{k}_{i} = {v!r}" for k, v in new.items())


def _compare(r, entry, template, note):
    """Run ``template`` (with {s} for the data suffix) on both neighbours in R."""
    a = _outcome(r, template.format(s="a"))
    b = _outcome(r, template.format(s="b"))
    nu.count_pair(entry)
    nu.assert_indistinguishable(a, b, f"R: {note}: {template}")


SEEDS = {"hardened": "NULL", "seeded": "7"}
KERNEL_ARGS = {"exact": "", "rff": ", kernel_approximation = 'rff', n_features = 64L"}


CASES = [  # (label, rows replaced in row 0)
    ("z_0 = 1e308", {"z": 1e308}),
    ("z_0 = -1.8e308", {"z": -1.7976931348623157e308}),
    ("x_0 = -1e308, y_0 = 5e-324, z_0 = -0.0", {"x": -1e308, "y": 5e-324, "z": -0.0}),
    ("x_0 = y_0 = 1e308 (far away)", {"x": 1e308, "y": 1e308, "z": 1e308}),
]


@pytest.mark.parametrize("noise", SEEDS)
@pytest.mark.parametrize("kernel", KERNEL_ARGS)
@pytest.mark.parametrize("label,new", CASES, ids=[c[0] for c in CASES])
def test_r_privgcm_and_privcrt_neighbours(r, label, new, kernel, noise):
    x, y, z = _issue_data()
    note = _put_pair(r, x, y, z, 0, **new)
    seed, kern = SEEDS[noise], KERNEL_ARGS[kernel]
    feat = ", feature_seed = 5" if kernel == "rff" and noise == "seeded" else ""
    _compare(r, f"R privgcm[{kernel}, {noise}]",
             "privci::privgcm(x{s}, y{s}, z{s}, epsilon = 1, x_bound = 4, y_bound = 4, "
             f"seed = {seed}{kern}{feat})", f"{label} ({note})")
    _compare(r, f"R privcrt[{kernel}, {noise}]",
             "privci::privcrt(x{s}, y{s}, z{s}, epsilon = 1, model_x = "
             "privci::gaussian_model_x(function(z) sin(z[, 1]), 1), y_bound = 4, "
             f"x_residual_bound = 4, n_resamples = 9L, seed = {seed}{kern}{feat})",
             f"{label} ({note})")


@pytest.mark.parametrize("noise", SEEDS)
def test_r_model_x_mean_function_overflow(r, noise):
    """Finding 3 in R: gaussian_model_x(function(z) exp(z)) is evaluated in R, where
    exp(800) is Inf; the release must not tell z_0 = 800 from z_0 = 5."""
    x, y, z = _issue_data()
    z[0, 0] = 5.0
    note = _put_pair(r, x, y, z, 0, z=800.0)
    _compare(r, f"R privcrt[exact, {noise}]",
             "privci::privcrt(x{s}, y{s}, z{s}, epsilon = 1, model_x = "
             "privci::gaussian_model_x(function(z) exp(z[, 1]), 1), y_bound = 4, "
             f"x_residual_bound = 4, n_resamples = 9L, seed = {SEEDS[noise]})", note)


@pytest.mark.parametrize("noise", SEEDS)
def test_r_minimum_n_all_rows_equal(r, noise):
    """n = 2, every row equal, one row replaced by the largest finite double."""
    base = np.zeros(2)
    note = _put_pair(r, base.copy(), base.copy(), np.zeros((2, 1)), 0,
                     x=1.7976931348623157e308, y=-1e308, z=1e308)
    for kernel, kern in KERNEL_ARGS.items():
        _compare(r, f"R privgcm[{kernel}, {noise}]",
                 "privci::privgcm(x{s}, y{s}, z{s}, epsilon = 1, x_bound = 1, y_bound = 1, "
                 f"seed = {SEEDS[noise]}{kern})", note)
