"""The command line: demo table and the CSV subcommands."""

import io

import numpy as np
import pytest

import privci
from privci import cli


def _p(cell):
    """The p-value of a demo row's cell: '0.03', '1 (fail-safe)', or None for 'refused'."""
    return None if cell == "refused" else float(cell.split()[0])


def test_demo_prints_all_tests():
    out = io.StringIO()
    rows = cli.demo(seed=3, out=out)
    text = out.getvalue()
    for name in ["GCM", "PrivGCM", "CRT", "PrivCRT", "diabetes", "simulation"]:
        assert name in text
    assert len(rows) == 14
    pvals = [_p(r[4]) for r in rows]
    assert all(p is None or 0 <= p <= 1 for p in pvals)
    # only PrivGCM may refuse (an unresolvable design: nothing spent), and it says so
    assert all(r[0] == "PrivGCM" and "nothing spent" in r[-1]
               for r, p in zip(rows, pvals) if p is None)
    # the non-private GCM detects bmi -> progression in the clinical data
    assert pvals[0] < 1e-6
    # a fail-safe p = 1 says so in its p-value cell (issue 37, item 6), and only there
    safe = [r for r in rows if "fail-safe" in r[-1]]
    assert all(r[4] == "1 (fail-safe)" for r in safe)
    assert all("fail-safe" not in r[4] for r in rows if r not in safe)
    # PrivCRT's floor: 1/20 with the default m = 19 (issue 37, item 5)
    assert "PrivCRT with m = 19 resamples: its p-value is (1 + rank) / 20, never below " \
           "1/20 = 0.05, so it rejects at level alpha when p <= alpha." in text
    assert all(float(r[4]) >= 0.05 for r in rows if r[0] == "PrivCRT")
    # the simulation's alternative is found (eps = 7, n = 1000): its power is about 0.95
    # since the residuals are no longer clipped (stop 32; 1.00 before), so this seed's run
    # and two more are asked for at least two rejections of three (false failure ~0.007)
    sim = [r for r in rows if r[0] == "PrivGCM" and "alternative" in r[1]]
    assert len(sim) == 1
    found = [_p(sim[0][4]) <= 0.05]
    for seed in (4, 5):
        more = cli.demo(seed=seed, out=io.StringIO())
        found += [_p(r[4]) <= 0.05 for r in more
                  if r[0] == "PrivGCM" and "alternative" in r[1]]
    assert sum(found) >= 2, found


def _write_csv(path, n):
    rng = np.random.default_rng(0)
    z1, z2 = rng.normal(size=n), rng.normal(size=n)
    x = 0.5 + 1.2 * z1 - 0.3 * z2 + rng.normal(size=n)
    y = z1 + 2 * (x - (0.5 + 1.2 * z1 - 0.3 * z2)) + rng.normal(size=n)
    mu = 0.5 + 1.2 * z1 - 0.3 * z2
    with open(path, "w") as fh:
        fh.write("x,y,z1,z2,mu\n")
        for row in zip(x, y, z1, z2, mu):
            fh.write(",".join(repr(float(v)) for v in row) + "\n")
    return str(path)


@pytest.fixture
def csv_file(tmp_path):
    """300 rows, two columns of z (the KRR, PrivCRT and GCM subcommands)."""
    return _write_csv(tmp_path / "d.csv", 300)


@pytest.fixture
def csv_file_2000(tmp_path):
    """The same model at n = 2000: the released spline fit (PrivGCM's default) refuses two
    columns of z at n = 300 whatever epsilon a test would use, and at n = 2000 answers
    with assume='linear' from epsilon 0.44 (privci._spline.smallest_epsilon(2000, 2,
    'linear')); the full fit would need 4.6."""
    return _write_csv(tmp_path / "d.csv", 2000)


def test_privgcm_subcommand(csv_file, capsys):
    code = cli.main(["privgcm", csv_file, "--x", "x", "--y", "y", "--z", "z1", "z2",
                     "--epsilon", "2", "--x-bound", "5", "--y-bound", "8", "--seed", "1", "--regression", "krr"])
    out = capsys.readouterr().out
    assert code == 0 and "PrivateTestResult" in out and "epsilon=2" in out and "NOT hardened" in out


