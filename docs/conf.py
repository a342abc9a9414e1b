"""Sphinx configuration for the privci documentation site.

Build with ``make docs`` (warnings are errors, nitpicky for privci's own
references).  Pages that must follow the code (the API reference, the CLI
help, the R usage, the claims table of the vignettes) are generated at build
time by ``_ext/privci_docs.py`` into ``_generated/`` (not committed).
"""

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.join(HERE, "_ext"))

import importlib.util  # noqa: E402

import privci  # noqa: E402
from privci_docs import MODULES  # noqa: E402

# ``.. only:: privci_plan`` and the like: prose about a module that may not exist yet
for _mod in MODULES:
    if importlib.util.find_spec(f"privci.{_mod}") is not None:
        tags.add(f"privci_{_mod}")  # noqa: F821 - injected by Sphinx
# the data-frame call form, once the public tests accept ``data=``
try:
    import inspect as _inspect

    if "data" in _inspect.signature(privci.privgcm).parameters:
        tags.add("privci_data_frames")  # noqa: F821
except (TypeError, ValueError):  # pragma: no cover
    pass

project = "privci"
author = "privci developers"
copyright = "privci developers"
version = release = privci.__version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    # MathJax 3 copied into _static (the docs extra): pages typeset their formulas offline,
    # with no CDN
    "sphinx-mathjax-offline",
    "numpydoc",
    "privci_docs",
]

root_doc = "index"
# generated fragments that are included into pages, not pages themselves
exclude_patterns = ["_build", "Thumbs.db", ".DS_Store", "_generated/api_index.rst",
                    "_generated/cli.rst", "_generated/r_usage.rst", "_generated/vignettes.rst",
                    "_generated/vignette_scripts.rst"]
templates_path = []
html_static_path = ["_static"]
html_css_files = ["privci.css"]

# autodoc / autosummary / numpydoc
autodoc_default_options = {"member-order": "bysource"}
autodoc_typehints = "none"
autosummary_generate = False
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_xref_param_type = False
numpydoc_validation_checks = set()

# Nitpicky for privci's own references only: an unresolved reference whose
# target is a privci name warns (and fails the -W build); references to
# numpy, pandas, the standard library, ... are left unresolved silently
# (see privci_docs.missing_reference).
nitpicky = True

# Math: `$...$` is not used; write :math:`...` and .. math:: blocks.
math_number_all = False

html_theme = "pydata_sphinx_theme"
html_title = f"privci {release}"
html_theme_options = {
    "navigation_with_keys": False,
    "show_toc_level": 2,
    "header_links_before_dropdown": 7,
    "secondary_sidebar_items": ["page-toc"],
    "footer_start": ["copyright"],
    "footer_end": ["sphinx-version"],
}
html_sidebars = {"**": ["sidebar-nav-bs"]}
html_show_sourcelink = False
html_copy_source = False
