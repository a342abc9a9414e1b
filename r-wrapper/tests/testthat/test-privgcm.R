sens_gcm <- function(lambda) {
  # C(lambda) of the package's PrivGCM sensitivity (see ?privgcm and the paper)
  s <- 1 / sqrt(lambda)
  4 * (1 + s) * (1 + s + 2 / lambda^1.5 + 2 / lambda)
}

test_that("privgcm returns an htest with the privacy record", {
  skip_if_no_privci()
  d <- sim_data(n = 200)
  res <- privgcm(d$x, d$y, d$z, epsilon = 1, x_bound = 4, y_bound = 4, regression = "krr", seed = 1)
  expect_htest(res, "Z")
  expect_s3_class(res, "privci_private_htest")
  expect_equal(res$parameter, c(epsilon = 1))
  expect_identical(res$data.name, "d$x and d$y given d$z")
  expect_match(res$method, "^Private generalised covariance measure test \\(PrivGCM\\)")
  expect_identical(res$n, 200L)
  expect_equal(res$epsilon, 1)
  py <- py_direct("privgcm", d$x, d$y, d$z, epsilon = 1, x_bound = 4, y_bound = 4, regression = "krr", seed = 1)
  expect_identical(res$sensitivity, py$privacy$sensitivity)
  expect_equal(res$noise_scale, res$sensitivity / 1, tolerance = 1e-12)
  expect_false(res$hardened)
  expect_equal(res$ridge_lambda, 5)
  expect_equal(res$kernel_sigma, 1)
  expect_equal(res$bounds[c("x_bound", "y_bound", "x_center", "y_center")],
               list(x_bound = 4, y_bound = 4, x_center = 0, y_center = 0))
  expect_match(res$guarantee, "1-differentially private", fixed = TRUE)
  expect_true(any(grepl("not hardened", res$caveats, fixed = TRUE)))
  expect_true(any(grepl("use seed = NULL for a release", res$caveats, fixed = TRUE)))
  expect_identical(unname(res$statistic), py$statistic)
  expect_identical(res$p.value, py$pvalue)
  # nothing un-noised is returned
  expect_null(res$resid_x)
  expect_null(res$estimate)
})

test_that("privgcm: the same seed gives the same result, another seed another", {
  skip_if_no_privci()
  d <- sim_data(n = 150)
  a <- privgcm(d$x, d$y, d$z, epsilon = 2, x_bound = 3, y_bound = 3, regression = "krr", seed = 42)
  b <- privgcm(d$x, d$y, d$z, epsilon = 2, x_bound = 3, y_bound = 3, regression = "krr", seed = 42)
  c <- privgcm(d$x, d$y, d$z, epsilon = 2, x_bound = 3, y_bound = 3, regression = "krr", seed = 43)
  expect_identical(a$statistic, b$statistic)
  expect_identical(a$p.value, b$p.value)
  expect_false(identical(a$statistic, c$statistic))
  # seeds beyond R's integer range are passed as Python ints
  big <- privgcm(d$x, d$y, d$z, epsilon = 2, x_bound = 3, y_bound = 3, regression = "krr", seed = 2^40)
  expect_true(is.finite(big$statistic))
})

test_that("privgcm without a seed uses hardened OpenDP noise", {
  skip_if_no_privci()
  d <- sim_data(n = 60)
  res <- privgcm(d$x, d$y, d$z, epsilon = 1, x_bound = 4, y_bound = 4, regression = "krr")
  expect_true(res$hardened)
  expect_match(res$mechanism, "OpenDP", fixed = TRUE)
  expect_gte(res$noise_scale, res$sensitivity)
  shown <- gsub("\\s+", " ", paste(capture.output(print(res)), collapse = " "))
  expect_match(shown, "hardened (OpenDP)", fixed = TRUE)
  expect_no_match(shown, "NOT hardened", fixed = TRUE)
})

