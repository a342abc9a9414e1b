#' Differentially private GCM test (PrivGCM)
#'
#' Computed by the Python function `privci.privgcm`: clip x and y to public
#' bounds and rescale, regress both on z, and test on noisy sums of the
#' residual products. By default (`regression = "spline"`) the regression is
#' itself released with differential privacy (a spline fit of z, put on a unit
#' scale by `z_center` and `z_scale`, released privately unless given), the
#' residuals are scaled into `[-1, 1]` (no clip), and the test runs on noisy
#' sums of their products: a t test on 5 to 20 block sums, or a z test on one
#' noisy sum with its released variance, as the public rule chooses; where the
#' public rule cannot resolve the fit the p-value is 1 (the fail-safe, not
#' evidence: the printed p-value line says so) and `fit_check` says why;
#' with three or more columns of z that is always the case unless `assume`
#' states a model (two columns are fitted by their tensor product).
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
#'   are clipped. A column known to take two values a < b (a binary column: 0
#'   and 1) has the public window centre (a + b) / 2, bound (b - a) / 2, which
#'   maps it to -1 and 1 exactly (far more power than a 4-sd window; the
#'   documentation's parameters page, "Binary and few-valued columns").
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
#' @param z_center,z_scale The spline fit's public centre and scale of each
#'   column of z (one number, or one per column): the knots are placed on
#'   `(z - z_center) / z_scale`, so z must be on a unit scale. `NULL`
#'   (default): released privately (`"auto"`, part of `bounds_epsilon`) with
#'   the spline fit; with `regression = "krr"`, no shift, and `z_scale`
#'   divides z before the kernel. Fixed before seeing the data when given.
#' @param assume `NULL` (default: no assumption) or a public assumption on
#'   E\[X | Z\] and E\[Y | Z\] under which the spline fit answers:
#'   `"additive"` (additive in the columns of z: no interaction is fitted; for
#'   2 to 4 columns the nested fit's interaction block checks it where n and
#'   epsilon allow, products of quadratics in each column for 2 and 3 columns,
#'   multilinear for 4) or `"linear"` (a linear function of each column,
#'   checked with splines per column and the same block, or for 1 to 3
#'   columns where the rule predicts more power from it with every product of
#'   cubics in clip(t_j, -1, 1) on the rows inside \[-2, 2\]); the model and
#'   whether it was checked are in the caveats. Without it, two or more
#'   columns of z are refused (an error naming the models that resolve)
#'   before anything is spent.
#' @param assume_additive `FALSE` (default) or `TRUE`, the same as
#'   `assume = "additive"` (the older spelling).
#' @param tighten `"auto"` (default), `TRUE` or `FALSE`: tighten public
#'   `x_bound` / `y_bound` to a released window inside them (the spline fit
#'   with z only). Part of `bounds_epsilon` releases the private 0.8 quantile
#'   of |x - x_center| among candidates up to the public bound, and x is
#'   clipped to that window (at most the public one; clipping leaves a null
#'   true). A domain range is usually far wider than the data, and the
#'   test's signal falls with the window's width. Under `assume = "additive"`
#'   with two or more columns the window is twice the quantile. `"auto"`:
#'   `TRUE` with the spline fit and z unless `assume = "linear"`, the fit
#'   could be resolved only without that share of epsilon, or (under
#'   `"additive"`) that share would leave the model unchecked where it is
#'   checked without it, or the privacy noise is predicted below half the
#'   sampling variance; `FALSE` keeps the public windows (fewer fail-safes
#'   where E\[X | Z\] fills the window).
#' @param n_blocks `"auto"` (default: the public rule), a whole number k of
#'   noisy block sums, or `NULL` (one per row, the paper's Algorithm 1; with
#'   `regression = "krr"` only).
#' @param sensitivity `NULL` (default: `"paper"` with `regression = "krr"`) or
#'   `"paper"`/`"sharp"`: the proved constant of the KRR path.
#' @param budget `NULL` or a [privci_budget()] charged `epsilon` before
#'   anything is computed from the data (an overspending release is refused).
#' @param bounds_epsilon `NULL` or the part of `epsilon` spent on the
#'   `"auto"` bounds and centres (default: 10 percent of `epsilon` when any is
#'   `"auto"`).
#' @param regression `"spline"` (default when z is given): the released
#'   additive spline regression (Gram matrices and cross-products of cubic
#'   B-splines of `(z - z_center) / z_scale` released with Laplace noise on two
#'   halves of the rows, residuals divided by a public scale in `[1, 2]` so that
#'   they lie in `[-1, 1]` unclipped, 5 to 20 noisy block sums,
#'   a t or z test that accounts for the fit's noise). Put z on a unit scale
#'   with `z_center` and `z_scale`.
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
#'   `statistic`, computed on released values and named as Python names it:
#'   with the default spline fit `t` (a t statistic on the noisy block sums)
#'   or `z` (one noisy sum over its released standard deviation); with
#'   `regression = "krr"` `Z` (or `max|Z|` for several columns of x or y);
#'   `parameter` (`epsilon`), `p.value`, `null.value`, `alternative`,
#'   `method`, `data.name`, `n`, `failsafe` (`NULL`, or why the p-value is the
#'   fail-safe 1: the released fit is not certified, so the 1 is not evidence
#'   of independence; `print()` shows it next to the p-value), and the
#'   privacy record: `epsilon`,
#'   `mechanism`, `sensitivity`, `noise_scale`, `hardened`, `ridge_lambda`,
#'   `kernel_sigma`, `bounds`, `guarantee`, `caveats`, `releases` (a data.frame
#'   with one row per noisy release: `release`, `epsilon`, `sensitivity`,
#'   `noise_scale`, `mechanism`, and `rows`, `"half A"`/`"half B"` for the two
#'   halves of the spline fit, which compose in parallel); with the default spline
#'   fit also `fit_check` (`certified`, `resolvable`, `allowance_share`,
#'   `intervals`, `columns`, `assume_additive`, `n_blocks`, `shortest_period`
#'   (regressions oscillating faster than this, in units of `z_scale`, are not
#'   seen by the fit check), ...: when
#'   `certified` is FALSE the p-value is 1, a fail-safe: the regression cannot
#'   be resolved, the nested fits disagree, or the unchecked linear fit was
#'   shrunk by its noise floor, `floor_binds`). No un-noised quantity is
#'   returned. `print()` shows the test as for [stats::t.test()], followed by
#'   the privacy record; the caveats are written in R's syntax.
#' @seealso [gcm()], [privcrt()].
#' @export
#' @examples
#' if (privci_available()) {
#'   n <- 2000
#'   z <- rnorm(n)
#'   x <- sin(z) + rnorm(n)
#'   y <- cos(z) + rnorm(n)
#'   # the released spline fit needs n * epsilon large enough (plan() says how large)
#'   privgcm(x, y, z, epsilon = 2, x_bound = 4, y_bound = 4, y_center = 0.6, seed = 1)
#'   # the formula form
#'   d <- data.frame(X = x, Y = y, Z = z)
#'   privgcm(Y ~ X | Z, data = d, epsilon = 2, x_bound = 4, y_bound = 4, y_center = 0.6,
#'           seed = 1)
#'   # public centre and scale of z (no privacy spent on them)
#'   privgcm(x, y, z, epsilon = 2, x_bound = 4, y_bound = 4, z_center = 0, z_scale = 1,
#'           seed = 1)
#'   # the paper's Algorithm 1 (kernel ridge regression)
#'   privgcm(x, y, z, epsilon = 2, x_bound = 4, y_bound = 4, regression = "krr", seed = 1)
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
                            center_epsilon = NULL, regression = c("spline", "krr"),
                            z_center = NULL, z_scale = NULL, assume = NULL,
                            assume_additive = FALSE, n_blocks = "auto", sensitivity = NULL,
                            budget = NULL, bounds_epsilon = NULL, tighten = "auto", ...) {
  call <- match.call()
  .check_not_names(x, y, z, "privgcm")
  alternative <- match.arg(alternative)
  regression <- match.arg(regression)
  args <- list(
    x = .py_data(x), y = .py_data(y), z = .py_data(z), epsilon = epsilon,
    x_bound = x_bound, y_bound = y_bound, ridge_lambda = ridge_lambda,
    kernel_sigma = kernel_sigma, alternative = .py_alternative(alternative),
    rng = .py_seed(seed), n_sim = n_sim, cv_lambdas = cv_lambdas,
    kernel_approximation = kernel_approximation, n_features = n_features,
    feature_rng = .py_seed(feature_seed, "feature_seed"), x_center = x_center,
    y_center = y_center, center_epsilon = center_epsilon, regression = regression,
    z_center = z_center, z_scale = z_scale, n_blocks = n_blocks, sensitivity = sensitivity,
    budget = budget, bounds_epsilon = bounds_epsilon
  )
  # the assumption only when stated: an older Python has no `assume`, and
  # `assume_additive` is its alias
  if (!is.null(assume)) args$assume <- assume
  if (!isFALSE(assume_additive)) args$assume_additive <- assume_additive
  # only when changed: an older Python has no `tighten`
  if (!identical(tighten, "auto")) args$tighten <- tighten
  res <- .py_call("privgcm", c(args, .py_extra(list(...), c(names(args), "assume",
                                                           "assume_additive", "tighten"),
                                               "privgcm")),
                  call)
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
      n = res$n,
      failsafe = if (!is.null(res$failsafe)) .r_syntax(res$failsafe),
      min_p.value = res$min_pvalue
    ),
    privacy,
    if (!is.null(res$fit_check)) list(fit_check = .fit_check(res$fit_check))
  ), class = c("privci_private_htest", "htest"))
}

