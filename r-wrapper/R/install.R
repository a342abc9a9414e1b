#' Install the Python side of privci
#'
#' Sets up, in one call, a Python environment that this package can use: a
#' virtual environment created by [reticulate::virtualenv_create()], with the
#' Python package `privci` installed into it by pip, together with a numpy
#' that the installed reticulate can exchange arrays with (numpy < 2 for
#' reticulate < 1.36), as `tensorflow::install_tensorflow()` does for
#' TensorFlow. Run it once per machine (and again to update); it needs a
#' Python (>= 3.10) with the `venv` module, and access to the package index
#' unless `package` and `pip_options` point at local files.
#'
#' After the installation, restart R: the next session finds the environment
#' `"r-privci"` by its name the first time a test needs Python (reticulate
#' looks for an environment called `r-<module>`), unless `RETICULATE_PYTHON`
#' or [reticulate::use_python()] choose another Python. An environment with
#' another name is selected with
#' `reticulate::use_virtualenv("<envname>", required = TRUE)` before the first
#' test.
#'
#' @param envname Name of the virtual environment (created under
#'   [reticulate::virtualenv_root()]) or a path to one.
#' @param package What pip installs as the Python package: `"privci"` (the
#'   latest release from the package index), a pip requirement such as
#'   `"privci==0.1.0"`, or the path of a source checkout or of a wheel.
#' @param python The Python the environment is based on; `NULL` lets
#'   reticulate choose (`RETICULATE_PYTHON`, else `python3` on the `PATH`).
#' @param new_env `TRUE` deletes an existing environment of that name first;
#'   `FALSE` (default) installs into it.
#' @param extra_packages Further pip requirements installed in the same pip
#'   call (e.g. `"pandas"`).
#' @param pip_options Further options for pip, e.g.
#'   `c("--no-index", "--find-links=/path/to/wheels")` on a machine without
#'   access to the index.
#' @param numpy The numpy requirement; the default is `"numpy<2"` when the
#'   installed reticulate is older than 1.36 (which cannot load numpy 2) and
#'   `NULL` (whatever privci requires) otherwise.
#' @param warm `TRUE` (default): after the installation, run
#'   `python -m privci warm` in the environment, which compiles the Python
#'   package's numba kernels once and caches them (about a minute on a 2-core
#'   machine); without it the first test on more than 32768 rows of every new
#'   installation compiles them (tens of seconds; smaller tests run numpy
#'   passes and compile nothing). `FALSE` skips it.
#' @return The path of the environment's Python, invisibly.
#' @seealso [privci_available()] to check the set-up.
#' @export
#' @examples
#' \dontrun{
#' install_privci()                            # from the package index
#' install_privci(package = "~/src/privci")    # from a source checkout
#' }
install_privci <- function(envname = "r-privci", package = "privci", python = NULL,
                           new_env = FALSE, extra_packages = NULL,
                           pip_options = character(), numpy = .numpy_requirement(),
                           warm = TRUE) {
  .check_string(envname, "envname")
  if (!(isTRUE(warm) || isFALSE(warm))) {
    stop("`warm` must be TRUE or FALSE; got ", .expr(warm), " instead.", call. = FALSE)
  }
  .check_string(package, "package")
  if (!is.null(python)) .check_string(python, "python")
  if (!(isTRUE(new_env) || isFALSE(new_env))) {
    stop("`new_env` must be TRUE or FALSE; got ", .expr(new_env), " instead.", call. = FALSE)
  }
  if (!is.null(numpy)) .check_string(numpy, "numpy")
  if (!is.null(extra_packages) && !is.character(extra_packages)) {
    stop("`extra_packages` must be NULL or a character vector; got ", .expr(extra_packages),
         " instead.", call. = FALSE)
  }
  if (!is.character(pip_options)) {
    stop("`pip_options` must be a character vector; got ", .expr(pip_options), " instead.",
         call. = FALSE)
  }
  requirements <- c(.pip_requirement(package), numpy, extra_packages)

  # Python and pip run as child processes of R: without R's library directories
  # in LD_LIBRARY_PATH, which can make a shared-library Python load another
  # build's libpython (then its ssl module, and with it pip's downloads, fail).
  old_ld <- Sys.getenv("LD_LIBRARY_PATH", unset = NA)
  Sys.setenv(LD_LIBRARY_PATH = .ld_library_path_without_r(old_ld))
  on.exit(if (is.na(old_ld)) Sys.unsetenv("LD_LIBRARY_PATH") else
    Sys.setenv(LD_LIBRARY_PATH = old_ld), add = TRUE)
  if (new_env && reticulate::virtualenv_exists(envname)) {
    reticulate::virtualenv_remove(envname, confirm = FALSE)
  }
  if (!reticulate::virtualenv_exists(envname)) {
    # packages = FALSE: reticulate's default would install the newest numpy first
    reticulate::virtualenv_create(envname, python = python, packages = FALSE)
  }
  reticulate::virtualenv_install(envname, packages = requirements,
                                 pip_options = pip_options)

  env_python <- reticulate::virtualenv_python(envname)
  versions <- suppressWarnings(system2(
    env_python,
    c("-c", shQuote("import numpy, privci; print(privci.__version__, numpy.__version__)")),
    stdout = TRUE, stderr = TRUE))
  status <- attr(versions, "status")
  if (!is.null(status) && status != 0L) {
    stop("the virtual environment ", shQuote(envname), " was set up, but importing privci ",
         "in it failed:\n", paste(versions, collapse = "\n"), call. = FALSE)
  }
  versions <- strsplit(versions[length(versions)], " ", fixed = TRUE)[[1L]]
  message(sprintf("privci %s with numpy %s is installed in the virtual environment %s (%s).",
                  versions[1L], versions[2L], shQuote(envname), env_python))
  if (warm) {
    message("Compiling privci's numba kernels once (python -m privci warm; about a minute)...")
    out <- suppressWarnings(system2(env_python, c("-m", "privci", "warm"), stdout = TRUE,
                                    stderr = TRUE))
    if (!is.null(attr(out, "status")) && attr(out, "status") != 0L) {
      # not fatal: the first test compiles what is missing
      warning("`python -m privci warm` did not finish cleanly; the first test will compile ",
              "what is missing:\n", paste(utils::tail(out, 5L), collapse = "\n"),
              call. = FALSE)
    } else {
      message(out[length(out)])
    }
  }
  message(.after_install_hint(envname))
  invisible(env_python)
}

