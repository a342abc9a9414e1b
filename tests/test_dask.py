"""The Dask path (issue 17): one test as map-reduce over partitions, equal to in memory.

Runs on an in-process LocalCluster (processes=False, 2 threads) at small n.  Equality is
asserted to rtol 1e-9: the two paths differ only in the order of floating-point sums.
"""

import numpy as np
import pytest

import privci

da = pytest.importorskip("dask.array")
distributed = pytest.importorskip("distributed")

N = 3000
CHUNK = 700          # 5 partitions of unequal size, not aligned with anything
RFF = dict(kernel_approximation="rff", n_features=64)
KRR = dict(regression="krr", **RFF)     # privgcm's kernel ridge path (the spline is the default)


@pytest.fixture(scope="module")
def client():
    cluster = distributed.LocalCluster(n_workers=1, threads_per_worker=2, processes=False,
                                       dashboard_address=None)
    c = distributed.Client(cluster)
    yield c
    c.close()
    cluster.close()


@pytest.fixture(scope="module")
def data():
    gen = np.random.default_rng(17)
    z = gen.normal(size=(N, 2))
    x = np.sin(z[:, 0]) + gen.normal(size=N)
    y = np.cos(z[:, 1]) + 0.3 * x + gen.normal(size=N)
    return x, y, z


def _dask(*arrays):
    return [None if a is None else da.from_array(a, chunks=(CHUNK,) + a.shape[1:])
            for a in arrays]


def _same(a, b):
    assert a.n == b.n
    np.testing.assert_allclose(a.statistic, b.statistic, rtol=1e-9)
    np.testing.assert_allclose(a.pvalue, b.pvalue, rtol=1e-9, atol=1e-15)


def _same_privacy(a, b):
    pa, pb = a.privacy, b.privacy
    for f in ("epsilon", "sensitivity", "noise_scale", "hardened", "ridge_lambda",
              "kernel_sigma", "guarantee", "caveats", "n_blocks", "sensitivity_kind"):
        assert getattr(pa, f) == getattr(pb, f), f
    assert pa.bounds.keys() == pb.bounds.keys()
    for key in pa.bounds:   # released centres: noisy means, summed in another order
        np.testing.assert_allclose(pa.bounds[key], pb.bounds[key], rtol=1e-12)
    assert pa.mechanism == pb.mechanism
    assert pa.releases and pa.releases == pb.releases   # the same entries as in memory
    assert "on Dask" in a.method and a.method.startswith(b.method)


@pytest.mark.parametrize("n_blocks", [25, None])
@pytest.mark.parametrize("conditional", [True, False])
def test_privgcm_equals_in_memory(client, data, n_blocks, conditional):
    x, y, z = data
    z = z if conditional else None
    kw = dict(epsilon=2.0, x_bound=4, y_bound=4, n_blocks=n_blocks, feature_rng=3, **KRR)
    mem = privci.privgcm(x, y, z, rng=11, **kw)
    dsk = privci.privgcm(*_dask(x, y, z), rng=11, **kw)
    _same(dsk, mem)
    _same_privacy(dsk, mem)
    # a different seed changes the result: the comparison can fail
    other = privci.privgcm(*_dask(x, y, z), rng=12, **kw)
    assert other.statistic != mem.statistic


def test_privgcm_centre_noise_multivariate_blocks(client, data):
    x, y, z = data
    xx = np.column_stack([x, x ** 2 / 4])
    kw = dict(epsilon=2.0, x_bound=[4, 4], y_bound=4, n_blocks=30, feature_rng=5,
              center_epsilon=0.5, sensitivity="sharp", n_sim=99, **KRR)
    gen_a, gen_b = np.random.default_rng(4), np.random.default_rng(4)
    mem = privci.privgcm(xx, y, z, rng=gen_a, **kw)
    dsk = privci.privgcm(*_dask(xx, y, z), rng=gen_b, **kw)
    _same(dsk, mem)
    _same_privacy(dsk, mem)
    np.testing.assert_allclose(dsk.privacy.bounds["x_center"], mem.privacy.bounds["x_center"],
                               rtol=1e-9)
    # the user's generator is left where the in-memory path leaves it
    assert gen_a.integers(1 << 62) == gen_b.integers(1 << 62)


