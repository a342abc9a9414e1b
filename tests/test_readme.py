"""The README's Python example runs as written (so the README stays true to the code)."""

import os
import re
import warnings

README = os.path.join(os.path.dirname(__file__), "..", "README.md")


def test_readme_python_example_runs():
    with open(README, encoding="utf-8") as fh:
        blocks = re.findall(r"```python\n(.*?)```", fh.read(), re.S)
    assert blocks, "README.md has no ```python block"
    ns = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        exec(compile(blocks[0], "README.md", "exec"), ns)       # noqa: S102 - our own text
    res = ns["res"]
    assert 0 <= res.pvalue <= 1 and res.fit_check is not None


def test_readme_power_vignette_measures_the_readme_call():
    """vignettes/readme_power.py measures the README's own call: same data, same arguments."""
    import ast
    import importlib.util
    with open(README, encoding="utf-8") as fh:
        block = re.findall(r"```python\n(.*?)```", fh.read(), re.S)[0]
    call = next(node for node in ast.walk(ast.parse(block))
                if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "res")
    kw = {k.arg: ast.literal_eval(k.value) for k in call.value.keywords}
    path = os.path.join(os.path.dirname(__file__), "..", "vignettes", "readme_power.py")
    spec = importlib.util.spec_from_file_location("readme_power", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert kw == mod.README_PUBLIC
    assert "np.sin(z[:, 0]) + rng.normal(size=2000)" in block
    assert "0.8 * (x - np.sin(z[:, 0]))" in block