test_that("privgcm options: alternative, several columns, per-column bounds, rff", {
  skip_if_no_privci()
  d <- sim_data(n = 150)
  g <- privgcm(d$x, d$y, d$z, epsilon = 1, x_bound = 4, y_bound = 4, regression = "krr", seed = 5,
               alternative = "greater")
  expect_identical(g$alternative, "greater")
  pg <- py_direct("privgcm", d$x, d$y, d$z, epsilon = 1, x_bound = 4, y_bound = 4, regression = "krr", seed = 5,
                  alternative = "greater")
  expect_identical(g$p.value, pg$pvalue)

  m <- privgcm(cbind(d$x, d$x^2), d$y, d$z, epsilon = 1, x_bound = c(4, 16), y_bound = 4,
               seed = 5, n_sim = 99, regression = "krr")
  expect_htest(m, "max|Z|")
  expect_equal(m$bounds$x_bound, c(4, 16))
  expect_equal(m$bounds$x_center, c(0, 0))
  pm <- py_direct("privgcm", cbind(d$x, d$x^2), d$y, d$z, epsilon = 1, x_bound = c(4, 16),
                  y_bound = 4, seed = 5, n_sim = 99, regression = "krr")
  expect_identical(m$sensitivity, pm$privacy$sensitivity)
  expect_identical(m$p.value, pm$pvalue)

  r <- privgcm(d$x, d$y, d$z, epsilon = 1, x_bound = 4, y_bound = 4, regression = "krr", seed = 5,
               kernel_approximation = "rff", n_features = 64, feature_seed = 2)
  r2 <- privgcm(d$x, d$y, d$z, epsilon = 1, x_bound = 4, y_bound = 4, regression = "krr", seed = 5,
                kernel_approximation = "rff", n_features = 64, feature_seed = 2)
  expect_identical(r$statistic, r2$statistic)
  expect_true(any(grepl("random Fourier features", r$caveats, fixed = TRUE)))

  cv <- privgcm(d$x, d$y, d$z, epsilon = 1, x_bound = 4, y_bound = 4, regression = "krr", seed = 5,
                ridge_lambda = "cv")
  expect_true(any(grepl("does NOT cover the tuning step", cv$caveats, fixed = TRUE)))
})

test_that("privgcm: public centres shift the clipping window", {
  skip_if_no_privci()
  d <- sim_data(n = 150)
  a <- privgcm(d$x, d$y, d$z, epsilon = 1, x_bound = 4, y_bound = 4, regression = "krr", seed = 8)
  shifted <- privgcm(d$x + 10, d$y - 3, d$z, epsilon = 1, x_bound = 4, y_bound = 4, seed = 8,
                     x_center = 10, y_center = -3, regression = "krr")
  expect_equal(shifted$statistic, a$statistic, tolerance = 1e-8)
  expect_equal(shifted$bounds$x_center, 10)
  expect_equal(shifted$bounds$y_center, -3)
  uncentred <- privgcm(d$x + 10, d$y - 3, d$z, epsilon = 1, x_bound = 4, y_bound = 4, seed = 8,
                       regression = "krr")
  expect_false(isTRUE(all.equal(uncentred$statistic, a$statistic, tolerance = 1e-8)))
  expect_error(privgcm(d$x, d$y, d$z, epsilon = 1, x_bound = 4, y_bound = 4, x_center = Inf),
               "`x_center` must be a finite number", fixed = TRUE)
})

test_that("privgcm: private centring spends part of epsilon and reports the centres", {
  skip_if_no_privci()
  d <- sim_data(n = 150)
  res <- privgcm(d$x + 2, d$y, d$z, epsilon = 2, x_bound = 4, y_bound = 4, seed = 8,
                 center_epsilon = 0.5, regression = "krr")
  expect_equal(res$parameter[["epsilon"]], 2)
  expect_true(abs(res$bounds$x_center - 2) < 1)
  expect_match(res$guarantee, "0.5 for the released centres, 1.5 for the", fixed = TRUE)
  expect_error(privgcm(d$x, d$y, d$z, epsilon = 1, x_bound = 4, y_bound = 4,
                       center_epsilon = 1),
               "`center_epsilon` must be smaller than `epsilon`", fixed = TRUE)
})