def test_privgcm_hardened_on_workers(client, data):
    x, y, z = data
    for n_blocks in (40, None):
        res = privci.privgcm(*_dask(x, y, z), epsilon=1.0, x_bound=4, y_bound=4,
                             n_blocks=n_blocks, **KRR)
        assert res.privacy.hardened and "OpenDP" in res.privacy.mechanism
        assert np.isfinite(res.statistic) and 0 <= res.pvalue <= 1


# --------------------------------------------------------------------- spline regression

def _same_tight(a, b):
    assert a.n == b.n and a.statistic_name == b.statistic_name
    np.testing.assert_allclose(a.statistic, b.statistic, rtol=1e-10)
    np.testing.assert_allclose(a.pvalue, b.pvalue, rtol=1e-10, atol=1e-15)


@pytest.mark.parametrize("chunk", [N, 1600])          # 1 and 2 partitions
@pytest.mark.parametrize("multivariate", [False, True])
def test_privgcm_spline_equals_in_memory(client, data, chunk, multivariate):
    """The default regression='spline': two map-reduce passes, the in-memory result."""
    x, y, z = data
    # two columns of z: a stated model (assume="additive", checked; it resolves n = 3000
    # from epsilon about 1, privci._spline.smallest_epsilon, and refuses below)
    kw = dict(epsilon=2.0, x_bound=4, y_bound=4, z_center=0.0, z_scale=1.0, assume="additive",
              tighten=False)   # in memory "auto" tightens; on Dask it cannot yet
    if multivariate:   # 2 columns of x, private centres, public z shift and scale, 15 blocks
        x = np.column_stack([x, x ** 2 / 4])
        kw.update(x_bound=[4, 4], center_epsilon=0.3, z_center=0.1, z_scale=[1.0, 2.0],
                  n_blocks=15, n_sim=99)
    gen_a, gen_b = np.random.default_rng(21), np.random.default_rng(21)
    mem = privci.privgcm(x, y, z, rng=gen_a, **kw)
    parts = [da.from_array(a, chunks=(chunk,) + a.shape[1:]) for a in (x, y, z)]
    dsk = privci.privgcm(*parts, rng=gen_b, **kw)
    assert dsk.method.endswith(f"(on Dask, {-(-N // chunk)} partitions)")
    _same_tight(dsk, mem)
    _same_privacy(dsk, mem)
    assert dsk.privacy.sensitivity_kind == "released spline fit"
    assert "for the released regression" in dsk.privacy.guarantee
    # the user's generator is left where the in-memory path leaves it
    assert gen_a.integers(1 << 62) == gen_b.integers(1 << 62)
    # an int seed too, and a different seed changes the result
    _same_tight(privci.privgcm(*parts, rng=7, **kw), privci.privgcm(x, y, z, rng=7, **kw))
    assert privci.privgcm(*parts, rng=8, **kw).statistic != mem.statistic


def test_privgcm_spline_hardened_on_workers(client, data):
    x, y, z = data
    # two columns of z: a stated model (assume="additive" resolves n = 3000 from epsilon ~1)
    res = privci.privgcm(*_dask(x, y, z), epsilon=2.0, x_bound=4, y_bound=4, z_center=0.0,
                         z_scale=1.0, assume="additive")
    assert res.privacy.hardened and "OpenDP" in res.privacy.mechanism
    # the public rule's number of block sums (k = 1 here: one noisy sum and the sum of the
    # squares), each block sum of L1 sensitivity 2
    from privci._spline import choose_design
    assert res.privacy.n_blocks == choose_design(N, 2, 1, 1, 2.0, model="additive").k
    assert res.privacy.sensitivity == 2.0
    assert np.isfinite(res.statistic) and 0 <= res.pvalue <= 1


