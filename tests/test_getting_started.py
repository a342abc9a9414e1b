"""docs/getting_started.rst: its Python examples run, and its text says what the code does
(issue 37: "examples in the README and the docs run in the suite and assert what the
text claims")."""

import os
import re
import warnings

import privci

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PAGE = os.path.join(ROOT, "docs", "getting_started.rst")


def _text():
    with open(PAGE, encoding="utf-8") as fh:
        return fh.read()


def _python_blocks(text):
    """The ``.. code-block:: python`` bodies, dedented, in page order."""
    blocks = []
    for m in re.finditer(r"\.\. code-block:: python\n\n((?:[ \t]+.*\n|\n)+)", text):
        lines = m.group(1).rstrip().splitlines()
        indent = min(len(line) - len(line.lstrip()) for line in lines if line.strip())
        blocks.append("\n".join(line[indent:] for line in lines))
    return blocks


def _flat(text):
    return re.sub(r"\s+", " ", text)


def test_python_examples_run_and_privcrt_floor_is_as_stated():
    text = _text()
    blocks = _python_blocks(text)
    assert len(blocks) >= 2
    ns = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for block in blocks:
            if "pd.DataFrame" in block:
                try:
                    import pandas  # noqa: F401
                except ImportError:
                    continue
            exec(compile(block, PAGE, "exec"), ns)           # noqa: S102 - our own docs
    res = ns["res"]
    # the text: "never below res.min_pvalue = 1 / (m + 1), which is exactly 0.05 with the
    # default m = 19", "rejects at level alpha when res.pvalue <= alpha"
    crt = privci.privcrt(ns["x"], ns["y"], ns["z"], epsilon=2.0, model_x=ns["mx"], y_bound=5,
                         x_residual_bound=4, rng=0)
    assert crt.n_resamples == 19 and crt.min_pvalue == 0.05 and crt.pvalue >= 0.05
    assert "smallest attainable with 19 resamples is 1/20 = 0.05" in repr(crt)
    flat = _flat(text)
    assert "exactly 0.05 with the default m = 19" in flat
    assert "rejects at level alpha when ``res.pvalue <= alpha``" in flat
    assert res is not None


def test_resample_numbers_in_the_text_are_the_docstring_table():
    """The page quotes four rejection rates from privcrt's table (epsilon 2, effect 0.2)."""
    flat = _flat(_text())
    quoted = re.search(r"was ([0-9.]+) with m = 19, ([0-9.]+) with 39, ([0-9.]+) with 99 and "
                       r"([0-9.]+) with 199", flat)
    assert quoted
    row = next(line for line in privci.privcrt.__doc__.splitlines()
               if line.strip().startswith("0.2") and line.split()[1] == "2")
    table = [float(v) for v in re.findall(r"(\d\.\d+) \[", row)]
    assert table == [float(v) for v in quoted.groups()]
    # and m = 19 has the most power in every alternative row of the table
    for line in privci.privcrt.__doc__.splitlines():
        cells = line.split()
        if len(cells) > 3 and cells[0] in ("0.2", "0.4"):
            rates = [float(v) for v in re.findall(r"(\d\.\d+) \[", line)]
            assert rates[0] == max(rates), line


def test_cold_start_paragraph_names_a_working_command():
    flat = _flat(_text())
    assert "python -m privci warm" in flat
    from privci import cli
    import contextlib
    import io
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        try:
            cli.main(["warm", "--help"])
        except SystemExit as exc:
            assert exc.code == 0
    assert "compile and cache the numba kernels" in buf.getvalue().lower()
    # "The R package's install_privci() runs it"
    with open(os.path.join(ROOT, "r-wrapper", "R", "install.R"), encoding="utf-8") as fh:
        assert 'c("-m", "privci", "warm")' in fh.read()
