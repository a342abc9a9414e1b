# A -> C <- B, C -> D
pc_data <- function(n = 400, seed = 1) {
  set.seed(seed)
  A <- rnorm(n)
  B <- rnorm(n)
  C <- A + B + 0.5 * rnorm(n)
  D <- C + 0.5 * rnorm(n)
  data.frame(A, B, C, D)
}

test_that("pc returns the graph with dimnames, the ledger and the run's budget", {
  skip_if_no_privci()
  d <- pc_data()
  # each conditional test releases its z centre and scale privately; at this n the public-
  # number warning says they are unreliable (and only that warning may appear)
  seen <- character()
  # per-test PrivGCM on the KRR path (an option of the test, through `...`): at n = 400
  # the spline fit's rule may refuse a test's share of epsilon
  res <- withCallingHandlers(pc(d, epsilon = 20, bounds = 4, seed = 1, method = "per-test",
                                regression = "krr"),
                             warning = function(w) {
    seen <<- c(seen, conditionMessage(w))
    invokeRestart("muffleWarning")
  })
  expect_true(all(grepl("below 60", seen, fixed = TRUE)))
  expect_s3_class(res, "privci_pc")
  nm <- list(c("A", "B", "C", "D"), c("A", "B", "C", "D"))
  expect_type(res$adjacency, "logical")
  expect_identical(dim(res$adjacency), c(4L, 4L))
  expect_identical(dimnames(res$adjacency), nm)
  expect_true(isSymmetric(res$adjacency))
  expect_false(any(diag(res$adjacency)))
  expect_type(res$directed, "integer")
  expect_identical(dimnames(res$directed), nm)
  expect_true(all(res$directed %in% c(-1L, 0L, 1L)))
  expect_identical(res$adjacency, res$directed != 0L | t(res$directed) != 0L)
  expect_s3_class(res$budget, "privci_budget")
  expect_s3_class(res$ledger, "data.frame")
  expect_identical(nrow(res$ledger), res$n_tests)
  expect_true(res$n_tests >= 6L)
  expect_equal(res$epsilon, 20)
  expect_equal(res$spent, sum(res$ledger$epsilon))
  expect_true(res$spent <= 20 + 1e-9)
  expect_identical(res$ledger, budget_ledger(res$budget))
  expect_true(all(res$ledger$test == "privgcm"))
  expect_match(res$guarantee, "jointly 20-DP")
  expect_match(res$caveats, "seed = NULL", fixed = TRUE, all = FALSE)
  expect_s3_class(res$edges, "data.frame")
  expect_named(res$edges, c("from", "mark", "to"))
  expect_output(print(res), "Private PC algorithm.*epsilon spent")
  # the same call in Python gives the same graph
  py <- reticulate::import("privci.causal")$pc(privci:::.py_data(d), epsilon = 20,
                                                bounds = 4, rng = privci:::.py_seed(1),
                                                method = "per-test", regression = "krr")
  expect_identical(unname(res$adjacency), py$adjacency)
  expect_identical(unname(res$directed), matrix(as.integer(py$directed), 4L, 4L))
})

test_that("pc releases the table once by default", {
  skip_if_no_privci()
  res <- pc(pc_data(n = 3000), epsilon = 20, bounds = 4, seed = 1)
  expect_identical(nrow(res$ledger), 1L)
  expect_identical(res$ledger$test, "privci.release")
  expect_true(res$n_tests >= 6L)
  expect_equal(res$spent, 20)
  expect_match(res$guarantee, "one 20-DP release")
})

test_that("pc: matrix without names, options through `...`, an outer budget", {
  skip_if_no_privci()
  m <- as.matrix(pc_data(n = 300, seed = 2))
  colnames(m) <- NULL
  res <- pc(m, epsilon = 5, bounds = 4, seed = 3, max_order = 0L, alpha = 0.1)
  expect_identical(rownames(res$adjacency), paste0("V", 1:4))
  expect_identical(res$n_tests, 6L)
  expect_equal(res$alpha, 0.1)
  outer <- privci_budget(6, name = "outer")
  run <- pc(m, epsilon = 5, bounds = 4, seed = 3, max_order = 0L, budget = outer)
  expect_equal(outer$spent, 5)
  expect_identical(budget_ledger(outer)$test, "privci.causal.pc")
  expect_error(pc(m, epsilon = 5, bounds = 4, seed = 3, budget = outer),
               class = "python.builtin.BudgetExceededError")
  expect_equal(outer$spent, 5)
  expect_error(pc(m, epsilon = 5, bounds = 4, rng = 3),
               "`rng` in `...` is already set by this R function", fixed = TRUE)
})