def test_privgcm_unconditional_default_equals_in_memory(client, data):
    """Without z the regression is moot: the default call runs the unconditional path."""
    x, y, _ = data
    kw = dict(epsilon=2.0, x_bound=4, y_bound=4)
    mem = privci.privgcm(x, y, rng=5, **kw)
    dsk = privci.privgcm(*_dask(x, y), rng=5, **kw)
    _same(dsk, mem)
    _same_privacy(dsk, mem)


def test_privgcm_krr_z_center_scale_equals_in_memory(client, data):
    """z_center and a public z_scale shift and scale z before the KRR features as well."""
    x, y, z = data
    kw = dict(epsilon=2.0, x_bound=4, y_bound=4, n_blocks=25, feature_rng=3, z_center=0.2,
              z_scale=2.0, **KRR)
    mem = privci.privgcm(x, y, z, rng=3, **kw)
    _same(privci.privgcm(*_dask(x, y, z), rng=3, **kw), mem)


def test_privgcm_spline_errors(client, data):
    x, y, z = data
    xd, yd, zd = _dask(x, y, z)
    budget = privci.PrivacyBudget(1.0)
    base = dict(epsilon=1, x_bound=4, y_bound=4, budget=budget, z_center=0.0, z_scale=1.0)
    for name, value in (("ridge_lambda", 1.0), ("kernel_sigma", 2.0), ("cv_lambdas", [1, 2]),
                        ("kernel_approximation", "rff"), ("n_features", 64),
                        ("feature_rng", 3), ("sensitivity", "sharp")):
        with pytest.raises(ValueError, match=f"`{name}` applies to regression='krr' only"):
            privci.privgcm(xd, yd, zd, **base, **{name: value})
    with pytest.raises(ValueError, match="`regression` must be"):
        privci.privgcm(xd, yd, zd, regression="gam", **base)
    with pytest.raises(ValueError, match="needs regression='krr'"):
        privci.privgcm(xd, yd, zd, n_blocks=None, **base)
    nz = {k: v for k, v in base.items() if k not in ("z_center", "z_scale")}
    with pytest.raises(ValueError, match="z scales are not available on Dask"):
        privci.privgcm(xd, yd, zd, z_scale="auto", z_center=0.0, **nz)
    with pytest.raises(ValueError, match="`z_center` needs z"):
        privci.privgcm(xd, yd, None, z_center=1.0, **nz)
    with pytest.raises(ValueError, match="`z_scale` needs z"):
        privci.privgcm(xd, yd, None, z_scale=2.0, **nz)
    with pytest.raises(ValueError, match="`z_center`"):
        privci.privgcm(xd, yd, zd, z_center=[0.0, 1.0, 2.0], z_scale=1.0, **nz)
    assert budget.spent == 0


def test_gcm_equals_in_memory(client, data):
    x, y, z = data
    for kw in (dict(ridge_lambda=0.05, feature_rng=2, **RFF),
               dict(ridge_lambda=0.05, feature_rng=2, center=True, **RFF), {}):
        zz = z if kw else None
        mem = privci.gcm(x, y, zz, **kw)
        dsk = privci.gcm(*_dask(x, y, zz), **kw)
        _same(dsk, mem)
        assert "on Dask" in dsk.method
        np.testing.assert_allclose(np.asarray(dsk.resid_y.compute())[:, 0], mem.resid_y[:, 0],
                                   rtol=1e-9, atol=1e-12)


def test_privcrt_equals_in_memory_given_resamples(client, data):
    x, y, z = data
    gen = np.random.default_rng(8)
    xr = np.sin(z[:, 0]) + gen.normal(size=(19, N))
    mx = privci.GaussianModelX(lambda zz: np.sin(zz[:, 0]), 1.0)
    kw = dict(epsilon=2.0, model_x=mx, y_bound=6, x_residual_bound=4, feature_rng=1, **RFF)
    for seed in range(3):
        mem = privci.privcrt(x, y, z, x_resamples=xr, rng=seed, **kw)
        dsk = privci.privcrt(*_dask(x, y, z), x_resamples=da.from_array(xr, chunks=(19, 900)),
                             rng=seed, **kw)
        assert dsk.statistic == mem.statistic and dsk.pvalue == mem.pvalue
        _same_privacy(dsk, mem)


