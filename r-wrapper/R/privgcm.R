#' Differentially private GCM test (PrivGCM)
#'
#' Computed by the Python function `privci.privgcm`: clip x and y to public
#' bounds and rescale, regress both on z, and test on noisy sums of the
#' residual products. By default (`regression = "spline"`) the regression is
#' itself released with differential privacy (a spline fit of z, put on a unit
#' scale by `z_center` and `z_scale`, released privately unless given), the
#' residuals are scaled into `[-1, 1]` (no clip), and a t test runs on 5 to 20 noisy block sums; where the
#' public rule cannot resolve the fit the p-value is 1 and `fit_check` says so;
#' with two or more columns of z that is always the case unless
#' `assume_additive = TRUE` (passed through `...`) states an additive model.
#' `regression = "krr"` is Algorithm 1 of Kalemaj, Kasiviswanathan and Ramdas:
#' kernel ridge regression with a ridge parameter fixed before seeing the data
#' and Laplace noise, calibrated to the certified sensitivity, on every residual
#' product. The released statistic and p-value are `epsilon`-differentially
#' private under the replacement of one row (x_i, y_i, z_i).
#'
#' @param x Numeric vector, matrix or data frame (n rows).
#' @param y Numeric vector, matrix or data frame (n rows).
#' @param z Numeric vector, matrix or data frame (n rows). Not bounded; the
#'   spline fit needs it on a unit scale (`z_center`, `z_scale`, private by
#'   default), the KRR's `kernel_sigma` on a known scale. `NULL` asks
#'   the Python function for the unconditional test (no regression), where it
#'   offers one.
#' @param formula,data `Y ~ X | Z1 + Z2` with the variables in `data` (a data
#'   frame, a matrix with column names or a list; `NULL`: the formula's
#'   environment), as in [gcm()]: Y is `y`, the terms before `|` are `x`, the
#'   terms after it `z`; `Y ~ X` means `z = NULL`. `data.name` shows the
#'   formula.
#' @param epsilon Privacy parameter (> 0).
#' @param x_bound,y_bound Public bounds (one number, or one per column), fixed
#'   before seeing the data: values outside \[center - bound, center + bound\]
#'   are clipped.
#' @param x_center,y_center Public centres (one number, or one per column),
#'   fixed before seeing the data; set them near the means of x and y, since
#'   the ridge regression has no intercept.
#' @param center_epsilon `NULL` (default) or the part of `epsilon` spent on
#'   private centring, when no public centre near the means is known: the
#'   means of the clipped, scaled columns of x and y are released with Laplace
#'   noise (L1 sensitivity 2 (p + q) / n), the data are shifted by them and
#'   clipped again to the same width, and the products get
#'   `epsilon - center_epsilon` (sequential composition; the released centres
#'   are in `$bounds`).
#' @param regression `"spline"` (default when z is given): the released
#'   additive spline regression (Gram matrices and cross-products of cubic
#'   B-splines of `(z - z_center) / z_scale` released with Laplace noise on two
#'   halves of the rows, residuals divided by a public scale in `[1, 2]` so that
#'   they lie in `[-1, 1]` unclipped, 5 to 20 noisy block sums,
#'   a t test that accounts for the fit's noise). Put z on a unit scale with
#'   `z_center` and `z_scale` (named arguments passed through `...`).
#'   `"krr"`: kernel ridge regression, the paper's Algorithm 1 (with
#'   `ridge_lambda`, `kernel_sigma`, `kernel_approximation`, ...; these are
#'   refused with the spline).
#' @param ridge_lambda Ridge parameter of `regression = "krr"` (`NULL`, the
#'   default: 5, the paper's lambda = 10 in its parameterisation); must not be
#'   chosen from the data. `"cv"` opts in to cross-validation over
#'   `cv_lambdas` on the private data, which the privacy guarantee then does
#'   not cover (the result says so). Like `kernel_sigma`, `cv_lambdas`,
#'   `kernel_approximation`, `n_features` and `feature_seed`, it is refused
#'   with the spline fit unless `NULL`.
#' @param kernel_sigma RBF kernel parameter of `regression = "krr"` (`NULL`:
#'   1).
#' @param alternative `"two.sided"`, `"less"` or `"greater"`.
#' @param seed `NULL` (default: OpenDP's Laplace sampler, hardened against
#'   floating-point attacks; use it for a release) or a whole number (seeded
#'   numpy noise: reproducible, not hardened, for simulations).
#' @param n_sim Multiplier draws for multivariate x or y.
#' @param cv_lambdas Grid for `ridge_lambda = "cv"`.
#' @param kernel_approximation `"exact"` or `"rff"` (random Fourier features,
#'   same sensitivity); `NULL`: `"exact"` with `regression = "krr"`.
#' @param n_features Number of random features for `"rff"` (`NULL`: 512).
#' @param feature_seed `NULL` or a whole number: the Python `feature_rng` that
#'   draws the random features (independent of the data).
#' @param ... For the default method: further named arguments, passed
#'   unchanged to the Python function (`privci.privgcm` here), so that options
#'   added to the Python package (a privacy budget, say) are usable from R
#'   without a change to this package; R values are converted by reticulate's
#'   defaults (`NULL` is `None`). Give full names: R matches an abbreviation
#'   of one of this function's own arguments to that argument. For the
#'   formula method: the arguments of the default method.
#'
#' @return A list of classes `privci_private_htest` and `htest` with
#'   `statistic` (`Z`, or `max|Z|`, computed on the noisy products),
#'   `parameter` (`epsilon`), `p.value`, `null.value`, `alternative`,
#'   `method`, `data.name`, `n`, and the privacy record: `epsilon`,
#'   `mechanism`, `sensitivity`, `noise_scale`, `hardened`, `ridge_lambda`,
#'   `kernel_sigma`, `bounds`, `guarantee`, `caveats`, `releases` (a data.frame
#'   with one row per noisy release: `release`, `epsilon`, `sensitivity`,
#'   `noise_scale`, `mechanism`, and `rows`, `"half A"`/`"half B"` for the two
#'   halves of the spline fit, which compose in parallel); with the default spline
#'   fit also `fit_check` (`certified`, `resolvable`, `allowance_share`,
#'   `intervals`, `columns`, `assume_additive`, ...: when `certified` is FALSE the p-value is 1, a
#'   fail-safe: the regression cannot be resolved or the nested fits disagree). No un-noised quantity
#'   is returned. `print()` shows the test as for [stats::t.test()], followed
#'   by the privacy record.
#' @seealso [gcm()], [privcrt()].
#' @export
#' @examples
#' if (privci_available()) {
#'   n <- 500
#'   z <- rnorm(n)
#'   x <- sin(z) + rnorm(n)
#'   y <- cos(z) + rnorm(n)
#'   privgcm(x, y, z, epsilon = 1, x_bound = 4, y_bound = 4, y_center = 0.6, seed = 1)
#'   # the formula form
#'   d <- data.frame(X = x, Y = y, Z = z)
#'   privgcm(Y ~ X | Z, data = d, epsilon = 1, x_bound = 4, y_bound = 4, y_center = 0.6,
#'           seed = 1)
#' }
privgcm <- function(x, ...) UseMethod("privgcm")

