"""Command line: ``privci demo``, ``privci gcm``, ``privci privgcm``, ``privci privcrt``,
``privci warm``.

``privci warm`` compiles and caches the numba kernels once (run it after installing:
the first call of a test otherwise compiles them, tens of seconds).

``privci demo`` runs the tests on a real clinical data set that ships with
scikit-learn (the diabetes data of Efron et al., 442 patients) and on the
paper's simulated setting, and prints a table.  The other subcommands read a
CSV file and take column names and the privacy arguments.

The CSV file may come first, last (also right after an option that takes
several values, such as ``--z`` or ``--z-center``) or as ``--data FILE``.
A decimal beyond the range of float64 (``1e400``) is read as the largest
float, +-1.7976931348623157e308, like any other extreme value; ``nan``,
``inf`` and non-numbers are refused.  The bounds and centres (and
``--z-center``, ``--z-scale``) take ``auto``: released with differential
privacy from part of ``--epsilon`` (``--bounds-epsilon``), as in the Python
API.
"""

from __future__ import annotations

import argparse
import math
import os
import re
import sys

import numpy as np

from .crt import GaussianModelX, crt, privcrt
from ._spline import UnresolvableDesignError
from .gcm import gcm, privgcm
from .results import GCMResult

_NUM = r"(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?"
_TERM = re.compile(r"\s*([+-])?\s*(" + _NUM + r")?\s*(\*)?\s*([A-Za-z_][A-Za-z0-9_.]*)?\s*")


def parse_linear_formula(formula, columns):
    """Parse ``"0.5 + 1.2*age - 0.3*bmi"`` into (intercept, {column: coefficient}).

    Every name must be one of ``columns``; raises ValueError otherwise.

    >>> parse_linear_formula("0.5 + 1.2*age - 3e-1*bmi - age", ["age", "bmi"])
    (0.5, {'age': 0.19999999999999996, 'bmi': -0.3})
    """
    pos, intercept, coefs, first = 0, 0.0, {}, True
    text = formula.strip()
    if not text:
        raise ValueError("`--x-mean-formula` is empty.")
    while pos < len(text):
        m = _TERM.match(text, pos)
        sign, num, star, name = m.groups()
        if m.end() == pos or (sign is None and not first) or (num is None and name is None) \
                or (star and (num is None or name is None)):
            raise ValueError(f"`--x-mean-formula` could not be parsed near {text[pos:]!r}; "
                             "use terms like 0.5, 1.2*age, -0.3*bmi.")
        first = False
        coef = (-1.0 if sign == "-" else 1.0) * (float(num) if num is not None else 1.0)
        if name is None:
            intercept += coef
        else:
            if name not in columns:
                raise ValueError(f"`--x-mean-formula` names column {name!r}, which is not among "
                                 f"the conditioning columns {list(columns)}.")
            coefs[name] = coefs.get(name, 0.0) + coef
        pos = m.end()
    return intercept, coefs


class DataFileError(ValueError):
    """A problem with the data file; the message never contains a cell value or a count."""


_MAX_FLOAT = sys.float_info.max


def parse_cell(text):
    """One CSV cell as a float; a decimal beyond the float range is clamped to +-largest float.

    ``float("1e400")`` is inf, which the tests refuse as a missing or infinite
    value: one extreme row of otherwise valid data would then decide whether
    the command fails.  A cell written with digits whose value overflows is
    instead read as +-1.7976931348623157e308, the largest float, which the
    tests handle like any other finite value (clipping, public sensitivity).
    ``inf``, ``nan`` and anything that is not a number are left as they are
    (non-finite, refused later) or raise ValueError.

    >>> parse_cell("1e400"), parse_cell(" -2.5E999 "), parse_cell("0.25"), parse_cell("1e-400")
    (1.7976931348623157e+308, -1.7976931348623157e+308, 0.25, 0.0)
    >>> parse_cell("inf")
    inf
    """
    v = float(text)
    if math.isinf(v) and any(ch.isdigit() for ch in text):
        return math.copysign(_MAX_FLOAT, v)
    return v


