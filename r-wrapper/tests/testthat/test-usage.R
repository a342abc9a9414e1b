# Every argument a user may pass to the Python function is in the R function's
# usage (formals), under R's name for it; `...` stays for options added later.

py_params <- function(fun, module = NULL) {
  privci:::.privci()
  f <- if (is.null(module)) privci:::.privci()[[fun]] else reticulate::import(module)[[fun]]
  sig <- reticulate::import("inspect")$signature(f)
  kinds <- reticulate::py_eval(
    "lambda s: [n for n, p in s.parameters.items() if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]")
  as.character(unlist(kinds(sig)))
}

r_name <- c(rng = "seed", feature_rng = "feature_seed")

expect_usage_covers <- function(r_fun, py_fun, module = NULL, skip = character()) {
  py <- setdiff(py_params(py_fun, module), c("data", skip))
  py <- ifelse(py %in% names(r_name), r_name[py], py)
  missing <- setdiff(py, names(formals(r_fun)))
  expect_identical(missing, character(0),
                   info = paste0(py_fun, ": not in the R usage: ", paste(missing, collapse = ", ")))
  expect_true("..." %in% names(formals(r_fun)))
}

test_that("the R usage lists every argument of the Python functions", {
  skip_if_no_privci()
  expect_usage_covers(privci:::privgcm.default, "privgcm")
  expect_usage_covers(privci:::privcrt.default, "privcrt")
  expect_usage_covers(privci:::crt.default, "crt")
  # gcm: `regressor` is gcm.test's `regr.method` in R
  expect_usage_covers(privci:::gcm.default, "gcm", skip = "regressor")
  expect_usage_covers(privci::pc, "pc", module = "privci.causal")
  expect_usage_covers(privci::plan, "plan", module = "privci.plan")
  # and the assumption's new spelling, passed through when given
  expect_true(all(c("assume", "assume_additive", "z_center", "z_scale") %in%
                  names(formals(privci:::privgcm.default))))
})

test_that("assume is passed to Python only when given, as `assume`", {
  skip_if_no_privci()
  d <- sim_data(n = 2000, d = 2)
  if (py_has_arg("privgcm", "assume")) {
    a <- privgcm(d$x, d$y, d$z, epsilon = 8, x_bound = 4, y_bound = 6, seed = 1,
                 z_center = 0, z_scale = 1, assume = "additive")
    b <- privgcm(d$x, d$y, d$z, epsilon = 8, x_bound = 4, y_bound = 6, seed = 1,
                 z_center = 0, z_scale = 1, assume_additive = TRUE)
    expect_identical(a$statistic, b$statistic)
  } else {
    # an older Python: Python's own message names the argument
    expect_error(privgcm(d$x, d$y, d$z, epsilon = 8, x_bound = 4, y_bound = 6, seed = 1,
                         z_center = 0, z_scale = 1, assume = "additive"), "assume")
  }
})
