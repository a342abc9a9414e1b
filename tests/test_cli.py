"""The command line: demo table and the CSV subcommands."""

import io

import numpy as np
import pytest

import privci
from privci import cli


def test_demo_prints_all_tests():
    out = io.StringIO()
    rows = cli.demo(seed=3, out=out)
    text = out.getvalue()
    for name in ["GCM", "PrivGCM", "CRT", "PrivCRT", "diabetes", "simulation"]:
        assert name in text
    assert len(rows) == 14
    pvals = [float(r[4]) for r in rows]
    assert all(0 <= p <= 1 for p in pvals)
    # the non-private GCM detects bmi -> progression in the clinical data
    assert pvals[0] < 1e-6


@pytest.fixture
def csv_file(tmp_path):
    rng = np.random.default_rng(0)
    n = 300
    z1, z2 = rng.normal(size=n), rng.normal(size=n)
    x = 0.5 + 1.2 * z1 - 0.3 * z2 + rng.normal(size=n)
    y = z1 + 2 * (x - (0.5 + 1.2 * z1 - 0.3 * z2)) + rng.normal(size=n)
    mu = 0.5 + 1.2 * z1 - 0.3 * z2
    p = tmp_path / "d.csv"
    with open(p, "w") as fh:
        fh.write("x,y,z1,z2,mu\n")
        for row in zip(x, y, z1, z2, mu):
            fh.write(",".join(repr(float(v)) for v in row) + "\n")
    return str(p)


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
    assert f"statistic={ref.statistic:g}," in out.replace(" ", "")
    assert f"statistic={uncentred.statistic:g}," not in out.replace(" ", "")
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
