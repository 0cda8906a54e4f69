#!/usr/bin/env bash
# A sweep too large for one machine: the points dealt out over MPI ranks (rank K computes the
# points i with i % N == K), then gathered into the same sweep.json / sweep.csv a local run writes.
#   scripts/sweep_mpirun.sh NP SCENARIO --vary ... [--out DIR] [other dtsim sweep options]
# mpirun places the ranks (add your hostfile through MPIRUN_ARGS); DIR must be on a shared
# filesystem when the ranks run on several machines.
set -euo pipefail
np=$1; shift
root=$(cd "$(dirname "$0")/.." && pwd)
dtsim=${DTSIM:-$root/build/bin/dtsim}
out=sweep-out
args=("$@")
for ((i = 0; i < ${#args[@]}; i++)); do [ "${args[$i]}" = "--out" ] && out=${args[$((i + 1))]}; done
mkdir -p "$out"
rm -f "$out"/part-*-of-*.json
mpirun ${MPIRUN_ARGS:-} -np "$np" sh -c \
  "exec '$dtsim' sweep \"\$@\" --shard \${OMPI_COMM_WORLD_RANK:-\${PMI_RANK:-0}}/$np" dtsim-sweep "${args[@]}"
"$dtsim" sweep "${args[@]}" --merge