def test_privcrt_sampling_on_workers(client, data):
    """Resamples drawn per partition: a valid test, strong dependence found (y built on x)."""
    x, y, z = data
    mx = privci.GaussianModelX(lambda zz: np.sin(zz[:, 0]), 1.0)
    res = privci.privcrt(*_dask(x, y, z), epsilon=5.0, model_x=mx, y_bound=6,
                         x_residual_bound=4, rng=0, **RFF)
    assert res.n_resamples == 19 and res.pvalue == 0.05   # rank 0 of 20


def test_errors(client, data):
    x, y, z = data
    xd, yd, zd = _dask(x, y, z)
    with pytest.raises(ValueError, match="kernel_approximation='rff'"):
        privci.privgcm(xd, yd, zd, epsilon=1, x_bound=4, y_bound=4, regression="krr")
    with pytest.raises(ValueError, match="kernel_approximation='rff'"):
        privci.gcm(xd, yd, zd, ridge_lambda=1.0)
    mx = privci.GaussianModelX(lambda zz: np.sin(zz[:, 0]), 1.0)
    with pytest.raises(ValueError, match="kernel_approximation='rff'"):
        privci.privcrt(xd, yd, zd, epsilon=1, model_x=mx, y_bound=4, x_residual_bound=4)
    bad = x.copy()
    bad[2500] = np.nan
    with pytest.raises(ValueError, match="`x` contains NaN"):
        privci.privgcm(_dask(bad)[0], yd, zd, epsilon=1, x_bound=4, y_bound=4, **KRR)
    with pytest.raises(ValueError, match="`epsilon`"):
        privci.privgcm(xd, yd, zd, epsilon=-1, x_bound=4, y_bound=4, **KRR)
    with pytest.raises(ValueError, match="`x_bound`"):
        privci.privgcm(xd, yd, zd, epsilon=1, x_bound=-4, y_bound=4, **KRR)
    with pytest.raises(ValueError, match="same number of rows"):
        privci.privgcm(xd[:100], yd, zd, epsilon=1, x_bound=4, y_bound=4, **KRR)
    with pytest.raises(ValueError, match="univariate"):
        privci.privgcm(da.stack([xd, xd], axis=1), yd, zd, epsilon=1, x_bound=4, y_bound=4,
                       n_blocks=None, **KRR)


def test_budget_not_charged_on_bad_data(client, data):
    x, y, z = data
    budget = privci.PrivacyBudget(1.0)
    bad = x.copy()
    bad[5] = np.inf
    with pytest.raises(ValueError, match="inf"):
        privci.privgcm(_dask(bad)[0], *_dask(y, z), epsilon=1, x_bound=4, y_bound=4,
                       budget=budget, **KRR)
    privci.privgcm(*_dask(x, y, z), epsilon=1, x_bound=4, y_bound=4, budget=budget, **KRR)
    with pytest.raises(privci.BudgetExceededError):
        privci.privgcm(*_dask(x, y, z), epsilon=0.1, x_bound=4, y_bound=4, budget=budget,
                       **KRR)


def test_dask_dataframe_columns(client, data):
    dd = pytest.importorskip("dask.dataframe")
    pd = pytest.importorskip("pandas")
    x, y, z = data
    frame = dd.from_pandas(pd.DataFrame({"x": x, "y": y, "z0": z[:, 0], "z1": z[:, 1]}),
                           npartitions=4)
    kw = dict(epsilon=2.0, x_bound=4, y_bound=4, n_blocks=20, feature_rng=3, rng=1, **KRR)
    dsk = privci.privgcm(frame["x"], frame["y"], frame[["z0", "z1"]], **kw)
    mem = privci.privgcm(x, y, z, **kw)
    _same(dsk, mem)


