"""Tests of privci.simulate (the paper's data) and privci.experiments (the runner)."""

import dataclasses
import math
import os

import numpy as np
import pytest

pd = pytest.importorskip("pandas")

from privci import experiments as E  # noqa: E402
from privci import simulate as S  # noqa: E402

GRID = {"n": [60, 90], "d": [1, 2], "beta": [0.0, 1.0], "epsilon": [1.0, 4.0]}
TESTS = [{"test": "privgcm", "kernel_sigma": 0.5},
         {"test": "gcm", "ridge_lambda": "10/n", "kernel_sigma": 0.5},
         {"test": "privcrt", "m": 9, "kernel_sigma": 0.5},
         {"test": "crt", "m": 9, "ridge_lambda": 0.01}]


def _strip(t):
    return t.drop(columns=["seconds"]).reset_index(drop=True)


# --------------------------------------------------------------------------- simulate

def test_paper_data_shapes_bounds_and_model_x():
    dat = S.paper_data(500, d=5, s=2.0, beta=0.5, rng=0)
    assert dat.x.shape == (500,) and dat.y.shape == (500,) and dat.z.shape == (500, 5)
    mom = S.paper_moments(2.0, 0.5)
    assert dat.x_bound == pytest.approx(4 * mom["sd_x"])
    assert dat.y_bound == pytest.approx(4 * mom["sd_y"])
    assert dat.x_residual_bound == 4.0
    assert dat.null is False and S.paper_data(50, rng=0).null is True
    np.testing.assert_allclose(dat.model_x.conditional_mean(dat.z),
                               np.exp(-2.0) * np.sin(2.0 * dat.z[:, 0]))
    assert dat.params == {"n": 500, "d": 5, "s": 2.0, "beta": 0.5}


def test_paper_data_is_reproducible_and_seed_dependent():
    a, b = S.paper_data(100, d=2, rng=7), S.paper_data(100, d=2, rng=7)
    c = S.paper_data(100, d=2, rng=8)
    np.testing.assert_array_equal(a.x, b.x)
    np.testing.assert_array_equal(a.z, b.z)
    assert not np.array_equal(a.x, c.x)


def test_paper_data_follows_the_design():
    # n = 200000 draws: each moment is checked to 5 standard errors, so a
    # correct generator fails with probability < 1e-5 per check.
    n, s, beta = 200_000, 1.0, 0.7
    dat = S.paper_data(n, d=3, s=s, beta=beta, rng=11)
    mom = S.paper_moments(s, beta)
    se = lambda v: 5 * math.sqrt(2 * v * v / n) + 1e-12  # noqa: E731  (se of a variance)
    assert abs(dat.z.std(axis=0) - 2.0).max() < 0.02
    assert abs(dat.x.var() - mom["sd_x"] ** 2) < se(mom["sd_x"] ** 2)
    assert abs(dat.y.var() - mom["sd_y"] ** 2) < se(mom["sd_y"] ** 2 + 1)
    nx = dat.x - S.f_s(dat.z[:, 0], s)
    assert abs(nx.mean()) < 5 / math.sqrt(n) and abs(nx.var() - 1) < se(1.0)
    ny = dat.y + S.f_s(dat.z[:, 0], s) - beta * nx
    assert abs(np.corrcoef(nx, ny)[0, 1]) < 5 / math.sqrt(n)
    # Var f_s(Z_1) against its closed form
    assert abs(S.f_s(dat.z[:, 0], s).var() - mom["var_f"]) < 0.01 * mom["var_f"] + 5e-4


@pytest.mark.parametrize("kwargs, exc, match", [
    ({"n": 1}, ValueError, "`n`"),
    ({"n": 10, "beta": -1.0}, ValueError, "`beta`"),
    ({"n": 10, "s": 0.0}, ValueError, "`s`"),
    ({"n": 10, "d": 0}, ValueError, "`d`"),
    ({"n": 10, "bound_sd": -2.0}, ValueError, "`bound_sd`"),
])
def test_paper_data_validation(kwargs, exc, match):
    with pytest.raises(exc, match=match):
        S.paper_data(**kwargs)


