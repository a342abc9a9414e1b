# The formula interface, Y ~ X | Z (comets' notation), and arguments passed
# on to Python through `...`. Every formula call is compared with the vector
# call on the same columns: same seed, identical numbers.

formula_data <- function(n = 150, seed = 3) {
  set.seed(seed)
  d <- data.frame(Z1 = rnorm(n), Z2 = rnorm(n))
  d$X <- sin(d$Z1) + rnorm(n)
  d$Y <- cos(d$Z1) + 0.5 * d$X + 0.2 * d$Z2 + rnorm(n)
  d$X2 <- d$X^2 / 4
  d
}

test_that("gcm(Y ~ X | Z1 + Z2, data = d) is gcm(X, Y, cbind(Z1, Z2))", {
  skip_if_no_privci()
  d <- formula_data()
  f <- gcm(Y ~ X | Z1 + Z2, data = d, ridge_lambda = 0.1)
  v <- gcm(d$X, d$Y, cbind(d$Z1, d$Z2), ridge_lambda = 0.1)
  expect_htest(f, "Z")
  expect_identical(f$statistic, v$statistic)
  expect_identical(f$p.value, v$p.value)
  expect_identical(f$resid_x, v$resid_x)
  expect_identical(f$data.name, "Y ~ X | Z1 + Z2, data = d")
  expect_true(any(grepl("data:  Y ~ X | Z1 + Z2, data = d", capture.output(print(f)),
                        fixed = TRUE)))
  # the response is y, the first part x (matters for the one-sided tests)
  g <- gcm(Y ~ X | Z1, data = d, ridge_lambda = 0.1, alternative = "greater")
  expect_identical(g$p.value, gcm(d$X, d$Y, d$Z1, ridge_lambda = 0.1,
                                  alternative = "greater")$p.value)
})

test_that("formula forms: no conditioning, `.`, expressions, several columns", {
  skip_if_no_privci()
  d <- formula_data()
  free <- gcm(Y ~ X, data = d)
  expect_identical(free$statistic, gcm(d$X, d$Y)$statistic)
  expect_identical(free$data.name, "Y ~ X, data = d")
  expect_null(free$ridge_lambda_x)
  # `.` after `|`: every column not used before it
  dot <- gcm(Y ~ X | ., data = d[c("X", "Y", "Z1", "Z2")], ridge_lambda = 0.1)
  expect_identical(dot$statistic, gcm(Y ~ X | Z1 + Z2, data = d, ridge_lambda = 0.1)$statistic)
  # expressions of variables, and I()
  e <- gcm(log(Y + 10) ~ X | Z1 + I(Z2^2), data = d, ridge_lambda = 0.1)
  expect_identical(e$statistic,
                   gcm(d$X, log(d$Y + 10), cbind(d$Z1, d$Z2^2), ridge_lambda = 0.1)$statistic)
  # two terms before `|`: the multivariate max test
  m <- gcm(Y ~ X + X2 | Z1, data = d, ridge_lambda = 0.1, n_sim = 99, seed = 2)
  expect_htest(m, "max|Z|")
  expect_identical(m$p.value, gcm(cbind(d$X, d$X2), d$Y, d$Z1, ridge_lambda = 0.1, n_sim = 99,
                                  seed = 2)$p.value)
  expect_equal(dim(m$resid_x), c(150L, 2L))
  # a matrix-valued term (cbind) on the left
  c2 <- gcm(cbind(Y, X2) ~ X | Z1, data = d, ridge_lambda = 0.1, n_sim = 99, seed = 2)
  expect_equal(dim(c2$resid_y), c(150L, 2L))
})

test_that("data may be a data frame, a matrix with column names, a list or absent", {
  skip_if_no_privci()
  d <- formula_data(n = 100)
  ref <- gcm(Y ~ X | Z1, data = d, ridge_lambda = 0.1)$statistic
  m <- as.matrix(d)
  expect_identical(gcm(Y ~ X | Z1, data = m, ridge_lambda = 0.1)$statistic, ref)
  expect_identical(gcm(Y ~ X | Z1, data = as.list(d), ridge_lambda = 0.1)$statistic, ref)
  X <- d$X
  Y <- d$Y
  Z1 <- d$Z1
  here <- gcm(Y ~ X | Z1, ridge_lambda = 0.1)
  expect_identical(here$statistic, ref)
  expect_identical(here$data.name, "Y ~ X | Z1")
  # integer columns are converted like the vector form converts them
  di <- data.frame(a = 1:40 %% 3L, b = (1:40 %% 5L) * 2L, c = 1:40 / 40)
  expect_identical(gcm(b ~ a | c, data = di, ridge_lambda = 0.1)$statistic,
                   gcm(di$a, di$b, di$c, ridge_lambda = 0.1)$statistic)
})

