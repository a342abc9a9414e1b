"""The API functions stay compositions of the layers (issue 22): privgcm, privcrt and gcm
at most about 60 lines of code each (docstring excluded), and the Dask module holds no
test of its own: its entry points use the shared parameter, plan and result functions."""

import ast
import os
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, os.path.join(ROOT, "tools"))

import api_lines  # noqa: E402


def test_api_functions_are_short_compositions():
    lines = api_lines.code_lines()
    for name in ("gcm.py:privgcm", "gcm.py:gcm", "crt.py:privcrt"):
        assert lines[name] <= 60, (name, lines[name])
    # the Dask entry points: parameters, checks, the source's passes and the shared result
    for name in ("_dask.py:privgcm", "_dask.py:gcm", "_dask.py:privcrt"):
        assert lines[name] <= 80, (name, lines[name])


def _calls(fname, func):
    tree = ast.parse(open(os.path.join(ROOT, "python", "privci", fname), encoding="utf-8").read())
    fn = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == func)
    return {n.func.attr if isinstance(n.func, ast.Attribute) else getattr(n.func, "id", None)
            for n in ast.walk(fn) if isinstance(n, ast.Call)}


def test_dask_entry_points_use_the_shared_layers():
    """No copy of a test in _dask: the same parameter, plan and result builders as memory,
    and no record or guarantee text of its own."""
    assert {"gcm_params", "gcm_plan", "gcm_result", "spline_mechanism",
            "release_centres"} <= _calls("_dask.py", "privgcm")
    assert {"crt_params", "crt_plan", "crt_result"} <= _calls("_dask.py", "privcrt")
    assert "GCMOptions" in _calls("_dask.py", "gcm")
    src = open(os.path.join(ROOT, "python", "privci", "_dask.py"), encoding="utf-8").read()
    for marker in ("PrivacyRecord(", "guarantee_text(", "remaining(", "_charge("):
        assert marker not in src, marker