# LD_LIBRARY_PATH without the directories that R's start-up script
# (R_HOME/etc/ldpaths) put in front of it.
.ld_library_path_without_r <- function(current = Sys.getenv("LD_LIBRARY_PATH", unset = NA),
                                       r_paths = .r_ld_library_path()) {
  if (is.na(current)) {
    return("")
  }
  entries <- strsplit(current, ":", fixed = TRUE)[[1L]]
  drop <- strsplit(r_paths, ":", fixed = TRUE)[[1L]]
  paste(entries[nzchar(entries) & !(entries %in% drop)], collapse = ":")
}

# R_LD_LIBRARY_PATH as R's start-up script computes it (R does not export it).
.r_ld_library_path <- function(ldpaths = file.path(R.home("etc"), "ldpaths")) {
  if (!file.exists(ldpaths)) {
    return("")
  }
  script <- paste0(". ", shQuote(ldpaths), "; printf '%s' \"$R_LD_LIBRARY_PATH\"")
  out <- tryCatch(suppressWarnings(system2(
    "env", c("-u", "LD_LIBRARY_PATH", "-u", "R_LD_LIBRARY_PATH", "-u", "R_JAVA_LD_LIBRARY_PATH",
             paste0("R_HOME=", shQuote(R.home())), "sh", "-c", shQuote(script)),
    stdout = TRUE, stderr = FALSE)), error = function(e) character())
  if (length(out) != 1L || !is.null(attr(out, "status"))) "" else out
}

# numpy < 2 for reticulate versions that cannot load numpy 2.
.numpy_requirement <- function(reticulate_version = utils::packageVersion("reticulate")) {
  if (package_version(reticulate_version) < "1.36") "numpy<2" else NULL
}

# A path (checkout or wheel) becomes an absolute path; anything else is a pip
# requirement and is passed as it is.
.pip_requirement <- function(package) {
  if (file.exists(package)) normalizePath(package, mustWork = TRUE) else package
}

.after_install_hint <- function(envname) {
  use <- if (identical(envname, "r-privci"))
    "A new R session uses this environment the first time a privci test runs" else
    paste0("Select it in a new R session, before the first privci test, with ",
           "reticulate::use_virtualenv(\"", envname, "\", required = TRUE)")
  forced <- Sys.getenv("RETICULATE_PYTHON")
  paste0(
    if (reticulate::py_available(initialize = FALSE))
      "Python is already running in this R session, so restart R. " else "",
    use,
    if (nzchar(forced))
      paste0("; RETICULATE_PYTHON is set (", forced, ") and wins: unset it first.") else
      " (unless reticulate::use_python() chooses another Python).")
}

.check_string <- function(value, name) {
  if (!(is.character(value) && length(value) == 1L && !is.na(value) && nzchar(value))) {
    stop(sprintf("`%s` must be one non-empty string; got %s instead.", name, .expr(value)),
         call. = FALSE)
  }
}
