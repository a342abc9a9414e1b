test_that("plan() gives Python's plan, solved for the missing one of n, epsilon, power", {
  skip_if_no_privci()
  p <- plan("privgcm", n = 10000, epsilon = 8, effect = 1, x_bound = 4, y_bound = 5.7,
            regression = "krr")
  expect_s3_class(p, "privci_plan")
  py <- reticulate::import("privci.plan")$plan("privgcm", n = 10000L, epsilon = 8, effect = 1,
                                                x_bound = 4, y_bound = 5.7,
                                                regression = "krr")
  expect_identical(p$power, py$power)
  expect_identical(p$solved_for, "power")
  n <- plan("privgcm", epsilon = 8, power = 0.8, effect = 1, x_bound = 4, y_bound = 5.7,
            regression = "krr")
  expect_identical(n$solved_for, "n")
  expect_gte(n$power, 0.8)
  expect_gt(n$n, 10000L)
  expect_output(print(p), "PowerPlan\\(privgcm: n = 10000")
})

test_that("plan() says when the spline fit is not resolvable (the fail-safe)", {
  skip_if_no_privci()
  p <- plan("privgcm", n = 442, epsilon = 8, effect = 0.2, z_columns = 3,
            assume_additive = TRUE)
  expect_identical(p$power, 0)
  expect_false(p$details$resolvable)
  # the printed plan says the fit is not resolvable here (then privgcm refuses or
  # answers with the fail-safe p = 1, as the Python version does)
  printed <- paste(capture.output(print(p)), collapse = " ")
  expect_match(printed, "not\\s+resolvable")
  crt <- plan("privcrt", n = 1000, epsilon = 2, effect = 0.5, x_bound = 4, y_bound = 4)
  expect_gt(crt$power, 0.5)
})

test_that("plan() reports bad input with Python's message, and needs `effect`", {
  skip_if_no_privci()
  expect_error(plan("privgcm", n = 100, epsilon = 1, power = 0.8, effect = 1),
               "give exactly two of `n`, `epsilon` and `power`", fixed = TRUE)
  expect_error(plan("privgcm", n = 100, epsilon = 1), "`effect` is required", fixed = TRUE)
})

test_that("plan(regular = FALSE) says the case is not modelled instead of a number", {
  skip_if_no_privci()
  params <- reticulate::py_eval("lambda f: list(__import__('inspect').signature(f).parameters)")
  py_has <- "regular" %in% unlist(params(reticulate::import("privci.plan")$plan))
  skip_if_not(py_has, "the Python package has no `regular`")
  p <- suppressWarnings(plan("privgcm", n = 10000, epsilon = 2, effect = 0.1, x_bound = 4,
                             y_bound = 4, regular = FALSE))
  expect_true(is.nan(p$power))
  expect_false(p$details$modelled)
  expect_warning(plan("privgcm", n = 10000, epsilon = 2, effect = 0.1, x_bound = 4,
                      y_bound = 4, regular = FALSE))
  expect_error(plan("privgcm", n = 10000, epsilon = 2, effect = 0.1, regular = NA),
               "`regular` must be TRUE or FALSE", fixed = TRUE)
})

test_that("plan() gives the least power of the reference shapes and warns where they differ", {
  skip_if_no_privci()
  has <- reticulate::py_has_attr(reticulate::import("privci.plan"), "REFERENCE_SHAPES")
  skip_if_not(has, "the Python package has one reference shape")
  expect_warning(
    p <- plan("privgcm", n = 10000, epsilon = 1, effect = 0.15, effect_sd = 1.02,
              x_bound = 4, y_bound = 4, z_columns = 2, assume = "additive", auto = "none",
              ranges = 0.4),
    "depends on the shape of the regressions")
  sp <- unlist(p$details$shape_powers)
  expect_setequal(names(sp), c("clipped line", "half sine"))
  expect_identical(p$power, min(sp))
  expect_lt(sp[["half sine"]], sp[["clipped line"]])
})

