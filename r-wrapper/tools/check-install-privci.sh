#!/usr/bin/env bash
# install_privci() on this machine, from a clean R library and a clean Python environment:
#
#   1. build the R package and install it into a temporary R_LIBS_USER; R_LIBS_SITE is cut
#      down to Debian's site library (reticulate, testthat), so no other privci can be found;
#   2. run r-wrapper/tests/testthat/test-install.R with PRIVCI_TEST_INSTALL=<checkout> and
#      WORKON_HOME in the temporary directory: install_privci(package = <checkout>) creates
#      the virtual environment "r-privci" from scratch (pip install <checkout>, plus numpy<2
#      with reticulate < 1.36), and a fresh Rscript, with RETICULATE_PYTHON unset, finds it by
#      name and runs a formula-form test.
#
# pip downloads privci's Python dependencies from the package index (its cache helps on a
# second run), so this is not part of R CMD check (which must not install software) nor of
# `make test`: run it by hand after changing install_privci().
#
# usage: r-wrapper/tools/check-install-privci.sh [checkout]    (default: this checkout)
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
checkout="$(cd "${1:-$root}" && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
unset RETICULATE_PYTHON RETICULATE_PYTHON_ENV
export R_LIBS_USER="$work/lib"
export R_LIBS_SITE="${PRIVCI_R_LIBS_SITE:-/usr/lib/R/site-library}"
export WORKON_HOME="$work/venvs"
mkdir -p "$R_LIBS_USER" "$WORKON_HOME"
cd "$work"

R CMD build --no-build-vignettes "$root/r-wrapper" >/dev/null
R CMD INSTALL -l "$R_LIBS_USER" privci_*.tar.gz >/dev/null
Rscript -e 'p <- find.package("privci"); cat("privci from", p, "\n");
            stopifnot(startsWith(p, Sys.getenv("R_LIBS_USER")))'

start=$(date +%s)
PRIVCI_TEST_INSTALL="$checkout" Rscript -e '
  library(testthat)
  library(privci)
  res <- test_file(file.path(commandArgs(TRUE)[1], "r-wrapper/tests/testthat/test-install.R"),
                   reporter = "summary", stop_on_failure = TRUE)
  df <- as.data.frame(res)
  cat(sprintf("test-install.R: %d passed, %d failed, %d skipped\n",
              sum(df$passed), sum(df$failed), sum(df$skipped)))
  stopifnot(sum(df$failed) == 0, sum(df$skipped) == 0, !any(df$error))' "$root"
echo "install_privci() check took $(( $(date +%s) - start )) s"
