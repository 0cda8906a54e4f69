#!/bin/sh
# dtrain --comm nccl (the DP gradient all-reduce with NCCL on device buffers).
#   comm_nccl.sh refuses DTRAIN   where there is no GPU: refused with the reason, exit 2, before
#                                 any training (77 where a GPU is present: the other mode runs)
#   comm_nccl.sh matches DTRAIN MPIRUN   on a GPU: one rank with NCCL ends with the same
#                                 params_crc32 as without (a one-rank all-reduce is a copy); with
#                                 two GPUs or more, DP 2 over NCCL ends with the losses and
#                                 gradient norms of DP 2 over MPI host staging (1e-5 relative)
mode=$1 dtrain=$2 mpirun=$3
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
gpus=${gpus:-0}
tmp=$(mktemp -d /tmp/dtrain_nccl_XXXXXX)
trap 'rm -rf "$tmp"' EXIT
if [ "$mode" = refuses ]; then
  [ "$gpus" -ge 1 ] && exit 77
  "$dtrain" --device cuda --comm nccl --steps 2 --log-json "$tmp/log" 2>"$tmp/err"; rc=$?
  [ $rc -eq 2 ] || { echo "expected exit 2, got $rc"; cat "$tmp/err"; exit 1; }
  grep -q 'NCCL needs one GPU per rank\|this build has no NCCL\|needs --device cuda' "$tmp/err" || { cat "$tmp/err"; exit 1; }
  [ ! -s "$tmp/log" ] || { echo "a step was logged before the refusal"; exit 1; }
  "$dtrain" --device cuda --comm nccl --zero 1 --steps 2 2>"$tmp/err"; [ $? -eq 2 ] || exit 1
  grep -q -- '--zero 0' "$tmp/err" || { cat "$tmp/err"; exit 1; }
  exit 0
fi
[ "$gpus" -ge 1 ] || exit 77
crc() { tail -n 1 "$1" | sed -n 's/.*"params_crc32": *\([0-9]*\).*/\1/p'; }
"$dtrain" --device cuda --steps 3 --log-json "$tmp/a" 2>/dev/null || exit 1
"$dtrain" --device cuda --comm nccl --steps 3 --log-json "$tmp/b" 2>"$tmp/err" || { cat "$tmp/err"; exit 1; }
a=$(crc "$tmp/a"); b=$(crc "$tmp/b")
echo "one rank: params_crc32 $a (staged) $b (NCCL)"
[ -n "$a" ] && [ "$a" = "$b" ] || exit 1
[ "$gpus" -ge 2 ] || exit 0
common="--device cuda --dp 2 --global-batch 16 --micro-batch 4 --steps 5"
"$mpirun" --allow-run-as-root --oversubscribe -np 2 "$dtrain" $common --log-json "$tmp/m" 2>/dev/null || exit 1
"$mpirun" --allow-run-as-root --oversubscribe -np 2 "$dtrain" $common --comm nccl --log-json "$tmp/n" 2>"$tmp/err" || { cat "$tmp/err"; exit 1; }
# step lines: "loss" and "grad_norm" of each, side by side, equal to 1e-5 relative
field() { sed -n "s/.*\"$2\": *\([-0-9.eE+]*\).*/\1/p" "$1"; }
for k in loss grad_norm; do
  field "$tmp/m" $k > "$tmp/m.$k"; field "$tmp/n" $k > "$tmp/n.$k"
  [ -s "$tmp/m.$k" ] || exit 1
  paste "$tmp/m.$k" "$tmp/n.$k" | awk -v k=$k '{ d = $1 - $2; if (d < 0) d = -d; a = $1 < 0 ? -$1 : $1;
    if (NF != 2 || d > 1e-5 * a) { print k " differs on line " NR ": " $1 " (MPI) vs " $2 " (NCCL)"; bad = 1 } }
    END { exit bad }' || exit 1
done
echo "DP 2: losses and gradient norms over NCCL equal MPI's to 1e-5"
