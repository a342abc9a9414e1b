# %% [markdown]
# # What can be tested at my n and epsilon?  The smallest epsilon by n, columns and model
#
# PrivGCM's released regression is resolvable only from some n x epsilon on (a public rule
# of n, the number of columns of z and the model; privgcm refuses below it before
# anything is spent).  This script tabulates, for each n and number of columns of z, the
# smallest total epsilon at which each model is resolvable (z_center and z_scale public;
# with privgcm's default "auto" z centre and scale add 10%), and whether the stated
# models' checks run.  Public numbers only: no data.
#
#     python vignettes/smallest_epsilon.py            # the README's and the docs' table
#
# Prints a markdown table.

# %%
import math

from privci._spline import choose_design, smallest_epsilon

NS = (500, 1000, 2000, 10_000, 100_000)
CASES = ((1, "full"), (2, "full"), (2, "additive"), (2, "linear"), (3, "additive"),
         (3, "linear"), (5, "additive"), (5, "linear"))


def cell(n, d, model):
    e = smallest_epsilon(n, d, model)
    if e is None:
        return "-"
    chk = ""
    if model != "full":
        # the smallest epsilon at which the stated model is also checked
        ok = lambda v: choose_design(n, d, 1, 1, v, model=model).checked  # noqa: E731
        lo, hi = e, 1e4
        if ok(hi):
            while hi / lo > 1.05:
                mid = math.sqrt(lo * hi)
                lo, hi = (lo, mid) if ok(mid) else (mid, hi)
            chk = f" (checked from {float(f'{hi:.2g}'):g})"
        else:
            chk = " (not checked)"
    return f"{e:g}{chk}"


def main():
    head = ["columns of z, model"] + [f"n = {n}" for n in NS]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for d, model in CASES:
        name = f"{d}, {'full (no assumption)' if model == 'full' else 'assume=' + model}"
        print("| " + " | ".join([name] + [cell(n, d, model) for n in NS]) + " |", flush=True)


if __name__ == "__main__":
    main()