def test_privgcm_subcommand_centres(csv_file, capsys):
    common = ["privgcm", csv_file, "--x", "x", "--y", "y", "--z", "z1", "z2", "--epsilon", "2",
              "--x-bound", "5", "--y-bound", "8", "--seed", "1", "--regression", "krr"]
    assert cli.main(common + ["--x-center", "0.5", "--y-center", "-0.2"]) == 0
    out = capsys.readouterr().out
    d = np.genfromtxt(csv_file, delimiter=",", names=True)
    ref = privci.privgcm(d["x"], d["y"], np.column_stack([d["z1"], d["z2"]]), epsilon=2,
                         x_bound=5, y_bound=8, x_center=0.5, y_center=-0.2, rng=1, regression="krr")
    uncentred = privci.privgcm(d["x"], d["y"], np.column_stack([d["z1"], d["z2"]]), epsilon=2,
                               x_bound=5, y_bound=8, rng=1, regression="krr")
    assert f"statistic={ref.statistic:g}(" in out.replace(" ", "")
    assert f"statistic={uncentred.statistic:g}(" not in out.replace(" ", "")
    assert cli.main(common + ["--center-epsilon", "0.2"]) == 0
    out = capsys.readouterr().out
    assert "0.2 for the released centres, 1.8 for the residual products" in out
    assert cli.main(common + ["--center-epsilon", "3"]) == 2
    assert "`center_epsilon` must be smaller than `epsilon`" in capsys.readouterr().err


def test_privcrt_subcommand_formula_and_column_agree(csv_file, capsys):
    common = ["privcrt", csv_file, "--x", "x", "--y", "y", "--z", "z1", "z2", "--epsilon", "2",
              "--y-bound", "8", "--x-residual-bound", "4", "--x-scale", "1", "--seed", "5"]
    assert cli.main(common + ["--x-mean-formula", "0.5 + 1.2*z1 - 0.3*z2"]) == 0
    a = capsys.readouterr().out
    assert cli.main(common + ["--x-mean-column", "mu"]) == 0
    b = capsys.readouterr().out
    assert a == b and "PrivCRT" in a


def test_gcm_subcommand(csv_file, capsys):
    assert cli.main(["gcm", csv_file, "--x", "x", "--y", "y", "--z", "z1", "z2"]) == 0
    assert "GCMResult" in capsys.readouterr().out
    assert cli.main(["gcm", csv_file, "--x", "x", "--y", "y", "--z", "z1", "z2",
                     "--ridge-lambda", "0.01", "--center"]) == 0
    assert "GCMResult" in capsys.readouterr().out


def test_errors_are_reported(csv_file, capsys):
    code = cli.main(["privgcm", csv_file, "--x", "x", "--y", "y", "--z", "z1",
                     "--epsilon", "-1", "--x-bound", "5", "--y-bound", "8"])
    assert code == 2 and "`epsilon` must be a positive finite number" in capsys.readouterr().err
    assert cli.main(["gcm", csv_file, "--x", "nope", "--y", "y", "--z", "z1"]) == 2
    assert "not found" in capsys.readouterr().err


@pytest.mark.parametrize("formula,err", [("0.5 + 2*w", "'w'"), ("0.5 ++", "could not be parsed"),
                                         ("", "empty")])
def test_formula_errors(formula, err):
    with pytest.raises(ValueError, match=err):
        cli.parse_linear_formula(formula, ["z1"])


# --------------------------------------------------------------------------- issue 21

MAX = np.finfo(np.float64).max


def _run(argv):
    """(exit code, stdout, stderr) of ``privci argv``; argparse's SystemExit counts too."""
    import contextlib
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = cli.main(argv)
        except SystemExit as exc:
            code = exc.code
    return code, out.getvalue(), err.getvalue()


def _cells_csv(path, cells, rows, n=40):
    """A CSV of n rows (x, y, z1, z2); column y holds ``cells[k]`` at row ``rows[k]``."""
    rng = np.random.default_rng(5)
    data = rng.normal(size=(n, 4)).round(4).astype(object)
    for r, c in zip(rows, cells):
        data[r, 1] = c
    with open(path, "w") as fh:
        fh.write("x,y,z1,z2\n")
        for row in data:
            fh.write(",".join(str(v) for v in row) + "\n")
    return str(path)


