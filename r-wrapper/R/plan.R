#' Plan a private test: its power, or the n or epsilon it needs
#'
#' Computed by the Python function `privci.plan` before any data are used:
#' give two of `n`, `epsilon` and `power`, and it returns the third for
#' PrivGCM ([privgcm()]) or PrivCRT ([privcrt()]) at an assumed effect. For
#' PrivGCM's default spline fit it also says when the fit cannot be resolved
#' at (n, epsilon, number of columns of z): the test's fail-safe then returns
#' p = 1 whatever the data, so the power is 0, and a solved n or epsilon is
#' at least the smallest that resolves the fit.
#'
#' `privci::plan()` when another attached package (e.g. future) also has a
#' `plan()`.
#'
#' @param test `"privgcm"` or `"privcrt"`.
#' @param n,epsilon,power Exactly two of them: the sample size, the test's
#'   epsilon and the target power in (0, 1); the one left `NULL` is computed.
#' @param effect The assumed mean of the product of the residuals
#'   r_X r_Y, in data units (e.g. beta for the paper's design).
#' @param effect_sd `NULL` (default: Gaussian residuals of standard deviation
#'   bound / 4) or the standard deviation of r_X r_Y.
#' @param x_bound,y_bound The public bounds of the test.
#' @param x_residual_bound PrivCRT's bound on |x - E\[X | Z\]| (`NULL`:
#'   `x_bound`).
#' @param ridge_lambda,sensitivity,n_blocks PrivGCM with `regression = "krr"`
#'   (see [privgcm()]): the ridge parameter, `NULL`/`"paper"`/`"sharp"` or a
#'   number, and the number of block sums (`NULL`: one per row; `"auto"`).
#' @param n_resamples PrivCRT's number of resamples m.
#' @param alpha The level.
#' @param alternative `"two.sided"`, `"less"` or `"greater"`.
#' @param n_mc Monte Carlo draws (PrivCRT), with common random numbers.
#' @param seed A whole number: the Python `rng` of those draws (default 0,
#'   so that the answer is repeatable).
#' @param regression PrivGCM's regression, `"spline"` (default) or `"krr"`.
#' @param z_columns The number of columns of z (PrivGCM's spline fit).
#' @param assume,assume_additive As in [privgcm()]: `assume = "additive"` (or
#'   `assume_additive = TRUE`) plans under the public assumption that
#'   E\[X | Z\] and E\[Y | Z\] are additive.
#' @param auto,ranges PrivGCM's spline fit, when the Python package has them
#'   (`NULL`: Python's default; not passed): `auto` which of privgcm's
#'   parameters are released with part of `epsilon` (`"z"`, privgcm's default,
#'   `"none"` or `"all"`), `ranges` the regressions' public ranges in window
#'   units (under a stated model 0.9 or more is not modelled: `NaN`, as
#'   `regular = FALSE`, since the window's clip bends the regression out of
#'   the model). The spline fit's power is emulated for two reference shapes
#'   of that range, a clipped line and a half sine (a curved regression gets
#'   a larger bias allowance); the plan gives the least (`details$shape_powers`
#'   has both) and Python warns where they differ by more than 0.10.
#' @param tighten `NULL` (Python's default, `"auto"`: not passed), `"auto"`,
#'   `TRUE` or `FALSE`: privgcm's `tighten` ([privgcm()]). The default plans
#'   privgcm's default call, which tightens public bounds to a released window
#'   where the fit resolves with the bounds' share (public bounds; one column
#'   of z with no stated model, or `assume = "additive"` with two or more
#'   columns where the share leaves the check as it is and the privacy noise
#'   dominates, the window then twice
#'   the quantile): the window (privgcm's quantile level) and the
#'   residual products clipped to it are modelled with normal residuals
#'   (`details$windows`, `details$tightened_effect`). `FALSE` plans the
#'   windows given. Measured: within 0.10 on the one-column grid cells; on
#'   mid-power cells, within 0.10 on most, over-predicting by up to 0.12
#'   where the windows are not centred on the data (see
#'   `residual_skewness` for skewed noise).
#' @param residual_skewness `NULL` (Python's default, 0: normal residuals;
#'   not passed), one number or two (x, y): the skewness of the residuals
#'   X - E\[X | Z\] and Y - E\[Y | Z\], each at most 4 in absolute value.
#'   It enters the tightened windows' model only: a long tail (costs,
#'   lengths of stay; an exponential residual has skewness 2) loses more of
#'   its products to the clip, which the normal model over-predicts.
#' @param regular `TRUE` (default): the design is one the planner models
#'   (smooth regressions, z near normal). `FALSE` says it is not (a kink, a
#'   step, z far from normal, binary or count x or y with released windows):
#'   the power is then `NaN`, `details$modelled` is `FALSE` and Python warns;
#'   solving for n or epsilon is an error.
#' @param ... Further named arguments, passed unchanged to the Python
#'   function.
#' @param x A `privci_plan` object.
#'
#' @return A list of class `privci_plan` with `test`, `solved_for`, `n`,
#'   `epsilon`, `power`, `alpha`, `effect`, `effect_sd`, `rho`, `sigma`,
#'   `sensitivity`, `n_blocks`, `noncentrality`, `approximation`, `details`
#'   (a list; `details$resolvable` is `FALSE` where the spline fit cannot be
#'   resolved) and `text` (the one-line summary `print()` shows).
#' @seealso [privgcm()], [privcrt()].
#' @export
#' @examples
#' if (privci_available()) {
#'   # the paper's Algorithm 1: the power at n = 10^4, then the n for power 0.8
#'   plan("privgcm", n = 10000, epsilon = 8, effect = 1, x_bound = 4, y_bound = 5.7,
#'        regression = "krr")
#'   plan("privgcm", epsilon = 8, power = 0.8, effect = 1, x_bound = 4, y_bound = 5.7,
#'        regression = "krr")$n
#'   # three columns of z at n = 442: not resolvable, so the fail-safe p = 1
#'   plan("privgcm", n = 442, epsilon = 8, effect = 0.2, z_columns = 3,
#'        assume_additive = TRUE)
#'   plan("privcrt", n = 1000, epsilon = 2, effect = 0.5, x_bound = 4, y_bound = 4)
#' }
plan <- function(test = c("privgcm", "privcrt"), n = NULL, epsilon = NULL, power = NULL,
                 effect, effect_sd = NULL, x_bound = 1, y_bound = 1, x_residual_bound = NULL,
                 ridge_lambda = 5, sensitivity = NULL, n_blocks = NULL, n_resamples = 19L,
                 alpha = 0.05, alternative = c("two.sided", "less", "greater"), n_mc = 20000L,
                 seed = 0, regression = c("spline", "krr"), z_columns = 1L, assume = NULL,
                 assume_additive = FALSE, auto = NULL, ranges = NULL, regular = TRUE,
                 tighten = NULL, residual_skewness = NULL, ...) {
  call <- match.call()
  test <- match.arg(test)
  alternative <- match.arg(alternative)
  regression <- match.arg(regression)
  if (missing(effect)) {
    stop("`effect` is required: the assumed mean of the residual product r_X r_Y, in data ",
         "units.", call. = FALSE)
  }
  args <- list(test = test, n = .whole(n), epsilon = epsilon, power = power, effect = effect,
               effect_sd = effect_sd, x_bound = x_bound, y_bound = y_bound,
               x_residual_bound = x_residual_bound, ridge_lambda = ridge_lambda,
               sensitivity = sensitivity, n_blocks = .whole(n_blocks),
               n_resamples = .whole(n_resamples), alpha = alpha,
               alternative = .py_alternative(alternative), n_mc = .whole(n_mc),
               rng = .py_seed(seed), regression = regression, z_columns = .whole(z_columns))
  # the assumption only when stated (`assume_additive` is the older spelling)
  if (!is.null(assume)) args$assume <- assume
  if (!isFALSE(assume_additive)) args$assume_additive <- assume_additive
  if (!is.null(auto)) args$auto <- auto
  if (!is.null(ranges)) args$ranges <- ranges
  if (!is.null(tighten)) {
    if (!(identical(tighten, "auto") || isTRUE(tighten) || isFALSE(tighten))) {
      stop("`tighten` must be \"auto\", TRUE or FALSE; got ", .expr(tighten), " instead.",
           call. = FALSE)
    }
    args$tighten <- tighten
  }
  if (!is.null(residual_skewness)) {
    if (!is.numeric(residual_skewness) || !(length(residual_skewness) %in% 1:2)) {
      stop("`residual_skewness` must be one number or two (x, y); got ",
           .expr(residual_skewness), " instead.", call. = FALSE)
    }
    args$residual_skewness <- if (length(residual_skewness) == 1L) {
      as.numeric(residual_skewness)
    } else as.list(as.numeric(residual_skewness))
  }
  if (!(isTRUE(regular) || isFALSE(regular))) {
    stop("`regular` must be TRUE or FALSE; got ", .expr(regular), " instead.", call. = FALSE)
  }
  if (!regular) args$regular <- FALSE
  .privci()
  fun <- reticulate::import("privci.plan")$plan
  res <- .py_call(fun, c(args, .py_extra(list(...), c(names(args), "assume", "assume_additive",
                                                      "auto", "ranges", "regular",
                                                      "tighten", "residual_skewness"),
                                       "plan")),
                 call)
  num <- function(v) if (is.null(v)) NULL else as.numeric(v)
  structure(list(
    test = res$test, solved_for = res$solved_for, n = as.integer(res$n),
    epsilon = res$epsilon, power = res$power, alpha = res$alpha, effect = res$effect,
    effect_sd = res$effect_sd, rho = res$rho, sigma = res$sigma,
    sensitivity = num(res$sensitivity), n_blocks = num(res$n_blocks),
    noncentrality = num(res$noncentrality), approximation = .r_syntax(res$approximation),
    details = res$details, text = .r_syntax(reticulate::py_repr(res))
  ), class = "privci_plan")
}

