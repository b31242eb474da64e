"""`sieve bootstrap`: supervised training of the tiny policy on generated problems.

Sequences are `<bos> question = answer <eos>`; the loss covers the answer and `<eos>` only.
Training draws from the train split of a mix of families and levels; each batch comes from one
family so its sequences have similar lengths (little padding). The learning rate warms up, then
follows a cosine over the run: step / max_steps by default (exactly repeatable for a seed), or
elapsed / budget with `max_minutes` (machine-dependent).

The default recipe (arith 1-5, 700 steps, ~75 s on 2 CPU cores) was chosen by measurement so
that GRPO has something to learn; see `BootstrapConfig`.

Tests: `pytest tests/policy/test_bootstrap.py`; the default recipe in `tests/test_learning.py`.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
import shutil
import time
from dataclasses import asdict, dataclass, fields
from pathlib import Path

import polars as pl
import torch
from transformers import PreTrainedTokenizerBase

from pipeline.core.hooks import Progress, report
from pipeline.jobs.train.bootstrap_settings import BootstrapConfig
from pipeline.policy.model import SIEVE_META, new_tiny_model, save_policy
from pipeline.problems import generate_mix


@dataclass
class Batches:
    """Tokenised training sequences grouped by family."""

    sequences: dict[str, list[list[int]]]  # family -> token ids
    answer_start: dict[str, list[int]]  # family -> index of the first answer token


def tokenise_pool(frame: pl.DataFrame, tokenizer: PreTrainedTokenizerBase) -> Batches:
    sequences: dict[str, list[list[int]]] = {}
    starts: dict[str, list[int]] = {}
    prompts = tokenizer([f"{q}=" for q in frame["question"]])["input_ids"]
    answers = tokenizer(frame["answer"].to_list(), add_special_tokens=False)["input_ids"]
    for family, prompt, answer in zip(frame["family"], prompts, answers, strict=True):
        sequences.setdefault(family, []).append(prompt + answer + [tokenizer.eos_token_id])
        starts.setdefault(family, []).append(len(prompt))
    return Batches(sequences, starts)


def make_batch(
    data: Batches, family: str, size: int, rng: random.Random, pad: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(input_ids, attention_mask, labels) for `size` random sequences of one family."""
    picks = [rng.randrange(len(data.sequences[family])) for _ in range(size)]
    width = max(len(data.sequences[family][i]) for i in picks)
    ids = torch.full((size, width), pad, dtype=torch.long)  # (B, T), right-padded
    labels = torch.full((size, width), -100, dtype=torch.long)
    for row, i in enumerate(picks):
        seq, start = data.sequences[family][i], data.answer_start[family][i]
        ids[row, : len(seq)] = torch.tensor(seq)
        labels[row, start : len(seq)] = torch.tensor(seq[start:])
    return ids, (ids != pad).long(), labels


def lr_at(step: int, progress: float, cfg: BootstrapConfig) -> float:
    """Linear warm-up over the first steps, then cosine decay over progress in [0, 1]."""
    if step < cfg.warmup_steps:
        return cfg.lr * (step + 1) / cfg.warmup_steps
    progress = min(1.0, max(0.0, progress))
    floor = cfg.lr * cfg.min_lr_ratio
    return floor + (cfg.lr - floor) * 0.5 * (1 + math.cos(math.pi * progress))


@dataclass
class TrainResult:
    model: torch.nn.Module
    tokenizer: object
    steps: int
    seconds: float
    final_loss: float