test_that("print shows the test like t.test, with epsilon and the privacy record", {
  skip_if_no_privci()
  d <- sim_data(n = 100)
  res <- privgcm(d$x, d$y, d$z, epsilon = 0.5, x_bound = 4, y_bound = 4, regression = "krr", seed = 1)
  out <- capture.output(print(res))
  expect_true(any(grepl("Private generalised covariance measure test (PrivGCM)", out,
                        fixed = TRUE)))
  expect_true(any(grepl("data:  d$x and d$y given d$z", out, fixed = TRUE)))
  expect_true(any(grepl("^Z = .*, epsilon = 0.5, p-value", out)))
  flat <- gsub("\\s+", " ", paste(out, collapse = " "))
  expect_match(flat, paste0("privacy: ", res$mechanism, ", sensitivity = ",
                            format(res$sensitivity, digits = 4), ", noise scale = ",
                            format(res$noise_scale, digits = 4), ", NOT hardened"),
               fixed = TRUE)
  expect_true(any(grepl("^guarantee: ", out)))
  capture.output(shown <- withVisible(print(res)))
  expect_false(shown$visible)
  expect_identical(shown$value, res)
})

test_that("privgcm reports bad input with Python's message", {
  skip_if_no_privci()
  d <- sim_data(n = 50)
  expect_error(privgcm(d$x, d$y, d$z, epsilon = -1, x_bound = 4, y_bound = 4),
               "`epsilon` must be a positive finite number; got -1.0 instead.",
               fixed = TRUE, class = "python.builtin.ValueError")
  expect_error(privgcm(d$x, d$y, d$z, epsilon = 1, x_bound = 0, y_bound = 4),
               "`x_bound` must be a positive finite number; got 0.0 instead.", fixed = TRUE)
  expect_error(privgcm(d$x, d$y, d$z, epsilon = 1, x_bound = NULL, y_bound = 4),
               "`x_bound` is required", fixed = TRUE, class = "python.builtin.TypeError")
  expect_error(privgcm(d$x, d$y, d$z, epsilon = 1, x_bound = 4, y_bound = 4,
                       ridge_lambda = "auto", regression = "krr"),
               "`ridge_lambda` must be a positive number or 'cv'", fixed = TRUE)
  expect_error(privgcm(d$x, d$y, d$z, epsilon = 1, x_bound = 4, y_bound = 4,
                       kernel_approximation = "nystrom", regression = "krr"),
               "`kernel_approximation` must be 'exact' or 'rff'", fixed = TRUE)
  # with the spline fit (the default), a KRR option is refused whatever its value
  expect_error(privgcm(d$x, d$y, d$z, epsilon = 1, x_bound = 4, y_bound = 4,
                       ridge_lambda = 5),
               "`ridge_lambda` applies to regression='krr' only", fixed = TRUE)
  expect_error(privgcm(d$x, d$y, d$z, epsilon = 1, x_bound = 4, y_bound = 4, regression = "krr", seed = -1),
               "`seed` must be NULL or a non-negative whole number", fixed = TRUE)
  expect_error(privgcm(d$x, d$y, d$z, epsilon = 1, x_bound = 4, y_bound = 4, feature_seed = 0.5),
               "`feature_seed` must be NULL", fixed = TRUE)
})

test_that("privgcm: the paper's Algorithm 1 through arguments passed on by `...`", {
  skip_if_no_privci()
  d <- sim_data(n = 150)
  if (py_has_arg("privgcm", "n_blocks") && py_has_arg("privgcm", "sensitivity")) {
    res <- privgcm(d$x, d$y, d$z, epsilon = 1, x_bound = 4, y_bound = 4, regression = "krr", seed = 1,
                   n_blocks = NULL, sensitivity = "paper")
    expect_equal(res$sensitivity, sens_gcm(5), tolerance = 1e-12)
    expect_equal(res$noise_scale, sens_gcm(5), tolerance = 1e-12)
    expect_equal(res$p.value, 2 * pnorm(-abs(unname(res$statistic))), tolerance = 1e-12)
    py <- py_direct("privgcm", d$x, d$y, d$z, epsilon = 1, x_bound = 4, y_bound = 4, regression = "krr", seed = 1,
                    n_blocks = NULL, sensitivity = "paper")
    expect_identical(res$statistic, c(Z = py$statistic))
  } else {
    # before those options existed: the paper's constant is the default
    res <- privgcm(d$x, d$y, d$z, epsilon = 1, x_bound = 4, y_bound = 4, regression = "krr", seed = 1)
    expect_equal(res$sensitivity, sens_gcm(5), tolerance = 1e-12)
  }
})