# The released regression's fit check as an R list (NULL-free, plain types):
# the keys R code relies on, then every other scalar key Python adds.
.fit_check <- function(fc) {
  out <- list(certified = isTRUE(fc$certified), resolvable = isTRUE(fc$resolvable),
              allowance_share = as.numeric(fc$allowance_share),
              intervals = as.integer(fc$intervals),
              rich_intervals = as.integer(fc$rich_intervals),
              interactions = isTRUE(fc$interactions), fit_share = as.numeric(fc$fit_share),
              columns = as.integer(if (is.null(fc$columns)) 1L else fc$columns),
              assume_additive = isTRUE(fc$assume_additive))
  for (k in setdiff(names(fc), names(out))) {
    v <- fc[[k]]
    if (is.atomic(v) && length(v) == 1L && !is.na(v)) {
      out[[k]] <- if (is.numeric(v) && v == round(v) && abs(v) < .Machine$integer.max &&
                      k %in% c("n_blocks", "columns")) as.integer(v) else v
    }
  }
  out
}

# What print() shows next to the p-value: the fail-safe's reason, or the
# smallest p-value a rank test can return (NULL: nothing).
.pvalue_note <- function(x) {
  if (!is.null(x$failsafe)) {
    return(paste0("fail-safe, not evidence: ", x$failsafe, "; see the fit check"))
  }
  if (!is.null(x$min_p.value)) {
    m <- round(1 / x$min_p.value - 1)
    return(sprintf(paste0("the smallest attainable with m = %d resamples is 1/%d = %s; ",
                          "reject at level alpha when p-value <= alpha"),
                   m, m + 1L, format(x$min_p.value, digits = 4)))
  }
  NULL
}

