#!/bin/sh
# dtrain --comm nccl (TP, DP/ZeRO and tied-embedding collectives with NCCL on device buffers).
#   comm_nccl.sh refuses DTRAIN   where there is no GPU: refused with the reason, exit 2, before
#                                 any training (77 where a GPU is present: the other mode runs)
#   comm_nccl.sh matches DTRAIN MPIRUN   on a GPU: one rank with NCCL ends with the same
#                                 params_crc32 as without, ZeRO 0 and 1 (one-rank collectives are
#                                 copies); with two GPUs or more, DP 2 under each ZeRO stage and
#                                 TP 2, CP 2 in its three forms, DP 2 x EP 2 under each ZeRO stage
#                                 (and with four, TP 2 x PP 2, DP 4 ZeRO-3, CP 2 x DP 2 ZeRO-1, DP 4
#                                 x EP 2 under ZeRO 1-3 and TP 2 x CP 2 x EP 2, and a DP 4 x EP 2
#                                 ZeRO-3 run resumed from its checkpoint bit-exact) over NCCL end
#                                 with the losses and gradient norms of the same layout over MPI
#                                 (1e-5 relative; with two ranks, the same params_crc32)
#   comm_nccl.sh standin DTRAIN MPIRUN   DTRAIN built against tests/engine/nccl_standin (NCCL's
#                                 calls done by MPI on host memory): the same comparisons on the
#                                 CPU backend, no GPU needed
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
  "$dtrain" --device cuda --comm nccl --grad-reduce bf16 --steps 2 2>"$tmp/err"; [ $? -eq 2 ] || exit 1
  grep -q -- '--grad-reduce fp32 (got bf16)' "$tmp/err" || { cat "$tmp/err"; exit 1; }
  exit 0
fi
device=cuda
if [ "$mode" = standin ]; then device=cpu; gpus=4; fi
[ "$gpus" -ge 1 ] || exit 77
crc() { tail -n 1 "$1" | sed -n 's/.*"params_crc32": *"*\([0-9a-f]*\).*/\1/p'; }
for zero in 0 1; do
  "$dtrain" --device $device --zero $zero --steps 3 --log-json "$tmp/a" 2>"$tmp/err" || { cat "$tmp/err"; exit 1; }
  "$dtrain" --device $device --zero $zero --comm nccl --steps 3 --log-json "$tmp/b" 2>"$tmp/err" || { cat "$tmp/err"; exit 1; }
  a=$(crc "$tmp/a"); b=$(crc "$tmp/b")
  echo "one rank, ZeRO $zero: params_crc32 $a (staged) $b (NCCL)"
  [ -n "$a" ] && [ "$a" = "$b" ] || exit 1
