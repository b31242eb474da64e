"""Storage cost of training rollouts in the ledger (`train_rollouts`, migration 0010).

Writes steps of training rollouts into a fresh DuckDB ledger the way the recorder does (one
`write_batch` of metrics and rollouts per step, `on_conflict="replace"`), checkpoints the file
after every 10 k rows, and fits the file size against the rows written: bytes per 10 k rollouts
is the slope (the file grows in DuckDB blocks, so one delta alone is coarse).

Two kinds of completion text, drawn with replacement from stored samples:
- `chat`: SmolLM2-135M's completions of the real-model pool (`results/real_model_pool.parquet`,
  256-token budget; the text a real run would store);
- `tiny`: short answers of the built-in tiny policy's size (a few characters).

Also the commit time of one step at the end of the run over that at the start, as a ratio (the
replace on the natural key scans the table).

Run: `.venv/bin/python benchmarks/train_rollouts_storage.py` (under a minute; `--rows` changes
the total). Writes benchmarks/results/train_rollouts_storage.json.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from pipeline.store import Ledger

RESULTS = Path(__file__).parent / "results"
POOL = RESULTS / "real_model_pool.parquet"
EVERY = 10_000


def completions(kind: str) -> tuple[list[str], list[int]]:
    if kind == "chat":
        pool = pl.read_parquet(POOL, columns=["completion", "n_tokens"])
        return pool["completion"].to_list(), pool["n_tokens"].to_list()
    rng = np.random.default_rng(0)
    texts = [str(int(x)) for x in rng.integers(-999, 9999, 1000)]
    return texts, [len(t) for t in texts]


def step_frames(step: int, texts: list[str], tokens: list[int], rows: int, rng: Any) -> dict:
    """One step's metrics and rollouts: `rows` completions, groups of 16 over rows / 16 prompts."""
    pick = rng.integers(0, len(texts), rows)
    reward = (rng.random(rows) < 0.3).astype(float)
    rollouts = pl.DataFrame(
        {
            "train_id": "train-bench",
            "step": np.full(rows, step, dtype=np.int32),
            "problem_id": [f"{(step * 7919 + i // 16) % 100_000:016x}" for i in range(rows)],
            "sample_idx": np.arange(rows, dtype=np.int32) % 16,
            "policy": f"train-bench@{step}",
            "completion": [texts[i] for i in pick],
            "n_tokens": np.array([tokens[i] for i in pick], dtype=np.int32),
            "finish_reason": np.where(rng.random(rows) < 0.2, "length", "stop"),
            "reward": reward,
            "correct": reward > 0,
            "behaviour_logprob": -rng.gamma(20.0, 2.0, rows),
        }
    )
    metrics = pl.DataFrame(
        {"train_id": "train-bench", "step": [step], "name": ["loss"], "value": [0.0]},
        schema={"train_id": pl.Utf8, "step": pl.Int32, "name": pl.Utf8, "value": pl.Float64},
    )
    return {"train_metrics": metrics, "train_rollouts": rollouts}


def measure(kind: str, total: int, per_step: int) -> dict[str, Any]:
    texts, tokens = completions(kind)
    rng = np.random.default_rng(1)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "ledger.duckdb"
        with Ledger.open(path=path) as ledger:
            ledger.run("CHECKPOINT")
            sizes, written, seconds = [(0, path.stat().st_size)], 0, []
            for step in range(total // per_step):
                frames = step_frames(step, texts, tokens, per_step, rng)
                began = time.perf_counter()
                ledger.write_batch(frames, "replace")
                seconds.append(time.perf_counter() - began)
                written += per_step
                if written % EVERY == 0:
                    ledger.run("CHECKPOINT")
                    sizes.append((written, path.stat().st_size))
    rows, size = np.array(sizes, dtype=float).T
    slope = float(np.polyfit(rows, size, 1)[0])
    return {
        "completion_chars_mean": float(np.mean([len(t) for t in texts])),
        "rows_written": int(rows[-1]),
        "file_bytes_empty": int(size[0]),
        "file_bytes_final": int(size[-1]),
        "bytes_per_10k_rollouts": slope * EVERY,
        "mib_per_10k_rollouts": slope * EVERY / 2**20,
        "bytes_per_rollout": slope,
        "sizes": [[int(r), int(s)] for r, s in zip(rows, size, strict=True)],
        # one step's commit (replace on the natural key scans the table): the last 10 k rows'
        # mean over the first 10 k rows' mean
        "commit_seconds_first_10k": float(np.mean(seconds[: EVERY // per_step])),
        "commit_last_over_first": float(
            np.mean(seconds[-EVERY // per_step :]) / np.mean(seconds[: EVERY // per_step])
        ),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--per-step", type=int, default=500)  # e.g. 32 prompts x 16, rounded
    args = ap.parse_args()
    if args.rows < 2 * EVERY or EVERY % args.per_step:
        raise SystemExit(f"error: --rows must be >= {2 * EVERY} and --per-step divide {EVERY}")
    result = {
        "benchmark": "train_rollouts_storage",
        "rows_per_step": args.per_step,
        "kinds": {kind: measure(kind, args.rows, args.per_step) for kind in ("chat", "tiny")},
    }
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / "train_rollouts_storage.json"
    out.write_text(json.dumps(result, indent=1))
    for kind, r in result["kinds"].items():
        print(
            f"{kind}: {r['mib_per_10k_rollouts']:.2f} MiB per 10k training rollouts "
            f"({r['bytes_per_rollout']:.0f} B each; completions {r['completion_chars_mean']:.0f} "
            "chars on average)"
        )


if __name__ == "__main__":
    main()