def test_table_subsampler():
    t = np.arange(60, dtype=float).reshape(20, 3)
    sub = S.TableSubsampler(t, ("a", "b", "c"), y="c", bounds=(1.0, 2.0, 3.0))
    dat = sub(n=10, x="b", rng=0)
    assert dat.x_bound == 2.0 and dat.y_bound == 3.0 and dat.model_x is None
    # rows are intact and distinct: column a = 3 k, b = 3 k + 1, c = 3 k + 2
    np.testing.assert_array_equal(dat.x, dat.z[:, 0] + 1)
    np.testing.assert_array_equal(dat.y, dat.z[:, 0] + 2)
    assert len(set(dat.z[:, 0])) == 10
    perm = sub(n=10, x="b", permute_x=True, rng=0)
    np.testing.assert_array_equal(np.sort(perm.x), np.sort(dat.x))   # same rows, x shuffled
    np.testing.assert_array_equal(perm.z, dat.z)
    assert perm.null is True and not np.array_equal(perm.x, dat.x)
    with pytest.raises(ValueError, match="`n`"):
        sub(n=21, x="a")
    with pytest.raises(ValueError, match="`x`"):
        sub(n=5, x="c")
    with pytest.raises(ValueError, match="`y`"):
        S.TableSubsampler(t, ("a", "b", "c"), y="q", bounds=(1, 1, 1))


# --------------------------------------------------------------------------- runner

def test_run_table_layout_and_deduplication():
    tab = E.run(TESTS, GRID, n_reps=2, seed=3, scheduler="serial", progress=False)
    # 8 data cells x 2 reps x (privgcm at 2 eps + gcm + privcrt at 2 eps + crt)
    assert len(tab) == 8 * 2 * 6
    assert (tab["error"] == "").all()
    assert tab.loc[tab["test"].isin(["gcm", "crt"]), "epsilon"].isna().all()
    assert set(tab.loc[tab["test"] == "privgcm", "epsilon"]) == {1.0, 4.0}
    assert ((tab["reject"] == 1) == (tab["pvalue"] <= 0.05)).all()
    assert tab["pvalue"].between(0, 1).all()


def test_run_is_reproducible_and_independent_of_the_grid():
    a = E.run(TESTS, GRID, n_reps=2, seed=3, scheduler="serial", progress=False)
    b = E.run(TESTS, GRID, n_reps=2, seed=3, scheduler="serial", progress=False)
    pd.testing.assert_frame_equal(_strip(a), _strip(b))
    # one cell of the grid, run alone, different chunking: same numbers
    one = E.run(TESTS[:1], {"n": [90], "d": [2], "beta": [1.0], "epsilon": [4.0]}, n_reps=2,
                seed=3, scheduler="serial", chunk_size=1, progress=False)
    sel = a[(a.n == 90) & (a.d == 2) & (a.beta == 1.0) & (a.epsilon == 4.0) & (a.test == "privgcm")]
    np.testing.assert_array_equal(one["pvalue"].to_numpy(), sel["pvalue"].to_numpy())
    # another seed: different numbers
    c = E.run(TESTS[:1], {"n": [90], "d": [2], "beta": [1.0], "epsilon": [4.0]}, n_reps=2,
              seed=4, scheduler="serial", progress=False)
    assert not np.array_equal(one["pvalue"].to_numpy(), c["pvalue"].to_numpy())


def test_tests_share_the_data_of_a_replication():
    # GCM's statistic is a deterministic function of the data: the same data
    # (cell, rep) gives the same statistic whatever other tests run with it.
    g = [{"test": "gcm", "ridge_lambda": 0.1}]
    a = E.run(g, {"n": [80], "beta": [0.5]}, n_reps=3, seed=9, scheduler="serial",
              progress=False)
    b = E.run(g + TESTS[:1], {"n": [80], "beta": [0.5], "epsilon": [2.0]}, n_reps=3, seed=9,
              scheduler="serial", progress=False)
    np.testing.assert_array_equal(a["statistic"].to_numpy(),
                                  b.loc[b["test"] == "gcm", "statistic"].to_numpy())


def test_csv_roundtrip_and_resume(tmp_path):
    out = str(tmp_path / "res.csv")
    full = E.run(TESTS, GRID, n_reps=3, seed=5, scheduler="serial", out=out, progress=False)
    ref = E.run(TESTS, GRID, n_reps=3, seed=5, scheduler="serial", progress=False)
    pd.testing.assert_frame_equal(_strip(full), _strip(ref))          # reload is exact
    pd.testing.assert_frame_equal(_strip(E.load_results(out).pipe(
        lambda t: t.sort_values(["cell_key", "rep", "test_key"])).reset_index(drop=True)),
        _strip(ref.sort_values(["cell_key", "rep", "test_key"]).reset_index(drop=True)))
    # interrupt: keep the first 40 rows and half of the 41st line
    lines = open(out).read().splitlines(keepends=True)
    with open(out, "w") as fh:
        fh.writelines(lines[:41])
        fh.write(lines[41][:20])
    kept = E.load_results(out)
    assert len(kept) == 40
    resumed = E.run(TESTS, GRID, n_reps=3, seed=5, scheduler="serial", out=out, progress=False)
    pd.testing.assert_frame_equal(_strip(resumed), _strip(ref))
    # the 40 finished rows were not recomputed: their timings are the old ones
    m = resumed.merge(kept, on=["cell_key", "test_key", "rep"], suffixes=("", "_old"))
    assert len(m) == 40 and (m["seconds"] == m["seconds_old"]).all()
    # more replications only add rows
    more = E.run(TESTS, GRID, n_reps=4, seed=5, scheduler="serial", out=out, progress=False)
    assert len(more) == len(ref) * 4 // 3
    pd.testing.assert_frame_equal(_strip(more[more.rep < 3]), _strip(ref))
    # fewer replications, or a sub-grid, read back only what was asked for
    few = E.run(TESTS, {**GRID, "n": [60]}, n_reps=2, seed=5, scheduler="serial", out=out,
                progress=False)
    pd.testing.assert_frame_equal(_strip(few), _strip(ref[(ref.rep < 2) & (ref.n == 60)]))