def _read_csv(path, columns):
    """Read the named columns of a CSV file as float arrays.

    Errors name the column and the kind of problem (missing column, a value that
    is not a number, a non-finite value, a short row) but never a cell value, a
    row number or a count: the file holds the private data.  Decimals beyond the
    float range are clamped to the largest float (:func:`parse_cell`).
    """
    import csv

    try:
        fh = open(path, newline="")
    except OSError as exc:
        raise DataFileError(f"could not open the data file {path!r}: {exc.strerror}") from None
    with fh:
        reader = csv.reader(fh)
        try:
            header = next(reader)
        except StopIteration:
            raise DataFileError(f"the data file {path!r} is empty (no header row).") from None
        rows = [r for r in reader if r]
    missing = [c for c in columns if c not in header]
    if missing:
        raise DataFileError(f"column(s) {missing} not found in {path!r}; its header has "
                            f"{header}")
    idx = {c: header.index(c) for c in columns}
    out = {}
    for c in columns:
        j = idx[c]
        vals = np.empty(len(rows))
        for i, r in enumerate(rows):
            if j >= len(r):
                raise DataFileError(f"a row of {path!r} has fewer fields than the header, so "
                                    f"column {c!r} is incomplete.")
            try:
                vals[i] = parse_cell(r[j])
            except ValueError:
                raise DataFileError(f"column {c!r} has a value that is not a number; the data "
                                    "must be numeric.") from None
        if not np.all(np.isfinite(vals)):
            raise DataFileError(f"column {c!r} has a missing (NaN) or infinite value; remove or "
                                "impute it first.")
        out[c] = vals
    return out


def _fmt_row(cells, widths):
    return "  ".join(str(c).ljust(w) for c, w in zip(cells, widths))


def _table(rows, header):
    widths = [max(len(str(r[i])) for r in rows + [header]) for i in range(len(header))]
    lines = [_fmt_row(header, widths), _fmt_row(["-" * w for w in widths], widths)]
    lines += [_fmt_row(r, widths) for r in rows]
    return "\n".join(lines)


def _privacy_cell(res):
    p = getattr(res, "privacy", None)
    if p is None:
        return "none (not private)"
    cell = f"eps={p.epsilon:g}, {'hardened' if p.hardened else 'seeded'}"
    fc = getattr(res, "fit_check", None)
    if fc is not None and fc.get("model") in ("additive", "linear"):
        cell += f", assume={fc['model']}" + ("" if fc.get("checked") else " (not checked)")
    if fc is not None and not fc["certified"]:
        cell += (", linear fit shrunk by its floor" if fc.get("floor_binds") else
                 ", nested fits disagree") + ": p = 1 (fail-safe)"
    return cell


def _row(test, question, res):
    # the p-value cell says when the 1 is the fail-safe (not evidence), as print(res) does
    failsafe = getattr(res, "failsafe", None)
    pval = f"{res.pvalue:.4g}" + (" (fail-safe)" if failsafe else "")
    return [test, question, res.n, f"{res.statistic:.3f}", pval, _privacy_cell(res)]


#: the demo's diabetes rows: public centres 0 of the standardised columns, released windows,
#: z on its unit scale, the linear model (tests/test_cli.py measures its power)
DIABETES_CALL = dict(x_center=0.0, y_center=0.0, x_bound="auto", y_bound="auto",
                     z_scale=1.0, z_center=0.0, assume="linear")


def diabetes_columns():
    """The demo's diabetes columns: ``(columns by name, progression, z)``, each feature
    standardised (mean 0, sd 1), progression (target - 150) / 80, z = (age, sex, bp)."""
    from sklearn.datasets import load_diabetes
    data = load_diabetes(scaled=True)
    F = data.data * np.sqrt(data.data.shape[0])   # each feature: mean 0, sd 1
    prog = (data.target - 150.0) / 80.0            # fixed, documented centring and scale
    col = {nm: F[:, i] for i, nm in enumerate(data.feature_names)}
    return col, prog, np.column_stack([col["age"], col["sex"], col["bp"]])


