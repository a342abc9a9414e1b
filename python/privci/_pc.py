"""PC-stable's graph steps (skeleton, orientation) and its result: a leaf module.

Shared by :mod:`privci.causal` (the per-test path) and :mod:`privci.release` (PC on one
release), so that neither imports the other.  ``PCResult`` is public as
``privci.causal.PCResult``.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from typing import Tuple

import numpy as np

from . import _validation as V
from .budget import PrivacyBudget

__all__ = ["PCResult"]


# --- the package's own PC -------------------------------------------------------------------


@dataclass(frozen=True, repr=False)
class PCResult:
    """The result of :func:`pc`.

    Attributes
    ----------
    adjacency : ndarray of bool, shape (p, p)
        The estimated skeleton (symmetric, False on the diagonal).
    directed : ndarray of int8, shape (p, p)
        The CPDAG in causal-learn's encoding: ``directed[i, j] == -1`` and
        ``directed[j, i] == 1`` for i -> j; -1 both ways for an undirected
        edge i - j; 0 for no edge.
    names : list
        The column names.
    sepsets : dict
        {(i, j): S} for every removed edge (i < j): the conditioning set
        whose test found independence.
    pvalues : dict
        {(i, j, S): p} for every test asked (released p-values; refusals
        under ``on_exhausted`` are listed in ``refused``).
    level_epsilon : dict
        {order: epsilon of each test at that order}: the public split.
    n_tests : int
        Distinct tests released (each charged once).
    refused : tuple
        Tests the budget refused (answered by ``on_exhausted``, nothing computed).
    epsilon : float
        The total epsilon of the run; ``budget.spent`` never exceeds it.
    alpha : float
    budget : PrivacyBudget
        The run's budget, with its ledger (one record per released test, or one
        record for the release).
    guarantee : str
    caveats : tuple of str
    table : ReleasedTable, ReleasedCovariance or None
        ``method="release"``: the release the run was answered from (further
        queries are free, and ``table.test(i, j, S)`` answers as the run did: the
        table's ``assumptions`` are the ones the run stated); None otherwise.
    untested : tuple of (i, j)
        Edges of ``adjacency`` (i < j, positions) that stay only because no test could
        remove them: a test with p > alpha was underpowered (power rule) or not
        trusted, or their conditioning sets of some size were never asked (planned
        orders, the test cap).  The other edges were *found*: every test asked of them
        could have removed them and rejected independence.  Empty for the per-test and
        sieve paths.
    untested_reasons : dict
        {(i, j): tuple of reasons} for the untested edges.
    max_tests : int or None
        The public cap on the number of distinct tests computed (``method="release"``).
    statistics : str or None
        ``method="release"``: the rung released, "linear" or "additive".
    """

    adjacency: np.ndarray
    directed: np.ndarray
    names: list
    sepsets: dict
    pvalues: dict
    level_epsilon: dict
    n_tests: int
    refused: tuple
    epsilon: float
    alpha: float
    budget: PrivacyBudget
    guarantee: str
    caveats: Tuple[str, ...] = field(default=())
    table: object = None
    untested: Tuple[tuple, ...] = field(default=())
    untested_reasons: dict = field(default_factory=dict)
    max_tests: object = None
    statistics: object = None

    def edges(self, which="all"):
        """The CPDAG's edges as (name_i, mark, name_j) with mark "->" or "--".

        ``which``: "all" (default), "found" (edges every asked test could have removed)
        or "untested" (edges kept only because no test could remove them).
        """
        if which not in ("all", "found", "untested"):
            raise ValueError(f"`which` must be 'all', 'found' or 'untested'; got {which!r} "
                             "instead.")
        out, g, p = [], self.directed, len(self.names)
        skip = set(self.untested)
        for i in range(p):
            for j in range(i + 1, p):
                if which != "all" and (((i, j) in skip) != (which == "untested")):
                    continue
                if g[i, j] == -1 and g[j, i] == 1:
                    out.append((self.names[i], "->", self.names[j]))
                elif g[j, i] == -1 and g[i, j] == 1:
                    out.append((self.names[j], "->", self.names[i]))
                elif g[i, j] != 0:
                    out.append((self.names[i], "--", self.names[j]))
        return out

    def plot(self, ax=None):
        """Draw the estimated graph next to the budget ledger (matplotlib, imported lazily).

        Left: the nodes on a circle, one line per edge of the CPDAG (an arrowhead for a
        directed edge).  Right: one bar per ledger record (the release, or each charged
        test / sieve round) with its epsilon, and the run's total epsilon as a dashed line.

        Parameters
        ----------
        ax : None or a pair of matplotlib Axes
            None: a new figure with two panels.

        Returns
        -------
        (graph_ax, ledger_ax)

        Examples
        --------
        >>> import matplotlib; matplotlib.use("Agg")
        >>> import numpy as np
        >>> from privci.causal import pc
        >>> rng = np.random.default_rng(0)
        >>> a = rng.normal(size=3000); b = a + rng.normal(size=3000)
        >>> res = pc(np.column_stack([a, b]), epsilon=2.0, bounds=6.0, rng=0)
        >>> g_ax, l_ax = res.plot()
        >>> len(g_ax.lines), len(l_ax.patches)
        (1, 1)
        """
        import matplotlib.pyplot as plt

        if ax is None:
            _, (g_ax, l_ax) = plt.subplots(1, 2, figsize=(9, 4))
        else:
            try:
                g_ax, l_ax = ax
            except (TypeError, ValueError):
                raise ValueError("`ax` must be None or a pair of matplotlib Axes (graph, "
                                 f"ledger); got {ax!r} instead.") from None
        p = len(self.names)
        untested = set(self.untested)
        ang = np.pi / 2 - 2 * np.pi * np.arange(p) / max(p, 1)
        xy = np.column_stack([np.cos(ang), np.sin(ang)])
        g = self.directed
        for i in range(p):
            for j in range(i + 1, p):
                if not self.adjacency[i, j]:
                    continue
                if (i, j) in untested:
                    g_ax.plot(xy[[i, j], 0], xy[[i, j], 1], color="0.6", lw=1.0, ls="--",
                              zorder=1)
                    continue
                g_ax.plot(xy[[i, j], 0], xy[[i, j], 1], color="0.3", lw=1.5, zorder=1)
                head = None
                if g[i, j] == -1 and g[j, i] == 1:
                    head = (i, j)
                elif g[j, i] == -1 and g[i, j] == 1:
                    head = (j, i)
                if head is not None:
                    a, b = head
                    tip = xy[b] - 0.12 * (xy[b] - xy[a]) / np.linalg.norm(xy[b] - xy[a])
                    g_ax.annotate("", xy=tip, xytext=xy[a] + 0.5 * (tip - xy[a]),
                                  arrowprops=dict(arrowstyle="-|>", color="0.3", lw=0),
                                  zorder=2)
        g_ax.scatter(xy[:, 0], xy[:, 1], s=600, color="white", edgecolors="0.2", zorder=3)
        for k, name in enumerate(self.names):
            g_ax.text(xy[k, 0], xy[k, 1], str(name), ha="center", va="center", zorder=4)
        g_ax.set_xlim(-1.4, 1.4)
        g_ax.set_ylim(-1.4, 1.4)
        g_ax.set_aspect("equal")
        g_ax.axis("off")
        m = int(self.adjacency.sum() // 2)
        g_ax.set_title(f"estimated graph ({m} edges)" if not untested else
                       f"estimated graph ({m - len(untested)} found, {len(untested)} "
                       "untested: dashed)")
        ledger = self.budget.ledger
        eps = [float(r["epsilon"]) for r in ledger]
        labels = [str(r["test"]) for r in ledger]
        l_ax.bar(np.arange(len(eps)), eps, color="C0")
        if len(eps) <= 12:
            l_ax.set_xticks(np.arange(len(eps)))
            l_ax.set_xticklabels(labels, rotation=45, ha="right", fontsize=8)
        l_ax.axhline(self.epsilon, color="C3", ls="--", lw=1)
        l_ax.set_ylabel("epsilon")
        l_ax.set_title(f"budget ledger: {len(eps)} records, spent "
                       f"{self.budget.spent:.3g} of {self.epsilon:g}")
        return g_ax, l_ax

    def __repr__(self):
        def fmt(which):
            return ", ".join(f"{a} {m} {b}" for a, m, b in self.edges(which)) or "none"

        cap = "" if self.max_tests is None else f" of at most {self.max_tests}"
        tail = (f"n_tests={self.n_tests}{cap}, spent={self.budget.spent:.6g} of "
                f"epsilon={self.epsilon:.6g}, alpha={self.alpha:g})")
        if not self.untested:
            return f"PCResult(edges=[{fmt('all')}], {tail}"
        k, m = len(self.untested), int(self.adjacency.sum() // 2)
        return (f"PCResult(found=[{fmt('found')}], untested=[{fmt('untested')}] ({k} of "
                f"{m} edges stay only because no test could remove them: not evidence of "
                f"an edge), {tail}")


def _candidate_sets(adj_sets, i, j, order):
    """Distinct conditioning sets of size ``order`` from adj(i)\\{j}, then adj(j)\\{i}."""
    out, seen = [], set()
    for a, b in ((i, j), (j, i)):
        for s in itertools.combinations(sorted(adj_sets[a] - {b}), order):
            if s not in seen:
                seen.add(s)
                out.append(s)
    return out


def _count_sets(adj_sets, i, j, order):
    a, b = adj_sets[i] - {j}, adj_sets[j] - {i}
    return math.comb(len(a), order) + math.comb(len(b), order) - math.comb(len(a & b), order)


def _pc_skeleton(p, alpha, ask, *, top=None, before_order=None):
    """PC-stable's skeleton search, shared by every path of :func:`pc`.

    ``ask(i, j, S)`` returns ``(p_value, may_remove)``: the edge i - j is removed, with
    separating set S, at the first candidate set whose p-value exceeds ``alpha`` and
    which ``may_remove``.  ``before_order(order, plan, adj_sets, edges)`` is called at
    the start of each order (the per-test path plans its epsilon there); it may return
    ``(plan, last)``: the plan to run instead (a sub-list: edges left out are not tested
    at this order) and whether this is the last order to run.  Adjacencies are frozen
    within an order (PC-stable).  Returns (adjacency, sepsets, orders run).
    """
    top = p - 2 if top is None else min(top, p - 2)
    adj = ~np.eye(p, dtype=bool)
    sepsets, orders = {}, []
    for order in range(top + 1):
        adj_sets = [set(np.flatnonzero(adj[k]).tolist()) for k in range(p)]
        edges = [(i, j) for i in range(p) for j in range(i + 1, p) if adj[i, j]]
        plan = [(i, j, _candidate_sets(adj_sets, i, j, order)) for i, j in edges]
        plan = [(i, j, c) for i, j, c in plan if c]
        if not plan:
            break
        orders.append(order)
        last = False
        if before_order is not None:
            got = before_order(order, plan, adj_sets, edges)
            if got is not None:
                plan, last = got
        removed = []
        for i, j, cands in plan:
            for s in cands:
                pv, may_remove = ask(i, j, s)
                if may_remove and pv > alpha:
                    removed.append((i, j))
                    sepsets[(i, j)] = tuple(s)
                    break
        for i, j in removed:
            adj[i, j] = adj[j, i] = False
        if last:
            break
    return adj, sepsets, orders


def _unshielded_triples(adj):
    """(i, k, j) with i < j, i - k - j adjacent and i, j not adjacent."""
    p = adj.shape[0]
    out = []
    for k in range(p):
        nb = np.flatnonzero(adj[k])
        for i, j in itertools.combinations(nb, 2):
            if not adj[i, j]:
                out.append((int(i), k, int(j)))
    return out


def _orient(adj, sepsets, colliders=None, conflicts="first"):
    """CPDAG from a skeleton and separating sets: v-structures, then Meek's rules 1-3.

    Encoding as causal-learn's ``G.graph``.  ``colliders``: {(i, k, j): True, False or
    None} for the unshielded triples (True: i -> k <- j; None: ambiguous, left
    unoriented); default: a collider when k is not in the separating set of (i, j).
    ``conflicts="first"``: a v-structure is oriented unless one of its edges is already
    oriented the other way (the first orientation is kept, so the order of the triples
    decides).  ``"undirected"``: an edge that two v-structures would orient both ways is
    left undirected and every other arrowhead stands on its own triple, so one wrong
    separating set cannot flip an edge that another triple oriented; Meek's rules then
    propagate only the arrowheads that stand and never orient a conflicted edge.
    """
    p = adj.shape[0]
    g = np.where(adj, -1, 0).astype(np.int8)

    def directed(a, b):
        return g[a, b] == -1 and g[b, a] == 1

    def undirected(a, b):
        return g[a, b] == -1 and g[b, a] == -1

    def orient(a, b):
        g[a, b], g[b, a] = -1, 1

    triples = _unshielded_triples(adj)
    if colliders is None:
        colliders = {(i, k, j): k not in sepsets.get((i, j), ()) for i, k, j in triples}
    frozen = set()          # edges two colliders disagree on: left undirected, even by Meek
    if conflicts == "undirected":
        heads = set()
        for i, k, j in triples:
            if colliders.get((i, k, j)):
                heads.update({(i, k), (j, k)})
        for a, b in heads:
            if (b, a) not in heads:
                orient(a, b)
            else:
                frozen.add(frozenset((a, b)))
    else:
        for i, k, j in triples:
            if not colliders.get((i, k, j)):
                continue
            for a in (i, j):
                if not directed(k, a):
                    orient(a, k)
    changed = True
    while changed:
        changed = False
        for a in range(p):
            for b in range(p):
                if not undirected(a, b) or frozenset((a, b)) in frozen:
                    continue
                # R1: c -> a - b, c and b not adjacent  =>  a -> b
                r1 = any(directed(c, a) and not adj[c, b] and c != b for c in range(p))
                # R2: a -> c -> b and a - b  =>  a -> b
                r2 = any(directed(a, c) and directed(c, b) for c in range(p))
                # R3: a - c -> b, a - d -> b, c and d not adjacent  =>  a -> b
                r3 = False
                cs = [c for c in range(p) if undirected(a, c) and directed(c, b)]
                for c, d in itertools.combinations(cs, 2):
                    if not adj[c, d]:
                        r3 = True
                        break
                if r1 or r2 or r3:
                    orient(a, b)
                    changed = True
    return g


# --- the sieve's public split (privci.causal.pc(method="sieve"), privci.plan_pc) --------

SIEVE_OPTIONS = ("block_rows", "max_removals", "examine_share", "threshold", "knots",
                 "responses")
SIEVE_BLOCK_ROWS = 100
SIEVE_KNOTS = 4
SIEVE_THRESHOLD = 0.5
SIEVE_EXAMINE_SHARE = 0.2


def sieve_epsilons(epsilon, max_removals, examine_share=SIEVE_EXAMINE_SHARE):
    """The sieve's public split: each of ``max_removals`` (sieve, examination) rounds gets
    ``epsilon / max_removals``, of which ``examine_share`` pays the examination.

    Examples
    --------
    >>> split = sieve_epsilons(5.0, 10, 0.2)
    >>> round(split["sieve"], 9), round(split["examine"], 9), split["rounds"]
    (0.4, 0.1, 10)
    """
    eps = V.positive_finite(epsilon, "epsilon")
    c = V.check_int(max_removals, "max_removals", 1)
    share = float(examine_share)
    per = eps / c
    # round down on the grid 2^-40 so that c rounds never exceed epsilon in floating point
    e1 = math.floor(per * (1.0 - share) * 2.0 ** 40) / 2.0 ** 40
    e2 = math.floor(per * share * 2.0 ** 40) / 2.0 ** 40
    return {"sieve": e1, "examine": e2, "rounds": c}
