#' Gaussian model for X given Z
#'
#' The model-X assumption of the conditional randomization tests: X given
#' Z = z_i is normal with mean `mean` and standard deviation `scale`. The
#' Python class `privci.GaussianModelX` receives it.
#'
#' @param mean The n conditional means E\[X | Z = z_i\] (one per row of z), or
#'   an R function of z returning them; the function is called once, in R,
#'   with `z` as given to the test.
#' @param scale Conditional standard deviation: one positive number or one
#'   per row.
#' @return An object of class `privci_gaussian_model_x`.
#' @seealso [privcrt()], [crt()].
#' @export
#' @examples
#' gaussian_model_x(function(z) sin(z), 1)
gaussian_model_x <- function(mean, scale) {
  structure(list(mean = mean, scale = scale), class = "privci_gaussian_model_x")
}

#' @export
print.privci_gaussian_model_x <- function(x, ...) {
  mean <- if (is.function(x$mean)) "a function of z" else
    sprintf("%d conditional means", length(x$mean))
  scale <- if (length(x$scale) == 1L) format(x$scale) else
    sprintf("%d standard deviations", length(x$scale))
  cat("Gaussian model for X given Z: mean = ", mean, ", scale = ", scale, "\n", sep = "")
  invisible(x)
}

# model_x for Python: a GaussianModelX, or (with x_resamples) the vector of
# conditional means as is.
.py_model_x <- function(model_x, z) {
  if (is.list(model_x) && !is.null(model_x$mean) && !is.null(model_x$scale)) {
    mean <- model_x$mean
    if (is.function(mean)) {
      mean <- mean(z)
    }
    mean <- .py_data(if (is.numeric(mean)) as.vector(mean) else mean)
    scale <- model_x$scale
    scale <- if (is.numeric(scale) && length(scale) != 1L) .py_data(scale) else scale
    return(.privci()$GaussianModelX(mean, scale))
  }
  if (is.numeric(model_x)) {
    return(.py_data(as.vector(model_x)))
  }
  model_x
}

.crt_model_x <- function(model_x, z, call) {
  tryCatch(.py_model_x(model_x, z), error = function(e) {
    if (inherits(e, "privci_error")) stop(e)
    .py_error(e, call)
  })
}