def test_import_privci_does_not_import_dask():
    import subprocess
    import sys
    out = subprocess.run([sys.executable, "-c", "import sys, privci; "
                          "print('dask' in sys.modules)"], capture_output=True, text=True)
    assert out.stdout.strip() == "False"


def test_spline_on_dask_needs_public_z_center_and_scale(client, data):
    """In memory the spline fit releases z's centre and scale ('auto'); on Dask that is not
    available yet, so the default call says what to pass instead of guessing."""
    x, y, z = data
    with pytest.raises(ValueError, match=r"on Dask arrays the spline fit needs public "
                                         r"`z_center` and `z_scale`.*got z_center=None"):
        privci.privgcm(*_dask(x, y, z), epsilon=1.0, x_bound=4, y_bound=4, rng=1)


# --------------------------------------------------------------------- empty partitions

EMPTY_LAYOUTS = [(0, 1600, 1400), (1600, 0, 1400), (1600, 1400, 0), (0, 0, 1000, 0, 2000)]


def _dask_rows(rows, *arrays):
    """Dask arrays with the given row partitions (some of them empty)."""
    return [None if a is None else da.from_array(a, chunks=(rows,) + tuple((s,) for s in
                                                                         a.shape[1:]))
            for a in arrays]


@pytest.mark.parametrize("rows", EMPTY_LAYOUTS, ids=lambda r: "-".join(map(str, r)))
def test_spline_empty_partition_contributes_nothing(client, data, rows):
    """Issue 21, finding 3: a partition with no rows (chunks (0, 200, 200)) crashed the spline
    path in scipy's B-spline design matrix, after the budget was charged.  It must contribute
    zero statistics: the result is the in-memory one, and the budget is charged once."""
    x, y, z = data
    # two columns of z: a stated model (assume="additive" resolves n = 3000 from epsilon ~1)
    kw = dict(epsilon=2.0, x_bound=4, y_bound=4, z_center=0.0, z_scale=1.0, assume="additive",
              tighten=False)   # in memory "auto" tightens; on Dask it cannot yet
    budget = privci.PrivacyBudget(10.0)
    gen_a, gen_b = np.random.default_rng(3), np.random.default_rng(3)
    mem = privci.privgcm(x, y, z, rng=gen_a, **kw)
    dsk = privci.privgcm(*_dask_rows(rows, x, y, z), rng=gen_b, budget=budget, **kw)
    _same_tight(dsk, mem)
    _same_privacy(dsk, mem)
    assert budget.spent == 2.0
    assert gen_a.integers(1 << 62) == gen_b.integers(1 << 62)
    # hardened: runs, finite
    res = privci.privgcm(*_dask_rows(rows, x, y, z), **kw)
    assert np.isfinite(res.statistic) and 0 <= res.pvalue <= 1


@pytest.mark.parametrize("rows", EMPTY_LAYOUTS[:2], ids=lambda r: "-".join(map(str, r)))
def test_every_dask_pass_accepts_an_empty_partition(client, data, rows):
    """The other passes (KRR on random features with blocks or one block per row, private
    centres, the unconditional test, PrivCRT, the non-private GCM): an empty partition
    contributes zero statistics, so the result is the in-memory one."""
    x, y, z = data
    parts = _dask_rows(rows, x, y, z)
    for kw in (dict(n_blocks=25, center_epsilon=0.4), dict(n_blocks=None)):
        kw = dict(epsilon=2.0, x_bound=4, y_bound=4, feature_rng=3, **KRR, **kw)
        _same(privci.privgcm(*parts, rng=11, **kw), privci.privgcm(x, y, z, rng=11, **kw))
    kw = dict(epsilon=2.0, x_bound=4, y_bound=4)
    _same(privci.privgcm(*parts[:2], rng=5, **kw), privci.privgcm(x, y, rng=5, **kw))
    gen = np.random.default_rng(8)
    xr = np.sin(z[:, 0]) + gen.normal(size=(19, N))
    mx = privci.GaussianModelX(lambda zz: np.sin(zz[:, 0]), 1.0)
    kw = dict(epsilon=2.0, model_x=mx, y_bound=6, x_residual_bound=4, feature_rng=1, **RFF)
    mem = privci.privcrt(x, y, z, x_resamples=xr, rng=2, **kw)
    dsk = privci.privcrt(*parts, x_resamples=da.from_array(xr, chunks=((19,), rows)), rng=2,
                         **kw)
    assert dsk.statistic == mem.statistic and dsk.pvalue == mem.pvalue
    res = privci.privcrt(*parts, rng=0, **dict(kw, epsilon=5.0))     # resamples on workers
    assert np.isfinite(res.statistic) and 0 <= res.pvalue <= 1
    kw = dict(ridge_lambda=0.05, feature_rng=2, **RFF)
    _same(privci.gcm(*parts, **kw), privci.gcm(x, y, z, **kw))


