sens_crt <- function(lambda) 4 * (1 + 1 / sqrt(lambda) + 1 / lambda^1.5 + 1 / lambda)

test_that("privcrt returns an htest with the privately selected rank", {
  skip_if_no_privci()
  d <- sim_data(n = 150)
  mx <- gaussian_model_x(sin, 1)
  res <- privcrt(d$x, d$y, d$z, epsilon = 2, model_x = mx, y_bound = 8,
                 x_residual_bound = 4, seed = 1)
  expect_htest(res, "rank")
  expect_s3_class(res, "privci_private_htest")
  expect_equal(res$parameter, c(epsilon = 2, m = 19))
  expect_identical(res$n_resamples, 19L)
  rank <- unname(res$statistic)
  expect_true(rank %in% 0:19)
  expect_equal(res$p.value, (1 + rank) / 20)
  expect_identical(res$method, "Private conditional randomization test (PrivCRT)")
  py <- py_direct("privcrt", d$x, d$y, d$z, epsilon = 2, model_x = mx, y_bound = 8,
                  x_residual_bound = 4, seed = 1)
  expect_identical(res$sensitivity, py$privacy$sensitivity)
  expect_identical(unname(res$statistic), py$statistic)
  if (py_has_arg("privcrt", "sensitivity")) {
    # the paper's constant, through `...`
    paper <- privcrt(d$x, d$y, d$z, epsilon = 2, model_x = mx, y_bound = 8,
                     x_residual_bound = 4, seed = 1, sensitivity = "paper")
    expect_equal(paper$sensitivity, sens_crt(5), tolerance = 1e-12)
  }
  expect_equal(res$noise_scale, 2 / 2)
  expect_identical(nrow(res$releases), 1L)
  expect_equal(res$releases$noise_scale, res$noise_scale)
  expect_equal(res$releases$epsilon, 2)
  expect_equal(res$bounds[c("y_bound", "x_residual_bound", "y_center")],
               list(y_bound = 8, x_residual_bound = 4, y_center = 0))
  centred <- privcrt(d$x, d$y + 5, d$z, epsilon = 2, model_x = mx, y_bound = 8,
                     x_residual_bound = 4, seed = 1, y_center = 5)
  expect_equal(centred$bounds$y_center, 5)
  expect_identical(centred$statistic, res$statistic)
  expect_false(res$hardened)
  expect_output(print(res), "rank = .*, epsilon = 2, m = 19, p-value")
  # the smallest attainable p-value, 1 / (m + 1), next to the p-value
  expect_equal(res$min_p.value, 1 / 20)
  out <- paste(capture.output(print(res)), collapse = " ")
  expect_match(gsub("\\s+", " ", out),
               "(the smallest attainable with m = 19 resamples is 1/20 = 0.05; reject",
               fixed = TRUE)
})

test_that("privcrt: same seed, same result; model_x as function, vector or list", {
  skip_if_no_privci()
  d <- sim_data(n = 120)
  run <- function(mx, seed = 3, ...) {
    privcrt(d$x, d$y, d$z, epsilon = 1, model_x = mx, y_bound = 6, x_residual_bound = 4,
            n_resamples = 29, seed = seed, ...)
  }
  a <- run(gaussian_model_x(sin, 1))
  b <- run(gaussian_model_x(sin, 1))
  expect_identical(a$statistic, b$statistic)
  expect_identical(a$p.value, b$p.value)
  expect_identical(run(gaussian_model_x(sin(d$z), 1))$statistic, a$statistic)
  expect_identical(run(list(mean = sin(d$z), scale = rep(1, 120)))$statistic, a$statistic)
  expect_equal(a$parameter[["m"]], 29)
  # precomputed resamples, with the conditional means as model_x
  set.seed(9)
  xr <- t(replicate(9, sin(d$z) + rnorm(120)))
  r <- privcrt(d$x, d$y, d$z, epsilon = 1, model_x = sin(d$z), y_bound = 6,
               x_residual_bound = 4, x_resamples = xr, seed = 1)
  expect_identical(r$n_resamples, 9L)
  expect_true((r$p.value * 10) %in% 1:10)
  # hardened path
  h <- privcrt(d$x, d$y, d$z, epsilon = 1, model_x = gaussian_model_x(sin, 1), y_bound = 6,
               x_residual_bound = 4)
  expect_true(h$hardened)
})

