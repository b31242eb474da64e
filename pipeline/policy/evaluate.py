"""Held-out evaluation by family x level: greedy pass@1 and the mean over k samples.

The held-out set is drawn from a fixed evaluation seed over the whole generator mix, keeping only
problems whose hash puts them in the held-out split, so every revision is measured on the same
problems and none of them is ever used for curation or training. Both runs are written to the
ledger (purpose `eval`); `prompt_stats` pools only the sampled one (greedy runs are excluded).

Test: `pytest tests/policy/test_evaluate.py`.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from pipeline.problems import FAMILIES, family_levels, generate
from pipeline.rollouts import RunInfo, record_run
from pipeline.sampling.base import Sampler
from pipeline.sampling.budget import SamplingConfig
from pipeline.store import Ledger

EVAL_SEED = 20_261_130  # fixed: every revision is evaluated on the same held-out problems


@dataclass(frozen=True)
class EvalConfig:
    per_level: int = 40  # held-out problems per family x level (fewer where a level is small)
    samples: int = 8  # samples per problem at `temperature` (issue 3: mean over 8 at 1.0)
    temperature: float = 1.0
    max_new_tokens: int | None = None  # None: the model's budget (16 raw, 512 chat; budget.py)
    seed: int = 0
    top_p: float = 1.0
    stop: tuple[str, ...] = ()

    def sampling(self) -> SamplingConfig:
        return SamplingConfig(
            max_new_tokens=self.max_new_tokens,
            temperature=self.temperature,
            top_p=self.top_p,
            stop=self.stop,
        )


def heldout_set(per_level: int, families: list[str] | None = None) -> pl.DataFrame:
    """Up to `per_level` held-out problems for every family x level."""
    frames = []
    for family in families or list(FAMILIES):
        for level in family_levels(family):
            pool = generate(family, [level], per_level * 15, EVAL_SEED)
            frames.append(pool.filter(pl.col("split") == "heldout").head(per_level))
    return pl.concat(frames)


def overall(table: pl.DataFrame, column: str) -> float | None:
    """Mean of a by-level pass-rate column over all problems (levels weighted by their size)."""
    if table.is_empty():
        return None
    n = table["problems"].cast(pl.Float64)
    return float((table[column].fill_null(0.0) * n).sum()) / float(n.sum())


def evaluate(
    sampler: Sampler,
    ledger: Ledger,
    model_revision: str,
    prompts_of: dict[str, str],
    cfg: EvalConfig = EvalConfig(),
    problems: pl.DataFrame | None = None,
    prompt_format: str = "raw",
) -> pl.DataFrame:
    """Run greedy + sampled evaluation, record both runs; return pass rates by family x level.

    `prompts_of` maps question -> rendered prompt in `prompt_format` (raw | chat), which also
    sets the default budget and whether answers need a marker.
    """
    problems = problems if problems is not None else heldout_set(cfg.per_level)
    ledger.write("problems", problems)
    prompts = [prompts_of[q] for q in problems["question"]]
    results = {}
    sampling = cfg.sampling()
    for name, n, greedy in (("greedy", 1, True), ("sampled", cfg.samples, False)):
        params = sampling.params(prompt_format, cfg.seed, greedy=greedy)
        groups = sampler.sample(prompts, n, params)
        info = RunInfo(
            "eval", sampler.model_name, model_revision, sampler.backend, n, params,
            prompt_format=prompt_format,
        )  # fmt: skip
        _, rows = record_run(ledger, info, problems, groups)
        results[name] = rows.group_by("problem_id").agg(
            pl.col("correct").fill_null(False).mean().alias(name)
        )
    table = problems.select("problem_id", "family", "level")
    for frame in results.values():
        table = table.join(frame, on="problem_id")
    return (
        table.group_by("family", "level")
        .agg(pl.len().alias("problems"), pl.col("greedy").mean(), pl.col("sampled").mean())
        .sort("family", "level")
    )
