#!/usr/bin/env bash
# GPU check: does the trainer run with every tensor on the CUDA device? One script, < 5 minutes.
#
#   bash benchmarks/gpu_check.sh          # from the repository root, on a machine with CUDA
#
# 1. a venv ($TMPDIR/sieve-gpu-venv, or $VENV) that sees system packages, so a preinstalled
#    CUDA torch is reused; otherwise pip installs torch from the configured index (PyPI's
#    Linux wheel is the CUDA build);
# 2. the project and its dependencies except the torch pin (the pin is the local CPU build);
# 3. `pytest -m gpu tests/test_gpu.py`: trainer steps (frozen ref, full rows + 2 iterations,
#    LoRA + bf16 autocast + token budget), batches, checkpoint/resume and HF sampling on CUDA,
#    with a forward hook failing on any input tensor off the device;
# 4. a short trainer run on a SmolLM2-135M-shaped model built from a config (random init, no
#    downloads): HF rollouts on CUDA, bf16 autocast, 3 steps, a bf16 checkpoint; prints s/step
#    and peak memory.
# Prints PASS or FAIL per stage and exits non-zero if any failed. vLLM is not used here.
set -uo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-${TMPDIR:-/tmp}/sieve-gpu-venv}  # outside the repository: no git noise
PY="$VENV/bin/python"
status=0
stage() { echo; echo "== $1"; }
result() { if [ "$2" -eq 0 ]; then echo "PASS $1"; else echo "FAIL $1"; status=1; fi; }

stage "environment"
command -v nvidia-smi >/dev/null && nvidia-smi -L
[ -x "$PY" ] || python3 -m venv --system-site-packages "$VENV"
if ! "$PY" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null; then
    timeout 240 "$VENV/bin/pip" install -q torch
fi
"$PY" - > "$VENV/requirements-gpu.txt" <<'EOF'
import tomllib

project = tomllib.load(open("pyproject.toml", "rb"))["project"]
deps = [d for d in project["dependencies"] if not d.replace(" ", "").startswith("torch=")]
deps += project["optional-dependencies"]["lora"] + ["pytest>=8", "pytest-timeout>=2.3", "hypothesis>=6.100"]
print("\n".join(deps))
EOF
timeout 240 "$VENV/bin/pip" install -q -r "$VENV/requirements-gpu.txt" \
    && timeout 60 "$VENV/bin/pip" install -q --no-deps -e .
"$PY" -c "import torch; assert torch.cuda.is_available(), 'no CUDA device'; print('torch', torch.__version__, torch.cuda.get_device_name())"
result "environment (CUDA torch, project installed)" $?
[ $status -eq 0 ] || { echo "FAIL overall"; exit 1; }

stage "pytest -m gpu tests/test_gpu.py"
timeout 180 "$PY" -m pytest -q -m gpu tests/test_gpu.py -p no:cacheprovider
result "gpu tests" $?

stage "short trainer run on CUDA (SmolLM2-135M shape, random init)"
timeout 180 "$PY" - <<'EOF'
import math, tempfile, time
from pathlib import Path

import torch
from transformers import LlamaConfig, LlamaForCausalLM

from grpo_core.config import GRPOConfig
from grpo_core.trainer import Item, Scores, Trainer
from pipeline.policy.tokenizer import build_tokenizer
from pipeline.sampling.hf import HFSampler
from pipeline.sampling.group_sampler import HFGroupSampler

tok = build_tokenizer()
config = LlamaConfig(  # SmolLM2-135M's shape with the tiny character vocabulary
    vocab_size=len(tok), hidden_size=576, intermediate_size=1536, num_hidden_layers=30,
    num_attention_heads=9, num_key_value_heads=3, max_position_embeddings=2048,
    tie_word_embeddings=True, bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id,
    pad_token_id=tok.pad_token_id,
)
torch.manual_seed(0)
model = LlamaForCausalLM(config).cuda()
items = [Item(f"{a}+{b}=", str(a + b), 8) for a, b in [(3, 4), (12, 7), (25, 9), (6, 6)] * 2]

def reward(its, samples):
    ok = [s.text.strip().startswith(it.answer) for it, s in zip(its, samples)]
    return Scores([float(len(set(s.text)) % 2) for s in samples], ok)  # any non-constant signal

cfg = GRPOConfig(lr=1e-5, total_steps=3, max_new_tokens=64, checkpoint_every=0, temperature=1.0,
                 autocast="bf16", save_dtype="bfloat16", micro_batch_tokens=8192)
root = Path(tempfile.mkdtemp())
hf = HFSampler(model=model, tokenizer=tok)
t = Trainer(model, tok, HFGroupSampler(hf), reward, lambda s: items, cfg, root, warn=print)
torch.cuda.reset_peak_memory_stats()
start = time.perf_counter()
history = t.train()
per_step = (time.perf_counter() - start) / len(history)
for i, h in enumerate(history):
    print(f"step {i}: loss {h['loss']:.4f} kl {h['kl']:.4f} trained {h['trained_samples']:.0f} "
          f"sample {h['time_sample']:.2f}s update {h['time_update']:.2f}s")
assert any(h["trained_samples"] > 0 for h in history), "no informative step"
assert all(math.isfinite(h["loss"]) for h in history if h["trained_samples"] > 0)
assert all(p.device.type == "cuda" for p in t.model.parameters())
saved = sorted(root.glob("step-*"))[-1]
size = sum(f.stat().st_size for f in saved.rglob("*") if f.is_file()) / 2**20
print(f"{per_step:.2f} s/step, peak {torch.cuda.max_memory_allocated() / 2**30:.2f} GiB, "
      f"checkpoint {saved.name} {size:.0f} MiB")
EOF
result "short trainer run" $?

echo
if [ $status -eq 0 ]; then echo "PASS overall"; else echo "FAIL overall"; fi
exit $status