# --------------------------------------------------------------------- noise count (issue 38)
#
# A spy on OpenDP's samplers as privci.mechanisms builds them (``_laplace_measurement``: the
# vector Laplace of a given size, scale and grid; ``_opendp_noisy_max``): every invocation
# is logged with its noise scale and the number of values it draws noise for.  The workers
# of the in-process cluster run in this process, so the spy sees the draws made there.
# Issue 38: on the Dask path with one block per row, hardened noise was skipped on the
# partition that starts at row 0 (700 of 3000 products released without noise) and the
# record still said hardened; every test passed.

class _SamplerSpy:
    def __init__(self):
        self.draws = []          # (kind, scale, number of values, the values handed in)
        self.active = False

    def wrap(self, meas, kind, scale):
        spy = self

        class Measurement:
            def __call__(self, arg):
                if spy.active:
                    vals = np.asarray(arg, dtype=np.float64)
                    spy.draws.append((kind, float(scale), int(vals.size), vals.copy()))
                return meas(arg)

            def __getattr__(self, name):     # map, input_domain, ...: the real measurement
                return getattr(meas, name)
        return Measurement()


@pytest.fixture
def sampler_spy(monkeypatch):
    from privci import mechanisms as M
    spy = _SamplerSpy()
    laplace, noisy_max = M._laplace_measurement, M._opendp_noisy_max

    def lap(size, scale, k):
        return spy.wrap(laplace(size, scale, k), "laplace", scale)

    def nmax(epsilon):
        meas, scale, spent = noisy_max(epsilon)
        return spy.wrap(meas, "noisy_max", scale), scale, spent

    monkeypatch.setattr(M, "_laplace_measurement", lap)
    monkeypatch.setattr(M, "_opendp_noisy_max", nmax)
    yield spy
    spy.active = False


def _per_scale(draws):
    out = {}
    for _, scale, size, _ in draws:
        out[scale] = out.get(scale, 0) + size
    return out


def _stated_count(release, cells):
    """The number of noisy values a release's name states (None: not stated)."""
    import re
    m = re.match(r"(\d+) (residual products|block sums)$", release.name)
    if m:
        return int(m.group(1)) * cells
    m = re.match(r"rank among (\d+) statistics$", release.name)
    if m:
        return int(m.group(1))
    return None


def _mx():
    return privci.GaussianModelX(lambda zz: np.sin(zz[:, 0]), 1.0)


NOISE_COUNT_CASES = {
    # one block per row: the noise is drawn on the workers, partition by partition
    "krr-rows": (privci.privgcm, dict(epsilon=2.0, x_bound=4, y_bound=4, n_blocks=None,
                                      feature_rng=3, **KRR), True),
    "krr-blocks-centred": (privci.privgcm, dict(epsilon=2.0, x_bound=4, y_bound=4, n_blocks=25,
                                                center_epsilon=0.4, feature_rng=3, **KRR),
                           True),
    # two columns of z: a stated model (assume="additive" resolves n = 3000 from epsilon ~1)
    "spline-centred": (privci.privgcm, dict(epsilon=2.0, x_bound=4, y_bound=4, z_center=0.0,
                                            z_scale=1.0, center_epsilon=0.3,
                                            assume="additive", tighten=False), True),
    "unconditional": (privci.privgcm, dict(epsilon=2.0, x_bound=4, y_bound=4), False),
    "privcrt": (privci.privcrt, dict(epsilon=2.0, model_x=_mx(), y_bound=6, x_residual_bound=4,
                                     feature_rng=1, **RFF), True),
}