@pytest.mark.parametrize("sign", ["", "-"])
@pytest.mark.parametrize("rows", [[2], [7], [2, 7, 11]])
@pytest.mark.parametrize("regression", ["spline", "krr"])
def test_cli_clamps_decimals_beyond_the_float_range(tmp_path, sign, rows, regression):
    """Issue 21, finding 6: a cell 1e400 was read as inf and the command exited with "column
    'y' has a missing (NaN) or infinite value": one row of otherwise valid data decided
    whether it failed.  It is now read as the largest float, like the cell written as
    1.7976931348623157e308 (same output, no warning, exit 0).

    The spline fit (the default) refuses two columns of z at 40 rows whatever the data, so
    its files have 2000 rows and the stated linear model (resolvable there from epsilon
    0.44); the KRR files keep 40 rows."""
    import warnings
    args = ["--x", "x", "--y", "y", "--z", "z1", "z2", "--epsilon", "1", "--x-bound", "3",
            "--y-bound", "3", "--seed", "4", "--regression", regression, "--z-center", "0",
            "--z-scale", "1"]
    n = 40
    if regression == "spline":
        args, n = args + ["--assume", "linear"], 2000
    huge = _cells_csv(tmp_path / "huge.csv", [sign + "1e400"] * len(rows), rows, n)
    top = _cells_csv(tmp_path / "top.csv", [repr(float(sign + "1") * float(MAX))] * len(rows),
                     rows, n)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        a = _run(["privgcm", huge] + args)
        b = _run(["privgcm", top] + args)
    assert a[0] == 0 and a[2] == "", a
    assert a[1] == b[1]


def test_parse_cell_clamps_only_overflowing_decimals():
    assert cli.parse_cell("1e400") == MAX and cli.parse_cell("-1E+999") == -MAX
    assert cli.parse_cell("  2.5e308 ") == MAX and cli.parse_cell("1e-400") == 0.0
    assert cli.parse_cell("0.5") == 0.5
    for text in ("inf", "-Infinity", "nan"):
        assert not np.isfinite(cli.parse_cell(text))
    with pytest.raises(ValueError):
        cli.parse_cell("1e400x")


def test_cli_still_refuses_inf_and_nan_cells(tmp_path):
    for cell in ("inf", "nan"):
        path = _cells_csv(tmp_path / "bad.csv", [cell], [3])
        code, _, err = _run(["privgcm", path, "--x", "x", "--y", "y", "--z", "z1",
                             "--epsilon", "1", "--x-bound", "3", "--y-bound", "3"])
        assert code == 2 and "column 'y'" in err and "infinite" in err