done
[ "$gpus" -ge 2 ] || exit 0
# step lines: "loss" and "grad_norm" of each, side by side, equal to 1e-5 relative
field() { sed -n "s/.*\"$2\": *\([-0-9.eE+]*\).*/\1/p" "$1"; }
same_as_mpi() { # NP LAYOUT...
  np=$1; shift
  common="--device $device --global-batch 16 --micro-batch 2 --steps 5 $*"
  "$mpirun" --allow-run-as-root --oversubscribe -np $np "$dtrain" $common --log-json "$tmp/m" 2>"$tmp/err" || { cat "$tmp/err"; exit 1; }
  "$mpirun" --allow-run-as-root --oversubscribe -np $np "$dtrain" $common --comm nccl --log-json "$tmp/n" 2>"$tmp/err" || { cat "$tmp/err"; exit 1; }
  for k in loss grad_norm; do
    field "$tmp/m" $k > "$tmp/m.$k"; field "$tmp/n" $k > "$tmp/n.$k"
    [ -s "$tmp/m.$k" ] || exit 1
    paste "$tmp/m.$k" "$tmp/n.$k" | awk -v k=$k '{ d = $1 - $2; if (d < 0) d = -d; a = $1 < 0 ? -$1 : $1;
      if (NF != 2 || d > 1e-5 * a) { print k " differs on line " NR ": " $1 " (MPI) vs " $2 " (NCCL)"; bad = 1 } }
      END { exit bad }' || exit 1
  done
  # a sum of two floats is the same in any order: with two ranks the parameters must be identical
  if [ "$np" -eq 2 ]; then
    a=$(crc "$tmp/m"); b=$(crc "$tmp/n")
    [ -n "$a" ] && [ "$a" = "$b" ] || { echo "$*: params_crc32 $a (MPI) vs $b (NCCL)"; exit 1; }
  fi
  echo "$*: losses and gradient norms over NCCL equal MPI's to 1e-5"
}
for zero in 0 1 2 3; do same_as_mpi 2 --dp 2 --zero $zero; done
same_as_mpi 2 --tp 2
# context parallelism: its gradients over NCCL with the replicas', its all-gather form on the
# device, ring attention's steps and the all-to-all form's exchanges over MPI beside them
same_as_mpi 2 --cp 2
same_as_mpi 2 --cp 2 --cp-comm-type all_gather
same_as_mpi 2 --cp 2 --cp-comm-type a2a
# expert parallelism: each kind's gradients and shards over its own group (dense over DP, experts
# over expert-DP) on the device, the tokens' all-to-alls over MPI; a model with experts
echo '{"num_layers": 4, "hidden_size": 64, "num_attention_heads": 4, "seq_length": 32, "num_experts": 4,
       "moe_router_topk": 2}' > "$tmp/moe.json"
moe="--model $tmp/moe.json --moe-aux-loss-coeff 0.01"
for zero in 0 1 2 3; do same_as_mpi 2 --dp 2 --ep 2 --zero $zero $moe; done
[ "$gpus" -ge 4 ] || exit 0
same_as_mpi 4 --tp 2 --pp 2
same_as_mpi 4 --dp 4 --zero 3
same_as_mpi 4 --cp 2 --dp 2 --zero 1 --cp-comm-type all_gather
# EP 2 of DP 4: the expert-DP groups are pairs, the dense group all four
same_as_mpi 4 --dp 4 --ep 2 --zero 1 $moe
same_as_mpi 4 --dp 4 --ep 2 --zero 2 $moe
same_as_mpi 4 --dp 4 --ep 2 --zero 3 $moe
same_as_mpi 4 --tp 2 --cp 2 --ep 2 --sequence-parallel $moe
# a checkpoint of an EP run over NCCL (its packed ZeRO-3 shards) resumes bit-exact
common="--device $device --global-batch 16 --micro-batch 2 --steps 6 --dp 4 --ep 2 --zero 3 --comm nccl $moe"
"$mpirun" --allow-run-as-root --oversubscribe -np 4 "$dtrain" $common --log-json "$tmp/full" 2>"$tmp/err" || { cat "$tmp/err"; exit 1; }
"$mpirun" --allow-run-as-root --oversubscribe -np 4 "$dtrain" $common --ckpt-dir "$tmp/ck" --ckpt-every 3 --stop-after 3 \
  2>"$tmp/err" || { cat "$tmp/err"; exit 1; }
"$mpirun" --allow-run-as-root --oversubscribe -np 4 "$dtrain" $common --ckpt-dir "$tmp/ck" --resume --log-json "$tmp/res" \
  2>"$tmp/err" || { cat "$tmp/err"; exit 1; }
a=$(crc "$tmp/full"); b=$(crc "$tmp/res")
# a --resume that found no checkpoint would train from step 1 and end alike: the step-3 one must
# be there and the resumed run's first logged step must be 4
first=$(head -n 1 "$tmp/res" | sed -n 's/^{"step": *\([0-9]*\).*/\1/p')
echo "DP 4 x EP 2 ZeRO-3 over NCCL, resumed from the step-3 checkpoint (first step logged: ${first:-none}): params_crc32 $b, uninterrupted $a"
[ -d "$tmp/ck/step-00000003" ] && [ "$first" = 4 ] || { echo "not resumed from the step-3 checkpoint"; exit 1; }
[ -n "$a" ] && [ "$a" = "$b" ] || exit 1