#' @rdname privgcm
#' @export
privgcm.formula <- function(formula, data = NULL, ...) {
  f <- .formula_xyz(formula, data, if (missing(data)) NULL else .expr(substitute(data)))
  x <- f$x
  y <- f$y
  z <- f$z
  res <- privgcm.default(x, y, z, ...)
  res$data.name <- f$data.name
  res
}

#' @rdname privgcm
#' @export
privgcm.default <- function(x, y, z = NULL, epsilon, x_bound, y_bound, ridge_lambda = NULL,
                            kernel_sigma = NULL, alternative = c("two.sided", "less", "greater"),
                            seed = NULL, n_sim = 499L, cv_lambdas = NULL,
                            kernel_approximation = NULL, n_features = NULL,
                            feature_seed = NULL, x_center = 0, y_center = 0,
                            center_epsilon = NULL, regression = c("spline", "krr"), ...) {
  call <- match.call()
  alternative <- match.arg(alternative)
  regression <- match.arg(regression)
  args <- list(
    x = .py_data(x), y = .py_data(y), z = .py_data(z), epsilon = epsilon,
    x_bound = x_bound, y_bound = y_bound, ridge_lambda = ridge_lambda,
    kernel_sigma = kernel_sigma, alternative = .py_alternative(alternative),
    rng = .py_seed(seed), n_sim = n_sim, cv_lambdas = cv_lambdas,
    kernel_approximation = kernel_approximation, n_features = n_features,
    feature_rng = .py_seed(feature_seed, "feature_seed"), x_center = x_center,
    y_center = y_center, center_epsilon = center_epsilon, regression = regression
  )
  res <- .py_call("privgcm", c(args, .py_extra(list(...), names(args), "privgcm")), call)
  statistic <- res$statistic
  names(statistic) <- if (!is.null(res$statistic_name)) res$statistic_name else
    if (is.null(res$n_sim)) "Z" else "max|Z|"
  .private_htest(res, statistic, alternative, .data_name(call),
                 null.value = c("E[cov(X, Y | Z)]" = 0))
}