test_that("privgcm and privcrt: 'auto' bounds and centres from R (issue 15)", {
  skip_if_no_privci()
  d <- sim_data(n = 800)
  d$x <- d$x + 50
  d$y <- d$y - 20
  res <- privgcm(d$x, d$y, d$z, epsilon = 2, x_bound = "auto", y_bound = "auto",
                 x_center = "auto", y_center = "auto", bounds_epsilon = 0.4, regression = "krr", seed = 3)
  expect_htest(res, "Z")
  expect_true(abs(res$bounds$x_center - 50) < 2 && abs(res$bounds$y_center + 20) < 2)
  expect_true(res$bounds$x_bound > 0.1 && res$bounds$x_bound < 20)
  expect_match(res$guarantee, "0.4 for the released bounds/centres", fixed = TRUE)
  py <- py_direct("privgcm", d$x, d$y, d$z, epsilon = 2, x_bound = "auto", y_bound = "auto",
                  x_center = "auto", y_center = "auto", bounds_epsilon = 0.4, regression = "krr", seed = 3)
  expect_identical(unname(res$statistic), py$statistic)
  mx <- gaussian_model_x(function(z) sin(as.matrix(z)[, 1]), 1)
  expect_warning(crt <- privcrt(d$x - 50, d$y, d$z, epsilon = 2, model_x = mx,
                                y_bound = "auto", x_residual_bound = "auto",
                                y_center = "auto", seed = 4),
                 "below 60", fixed = TRUE)
  expect_match(crt$guarantee, "for the released bounds/centres", fixed = TRUE)
  expect_true(crt$bounds$x_residual_bound > 0)
})

# A hand-made PrivGCM result for the print method's tests (no Python).
handmade_result <- function(statistic, epsilon) {
  list(statistic = statistic, parameter = c(epsilon = epsilon), p.value = 1,
       null.value = c("E[cov(X, Y | Z)]" = 0), alternative = "two.sided",
       method = "PrivGCM", data.name = "x and y given z", n = 442L,
       mechanism = "laplace", sensitivity = 2, noise_scale = 2, hardened = FALSE,
       guarantee = "g", caveats = character())
}

test_that("print names the fail-safe and the smallest p-value next to the p-value", {
  # the print method alone, on hand-made results (no Python): every branch
  base <- handmade_result(c(t = 4.26), 1)
  safe <- structure(c(base, list(failsafe = "the nested fits disagree")),
                    class = c("privci_private_htest", "htest"))
  out <- capture.output(print(safe))
  at <- grep("p-value = 1", out, fixed = TRUE)
  expect_length(at, 1L)
  expect_match(gsub("\\s+", " ", paste(out[at:(at + 1L)], collapse = " ")),
               "p-value = 1 (fail-safe, not evidence: the nested fits disagree; see the",
               fixed = TRUE)
  plain <- structure(base, class = c("privci_private_htest", "htest"))
  expect_false(any(grepl("fail-safe", capture.output(print(plain)), fixed = TRUE)))
  rank <- structure(c(base, list(min_p.value = 1 / 20)),
                    class = c("privci_private_htest", "htest"))
  rank$p.value <- 0.05
  shown <- gsub("\\s+", " ", paste(capture.output(print(rank)), collapse = " "))
  expect_match(shown, paste0("p-value = 0.05 (the smallest attainable with m = 19 resamples ",
                             "is 1/20 = 0.05; reject at level alpha when p-value <= alpha)"),
               fixed = TRUE)
})

test_that("print says when the unchecked linear fit was shrunk by its floor", {
  # the fit check's verdict, on a hand-made result (no Python)
  base <- handmade_result(c(z = 0.3), 8)
  fc <- list(certified = FALSE, resolvable = TRUE, allowance_share = 0, intervals = 4L,
             columns = 3L, assume_additive = FALSE, floor_binds = TRUE)
  shrunk <- structure(c(base, list(fit_check = fc)),
                      class = c("privci_private_htest", "htest"))
  shown <- gsub("\\s+", " ", paste(capture.output(print(shrunk)), collapse = " "))
  expect_match(shown, "NOT certified: the unchecked linear fit was shrunk", fixed = TRUE)
  fc$floor_binds <- FALSE
  other <- structure(c(base, list(fit_check = fc)),
                     class = c("privci_private_htest", "htest"))
  shown <- gsub("\\s+", " ", paste(capture.output(print(other)), collapse = " "))
  expect_match(shown, "NOT certified: the nested fits disagree", fixed = TRUE)
})

