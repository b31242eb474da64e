"""GRPO algorithm and trainer. Imports torch (and transformers / peft / safetensors for models)
only — never `pipeline`, DuckDB or Prefect.

Modules, by role: `types` (Item, Sample, Scores, the sampler / reward / weight-sync protocols),
`config` (GRPOConfig), the maths (`advantages`, `kl`, `loss`, `rewards`), `scoring` (scores to
advantages, metric rows), `batch` (padded tensors, micro-batches), `logprobs` (completion
log-probs, prefix sharing, autocast), `trainer` (the step; re-exports the `types` names),
`state` and `checkpoint` (what a checkpoint holds, atomically written), `collect` (online batch
strategies compared with curation)."""