@pytest.mark.parametrize("command", ["privgcm", "privcrt", "gcm"])
def test_cli_help_documents_the_clamping_and_the_file_placement(command, capsys):
    with pytest.raises(SystemExit):
        cli.main([command, "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "1e400" in text and "largest float" in text and "--data FILE" in text


def test_cli_auto_parameters_equal_the_python_api(csv_file_2000):
    """'auto' for --x-bound, --y-bound, --x-center, --y-center, --z-center and --z-scale, as the
    Python API accepts (was: "invalid float value: 'auto'").  Two columns of z at n = 2000
    with the stated linear model (test epsilon 1.6 and 1.8 here, resolvable from 0.44)."""
    csv_file = csv_file_2000
    d = np.genfromtxt(csv_file, delimiter=",", names=True)
    z = np.column_stack([d["z1"], d["z2"]])
    code, out, err = _run(["privgcm", csv_file, "--x", "x", "--y", "y", "--z", "z1", "z2",
                           "--epsilon", "2", "--x-bound", "auto", "--y-bound", "AUTO",
                           "--x-center", "auto", "--y-center", "auto", "--z-center", "auto",
                           "--z-scale", "auto", "--bounds-epsilon", "0.4", "--seed", "3",
                           "--assume", "linear"])
    assert code == 0, err
    ref = privci.privgcm(d["x"], d["y"], z, epsilon=2, x_bound="auto", y_bound="auto",
                         x_center="auto", y_center="auto", z_center="auto", z_scale="auto",
                         bounds_epsilon=0.4, rng=3, assume="linear")
    assert repr(ref) == out.strip()
    # one value per column, and public numbers, still work
    code, out, err = _run(["privgcm", csv_file, "--x", "x", "--y", "y", "--z", "z1", "z2",
                           "--epsilon", "2", "--x-bound", "5", "--y-bound", "auto",
                           "--z-center", "0", "0.1", "--z-scale", "1", "2", "--seed", "3",
                           "--assume", "linear"])
    assert code == 0, err
    ref = privci.privgcm(d["x"], d["y"], z, epsilon=2, x_bound=5, y_bound="auto",
                         z_center=[0, 0.1], z_scale=[1, 2], rng=3, assume="linear")
    assert repr(ref) == out.strip()


def test_cli_privcrt_auto_parameters_equal_the_python_api(csv_file):
    d = np.genfromtxt(csv_file, delimiter=",", names=True)
    z = np.column_stack([d["z1"], d["z2"]])
    code, out, err = _run(["privcrt", csv_file, "--x", "x", "--y", "y", "--z", "z1", "z2",
                           "--epsilon", "2", "--y-bound", "auto", "--x-residual-bound", "auto",
                           "--y-center", "auto", "--x-scale", "1", "--x-mean-column", "mu",
                           "--seed", "5"])
    assert code == 0, err
    ref = privci.privcrt(d["x"], d["y"], z, epsilon=2, y_bound="auto",
                         x_residual_bound="auto", y_center="auto",
                         model_x=privci.GaussianModelX(d["mu"], 1.0), rng=5)
    assert repr(ref) == out.strip()


@pytest.mark.parametrize("bad,match", [
    (["--x-bound", "wide"], "--x-bound: must be a number or 'auto'"),
    (["--z-center", "auto", "3"], "`--z-center` takes numbers"),
    (["--z-scale", "one"], "`--z-scale` takes numbers"),
])
def test_cli_auto_bad_values_are_named(csv_file, bad, match):
    args = {"--x-bound": "5", "--y-bound": "8"}
    if bad[0] in args:
        args[bad[0]] = bad[1]
        bad = []
    argv = ["privgcm", csv_file, "--x", "x", "--y", "y", "--z", "z1", "z2", "--epsilon", "2",
            "--seed", "1"] + [t for kv in args.items() for t in kv] + bad
    code, _, err = _run(argv)
    assert code == 2 and match in err, err


def _orders(path):
    """The orders a user types: the file first, last (after options that take several
    values), in the middle, right after --z, and as --data.  Two columns of z with the
    stated linear model (the spline fit's full model refuses them at n = 2000, epsilon 1)."""
    x = ["--x", "x", "--y", "y"]
    z = ["--z", "z1", "z2"]
    rest = ["--epsilon", "1", "--x-bound", "5", "--y-bound", "8", "--seed", "2", "--assume",
            "linear"]
    zc = ["--z-center", "0", "0.1"]
    return {
        "file first": ["privgcm", path] + x + z + rest + zc,
        "file last, after --z-center": ["privgcm"] + x + z + rest + zc + [path],
        "file last, after --z": ["privgcm"] + x + rest + zc + z + [path],
        "file last, after --z-scale auto": ["privgcm"] + x + z + rest + zc +
                                           ["--z-scale", "auto", path],
        "file right after --z": ["privgcm"] + x + z + [path] + rest + zc,
        "file in the middle": ["privgcm", "--x", "x", path, "--y", "y"] + z + rest + zc,
        "--data first": ["privgcm", "--data", path] + x + z + rest + zc,
        "--data last": ["privgcm"] + x + z + rest + zc + ["--data", path],
        "both, the same file": ["privgcm", path] + x + z + rest + zc + ["--data", path],
    }


@pytest.mark.parametrize("order", list(_orders("data.csv")))
def test_cli_data_file_in_every_order_a_user_types(csv_file_2000, order):
    """Issue 21: `privci privgcm --x cement --y strength --z water age --z-center 180 45
    data.csv` failed: --z-center took data.csv as one of its values."""
    csv_file = csv_file_2000
    ref = _run(_orders(csv_file)["file first"])
    assert ref[0] == 0, ref
    got = _run(_orders(csv_file)[order])
    assert got == ref


def test_cli_data_file_relative_path_last(csv_file_2000, monkeypatch):
    """The issue's command line as typed in the file's directory (a relative path); two
    columns of z at n = 2000 with the stated linear model (see csv_file_2000)."""
    import os
    csv_file = csv_file_2000
    monkeypatch.chdir(os.path.dirname(csv_file))
    name = os.path.basename(csv_file)
    code, out, err = _run(["privgcm", "--x", "x", "--y", "y", "--z", "z1", "z2", "--epsilon",
                           "1", "--x-bound", "5", "--y-bound", "8", "--assume", "linear",
                           "--z-center", "0", "0", name])
    assert code == 0 and "PrivateTestResult" in out, err
    for command in (["gcm"], ["privcrt", "--x-residual-bound", "4", "--x-scale", "1",
                              "--x-mean-column", "mu", "--epsilon", "1", "--y-bound", "8"]):
        code, out, err = _run(command + ["--x", "x", "--y", "y", "--z", "z1", "z2", name])
        assert code == 0, err


def test_cli_data_file_errors(csv_file, tmp_path):
    base = ["--x", "x", "--y", "y", "--z", "z1", "z2", "--epsilon", "1", "--x-bound", "5",
            "--y-bound", "8"]
    code, _, err = _run(["privgcm"] + base)
    assert code == 2 and "no data file" in err and "--data FILE" in err
    other = str(tmp_path / "other.csv")
    code, _, err = _run(["privgcm", csv_file] + base + ["--data", other])
    assert code == 2 and "two data files" in err
    code, _, err = _run(["privgcm"] + base + [str(tmp_path / "missing.csv")])
    assert code == 2 and "could not open the data file" in err


def test_cli_assume_additive_reaches_privgcm(tmp_path, capsys):
    """--assume-additive (and --assume additive) is the Python keyword: two columns of z at
    n = 3000 and epsilon 2 are refused without it (the full fit needs epsilon 3.1 there:
    exit 2, nothing spent, the additive model named as resolvable) and answer with it, the
    released fit stated as additive; both spellings give the same result, and the Python
    call with assume="additive" the same too."""
    import numpy as np
    from privci.cli import main
    rng = np.random.default_rng(3)
    n = 3000
    z1, z2 = rng.normal(size=n), rng.normal(size=n)
    x = np.sin(z1) + rng.normal(size=n)
    y = z2 + x + rng.normal(size=n)
    path = tmp_path / "d.csv"
    np.savetxt(path, np.column_stack([x, y, z1, z2]), delimiter=",", header="x,y,z1,z2",
               comments="")
    common = ["privgcm", str(path), "--x", "x", "--y", "y", "--z", "z1", "z2", "--epsilon",
              "2", "--x-bound", "4", "--y-bound", "6", "--z-center", "0", "0", "--z-scale",
              "1", "1", "--seed", "1"]
    assert main(common) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "the full fit (no assumption) cannot be resolved" in captured.err
    assert "nothing was charged" in captured.err and "Resolvable here: assume='additive'" \
        in captured.err
    assert main(common + ["--assume-additive"]) == 0
    additive = capsys.readouterr().out
    assert main(common + ["--assume", "additive"]) == 0
    assert capsys.readouterr().out == additive
    assert "PrivateTestResult" in additive and "p-value is set to 1" not in additive
    assert "assume='additive'" in additive and "additive in the 2 columns of z" in additive
    d = np.genfromtxt(path, delimiter=",", names=True)
    ref = privci.privgcm(d["x"], d["y"], np.column_stack([d["z1"], d["z2"]]), epsilon=2,
                         x_bound=4, y_bound=6, z_center=[0, 0], z_scale=[1, 1], rng=1,
                         assume="additive")
    assert repr(ref) == additive.strip()
    # and --assume linear reaches it too: another stated model, another fit
    assert main(common + ["--assume", "linear"]) == 0
    linear = capsys.readouterr().out
    assert "assume='linear'" in linear and linear != additive


def test_warm_subcommand_runs_every_step_and_reports_failures(monkeypatch, capsys):
    """``privci warm`` runs the warm-up steps, prints one line per step and exits 1 when
    one failed (the steps themselves are tested in test_cold_start.py)."""
    from privci import _warm
    ran = []
    monkeypatch.setattr(_warm, "STEPS", (("first", lambda: ran.append(1)),
                                         ("second", lambda: ran.append(2))))
    assert cli.main(["warm"]) == 0 and ran == [1, 2]
    out = capsys.readouterr().out
    assert "first" in out and "second" in out and "the kernels are cached" in out

    def broken():
        raise RuntimeError("no compiler")
    monkeypatch.setattr(_warm, "STEPS", (("broken", broken), ("after", lambda: ran.append(3))))
    assert cli.main(["warm"]) == 1 and ran[-1] == 3
    assert "FAILED broken: RuntimeError: no compiler" in capsys.readouterr().out


def test_privacy_cell_names_the_fail_safe_reason():
    """The demo table's privacy cell says why p = 1 is the fail-safe: the unchecked linear
    fit shrunk by its floor (``fit_check["floor_binds"]``), or the nested fits disagreeing."""
    from types import SimpleNamespace

    from privci.cli import _privacy_cell
    priv = SimpleNamespace(epsilon=8.0, hardened=True)
    base = {"certified": False, "model": "linear", "checked": False}
    shrunk = _privacy_cell(SimpleNamespace(privacy=priv, fit_check=dict(base, floor_binds=True)))
    assert "linear fit shrunk by its floor: p = 1 (fail-safe)" in shrunk
    assert "assume=linear (not checked)" in shrunk
    other = _privacy_cell(SimpleNamespace(privacy=priv, fit_check=dict(base, floor_binds=None)))
    assert "nested fits disagree: p = 1 (fail-safe)" in other
    ok = _privacy_cell(SimpleNamespace(privacy=priv, fit_check=dict(base, certified=True)))
    assert "fail-safe" not in ok


def _demo_rejections(name, epsilon, draws, seed0):
    """How often the demo's call (``cli.DIABETES_CALL``) on diabetes row ``name`` rejects
    at 0.05 in ``draws`` seeded noise draws at ``epsilon``."""
    pytest.importorskip("sklearn")
    col, prog, z = cli.diabetes_columns()
    rej = 0
    for r in range(draws):
        res = privci.privgcm(col[name], prog, z, epsilon=epsilon,
                             rng=np.random.default_rng(seed0 + r), **cli.DIABETES_CALL)
        rej += res.pvalue <= 0.05
    return rej


def test_demo_diabetes_rows_have_power_at_epsilon_10():
    """Issue 35: the demo's diabetes rows answer, and find both dependences.  The demo's
    own call (``cli.DIABETES_CALL``: released windows around public centres 0, the linear
    model) at epsilon 10 rejects in at least 80 of 100 noise draws for bmi and for s3
    (measured 0.92 of 400 for each, stop 43; with stop 42's fixed 4- and 3-sd windows 0.64
    and 0.42 of 400, 68 and 41 of these 100 draws, which fail this).  Error rate
    tolerated: at a power of 0.92 fewer than 80 of 100 has probability about 10^-4; the
    draws are seeded."""
    for name in ("bmi", "s3"):
        rej = _demo_rejections(name, 10.0, 100, 350_000)
        assert rej >= 80, (name, rej)


def test_demo_diabetes_rows_reach_0_8_at_epsilon_8():
    """Issue 35's target: the demo's rows reject in at least 80% of runs at epsilon 8.  The
    demo's call at epsilon 8 rejects in at least 156 of 200 noise draws (0.78) for bmi and
    for s3: measured 0.91 and 0.86 of 400 (stop 43, the edge split that counts the chance
    that the floor binds); before it, 0.73 and 0.72, which pass this with probability
    about 0.03 each.  Error rate tolerated: at 0.86, fewer than 156 of 200 has probability
    about 10^-3; the draws are seeded."""
    for name in ("bmi", "s3"):
        rej = _demo_rejections(name, 8.0, 200, 351_000)
        assert rej >= 156, (name, rej)


def test_cli_tighten_reaches_privgcm(tmp_path, capsys):
    """--tighten false / true are privgcm's tighten=False / True (one column of z, public
    bounds): the same statistics as the Python calls, and different from each other (the
    tightened window is released inside the public one)."""
    import numpy as np
    from privci.cli import main
    rng = np.random.default_rng(5)
    n = 5000
    z = rng.normal(size=n)
    x = np.sin(z) + rng.normal(size=n)
    y = np.cos(z) + 0.3 * x + rng.normal(size=n)
    path = tmp_path / "d.csv"
    np.savetxt(path, np.column_stack([x, y, z]), delimiter=",", header="x,y,z", comments="")
    common = ["privgcm", str(path), "--x", "x", "--y", "y", "--z", "z", "--epsilon", "2",
              "--x-bound", "8", "--y-bound", "8", "--z-center", "0", "--z-scale", "1",
              "--seed", "4"]
    outs = {}
    for flag, value in (("false", False), ("true", True)):
        assert main(common + ["--tighten", flag]) == 0
        outs[flag] = capsys.readouterr().out.replace(" ", "")
        ref = privci.privgcm(x, y, z, epsilon=2, x_bound=8, y_bound=8, z_center=0.0,
                             z_scale=1.0, rng=4, tighten=value)
        assert f"statistic={ref.statistic:g}(" in outs[flag], (flag, outs[flag][:200])
    assert outs["false"] != outs["true"]
    assert "tightened" in outs["true"] and "tightened" not in outs["false"]
    with pytest.raises(SystemExit) as info:      # argparse names the bad choice
        main(common + ["--tighten", "maybe"])
    assert info.value.code == 2 and "invalid choice: 'maybe'" in capsys.readouterr().err