#' @export
print.privci_private_htest <- function(x, ...) {
  out <- utils::capture.output(utils::getS3method("print", "htest")(x, ...))
  note <- .pvalue_note(x)
  at <- grep("p-value [=<>]", out)
  if (!is.null(note) && length(at)) {
    at <- at[1L]
    out <- c(out[seq_len(at - 1L)],
             strwrap(paste0(out[at], " (", note, ")"), exdent = 2),
             out[-seq_len(at)])
  }
  cat(out, sep = "\n")
  noise <- if (isTRUE(x$hardened)) "hardened (OpenDP)" else
    "NOT hardened (seeded numpy noise: for simulations, not for a release)"
  cat(strwrap(paste0("privacy: ", x$mechanism, ", sensitivity = ",
                     format(x$sensitivity, digits = 4), ", noise scale = ",
                     format(x$noise_scale, digits = 4), ", ", noise), exdent = 2), sep = "\n")
  cat(strwrap(paste("guarantee:", x$guarantee), exdent = 2), sep = "\n")
  if (!is.null(x$fit_check)) {
    fc <- x$fit_check
    verdict <- if (fc$certified) "certified" else if (!fc$resolvable && fc$columns >= 3 &&
                                                     identical(fc$model, "full"))
      "NOT certified: with three or more columns of z the released regression cannot certify their interactions (assume = \"additive\" or \"linear\" states a model); p-value set to 1 (a fail-safe, not evidence)" else if (!fc$resolvable)
      "NOT certified: the released regression cannot resolve z at this n, epsilon and number of columns; p-value set to 1 (a fail-safe, not evidence)" else if (isTRUE(fc$floor_binds))
      "NOT certified: the unchecked linear fit was shrunk (a released Gram matrix has an eigenvalue under its noise floor: correlated columns or few rows for this epsilon); p-value set to 1 (a fail-safe, not evidence)" else
      "NOT certified: the nested fits disagree (estimated regression bias large against the noise); p-value set to 1 (a fail-safe, not evidence)"
    period <- if (!is.null(fc$shortest_period))
      sprintf("; periods under %.2g z_scale not seen", fc$shortest_period) else ""
    cat(strwrap(sprintf("fit check: %s (bias allowance %.0f%% of the variance; %d spline intervals per column%s)",
                        verdict, 100 * fc$allowance_share, fc$intervals, period),
                exdent = 2), sep = "\n")
  }
  for (caveat in x$caveats) {
    cat(strwrap(paste("caveat:", caveat), exdent = 2), sep = "\n")
  }
  cat("\n")
  invisible(x)
}