test_that("privcrt reports bad input with Python's message", {
  skip_if_no_privci()
  d <- sim_data(n = 50)
  mx <- gaussian_model_x(sin, 1)
  expect_error(privcrt(d$x, d$y, d$z, epsilon = 0, model_x = mx, y_bound = 6,
                       x_residual_bound = 4),
               "`epsilon` must be a positive finite number; got 0.0 instead.", fixed = TRUE)
  expect_error(privcrt(cbind(d$x, d$x), d$y, d$z, epsilon = 1, model_x = mx, y_bound = 6,
                       x_residual_bound = 4),
               "`x` must be univariate (n,) for the CRT", fixed = TRUE)
  expect_error(privcrt(d$x, d$y, d$z, epsilon = 1, model_x = gaussian_model_x(sin, -1),
                       y_bound = 6, x_residual_bound = 4),
               "`scale` must be a positive finite number; got -1.0 instead.", fixed = TRUE,
               class = "python.builtin.ValueError")
  expect_error(privcrt(d$x, d$y, d$z, epsilon = 1, model_x = gaussian_model_x(sin(d$z)[-1], 1),
                       y_bound = 6, x_residual_bound = 4, seed = 1),
               "the model-X conditional mean has 49 entries but z has 50 rows.", fixed = TRUE)
  expect_error(privcrt(d$x, d$y, d$z, epsilon = 1, model_x = "gauss", y_bound = 6,
                       x_residual_bound = 4),
               "`model_x` must follow the model-X protocol", fixed = TRUE,
               class = "python.builtin.TypeError")
})

test_that("crt returns an htest with an exact resampling p-value", {
  skip_if_no_privci()
  d <- sim_data(n = 150)
  mx <- gaussian_model_x(sin, 1)
  res <- crt(d$x, d$y, d$z, model_x = mx, n_resamples = 99, seed = 2)
  expect_htest(res, "T")
  expect_equal(res$parameter, c(m = 99))
  expect_length(res$resampled_statistics, 99)
  stat <- unname(res$statistic)
  expect_equal(res$p.value,
               (1 + sum(abs(res$resampled_statistics) >= abs(stat))) / 100)
  # the default statistic: sum of (x - E[X|Z]) times the KRR residuals of y
  expect_equal(stat, sum((d$x - sin(d$z)) * krr_resid_r(d$y, d$z, 1, 5)), tolerance = 1e-9)
  g <- crt(d$x, d$y, d$z, model_x = mx, n_resamples = 99, seed = 2, alternative = "greater")
  expect_equal(g$p.value, (1 + sum(g$resampled_statistics >= stat)) / 100)
  again <- crt(d$x, d$y, d$z, model_x = mx, n_resamples = 99, seed = 2)
  expect_identical(again$p.value, res$p.value)
  expect_identical(again$resampled_statistics, res$resampled_statistics)
})

test_that("crt accepts an R function as the statistic", {
  skip_if_no_privci()
  d <- sim_data(n = 80)
  mx <- gaussian_model_x(sin, 1)
  cor_stat <- function(x, y, z) cor(x - sin(z), y)
  res <- crt(d$x, d$y, d$z, model_x = mx, n_resamples = 49, seed = 4, statistic = cor_stat)
  expect_equal(unname(res$statistic), cor_stat(d$x, d$y, d$z), tolerance = 1e-12)
  expect_length(res$resampled_statistics, 49)
  expect_error(crt(d$x, d$y, d$z, model_x = mx, n_resamples = 9, statistic = 3),
               "`statistic` must be None or a callable", fixed = TRUE)
  expect_error(crt(d$x, d$y, d$z, model_x = mx, n_resamples = 0),
               "`n_resamples` must be an integer >= 1", fixed = TRUE)
})

test_that("gaussian_model_x prints what it holds", {
  expect_output(print(gaussian_model_x(sin, 2)), "mean = a function of z, scale = 2")
  expect_output(print(gaussian_model_x(1:5, rep(1, 5))),
                "mean = 5 conditional means, scale = 5 standard deviations")
})
