"""PCResult.plot: the estimated graph next to the budget ledger (issue 24), Agg backend."""

import numpy as np
import pytest

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")

from privci.causal import pc  # noqa: E402


def data(n=3000, seed=0):
    rng = np.random.default_rng(seed)
    a, b = rng.normal(size=n), rng.normal(size=n)
    c = (a + b) / 1.5 + 0.5 * rng.normal(size=n)
    return np.column_stack([a, b, c])


@pytest.mark.parametrize("method", ["release", "sieve"])
def test_plot_one_line_per_edge_one_bar_per_ledger_entry(method):
    import matplotlib.pyplot as plt
    res = pc(data(), epsilon=5.0, bounds=4.0, rng=1, method=method)
    g_ax, l_ax = res.plot()
    assert len(g_ax.lines) == int(res.adjacency.sum() // 2)
    assert len(l_ax.patches) == len(res.budget.ledger)
    heights = sorted(p.get_height() for p in l_ax.patches)
    assert heights == pytest.approx(sorted(r["epsilon"] for r in res.budget.ledger))
    plt.close("all")


def test_plot_on_given_axes_and_bad_ax():
    import matplotlib.pyplot as plt
    res = pc(data(), epsilon=5.0, bounds=4.0, rng=1)
    fig, axes = plt.subplots(1, 2)
    out = res.plot(ax=axes)
    assert out[0] is axes[0] and out[1] is axes[1]
    with pytest.raises(ValueError, match="ax"):
        res.plot(ax=axes[0])
    plt.close("all")
