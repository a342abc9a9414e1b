"""Command line: ``privci demo``, ``privci gcm``, ``privci privgcm``, ``privci privcrt``.

``privci demo`` runs the tests on a real clinical data set that ships with
scikit-learn (the diabetes data of Efron et al., 442 patients) and on the
paper's simulated setting, and prints a table.  The other subcommands read a
CSV file and take column names and the privacy arguments.
"""

from __future__ import annotations

import argparse
import re
import sys

import numpy as np

from .crt import GaussianModelX, crt, privcrt
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


def _read_csv(path, columns):
    """Read the named columns of a CSV file as float arrays.

    Errors name the column and the kind of problem (missing column, a value that
    is not a number, a non-finite value, a short row) but never a cell value, a
    row number or a count: the file holds the private data.
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
                vals[i] = float(r[j])
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
    return f"eps={p.epsilon:g}, {'hardened' if p.hardened else 'seeded'}"


def _row(test, question, res):
    return [test, question, res.n, f"{res.statistic:.3f}", f"{res.pvalue:.4g}", _privacy_cell(res)]


def demo(seed=None, out=sys.stdout):
    """Run the tests on built-in examples and print a table."""
    from sklearn.datasets import load_diabetes

    rng = np.random.default_rng(seed)
    noise_rng = None if seed is None else rng
    rows = []
    data = load_diabetes(scaled=True)
    F = data.data * np.sqrt(data.data.shape[0])   # each feature: mean 0, sd 1
    names = data.feature_names
    prog = (data.target - 150.0) / 80.0            # fixed, documented centring and scale
    col = {nm: F[:, i] for i, nm in enumerate(names)}
    z = np.column_stack([col["age"], col["sex"], col["bp"]])
    for xname in ["bmi", "s3"]:
        q = f"diabetes: {xname} _||_ progression | age, sex, bp"
        rows.append(_row("GCM", q, gcm(col[xname], prog, z, kernel_sigma=0.1)))
        for eps in (1.0, 8.0):
            # the diabetes columns are centred with sd 1 / sqrt(442) (public: how the
            # data set is distributed); the spline fit needs z on a unit scale
            res = privgcm(col[xname], prog, z, epsilon=eps, x_bound=4.0, y_bound=3.0,
                          z_scale=1.0 / np.sqrt(442.0), rng=noise_rng)
            rows.append(_row("PrivGCM", q, res))
    # the paper's simulation (d = 1, s = 2) under the null and an alternative
    n = 1000
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
        rows.append(_row("PrivCRT", q, privcrt(x, y, zz, epsilon=2.0, model_x=mx,
                                                    y_bound=yb, x_residual_bound=4.0,
                                                    rng=noise_rng if noise_rng is not None else None)))
    header = ["test", "hypothesis", "n", "statistic", "p-value", "privacy"]
    print("privci demo: conditional independence tests, private and not", file=out)
    print("(PrivCRT's statistic is its privately selected rank; GCM/CRT are not private)\n", file=out)
    print(_table(rows, header), file=out)
    return rows


def _add_common(p, private=True):
    p.add_argument("csv", help="CSV file with a header row")
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


def main(argv=None):
    parser = argparse.ArgumentParser(prog="privci", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    d = sub.add_parser("demo", help="run the tests on built-in examples and print a table")
    d.add_argument("--seed", type=int, default=None,
                   help="seed data and noise (seeded noise is not hardened); default: OpenDP noise")
    g = sub.add_parser("gcm", help="non-private GCM test on a CSV file")
    _add_common(g, private=False)
    g.add_argument("--ridge-lambda", type=float, default=None, help="default: CVST cross-validation")
    g.add_argument("--center", action="store_true",
                   help="subtract the sample means of X and Y first (KRR has no intercept)")
    pg = sub.add_parser("privgcm", help="PrivGCM on a CSV file")
    _add_common(pg)
    pg.add_argument("--regression", default="spline", choices=["spline", "krr"],
                    help="spline: the released additive spline fit (default); krr: kernel ridge "
                         "regression, the paper's mechanism (--ridge-lambda, --kernel-sigma)")
    pg.add_argument("--z-scale", type=float, nargs="+", default=None,
                    help="public scale of each Z column (the spline fit needs Z on a unit scale)")
    pg.add_argument("--z-center", type=float, nargs="+", default=[0.0],
                    help="public centre of each Z column")
    pg.add_argument("--x-bound", type=float, required=True)
    pg.add_argument("--y-bound", type=float, required=True)
    pg.add_argument("--x-center", type=float, default=0.0,
                    help="public centre of X (data clipped to [centre - bound, centre + bound])")
    pg.add_argument("--y-center", type=float, default=0.0, help="public centre of Y")
    pg.add_argument("--center-epsilon", type=float, default=None,
                    help="part of --epsilon spent on private centres of X and Y (sequential "
                         "composition); default: none, the public centres are used")
    pc = sub.add_parser("privcrt", help="PrivCRT on a CSV file with a Gaussian model-X")
    _add_common(pc)
    pc.add_argument("--y-bound", type=float, required=True)
    pc.add_argument("--x-residual-bound", type=float, required=True)
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
        cols = [args.x, args.y] + list(args.z)
        if args.command == "privcrt" and args.x_mean_column:
            cols.append(args.x_mean_column)
        data = _read_csv(args.csv, list(dict.fromkeys(cols)))
        x, y = data[args.x], data[args.y]
        z = np.column_stack([data[c] for c in args.z])
        if args.command == "gcm":
            res = gcm(x, y, z, kernel_sigma=args.kernel_sigma, ridge_lambda=args.ridge_lambda,
                      alternative=args.alternative, center=args.center)
            res = GCMResult(**{**res.__dict__, "resid_x": None, "resid_y": None})
        elif args.command == "privgcm":
            krr = ({"ridge_lambda": args.ridge_lambda, "kernel_sigma": args.kernel_sigma}
                   if args.regression == "krr" else {})
            zs = None if args.z_scale is None else (
                args.z_scale[0] if len(args.z_scale) == 1 else args.z_scale)
            zc = args.z_center[0] if len(args.z_center) == 1 else args.z_center
            res = privgcm(x, y, z, epsilon=args.epsilon, x_bound=args.x_bound,
                          y_bound=args.y_bound, alternative=args.alternative,
                          rng=args.seed, x_center=args.x_center, y_center=args.y_center,
                          center_epsilon=args.center_epsilon, regression=args.regression,
                          z_scale=zs, z_center=zc, **krr)
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
                               x_residual_bound=args.x_residual_bound,
                               n_resamples=args.n_resamples, ridge_lambda=args.ridge_lambda,
                               kernel_sigma=args.kernel_sigma, alternative=args.alternative,
                               rng=args.seed)
    except (ValueError, TypeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(repr(res))
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
