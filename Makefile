# One entry point for a fresh machine (Debian + Python 3.11, root):
#   make demo   installs the package and runs the main job on the built-in examples
#   make test   installs everything (R from Debian, two Python environments) and runs all tests
#   make docs   builds the documentation site into docs/_build/html (Python environment only)
#
# Two environments, because Debian's reticulate 1.28 cannot load NumPy 2:
#   .venv-r    numpy 1.26.4 + rpy2<3.6: the whole suite, R wrapper and rpy2 parity included
#   .venv-np2  numpy 2.x: the Python suite again (tests marked `r` deselected)

PYTHON ?= python3
VENV_R := .venv-r
VENV_NP2 := .venv-np2
APT_PACKAGES := r-base-core r-base-dev r-cran-reticulate r-cran-testthat r-cran-knitr \
                r-cran-rmarkdown r-cran-roxygen2 pandoc
PYTEST_ARGS ?=

.PHONY: demo test system venvs test-python test-r vignettes-quick docs clean

demo:
	$(PYTHON) -m pip install --quiet .
	$(PYTHON) -m privci demo

system:
	@if ! command -v R >/dev/null || ! Rscript -e 'for (p in c("reticulate","testthat","knitr","rmarkdown","roxygen2")) stopifnot(requireNamespace(p, quietly=TRUE))' >/dev/null 2>&1 || ! command -v pandoc >/dev/null; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(APT_PACKAGES) >/dev/null; \
	fi

$(VENV_R)/.done: pyproject.toml
	$(PYTHON) -m venv $(VENV_R)
	$(VENV_R)/bin/pip install --quiet --upgrade pip
	$(VENV_R)/bin/pip install --quiet "numpy==1.26.4" "pyarrow<21" ".[test,r,causal-nopgmpy]"  # pgmpy 1.1 needs numpy>=2; pyarrow 26 needs numpy>=2 (20 works with 1.26)
	touch $@

$(VENV_NP2)/.done: pyproject.toml
	$(PYTHON) -m venv $(VENV_NP2)
	$(VENV_NP2)/bin/pip install --quiet --upgrade pip
	$(VENV_NP2)/bin/pip install --quiet "numpy>=2" ".[test,docs,causal]"
	touch $@

venvs: system $(VENV_R)/.done $(VENV_NP2)/.done
	# reinstall the package itself (not its dependencies) so the venvs test this checkout
	$(VENV_R)/bin/pip install --quiet --no-deps --force-reinstall .
	$(VENV_NP2)/bin/pip install --quiet --no-deps --force-reinstall .

test-r: venvs
	bash .ci/r_check.sh $(CURDIR)/$(VENV_R)/bin/python

test-python: venvs
	RETICULATE_PYTHON=$(CURDIR)/$(VENV_R)/bin/python $(VENV_R)/bin/python -m pytest tests $(PYTEST_ARGS)
	$(VENV_NP2)/bin/python -c "import numpy; assert numpy.__version__ >= '2', numpy.__version__; print('numpy', numpy.__version__)"
	$(VENV_NP2)/bin/python -m pytest tests -m "not r" $(PYTEST_ARGS)

SHARED ?= $(CURDIR)/../shared

vignettes-quick: venvs
	MPLBACKEND=Agg PYTHON=$(CURDIR)/$(VENV_NP2)/bin/python sh vignettes/run_all.sh $(SHARED)/data/concrete.csv --quick

# the documentation site (docs/, Sphinx): warnings are errors; nitpicky for privci's own
# references (docs/_ext/privci_docs.py); -E rereads every page so no warning is skipped
# MathJax is the docs extra's sphinx-mathjax-offline, copied into _static: no CDN
docs: $(VENV_NP2)/.done
	$(VENV_NP2)/bin/python -m sphinx -b html -E -W --keep-going -n docs docs/_build/html
	@echo "documentation: $(CURDIR)/docs/_build/html/index.html"

test: test-r vignettes-quick test-python docs

clean:
	rm -rf $(VENV_R) $(VENV_NP2) build *.egg-info docs/_build docs/_generated
