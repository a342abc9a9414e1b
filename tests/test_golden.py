"""Golden values: about 50 seeded calls give exactly the stored numbers, texts and draw order.

The safety net of the refactor (issue 22): every case of ``tools/golden.py`` is run with a
fresh ``np.random.default_rng(seed)`` and its flattened record (``float.hex`` of every
float of the result and its privacy record, the method, mechanism, guarantee and caveats,
the printed result, the budget's ledger, the warnings, and the generator's final
``bit_generator.state``) must equal ``tests/golden/golden.json``.

A failure lists what changed.  When the change is deliberate, regenerate the file with
``python tools/golden.py --update`` and commit it with the change (see tools/README.md).
"""

import importlib.util
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_spec = importlib.util.spec_from_file_location("privci_golden",
                                               os.path.join(ROOT, "tools", "golden.py"))
golden = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(golden)

STORED = golden.load()
EXACT = STORED["fingerprint"] == golden.fingerprint()
HINT = ("\nIf this change is deliberate, regenerate the golden file with\n"
        "    python tools/golden.py --update\n"
        "and commit tests/golden/golden.json with the change (tools/README.md).")


def _check(name, call):
    got = golden.run_case(call, golden.seed_of(name))
    want = STORED["cases"].get(name)
    assert want is not None, f"case {name!r} is not in tests/golden/golden.json.{HINT}"
    lines = golden.case_differences(name, want, got, exact=EXACT)
    assert not lines, ("the result differs from the golden file"
                       + ("" if EXACT else " (another floating-point environment: floats "
                          f"compared to a relative {golden.REL_TOL:g})")
                       + ":\n" + "\n".join(lines[:80]) + HINT)


def test_cases_are_unique_and_all_stored():
    names = [n for n, _ in golden.CASES + golden.DASK_CASES]
    assert len(names) == len(set(names))
    assert len(golden.CASES) >= 40
    assert set(n for n, _ in golden.CASES) <= set(STORED["cases"]), HINT


@pytest.mark.parametrize("name,call", golden.CASES, ids=[n for n, _ in golden.CASES])
def test_golden(name, call):
    _check(name, call)


@pytest.fixture(scope="module")
def dask_client():
    if not golden.have_dask():
        pytest.skip("dask / distributed are not installed")
    with golden.dask_client() as client:
        yield client


@pytest.mark.parametrize("name,call", golden.DASK_CASES, ids=[n for n, _ in golden.DASK_CASES])
def test_golden_dask(dask_client, name, call):
    _check(name, call)