def demo(seed=None, out=sys.stdout):
    """Run the tests on built-in examples and print a table."""
    rng = np.random.default_rng(seed)
    noise_rng = None if seed is None else rng
    rows = []
    col, prog, z = diabetes_columns()
    for xname in ["bmi", "s3"]:
        q = f"diabetes: {xname} _||_ progression | age, sex, bp"
        rows.append(_row("GCM", q, gcm(col[xname], prog, z, kernel_sigma=0.1)))
        for eps in (2.0, 10.0):
            # the columns above are centred and scaled to sd 1 (public: how the data set is
            # distributed), z's unit scale; the windows of x and y are released ("auto",
            # 0.1 of epsilon) around the public centres 0: at epsilon 10 the rows reject
            # in 0.90 / 0.895 of 200 noise draws, at 8 in 0.88 / 0.88 (stop 49; stop 43:
            # 0.92, and 0.91 / 0.86), against 0.64 / 0.42 and 0.34 / 0.18 with stop 42's
            # fixed 4- and 3-sd windows and rule (vignettes/README.md, "Stop 43").  With three
            # columns of z at n = 442 no full fit exists (interactions of three columns)
            # and the additive one is not resolvable: the demo states the linear model,
            # the rung privci.plan names here (at epsilon 2 not even that: privgcm refuses
            # before spending anything)
            try:
                res = privgcm(col[xname], prog, z, epsilon=eps, rng=noise_rng,
                              **DIABETES_CALL)
            except UnresolvableDesignError as err:
                need = re.search(r"Smallest epsilon at n = \d+: about ([0-9.e+]+)", str(err))
                rows.append(["PrivGCM", q, len(prog), "-", "refused",
                             f"eps={eps:g}: nothing spent; assume=linear needs epsilon about "
                             f"{need.group(1).rstrip('.') if need else '?'} at n = {len(prog)}"])
                continue
            rows.append(_row("PrivGCM", q, res))
    # the paper's simulation (d = 1, s = 2) under the null and an alternative
    n = 1000
    crt_m = set()
    mx = GaussianModelX(lambda zz: np.exp(-2.0) * np.sin(2.0 * zz[:, 0]), 1.0)
    for beta in (0.0, 1.5):
        zz = rng.normal(scale=2.0, size=(n, 1))
        f = np.exp(-2.0) * np.sin(2.0 * zz[:, 0])
        nx = rng.normal(size=n)
        x = f + nx
        y = -f + rng.normal(size=n) + beta * nx
        yb = 4.0 * np.sqrt(1.0 + beta ** 2)
        q = f"simulation n={n}, beta={beta:g} ({'null' if beta == 0 else 'alternative'})"
        rows.append(_row("GCM", q, gcm(x, y, zz)))
        rows.append(_row("PrivGCM", q, privgcm(x, y, zz, epsilon=7.0, x_bound=4.0,
                                                    y_bound=yb, z_scale=2.0, rng=noise_rng)))
        rows.append(_row("CRT", q, crt(x, y, zz, model_x=mx, n_resamples=199, rng=rng)))
        res_crt = privcrt(x, y, zz, epsilon=2.0, model_x=mx, y_bound=yb,
                          x_residual_bound=4.0, rng=noise_rng)
        crt_m.add(res_crt.n_resamples)
        rows.append(_row("PrivCRT", q, res_crt))
    header = ["test", "hypothesis", "n", "statistic", "p-value", "privacy"]
    print("privci demo: conditional independence tests, private and not", file=out)
    print("(PrivCRT's statistic is its privately selected rank; GCM/CRT are not private)\n", file=out)
    print(_table(rows, header), file=out)
    for m in sorted(crt_m):
        print(f"\nPrivCRT with m = {m} resamples: its p-value is (1 + rank) / {m + 1}, never "
              f"below 1/{m + 1} = {1 / (m + 1):g}, so it rejects at level alpha when "
              f"p <= alpha.", file=out)
    if any(r[4] == "refused" for r in rows):
        n_d = len(prog)
        print(f"\nrefused: with {z.shape[1]} columns of z at n = {n_d} no released regression "
              "is resolvable at the smaller epsilon, so PrivGCM refuses before spending "
              "anything (the answer would be p = 1 whatever the data).  "
              f"privci.plan('privgcm', n={n_d}, epsilon=10, effect=..., "
              f"z_columns={z.shape[1]}, assume='linear') says so before any data is used.",
              file=out)
    return rows