#' Differentially private conditional randomization test (PrivCRT)
#'
#' Algorithm 2 of Kalemaj, Kasiviswanathan and Ramdas, computed by the Python
#' function `privci.privcrt`: the statistic T = sum_i r_X,i r_Y,i (r_X: the
#' clipped deviation of x from its conditional mean, r_Y: kernel ridge
#' residuals of the clipped y on z) is computed on the observed x and on
#' `n_resamples` draws from the model of X given Z; the rank of the observed
#' statistic is released by report-noisy-max, and the p-value is
#' (1 + rank) / (m + 1).
#'
#' The smallest p-value it can return is 1 / (m + 1): 0.05 with the default
#' m = 19, so the test rejects at level alpha when the p-value is at most
#' alpha (`p.value <= 0.05`; `p.value < 0.05` never holds with m = 19).
#' `print()` shows that bound next to the p-value. More resamples do not buy
#' power: report-noisy-max must then single out the observed statistic among
#' more close competitors (measured on the README's design, n = 2000: see the
#' Python docstring of `privci.privcrt`).
#'
#' @inheritParams privgcm
#' @param x,y Numeric vectors (n).
#' @param formula,data `Y ~ X | Z1 + Z2` with the variables in `data`, as in
#'   [gcm()]: X (one variable) is the one whose law given Z is `model_x`, and
#'   a function in `model_x` receives the evaluated Z (a vector for one term,
#'   a matrix with one named column per term otherwise). `data.name` shows
#'   the formula.
#' @param model_x The law of X given Z: [gaussian_model_x()] (or a list with
#'   `mean` and `scale`). When `x_resamples` is given it may instead be the
#'   vector of the n conditional means.
#' @param y_bound,y_center Public bound and centre of y, fixed before seeing
#'   the data: y is clipped to \[y_center - y_bound, y_center + y_bound\].
#' @param x_residual_bound Public bound on |x - E\[X | Z\]|.
#' @param n_resamples Number of resamples m (default 19: the smallest m whose
#'   smallest p-value, 1 / (m + 1), reaches 0.05).
#' @param x_resamples Optional m x n matrix of precomputed resamples of X
#'   given Z (they are part of the protected data).
#' @param ridge_lambda Ridge parameter, fixed before seeing the data.
#' @param kernel_sigma RBF kernel parameter of the regression of y on z.
#' @param kernel_approximation `"exact"` or `"rff"` (random Fourier features,
#'   same sensitivity).
#' @param n_features Number of random features for `"rff"`.
#' @param seed `NULL` (fresh resamples and OpenDP's report-noisy-max, hardened)
#'   or a whole number (resamples and exponential noise from seeded numpy:
#'   reproducible, not hardened).
#' @param sensitivity `"sharp"` (default, the package's proved constant) or
#'   `"paper"` (the paper's Lemma): which constant certifies the statistics.
#' @param budget `NULL` or a [privci_budget()] charged `epsilon` before
#'   anything is computed from the data.
#' @param bounds_epsilon `NULL` or, with `y_bound`, `x_residual_bound` or
#'   `y_center` set to `"auto"`, the part of `epsilon` spent on releasing them
#'   (default 10 percent).
#'
#' @return A list of classes `privci_private_htest` and `htest` with
#'   `statistic` (`rank`, the privately selected 0-based rank of the observed
#'   statistic in decreasing order), `parameter` (`epsilon` and the number of
#'   resamples `m`), `p.value`, `alternative`, `method`, `data.name`, `n`,
#'   `n_resamples`, `min_p.value` (1 / (m + 1), the smallest attainable
#'   p-value) and the privacy record (see [privgcm()]).
#' @seealso [crt()] for the non-private test.
#' @export
#' @examples
#' if (privci_available()) {
#'   n <- 500
#'   z <- rnorm(n)
#'   x <- sin(z) + rnorm(n)
#'   y <- 2 * (x - sin(z)) + rnorm(n)
#'   privcrt(x, y, z, epsilon = 2, model_x = gaussian_model_x(sin, 1),
#'           y_bound = 8, x_residual_bound = 4, seed = 1)
#'   d <- data.frame(X = x, Y = y, Z = z)
#'   privcrt(Y ~ X | Z, data = d, epsilon = 2, model_x = gaussian_model_x(sin, 1),
#'           y_bound = 8, x_residual_bound = 4, seed = 1)
#' }
privcrt <- function(x, ...) UseMethod("privcrt")

#' @rdname privcrt
#' @export
privcrt.formula <- function(formula, data = NULL, ...) {
  f <- .formula_xyz(formula, data, if (missing(data)) NULL else .expr(substitute(data)))
  x <- f$x
  y <- f$y
  z <- f$z
  res <- privcrt.default(x, y, z, ...)
  res$data.name <- f$data.name
  res
}

#' @rdname privcrt
#' @export
privcrt.default <- function(x, y, z = NULL, epsilon, model_x, y_bound, x_residual_bound,
                            n_resamples = 19L, x_resamples = NULL, ridge_lambda = 5,
                            kernel_sigma = 1, alternative = c("two.sided", "less", "greater"),
                            seed = NULL, kernel_approximation = "exact", n_features = 512L,
                            feature_seed = NULL, y_center = 0, sensitivity = "sharp",
                            budget = NULL, bounds_epsilon = NULL, ...) {
  call <- match.call()
  .check_not_names(x, y, z, "privcrt")
  alternative <- match.arg(alternative)
  args <- list(
    x = .py_data(x), y = .py_data(y), z = .py_data(z), epsilon = epsilon,
    model_x = .crt_model_x(model_x, z, call), y_bound = y_bound,
    x_residual_bound = x_residual_bound, n_resamples = n_resamples,
    x_resamples = .py_data(x_resamples), ridge_lambda = ridge_lambda,
    kernel_sigma = kernel_sigma, alternative = .py_alternative(alternative),
    rng = .py_seed(seed), kernel_approximation = kernel_approximation,
    n_features = n_features, feature_rng = .py_seed(feature_seed, "feature_seed"),
    y_center = y_center, sensitivity = sensitivity, budget = budget,
    bounds_epsilon = bounds_epsilon
  )
  res <- .py_call("privcrt", c(args, .py_extra(list(...), names(args), "privcrt")), call)
  statistic <- c(rank = res$statistic)
  out <- .private_htest(res, statistic, alternative, .data_name(call),
                        parameter = c(m = res$n_resamples))
  out$n_resamples <- res$n_resamples
  out
}

