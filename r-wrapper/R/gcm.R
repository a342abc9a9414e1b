#' Generalised covariance measure test (non-private)
#'
#' Tests whether X and Y are conditionally independent given Z with the
#' generalised covariance measure (GCM) of Shah and Peters: regress X and Y
#' on Z by kernel ridge regression, multiply the residuals and compare their
#' normalised mean with a standard normal (or, for several columns, the
#' maximum with a Gaussian multiplier bootstrap). Computed by the Python
#' function `privci.gcm`, which reproduces
#' `GeneralisedCovarianceMeasure::gcm.test(X, Y, Z, regr.method = "kernel.ridge")`.
#'
#' @section Switching from gcm.test:
#' `gcm()` accepts the argument names of
#' `GeneralisedCovarianceMeasure::gcm.test()`, so a call such as
#' `gcm.test(X, Y, Z, regr.method = "kernel.ridge", regr.pars = list(sigma = 1, lambda = 0.1))`
#' or `gcm.test(resid.XonZ = rx, resid.YonZ = ry)` runs unchanged with
#' `privci::gcm` in place of `gcm.test`: `regr.pars$sigma` is
#' `kernel_sigma`, a single `regr.pars$lambda` is `ridge_lambda` and several
#' are the cross-validation grid `cv_lambdas`; `nsim` is `n_sim`; `alpha`
#' only sets the `reject` element. The result also has gcm.test's elements
#' `test.statistic` and `reject`. Only `regr.method = "kernel.ridge"` is
#' available; the data arguments are lower case (`x`, `y`, `z`), so calls
#' that name `X =`, `Y =`, `Z =` need those names changed.
#'
#' @section Formula interface:
#' `gcm(Y ~ X | Z1 + Z2, data = d)` (the notation of the comets package)
#' tests Y and X given Z1 and Z2, the variables looked up in `data` (a data
#' frame, a matrix with column names, or a list; without `data`, in the
#' formula's environment). Several terms on either side of `~` give several
#' columns (the multivariate test); terms may be expressions such as
#' `log(X)` or `I(Z^2)`; `.` after `|` stands for all columns of `data` not
#' used on the left of `|`; `Y ~ X` without `|` means no conditioning
#' (`z = NULL`). Factors and character columns are refused: code them as
#' numbers first. The result's `data.name` is the formula (and the data).
#'
#' @param x,y Numeric vectors, matrices or data frames with one row per
#'   observation (several columns give the multivariate max test). May be
#'   omitted when both `resid.XonZ` and `resid.YonZ` are given.
#' @param z Numeric vector, matrix or data frame (n rows), or `NULL` for no
#'   conditioning (the residuals are then `x` and `y` themselves, as in R).
#' @param formula A formula `Y ~ X | Z` (or `Y ~ X`), see the section
#'   Formula interface.
#' @param data A data frame, a matrix with column names or a list holding the
#'   variables of `formula`; `NULL` (default) looks them up in the formula's
#'   environment.
#' @param regr.method Only `"kernel.ridge"` (gcm.test's name; `"kernel_ridge"`
#'   is accepted too).
#' @param regr.pars gcm.test-style list with optional `sigma` and `lambda`
#'   (see Details).
#' @param kernel_sigma RBF kernel parameter: k(z, z') = exp(-kernel_sigma *
#'   ||z - z'||^2).
#' @param ridge_lambda `NULL` (choose lambda per column by CVST-compatible
#'   cross-validation) or a fixed ridge parameter; the fit solves
#'   alpha = (K + n lambda I)^-1 u.
#' @param cv_lambdas Cross-validation grid; `NULL` means 10^(-6:4).
#' @param cv_folds Number of contiguous, unshuffled folds (as in CVST).
#' @param n_sim Multiplier-bootstrap draws for the multivariate test.
#' @param alternative `"two.sided"`, `"less"` or `"greater"` (a positive
#'   expected conditional covariance).
#' @param seed `NULL` or a whole number: the Python `rng` for the
#'   multiplier draws (the univariate test uses no randomness).
#' @param kernel_approximation `"exact"` or `"rff"` (random Fourier features:
#'   O(n D^2) instead of O(n^3); needs a fixed `ridge_lambda`).
#' @param n_features Number of random features D for `"rff"`.
#' @param feature_seed `NULL` or a whole number: the Python `feature_rng` that
#'   draws the random frequencies.
#' @param resid.XonZ,resid.YonZ Residuals of X on Z and of Y on Z, if already
#'   computed (as in gcm.test); a missing one is computed from `x`/`y` and `z`.
#' @param nsim gcm.test's name for `n_sim`.
#' @param alpha Level used only for the gcm.test-compatible element `reject`.
#' @param center `FALSE` (default, as gcm.test) or `TRUE`: subtract the sample
#'   means of x and y before the regressions (kernel ridge regression has no
#'   intercept); use `TRUE` with `kernel_approximation = "rff"` or a fixed
#'   `ridge_lambda`.
#' @param progress `NULL` (default: only when the exact kernel regression runs
#'   at n >= 3000, where it takes seconds to minutes), `TRUE` or `FALSE`: one
#'   line on stderr before the regressions (saying what is faster) and one
#'   after.
#'
#' @section Larger n:
#' The defaults reproduce gcm.test: exact kernel ridge regression with lambda
#' chosen by 10-fold cross-validation, O(n^3) time and O(n^2) memory (at
#' n = 5000 from about 20 s to minutes on two cores). Faster:
#' `kernel_approximation = "rff", ridge_lambda = 1e-5, center = TRUE`
#' (random Fourier features, O(n D^2)). A fixed lambda must be small enough
#' for the regression to fit (1e-3 or 1e-2 broke the level on a null with
#' three columns of z); see the Python docstring of `privci.gcm`, Notes, for
#' the measured times and level.
#' @param ... For the default method: further named arguments, passed
#'   unchanged to the Python function `privci.gcm` (or to
#'   `privci.gcm_from_residuals` when residuals are given), so that options
#'   added to the Python package are usable from R without a change here;
#'   R values are converted by reticulate's defaults (`NULL` is `None`). Give
#'   full names: R matches an abbreviation of one of this function's own
#'   arguments to that argument. For the formula method:
#'   the arguments of the default method (everything but `x`, `y`, `z`).
#'
#' @return A list of class `htest` with `statistic` (`Z`, or `max|Z|` for the
#'   multivariate test), `parameter` (`n`, and `nsim` for the multivariate
#'   test), `p.value`, `estimate` (univariate: the mean of the residual
#'   products, an estimate of E\[cov(X, Y | Z)\]), `null.value`,
#'   `alternative`, `method` and `data.name`; and `resid_x`, `resid_y` (the
#'   residual matrices), `ridge_lambda_x`, `ridge_lambda_y` (lambda used per
#'   column, `NULL` without regression), `n`, `test.statistic` and `reject`.
#' @seealso [privgcm()] for the differentially private version.
#' @export
#' @examples
#' if (privci_available()) {
#'   n <- 200
#'   z <- rnorm(n)
#'   x <- sin(z) + rnorm(n)
#'   y <- cos(z) + 0.3 * x + rnorm(n)
#'   gcm(x, y, z, ridge_lambda = 0.01)
#'   # the same call as GeneralisedCovarianceMeasure::gcm.test
#'   gcm(x, y, z, regr.method = "kernel.ridge", regr.pars = list(sigma = 1, lambda = 0.01))
#'   # the formula form: Y and X given Z, columns of a data frame
#'   d <- data.frame(X = x, Y = y, Z = z)
#'   gcm(Y ~ X | Z, data = d, ridge_lambda = 0.01)
#' }
gcm <- function(x, ...) UseMethod("gcm")

