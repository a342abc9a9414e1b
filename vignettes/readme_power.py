# %% [markdown]
# # The README example and the demo: how often do they find their dependence? (issue 23)
#
# The README's design (n = 2000, one column of z, y depends on x given z) is drawn afresh
# `--reps` times and tested with the README's own call, once with its public parameters
# and once with every bound and centre left to the package ("auto").  `--demo` also runs
# `privci demo` with `--reps` seeds and reports how often each PrivGCM row rejects at 0.05.
#
#     python vignettes/readme_power.py --reps 200 --demo
#     python vignettes/readme_power.py --quick                  # CI smoke run
#
# Writes `results/readme_power_summary.csv` and prints a markdown table with Wilson
# intervals and the share of results whose fit check was "not certified".

# %%
import os
for _v in ("NUMBA_NUM_THREADS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")

import argparse
import io
import warnings

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
import sys  # noqa: E402
sys.path.insert(0, HERE)
from level_stress import wilson, write_csv  # noqa: E402  (the level grid's helpers)


def readme_data(n, rng):
    """The README's design (its first ```python block draws the same)."""
    z = rng.normal(size=(n, 1))
    x = np.sin(z[:, 0]) + rng.normal(size=n)
    y = np.cos(z[:, 0]) + 0.8 * (x - np.sin(z[:, 0])) + rng.normal(size=n)
    return x, y, z


# the README's call with its public parameters (keep in step with README.md: a test reads
# both and fails if they differ)
README_PUBLIC = dict(epsilon=2.0, x_bound=3.5, y_bound=4.5, z_center=0.0, z_scale=1.0)
README_AUTO = dict(epsilon=2.0, x_bound="auto", y_bound="auto", x_center="auto",
                   y_center="auto")


def readme_power(reps, seed):
    import privci
    rows = []
    for name, kw in (("README, public parameters", README_PUBLIC),
                     ("README, all auto", README_AUTO)):
        rej = flag = 0
        for r in range(reps):
            rng = np.random.default_rng(seed + r)
            x, y, z = readme_data(2000, rng)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                res = privci.privgcm(x, y, z, rng=rng, **kw)
            rej += res.pvalue <= 0.05
            flag += res.fit_certified is False
        rows.append((name, reps, rej, flag))
    return rows


def demo_power(reps, seed):
    from privci import cli
    counts = {}
    for s in range(reps):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = cli.demo(seed=seed + s, out=io.StringIO())
        for test, question, _n, _stat, pval, privacy in out:
            if test != "PrivGCM":
                continue
            key = f"demo: {question} [{privacy.split(',')[0].split(':')[0]}]"
            c = counts.setdefault(key, [0, 0, 0])
            c[0] += 1
            if pval == "refused":        # refused before anything was spent: no answer
                c[2] += 1
                continue
            c[1] += float(str(pval).split()[0]) <= 0.05
            c[2] += "fail-safe" in privacy or "fail-safe" in str(pval)
    return [(k, v[0], v[1], v[2]) for k, v in counts.items()]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--reps", type=int, default=200)
    ap.add_argument("--seed", type=int, default=52_000)
    ap.add_argument("--demo", action="store_true", help="also the demo's PrivGCM rows")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--out", default=None)
    ap.add_argument("--no-progress", action="store_true", help="(accepted for run_all.sh)")
    ap.add_argument("--workers", type=int, default=0, help="(accepted for run_all.sh)")
    args = ap.parse_args(argv)
    if args.quick:
        args.reps = 3
    rows = readme_power(args.reps, args.seed)
    if args.demo or args.quick:
        rows += demo_power(args.reps, args.seed)
    print("| case | data sets | rejection rate at 0.05 | 95% Wilson | not certified |")
    print("|---|---|---|---|---|")
    out = []
    for name, reps, rej, flag in rows:
        lo, hi = wilson(rej, reps)
        print(f"| {name} | {reps} | {rej / reps:.3f} | [{lo:.3f}, {hi:.3f}] | "
              f"{flag / reps:.2f} |", flush=True)
        out.append(dict(case=name, reps=reps, rejections=rej, rate=rej / reps, lo=lo, hi=hi,
                        not_certified=flag / reps))
    path = args.out or (None if args.quick else
                        os.path.join(HERE, "results", "readme_power_summary.csv"))
    if path:
        write_csv(path, out)
    return out


if __name__ == "__main__":
    main()