test_that("two columns of z: R mirrors Python's result, fail-safe and caveats in R syntax", {
  skip_if_no_privci()
  set.seed(31)
  n <- 2000
  z <- matrix(rnorm(2 * n), n, 2)
  x <- sin(z[, 1]) + rnorm(n)
  y <- z[, 2] + x + rnorm(n)
  call <- function(...) privgcm(x, y, z, epsilon = 8, x_bound = 4, y_bound = 6, seed = 1,
                                z_center = 0, z_scale = 1, ...)
  py <- tryCatch(py_direct("privgcm", x, y, z, epsilon = 8, x_bound = 4, y_bound = 6,
                           seed = 1, z_center = 0, z_scale = 1), error = function(e) e)
  if (inherits(py, "error")) {
    # a Python that refuses what its rule cannot resolve: R passes the error on
    expect_error(call(), "cannot be resolved")
  } else {
    res <- call()
    expect_identical(res$p.value, py$pvalue)
    expect_identical(names(res$statistic), py$statistic_name)
    expect_identical(res$fit_check$certified, isTRUE(py$fit_check$certified))
    expect_identical(res$fit_check$columns, 2L)
    expect_identical(res$failsafe, if (!is.null(py$failsafe)) privci:::.r_syntax(py$failsafe))
    out <- capture.output(print(res))
    pline <- grep("p-value", out, fixed = TRUE)[1L]
    near <- paste(out[pline:min(length(out), pline + 2L)], collapse = " ")
    expect_identical(grepl("(fail-safe, not evidence:", near, fixed = TRUE),
                     !is.null(res$failsafe))
  }
  add <- call(assume_additive = TRUE)
  expect_true(add$fit_check$resolvable)
  expect_lt(add$p.value, 0.05)
  expect_null(add$failsafe)
  expect_false(any(grepl("fail-safe, not evidence", capture.output(print(add)), fixed = TRUE)))
  # the caveats and the guarantee are in R's syntax: no Python `name=True/None/'...'`
  texts <- c(add$caveats, add$guarantee)
  expect_true(any(grepl("assume", add$caveats, fixed = TRUE)))
  expect_false(any(grepl("[a-z_]=(True|False|None|')", texts)))
})

test_that("privgcm's default is the released spline regression, as in Python", {
  skip_if_no_privci()
  d <- sim_data(n = 3000)
  # the default releases z's centre and scale privately (part of epsilon)
  res <- suppressWarnings(privgcm(d$x, d$y, d$z, epsilon = 4, x_bound = 4, y_bound = 4,
                                  seed = 3))
  py <- suppressWarnings(py_direct("privgcm", d$x, d$y, d$z, epsilon = 4, x_bound = 4,
                                   y_bound = 4, seed = 3))
  expect_htest(res, py$statistic_name)
  expect_true(py$statistic_name %in% c("t", "z"))
  expect_identical(unname(res$statistic), py$statistic)
  expect_identical(res$p.value, py$pvalue)
  expect_equal(res$sensitivity, 2)
  expect_match(res$mechanism, "^released nested (cubic-spline )?regression")
  expect_identical(res$mechanism, py$privacy$mechanism)
  expect_identical(res$fit_check$certified, isTRUE(py$fit_check$certified))
  expect_true(is.numeric(res$fit_check$allowance_share))
  expect_match(res$method, paste0("released spline regression, ((5|10|20) noisy block sums|",
                                  "one noisy sum and its released variance)"))
  expect_identical(names(res$statistic), py$statistic_name)
  shown <- gsub("\\s+", " ", paste(capture.output(print(res)), collapse = " "))
  expect_match(shown, "for the released regression", fixed = TRUE)
  expect_match(shown, "for the released centres of z", fixed = TRUE)
  expect_match(shown, "fit check:", fixed = TRUE)
  # public z_center / z_scale (arguments of the R function); the KRR path on request
  pub <- privgcm(d$x, d$y, d$z, epsilon = 4, x_bound = 4, y_bound = 4, seed = 3,
                 z_center = 0, z_scale = 1)
  sc <- privgcm(d$x, d$y, 10 + 2 * d$z, epsilon = 4, x_bound = 4, y_bound = 4, seed = 3,
                z_center = 10, z_scale = 2)
  expect_equal(unname(sc$statistic), unname(pub$statistic), tolerance = 1e-8)
  krr <- privgcm(d$x, d$y, d$z, epsilon = 4, x_bound = 4, y_bound = 4, seed = 3,
                 regression = "krr")
  expect_equal(krr$sensitivity, sens_gcm(5), tolerance = 1e-12)
  expect_error(privgcm(d$x, d$y, d$z, epsilon = 4, x_bound = 4, y_bound = 4,
                       kernel_sigma = 0.5), "applies to regression='krr' only")
})