# "x and y given z" from the caller's expressions (no "given" without z).
.data_name <- function(call) {
  out <- paste(.expr(call$x), "and", .expr(call$y))
  if (!is.null(call$z) && !identical(call$z, quote(NULL))) {
    out <- paste(out, "given", .expr(call$z))
  }
  out
}

.private_htest <- function(res, statistic, alternative, data.name, null.value = NULL,
                           parameter = NULL) {
  privacy <- .privacy_elements(res$privacy)
  structure(c(
    list(
      statistic = statistic,
      parameter = c(epsilon = privacy$epsilon, parameter),
      p.value = res$pvalue,
      null.value = null.value,
      alternative = alternative,
      method = res$method,
      data.name = data.name,
      n = res$n
    ),
    privacy,
    if (!is.null(res$fit_check)) list(fit_check = .fit_check(res$fit_check))
  ), class = c("privci_private_htest", "htest"))
}

# The released regression's fit check as an R list (NULL-free, plain types).
.fit_check <- function(fc) {
  list(certified = isTRUE(fc$certified), resolvable = isTRUE(fc$resolvable),
       allowance_share = as.numeric(fc$allowance_share),
       intervals = as.integer(fc$intervals), rich_intervals = as.integer(fc$rich_intervals),
       interactions = isTRUE(fc$interactions), fit_share = as.numeric(fc$fit_share),
       columns = as.integer(if (is.null(fc$columns)) 1L else fc$columns),
       assume_additive = isTRUE(fc$assume_additive))
}

#' @export
print.privci_private_htest <- function(x, ...) {
  NextMethod()
  noise <- if (isTRUE(x$hardened)) "hardened (OpenDP)" else
    "NOT hardened (seeded numpy noise: for simulations, not for a release)"
  cat(strwrap(paste0("privacy: ", x$mechanism, ", sensitivity = ",
                     format(x$sensitivity, digits = 4), ", noise scale = ",
                     format(x$noise_scale, digits = 4), ", ", noise), exdent = 2), sep = "\n")
  cat(strwrap(paste("guarantee:", x$guarantee), exdent = 2), sep = "\n")
  if (!is.null(x$fit_check)) {
    fc <- x$fit_check
    verdict <- if (fc$certified) "certified" else if (!fc$resolvable && fc$columns >= 2 &&
                                                     !fc$assume_additive)
      "NOT certified: with two or more columns of z the released regression cannot certify their interactions (assume_additive = TRUE states that E[X | Z] and E[Y | Z] are additive); p-value set to 1 (a fail-safe, not evidence)" else if (!fc$resolvable)
      "NOT certified: the released regression cannot resolve z at this n, epsilon and number of columns; p-value set to 1 (a fail-safe, not evidence)" else
      "NOT certified: the nested fits disagree (estimated regression bias large against the noise); p-value set to 1 (a fail-safe, not evidence)"
    cat(strwrap(sprintf("fit check: %s (bias allowance %.0f%% of the variance; %d spline intervals per column)",
                        verdict, 100 * fc$allowance_share, fc$intervals), exdent = 2), sep = "\n")
  }
  for (caveat in x$caveats) {
    cat(strwrap(paste("caveat:", caveat), exdent = 2), sep = "\n")
  }
  cat("\n")
  invisible(x)
}
