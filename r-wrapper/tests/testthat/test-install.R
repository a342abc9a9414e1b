# install_privci(): the pieces that need no network run always; the full
# installation (a virtual environment with privci from this checkout) runs
# when PRIVCI_TEST_INSTALL names the checkout, e.g. from
# r-wrapper/tools/check-install-privci.sh, which also starts from a clean R
# library. It downloads privci's dependencies, so it is not part of R CMD check.

test_that("the numpy requirement follows the reticulate version", {
  expect_identical(privci:::.numpy_requirement("1.28"), "numpy<2")
  expect_identical(privci:::.numpy_requirement("1.35.9"), "numpy<2")
  expect_null(privci:::.numpy_requirement("1.36"))
  expect_null(privci:::.numpy_requirement("1.40.1"))
  expect_identical(privci:::.numpy_requirement(),
                   if (packageVersion("reticulate") < "1.36") "numpy<2" else NULL)
})

test_that("install_privci checks its arguments before doing anything", {
  expect_error(install_privci(envname = ""), "`envname` must be one non-empty string",
               fixed = TRUE)
  expect_error(install_privci(package = c("a", "b")), "`package` must be one non-empty string",
               fixed = TRUE)
  expect_error(install_privci(new_env = "yes"), "`new_env` must be TRUE or FALSE", fixed = TRUE)
  expect_error(install_privci(pip_options = 1), "`pip_options` must be a character vector",
               fixed = TRUE)
  expect_error(install_privci(extra_packages = 2), "`extra_packages` must be NULL",
               fixed = TRUE)
  expect_error(install_privci(numpy = NA_character_), "`numpy` must be one non-empty string",
               fixed = TRUE)
  expect_error(install_privci(warm = "yes"), "`warm` must be TRUE or FALSE", fixed = TRUE)
})

test_that("pip runs without R's library directories in LD_LIBRARY_PATH", {
  r <- "/usr/lib/R/lib:/usr/lib/x86_64-linux-gnu"
  expect_identical(privci:::.ld_library_path_without_r(r, r), "")
  expect_identical(privci:::.ld_library_path_without_r(paste0(r, ":/opt/lib"), r), "/opt/lib")
  expect_identical(privci:::.ld_library_path_without_r("/opt/lib", r), "/opt/lib")
  expect_identical(privci:::.ld_library_path_without_r(NA, r), "")
  expect_identical(privci:::.ld_library_path_without_r("/opt/lib", ""), "/opt/lib")
  # R's own start-up paths, as its ldpaths script computes them, include R's lib directory
  r_paths <- privci:::.r_ld_library_path()
  if (file.exists(file.path(R.home("etc"), "ldpaths"))) {
    expect_true(normalizePath(R.home("lib")) %in%
                  normalizePath(strsplit(r_paths, ":", fixed = TRUE)[[1L]], mustWork = FALSE))
    expect_false(R.home("lib") %in% strsplit(privci:::.ld_library_path_without_r(), ":")[[1L]])
  } else {
    expect_identical(r_paths, "")
  }
})

test_that("a source path becomes an absolute path, a requirement stays as it is", {
  dir <- tempfile("checkout")
  dir.create(dir)
  on.exit(unlink(dir, recursive = TRUE))
  owd <- setwd(dirname(dir))
  on.exit(setwd(owd), add = TRUE)
  expect_identical(privci:::.pip_requirement(basename(dir)), normalizePath(dir))
  expect_identical(privci:::.pip_requirement("privci==0.1.0"), "privci==0.1.0")
})

test_that("the startup hint appears only when nothing points to privci's Python", {
  none <- c("", "")
  expect_null(privci:::.startup_hint(env = c("/some/python", ""), running = FALSE,
                                     have_env = FALSE, python3 = ""))
  expect_null(privci:::.startup_hint(env = none, running = TRUE, have_env = FALSE,
                                     python3 = ""))
  expect_null(privci:::.startup_hint(env = none, running = FALSE, have_env = TRUE,
                                     python3 = ""))
  hint <- privci:::.startup_hint(env = none, running = FALSE, have_env = FALSE, python3 = "")
  expect_match(hint, "Run install_privci() once", fixed = TRUE)
  # a python3 that has privci (the one the tests use, when it is usable) silences it
  if (privci_available()) {
    py <- reticulate::py_config()$python
    expect_null(privci:::.startup_hint(env = none, running = FALSE, have_env = FALSE,
                                       python3 = py))
  }
  # and one without it does not
  fake <- tempfile("python3")
  writeLines(c("#!/bin/sh", "exit 1"), fake)
  Sys.chmod(fake, "0755")
  on.exit(unlink(fake))
  expect_match(privci:::.startup_hint(env = none, running = FALSE, have_env = FALSE,
                                      python3 = fake), "install_privci()", fixed = TRUE)
})

test_that("the error when privci cannot be imported points to install_privci()", {
  msg <- privci:::.install_message(simpleError("no module named 'privci'"))
  expect_match(msg, "run privci::install_privci() once", fixed = TRUE)
  expect_match(msg, "Reason: no module named 'privci'", fixed = TRUE)
  expect_match(privci:::.after_install_hint("r-privci"), "A new R session uses this environment",
               fixed = TRUE)
  expect_match(privci:::.after_install_hint("/tmp/env"),
               "reticulate::use_virtualenv(\"/tmp/env\", required = TRUE)", fixed = TRUE)
})

test_that("install_privci() sets up a working environment (PRIVCI_TEST_INSTALL)", {
  checkout <- Sys.getenv("PRIVCI_TEST_INSTALL")
  if (!nzchar(checkout)) {
    # the installation itself downloads privci's dependencies: it runs by hand, see
    # r-wrapper/tools/check-install-privci.sh (R CMD check must not install software)
    expect_identical(checkout, "")
    return(invisible())
  }
  root <- tempfile("venvs")
  dir.create(root)
  env <- file.path(root, "r-privci")
  py <- install_privci(envname = env, package = checkout)
  expect_true(file.exists(py))
  versions <- system2(py, c("-c", shQuote("import numpy, privci; print(numpy.__version__)")),
                      stdout = TRUE)
  if (packageVersion("reticulate") < "1.36") {
    expect_true(package_version(versions) < "2")
  }
  # a fresh R session finds the environment by its name, through WORKON_HOME
  script <- tempfile(fileext = ".R")
  writeLines(c(
    "library(privci)",
    "stopifnot(privci_available())",
    "set.seed(1); d <- data.frame(X = rnorm(60), Y = rnorm(60), Z = rnorm(60))",
    "res <- gcm(Y ~ X | Z, data = d, ridge_lambda = 0.1)",
    "cat(reticulate::py_config()$python, res$p.value, '\\n')"
  ), script)
  # `env -u`: reticulate treats an empty RETICULATE_PYTHON as a (missing) path
  out <- system2("env", c("-u", "RETICULATE_PYTHON", "-u", "RETICULATE_PYTHON_ENV",
                          paste0("WORKON_HOME=", root),
                          paste0("R_LIBS=", paste(.libPaths(), collapse = ":")),
                          file.path(R.home("bin"), "Rscript"), script),
                 stdout = TRUE, stderr = TRUE)
  expect_null(attr(out, "status"))
  expect_match(paste(out, collapse = "\n"), normalizePath(env), fixed = TRUE)
})