def test_resume_refuses_a_different_layout(tmp_path):
    out = str(tmp_path / "res.csv")
    E.run(TESTS[:1], {"n": [50], "epsilon": [1.0]}, n_reps=1, seed=1, scheduler="serial",
          out=out, progress=False)
    with pytest.raises(ValueError, match="columns"):
        E.run(TESTS[:1], {"n": [50], "s": [1.0], "epsilon": [1.0]}, n_reps=1, seed=1,
              scheduler="serial", out=out, progress=False)


def test_failures_are_recorded_not_raised():
    t = np.random.default_rng(0).uniform(-1, 1, size=(40, 3))
    sub = S.TableSubsampler(t, ("a", "b", "c"), y="c", bounds=(1.0, 1.0, 1.0))
    tab = E.run([{"test": "crt", "m": 9}, {"test": "gcm", "ridge_lambda": 0.1}],
                {"n": [30], "x": ["a"]}, n_reps=2, data=sub, seed=1, scheduler="serial",
                progress=False)
    crt = tab[tab.test == "crt"]
    assert (crt["reject"] == -1).all() and crt["error"].str.contains("model-X").all()
    s = E.summarise(tab)
    assert s.loc[s.test == "crt", "n_failed"].item() == 2
    assert s.loc[s.test == "gcm", "n_reps"].item() == 2


@pytest.mark.parametrize("tests, grid, match", [
    (["nope"], {"n": [50]}, "unknown test"),
    ([{"test": "gcm", "epsilon": 1.0}], {"n": [50]}, "does not take"),
    (["gcm"], {"n": [50], "colour": [1]}, "neither"),
])
def test_run_validation(tests, grid, match):
    with pytest.raises(ValueError, match=match):
        E.run(tests, grid, n_reps=1, seed=0, scheduler="serial", progress=False)


def test_privcrt_minimum_pvalue_counts_as_rejection():
    # m = 19: the smallest p-value is 1/20 = alpha; beta = 3 at n = 400 makes
    # the true rank 0 essentially always and the selected rank 0 in most runs.
    tab = E.run([{"test": "privcrt", "m": 19}], {"n": [400], "beta": [3.0], "epsilon": [8.0]},
                n_reps=5, seed=2, scheduler="serial", progress=False)
    at_min = tab["pvalue"] == 0.05
    assert at_min.any() and (tab.loc[at_min, "reject"] == 1).all()


def test_wilson_interval_and_summary():
    lo, hi = E.wilson_interval(5, 10)
    assert lo == pytest.approx(0.236593, abs=1e-6) and hi == pytest.approx(0.763407, abs=1e-6)
    lo0, hi0 = E.wilson_interval(0, 20)
    assert lo0 == pytest.approx(0.0, abs=1e-12) and hi0 == pytest.approx(0.161125, abs=1e-6)
    tab = E.run(TESTS[:2], {"n": [60], "beta": [0.0, 2.0], "epsilon": [2.0]}, n_reps=4, seed=1,
                scheduler="serial", progress=False)
    s = E.summarise(tab)
    assert len(s) == 4 and (s["n_reps"] == 4).all()
    for _, r in s.iterrows():
        sel = tab[(tab.test == r.test) & (tab.beta == r.beta)]
        assert r.rejections == (sel.reject == 1).sum()
        assert r.lo <= r.rate <= r.hi


def test_dask_local_cluster_equals_serial():
    pytest.importorskip("distributed")
    ref = E.run(TESTS, GRID, n_reps=2, seed=13, scheduler="serial", progress=False)
    dk = E.run(TESTS, GRID, n_reps=2, seed=13, scheduler=None, n_workers=2, chunk_size=1,
               progress=False)
    assert (dk["error"] == "").all()
    # BLAS may round differently with one thread per worker: p-values to 1e-9,
    # decisions and everything else exactly.
    pd.testing.assert_frame_equal(_strip(dk), _strip(ref), check_exact=False, rtol=1e-9,
                                  atol=1e-12)
    assert (dk["reject"].to_numpy() == ref["reject"].to_numpy()).all()