@pytest.mark.parametrize("case", list(NOISE_COUNT_CASES))
def test_dask_noise_count_equals_the_record(client, data, sampler_spy, case):
    """On the hardened Dask path every released value of every partition gets its draw:

    * every draw is at the noise scale of a release in the record (no unrecorded noise), and
      per noise scale the number of values drawn equals what the record states (the count
      in a release's name: "3000 residual products", "25 block sums" times the columns,
      "rank among 20 statistics") and what the in-memory path draws for the same releases
      (the spline fit's Gram matrices and cross-products, the centres);
    * with one block per row, the values handed to the sampler are the in-memory path's
      products, every one of them (sorted, to 1e-9: the residuals differ by the order of
      the sums only), and no value is drawn for twice;
    * the record says hardened, and the Dask record lists the in-memory releases.

    Exact, not statistical: the noise is OpenDP's (random), but nothing checked depends on
    it (counts, scales and the un-noised values handed in); false-failure rate 0.
    """
    fn, kw, conditional = NOISE_COUNT_CASES[case]
    x, y, z = data
    z = z if conditional else None
    spy = sampler_spy
    spy.draws.clear()
    spy.active = True
    mem = fn(x, y, z, **kw)
    mem_draws, spy.draws = spy.draws, []
    dsk = fn(*_dask(x, y, z), **kw)
    spy.active = False
    dsk_draws = spy.draws
    rec = dsk.privacy
    assert rec.hardened and mem.privacy.hardened
    assert [(r.name, r.epsilon, r.sensitivity, r.noise_scale) for r in rec.releases] == \
        [(r.name, r.epsilon, r.sensitivity, r.noise_scale) for r in mem.privacy.releases]
    assert dsk_draws, "the spy saw no draw on the Dask path"
    drawn, drawn_mem = _per_scale(dsk_draws), _per_scale(mem_draws)
    scales = {r.noise_scale for r in rec.releases}
    assert set(drawn) <= scales, (f"noise drawn at scales {sorted(set(drawn) - scales)} that "
                                  f"no release of the record states: {rec.releases}")
    assert drawn == drawn_mem, (f"values drawn per noise scale on Dask {drawn}, in memory "
                                f"{drawn_mem}")
    cells = np.shape(np.atleast_2d(x.T).T)[1] * np.shape(np.atleast_2d(y.T).T)[1]  # p q
    stated = {}
    for r in rec.releases:
        count = _stated_count(r, cells)
        assert r.noise_scale in drawn, f"no noise drawn for the release {r}"
        if count is not None:
            stated[r.noise_scale] = stated.get(r.noise_scale, 0) + count
    # the spline's releases may be renamed by its redesign; the others must state counts
    assert stated or case.startswith("spline"), "no release states its count: update " \
        "_stated_count"
    for scale, count in stated.items():
        others = [r for r in rec.releases if r.noise_scale == scale
                  and _stated_count(r, cells) is None]
        assert not others, f"a release without a stated count shares the scale {scale}"
        assert drawn[scale] == count, (
            f"the record states {count} noisy values at scale {scale:g}; noise was drawn for "
            f"{drawn[scale]} (draws of {[s for _, sc, s, _ in dsk_draws if sc == scale]})")
    if case == "krr-rows":
        scale = rec.releases[-1].noise_scale
        got = np.sort(np.concatenate([v for _, sc, _, v in dsk_draws if sc == scale]))
        want = np.sort(np.concatenate([v for _, sc, _, v in mem_draws if sc == scale]))
        assert got.shape == want.shape == (N,)
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-15)
