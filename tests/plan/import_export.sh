#!/usr/bin/env bash
# dtsim import / export against configurations written as the frameworks document them
# (tests/plan/data: Megatron-LM's GPT-3 175B example arguments, Hugging Face config.json files of
# Llama 3 8B and 70B, Mixtral 8x7B and GPT-2, a DeepSpeed ZeRO-3 config with CPU offload): the
# scenarios and model files they give, the arguments listed as ignored, the round trip export ->
# import over every shipped scenario with a Megatron form (the others named with the reason), and
# malformed input refused naming the argument or key.
#   import_export.sh DTSIM REPO_ROOT
set -u
dtsim=$1 root=$2
data=$root/tests/plan/data
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail=0
cd "$root" || exit 1
# Megatron-LM: the GPT-3 175B example
# shellcheck disable=SC2046
"$dtsim" import megatron --platform platforms/dgx-a100-superpod.json -o "$work/g3.json" -- \
  $(cat "$data/gpt3-175b-megatron.args") 2>"$work/err" || { cat "$work/err"; fail=1; }
python3 - "$work/g3.json" <<'PY' || fail=1
import json, sys
d = json.load(open(sys.argv[1]))
m, t, p = d["model"], d["training"], d["parallel"]
ok = (m["num_layers"], m["hidden_size"], m["num_attention_heads"], m["seq_length"]) == (96, 12288, 96, 2048)
ok &= m["vocab_size"] == 51200                     # 50,257 padded to 128 x TP 8 = 1024
ok &= (p["tensor_model_parallel_size"], p["pipeline_model_parallel_size"], p["data_parallel_size"]) == (8, 16, 8)
ok &= p["zero_stage"] == 0 and t["precision"] == "fp16" and t["train_iters"] == 500000 and p["framework"] == "megatron"
ok &= (t["micro_batch_size"], t["global_batch_size"]) == (1, 1536)
print("megatron GPT-3 175B:", "ok" if ok else f"WRONG {d}")
sys.exit(0 if ok else 1)
PY
for a in pretrain_gpt.py --lr --data-path --rampup-batch-size --save; do
  grep -q -- "$a" "$work/err" || { echo "not listed as ignored: $a"; fail=1; }
done
"$dtsim" run "$work/g3.json" >/dev/null 2>&1 || { echo "imported GPT-3 does not run"; fail=1; }
# --overlap-p2p-communication under the non-interleaved schedule: Megatron-LM sets it false
# (arguments.py), so it is listed as ignored and the scenario runs with blocking transfers
# shellcheck disable=SC2046
"$dtsim" import megatron --platform platforms/dgx-a100-superpod.json -o "$work/g3p.json" -- \
  $(cat "$data/gpt3-175b-megatron.args") --overlap-p2p-communication 2>"$work/err" &&
  grep -q -- "--overlap-p2p-communication (Megatron-LM overlaps transfers only under the interleaved" "$work/err" &&
  ! grep -q overlap_p2p_comm "$work/g3p.json" && "$dtsim" run "$work/g3p.json" >/dev/null 2>&1 ||
  { echo "import megatron: --overlap-p2p-communication under 1F1B kept: $(cat "$work/err")"; fail=1; }
# under the interleaved schedule Megatron-LM overlaps them unless told not to (since 2023-10)
for no in "" --no-overlap-p2p-communication; do
  # shellcheck disable=SC2046,SC2086
  "$dtsim" import megatron --platform platforms/dgx-a100-superpod.json -o "$work/g3v.json" -- \
    $(cat "$data/gpt3-175b-megatron.args") --virtual-pipeline-model-parallel-size 2 $no 2>/dev/null ||
    { echo "import megatron: interleaved GPT-3 refused"; fail=1; }
  want=$([ -z "$no" ] && echo True || echo False)
  got=$(python3 -c 'import json,sys; p = json.load(open(sys.argv[1]))["parallel"]; print(p["schedule"], p.get("overlap_p2p_comm"))' "$work/g3v.json")
  [ "$got" = "interleaved $want" ] || { echo "import megatron: interleaved ${no:-(no flag)}: $got, not interleaved $want"; fail=1; }
done
# round trip over the shipped scenarios (and the 405B layout with the distributed optimizer)
declare -A refused=(
  [gpt2-xl-dp32-powersgd]="parallel.grad_compression" [gpt3-13b-1gpu-zero-offload]="parallel.zero_stage"
  [gpt3-2.7b-32-a100-ps]="parameter_server" [llama3-405b-16k-h100]="parallel.zero_stage"
  [llama3-405b-54d-faults]="parallel.zero_stage")