def test_dask_client_argument_and_data_object(tmp_path):
    distributed = pytest.importorskip("distributed")
    t = np.random.default_rng(0).uniform(-1, 1, size=(60, 4))
    sub = S.TableSubsampler(t, ("a", "b", "c", "y"), y="y", bounds=(1.0,) * 4)
    args = ([{"test": "privgcm"}, {"test": "gcm", "ridge_lambda": 0.1}],
            {"n": [40], "x": ["a", "b"], "epsilon": [2.0]})
    ref = E.run(*args, n_reps=3, data=sub, seed=2, scheduler="serial", progress=False)
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False,
                                  dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        dk = E.run(*args, n_reps=3, data=sub, seed=2, scheduler=client, progress=False)
        assert client.status == "running"   # a user's client is left open
    pd.testing.assert_frame_equal(_strip(dk), _strip(ref), check_exact=False, rtol=1e-9)


@pytest.mark.slow
def test_private_tests_keep_their_level_through_the_runner():
    # 400 null replications per test: the rejection count is Binomial(400, p)
    # with p <= 0.05 for a valid test; we fail above 35 (P(X > 35 | p = 0.05)
    # < 1e-4).  A test that ignored its noise or its bounds would fail.
    tab = E.run([{"test": "privgcm", "kernel_sigma": 0.5}, {"test": "privcrt", "m": 19}],
                {"n": [300], "d": [1, 5], "s": [1.0], "beta": [0.0], "epsilon": [8.0]},
                n_reps=200, seed=21, scheduler="serial", progress=False)
    s = E.summarise(tab, by=["test"])
    assert (s["n_reps"] == 400).all()
    assert (s["rejections"] <= 35).all()


@pytest.mark.slow
def test_privcrt_has_power_through_the_runner():
    # beta = 1.5, n = 500, epsilon = 2: PrivCRT rejects about 35% of the time
    # here (its power grows with n); we require > 20% of 100 replications.  A
    # test that ignored the data would reject ~5%: P(Bin(100, 0.05) > 20) < 1e-6,
    # while P(Bin(100, 0.35) <= 20) ~ 1e-3.
    tab = E.run([{"test": "privcrt", "m": 19}], {"n": [500], "beta": [1.5], "epsilon": [2.0]},
                n_reps=100, seed=4, scheduler="serial", progress=False)
    assert (tab["reject"] == 1).mean() > 0.2


def test_local_cluster_does_not_leak_worker_environment():
    """Dask's Nanny copies pre-spawn-environ into the parent's os.environ; the runner restores it
    (a leaked NUMBA_NUM_THREADS breaks later numba compiles in the same process)."""
    import os
    from privci import experiments
    before = {k: os.environ.get(k) for k in experiments._WORKER_ENV}
    client, cleanup = experiments._client_for(None, 1)
    try:
        assert {k: os.environ.get(k) for k in experiments._WORKER_ENV} == before
    finally:
        cleanup()
    assert {k: os.environ.get(k) for k in experiments._WORKER_ENV} == before


def test_centring_options_reach_the_tests():
    """center_share gives PrivGCM center_epsilon = share * epsilon; center gives the GCM
    center=True (the same numbers as calling the package directly)."""
    import privci
    d = S.paper_data(n=150, d=1, s=2.0, beta=0.0, rng=np.random.default_rng(4))
    d = dataclasses.replace(d, x=d.x + 1.5)     # off-centre, so the centring matters
    stat, pval = E._t_privgcm(d, np.random.default_rng(9), 0.05, epsilon=2.0, center_share=0.25)
    ref = privci.privgcm(d.x, d.y, d.z, epsilon=2.0, center_epsilon=0.5, x_bound=d.x_bound,
                         y_bound=d.y_bound, rng=np.random.default_rng(9), regression="krr")
    assert (stat, pval) == (ref.statistic, ref.pvalue)
    plain, _ = E._t_privgcm(d, np.random.default_rng(9), 0.05, epsilon=2.0)
    assert plain != stat
    stat, pval = E._t_gcm(d, np.random.default_rng(9), 0.05, ridge_lambda=0.1, center=True)
    ref = privci.gcm(d.x, d.y, d.z, ridge_lambda=0.1, center=True, rng=np.random.default_rng(9))
    assert (stat, pval) == (ref.statistic, ref.pvalue)
    assert stat != E._t_gcm(d, np.random.default_rng(9), 0.05, ridge_lambda=0.1)[0]