# A whole number as an R integer (so that Python receives an int); anything
# else unchanged, for Python to judge.
.whole <- function(v) {
  if (is.numeric(v) && length(v) == 1L && is.finite(v) && v == round(v) &&
      abs(v) < .Machine$integer.max) as.integer(v) else v
}

#' @rdname plan
#' @export
print.privci_plan <- function(x, ...) {
  cat(strwrap(x$text, exdent = 2), sep = "\n")
  invisible(x)
}

#' Which of privgcm's models resolves here, and the power of each
#'
#' Computed by the Python function `privci.plan.plan_models` before any data
#' are used: [plan()] for each model of PrivGCM's released regression (the
#' full fit without an assumption, `assume = "additive"` and
#' `assume = "linear"`) at the same n, epsilon and effect. A model that does
#' not resolve is refused by [privgcm()] before anything is spent; a stated
#' model whose check does not run rests its level on the assumption.
#'
#' @param n The sample size.
#' @param epsilon privgcm's total epsilon.
#' @param effect The assumed mean of the residual product r_X r_Y (data units).
#' @param z_columns The number of columns of z.
#' @param ... Further named arguments passed to [plan()] for every model
#'   (`x_bound`, `y_bound`, `effect_sd`, `auto`, `ranges`, ...).
#' @param x A `privci_models_plan` object.
#'
#' @return A list of class `privci_models_plan`: `table` (a data frame with one
#'   row per model: `model`, `resolvable`, `checked`, `power`,
#'   `smallest_epsilon`), `recommended` (the weakest assumption that resolves
#'   here, or `NA`) and `text` (what `print()` shows).
#' @seealso [plan()], [privgcm()].
#' @export
#' @examples
#' if (privci_available()) {
#'   # the diabetes rows: three columns of z at n = 442
#'   plan_models(n = 442, epsilon = 8, effect = 0.2, z_columns = 3)
#' }
plan_models <- function(n, epsilon, effect, z_columns, ...) {
  call <- match.call()
  if (missing(n) || missing(epsilon) || missing(effect) || missing(z_columns)) {
    stop("`n`, `epsilon`, `effect` and `z_columns` are required.", call. = FALSE)
  }
  .privci()
  fun <- reticulate::import("privci.plan")$plan_models
  args <- list(n = .whole(n), epsilon = epsilon, effect = effect,
               z_columns = .whole(z_columns))
  extra <- list(...)
  if ("seed" %in% names(extra)) {
    extra$rng <- .py_seed(extra$seed)
    extra$seed <- NULL
  }
  res <- .py_call(fun, c(args, .py_extra(extra, names(args), "plan.plan_models")), call)
  rows <- res$rows
  val <- function(r, k) if (is.null(r[[k]])) NA else r[[k]]
  table <- data.frame(
    model = vapply(rows, function(r) r$model, ""),
    resolvable = vapply(rows, function(r) isTRUE(r$resolvable), TRUE),
    checked = vapply(rows, function(r) as.logical(val(r, "checked")), NA),
    power = vapply(rows, function(r) as.numeric(r$power), 0),
    smallest_epsilon = vapply(rows, function(r) as.numeric(val(r, "smallest_epsilon")), 0),
    stringsAsFactors = FALSE)
  structure(list(table = table,
                 recommended = if (is.null(res$recommended)) NA_character_ else res$recommended,
                 text = .r_syntax(reticulate::py_repr(res))),
            class = "privci_models_plan")
}

#' @rdname plan_models
#' @export
print.privci_models_plan <- function(x, ...) {
  cat(x$text, sep = "\n")
  invisible(x)
}
