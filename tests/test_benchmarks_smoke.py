"""The benchmark scripts run end to end on tiny sizes (so they cannot rot); no timing is
asserted here: the ratios they print are measured by running them in full (see their
docstrings)."""

import os
import subprocess
import sys

import pytest

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "benchmarks")


@pytest.mark.parametrize("script,args", [
    ("bench_gcm_cv.py", ["--sizes", "200"]),
    ("bench_exact.py", ["--sizes", "300", "--no-cold"]),
    ("bench_large.py", ["--sizes", "3000"]),
    ("bench_dask.py", ["--sizes", "4000", "--n-features", "32"]),
    # the spline fit of 5 columns (assume="additive") at epsilon 1 needs about 23,000 rows
    ("bench_dask.py", ["--sizes", "30000", "--regression", "spline"]),
])
def test_benchmark_script_runs(tmp_path, script, args):
    env = dict(os.environ, PRIVCI_BENCH_OUT=str(tmp_path), MPLBACKEND="Agg")
    proc = subprocess.run([sys.executable, os.path.join(HERE, script), *args], env=env,
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert any(f.endswith(".md") for f in os.listdir(tmp_path))
    assert "ratio" in (proc.stdout + open(next(os.path.join(tmp_path, f) for f in os.listdir(tmp_path) if f.endswith(".md"))).read()).lower()


def test_bench_basis_runs(tmp_path):
    """bench_basis.py (issue 25) end to end at a tiny size: one (n, d), every method."""
    env = dict(os.environ, PRIVCI_BENCH_OUT=str(tmp_path), MPLBACKEND="Agg")
    proc = subprocess.run([sys.executable, os.path.join(HERE, "bench_basis.py"), "--quick",
                           "--n", "2000", "--d", "1"], env=env, capture_output=True,
                          text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    table = open(os.path.join(tmp_path, "bench_basis.md")).read()
    assert "(a)/(c)" in table and "(d)/(b)" in table
    row = next(line for line in table.splitlines() if line.startswith("| 2e+03 | 1 |"))
    assert "skipped" not in row
