#!/usr/bin/env python3
"""Mutation check of privci's privacy tests: weaken one mechanism at a time, see what fails.

For each mutant: copy ``python/privci`` to a temporary directory, apply one regular-
expression substitution to one file (a mutant whose pattern no longer matches stops the
run: update the MUTANTS table below), run the given default-run test files against the
copy (``PYTHONPATH`` = the copy; ``pytest -x -q -p no:cacheprovider``, with a timeout),
and record the failing test ids.  First the unmutated copy is run: it must pass.  The
result is a markdown table, mutant -> caught by (test ids) / NOT CAUGHT.

Usage (from the repository root)::

    .venv-np2/bin/python tools/mutate.py                       # default test files
    .venv-np2/bin/python tools/mutate.py --only gram-half-noise quantile-scale
    .venv-np2/bin/python tools/mutate.py --tests tests/test_ledger.py tests/test_spline.py
    .venv-np2/bin/python tools/mutate.py --list                # the mutants, no run
    .venv-np2/bin/python tools/mutate.py --check               # do the patterns still match?
    git archive HEAD python/privci | tar -x -C /tmp/head       # someone's work in the tree:
    .venv-np2/bin/python tools/mutate.py --package /tmp/head/python/privci   # mutate HEAD

A mutant may name the tests that must catch it (its ``tests``, "the note": files or
pytest node ids); without ``--tests`` each such mutant runs those, the others the default
files, and the unmutated run covers all of them.  ``--tests`` runs the given ones for every
mutant.

Each mutant is (id, file under python/privci, pattern, replacement, description); the
pattern is applied with ``re.subn(pattern, replacement, text, flags=re.MULTILINE)`` and
``count`` is the number of substitutions it must make (None: at least one).  The spline
mutants are written against the stable names of ``privci._spline`` (gram_sensitivity,
cross_sensitivity, GRAM_SHARE's split, the release calls); when that code changes, edit
the pattern here (``--check`` says which ones no longer match).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from typing import Optional

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = os.path.join(ROOT, "python", "privci")
DEFAULT_TESTS = ("tests/test_ledger.py", "tests/test_calibration.py",
                 "tests/test_level_twosided.py")


@dataclass(frozen=True)
class Mutant:
    id: str
    file: str                 # relative to python/privci
    pattern: str
    replacement: str
    description: str
    count: Optional[int] = None   # substitutions required (None: at least one)
    issue: bool = True            # one of the mutants listed in issue 21
    # the note: the tests (files or node ids) that must catch this mutant, run when --tests
    # is not given (empty: the default test files)
    tests: tuple = ()


MUTANTS = [
    # --- the mutants of issue 21 -------------------------------------------------------
    Mutant("gram-half-noise", "_spline.py",
           r"laplace_mechanism\(_to_float\((g_\w+)\), sens_g,",
           r"laplace_mechanism(_to_float(\1), sens_g / 2,",
           "Gram matrices' noise from half the stated sensitivity", 1),
    Mutant("cross-gets-all-fit-eps", "_spline.py",
           r"return _rest\(self\.eps_fit, self\.eps_gram\)", "return self.eps_fit",
           "the fit's split gives the cross-products all of epsilon_fit (1.8 epsilon_fit)", 1),
    Mutant("quantile-scale", "bounds.py",
           r"rng\.gumbel\(0\.0, 2\.0 / epsilon", "rng.gumbel(0.0, 1.0 / epsilon",
           "seeded private quantile: Gumbel scale 2/eps replaced by 1/eps", 1),
    Mutant("charge-after-compute", "gcm.py",
           r"(    composition = plan\.charge\(par\.budget, \"privgcm\"\)\n)"
           r"((?:.*\n)*?)(    return P\.gcm_result\()",
           r"\2\1\3", "privgcm charges the budget after computing (just before the result)", 1),
    Mutant("same-half", "_spline.py",
           r"\(~h & k_, slice\(p, p \+ q\)\)", "(h & k_, slice(p, p + q))",
           "x and y fitted on the same half of the rows", 1),
    Mutant("gram-sens-understated", "_spline.py",
           r"(def gram_sensitivity\b(?:.*\n)+?\s*return )", r"\g<1>0.9 * ",
           "gram_sensitivity understated by 10%", 1, True, ("tests/test_spline.py",)),
    Mutant("cross-sens-understated", "_spline.py",
           r"(def cross_sensitivity\b(?:.*\n)+?\s*return )", r"\g<1>0.9 * ",
           "cross_sensitivity understated by 10%", 1),
    Mutant("krr-sharp-halved", "regression.py",
           r"return (2\.0 \* b \* b \+ 4\.0 \* b \* min\(b \* B, 0\.5 / math\.sqrt\(lam\)\))",
           r"return 0.5 * (\1)", "the sharp KRR sensitivity constant halved", 1),
    Mutant("no-reclip-after-recentre", "_transform.py",
           r"U = np\.clip\(U - means, -1\.0, 1\.0\)", "U = U - means",
           "no re-clipping after the private re-centring", 1),
    Mutant("no-clip-in-clip_scale", "_kernels.py",
           r"\n\s*if v > b:\n\s*v = b\n\s*elif v < -b:\n\s*v = -b", "",
           "clip_scale divides by the bound without clipping", 1),
    # --- more ---------------------------------------------------------------------------
    Mutant("laplace-seeded-half-scale", "mechanisms.py",
           r"scale = sensitivity / epsilon\n", "scale = sensitivity / epsilon / 2\n",
           "seeded Laplace: half the calibrated scale", 1, False),
    Mutant("noisy-max-scale", "mechanisms.py",
           r"scale = 2\.0 / epsilon\n(\s*)idx", r"scale = 1.0 / epsilon\n\1idx",
           "seeded report-noisy-max: exponential scale 2/eps replaced by 1/eps", 1, False),
    Mutant("centre-sens-halved", "_transform.py",
           r"2\.0 \* \(p \+ q\) / n", "1.0 * (p + q) / n",
           "private re-centring: sensitivity of the means halved", 1, False),
    Mutant("block-sums-sens-halved", "_spline.py",
           r"sens = 2\.0 \* p \* q", "sens = 1.0 * p * q",
           "spline path: block sums' sensitivity halved", 1, False, ("tests/test_spline.py",)),
    Mutant("bounds-no-split", "bounds.py",
           r"e = _split\(epsilon, k\)", "e = _split(epsilon, 1)",
           "private_bounds (and its reliability note): every quantile gets the whole epsilon",
           2, False),
    Mutant("scale-no-split", "bounds.py",
           r"e = _split\(eps, d\)", "e = eps",
           "private_scale: every column gets the whole epsilon", 1, False),
    Mutant("crt-sens-halved", "regression.py",
           r"return 2\.0 \* b \* b\n", "return b * b\n",
           "PrivCRT's sharp Delta_T halved", 1, False),
    Mutant("floor-tenth", "_spline.py",
           r"(def _lam\((?:.*\n)*?\s*return )", r"\g<1>0.1 * ",
           "eigenvalue floor / penalty 10x too small (conservative: level collapses)", 1,
           False),
    Mutant("block-t-sd-doubled", "_private.py",
           r"sd = float\(np\.std\(m, ddof=1\)\)", "sd = 2.0 * float(np.std(m, ddof=1))",
           "block t statistic (unconditional, KRR blocks): sd doubled (conservative)", 1,
           False),
    Mutant("block-variance-doubled", "_spline.py",
           r"block_var = k \* np\.var\(", "block_var = 2 * k * np.var(",
           "between-block variance counted twice (conservative)", 1, False),
    # --- stop 33 (issues 34, 35): the new releases and rules; their note: test_spline ----
    Mutant("squares-sens-halved", "_spline.py",
           r"sens_q = 1\.0 \* p \* q", "sens_q = 0.5 * p * q",
           "spline path: the sum of squared products' sensitivity halved", 1, False,
           ("tests/test_spline.py", "tests/test_ledger.py")),
    Mutant("pattern-open-supports", "_spline.py",
           r"meet = np\.all\(\(lo\[:, None, :\] <= hi\[None, :, :\]\) & "
           r"\(lo\[None, :, :\] <= hi\[:, None, :\]\)",
           "meet = np.all((lo[:, None, :] < hi[None, :, :] - 0.3) & "
           "(lo[None, :, :] < hi[:, None, :] - 0.3)",
           "Gram pattern: possibly non-zero entries released without noise (supports shrunk)",
           1, False, ("tests/test_spline.py",)),
    Mutant("linear-block-counted-once", "_spline.py",
           r'return sum\(\(cols \+ 1\) if kind == "lin" else 1 ',
           'return sum(1 if kind == "lin" else 1 ',
           "the signed linear block's sensitivities as for one partition-of-unity block (its "
           "L1 norm is 1 + d)", 1, False, ("tests/test_spline.py",)),
    Mutant("linear-scale-ignores-slopes", "_spline.py",
           r"spread = np\.sum\(np\.abs\(blk\[1:\]\), axis=0\)",
           "spread = 0.0 * np.sum(np.abs(blk[1:]), axis=0)",
           "residual scale of the linear block: the slopes' range left out (residuals "
           "beyond [-1, 1] clipped)", 1, False, ("tests/test_spline.py",)),
    Mutant("squares-floor-dropped", "_spline.py",
           r"\+ SQ_UCB \* b_q\n", "+ 0.0 * b_q\n",
           "k = 1: the squares' noise scale not added to the released variance (the UCB "
           "that keeps the level)", 1, False, ("tests/test_spline.py",)),
    Mutant("linear-floor-check-dropped", "_spline.py",
           r"certified = certified and not binds", "certified = certified",
           "spline test: the unchecked linear fit certified where its floor binds", 1, False,
           ("tests/test_spline.py",)),
    Mutant("shift-law-normal", "_spline.py",
           r"if big and design\.n_features\(\) <= SHIFT_MC_FEATURES:", "if False:",
           "spline test (k = 1): the fits' shift as a normal of variance V, not its draws", 1,
           False, ("tests/test_spline.py",)),
    Mutant("linear-free-any-split", "_spline.py",
           r"free and _least_kept\(n, c\[6\], c\[2\] \* epsilon, c\[3\]\) >= linear_free_rho",
           "free", "rule: the unchecked linear fit at any resolvable split, not only those "
           "keeping every central direction at LINEAR_FREE_RHO", 1, False,
           ("tests/test_spline.py",)),
    Mutant("linear-margin-dropped", "_spline.py",
           r"if \(linear_margin and _unchecked_linear\(best\[6\]\)",
           "if (False and _unchecked_linear(best[6])",
           "rule: the unchecked linear fit near its edge takes the least critical value, "
           "not counting the chance that its floor binds", 1, False, ("tests/test_spline.py",)),
    Mutant("bind-probability-one-half", "_spline.py",
           r"return 1\.0 - \(1\.0 - one\) \*\* 2", "return one",
           "rule: the chance that the linear fit's floor binds counted in one half only",
           1, False, ("tests/test_spline.py",)),
    # --- stop 45: the checked linear fit's quadratic interaction block ------------------
    Mutant("quad-block-beyond-partition", "_spline.py",
           r"blocks\.append\(_quantise_block\(_bernstein_tensor\(t, res, CHECK_DEGREE\[kind\]\)\)\)",
           "blocks.append(_quantise_block(_bernstein_tensor(t, res, CHECK_DEGREE[kind])) "
           "if kind == 'mlin' else np.trunc(1.5 * _bernstein_tensor(t, res, 2) * _ONE)"
           ".astype(np.int64))",
           "the quadratic interaction block's features unquantised and 1.5 times too large "
           "(their sum beyond 1: the Gram's sensitivity understated)", 1, False,
           ("tests/test_spline.py", "tests/test_neighbours.py::"
            "test_checked_linear_fit_quadratic_block_neighbours")),
    Mutant("quad-block-span", "_spline.py",
           r"parts = tuple\(math\.comb\(degree, i\) \* ",
           "parts = tuple((1.0 - b) ** (i == 1) * math.comb(degree, i) * ",
           "the quadratic interaction block's middle function changed (no longer the "
           "quadratic Bernstein basis: z1 z2^2 outside its span)", 1, False,
           ("tests/test_spline.py::"
            "test_quadratic_check_block_is_a_partition_holding_quadratic_products",)),
    Mutant("poly-block-counted-once", "_spline.py",
           r'return sum\(\(cols \+ 1\) if kind == "lin" else 1 ',
           'return sum((cols + 1) if kind == "lin" and len(_blocks(key)) == 1 else 1 ',
           "the polynomial check's signed block counted as one block (its L1 is 1 + d): "
           "the Gram and cross-product sensitivities understated", 1, True,
           ("tests/test_spline.py::"
            "test_polynomial_check_is_the_signed_block_and_a_cubic_partition",
            "tests/test_neighbours.py::"
            "test_checked_linear_fit_polynomial_check_neighbours")),
    Mutant("poly-estimate-shrunk", "_spline.py",
           r"^EST_SHRINK = 0\.0 ", "EST_SHRINK = 1.0 ",
           "the polynomial check's bias estimate on the Gram lowered by the noise edge (as "
           "the other fits): its weak contrasts hidden, tanh(2 z1) nulls rejected", 1, False,
           ("tests/test_vignette_level_break.py::"
            "test_polynomial_check_holds_cubic_and_odd_nulls_and_finds_linear_dependence",)),
    Mutant("poly-check-off", "_spline.py",
           r"^POLY_CHECK_MAX_D = 3 ", "POLY_CHECK_MAX_D = None ",
           "no polynomial check: the spline check only (power 0.100 at epsilon 20, "
           "z1 He3(z2) / 3 rejected 0.470 at 10)", 1, False,
           ("tests/test_spline.py::"
            "test_the_rule_takes_the_polynomial_check_where_it_predicts_more_power",
            "tests/test_vignette_level_break.py::"
            "test_polynomial_check_holds_cubic_and_odd_nulls_and_finds_linear_dependence")),
    Mutant("additive-auto-window-quantile", "_gcm_pipeline.py",
           r"^STATED_BOUND_WIDTH = 2\.0 ", "STATED_BOUND_WIDTH = 1.0 ",
           "\"auto\" windows under assume='additive' at the released quantile itself (true "
           "additive nulls rejected in up to 0.45)", 1, False,
           ("tests/test_spline.py::"
            "test_auto_windows_under_the_additive_model_are_twice_the_released_quantile",)),
    Mutant("additive-allowance-off", "_spline.py",
           r"^ADDITIVE_ALLOWANCE = True ", "ADDITIVE_ALLOWANCE = False ",
           "the unchecked additive fit without an allowance for its ridge's shrinkage (a "
           "shared square null rejected in 0.21 with 'auto' windows at epsilon 1)", 1, False,
           ("tests/test_spline.py::"
            "test_unchecked_additive_fit_carries_an_allowance_for_its_ridge",
            "tests/test_vignette_level_break.py::"
            "test_unchecked_additive_fit_holds_the_shared_square_null_with_auto_windows")),
    Mutant("additive-share-free", "_spline.py",
           r"^ADDITIVE_MIN_SHARE = 0\.7 ", "ADDITIVE_MIN_SHARE = 0.2 ",
           "the unchecked additive fit's split free down to 0.2 of epsilon (a shared "
           "square null rejected in 0.115 of 200 at n = 10^4, epsilon 5)", 1, False,
           ("tests/test_spline.py::"
            "test_unchecked_additive_fit_competes_on_power_above_its_minimum_share",)),
    Mutant("quad-check-off", "_spline.py",
           r"^QUAD_CHECK_MAX_D = 3 ", "QUAD_CHECK_MAX_D = None ",
           "the stated models checked by the multilinear block (stop 44's check, blind to "
           "sin z1 cos z2)", 1, False,
           ("tests/test_vignette_level_break.py::"
            "test_checked_linear_fit_holds_sin_cos_null_at_epsilon_10",
            "tests/test_vignette_level_break.py::"
            "test_checked_additive_fit_holds_sin_cos_null_at_epsilon_10")),
    Mutant("quad-check-linear-only", "_spline.py",
           r'^QUAD_CHECK_MODELS = \("linear", "additive"\)', 'QUAD_CHECK_MODELS = ("linear",)',
           "the additive model checked by the multilinear block (blind to sin z1 cos z2: "
           "0.995 of 200 nulls rejected at n = 10^4, epsilon 10)", 1, False,
           ("tests/test_vignette_level_break.py::"
            "test_checked_additive_fit_holds_sin_cos_null_at_epsilon_10",)),
    # --- the release (issue 24); their note: tests/test_release_resolution.py ---------
    Mutant("release-sens-understated", "release.py",
           r"return float\(v \* v \+ v\)", "return float(v * v)",
           "release: L1 sensitivity V^2 instead of V^2 + V", 1, False),
    Mutant("release-no-nested-check", "release.py",
           r"allow2 = allow2 \+ np\.maximum\(0\.0, Bn \* Bn - var_Bn_noise\)",
           "allow2 = allow2", "release test: the nested fit check's allowance dropped", 1,
           False, ("tests/test_release_resolution.py",)),
    Mutant("release-rule-ignores-noise", "release.py",
           r"lo > -RULE_RANGE or hi < RULE_RANGE or ratio > NOISE_RATIO:",
           "lo > -RULE_RANGE or hi < RULE_RANGE:",
           "release rule: the noise condition dropped (finer K than the rule allows)", 1,
           False, ("tests/test_release_resolution.py",)),
    Mutant("release-no-spacing-failsafe", "release.py",
           r"if h <= MAX_SPACING \* sd:", "if True:",
           "release test: the knot-spacing fail-safe dropped", 1, False, ("tests/test_release_resolution.py",)),
    Mutant("release-no-clipped-failsafe", "release.py",
           r"if clipped > MAX_CLIPPED:", "if False:",
           "release test: the clipped-share fail-safe dropped", 1, False, ("tests/test_release_resolution.py",)),
    # --- issue 36 (private PC beyond five variables): the linear rung and the search ----
    Mutant("linear-sens-understated", "release.py",
           r"return float\(\(\(v \+ COV_WEIGHT\) \*\* 2 \+ v\) / 2\.0\)",
           "return float((v + COV_WEIGHT) ** 2 / 2.0)",
           "linear release: L1 sensitivity without its ||f||_2^2 term", 1, False,
           ("tests/test_release_linear.py",)),
    Mutant("linear-noise-variance-dropped", "release.py",
           r"var = var_samp \+ var_noise$", "var = var_samp",
           "linear release test: the released noise's variance left out", 1, False,
           ("tests/test_release_linear.py",)),
    Mutant("linear-clip-ignores-bias", "release.py",
           r"if np\.isfinite\(sd\) and CLIP_BIAS\[c\] <= CLIP_BIAS_SHARE \* sd:", "if True:",
           "linear release: the clip rule ignores the clipping bias", 1, False,
           ("tests/test_release_linear.py",)),
    Mutant("linear-failsafe-dropped", "release.py",
           r"if ss and not assume_linear:", "if False:",
           "linear release: conditional queries answered without assume_linear", 1, False,
           ("tests/test_release_linear.py",)),
    Mutant("linear-auto-moments-get-all-eps", "release.py",
           r"noisy, info = laplace_mechanism\(vals, sens, plan\.test_epsilon, gen, "
           r"value_bound=float\(n\)\)",
           "noisy, info = laplace_mechanism(vals, sens, plan.epsilon, gen, "
           "value_bound=float(n))",
           "linear release with 'auto' bounds: the moments get the whole epsilon", 1, False,
           ("tests/test_release_linear.py",)),
    Mutant("pc-untested-silent", "release.py",
           r"untested = tuple\(sorted\(reasons\)\)", "untested = ()",
           "pc: edges no test could remove not reported as untested", 1, False,
           ("tests/test_causal_untested.py",)),
    Mutant("pc-test-cap-ignored", "release.py",
           r"if used \+ extra > budget_left:", "if False:",
           "pc: the public cap on tests ignored", 1, False,
           ("tests/test_causal_untested.py",)),
    Mutant("clip-caveat-ignores-noise", "release.py",
           r"if sh > CLIP_WARN \+ margin:", "if sh > CLIP_WARN:",
           "release: the clipping caveat read from noisy shares without their noise", 1,
           False, ("tests/test_release_linear.py",)),
    Mutant("orient-conflict-first-wins", "_pc.py",
           r"if not undirected\(a, b\) or frozenset\(\(a, b\)\) in frozen:",
           "if not undirected(a, b):",
           "pc orientation: a conflicting collider orientation kept (first wins)", 1, False,
           ("tests/test_causal_untested.py",)),
    # --- stop 31 (issue 23's level); their note: tests/test_spline.py
    Mutant("spline-certifies-interactions", "_spline.py",
           r'available = not \(model_ == "full" and d > FULL_MAX_D\)', "available = True",
           "spline rule: a full fit offered for three or more columns (interactions of three "
           "columns that no basis holds)", 1, False, ("tests/test_spline.py",)),
    Mutant("tensor-box-wide", "_spline.py", r"^TENSOR_BOX = 2\.0 ", "TENSOR_BOX = None ",
           "spline rule (stop 54): the two-column tensor fit on [-4, 4]^2, its corners' "
           "unresolvable functions kept", 1, False,
           ("tests/test_spline.py::test_tensor_fit_leaves_out_rows_beyond_its_box",)),
    Mutant("quad-rule-largest", "_spline.py", r'^QUAD_RULE_ALL = \("additive", "linear"\) ',
           "QUAD_RULE_ALL = False ",
           "spline rule (stop 55): the additive check claimed where only its largest "
           "interaction contrast is resolved (z1^2 z2^2 shrunk away)", 1, False,
           ("tests/test_vignette_level_break.py::"
            "test_a_checked_additive_result_holds_a_bump_interaction_null",)),
    Mutant("certify-lcb-off", "_spline.py", r"^CERTIFY_LCB = 1\.0 ", "CERTIFY_LCB = 0.0 ",
           "fit check (stop 56): the fail-safe reads the debiased estimate itself, not the "
           "estimate less one noise sd (true linear designs fail safe in 0.16)", 1, False,
           ("tests/test_spline.py::test_tensor_fit_does_not_fail_safe_on_its_own_noise",)),
    Mutant("certify-never", "_spline.py", r"    if not CERTIFY_LCB:\n        return est2",
           "    return np.zeros_like(est2)",
           "fit check (stop 56): the fail-safe never fires (an evidence of 0)", 1, False,
           ("tests/test_spline.py::test_a_false_stated_model_is_caught_where_it_is_checked",)),
    Mutant("quad-rule-linear-largest", "_spline.py",
           r'^QUAD_RULE_ALL = \("additive", "linear"\) ', 'QUAD_RULE_ALL = ("additive",) ',
           "spline rule (stop 56): the linear model's quadratic check claimed where only "
           "its largest interaction contrast is resolved", 1, False,
           ("tests/test_spline.py::test_linear_quadratic_check_asks_every_contrast",)),
    Mutant("tensor-box-fused-off", "_spline.py",
           r"    if box >= SPLINE_RANGE:\n        return labels",
           "    return labels",
           "spline passes (stop 57): the fused kernels leave out only the rows beyond 4, not "
           "the tensor fit's box [-2, 2]^2", 1, False,
           ("tests/test_spline.py::"
            "test_fused_passes_leave_out_the_tensor_box_as_the_numpy_passes",)),
    Mutant("live-rule-kills-live", "_spline.py",
           r"    return _live_at\(key, _box\(key\), bool\(TENSOR_LIVE\)\)",
           "    return _live_at(key, _box(key) / 3.0, bool(TENSOR_LIVE))",
           "spline release (stop 57): features that carry data declared dead (released as "
           "exact zeros)", 1, False,
           ("tests/test_spline.py::test_dead_tensor_features_are_zero_on_every_kept_row",)),
    Mutant("live-cross-exact", "_spline.py",
           r"    bn\[live\] = b_live",
           "    bn[live] = _to_float(np.asarray(b_int)[live])",
           "spline release (stop 57): the live cross-products released without their noise",
           1, False,
           ("tests/test_spline.py::test_release_keeps_dead_features_exact_and_live_ones_noisy",)),
    Mutant("spline-box-ignored", "_source.py",
           r"_kernels.rows_outside\(zb, S.SPLINE_RANGE if box is None else float\(box\), "
           r"flags\)",
           "flags.fill(0)", "spline passes: rows beyond the clip box kept", 1, False, ("tests/test_spline.py",)),
    Mutant("spline-box-ignored-fused", "_basis_kernels.py",
           r"return out_label if \(outside != 0\) & \(out_label >= 0\) else own",
           "return own", "fused spline kernels: rows beyond the clip box kept", 1, False,
           ("tests/test_spline.py",)),
    # --- issue 38 (privacy tests, round 3): each with the tests that must catch it ------
    Mutant("dask-rows-noise-skipped-at-row-0", "_dask.py",
           r"(\n    )else:\n(\s*noisy = _noise_chunk\()",
           r"\1elif start == 0:\n        noisy = vals\n    else:\n\2",
           "Dask, one block per row (KRR): hardened noise skipped on the partition starting "
           "at row 0", 1, False,
           ("tests/test_dask.py::test_dask_noise_count_equals_the_record",)),
    Mutant("residual-scale-from-rows", "_source.py",
           r'spec\.get\("res_scale"\)',
           '(lambda P: 1.0 / np.maximum(1.0 + np.max(P, axis=0, initial=0.0), '
           '1.0 - np.min(P, axis=0, initial=0.0)))(np.clip(np.hstack(['
           'design.features(zb) @ spec["coef_x"], design.features(zb) @ spec["coef_y"]]), '
           '-1.0, 1.0))',
           "spline pass 2: residual scale c from the released fit's predictions on the "
           "partition's rows (data-dependent) instead of its coefficients", 2, False,
           ("tests/test_ledger.py::test_residual_scale_is_the_public_function_of_the_"
            "released_fit",)),
    Mutant("release-auto-gram-gets-all-eps", "release.py",
           r"eps = plan\.test_epsilon\n(\s*)U = _scaled",
           r"eps = plan.epsilon\n\1U = _scaled",
           "privci.release with bounds='auto': the Gram matrices get the whole epsilon "
           "after the private bounds (max instead of sum)", 1, False,
           ("tests/test_ledger.py::test_ledger[privci.release-auto]",)),
    Mutant("gram-half-noise-default", "_spline.py",
           r"laplace_mechanism\(_to_float\((g_\w+)\), sens_g,",
           r"laplace_mechanism(_to_float(\1), sens_g / 2,",
           "Gram matrices' noise from half the stated sensitivity, seen by the default "
           "path's (private z centre and scale) scenarios alone", 1, False,
           ("tests/test_ledger.py::test_ledger[privgcm-spline-default]",
            "tests/test_ledger.py::test_ledger[privgcm-spline-default-gram]")),
    Mutant("privgcm-constant-p", "gcm.py",
           r"^(    out = _spline_mechanism\(par, plan, inp\) if par\.spline else "
           r"P\.krr_mechanism\(par, plan, inp\)\n)",
           r"\1    out.pvalue = 0.5\n",
           "privgcm (in memory) always returns p = 0.5 (its releases unchanged): private, "
           "but not the test", 1, False,
           ("tests/test_neighbours.py::test_privgcm_neighbours",)),
    Mutant("privgcm-data-independent", "gcm.py",
           r"^(    )out = (_spline_mechanism\(par, plan, inp\) if par\.spline else "
           r"P\.krr_mechanism\(par, plan, inp\))\n",
           r"\1inp = __import__('copy').copy(inp)\n"
           r"\1inp.xa, inp.ya = 0.0 * inp.xa, 0.0 * inp.ya\n"
           r"\1out = \2\n"
           r"\1out.statistic, out.pvalue = 0.0, 0.5\n",
           "privgcm (in memory) releases the statistics of zeroed x and y and returns "
           "p = 0.5: private, but not the test", 1, False,
           ("tests/test_neighbours.py::test_privgcm_neighbours",)),
    # --- stop 49: the bounds' public preference for small candidates -------------------
    Mutant("bound-preference-reads-data", "bounds.py",
           r"pref = \(2\.0 / epsilon\) \* _log_preference\(candidates, power\)",
           "pref = (2.0 / epsilon) * _log_preference(np.maximum(candidates, xs[-1]), power)",
           "seeded bound: the preference's weights read the data's largest value (flat above "
           "it: not a base measure, and the binary column's bound drifts to 10^9 again)", 1,
           False, ("tests/test_bounds.py",)),
    # --- stop 51: public bounds tightened to a released window ---------------------------
    Mutant("tighten-uncapped", "_gcm_pipeline.py",
           r"v = np\.minimum\(v, caps\[key\]\)",
           "v = v",
           "a tightened window is not capped at the public bound (beyond the range the user "
           "made public)", 1, False,
           ("tests/test_tighten.py::test_window_never_exceeds_the_public_bound",)),
    Mutant("tighten-candidates-read-data", "_gcm_pipeline.py",
           r"\[\(0\.0, float\(b\)\) for b in caps\[\"x_bound\"\]\]",
           "[(0.0, float(np.max(np.abs(inp.xa - inp.xc)))) for b in caps[\"x_bound\"]]",
           "the tightened bound's candidates run up to the data's largest |x - centre| (a "
           "data-dependent grid: not differentially private)", 1, False,
           ("tests/test_tighten.py::test_candidates_are_the_public_range",)),
    # --- stop 53: tightened windows under assume="additive" -----------------------------
    Mutant("tighten-additive-drops-the-check", "_gcm_pipeline.py",
           r"if choose_design\(n, d, p, q, eps_u, k, model=par\.model\)\.checked != des\.checked:",
           "if False:",
           "the tightening under assume='additive' spends the bounds' share where that moves "
           "the model below its check's edge (a checked assumption made unchecked for a "
           "window)", 1, False,
           ("tests/test_tighten.py::test_tightening_never_turns_a_checked_model_unchecked",)),
]


def apply(mutant, root):
    path = os.path.join(root, mutant.file)
    with open(path, encoding="utf-8") as fh:
        text = fh.read()
    new, n = re.subn(mutant.pattern, mutant.replacement, text, flags=re.MULTILINE)
    if n == 0 or (mutant.count is not None and n != mutant.count):
        raise SystemExit(f"mutant {mutant.id!r}: the pattern made {n} substitution(s) in "
                         f"{os.path.join(root, mutant.file)} (expected "
                         f"{mutant.count or 'at least 1'}): the code changed, update "
                         f"tools/mutate.py.\n  pattern: {mutant.pattern}")
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(new)
    return n


def fresh_copy(tmp, package=None):
    dest = os.path.join(tmp, "privci")
    if os.path.exists(dest):
        shutil.rmtree(dest)
    # copy2 keeps the modification times: numba's on-disk caches (keyed by the source's
    # time stamp) and Python's bytecode stay valid for every file that is not mutated
    shutil.copytree(package or PACKAGE, dest, copy_function=shutil.copy2)
    return dest


def child_env(tmp, threads):
    env = dict(os.environ)
    env["PYTHONPATH"] = tmp
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    if threads:
        for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
                    "NUMBA_NUM_THREADS"):
            env[var] = str(threads)
    return env


def run_tests(python, tests, tmp, timeout, threads, stop_first=True):
    """Returns (status, ids, seconds): status 'pass', 'fail', 'timeout' or 'error (rc)'."""
    cmd = [python, "-m", "pytest", *tests, "-q", "-p", "no:cacheprovider", "-rfE"]
    if stop_first:
        cmd.insert(4 + len(tests) - 1, "-x")
    t0 = time.time()
    try:
        proc = subprocess.run(cmd, cwd=ROOT, env=child_env(tmp, threads), capture_output=True,
                              text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return "timeout", [], time.time() - t0
    dt = time.time() - t0
    ids = []
    for line in proc.stdout.splitlines():
        m = re.match(r"^(FAILED|ERROR) (\S+)", line)
        if m:
            ids.append(m.group(2) if m.group(1) == "FAILED" else f"{m.group(2)} (error)")
    if proc.returncode == 0:
        return "pass", ids, dt
    if proc.returncode == 1 and ids:
        return "fail", ids, dt
    tail = "\n".join((proc.stdout + proc.stderr).splitlines()[-15:])
    return f"error (rc {proc.returncode})", ids or [tail], dt


def check_import(python, tmp):
    out = subprocess.run([python, "-c", "import privci, os; print(os.path.realpath("
                          "privci.__file__))"], cwd=ROOT, env=child_env(tmp, 1),
                         capture_output=True, text=True)
    where = out.stdout.strip()
    if not where.startswith(os.path.realpath(tmp)):
        raise SystemExit(f"the copy is not the privci imported (got {where!r}; stderr "
                         f"{out.stderr.strip()[-300:]})")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tests", nargs="+", default=None,
                    help="test files or node ids (paths from the repository root) for every "
                         "mutant; default: each mutant's own tests (its note), else "
                         f"{' '.join(DEFAULT_TESTS)}")
    ap.add_argument("--only", nargs="+", help="mutant ids to run (default: all)")
    ap.add_argument("--issue-only", action="store_true", help="only issue 21's mutants")
    ap.add_argument("--timeout", type=float, default=1200.0, help="seconds per mutant run")
    ap.add_argument("--python", default=sys.executable, help="interpreter with pytest")
    ap.add_argument("--threads", type=int, default=1,
                    help="BLAS / numba threads of the test runs (0: leave the environment)")
    ap.add_argument("--all-failures", action="store_true",
                    help="run without -x and list every failing test")
    ap.add_argument("--no-baseline", action="store_true", help="skip the unmutated run")
    ap.add_argument("--list", action="store_true", help="list the mutants and exit")
    ap.add_argument("--check", action="store_true",
                    help="only check that every pattern still matches")
    ap.add_argument("--keep", action="store_true", help="keep the temporary directory")
    ap.add_argument("--package", default=PACKAGE,
                    help="the privci package directory to copy and mutate (default "
                         "python/privci; e.g. a `git archive HEAD python/privci` export while "
                         "the working tree holds someone else's unfinished change)")
    args = ap.parse_args(argv)

    mutants = MUTANTS
    if args.issue_only:
        mutants = [m for m in mutants if m.issue]
    if args.only:
        unknown = set(args.only) - {m.id for m in MUTANTS}
        if unknown:
            raise SystemExit(f"unknown mutant ids: {sorted(unknown)}")
        mutants = [m for m in mutants if m.id in args.only]
    if args.list:
        for m in mutants:
            print(f"{m.id:28s} {m.file:14s} {m.description}")
        return 0

    tmp = tempfile.mkdtemp(prefix="privci-mutate-")
    try:
        for m in mutants:    # every pattern must match before anything runs
            apply(m, fresh_copy(tmp, args.package))
        if args.check:
            print(f"all {len(mutants)} patterns match")
            return 0
        fresh_copy(tmp, args.package)
        check_import(args.python, tmp)

        def tests_of(m):
            return list(args.tests or m.tests or DEFAULT_TESTS)

        if not args.no_baseline:
            baseline = list(dict.fromkeys(t for m in mutants for t in tests_of(m)))
            status, ids, dt = run_tests(args.python, baseline, tmp, args.timeout,
                                        args.threads, not args.all_failures)
            print(f"baseline (unmutated copy): {status} in {dt:.0f} s", flush=True)
            if status != "pass":
                print("\n".join(ids))
                raise SystemExit("the unmutated package fails the tests: fix that first")
        rows = []
        for m in mutants:
            fresh_copy(tmp, args.package)
            apply(m, os.path.join(tmp, "privci"))
            status, ids, dt = run_tests(args.python, tests_of(m), tmp, args.timeout,
                                        args.threads, not args.all_failures)
            if status == "fail":
                verdict = "caught by " + ", ".join(f"`{i}`" for i in ids)
            elif status == "pass":
                verdict = "**NOT CAUGHT**"
            elif status == "timeout":
                verdict = f"**TIMEOUT** after {args.timeout:.0f} s"
            else:
                verdict = f"**{status}**: " + " ".join(ids)[-300:].replace("\n", " ")
            rows.append((m, verdict, dt))
            print(f"{m.id}: {verdict} ({dt:.0f} s)", flush=True)
        print()
        print(f"Tests: {' '.join(args.tests) if args.tests else 'each mutant its own (note), else ' + ' '.join(DEFAULT_TESTS)}")
        print()
        print("| mutant | file | what | tests run | result | time |")
        print("|---|---|---|---|---|---|")
        for m, verdict, dt in rows:
            run = "given" if args.tests else ("note" if m.tests else "default")
            print(f"| {m.id}{'' if m.issue else ' (extra)'} | {m.file} | {m.description} | "
                  f"{run} | {verdict} | {dt:.0f} s |")
        missed = [m.id for m, v, _ in rows if not v.startswith("caught")]
        print()
        print("every mutant caught" if not missed else f"NOT caught: {', '.join(missed)}")
        return 1 if missed else 0
    finally:
        if args.keep:
            print(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
