# The formula interface shared by the four tests: `Y ~ X | Z1 + Z2` (comets'
# notation) is split into the response y, the tested variable(s) x and the
# conditioning set z, each evaluated in `data`. Only R-side parsing happens
# here; the values go to the vector methods, whose Python validation speaks
# about them.

# The terms of a `+` chain as a list of expressions.
.formula_terms <- function(e) {
  if (is.call(e) && identical(e[[1L]], as.name("+")) && length(e) == 3L) {
    return(c(.formula_terms(e[[2L]]), .formula_terms(e[[3L]])))
  }
  if (is.call(e) && identical(e[[1L]], as.name("(")) && length(e) == 2L) {
    return(.formula_terms(e[[2L]]))
  }
  list(e)
}

# `data` (data frame, list, matrix with column names, or NULL) as something
# eval() can look names up in.
.formula_data <- function(data, data_expr) {
  if (is.null(data)) {
    return(NULL)
  }
  if (is.matrix(data)) {
    if (is.null(colnames(data))) {
      stop("`data` is a matrix without column names; give it column names so that the ",
           "formula can refer to them.", call. = FALSE)
    }
    return(as.data.frame(data, stringsAsFactors = FALSE))
  }
  if (is.data.frame(data) || is.list(data) || is.environment(data)) {
    return(data)
  }
  stop("`data` must be a data frame, a matrix with column names or a list; got an object of ",
       "class ", paste(class(data), collapse = "/"), " (", data_expr, ") instead.",
       call. = FALSE)
}

# The values of the terms of one part of the formula: a vector for one
# numeric vector term, otherwise a matrix with one named column per column.
.formula_part <- function(terms, data, env, part, data_names) {
  cols <- list()
  for (term in terms) {
    label <- .expr(term)
    if (identical(term, as.name("."))) {
      if (!identical(part, "z")) {
        stop("`.` (all other columns of `data`) may only stand for the conditioning set, ",
             "after `|`.", call. = FALSE)
      }
      for (nm in data_names) {
        cols[[nm]] <- data[[nm]]
      }
      next
    }
    if (!(is.name(term) || is.call(term))) {
      stop(sprintf(paste0("the formula term `%s` (in the %s part) is not a variable or an ",
                          "expression of variables; write Y ~ X | Z1 + Z2."), label, part),
           call. = FALSE)
    }
    value <- eval(term, if (is.null(data)) env else data, env)
    if (is.factor(value) || is.character(value)) {
      stop(sprintf(paste0("the formula term `%s` is %s, not numeric; code it as numbers ",
                          "first (e.g. as.numeric(), or indicator columns from ",
                          "model.matrix())."), label,
                   if (is.factor(value)) "a factor" else "character"), call. = FALSE)
    }
    if (is.data.frame(value)) {
      value <- as.matrix(value)
    }
    if (is.matrix(value) && ncol(value) > 1L) {
      names_ <- colnames(value)
      if (is.null(names_)) names_ <- paste0(label, "[, ", seq_len(ncol(value)), "]")
      for (j in seq_len(ncol(value))) cols[[names_[j]]] <- value[, j]
    } else {
      cols[[label]] <- if (is.matrix(value)) value[, 1L] else value
    }
  }
  if (!length(cols)) {
    stop(sprintf("the %s part of the formula selects no columns.", part), call. = FALSE)
  }
  if (length(cols) == 1L && length(terms) == 1L && !identical(terms[[1L]], as.name("."))) {
    return(cols[[1L]])
  }
  do.call(cbind, cols)
}

# `Y ~ X | Z` as list(x, y, z, data.name); z is NULL for `Y ~ X`.
.formula_xyz <- function(formula, data, data_expr) {
  if (!inherits(formula, "formula") || length(formula) != 3L) {
    stop("`formula` must be a two-sided formula Y ~ X | Z (or Y ~ X for no conditioning); ",
         "got ", .expr(formula), " instead.", call. = FALSE)
  }
  env <- environment(formula)
  if (is.null(env)) env <- parent.frame(2L)
  data <- .formula_data(data, data_expr)
  rhs <- formula[[3L]]
  z_terms <- NULL
  if (is.call(rhs) && identical(rhs[[1L]], as.name("|"))) {
    z_terms <- .formula_terms(rhs[[3L]])
    rhs <- rhs[[2L]]
  }
  x_terms <- .formula_terms(rhs)
  y_terms <- .formula_terms(formula[[2L]])
  used <- all.vars(call("~", formula[[2L]], rhs))
  others <- if (is.null(data) || is.environment(data)) character() else
    setdiff(names(data), used)
  if (any(vapply(c(x_terms, y_terms), function(t) identical(t, as.name(".")), TRUE))) {
    stop("`.` (all other columns of `data`) may only stand for the conditioning set, ",
         "after `|`.", call. = FALSE)
  }
  if (!is.null(z_terms) && any(vapply(z_terms, function(t) identical(t, as.name(".")), TRUE)) &&
      is.null(data)) {
    stop("`.` in the conditioning set needs `data`.", call. = FALSE)
  }
  x <- .formula_part(x_terms, data, env, "x", others)
  y <- .formula_part(y_terms, data, env, "y", others)
  z <- if (is.null(z_terms)) NULL else .formula_part(z_terms, data, env, "z", others)
  data.name <- paste(deparse(formula, width.cutoff = 500L), collapse = " ")
  if (!is.null(data_expr)) {
    data.name <- paste0(data.name, ", data = ", data_expr)
  }
  list(x = x, y = y, z = z, data.name = data.name)
}

# Further named arguments for the Python function `fun`, passed on unchanged.
# `set` are the keyword arguments the wrapper already fills in.
.py_extra <- function(extra, set, fun) {
  if (!length(extra)) {
    return(list())
  }
  nm <- names(extra)
  if (is.null(nm) || any(!nzchar(nm))) {
    stop(sprintf(paste0("arguments in `...` are passed to the Python function privci.%s by ",
                        "name and must be named; got %d unnamed argument(s)."),
                 fun, if (is.null(nm)) length(extra) else sum(!nzchar(nm))), call. = FALSE)
  }
  if (anyDuplicated(nm)) {
    stop(sprintf("the argument `%s` is given more than once in `...`.", nm[anyDuplicated(nm)]),
         call. = FALSE)
  }
  clash <- intersect(nm, set)
  if (length(clash)) {
    stop(sprintf(paste0("`%s` in `...` is already set by this R function from its own ",
                        "arguments (see its help page); use the R argument instead."),
                 clash[1L]), call. = FALSE)
  }
  extra
}
