"""Generate the raw SmolLM2-135M-Instruct completions behind `smollm2_completions.jsonl`.

Samples real chat completions (the project's chat template and INSTRUCTION, via
`pipeline.policy.prompts.render_chat`) for problems of every arithmetic family at several levels,
temperature 1.0, 256 new tokens, with the `hf` sampler on CPU. It writes unlabelled rows
(question, gold, completion, family, level, finish); the committed file adds a human `label`
(1 = the model's final answer, read as a human grader would, equals the gold) and a `note`,
written by reading every completion. Re-running gives the same completions for the same seed and
transformers version, but the labels were made by hand and are not regenerated.

The committed file was sampled with the hf sampler of commit 14c2437 (the later log-prob rewrite
keeps the same tokens for a seed). See smollm2_completions.md.

Run (about an hour on 2 shared CPU cores; the weights are not committed):
    .venv/bin/python tests/scoring/make_smollm2_completions.py /tmp/smol-hf /tmp/smol_raw.jsonl
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import polars as pl

from pipeline.policy.prompts import render_chat
from pipeline.problems import generate
from pipeline.sampling.base import SamplingParams
from pipeline.sampling.hf import HFSampler

LEVELS = {"arith": [1, 3, 5, 8], "linear": [1, 3, 5], "word": [1, 3, 5], "modular": [1, 3, 5]}
PER_LEVEL = 4  # problems per (family, level)
SAMPLES = 4  # completions per problem: 13 levels x 4 x 4 = 208


def problems(seed: int = 15) -> pl.DataFrame:
    frames = [generate(f, levels, PER_LEVEL * len(levels), seed) for f, levels in LEVELS.items()]
    return pl.concat(frames)


def main(model_dir: str, out: str) -> None:
    sampler = HFSampler(model_dir, device="cpu", token_budget=16_384)
    frame = problems()
    questions = frame["question"].to_list()
    prompts = [render_chat(q, sampler.tokenizer) for q in questions]
    params = SamplingParams(temperature=1.0, max_new_tokens=256, seed=15)
    results = sampler.sample(prompts, SAMPLES, params)
    with Path(out).open("w", encoding="utf-8") as f:
        for row, completions in zip(frame.iter_rows(named=True), results, strict=True):
            for c in completions:
                record = {
                    "question": row["question"],
                    "gold": row["answer"],
                    "completion": c.text,
                    "family": row["family"],
                    "level": row["level"],
                    "finish": c.finish_reason,
                }
                f.write(json.dumps(record, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