#' Conditional randomization test (non-private, model-X)
#'
#' The conditional randomization test of Candes et al., computed by the
#' Python function `privci.crt`: the statistic is computed on the observed x
#' and on `n_resamples` draws of X from its known law given Z; the p-value
#' (1 + #{resampled statistics >= observed}) / (m + 1) is exact in finite
#' samples.
#'
#' @inheritParams privcrt
#' @param ... For the default method: further named arguments, passed
#'   unchanged to the Python function `privci.crt` (see [privgcm()]). For the
#'   formula method: the arguments of the default method.
#' @param statistic `NULL` (the default statistic T = sum_i (x_i -
#'   E\[X | z_i\]) r_Y,i, with r_Y the unclipped kernel ridge residuals of y on
#'   z) or an R function `function(x, y, z)` returning one number, applied to
#'   the observed x and to every resample.
#' @param seed `NULL` or a whole number: the Python `rng` of the resampling.
#'
#' @return A list of class `htest` with `statistic` (`T`, on the observed x),
#'   `parameter` (the number of resamples `m`), `p.value`, `alternative`,
#'   `method`, `data.name`, `n` and `resampled_statistics`.
#' @seealso [privcrt()].
#' @export
#' @examples
#' if (privci_available()) {
#'   n <- 200
#'   z <- rnorm(n)
#'   x <- sin(z) + rnorm(n)
#'   y <- rnorm(n)
#'   crt(x, y, z, model_x = gaussian_model_x(sin, 1), n_resamples = 99, seed = 1)
#'   crt(Y ~ X | Z, data = data.frame(X = x, Y = y, Z = z),
#'       model_x = gaussian_model_x(sin, 1), n_resamples = 99, seed = 1)
#' }
crt <- function(x, ...) UseMethod("crt")

#' @rdname crt
#' @export
crt.formula <- function(formula, data = NULL, ...) {
  f <- .formula_xyz(formula, data, if (missing(data)) NULL else .expr(substitute(data)))
  x <- f$x
  y <- f$y
  z <- f$z
  res <- crt.default(x, y, z, ...)
  res$data.name <- f$data.name
  res
}

#' @rdname crt
#' @export
crt.default <- function(x, y, z = NULL, model_x, n_resamples = 199L, x_resamples = NULL,
                        alternative = c("two.sided", "less", "greater"), seed = NULL,
                        statistic = NULL, ridge_lambda = 5, kernel_sigma = 1, ...) {
  call <- match.call()
  .check_not_names(x, y, z, "crt")
  alternative <- match.arg(alternative)
  args <- list(
    x = .py_data(x), y = .py_data(y), z = .py_data(z),
    model_x = .crt_model_x(model_x, z, call), n_resamples = n_resamples,
    x_resamples = .py_data(x_resamples), alternative = .py_alternative(alternative),
    rng = .py_seed(seed), statistic = statistic, ridge_lambda = ridge_lambda,
    kernel_sigma = kernel_sigma
  )
  res <- .py_call("crt", c(args, .py_extra(list(...), names(args), "crt")), call)
  structure(list(
    statistic = c(T = res$statistic),
    parameter = c(m = res$n_resamples),
    p.value = res$pvalue,
    alternative = alternative,
    method = res$method,
    data.name = .data_name(call),
    n = res$n,
    resampled_statistics = as.numeric(res$resampled_statistics)
  ), class = "htest")
}
