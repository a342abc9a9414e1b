"""The package's import graph has no cycle (issue 22): imports point only downward.

Every ``import`` statement of every module of ``privci`` is read with :mod:`ast`, at
module level and inside functions alike (a function-level import is still a dependency;
it only delays it), and the graph of imports between privci's own modules must be
acyclic.  The package ``__init__`` (the public names) sits on top and is left out: it
imports the API modules, and no module imports it.
"""

import ast
import os

import pytest

PKG = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "python",
                   "privci")
MODULES = sorted(f[:-3] for f in os.listdir(PKG) if f.endswith(".py"))

#: Cycles left on purpose, each with the reason and what removes it.  An entry that no
#: longer matches a cycle fails the test: delete it then.
KNOWN_CYCLES = {}


def _targets(node, module):
    """The privci modules one import statement in ``module`` refers to."""
    if isinstance(node, ast.Import):
        return [a.name.split(".")[1] for a in node.names
                if a.name.startswith("privci.") and a.name.count(".") >= 1]
    if isinstance(node, ast.ImportFrom):
        if node.level == 0:
            if node.module is None or not (node.module == "privci"
                                           or node.module.startswith("privci.")):
                return []
            base = node.module.split(".")[1:]
        elif node.level == 1:
            base = node.module.split(".") if node.module else []
        else:   # pragma: no cover - privci has no subpackages
            raise AssertionError(f"{module}: import from outside the package")
        if base:
            return [base[0]]
        # ``from . import a, b`` or ``from privci import a``: modules, or public names of
        # the package (which would be an edge to __init__)
        return [a.name if a.name in MODULES else "__init__" for a in node.names]
    return []


def import_graph():
    graph = {}
    for mod in MODULES:
        with open(os.path.join(PKG, mod + ".py"), encoding="utf-8") as fh:
            tree = ast.parse(fh.read(), filename=mod + ".py")
        deps = set()
        for node in ast.walk(tree):
            deps.update(_targets(node, mod))
        deps.discard(mod)
        graph[mod] = deps
    return graph


def cycles(graph):
    """The strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_graph_is_read():
    graph = import_graph()
    assert "gcm" in graph and "_validation" in graph["gcm"]
    assert "_dask" in graph["gcm"]          # a function-level import counts
    assert "mechanisms" in graph["_spline"]


def test_no_module_imports_the_package():
    graph = import_graph()
    assert [m for m, deps in graph.items() if "__init__" in deps and m != "__init__"] == []


def test_no_import_cycle():
    graph = import_graph()
    graph.pop("__init__", None)
    found = [c for c in cycles(graph) if frozenset(c) not in KNOWN_CYCLES]
    detail = []
    for comp in found:
        for m in comp:
            detail.append(f"  {m} -> {', '.join(sorted(d for d in graph[m] if d in comp))}")
    assert found == [], ("privci's import graph has a cycle (imports must point only "
                         "downward; move the shared helper into a lower module):\n"
                         + "\n".join(detail))


def test_known_cycles_still_exist():
    graph = import_graph()
    graph.pop("__init__", None)
    found = {frozenset(c) for c in cycles(graph)}
    gone = [sorted(c) for c in KNOWN_CYCLES if c not in found]
    assert gone == [], f"these cycles are gone: delete them from KNOWN_CYCLES: {gone}"


@pytest.mark.parametrize("graph,expected", [
    ({"a": {"b"}, "b": {"c"}, "c": set()}, []),
    ({"a": {"b"}, "b": {"a"}}, [["a", "b"]]),
    ({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}, [["a", "b", "c"]]),
])
def test_cycle_finder(graph, expected):
    assert cycles(graph) == expected
