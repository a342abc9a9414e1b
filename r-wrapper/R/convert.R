# Internal helpers: coerce R values for Python, map R conventions to Python's,
# call Python, and pass its warnings and errors back unchanged. Validation of
# values is Python's job; R only converts and renames.

# The Python module, after checking (once per session) that reticulate can
# start Python, find privci and exchange numpy arrays with it. Every wrapper
# calls this first: reticulate 1.28's np_array() crashes R if Python has not
# been started yet.
.state <- new.env(parent = emptyenv())

.privci <- function() {
  if (isTRUE(.state$ready)) {
    return(privci_py)
  }
  usable <- function(f) isTRUE(tryCatch(f(), error = function(e) FALSE))
  if (!usable(function() reticulate::py_available(initialize = TRUE))) {
    stop(.install_message(simpleError("Python could not be started")), call. = FALSE)
  }
  if (!usable(function() reticulate::py_module_available("privci"))) {
    stop(.install_message(simpleError("no module named 'privci'")), call. = FALSE)
  }
  if (!usable(reticulate::py_numpy_available)) {
    stop(.install_message(simpleError(
      "numpy is not usable from reticulate (missing, or numpy >= 2 with reticulate < 1.36)"
    )), call. = FALSE)
  }
  .state$ready <- TRUE
  privci_py
}

# Data (vector, matrix or data frame) as a float64 numpy array that owns its
# memory: vectors stay 1-D, matrices keep their shape. reticulate passes R
# vectors as read-only views of R's memory, so they are copied. Anything
# non-numeric is passed on unchanged so that Python's message describes it.
.py_data <- function(v) {
  if (is.null(v)) {
    return(NULL)
  }
  if (is.data.frame(v)) {
    v <- as.matrix(v)
  }
  if (!(is.numeric(v) || is.logical(v))) {
    return(v)
  }
  .privci()
  if (is.null(dim(v))) {
    return(reticulate::np_array(as.double(v), dtype = "float64")$copy())
  }
  storage.mode(v) <- "double"
  reticulate::np_array(v, dtype = "float64", order = "C")
}

# Column names given where data belong (`privgcm(df, "exposure", "outcome")`):
# R names the columns of a data frame with the formula form, so say so before
# Python's "must be array-like" (which would suggest Python's `data=`).
.check_not_names <- function(x, y, z, fun) {
  given <- list(x = if (!missing(x)) x, y = if (!missing(y)) y, z = z)
  # a name: one string for x or y (a longer character vector is data, for Python to
  # refuse), or any character z next to such a name or to a data frame in x
  name <- function(v) is.character(v) && length(v) == 1L
  if (!(name(given$x) || name(given$y) ||
        (is.data.frame(given$x) && (is.character(given$y) || is.character(given$z))))) {
    return(invisible(NULL))
  }
  named <- names(Filter(is.character, given))
  arg <- named[1L]
  cols <- unlist(given[named])
  form <- if (length(cols) >= 2L)
    sprintf("%s ~ %s%s", cols[2L], cols[1L],
            if (length(cols) >= 3L) paste0(" | ", paste(cols[-(1:2)], collapse = " + ")) else "")
  else "Y ~ X | Z1 + Z2"
  stop(sprintf(paste0("`%s` is a column name (%s), not data: to test columns of a data frame, ",
                      "use the formula form, e.g. %s(%s, data = df, ...) (Y ~ X | Z: Y and X ",
                      "given Z), or pass the columns themselves (df$%s)."),
               arg, paste(deparse(given[[arg]]), collapse = " "), fun, form, cols[1L]),
       call. = FALSE)
}

# R's alternative spelling to Python's.
.py_alternative <- function(alternative) {
  c(two.sided = "two-sided", less = "less", greater = "greater")[[alternative]]
}

# `seed` (NULL or a whole number) as Python's `rng` (None or an int).
.py_seed <- function(seed, name = "seed") {
  if (is.null(seed)) {
    return(NULL)
  }
  if (!(is.numeric(seed) && length(seed) == 1L && is.finite(seed) &&
        seed == round(seed) && seed >= 0 && seed < 2^53)) {
    stop(sprintf("`%s` must be NULL or a non-negative whole number; got %s instead.",
                 name, paste(deparse(seed), collapse = " ")), call. = FALSE)
  }
  .privci()
  reticulate::import_builtins(convert = FALSE)$int(as.double(seed))
}