_AUTO_HELP = ("or 'auto': released with differential privacy from part of --epsilon "
              "(--bounds-epsilon)")
_CELL_NOTE = ("Decimals beyond the float range (e.g. 1e400) are read as +-1.7976931348623157e308, "
              "the largest float; nan, inf and non-numbers are refused.  The CSV file may come "
              "first, last, or as --data FILE.")


def _number_or_auto(text):
    """An argparse type: a float, or the string 'auto'."""
    if text.strip().lower() == "auto":
        return "auto"
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number or 'auto'; got {text!r}") from None


def _add_common(p, private=True):
    p.add_argument("csv", nargs="?", default=None, metavar="CSV",
                   help="CSV file with a header row (or --data FILE)")
    p.add_argument("--data", default=None, metavar="FILE",
                   help="the CSV file, as an option (instead of the positional CSV)")
    p.add_argument("--x", required=True, help="column of X")
    p.add_argument("--y", required=True, help="column of Y")
    p.add_argument("--z", required=True, nargs="+", help="conditioning column(s) Z")
    p.add_argument("--kernel-sigma", type=float, default=1.0)
    p.add_argument("--alternative", default="two-sided", choices=["two-sided", "greater", "less"])
    if private:
        p.add_argument("--epsilon", type=float, required=True)
        p.add_argument("--ridge-lambda", type=float, default=5.0)
        p.add_argument("--seed", type=int, default=None,
                       help="seeded numpy noise, for simulation studies only: reproducible and "
                            "NOT hardened, and the release is private only if the seed is "
                            "secret, fresh and never reused; default: OpenDP noise (use it for "
                            "a release)")
        p.add_argument("--bounds-epsilon", type=float, default=None,
                       help="part of --epsilon spent on the 'auto' bounds, centres and z "
                            "parameters (sequential composition); default: 10%% of --epsilon "
                            "when any is 'auto'")


# options that take several values: a data file typed after them is taken back (see
# _data_file); the numeric ones are converted after that
_MULTI = ("z", "z_center", "z_scale")


def _looks_like_data_file(token):
    return os.path.isfile(token) or token.lower().endswith(".csv")


def _data_file(args):
    """The data file: the positional CSV, --data, or one typed after a multi-value option.

    ``privci privgcm --x a --y b --z c d --z-center 1 2 data.csv`` hands data.csv to
    --z-center (argparse's nargs='+' takes every value up to the next option).  A last
    value that is an existing file or ends in .csv, of an option that got more than one
    value, is the data file.
    """
    given = [f for f in (args.csv, args.data) if f is not None]
    if len(given) == 2 and given[0] != given[1]:
        raise ValueError(f"two data files were given: {args.csv!r} (positional) and "
                         f"{args.data!r} (--data); give one.")
    if given:
        return given[0]
    found = []
    for dest in _MULTI:
        vals = getattr(args, dest, None)
        if vals and len(vals) > 1 and _looks_like_data_file(vals[-1]):
            if dest != "z" and _number_or_auto_or_none(vals[-1]) is not None:
                continue
            found.append(dest)
    if len(found) == 1:
        vals = getattr(args, found[0])
        setattr(args, found[0], vals[:-1])
        return vals[-1]
    raise ValueError("no data file: give the CSV file first (privci privgcm data.csv --x ...), "
                     "last, or as --data FILE.")


def _number_or_auto_or_none(text):
    try:
        return _number_or_auto(text)
    except argparse.ArgumentTypeError:
        return None


