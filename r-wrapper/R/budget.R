#' A privacy budget shared by several private tests
#'
#' Creates a Python `privci.PrivacyBudget` (an OpenDP privacy filter) for one
#' data set. Pass it as `budget =` to [privgcm()], [privcrt()] or [pc()]:
#' every release is charged to it before the data are read, and a release
#' that would overspend it is refused with an error of class
#' `"python.builtin.BudgetExceededError"` (nothing is computed then, and the
#' budget is unchanged, so a smaller release can still be admitted).
#'
#' @param epsilon Total privacy loss allowed for all releases charged to the
#'   budget (> 0).
#' @param delta `NULL` or, with `composition = "zcdp"`, the delta of the
#'   total (epsilon, delta)-DP guarantee. Giving `delta` without
#'   `composition` selects `"zcdp"`.
#' @param composition `NULL` (`"pure"` without `delta`), `"pure"` (basic
#'   sequential composition of pure DP) or `"zcdp"` (zero-concentrated DP
#'   accounting, better from a few dozen tests on).
#' @param name `NULL` or a label for the ledger and the messages (public: do
#'   not put data in it).
#' @param b,x A `privci_budget`.
#' @param ... Ignored.
#'
#' @return `privci_budget()`: an object of class `privci_budget` wrapping the
#'   Python object (which is shared, not copied: charges made through any
#'   copy of the R object are seen by all). `b$spent` and `budget_spent(b)`
#'   give the epsilon spent so far, `b$remaining` and `budget_remaining(b)`
#'   what is left; `b$epsilon`, `b$delta`, `b$composition` and `b$name` are
#'   as given, and `b$py` is the Python object. `budget_ledger(b)` returns
#'   the ledger as a data frame with one row per admitted release and the
#'   columns `index`, `test`, `epsilon`, `charged`, `cumulative`,
#'   `cumulative_epsilon` and `details`. `print()` shows the ledger.
#' @seealso [privgcm()], [privcrt()], [pc()].
#' @export
#' @examples
#' if (privci_available()) {
#'   b <- privci_budget(1, name = "example data")
#'   n <- 300
#'   z <- rnorm(n)
#'   x <- sin(z) + rnorm(n)
#'   y <- cos(z) + rnorm(n)
#'   privgcm(x, y, z, epsilon = 0.6, x_bound = 4, y_bound = 4, regression = "krr",
#'           seed = 1, budget = b)
#'   b$remaining
#'   budget_ledger(b)
#'   # a second release of epsilon 0.6 would overspend: refused, nothing computed
#'   res <- tryCatch(
#'     privgcm(x, y, z, epsilon = 0.6, x_bound = 4, y_bound = 4, regression = "krr",
#'             seed = 1, budget = b),
#'     python.builtin.BudgetExceededError = function(e) conditionMessage(e))
#'   res
#'   print(b)
#' }
privci_budget <- function(epsilon, delta = NULL, composition = NULL, name = NULL) {
  mod <- .privci()
  py <- .py_call(mod$PrivacyBudget,
                 list(epsilon = epsilon, delta = delta, composition = composition, name = name),
                 match.call())
  .as_budget(py)
}

# Wrap a Python PrivacyBudget (e.g. the one returned by privci.causal.pc).
.as_budget <- function(py) structure(list(py = py), class = "privci_budget")

# The Python object of a privci_budget.
.py_budget <- function(b) .subset2(b, "py")

#' @rdname privci_budget
#' @export
budget_spent <- function(b) {
  .check_budget(b)
  .py_budget(b)$spent
}

#' @rdname privci_budget
#' @export
budget_remaining <- function(b) {
  .check_budget(b)
  .py_budget(b)$remaining
}

#' @rdname privci_budget
#' @export
budget_ledger <- function(b) {
  .check_budget(b)
  cols <- .py_budget(b)$ledger_columns()
  types <- list(index = as.integer, test = as.character, epsilon = as.double,
                charged = as.double, cumulative = as.double, cumulative_epsilon = as.double,
                details = as.character)
  out <- lapply(names(types), function(nm) types[[nm]](unlist(cols[[nm]])))
  names(out) <- names(types)
  as.data.frame(out, stringsAsFactors = FALSE)
}

.check_budget <- function(b) {
  if (!inherits(b, "privci_budget")) {
    stop("`b` must be a privacy budget from privci_budget(); got an object of class ",
         paste(class(b), collapse = "/"), " instead.", call. = FALSE)
  }
}

#' @export
`$.privci_budget` <- function(x, name) {
  py <- .py_budget(x)
  switch(name,
         py = py,
         spent = py$spent,
         remaining = py$remaining,
         epsilon = py$epsilon,
         delta = py$delta,
         composition = py$composition,
         name = py$name,
         stop(sprintf(paste0("a privci_budget has no element `%s`; use spent, remaining, ",
                             "epsilon, delta, composition, name or py."), name), call. = FALSE))
}

#' @rdname privci_budget
#' @export
print.privci_budget <- function(x, ...) {
  cat(reticulate::py_str(.py_budget(x)), "\n", sep = "")
  invisible(x)
}