# Call privci.<fun>(**args). Python warnings become R warnings and Python
# exceptions become R errors, both with Python's message unchanged; the
# error's class names the Python exception (e.g. "python.builtin.ValueError").
# `fun` is a function name in privci or a Python callable (privci.causal.pc);
# R wrappers of Python objects (privci_budget) in `args` are unwrapped.
.py_call <- function(fun, args, call) {
  mod <- .privci()
  f <- if (is.character(fun)) mod[[fun]] else fun
  args <- lapply(args, function(a) if (inherits(a, "privci_budget")) .py_budget(a) else a)
  warn <- reticulate::import("warnings", convert = FALSE)
  catcher <- warn$catch_warnings(record = TRUE)
  caught <- catcher$`__enter__`()
  warn$simplefilter("always")
  exited <- FALSE
  on.exit(if (!exited) catcher$`__exit__`(NULL, NULL, NULL), add = TRUE)
  result <- tryCatch(do.call(f, args), error = function(e) .py_error(e, call))
  catcher$`__exit__`(NULL, NULL, NULL)
  exited <- TRUE
  for (w in reticulate::py_to_r(caught)) {
    warning(.py_warning(w, call))
  }
  result
}

.py_warning <- function(w, call) {
  chr <- function(o) if (inherits(o, "python.builtin.object")) reticulate::py_str(o) else as.character(o)
  category <- chr(reticulate::py_get_attr(reticulate::py_get_attr(w, "category"), "__name__"))
  structure(
    class = c(paste0("python.", category), "privci_warning", "warning", "condition"),
    list(message = chr(reticulate::py_get_attr(w, "message")), call = call)
  )
}

.py_error <- function(e, call) {
  last <- reticulate::py_last_error()
  msg <- conditionMessage(e)
  # the message may start with the qualified name (privci.budget.BudgetExceededError:)
  if (is.null(last) || !grepl(paste0("^([[:alnum:]_]+\\.)*", last$type, ":"), msg)) {
    stop(e)
  }
  stop(structure(
    class = c(paste0("python.builtin.", last$type), "privci_error", "error", "condition"),
    list(message = last$value, call = call)
  ))
}

# Deparsed caller expression for data.name.
.expr <- function(e) paste(deparse(e, width.cutoff = 60L), collapse = " ")

# Python tuples of numbers (or None) as R numeric vectors (or NULL).
.num <- function(v) if (is.null(v)) NULL else as.numeric(unlist(v))

# Python's spelling of arguments in messages, in R's: `assume_additive=True`
# becomes `assume_additive = TRUE`, `x_bound="auto"` `x_bound = "auto"`,
# `rng=None` `seed = NULL` (R's name of the argument), `feature_rng` `feature_seed`,
# and None/True/False after `=` NULL/TRUE/FALSE. Only `name=value` pairs are
# rewritten, so prose such as "p = 1" is left as it is.
.r_syntax <- function(text) {
  if (!length(text)) {
    return(text)
  }
  text <- as.character(text)
  text <- gsub("\\bfeature_rng=", "feature_seed=", text, perl = TRUE)
  text <- gsub("\\brng=", "seed=", text, perl = TRUE)
  value <- "(True|False|None|'[^']*'|\"[^\"]*\"|[-+]?[0-9][0-9.e+-]*)"
  pair <- paste0("\\b([a-z][a-z0-9_]*)=", value)
  repeat {
    hit <- regmatches(text, regexpr(pair, text, perl = TRUE))
    if (!length(hit)) break
    text <- sub(pair, "\\1 = \\2", text, perl = TRUE)
  }
  text <- gsub("(?<= = )True\\b", "TRUE", text, perl = TRUE)
  text <- gsub("(?<= = )False\\b", "FALSE", text, perl = TRUE)
  text <- gsub("(?<= = )None\\b", "NULL", text, perl = TRUE)
  gsub("(?<= = )'([^']*)'", "\"\\1\"", text, perl = TRUE)
}

# The privacy record of a Python PrivateTestResult as R list elements, its
# texts in R's syntax (Python's `rng=None` is R's `seed = NULL`).
.privacy_elements <- function(rec) {
  list(
    epsilon = rec$epsilon,
    mechanism = rec$mechanism,
    sensitivity = rec$sensitivity,
    noise_scale = rec$noise_scale,
    hardened = rec$hardened,
    ridge_lambda = rec$ridge_lambda,
    kernel_sigma = rec$kernel_sigma,
    bounds = lapply(rec$bounds, .num),
    guarantee = .r_syntax(rec$guarantee),
    caveats = .r_syntax(as.character(unlist(rec$caveats))),
    releases = .releases_frame(rec$releases)
  )
}

# The releases of a privacy record (Python privci.results.Release entries) as a
# data.frame, one row per noisy release; NULL when the record lists none.
.releases_frame <- function(rels) {
  rels <- as.list(rels)
  if (length(rels) == 0L) {
    return(NULL)
  }
  chr <- function(f) vapply(rels, function(r) as.character(r[[f]]), character(1))
  num <- function(f) vapply(rels, function(r) as.numeric(r[[f]]), numeric(1))
  data.frame(release = chr("name"), epsilon = num("epsilon"),
             sensitivity = num("sensitivity"), noise_scale = num("noise_scale"),
             mechanism = chr("mechanism"), rows = chr("rows"), stringsAsFactors = FALSE)
}
