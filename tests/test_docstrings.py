"""Every example in the public docstrings runs and gives what it shows."""

import doctest
import importlib
import pkgutil

import pytest

import privci

MODULES = sorted(m.name for m in pkgutil.iter_modules(privci.__path__, "privci.")
                 if not m.name.startswith("privci._"))


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    try:
        mod = importlib.import_module(name)
    except ImportError as exc:  # optional dependency of an optional module
        pytest.skip(f"{name}: {exc}")
    result = doctest.testmod(mod, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0, f"{result.failed} docstring example(s) failed in {name}"


def test_public_functions_have_examples():
    for name in ["gcm", "gcm_from_residuals", "residual_products", "privgcm", "crt_statistics",
                 "privcrt", "crt", "GaussianModelX"]:
        doc = getattr(privci, name).__doc__
        assert "Examples" in doc and ">>>" in doc, name
