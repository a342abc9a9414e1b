test_that("privci_available returns one logical without error", {
  ok <- privci_available()
  expect_true(is.logical(ok) && length(ok) == 1L && !is.na(ok))
})

test_that("the Python module is bound lazily and answers once used", {
  skip_if_no_privci()
  expect_true(inherits(privci:::privci_py, "python.builtin.module"))
  expect_identical(privci:::.privci()$`__name__`, "privci")
})
