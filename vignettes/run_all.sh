#!/bin/sh
# Run the vignettes one after the other, niced, logging wall and CPU time.
#   vignettes/run_all.sh DATA_CSV [--quick] [figure numbers, or rff...]
# e.g. vignettes/run_all.sh ../shared/data/concrete.csv --quick        (CI: all, quick)
#      vignettes/run_all.sh ../shared/data/concrete.csv 5 1 2          (full runs of 5, 1, 2)
#      WORKERS=2 vignettes/run_all.sh ../shared/data/concrete.csv      (on a 2-worker Dask cluster)
set -e
here=$(cd "$(dirname "$0")" && pwd)
py=${PYTHON:-python3}
data=$1; shift
quick=""
if [ "$1" = "--quick" ]; then quick="--quick"; shift; fi
figs=${*:-1 2 3 4 5 6 rff auto causal bias spline defaults stress readme power docs}
for f in $figs; do
  case $f in
    1) script=fig1_type1_vs_s.py; extra="";;
    2) script=fig2_privgcm_vs_gcm.py; extra="";;
    3) script=fig3_privcrt_vs_crt.py; extra="";;
    4) script=fig4_power_vs_epsilon.py; extra="";;
    5) script=fig5_concrete.py; extra="$data";;
    6) script=fig6_privcrt_m_and_pvalues.py; extra="";;
    rff) script=rff_vs_exact.py; extra="";;
    auto) script=auto_bounds.py; extra="--data $data";;
    causal) script=causal_pc.py; extra="$data";;
    bias) script=level_bias.py; extra="";;
    spline) script=spline_acceptance.py; extra="";;
    defaults) script=defaults_vs_paper.py; extra="$data";;
    stress) script=level_stress.py; extra="";;
    readme) script=readme_power.py; extra="";;
    power) script=power_decomposition.py; extra="";;
    docs) script=docs_examples_power.py; extra="";;
    *) echo "unknown figure $f" >&2; exit 2;;
  esac
  echo "== figure $f: $script $quick $(date -u +%H:%M:%S)"
  /usr/bin/env time -f "== figure $f: wall %e s, user %U s, sys %S s" \
    nice -n 10 "$py" "$here/$script" $extra $quick --no-progress --workers "${WORKERS:-0}"
done
