#' Differentially private PC algorithm
#'
#' The PC algorithm (PC-stable) with private conditional independence tests,
#' computed by the Python function `privci.causal.pc`: by default the table
#' is released once with the whole `epsilon` (`privci.release`) and every
#' test is post-processing of that release (`method = "per-test"` charges a
#' PrivGCM test per question instead; `method = "sieve"` runs a Priv-PC-style
#' sparse-vector sieve that pays only for the tests flagged as removals, each
#' followed by a fresh noisy examination); the skeleton and the CPDAG are
#' post-processing too, so the whole run is `epsilon`-differentially private
#' under the replacement of one row.
#'
#' @param data Numeric data frame or matrix (n rows, one column per variable).
#' @param epsilon Total privacy budget of the run (> 0).
#' @param bounds Public bounds, one number or one per column, fixed before
#'   seeing the data: values outside \[center - bound, center + bound\] are
#'   clipped.
#' @param centers Public centres, one number or one per column.
#' @param alpha Level of each test.
#' @param seed `NULL` (default: OpenDP's hardened noise; use it for a
#'   release) or a whole number (seeded numpy noise: reproducible, not
#'   hardened, for simulations).
#' @param method `"release"` (default: one release of the table, every test
#'   post-processing), `"per-test"` (a charged PrivGCM test per question) or
#'   `"sieve"` (AboveThreshold rounds over block-vote queries of sensitivity
#'   1/k, each eps1-DP up to its first above-threshold answer, plus a Laplace
#'   examination of eps2 per flagged removal; at most `max_removals` rounds of
#'   `epsilon / max_removals`).
#' @param max_order `NULL` (default: p - 2) or the largest conditioning set.
#' @param budget `NULL` or an outer [privci_budget()] of the data set, charged
#'   the whole run once before it starts.
#' @param test,split,delta,composition,on_exhausted `method = "per-test"` only
#'   (`NULL`, the default, leaves Python's default; giving one with another
#'   method is an error): `test` `"privgcm"`; `split` `"levels"`, `"halves"`
#'   or `"tests"` (the public rule that splits `epsilon` over the tests);
#'   `composition = "zcdp"` with `delta` for zCDP accounting; `on_exhausted`
#'   `"dependent"`, `"raise"` or `"independent"` (what a test the budget
#'   cannot pay for answers).
#' @param ... Further named arguments, passed unchanged to the Python function
#'   `privci.causal.pc`: e.g. the release's `statistics`, `clip`, `knots`,
#'   `power_rule` (default 0.45), `quadratic_veto` and `responses`; with
#'   `method = "sieve"` `block_rows`, `max_removals`, `examine_share`,
#'   `threshold`, `knots` and `responses`; or with `method = "per-test"`
#'   options of the tests.
#' @param x A `privci_pc` object.
#'
#' @return A list of class `privci_pc` with `adjacency` (logical p x p
#'   matrix, symmetric, with the column names of `data` as dimnames),
#'   `directed` (integer p x p matrix: the CPDAG in causal-learn's encoding,
#'   `directed[i, j] == -1` and `directed[j, i] == 1` for i -> j, -1 both ways
#'   for an undirected edge), `edges` (a data frame with `from`, `mark`
#'   (`"->"` or `"--"`) and `to`), `ledger` (the budget's ledger as a data
#'   frame, one row for the release or per released test, see [budget_ledger()]), `budget` (the
#'   run's [privci_budget()]), `n_tests`, `epsilon`, `spent`, `alpha`,
#'   `guarantee` and `caveats`. `print()` shows the edges and the privacy
#'   accounting.
#' @seealso [privgcm()], [privci_budget()].
#' @export
#' @examples
#' if (privci_available()) {
#'   n <- 500
#'   A <- rnorm(n)
#'   B <- rnorm(n)
#'   C <- A + B + rnorm(n, sd = 0.5)
#'   D <- C + rnorm(n, sd = 0.5)
#'   d <- data.frame(A, B, C, D)
#'   res <- pc(d, epsilon = 20, bounds = 4, seed = 1)
#'   res
#'   pc(d, epsilon = 20, bounds = 4, seed = 1, method = "sieve")$edges
#'   res$adjacency
#'   res$ledger
#' }
pc <- function(data, epsilon, bounds, centers = 0, alpha = 0.05, seed = NULL,
               method = c("release", "per-test", "sieve"), max_order = NULL, budget = NULL,
               test = NULL, split = NULL, delta = NULL, composition = NULL,
               on_exhausted = NULL, ...) {
  call <- match.call()
  if (!is.character(method) || length(method) < 1L ||
      !all(method %in% c("release", "per-test", "sieve"))) {
    stop("`method` must be one of \"release\", \"per-test\" or \"sieve\"; got ",
         paste(deparse(method), collapse = " "), " instead.", call. = FALSE)
  }
  method <- match.arg(method)
  if (is.data.frame(data) || is.matrix(data)) {
    names_ <- colnames(data)
    if (is.null(names_)) names_ <- paste0("V", seq_len(ncol(data)))
  } else {
    names_ <- NULL
  }
  args <- list(data = .py_data(data), epsilon = epsilon, bounds = bounds, centers = centers,
               alpha = alpha, method = method, rng = .py_seed(seed))
  # the options below only when given (Python refuses the per-test ones with another method)
  given <- Filter(Negate(is.null), list(max_order = max_order, budget = budget, test = test,
                                        split = split, delta = delta,
                                        composition = composition,
                                        on_exhausted = on_exhausted))
  args <- c(args, given)
  res <- .py_call(.privci_causal()$pc, c(args, .py_extra(list(...), names(args), "causal.pc")),
                  call)
  adjacency <- res$adjacency
  storage.mode(adjacency) <- "logical"
  directed <- res$directed
  storage.mode(directed) <- "integer"
  if (is.null(names_)) names_ <- as.character(unlist(res$names))
  dimnames(adjacency) <- dimnames(directed) <- list(names_, names_)
  budget <- .as_budget(res$budget)
  structure(list(
    adjacency = adjacency,
    directed = directed,
    edges = .pc_edges(directed),
    ledger = budget_ledger(budget),
    budget = budget,
    n_tests = as.integer(res$n_tests),
    epsilon = res$epsilon,
    spent = budget_spent(budget),
    alpha = res$alpha,
    guarantee = .r_syntax(res$guarantee),
    caveats = .r_syntax(as.character(unlist(res$caveats)))
  ), class = "privci_pc")
}

