"""Shared helpers of the benchmark scripts (not a test module).

Memory is measured from the kernel's own accounting, which sees every
allocation (numpy, numba, LAPACK workspaces, OpenBLAS buffers):
``/proc/self/clear_refs`` <- "5" resets the peak resident set size
(``VmHWM``) of this process to its current RSS; after the measured call the
peak allocation of the call is ``VmHWM - VmRSS(before)``.  Freed large blocks
are returned to the OS by glibc (mmap threshold), so the baseline is clean.
Each sample size runs in a fresh subprocess so earlier sizes leave no heap,
with ``MALLOC_MMAP_THRESHOLD_=65536``: glibc then serves every block above
64 KiB by mmap and unmaps it on free (without it, glibc's dynamic threshold
moves freed n x n blocks to the heap and a second call would reuse them
without raising the peak, hiding its allocations).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time


def status_kb(field):
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise KeyError(field)


def reset_peak():
    """Reset VmHWM to the current RSS; returns False where the kernel does not allow it."""
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
        return True
    except OSError:
        return False


def measure(fn, reps):
    """(min wall seconds over reps, peak extra bytes of the first call, first result)."""
    ok = reset_peak()
    base = status_kb("VmRSS")
    t0 = time.perf_counter()
    out = fn()
    best = time.perf_counter() - t0
    peak = (status_kb("VmHWM") - base) * 1024 if ok else float("nan")
    for _ in range(reps - 1):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best, peak, out


def run_worker(script, args, env=None):
    """Run ``script --worker args`` in a fresh interpreter, return its JSON output."""
    cmd = [sys.executable, script, "--worker", *map(str, args)]
    env = dict(os.environ if env is None else env)
    env.setdefault("MALLOC_MMAP_THRESHOLD_", "65536")
    res = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if res.returncode != 0:
        raise RuntimeError(f"worker {args} failed:\n{res.stderr[-3000:]}")
    return json.loads(res.stdout.strip().splitlines()[-1])


def machine_note():
    la = os.getloadavg()
    ncpu = len(os.sched_getaffinity(0))
    return (f"{ncpu} usable cores; load average {la[0]:.2f} / {la[1]:.2f} / {la[2]:.2f} "
            "(1 / 5 / 15 min): other processes share the CPU, so absolute times are "
            "inflated; ratios are taken within one process, interleaved, min over repeats")


def vignettes_dir():
    """Where the tables and plots go: vignettes/, or $PRIVCI_BENCH_OUT (CI smoke runs)."""
    here = os.path.dirname(os.path.abspath(__file__))
    out = os.environ.get("PRIVCI_BENCH_OUT") or os.path.abspath(os.path.join(here, "..", "..", "vignettes"))
    os.makedirs(out, exist_ok=True)
    return out


def finish_loglog(fig, ax, path, title, legend_fontsize=8):
    """Label a wall-time-against-n log-log plot and save it."""
    ax.set_xlabel("n")
    ax.set_ylabel("wall time (s)")
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=legend_fontsize)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