test_that("privgcm, privcrt and crt take the formula form", {
  skip_if_no_privci()
  d <- formula_data(n = 150)
  # the KRR path: the formula's conversion, whatever the spline fit's rule decides at n = 150
  p <- privgcm(Y ~ X | Z1 + Z2, data = d, epsilon = 1, x_bound = 4, y_bound = 4, seed = 1,
               regression = "krr")
  pv <- privgcm(d$X, d$Y, cbind(d$Z1, d$Z2), epsilon = 1, x_bound = 4, y_bound = 4, seed = 1,
                regression = "krr")
  expect_s3_class(p, "privci_private_htest")
  expect_identical(p$statistic, pv$statistic)
  expect_identical(p$p.value, pv$p.value)
  expect_identical(p$sensitivity, pv$sensitivity)
  expect_identical(p$data.name, "Y ~ X | Z1 + Z2, data = d")
  expect_identical(pv$data.name, "d$X and d$Y given cbind(d$Z1, d$Z2)")
  shown <- capture.output(print(p))
  expect_true(any(grepl("data:  Y ~ X | Z1 + Z2, data = d", shown, fixed = TRUE)))
  expect_true(any(grepl("^guarantee: ", shown)))

  mx <- gaussian_model_x(sin, 1)
  r <- privcrt(Y ~ X | Z1, data = d, epsilon = 2, model_x = mx, y_bound = 8,
               x_residual_bound = 4, seed = 1)
  rv <- privcrt(d$X, d$Y, d$Z1, epsilon = 2, model_x = mx, y_bound = 8,
                x_residual_bound = 4, seed = 1)
  expect_identical(r$statistic, rv$statistic)
  expect_identical(r$p.value, rv$p.value)
  expect_identical(r$data.name, "Y ~ X | Z1, data = d")

  # the model's mean function receives Z as the formula evaluates it: here a
  # matrix with one named column per term
  seen <- NULL
  mean_fun <- function(z) {
    seen <<- colnames(z)
    sin(z[, "Z1"])
  }
  c1 <- crt(Y ~ X | Z1 + Z2, data = d, model_x = gaussian_model_x(mean_fun, 1),
            n_resamples = 49, seed = 4)
  expect_identical(seen, c("Z1", "Z2"))
  c2 <- crt(d$X, d$Y, cbind(Z1 = d$Z1, Z2 = d$Z2), model_x = gaussian_model_x(mean_fun, 1),
            n_resamples = 49, seed = 4)
  expect_identical(c1$statistic, c2$statistic)
  expect_identical(c1$resampled_statistics, c2$resampled_statistics)
  expect_identical(c1$data.name, "Y ~ X | Z1 + Z2, data = d")
})

test_that("privgcm and privcrt without z ask Python for the unconditional test", {
  skip_if_no_privci()
  d <- formula_data(n = 120)
  if (py_default_is_none("privgcm", "z")) {
    f <- privgcm(Y ~ X, data = d, epsilon = 1, x_bound = 4, y_bound = 4, seed = 1)
    v <- privgcm(d$X, d$Y, epsilon = 1, x_bound = 4, y_bound = 4, seed = 1)
    expect_identical(f$statistic, v$statistic)
    expect_identical(f$data.name, "Y ~ X, data = d")
    expect_identical(v$data.name, "d$X and d$Y")
  } else {
    # z = NULL reaches Python, which says what it requires
    expect_error(privgcm(Y ~ X, data = d, epsilon = 1, x_bound = 4, y_bound = 4, seed = 1),
                 class = "privci_error")
  }
})

