# Every test needs the Python side; without it the tests skip with this reason.
skip_if_no_privci <- function() {
  skip_if_not(privci_available(),
              "the Python package privci is not usable from reticulate (see ?privci)")
}

# A small data set with dependence between x and y given z. R's RNG only
# makes the data; the tests' own randomness comes from `seed` (numpy).
sim_data <- function(n = 120, beta = 0.5, d = 1, seed = 1) {
  set.seed(seed)
  z <- matrix(rnorm(n * d), n, d)
  x <- sin(z[, 1]) + rnorm(n)
  y <- cos(z[, 1]) + beta * x + rnorm(n)
  list(x = x, y = y, z = if (d == 1) z[, 1] else z)
}

# Kernel ridge residuals in plain R (the package's parameterisation):
# alpha = (K + n lambda I)^-1 u, residual = u - K alpha.
krr_resid_r <- function(u, z, sigma, lambda) {
  z <- as.matrix(z)
  K <- exp(-sigma * as.matrix(dist(z))^2)
  n <- nrow(z)
  as.vector(u - K %*% solve(K + n * lambda * diag(n), u))
}

# The Python function called directly, with the wrapper's conversions: the
# R result must carry exactly what Python returns for the same call (the
# numbers themselves are tested on the Python side).
py_direct <- function(fun, x, y, z = NULL, ..., seed = NULL, model_x = NULL) {
  args <- list(x = privci:::.py_data(x), y = privci:::.py_data(y), z = privci:::.py_data(z),
               ...)
  if (!is.null(seed)) args$rng <- privci:::.py_seed(seed)
  if (!is.null(model_x)) args$model_x <- privci:::.py_model_x(model_x, z)
  do.call(privci:::.privci()[[fun]], args)
}

# Does the Python function take a keyword argument `arg`?
py_has_arg <- function(fun, arg) {
  sig <- reticulate::import("inspect")$signature(privci:::.privci()[[fun]])
  arg %in% reticulate::iterate(sig$parameters$keys())
}

# Does the Python function's keyword `arg` default to None (an optional argument)?
py_default_is_none <- function(fun, arg) {
  privci:::.privci()
  check <- reticulate::py_eval(paste0(
    "lambda name, a: (lambda p: a in p and p[a].default is None)(",
    "__import__('inspect').signature(getattr(__import__('privci'), name)).parameters)"))
  isTRUE(check(fun, arg))
}

expect_htest <- function(res, statistic_name) {
  expect_s3_class(res, "htest")
  expect_named(res$statistic, statistic_name)
  expect_true(is.numeric(res$p.value) && length(res$p.value) == 1L)
  expect_true(res$p.value >= 0 && res$p.value <= 1)
  expect_true(is.character(res$method) && nzchar(res$method))
  expect_true(res$alternative %in% c("two.sided", "less", "greater"))
  expect_true(is.character(res$data.name) && nzchar(res$data.name))
  expect_false(is.null(names(res$parameter)))
  invisible(res)
}