test_that("privgcm's releases are a data.frame, as in Python", {
  skip_if_no_privci()
  d <- sim_data(n = 3000)
  res <- suppressWarnings(privgcm(d$x, d$y, d$z, epsilon = 4, x_bound = 4, y_bound = 4,
                                  seed = 3))
  py <- suppressWarnings(py_direct("privgcm", d$x, d$y, d$z, epsilon = 4, x_bound = 4,
                                   y_bound = 4, seed = 3))
  rel <- res$releases
  expect_s3_class(rel, "data.frame")
  expect_identical(names(rel), c("release", "epsilon", "sensitivity", "noise_scale",
                                 "mechanism", "rows"))
  expect_identical(nrow(rel), length(py$privacy$releases))
  expect_true(all(c("half A", "half B", "all") %in% rel$rows))
  # sequential over all rows, the halves in parallel: at most epsilon
  halves <- tapply(rel$epsilon[rel$rows != "all"], rel$rows[rel$rows != "all"], sum)
  expect_lte(sum(rel$epsilon[rel$rows == "all"]) + max(halves), 4 + 1e-12)
})

test_that("Python's syntax in messages is written in R's", {
  expect_identical(privci:::.r_syntax("use rng=None for a release"),
                   "use seed = NULL for a release")
  expect_identical(privci:::.r_syntax(
    "unless assume_additive=True; x_bound='auto', y_center=\"auto\", flag=False, feature_rng=2"),
    "unless assume_additive = TRUE; x_bound = \"auto\", y_center = \"auto\", flag = FALSE, feature_seed = 2")
  expect_identical(privci:::.r_syntax("p = 1 and E[X | Z]"), "p = 1 and E[X | Z]")
  expect_identical(privci:::.r_syntax(character()), character())
})

test_that("column names where data belong: the error names the formula form", {
  skip_if_no_privci()
  df <- data.frame(exposure = rnorm(50), outcome = rnorm(50), age = rnorm(50))
  expect_error(privgcm(df, "exposure", "outcome", epsilon = 1, x_bound = 4, y_bound = 4),
               "use the formula form, e.g. privgcm(outcome ~ exposure, data = df",
               fixed = TRUE)
  expect_error(gcm(df$exposure, "outcome", df$age), "`y` is a column name (\"outcome\")",
               fixed = TRUE)
})

test_that("privgcm tightens public bounds by default; tighten = FALSE keeps them", {
  skip_if_no_privci()
  skip_if_not(py_has_arg("privgcm", "tighten"), "privci without `tighten`")
  d <- sim_data(n = 5000)
  tight <- privgcm(d$x, d$y, d$z, epsilon = 2, x_bound = 8, y_bound = 8, z_center = 0,
                   z_scale = 1, seed = 4)
  kept <- privgcm(d$x, d$y, d$z, epsilon = 2, x_bound = 8, y_bound = 8, z_center = 0,
                  z_scale = 1, seed = 4, tighten = FALSE)
  # the released window lies inside the public one; the public one is kept as given
  expect_lt(tight$bounds$x_bound, 8)
  expect_lt(tight$bounds$y_bound, 8)
  expect_equal(kept$bounds$x_bound, 8)
  expect_true(any(grepl("tightened", tight$caveats, fixed = TRUE)))
  expect_false(any(grepl("tightened", kept$caveats, fixed = TRUE)))
  py <- py_direct("privgcm", d$x, d$y, d$z, epsilon = 2, x_bound = 8, y_bound = 8,
                  z_center = 0, z_scale = 1, seed = 4, tighten = FALSE)
  expect_identical(unname(kept$statistic), py$statistic)
  expect_error(privgcm(d$x, d$y, d$z, epsilon = 2, x_bound = 8, y_bound = 8,
                       tighten = "yes"), "tighten")
})