def _numbers_or_auto(values, option, *, positive=False):
    """The values of --z-center / --z-scale: one number, one per column, or 'auto'."""
    if values is None:
        return None
    conv = [_number_or_auto_or_none(v) for v in values]
    if conv == ["auto"]:
        return "auto"
    if any(v is None or v == "auto" for v in conv):
        raise ValueError(f"`{option}` takes numbers (one, or one per --z column) or 'auto'; got "
                         f"{' '.join(values)!r} instead.")
    return conv[0] if len(conv) == 1 else conv


def main(argv=None):
    parser = argparse.ArgumentParser(prog="privci", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    d = sub.add_parser("demo", help="run the tests on built-in examples and print a table")
    d.add_argument("--seed", type=int, default=None,
                   help="seed data and noise (seeded noise is not hardened); default: OpenDP noise")
    warm_help = ("compile and cache the numba kernels once (after installing; the first "
                 "test call otherwise compiles them)")
    sub.add_parser("warm", help=warm_help, description=warm_help[0].upper() + warm_help[1:])
    g = sub.add_parser("gcm", help="non-private GCM test on a CSV file", epilog=_CELL_NOTE)
    _add_common(g, private=False)
    g.add_argument("--ridge-lambda", type=float, default=None, help="default: CVST cross-validation")
    g.add_argument("--center", action="store_true",
                   help="subtract the sample means of X and Y first (KRR has no intercept)")
    pg = sub.add_parser("privgcm", help="PrivGCM on a CSV file", epilog=_CELL_NOTE)
    _add_common(pg)
    pg.add_argument("--regression", default="spline", choices=["spline", "krr"],
                    help="spline: the released spline fit (default); krr: kernel ridge "
                         "regression, the paper's mechanism (--ridge-lambda, --kernel-sigma)")
    pg.add_argument("--z-scale", nargs="+", default=None, metavar="Z_SCALE",
                    help="public scale of each Z column (the spline fit needs Z on a unit "
                         f"scale), {_AUTO_HELP}; default: 'auto' with the spline fit, none with "
                         "krr")
    pg.add_argument("--z-center", nargs="+", default=None, metavar="Z_CENTER",
                    help=f"public centre of each Z column, {_AUTO_HELP}; default: 'auto' with "
                         "the spline fit, 0 with krr")
    pg.add_argument("--x-bound", type=_number_or_auto, required=True,
                    help=f"public bound of X, {_AUTO_HELP}")
    pg.add_argument("--y-bound", type=_number_or_auto, required=True,
                    help=f"public bound of Y, {_AUTO_HELP}")
    pg.add_argument("--x-center", type=_number_or_auto, default=0.0,
                    help="public centre of X (data clipped to [centre - bound, centre + bound]), "
                         f"{_AUTO_HELP}")
    pg.add_argument("--y-center", type=_number_or_auto, default=0.0,
                    help=f"public centre of Y, {_AUTO_HELP}")
    pg.add_argument("--assume", default=None, choices=["additive", "linear"],
                    help="spline fit: a stated model for E[X|Z] and E[Y|Z] (additive in the "
                    "Z columns, or linear), named in the result and checked where n and "
                    "epsilon allow.  Without it the full fit answers one or two Z columns "
                    "(their interactions included) where n x epsilon resolves it, and "
                    "privgcm refuses otherwise, naming what would resolve it")
    pg.add_argument("--assume-additive", action="store_true",
                    help="the older spelling of --assume additive")
    pg.add_argument("--tighten", default="auto", choices=["auto", "true", "false"],
                    help="spline fit: tighten the public --x-bound / --y-bound to a released "
                    "window inside them (the private 0.8 quantile of |value - centre|, part "
                    "of --bounds-epsilon; twice that under --assume additive with two or more "
                    "columns); auto (default) does so unless --assume linear, where the fit "
                    "stays resolvable and, under a stated model, where its check stays as it "
                    "is and the privacy noise dominates; false keeps the public windows")
    pg.add_argument("--center-epsilon", type=float, default=None,
                    help="part of --epsilon spent on private centres of X and Y (sequential "
                         "composition); default: none, the public centres are used")
    pc = sub.add_parser("privcrt", help="PrivCRT on a CSV file with a Gaussian model-X",
                        epilog=_CELL_NOTE)
    _add_common(pc)
    pc.add_argument("--y-bound", type=_number_or_auto, required=True,
                    help=f"public bound of Y, {_AUTO_HELP}")
    pc.add_argument("--x-residual-bound", type=_number_or_auto, required=True,
                    help=f"public bound of X - E[X | Z], {_AUTO_HELP}")
    pc.add_argument("--y-center", type=_number_or_auto, default=0.0,
                    help=f"public centre of Y, {_AUTO_HELP}")
    mean = pc.add_mutually_exclusive_group(required=True)
    mean.add_argument("--x-mean-column", help="column holding E[X | Z] for each row")
    mean.add_argument("--x-mean-formula", help='linear formula in Z, e.g. "0.5 + 1.2*age - 0.3*bmi"')
    pc.add_argument("--x-scale", type=float, required=True, help="sd of X given Z")
    pc.add_argument("--n-resamples", type=int, default=19)
    args = parser.parse_args(argv)
    try:
        if args.command == "demo":
            demo(seed=args.seed)
            return 0
        if args.command == "warm":
            from ._warm import warm
            return 1 if warm() else 0
        path = _data_file(args)
        cols = [args.x, args.y] + list(args.z)
        if args.command == "privcrt" and args.x_mean_column:
            cols.append(args.x_mean_column)
        data = _read_csv(path, list(dict.fromkeys(cols)))
        x, y = data[args.x], data[args.y]
        z = np.column_stack([data[c] for c in args.z])
        if args.command == "gcm":
            res = gcm(x, y, z, kernel_sigma=args.kernel_sigma, ridge_lambda=args.ridge_lambda,
                      alternative=args.alternative, center=args.center)
            res = GCMResult(**{**res.__dict__, "resid_x": None, "resid_y": None})
        elif args.command == "privgcm":
            krr = ({"ridge_lambda": args.ridge_lambda, "kernel_sigma": args.kernel_sigma}
                   if args.regression == "krr" else {})
            zs = _numbers_or_auto(args.z_scale, "--z-scale")
            zc = _numbers_or_auto(args.z_center, "--z-center")
            res = privgcm(x, y, z, epsilon=args.epsilon, x_bound=args.x_bound,
                          y_bound=args.y_bound, alternative=args.alternative,
                          rng=args.seed, x_center=args.x_center, y_center=args.y_center,
                          center_epsilon=args.center_epsilon, regression=args.regression,
                          z_scale=zs, z_center=zc, bounds_epsilon=args.bounds_epsilon,
                          **({} if args.tighten == "auto" else
                             {"tighten": args.tighten == "true"}),
                          **({"assume_additive": True} if args.assume_additive else {}),
                          **({"assume": args.assume} if args.assume else {}), **krr)
        else:
            if args.x_mean_column:
                mu = data[args.x_mean_column]
            else:
                # a public function of each row's z, applied row by row by privcrt (which
                # maps a non-finite value, e.g. an overflow at an extreme z, to a finite
                # one instead of failing on one data set only)
                icpt, coefs = parse_linear_formula(args.x_mean_formula, args.z)
                coef = np.array([coefs.get(name, 0.0) for name in args.z])

                def mu(zz, icpt=icpt, coef=coef):
                    return icpt + np.asarray(zz, dtype=np.float64) @ coef
            mx = GaussianModelX(mu, args.x_scale)
            res = privcrt(x, y, z, epsilon=args.epsilon, model_x=mx, y_bound=args.y_bound,
                          x_residual_bound=args.x_residual_bound, y_center=args.y_center,
                          n_resamples=args.n_resamples, ridge_lambda=args.ridge_lambda,
                          kernel_sigma=args.kernel_sigma, alternative=args.alternative,
                          rng=args.seed, bounds_epsilon=args.bounds_epsilon)
    except (ValueError, TypeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(repr(res))
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
