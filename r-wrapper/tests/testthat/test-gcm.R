test_that("gcm returns an htest whose numbers follow the GCM formulas", {
  skip_if_no_privci()
  d <- sim_data()
  res <- gcm(d$x, d$y, d$z, ridge_lambda = 0.01, kernel_sigma = 0.5)
  expect_htest(res, "Z")
  expect_equal(res$parameter, c(n = 120))
  expect_identical(res$data.name, "d$x and d$y given d$z")
  # the method names the regression (Python's text, unchanged)
  expect_identical(res$method,
                   "Generalised covariance measure test, kernel ridge regression, lambda 0.01")
  expect_equal(res$null.value, c("E[cov(X, Y | Z)]" = 0))

  # residuals: plain R kernel ridge regression with the same sigma and lambda
  expect_equal(res$resid_x[, 1], krr_resid_r(d$x, d$z, 0.5, 0.01), tolerance = 1e-9)
  expect_equal(res$resid_y[, 1], krr_resid_r(d$y, d$z, 0.5, 0.01), tolerance = 1e-9)
  expect_equal(res$ridge_lambda_x, 0.01)
  # statistic sqrt(n) mean(R) / sd(R) (population sd) and its normal p-value
  R <- res$resid_x[, 1] * res$resid_y[, 1]
  stat <- sqrt(120) * mean(R) / sqrt(mean(R^2) - mean(R)^2)
  expect_equal(unname(res$statistic), stat, tolerance = 1e-10)
  expect_equal(res$p.value, 2 * pnorm(-abs(stat)), tolerance = 1e-10)
  expect_equal(res$estimate, c("E[cov(X, Y | Z)]" = mean(R)))
  # gcm.test's own elements
  expect_identical(res$test.statistic, unname(res$statistic))
  expect_identical(res$reject, res$p.value < 0.05)
})

test_that("gcm maps alternative to the one-sided normal p-values", {
  skip_if_no_privci()
  d <- sim_data()
  two <- gcm(d$x, d$y, d$z, ridge_lambda = 0.1)
  greater <- gcm(d$x, d$y, d$z, ridge_lambda = 0.1, alternative = "greater")
  less <- gcm(d$x, d$y, d$z, ridge_lambda = 0.1, alternative = "less")
  s <- unname(two$statistic)
  expect_equal(greater$p.value, pnorm(s, lower.tail = FALSE), tolerance = 1e-12)
  expect_equal(less$p.value, pnorm(s), tolerance = 1e-12)
  expect_identical(greater$alternative, "greater")
  expect_identical(less$alternative, "less")
  expect_error(gcm(d$x, d$y, d$z, alternative = "bigger"), "should be one of")
})

test_that("gcm without z, with cross-validation and with several columns", {
  skip_if_no_privci()
  d <- sim_data(n = 100, d = 2)
  nz <- gcm(d$x, d$y)
  expect_identical(nz$data.name, "d$x and d$y")
  expect_equal(nz$resid_x[, 1], d$x)
  expect_null(nz$ridge_lambda_x)

  cv <- gcm(d$x, d$y, d$z)
  expect_true(cv$ridge_lambda_x %in% 10^(-6:4))
  expect_true(cv$ridge_lambda_y %in% 10^(-6:4))
  grid <- gcm(d$x, d$y, d$z, cv_lambdas = c(0.1, 1), cv_folds = 5)
  expect_true(grid$ridge_lambda_x %in% c(0.1, 1))

  m <- gcm(cbind(d$x, d$x^2), d$y, d$z, ridge_lambda = 0.1, n_sim = 199, seed = 7)
  expect_htest(m, "max|Z|")
  expect_equal(m$parameter, c(n = 100, nsim = 199))
  expect_null(m$estimate)
  expect_equal(dim(m$resid_x), c(100L, 2L))
  expect_equal(m$ridge_lambda_x, c(0.1, 0.1))
  # multiplier-bootstrap p-value lies on the grid (1 + k) / (n_sim + 1)
  expect_equal((m$p.value * 200) %% 1, 0, tolerance = 1e-9)
})

test_that("gcm with random Fourier features is reproducible with feature_seed", {
  skip_if_no_privci()
  d <- sim_data(n = 150)
  a <- gcm(d$x, d$y, d$z, ridge_lambda = 0.01, kernel_approximation = "rff",
           n_features = 64, feature_seed = 4)
  b <- gcm(d$x, d$y, d$z, ridge_lambda = 0.01, kernel_approximation = "rff",
           n_features = 64, feature_seed = 4)
  c <- gcm(d$x, d$y, d$z, ridge_lambda = 0.01, kernel_approximation = "rff",
           n_features = 64, feature_seed = 5)
  expect_htest(a, "Z")
  expect_identical(a$statistic, b$statistic)
  expect_false(identical(a$statistic, c$statistic))
})

test_that("gcm gives the same result for the same seed, and data frames work", {
  skip_if_no_privci()
  d <- sim_data(n = 100)
  X <- cbind(d$x, d$x^2)
  a <- gcm(X, d$y, d$z, ridge_lambda = 0.1, seed = 11)
  b <- gcm(X, d$y, d$z, ridge_lambda = 0.1, seed = 11)
  expect_identical(a$statistic, b$statistic)
  expect_identical(a$p.value, b$p.value)
  df <- gcm(as.data.frame(X), d$y, data.frame(z = d$z), ridge_lambda = 0.1, seed = 11)
  expect_identical(df$p.value, a$p.value)
  # integer data are converted to double storage
  i <- gcm(1:20 %% 3L, (1:20 %% 5L) * 2L, 1:20 / 20, ridge_lambda = 0.1)
  j <- gcm(as.double(1:20 %% 3L), (1:20 %% 5L) * 2, 1:20 / 20, ridge_lambda = 0.1)
  expect_identical(i$statistic, j$statistic)
})

