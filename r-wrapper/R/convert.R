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

# The privacy record of a Python PrivateTestResult as R list elements. The
# caveats name Python's `rng=None`; R users spell it `seed = NULL`.
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
    guarantee = rec$guarantee,
    caveats = gsub("rng=None", "seed = NULL", as.character(unlist(rec$caveats)), fixed = TRUE),
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