#' @rdname gcm
#' @export
gcm.formula <- function(formula, data = NULL, ...) {
  f <- .formula_xyz(formula, data, if (missing(data)) NULL else .expr(substitute(data)))
  x <- f$x
  y <- f$y
  z <- f$z
  res <- gcm.default(x, y, z, ...)
  res$data.name <- f$data.name
  res
}

#' @rdname gcm
#' @export
gcm.default <- function(x, y, z = NULL, regr.method = "kernel.ridge", regr.pars = list(),
                        kernel_sigma = 1, ridge_lambda = NULL, cv_lambdas = NULL,
                        cv_folds = 10L, n_sim = 499L,
                        alternative = c("two.sided", "less", "greater"), seed = NULL,
                        kernel_approximation = "exact", n_features = 512L,
                        feature_seed = NULL, resid.XonZ = NULL, resid.YonZ = NULL,
                        nsim = NULL, alpha = 0.05, center = FALSE, progress = NULL, ...) {
  call <- match.call()
  .check_not_names(x, y, z, "gcm")
  alternative <- match.arg(alternative)
  if (!identical(regr.method, "kernel.ridge") && !identical(regr.method, "kernel_ridge")) {
    stop("`regr.method` must be \"kernel.ridge\" (the only regression privci::gcm offers); ",
         "got ", .expr(regr.method), " instead.", call. = FALSE)
  }
  unknown <- setdiff(names(regr.pars), c("sigma", "lambda"))
  if (length(regr.pars) && (is.null(names(regr.pars)) || any(names(regr.pars) == "") ||
                            length(unknown))) {
    stop("`regr.pars` may only hold `sigma` and `lambda` (as in gcm.test with ",
         "regr.method = \"kernel.ridge\"); got names ",
         .expr(names(regr.pars)), " instead.", call. = FALSE)
  }
  if (!is.null(regr.pars$sigma)) {
    if (!missing(kernel_sigma)) {
      stop("give `kernel_sigma` or `regr.pars$sigma`, not both.", call. = FALSE)
    }
    kernel_sigma <- regr.pars$sigma
  }
  if (!is.null(regr.pars$lambda)) {
    if (!is.null(ridge_lambda) || !is.null(cv_lambdas)) {
      stop("give `ridge_lambda`/`cv_lambdas` or `regr.pars$lambda`, not both.", call. = FALSE)
    }
    if (length(regr.pars$lambda) == 1L) ridge_lambda <- regr.pars$lambda
    else cv_lambdas <- regr.pars$lambda
  }
  if (!is.null(nsim)) {
    if (!missing(n_sim)) stop("give `n_sim` or `nsim`, not both.", call. = FALSE)
    n_sim <- nsim
  }
  common <- list(n_sim = n_sim, alternative = .py_alternative(alternative),
                 rng = .py_seed(seed))

  have_rx <- !is.null(resid.XonZ)
  have_ry <- !is.null(resid.YonZ)
  extra <- list(...)
  fitted <- NULL
  if (!(have_rx && have_ry)) {
    if (missing(x) || missing(y)) {
      stop("give `x` and `y` (with `z`), or both `resid.XonZ` and `resid.YonZ`.", call. = FALSE)
    }
    fit_args <- c(list(
      x = .py_data(x), y = .py_data(y), z = .py_data(z), regressor = "kernel_ridge",
      kernel_sigma = kernel_sigma, ridge_lambda = ridge_lambda, cv_lambdas = cv_lambdas,
      cv_folds = cv_folds, kernel_approximation = kernel_approximation,
      n_features = n_features, feature_rng = .py_seed(feature_seed, "feature_seed"),
      center = center, progress = progress),
      common)
    if (!(have_rx || have_ry)) {
      fit_args <- c(fit_args, .py_extra(extra, names(fit_args), "gcm"))
    }
    fitted <- .py_call("gcm", fit_args, call)
  }
  if (have_rx || have_ry) {
    rx <- .py_data(if (have_rx) resid.XonZ else fitted$resid_x)
    ry <- .py_data(if (have_ry) resid.YonZ else fitted$resid_y)
    args <- c(list(resid_x = rx, resid_y = ry), common)
    args <- c(args, .py_extra(extra, names(args), "gcm_from_residuals"))
    res <- .py_call("gcm_from_residuals", args, call)
  } else {
    res <- fitted
  }

  dname_x <- if (have_rx) paste(.expr(call$resid.XonZ), "(residuals)") else .expr(call$x)
  dname_y <- if (have_ry) paste(.expr(call$resid.YonZ), "(residuals)") else .expr(call$y)
  data.name <- paste(dname_x, "and", dname_y)
  if (!(have_rx && have_ry) && !is.null(call$z)) {
    data.name <- paste(data.name, "given", .expr(call$z))
  }
  .gcm_htest(res, alternative, data.name, alpha)
}

.gcm_htest <- function(res, alternative, data.name, alpha) {
  resid_x <- as.matrix(res$resid_x)
  resid_y <- as.matrix(res$resid_y)
  multivariate <- ncol(resid_x) * ncol(resid_y) > 1L
  statistic <- res$statistic
  names(statistic) <- if (multivariate) "max|Z|" else "Z"
  parameter <- c(n = res$n)
  if (multivariate) parameter <- c(parameter, nsim = res$n_sim)
  estimate <- NULL
  if (!multivariate) {
    estimate <- c("E[cov(X, Y | Z)]" = mean(resid_x[, 1] * resid_y[, 1]))
  }
  structure(list(
    statistic = statistic,
    parameter = parameter,
    p.value = res$pvalue,
    estimate = estimate,
    null.value = c("E[cov(X, Y | Z)]" = 0),
    alternative = alternative,
    method = res$method,
    data.name = data.name,
    n = res$n,
    resid_x = resid_x,
    resid_y = resid_y,
    ridge_lambda_x = .num(res$ridge_lambda_x),
    ridge_lambda_y = .num(res$ridge_lambda_y),
    test.statistic = unname(statistic),
    reject = isTRUE(res$pvalue < alpha)
  ), class = "htest")
}
