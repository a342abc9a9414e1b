#' privci: differentially private conditional independence tests
#'
#' An R interface to the Python package `privci`. The tests are computed in
#' Python (through \pkg{reticulate}); this package converts R data, maps R's
#' argument conventions to Python's, and returns objects of class `htest`.
#'
#' * [gcm()]: the non-private generalised covariance measure test (Shah and
#'   Peters), a drop-in for `GeneralisedCovarianceMeasure::gcm.test()` with
#'   kernel ridge regression.
#' * [privgcm()]: PrivGCM, the differentially private GCM test
#'   (Algorithm 1 of Kalemaj, Kasiviswanathan and Ramdas).
#' * [privcrt()]: PrivCRT, the differentially private conditional
#'   randomization test (Algorithm 2), with a Gaussian model for X given Z
#'   ([gaussian_model_x()]).
#' * [crt()]: the non-private conditional randomization test.
#' * [privci_available()]: whether the Python package can be used;
#'   [install_privci()] sets it up.
#'
#' Every test takes either vectors (`gcm(x, y, z)`) or a formula
#' (`gcm(Y ~ X | Z1 + Z2, data = d)`).
#'
#' @section Python set-up:
#' The Python package is loaded lazily, the first time a test runs. The
#' simplest set-up is one call, once: [install_privci()] creates a virtual
#' environment `"r-privci"` with the Python package and a numpy that this
#' reticulate can load, which later sessions find by name. Alternatively,
#' install it into the Python that reticulate uses (`python -m pip install
#' privci`, or `python -m pip install -e <checkout>` from a source checkout),
#' or point reticulate at a Python that has it with
#' `Sys.setenv(RETICULATE_PYTHON = "/path/to/python")` before the first
#' test. reticulate versions before 1.36 cannot convert arrays of numpy 2,
#' so with them that Python needs numpy < 2.
#'
#' @section Randomness:
#' R's random number generator is never used: noise, resamples and
#' multiplier draws all come from numpy in Python. `seed = NULL` gives fresh
#' entropy (and, for the private tests, OpenDP's samplers, which are
#' hardened against floating-point attacks); a whole number makes the result
#' reproducible (numpy noise, not hardened, for simulations).
#'
#' @references
#' Kalemaj, I., Kasiviswanathan, S. P. and Ramdas, A. Differentially private
#' conditional independence testing.
#'
#' Shah, R. D. and Peters, J. (2020). The hardness of conditional
#' independence testing and the generalised covariance measure. Annals of
#' Statistics 48(3), 1514-1538.
#' @keywords internal
"_PACKAGE"

# The Python module, bound lazily in .onLoad (reticulate's delayed import):
# Python starts only when a test first needs it.
privci_py <- NULL

.onLoad <- function(libname, pkgname) {
  privci_py <<- reticulate::import(
    "privci",
    delay_load = list(on_error = function(e) stop(.install_message(e), call. = FALSE))
  )
}

.install_message <- function(e = NULL) {
  python <- tryCatch(reticulate::py_config()$python, error = function(err) NA_character_)
  paste0(
    "The Python package 'privci' could not be imported by reticulate",
    if (!is.na(python)) paste0(" (Python: ", python, ")") else "", ".\n",
    if (!is.null(e)) paste0("Reason: ", conditionMessage(e), "\n") else "",
    "To set it up in one call, run privci::install_privci() once and restart R ",
    "(it creates the virtual environment 'r-privci'; see ?install_privci). ",
    "Or install it into that Python with `python -m pip install privci` ",
    "(from a source checkout: `python -m pip install -e <checkout>`), or choose a Python ",
    "that has it with Sys.setenv(RETICULATE_PYTHON = \"/path/to/python\") in a fresh R ",
    "session, before the first test. With reticulate < 1.36 that Python needs numpy < 2."
  )
}

.onAttach <- function(libname, pkgname) {
  hint <- .startup_hint()
  if (!is.null(hint)) {
    packageStartupMessage(hint)
  }
}

# A one-line pointer to install_privci() when nothing says where privci's
# Python is: no RETICULATE_PYTHON(_ENV), no running Python, no "r-privci"
# environment, and no privci importable by python3 on the PATH. Python is not
# started (one subprocess at most).
.startup_hint <- function(env = Sys.getenv(c("RETICULATE_PYTHON", "RETICULATE_PYTHON_ENV")),
                          running = reticulate::py_available(initialize = FALSE),
                          have_env = reticulate::virtualenv_exists("r-privci"),
                          python3 = Sys.which("python3")) {
  if (any(nzchar(env)) || isTRUE(running) || isTRUE(have_env)) {
    return(NULL)
  }
  if (nzchar(python3)) {
    found <- suppressWarnings(system2(
      python3, c("-c", shQuote(paste0("import importlib.util, sys; ",
                                      "sys.exit(importlib.util.find_spec('privci') is None)"))),
      stdout = FALSE, stderr = FALSE))
    if (identical(found, 0L)) {
      return(NULL)
    }
  }
  paste0("privci: the Python package privci was not found. Run install_privci() once to ",
         "set it up (see ?install_privci).")
}

#' Is the Python package privci usable?
#'
#' Checks, without raising an error, that reticulate can start Python, import
#' the Python package `privci` and exchange numpy arrays with it. Use it to
#' skip examples and tests on machines without the Python side.
#'
#' @return `TRUE` or `FALSE`.
#' @export
#' @examples
#' privci_available()
privci_available <- function() {
  ok <- tryCatch(
    reticulate::py_module_available("privci") && reticulate::py_numpy_available(),
    error = function(e) FALSE
  )
  isTRUE(ok)
}