# The Python module privci.causal, imported once (after .privci() has
# checked that Python, privci and numpy are usable).
.privci_causal <- function() {
  .privci()
  if (is.null(.state$causal)) {
    .state$causal <- reticulate::import("privci.causal")
  }
  .state$causal
}

# The CPDAG's edges (causal-learn's encoding) as a data frame.
.pc_edges <- function(g) {
  nm <- rownames(g)
  from <- mark <- to <- character()
  p <- nrow(g)
  for (i in seq_len(p - 1L)) {
    for (j in seq.int(i + 1L, p)) {
      if (g[i, j] == -1L && g[j, i] == 1L) {
        from <- c(from, nm[i]); mark <- c(mark, "->"); to <- c(to, nm[j])
      } else if (g[j, i] == -1L && g[i, j] == 1L) {
        from <- c(from, nm[j]); mark <- c(mark, "->"); to <- c(to, nm[i])
      } else if (g[i, j] != 0L) {
        from <- c(from, nm[i]); mark <- c(mark, "--"); to <- c(to, nm[j])
      }
    }
  }
  data.frame(from = from, mark = mark, to = to, stringsAsFactors = FALSE)
}

#' @rdname pc
#' @export
print.privci_pc <- function(x, ...) {
  cat("\n\tPrivate PC algorithm (PrivGCM tests)\n\n")
  cat("variables: ", paste(rownames(x$adjacency), collapse = ", "), "\n", sep = "")
  edges <- if (nrow(x$edges)) paste(x$edges$from, x$edges$mark, x$edges$to) else "none"
  cat(strwrap(paste0("edges: ", paste(edges, collapse = ", ")), exdent = 2), sep = "\n")
  cat(sprintf("tests released: %d, alpha = %s, epsilon spent: %s of %s\n", x$n_tests,
              format(x$alpha), format(x$spent, digits = 6), format(x$epsilon, digits = 6)))
  cat(strwrap(paste("guarantee:", x$guarantee), exdent = 2), sep = "\n")
  for (caveat in x$caveats) {
    cat(strwrap(paste("caveat:", caveat), exdent = 2), sep = "\n")
  }
  cat("\n")
  invisible(x)
}
