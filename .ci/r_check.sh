#!/usr/bin/env bash
# The R package in r-wrapper/: R CMD build, then R CMD check --no-manual (which runs the
# testthat tests, the examples and the vignette against the given Python), then install it.
# Fails on any ERROR or WARNING, and if the testthat tests skipped instead of running.
#
# usage: .ci/r_check.sh /path/to/python    (a Python with privci installed and numpy < 2,
#                                            which Debian's reticulate 1.28 needs)
set -euo pipefail
python="${1:?usage: .ci/r_check.sh /path/to/python (with privci and numpy < 2)}"
root="$(cd "$(dirname "$0")/.." && pwd)"
export RETICULATE_PYTHON="$python"
export NOT_CRAN=true

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cd "$work"

Rscript -e 'roxygen2::roxygenise("'"$root"'/r-wrapper", roclets = c("rd", "namespace"))' >/dev/null
if ! git -C "$root" diff --quiet -- r-wrapper/man r-wrapper/NAMESPACE; then
  echo "r-wrapper/man or NAMESPACE is out of date with the roxygen comments:" >&2
  git -C "$root" diff --stat -- r-wrapper/man r-wrapper/NAMESPACE >&2
  exit 1
fi

R CMD build "$root/r-wrapper"
tarball="$(ls privci_*.tar.gz)"
if ! R CMD check --no-manual "$tarball" >check.log 2>&1; then
  cat check.log
  exit 1
fi
cat check.log
status="$(grep '^Status:' check.log)"
tests="$(grep -E '^\[ FAIL [0-9]+ \| WARN [0-9]+ \| SKIP [0-9]+ \| PASS [0-9]+ \]' \
         privci.Rcheck/tests/testthat.Rout | tail -n 1)"
echo "R CMD check: $status"
echo "testthat:    $tests"
if grep -qE 'ERROR|WARNING' <<<"$status"; then
  exit 1
fi
if ! grep -qE 'FAIL 0 \| WARN 0 \| SKIP 0 \| PASS [1-9]' <<<"$tests"; then
  echo "the testthat tests did not all run and pass (is privci usable from $python?)" >&2
  exit 1
fi

R CMD INSTALL "$tarball"
Rscript -e 'stopifnot(privci::privci_available())'