test_that("formula errors are clear and name the term", {
  skip_if_no_privci()
  d <- formula_data(n = 60)
  d$group <- factor(rep(c("a", "b"), 30))
  d$note <- rep(c("secret-1", "secret-2"), 30)
  expect_error(gcm(Y ~ X | group, data = d),
               "the formula term `group` is a factor, not numeric", fixed = TRUE)
  err <- tryCatch(gcm(Y ~ note | Z1, data = d), error = conditionMessage)
  expect_match(err, "the formula term `note` is character, not numeric", fixed = TRUE)
  expect_no_match(err, "secret", fixed = TRUE)
  expect_error(gcm(~ X | Z1, data = d), "`formula` must be a two-sided formula", fixed = TRUE)
  expect_error(gcm(. ~ X | Z1, data = d), "may only stand for the conditioning set",
               fixed = TRUE)
  expect_error(gcm(Y ~ X | Z1, data = unname(as.matrix(d[c("X", "Y", "Z1")]))),
               "`data` is a matrix without column names", fixed = TRUE)
  expect_error(gcm(Y ~ X | Z1, data = "d"), "`data` must be a data frame", fixed = TRUE)
  expect_error(gcm(Y ~ X | Z1 + nothere, data = d), "nothere")
  expect_error(gcm(Y ~ X | ., data = NULL), "`.` in the conditioning set needs `data`",
               fixed = TRUE)
  # values reach Python, whose messages pass through unchanged
  d$Z1[3] <- NA
  expect_error(gcm(Y ~ X | Z1, data = d, ridge_lambda = 1), "`z` contains NaN", fixed = TRUE,
               class = "python.builtin.ValueError")
})

test_that("`...` passes named arguments to the Python function unchanged", {
  skip_if_no_privci()
  d <- sim_data(n = 100)
  # privci.gcm's `center` has no R argument of its own: it arrives through `...`
  centred <- gcm(d$x + 5, d$y - 2, d$z, ridge_lambda = 0.1, center = TRUE)
  by_hand <- gcm(d$x - mean(d$x), d$y - mean(d$y), d$z, ridge_lambda = 0.1)
  expect_equal(centred$statistic, by_hand$statistic, tolerance = 1e-9)
  plain <- gcm(d$x + 5, d$y - 2, d$z, ridge_lambda = 0.1)
  expect_false(isTRUE(all.equal(plain$statistic, centred$statistic)))
  # and through the formula method too
  df <- data.frame(X = d$x + 5, Y = d$y - 2, Z = d$z)
  expect_identical(gcm(Y ~ X | Z, data = df, ridge_lambda = 0.1, center = TRUE)$statistic,
                   centred$statistic)
  # an unknown name reaches Python, which rejects it
  expect_error(privgcm(d$x, d$y, d$z, epsilon = 1, x_bound = 4, y_bound = 4, foo = 1),
               "unexpected keyword argument 'foo'", class = "python.builtin.TypeError")
  expect_error(crt(d$x, d$y, d$z, model_x = gaussian_model_x(sin, 1), bar = 2),
               "unexpected keyword argument 'bar'", class = "python.builtin.TypeError")
  expect_error(gcm(resid.XonZ = d$x, resid.YonZ = d$y, baz = 3),
               "unexpected keyword argument 'baz'", class = "python.builtin.TypeError")
  # R-side checks: names required, no repeats, no overriding the mapped arguments
  # (an unnamed value reaches `...` only once every formal argument is filled)
  expect_error(crt(d$x, d$y, d$z, gaussian_model_x(sin, 1), 9, NULL, "two.sided", 1, NULL,
                   5, 1, "extra"),
               "must be named; got 1 unnamed argument(s)", fixed = TRUE)
  expect_error(privci:::.py_extra(list(1, 2, n_blocks = 3), "x", "privgcm"),
               "privci.privgcm by name and must be named; got 2 unnamed", fixed = TRUE)
  expect_error(privgcm(d$x, d$y, d$z, epsilon = 1, x_bound = 4, y_bound = 4, rng = 3),
               "`rng` in `...` is already set by this R function", fixed = TRUE)
  expect_error(gcm(d$x, d$y, d$z, regressor = "kernel_ridge"),
               "`regressor` in `...` is already set", fixed = TRUE)
  expect_error(privcrt(d$x, d$y, d$z, epsilon = 1, model_x = gaussian_model_x(sin, 1),
                       y_bound = 6, x_residual_bound = 4, qq = 1, qq = 2),
               "the argument `qq` is given more than once", fixed = TRUE)
})

test_that("existing vector calls are unchanged by the generics", {
  skip_if_no_privci()
  d <- sim_data(n = 80)
  expect_identical(gcm(d$x, d$y, d$z, ridge_lambda = 0.1)$data.name, "d$x and d$y given d$z")
  expect_identical(gcm(x = d$x, y = d$y, z = d$z, ridge_lambda = 0.1)$statistic,
                   gcm(d$x, d$y, d$z, ridge_lambda = 0.1)$statistic)
  expect_true(is.function(getS3method("gcm", "formula")))
  expect_true(is.function(getS3method("privgcm", "default")))
})