def train_tiny(cfg: BootstrapConfig, progress: Progress | None = None) -> TrainResult:
    """Train a fresh tiny policy; a progress event every 50 steps (`done` the step, metrics
    `loss` and `fraction`, the share of the budget used: steps or minutes)."""
    torch.manual_seed(cfg.seed)
    model, tokenizer = new_tiny_model(cfg.seed, cfg.size)
    pool = generate_mix(cfg.mix.levels(), cfg.pool_size, cfg.seed).filter(
        pl.col("split") == "train"
    )
    data = tokenise_pool(pool, tokenizer)
    plan = [(f, w, b) for f, w, b in cfg.family_plan if f in data.sequences]
    rng = random.Random(cfg.seed)
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    model.train()
    budget = cfg.max_minutes * 60 if cfg.max_minutes else 0.0
    start = time.perf_counter()
    loss_value, step, done = float("nan"), 0, 0.0
    while done < 1.0:
        family, _, batch = rng.choices(plan, [w for _, w, _ in plan])[0]
        ids, mask, labels = make_batch(data, family, batch, rng, tokenizer.pad_token_id)
        for group in opt.param_groups:
            group["lr"] = lr_at(step, done, cfg)
        loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
        opt.step()
        loss_value, step = loss.item(), step + 1
        elapsed = time.perf_counter() - start
        done = elapsed / budget if budget else step / cfg.max_steps  # type: ignore[operator]
        if step % 50 == 0:
            metrics = {"loss": loss_value, "fraction": done}
            report(progress, "bootstrap", "bootstrap", step, cfg.max_steps or 0, metrics)
    model.eval()
    return TrainResult(model, tokenizer, step, time.perf_counter() - start, loss_value)


def save_atomically(result: TrainResult, folder: Path, cfg: BootstrapConfig) -> str:
    """Write the model folder beside its final place, then swap it in; returns the revision."""
    tmp = folder.with_name(f".{folder.name}.tmp")
    if tmp.exists():
        shutil.rmtree(tmp)
    meta = {
        "prompt_format": "raw",
        "source": "sieve bootstrap",
        "seed": cfg.seed,
        "steps": result.steps,
        "train_seconds": round(result.seconds, 1),
        "final_loss": result.final_loss,
        "size": asdict(cfg.size),
        "recipe": recipe(cfg),
    }
    revision = save_policy(result.model, result.tokenizer, tmp, meta)  # type: ignore[arg-type]
    if folder.exists():
        shutil.rmtree(folder)
    tmp.rename(folder)
    return revision


# The code the bootstrapped weights depend on besides the recipe: the model, its tokenizer, this
# trainer and the problem generators that make its training data (globs under `pipeline/`).
_WEIGHT_SOURCES = ("policy/*.py", "problems/*.py", "jobs/train/bootstrap.py")


def recipe(cfg: BootstrapConfig) -> dict:
    """The recipe as plain JSON values (written to `sieve.json`)."""
    out = {f.name: getattr(cfg, f.name) for f in fields(cfg)}
    out["mix"] = cfg.mix.model_dump()
    out["size"] = asdict(cfg.size)
    out["family_plan"] = [list(p) for p in cfg.family_plan]
    return out


def recipe_key(cfg: BootstrapConfig, package: Path | None = None) -> str:
    """A key for the weights a recipe trains on this installation: the recipe, the torch and
    transformers versions and the source of the modules that shape the weights (read from
    `package`, by default this `pipeline` package)."""
    import transformers

    digest = hashlib.sha256(json.dumps(recipe(cfg), sort_keys=True).encode())
    digest.update(f"|torch {torch.__version__}|transformers {transformers.__version__}".encode())
    package = package or Path(__file__).resolve().parents[2]  # pipeline/
    for pattern in _WEIGHT_SOURCES:
        for path in sorted(package.glob(pattern)):
            digest.update(f"|{path.relative_to(package).as_posix()}|".encode() + path.read_bytes())
    return digest.hexdigest()[:16]


def bootstrap_cached(cfg: BootstrapConfig, cache: Path) -> Path:
    """The model folder `cfg` trains, from `cache` when an identical recipe already ran here.

    A fixed-step recipe is exactly repeatable on a machine, so its result can be reused; one
    with a wall-clock budget is not and is refused. The folder appears whole or not at all
    (`save_atomically`), so a killed run leaves nothing to mistake for a cached model.
    """
    if cfg.max_minutes is not None:
        raise ValueError("a recipe with max_minutes is not repeatable and is not cached")
    folder = Path(cache) / f"tiny-{recipe_key(cfg)}"
    if not (folder / SIEVE_META).is_file():
        folder.parent.mkdir(parents=True, exist_ok=True)
        save_atomically(train_tiny(cfg), folder, cfg)
    return folder
