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
