test_that("privci_budget wraps a Python PrivacyBudget with accessors and an empty ledger", {
  skip_if_no_privci()
  b <- privci_budget(1, name = "test data")
  expect_s3_class(b, "privci_budget")
  expect_true(inherits(b$py, "python.builtin.object"))
  expect_identical(b$epsilon, 1)
  expect_identical(b$name, "test data")
  expect_identical(b$composition, "pure")
  expect_null(b$delta)
  expect_identical(b$spent, 0)
  expect_identical(budget_spent(b), 0)
  expect_identical(b$remaining, 1)
  expect_identical(budget_remaining(b), 1)
  led <- budget_ledger(b)
  expect_s3_class(led, "data.frame")
  expect_identical(nrow(led), 0L)
  expect_named(led, c("index", "test", "epsilon", "charged", "cumulative",
                      "cumulative_epsilon", "details"))
  expect_type(led$index, "integer")
  expect_type(led$test, "character")
  expect_type(led$epsilon, "double")
  expect_output(print(b), "PrivacyBudget \"test data\".*spent 0 of 1", fixed = FALSE)
  expect_error(b$nonsense, "has no element `nonsense`", fixed = TRUE)
  expect_error(budget_ledger(list()), "must be a privacy budget from privci_budget()",
               fixed = TRUE)
  z <- privci_budget(2, delta = 1e-6)
  expect_identical(z$composition, "zcdp")
  expect_identical(z$delta, 1e-6)
})

test_that("privci_budget reports bad input with Python's message", {
  skip_if_no_privci()
  expect_error(privci_budget(-1), "`epsilon` must be a positive finite number",
               fixed = TRUE, class = "python.builtin.ValueError")
  expect_error(privci_budget(1, composition = "zcdp"), "`delta` is required",
               fixed = TRUE, class = "python.builtin.ValueError")
})

test_that("privgcm and privcrt charge a budget; overspending is refused", {
  # the KRR path: the budget's mechanics, whatever the spline fit's public rule decides
  # at this n
  skip_if_no_privci()
  d <- sim_data(n = 150)
  b <- privci_budget(1, name = "d")
  r1 <- privgcm(d$x, d$y, d$z, epsilon = 0.6, x_bound = 4, y_bound = 4, seed = 1,
                 regression = "krr", budget = b)
  expect_s3_class(r1, "privci_private_htest")
  expect_equal(b$spent, 0.6)
  expect_equal(budget_remaining(b), 0.4)
  # the same test without a budget: the same release
  r0 <- privgcm(d$x, d$y, d$z, epsilon = 0.6, x_bound = 4, y_bound = 4, seed = 1,
                 regression = "krr")
  expect_identical(r1$statistic, r0$statistic)
  # overspending: an R error naming the Python exception, nothing charged
  err <- expect_error(
    privgcm(d$x, d$y, d$z, epsilon = 0.6, x_bound = 4, y_bound = 4, seed = 1,
                 regression = "krr", budget = b),
    "does not fit in what remains", class = "python.builtin.BudgetExceededError")
  expect_s3_class(err, "privci_error")
  expect_equal(b$spent, 0.6)
  r2 <- privcrt(d$x, d$y, d$z, epsilon = 0.3, model_x = gaussian_model_x(sin, 1),
                y_bound = 8, x_residual_bound = 4, seed = 1, budget = b)
  expect_s3_class(r2, "privci_private_htest")
  led <- budget_ledger(b)
  expect_identical(nrow(led), 2L)
  expect_identical(led$index, 1:2)
  expect_identical(led$test, c("privgcm", "privcrt"))
  expect_equal(led$epsilon, c(0.6, 0.3))
  expect_equal(led$cumulative_epsilon, c(0.6, 0.9))
  expect_equal(b$spent, 0.9)
  expect_output(print(b), "privcrt")
  # the Python object itself is accepted as well
  r3 <- privgcm(d$x, d$y, d$z, epsilon = 0.05, x_bound = 4, y_bound = 4, seed = 1,
                budget = b$py, regression = "krr")
  expect_equal(budget_spent(b), 0.95)
})