test_that("plan(tighten = ) plans privgcm's tightened windows as the Python call does", {
  skip_if_no_privci()
  params <- reticulate::py_eval("lambda f: list(__import__('inspect').signature(f).parameters)")
  py_has <- "tighten" %in% unlist(params(reticulate::import("privci.plan")$plan))
  skip_if_not(py_has, "the Python package has no `tighten` in plan")
  p <- plan("privgcm", n = 2000, epsilon = 2, effect = 0.8, x_bound = 3.5, y_bound = 4.5)
  expect_true(p$details$tightened)
  w <- unlist(p$details$windows)
  expect_true(all(w > 0) && w[1] < 3.5 && w[2] < 4.5)
  f <- plan("privgcm", n = 2000, epsilon = 2, effect = 0.8, x_bound = 3.5, y_bound = 4.5,
            tighten = FALSE)
  expect_false(f$details$tightened)
  py <- reticulate::import("privci.plan")$plan("privgcm", n = 2000L, epsilon = 2,
                                                effect = 0.8, x_bound = 3.5, y_bound = 4.5,
                                                tighten = FALSE)
  expect_identical(f$power, py$power)
  expect_error(plan("privgcm", n = 2000, epsilon = 2, effect = 0.8, tighten = "yes"),
               "`tighten` must be \"auto\", TRUE or FALSE", fixed = TRUE)
  expect_error(plan("privgcm", n = 2000, epsilon = 2, effect = 0.8, tighten = TRUE,
                    regression = "krr"), "tighten=True", fixed = TRUE)
})

test_that("plan() passes residual_skewness to Python's tightened model", {
  skip_if_no_privci()
  params <- reticulate::py_eval("lambda f: list(__import__('inspect').signature(f).parameters)")
  has <- "residual_skewness" %in% unlist(params(reticulate::import("privci.plan")$plan))
  skip_if_not(has, "the Python package has no residual_skewness")
  kw <- list("privgcm", n = 1800, epsilon = 2, effect = 0.146, effect_sd = 1.04,
             x_bound = 4.78, y_bound = 4.51, ranges = 0.22, auto = "none")
  p0 <- suppressWarnings(do.call(plan, kw))
  p2 <- suppressWarnings(do.call(plan, c(kw, list(residual_skewness = c(2, 0)))))
  py <- suppressWarnings(reticulate::import("privci.plan")$plan(
    "privgcm", n = 1800L, epsilon = 2, effect = 0.146, effect_sd = 1.04, x_bound = 4.78,
    y_bound = 4.51, ranges = 0.22, auto = "none", residual_skewness = c(2, 0)))
  expect_identical(p2$power, py$power)
  expect_lt(p2$power, p0$power - 0.05)
  expect_equal(unlist(p2$details$residual_skewness), c(2, 0))
  expect_identical(suppressWarnings(do.call(plan, c(kw, list(residual_skewness = 0))))$power,
                   p0$power)
  expect_error(plan("privgcm", n = 2000, epsilon = 2, effect = 0.8, residual_skewness = "2"),
               "`residual_skewness` must be one number or two", fixed = TRUE)
  expect_error(plan("privgcm", n = 2000, epsilon = 2, effect = 0.8, residual_skewness = 5),
               "`residual_skewness` must be finite and at most 4", fixed = TRUE)
})

test_that("plan_models() gives Python's ladder of models", {
  skip_if_no_privci()
  has <- reticulate::py_has_attr(reticulate::import("privci.plan"), "plan_models")
  skip_if_not(has, "the Python package has no plan_models")
  m <- plan_models(n = 442, epsilon = 8, effect = 0.2, z_columns = 3)
  expect_s3_class(m, "privci_models_plan")
  expect_identical(m$table$model, c("full", "additive", "linear"))
  expect_identical(m$table$resolvable, c(FALSE, FALSE, TRUE))
  expect_identical(m$recommended, "linear")
  py <- reticulate::import("privci.plan")$plan_models(n = 442L, epsilon = 8, effect = 0.2,
                                                      z_columns = 3L)
  expect_identical(m$table$power[3], py$rows[[3]]$power)
  expect_output(print(m), "recommended: assume = \"linear\"", fixed = TRUE)
  one <- plan_models(n = 10000, epsilon = 2, effect = 0.3, z_columns = 1, x_bound = 4,
                     y_bound = 4)
  expect_identical(one$recommended, "full")
  expect_error(plan_models(n = 100, epsilon = 1, effect = 0.1, z_columns = 2,
                           assume = "linear"), "sets `assume` itself", fixed = TRUE)
  expect_error(plan_models(n = 100, epsilon = 1, effect = 0.1), "are required", fixed = TRUE)
})