roundtrip() { # scenario, extra --set
  local f=$1 set=$2 name plat
  name=$(basename "$f" .json)
  # a platform {"from": FILE, ...} imports against FILE, then the scenario's own object replaces it
  plat=$(python3 -c 'import json,sys; p = json.load(open(sys.argv[1]))["platform"]; print(p["from"] if isinstance(p, dict) else p)' "$f")
  # shellcheck disable=SC2086
  if ! "$dtsim" export megatron "$f" $set >"$work/args" 2>"$work/err"; then
    if [ -z "$set" ] && [ -n "${refused[$name]:-}" ] && grep -q "${refused[$name]}" "$work/err"; then
      echo "$name: no Megatron form ($(cut -c1-90 "$work/err"))"; return 0
    fi
    echo "$name $set: export refused: $(cat "$work/err")"; return 1
  fi
  # shellcheck disable=SC2046
  "$dtsim" import megatron --platform "$plat" -o "$work/rt.json" -- $(cat "$work/args") 2>/dev/null || return 1
  python3 - "$f" "$work/rt.json" <<'PY' || return 1
import json, sys
p = json.load(open(sys.argv[1]))["platform"]
if isinstance(p, dict):
    rt = json.load(open(sys.argv[2]))
    rt["platform"] = p
    json.dump(rt, open(sys.argv[2], "w"))
PY
  # shellcheck disable=SC2086
  "$dtsim" run "$f" $set --json "$work/a.json" >/dev/null 2>&1
  "$dtsim" run "$work/rt.json" --json "$work/b.json" >/dev/null 2>&1
  python3 - "$work/a.json" "$work/b.json" "$name $set" <<'PY'
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
keys = ("step_time_s", "mfu", "gpus", "bubble_fraction", "comm_s")
ok = all(a[k] == b[k] for k in keys) and a["memory_gib"]["total"] == b["memory_gib"]["total"]
ok &= a.get("time_to_train") == b.get("time_to_train")
print(f"{sys.argv[3]}: round trip {'the same step' if ok else 'DIFFERS'} ({a['step_time_s']} s)")
sys.exit(0 if ok else 1)
PY
}
for f in scenarios/*.json; do roundtrip "$f" "" || fail=1; done
roundtrip scenarios/llama3-405b-16k-h100.json "--set parallel.zero_stage=1" || fail=1
# full recomputation with its kept inputs split over TP: --distribute-saved-activations
roundtrip scenarios/gpt3-175b-1024-a100.json "--set training.recompute_granularity=\"full\" --set parallel.sequence_parallel=false --set training.distribute_saved_activations=true" || fail=1
# ZeRO-3 as Megatron-FSDP (framework megatron): --use-megatron-fsdp and its sharding strategy
roundtrip scenarios/gpt3-175b-1024-a100.json "--set parallel.framework=\"megatron\" --set parallel.zero_stage=3" || fail=1
# FP8 with current scaling: --fp8-format and --fp8-recipe carry it (delayed scaling is another step)
roundtrip scenarios/llama3-405b-16k-h100.json \
  "--set parallel.zero_stage=1 --set training.precision=fp8 --set training.fp8_recipe=tensorwise" || fail=1
# MoE with the flex dispatcher and node-limited routing: --moe-token-dispatcher-type and
# --moe-router-num-groups / --moe-router-group-topk carry them
roundtrip scenarios/qwen3-235b-a22b-256-h100.json "--set parallel.moe_token_dispatcher_type=\"flex\" \
  --set model.moe_router_num_groups=4 --set model.moe_router_group_topk=2" || fail=1
# Hugging Face: the model files of models/ come back from the released configs
for m in llama3-8b llama3-70b mixtral-8x7b qwen3-30b-a3b; do
  "$dtsim" import hf "$data/$m-config.json" -o "$work/$m.json" 2>/dev/null || fail=1
  python3 -c 'import json,sys; a=json.load(open(sys.argv[1]))["model"]; b=json.load(open(sys.argv[2]))["model"];
sys.exit(0 if a == b else print("hf", sys.argv[2], a, b) or 1)' "$work/$m.json" "models/$m.json" || fail=1
done
"$dtsim" import hf "$data/gpt2-config.json" --seq-length 512 -o "$work/gpt2.json" 2>/dev/null || fail=1
python3 -c 'import json,sys; m=json.load(open(sys.argv[1]))["model"];
sys.exit(0 if (m["num_layers"], m["hidden_size"], m["seq_length"], m["untie_embeddings_and_output_weights"],
  m["position_embedding_type"]) == (12, 768, 512, False, "learned_absolute") else 1)' "$work/gpt2.json" || fail=1
# DeepSpeed: ZeRO-3 with CPU offload, DeepSpeed's batch rule
"$dtsim" import deepspeed "$data/ds-zero3-offload.json" --model models/llama2-7b.json --gpus 16 -o "$work/ds.json" \
  2>"$work/err" || { cat "$work/err"; fail=1; }
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); p,t=d["parallel"],d["training"];
ok = (p["zero_stage"], p["offload_optimizer"], p["offload_parameters"], p["data_parallel_size"], p["overlap_grad_reduce"]) == (3, "cpu", "cpu", 16, True)
ok &= p["framework"] == "deepspeed" and "pipeline_engine" not in p and "grad_reduce_dtype" not in p
ok &= (t["global_batch_size"], t["micro_batch_size"], t["precision"]) == (128, 4, "bf16") and p["stage3_max_live_parameters"] == 1e9
ok &= p["stage3_max_reuse_distance"] == 5e8
sys.exit(0 if ok else print("deepspeed", d) or 1)' "$work/ds.json" || fail=1
grep -q 'stage3_gather_16bit_weights_on_model_save' "$work/err" || { echo "deepspeed: ignored keys not listed"; fail=1; }
grep -q 'stage3_max_reuse_distance' "$work/err" && { echo "deepspeed: an imported key listed as ignored"; fail=1; }
"$dtsim" run "$work/ds.json" >/dev/null 2>&1 || { echo "imported DeepSpeed scenario does not run"; fail=1; }
# malformed input: exit 2, the argument or key named
refuse() { # expected-text, command...
  local want=$1; shift
  "$@" >/dev/null 2>"$work/err"; local rc=$?
  [ "$rc" -eq 2 ] && grep -q -- "$want" "$work/err" || { echo "not refused ($rc): $* -> $(cat "$work/err")"; fail=1; }
}
refuse "--num-layers" "$dtsim" import megatron --gpus 8 -- --num-layers abc --hidden-size 64 --num-attention-heads 4
moe="--num-layers 2 --hidden-size 64 --num-attention-heads 4 --vocab-size 256 --seq-length 32 --num-experts 8 --moe-router-topk 2
  --micro-batch-size 1"
# Megatron-LM's batch rule: --micro-batch-size is required; --global-batch-size defaults to one
# micro-batch per data-parallel rank (8 here), and an invalid scenario is never written
# shellcheck disable=SC2086
refuse "--micro-batch-size is required" "$dtsim" import megatron --gpus 8 -- ${moe% --micro-batch-size 1}
# shellcheck disable=SC2086
"$dtsim" import megatron --gpus 8 -o "$work/gbs.json" -- $moe 2>"$work/err" &&
  python3 -c 'import json,sys; sys.exit(json.load(open(sys.argv[1]))["training"]["global_batch_size"] != 8)' \
    "$work/gbs.json" && grep -q "no --global-batch-size" "$work/err" ||
  { echo "import megatron without --global-batch-size: not micro x DP"; cat "$work/err"; fail=1; }
rm -f "$work/seq0.json"
# shellcheck disable=SC2086
refuse "the scenario it would write is refused: scenario.model.seq_length" \
  "$dtsim" import megatron --gpus 8 -o "$work/seq0.json" -- $moe --seq-length 0
[ ! -e "$work/seq0.json" ] || { echo "import megatron wrote a scenario it refuses"; fail=1; }
# shellcheck disable=SC2086
refuse "dtsim models alltoall and flex" "$dtsim" import megatron --gpus 8 -- $moe --moe-token-dispatcher-type allgather
# shellcheck disable=SC2086
refuse "needs --moe-router-num-groups" "$dtsim" import megatron --gpus 8 -- $moe --moe-token-dispatcher-type alltoall \
  --moe-router-group-topk 1
# shellcheck disable=SC2086
"$dtsim" import megatron --gpus 8 -o "$work/moe.json" -- $moe 2>"$work/err" && grep -q "default, allgather" "$work/err" &&
  grep -q '"moe_token_dispatcher_type": "alltoall"' "$work/moe.json" ||
  { echo "import megatron without a dispatcher: no allgather note"; cat "$work/err"; fail=1; }
refuse "--vocab-size is required" "$dtsim" import megatron --gpus 8 -- --num-layers 2 --hidden-size 64 \
  --num-attention-heads 4 --seq-length 32 --tokenizer-type HuggingFaceTokenizer
refuse "not a multiple" "$dtsim" import megatron --gpus 12 -- --num-layers 2 --hidden-size 64 --num-attention-heads 4 \
  --seq-length 32 --vocab-size 256 --tensor-model-parallel-size 8
printf '{"architectures": ["BertModel"], "hidden_size": 768}\n' >"$work/bert.json"
refuse "BertModel" "$dtsim" import hf "$work/bert.json"
python3 -c 'import json; c=json.load(open("'"$data"'/llama3-8b-config.json")); del c["hidden_size"]; json.dump(c, open("'"$work"'/nohidden.json","w"))'
refuse '"hidden_size" is required' "$dtsim" import hf "$work/nohidden.json"
python3 -c 'import json; c=json.load(open("'"$data"'/qwen3-30b-a3b-config.json")); c["mlp_only_layers"]=[0]; json.dump(c, open("'"$work"'/mixed.json","w"))'
refuse "mix dense and expert layers" "$dtsim" import hf "$work/mixed.json"
# a config.json the model reader would refuse (or mis-read) is refused at import, naming its key;
# the output file already there is left as it was
hf_bad() { # name, JSON merged into a documented config.json, expected text[, config]
  python3 -c 'import json,sys; c=json.load(open(sys.argv[1])); c.update(json.loads(sys.argv[2])); json.dump(c, open(sys.argv[3],"w"))' \
    "${4:-$data/llama3-8b-config.json}" "$2" "$work/$1.json"
  echo kept >"$work/out.json"
  refuse "$3" "$dtsim" import hf "$work/$1.json" -o "$work/out.json"
  [ "$(cat "$work/out.json")" = kept ] || { echo "import hf $1: the existing output was changed"; fail=1; }
}
hf_bad kv7 '{"num_key_value_heads": 7}' "kv7.json: num_key_value_heads: 7 does not divide num_attention_heads=32"
hf_bad hidden '{"hidden_size": 4097}' "hidden_size: 4097 is not a multiple of num_attention_heads=32 (give head_dim"
hf_bad tie '{"tie_word_embeddings": "yes"}' '"tie_word_embeddings" must be true or false'
hf_bad tie1 '{"tie_word_embeddings": 1}' '"tie_word_embeddings" must be true or false' "$data/gpt2-config.json"
hf_bad embd '{"n_embd": 769}' '"n_embd" 769 is not a multiple of "n_head" 12' "$data/gpt2-config.json"
hf_bad act '{"hidden_act": 7}' '"hidden_act" must be a string'
hf_bad topk '{"num_experts_per_tok": 9}' "num_experts_per_tok: 9 must be in 1..num_local_experts=8" \
  "$data/mixtral-8x7b-config.json"
hf_bad notopk '{"num_experts_per_tok": null}' 'num_local_experts 8 but no "num_experts_per_tok"' \
  "$data/mixtral-8x7b-config.json"
hf_bad step '{"decoder_sparse_step": "1"}' '"decoder_sparse_step" must be a whole number' \
  "$data/qwen3-30b-a3b-config.json"
hf_bad positions '{"max_position_embeddings": 1000000000}' "max_position_embeddings: 1000000000 is outside"
# head_dim gives a head's width where hidden_size is not a multiple of the heads (as transformers)
python3 -c 'import json,sys; c=json.load(open(sys.argv[1])); c.update(hidden_size=4097, head_dim=128); json.dump(c, open(sys.argv[2],"w"))' \
  "$data/llama3-8b-config.json" "$work/headdim.json"
"$dtsim" import hf "$work/headdim.json" -o "$work/headdim-model.json" 2>/dev/null &&
  python3 -c 'import json,sys; m=json.load(open(sys.argv[1]))["model"]; sys.exit(m["kv_channels"] != 128)' \
    "$work/headdim-model.json" || { echo "import hf: hidden_size 4097 with head_dim 128 refused"; fail=1; }
# --kv-channels: Megatron's head width survives import and export
"$dtsim" import megatron --gpus 8 -o "$work/kv.json" -- --num-layers 2 --hidden-size 2048 --num-attention-heads 32 \
  --kv-channels 128 --group-query-attention --num-query-groups 4 --seq-length 64 --vocab-size 256 \
  --micro-batch-size 1 --global-batch-size 8 --bf16 2>/dev/null || fail=1
python3 -c 'import json,sys; sys.exit(0 if json.load(open(sys.argv[1]))["model"]["kv_channels"] == 128 else 1)' \
  "$work/kv.json" || { echo "import megatron lost --kv-channels"; fail=1; }
"$dtsim" export megatron "$work/kv.json" 2>/dev/null | grep -q -- "--kv-channels 128" || { echo "export megatron lost --kv-channels"; fail=1; }
python3 -c 'import json; c=json.load(open("'"$data"'/ds-zero3-offload.json")); c["train_batch_size"]=100; json.dump(c, open("'"$work"'/ds_bad.json","w"))'
refuse "DeepSpeed's rule" "$dtsim" import deepspeed "$work/ds_bad.json" --model models/llama2-7b.json --gpus 16
python3 -c 'import json; c=json.load(open("'"$data"'/ds-zero3-offload.json")); c["zero_optimization"]["reduce_bucket_size"]="auto"; json.dump(c, open("'"$work"'/ds_auto.json","w"))'
refuse "zero_optimization.reduce_bucket_size is \"auto\"" "$dtsim" import deepspeed "$work/ds_auto.json" \
  --model models/llama2-7b.json --gpus 16
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); d["communication_data_type"]="int4"; json.dump(d,open(sys.argv[2],"w"))' \
  "$data/ds-zero3-offload.json" "$work/ds_dtype.json"
refuse 'communication_data_type "int4"' "$dtsim" import deepspeed "$work/ds_dtype.json" --model models/llama2-7b.json --gpus 16
# what is ignored is listed whole, however long (it was cut at 4,096 characters unsaid): the last of
# 400 unknown keys of a config.json and of 400 unknown Megatron-LM arguments is named
python3 -c 'import json,sys; c=json.load(open(sys.argv[1])); c.update({"unknown_key_%03d" % i: 1 for i in range(400)});
json.dump(c, open(sys.argv[2], "w"))' "$data/llama3-8b-config.json" "$work/hf_many.json"
"$dtsim" import hf "$work/hf_many.json" -o "$work/hf_many_model.json" 2>"$work/err" || fail=1
grep -q "unknown_key_399$" "$work/err" || { echo "import hf: ignored keys cut: $(tail -c 80 "$work/err")"; fail=1; }
# shellcheck disable=SC2046
"$dtsim" import megatron --gpus 8 -o "$work/mg_many.json" -- --num-layers 2 --hidden-size 64 --num-attention-heads 4 \
  --seq-length 32 --vocab-size 256 --micro-batch-size 1 $(seq -f "--unknown-argument-%g" 1 400) 2>"$work/err" || fail=1
grep -q -- "--unknown-argument-400$" "$work/err" || { echo "import megatron: ignored cut: $(tail -c 80 "$work/err")"; fail=1; }
# a value of the wrong type was read as absent or 0: "stage": "3" imported as ZeRO-0, bf16 and fp16
# both enabled as bf16, a fractional batch cut, a negative micro-batch and accumulation written out
ds_variant() { # name, python statement on the config c
  python3 -c 'import json,sys; c=json.load(open(sys.argv[1])); exec(sys.argv[3]); json.dump(c,open(sys.argv[2],"w"))' \
    "$data/ds-zero3-offload.json" "$work/$1.json" "$2"
}
ds_variant ds_stage 'c["zero_optimization"]["stage"]="3"'
ds_variant ds_both 'c["fp16"]={"enabled": True}'
ds_variant ds_enabled 'c["bf16"]={"enabled": "true"}'
ds_variant ds_frac 'c["train_batch_size"]=128.5'
ds_variant ds_neg 'c.update(train_batch_size=16, train_micro_batch_size_per_gpu=-1, gradient_accumulation_steps=-1)'
ds_variant ds_dev 'c["zero_optimization"]["offload_param"]["device"]="gpu"'
ds_variant ds_knob 'c["zero_optimization"]["reduce_bucket_size"]="5e8"'
for v in ds_stage:"zero_optimization.stage must be a whole number in 0..3" \
         ds_both:"bf16.enabled and fp16.enabled together" ds_enabled:"bf16.enabled must be true or false" \
         ds_frac:"train_batch_size must be a whole number" ds_neg:"train_micro_batch_size_per_gpu must be a whole number" \
         ds_dev:"zero_optimization.offload_param.device: none, cpu or nvme" \
         ds_knob:"zero_optimization.reduce_bucket_size must be a number"; do
  refuse "${v#*:}" "$dtsim" import deepspeed "$work/${v%%:*}.json" --model models/llama2-7b.json --gpus 16
done
refuse "pipeline_engine deepspeed (DeepSpeed's engine" "$dtsim" export megatron scenarios/gpt3-175b-1024-a100.json \
  --set 'parallel.pipeline_engine="deepspeed"' --set 'parallel.schedule="1f1b"' \
  --set parallel.virtual_pipeline_model_parallel_size=1 --set parallel.overlap_grad_reduce=false
refuse "parallel.framework deepspeed (DeepSpeed's engine" "$dtsim" export megatron scenarios/gpt3-175b-1024-a100.json \
  --set 'parallel.framework="deepspeed"' --set 'parallel.schedule="1f1b"' \
  --set parallel.virtual_pipeline_model_parallel_size=1 --set parallel.overlap_grad_reduce=false
refuse "parallel.framework fsdp or torchtitan" "$dtsim" export megatron scenarios/gpt3-175b-1024-a100.json \
  --set 'parallel.framework="torchtitan"' --set parallel.zero_stage=3
# activations kept in another width than the precision's change the step (35.6 s against 28.3 s
# for GPT-3 175B at 4 bytes under fp16): Megatron-LM has no argument for it, so the line is refused
refuse "training.activation_bytes" "$dtsim" export megatron scenarios/gpt3-175b-1024-a100.json \
  --set training.activation_bytes=4
"$dtsim" export megatron scenarios/gpt3-175b-1024-a100.json --set training.activation_bytes=2 >/dev/null 2>&1 ||
  { echo "export: activation_bytes equal to the precision's refused"; fail=1; }
# Megatron-FSDP as Megatron-LM's own example launches it: the default strategy is ZeRO-3, whose
# parameter gather overlaps by Megatron-FSDP's own prefetch (--overlap-param-gather dropped, listed)
fsdp_args="--num-layers 4 --hidden-size 1024 --num-attention-heads 16 --seq-length 2048 --vocab-size 32000
  --micro-batch-size 1 --global-batch-size 64 --bf16 --use-distributed-optimizer --overlap-grad-reduce
  --overlap-param-gather --use-megatron-fsdp --ckpt-format fsdp_dtensor"
# shellcheck disable=SC2086
"$dtsim" import megatron --gpus 16 -o "$work/mfsdp.json" -- $fsdp_args 2>"$work/err" || { cat "$work/err"; fail=1; }
python3 -c 'import json,sys; p=json.load(open(sys.argv[1]))["parallel"];
sys.exit(0 if (p["zero_stage"], p["framework"], "overlap_param_gather" in p) == (3, "megatron", False) else print("mfsdp", p) or 1)' \
  "$work/mfsdp.json" || fail=1
grep -q -- "--overlap-param-gather (Megatron-FSDP's own prefetch" "$work/err" || { echo "mfsdp: dropped flag not listed"; fail=1; }
"$dtsim" run "$work/mfsdp.json" >/dev/null 2>&1 || { echo "imported Megatron-FSDP scenario does not run"; fail=1; }
# shellcheck disable=SC2086
"$dtsim" import megatron --gpus 16 -o "$work/mfsdp1.json" -- $fsdp_args --data-parallel-sharding-strategy optim \
  2>/dev/null && python3 -c 'import json,sys; sys.exit(json.load(open(sys.argv[1]))["parallel"]["zero_stage"] != 1)' \
  "$work/mfsdp1.json" || { echo "mfsdp: optim is not ZeRO-1"; fail=1; }
# shellcheck disable=SC2086
refuse "optim_grads: Megatron-FSDP reduce-scatters every micro-batch" "$dtsim" import megatron --gpus 16 -- $fsdp_args \
  --data-parallel-sharding-strategy optim_grads
# the summary names the framework and, resolved, its ZeRO-3 rule (torchtitan's default under PP: kept)
"$dtsim" run scenarios/gpt3-175b-1024-a100.json --set 'parallel.framework="torchtitan"' --set parallel.zero_stage=3 \
  >"$work/summary" 2>&1 || { cat "$work/summary"; fail=1; }
grep -q 'ZeRO-3 (FSDP units, kept after forward), .*, framework torchtitan$' "$work/summary" ||
  { echo "summary lacks the framework's ZeRO-3 rule:"; grep layout "$work/summary"; fail=1; }
[ "$fail" -eq 0 ] && echo "import/export: Megatron, Hugging Face and DeepSpeed files; round trips; refusals"
exit "$fail"