test_that("gcm accepts gcm.test's argument names", {
  skip_if_no_privci()
  d <- sim_data(n = 100)
  native <- gcm(d$x, d$y, d$z, kernel_sigma = 0.5, ridge_lambda = 0.01)
  as_gcm_test <- gcm(d$x, d$y, d$z, regr.method = "kernel.ridge",
                     regr.pars = list(sigma = 0.5, lambda = 0.01))
  expect_identical(as_gcm_test$statistic, native$statistic)
  expect_identical(as_gcm_test$p.value, native$p.value)

  cv <- gcm(d$x, d$y, d$z, regr.pars = list(lambda = c(0.01, 1)))
  cv_native <- gcm(d$x, d$y, d$z, cv_lambdas = c(0.01, 1))
  expect_identical(cv$statistic, cv_native$statistic)

  X <- cbind(d$x, d$x^2)
  nsim <- gcm(X, d$y, d$z, ridge_lambda = 0.1, nsim = 99, seed = 3)
  n_sim <- gcm(X, d$y, d$z, ridge_lambda = 0.1, n_sim = 99, seed = 3)
  expect_identical(nsim$p.value, n_sim$p.value)
  expect_equal(nsim$parameter[["nsim"]], 99)

  # residual input, as gcm.test(resid.XonZ =, resid.YonZ =)
  res <- gcm(resid.XonZ = native$resid_x[, 1], resid.YonZ = native$resid_y[, 1])
  expect_equal(res$statistic, native$statistic, tolerance = 1e-12)
  expect_match(res$data.name, "native$resid_x[, 1] (residuals)", fixed = TRUE)
  # one residual given, the other computed from y and z
  mixed <- gcm(d$x, d$y, d$z, kernel_sigma = 0.5, ridge_lambda = 0.01,
               resid.XonZ = native$resid_x)
  expect_equal(mixed$statistic, native$statistic, tolerance = 1e-12)
  # alpha only sets `reject`
  expect_identical(gcm(d$x, d$y, d$z, ridge_lambda = 0.01, alpha = 1)$reject, TRUE)
})

test_that("gcm reports bad input with Python's message", {
  skip_if_no_privci()
  d <- sim_data(n = 50)
  expect_error(gcm(d$x, d$y[-1], d$z, ridge_lambda = 1),
               "`x`, `y` and `z` must have the same number of rows", fixed = TRUE,
               class = "python.builtin.ValueError")
  expect_error(gcm(c(d$x[-1], NA), d$y, d$z, ridge_lambda = 1),
               "`x` contains NaN", fixed = TRUE, class = "privci_error")
  expect_error(gcm(d$x, d$y, d$z, ridge_lambda = -1),
               "`ridge_lambda` must be a positive finite number; got -1.0 instead.",
               fixed = TRUE)
  expect_error(gcm(d$x, d$y, d$z, kernel_sigma = 0),
               "`kernel_sigma` must be a positive finite number; got 0.0 instead.",
               fixed = TRUE)
  expect_error(gcm(letters[1:10], 1:10), "`x` must be numeric", fixed = TRUE,
               class = "python.builtin.TypeError")
  expect_error(gcm(d$x[1:10], d$y[1:10], d$z[1:10]), "too few samples", fixed = TRUE)
  expect_error(gcm(d$x, d$y, n_sim = 0), "`n_sim` must be an integer >= 1", fixed = TRUE)
  # R-side mapping errors
  expect_error(gcm(d$x, d$y, d$z, regr.method = "xgboost"), "kernel.ridge", fixed = TRUE)
  expect_error(gcm(d$x, d$y, d$z, regr.pars = list(sigma = 1, foo = 2)), "regr.pars", fixed = TRUE)
  expect_error(gcm(d$x, d$y, d$z, kernel_sigma = 2, regr.pars = list(sigma = 1)), "not both")
  expect_error(gcm(resid.XonZ = d$x), "give `x` and `y`", fixed = TRUE)
  expect_error(gcm(d$x, d$y, seed = 1.5), "`seed` must be NULL or a non-negative whole number")
  expect_error(gcm(d$x, d$y, seed = "a"), "`seed` must be NULL")
})

test_that("a degenerate statistic gives Python's warning and NaN", {
  skip_if_no_privci()
  expect_warning(res <- gcm(rep(1, 10), rep(2, 10)),
                 "the residual products have zero variance", fixed = TRUE,
                 class = "python.DegenerateStatisticWarning")
  expect_true(is.nan(res$statistic))
  expect_true(is.nan(res$p.value))
  expect_false(res$reject)
})

test_that("gcm: centring and progress lines are arguments of the R function", {
  skip_if_no_privci()
  d <- sim_data()
  a <- gcm(d$x + 10, d$y - 5, d$z, ridge_lambda = 0.01, center = TRUE)
  b <- gcm(d$x, d$y, d$z, ridge_lambda = 0.01, center = TRUE)
  expect_equal(a$statistic, b$statistic, tolerance = 1e-8)
  expect_match(a$method, "x and y centred", fixed = TRUE)
  uncentred <- gcm(d$x + 10, d$y - 5, d$z, ridge_lambda = 0.01)
  expect_false(isTRUE(all.equal(uncentred$statistic, b$statistic, tolerance = 1e-8)))
  out <- reticulate::py_capture_output(
    gcm(d$x, d$y, d$z, ridge_lambda = 0.01, progress = TRUE), type = "stderr")
  expect_match(out, "privci.gcm: n = 120: regressing x and y on z", fixed = TRUE)
  expect_match(out, "regressions done in", fixed = TRUE)
})
