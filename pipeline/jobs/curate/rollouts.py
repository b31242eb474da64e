"""Score sampled groups and record them in the ledger: one sampling run, its rollouts.

`record_run` is what every sampling stage (eval, screen, refine) calls: it scores each group's
completions with the problem's verifier, builds the rollout rows in columnar form and writes the
run row, its rollouts and their step verdicts in one transaction. `score_groups` builds both row
sets (`Scored.tables()` is the batch for `Ledger.write_batch`): `rollouts`, with each
completion's sampled `token_ids` (NULL where the sampler reported none; curation replay trains
on them, pipeline/jobs/train/replay.py), and `rollout_steps`, one row per checkable fragment of a
completion (pipeline/scoring/steps.py: an `equation` step or a `prefix` of the answer), keyed by
the rollout's key and `step_index`. `Scored.verdicts` keeps
the `Verdict` of each rollout row, in row order, for callers that read more than the rows (the
verifier audit of curation chunks, pipeline/jobs/curate/audit.py).

Test: `pytest tests/test_rollouts.py`.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime

import polars as pl

from pipeline.sampling.base import Completion, SamplingParams
from pipeline.scoring import VERIFIER_VERSION, StepContext, Verdict, verify_batch
from pipeline.store import Ledger


@dataclass(frozen=True)
class RunInfo:
    """What the ledger records about one sampling run."""

    purpose: str  # screen | refine | train | eval
    model: str
    model_revision: str
    backend: str
    group_size: int
    params: SamplingParams
    run_id: str = ""
    prompt_format: str = ""  # raw | chat ("" where unknown)

    def with_id(self) -> RunInfo:
        if self.run_id:
            return self
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S")
        run_id = f"{self.purpose}-{stamp}-{uuid.uuid4().hex[:6]}"
        return RunInfo(**{**self.__dict__, "run_id": run_id})


def run_row(info: RunInfo, started: datetime, status: str) -> pl.DataFrame:
    p = info.params
    return pl.DataFrame(
        {
            "run_id": [info.run_id],
            "purpose": [info.purpose],
            "model": [info.model],
            "model_revision": [info.model_revision],
            "backend": [info.backend],
            "group_size": [info.group_size],
            "temperature": [p.temperature],
            "top_p": [p.top_p],
            "max_new_tokens": [p.max_new_tokens],
            "seed": [p.seed],
            "stop": pl.Series([list(p.stop)], dtype=pl.List(pl.String)),
            "prompt_format": [info.prompt_format or None],
            "verifier_version": [VERIFIER_VERSION],
            "started_at": [started],
            "finished_at": [datetime.now(UTC) if status != "running" else None],
            "status": [status],
        }
    )


STEP_SCHEMA: dict[str, pl.DataType] = {
    "run_id": pl.String(),
    "problem_id": pl.String(),
    "sample_idx": pl.Int32(),
    "step_index": pl.Int32(),
    "char_start": pl.Int32(),
    "char_end": pl.Int32(),
    "correct": pl.Boolean(),
    "kind": pl.String(),
}


@dataclass(frozen=True)
class Scored:
    """Scored groups as ledger rows: `rollouts` and their `rollout_steps`; `verdicts` holds
    each rollout row's `Verdict`, in row order (not a table: `tables()` leaves it out)."""

    rollouts: pl.DataFrame
    steps: pl.DataFrame
    verdicts: tuple[Verdict, ...] = ()

    def tables(self) -> dict[str, pl.DataFrame]:
        return {"rollouts": self.rollouts, "rollout_steps": self.steps}


def step_contexts(problems: pl.DataFrame, sizes: list[int]) -> list[StepContext | None]:
    """One `StepContext` per completion, from the problem columns the frame has (question,
    family, params); `sizes[i]` completions of problem row i (a rescore passes 1 per row)."""
    n = problems.height
    columns = [
        problems[c].to_list() if problems.schema.get(c) == pl.String else [None] * n
        for c in ("question", "family", "params")
    ]
    per_problem = [StepContext(q or "", f or "", p) for q, f, p in zip(*columns, strict=True)]
    return [c for c, k in zip(per_problem, sizes, strict=True) for _ in range(k)]


def cut_flags(frame: pl.DataFrame) -> list[bool] | bool:
    """Per row, whether its sampler cut it at the token budget (`finish_reason` "length"), as
    `verify_batch(truncated=...)` takes it; False for all when the frame has no such column."""
    if "finish_reason" not in frame.columns:
        return False
    return (frame["finish_reason"] == "length").fill_null(False).to_list()


def step_frame(
    run_id: str, problem_ids: list[str], sample_idx: list[int], verdicts: list[Verdict]
) -> pl.DataFrame:
    """Rows for `rollout_steps`: each verdict's fragments, numbered 0, 1, ... per rollout."""
    rows = [
        (run_id, pid, j, i, s.start, s.end, s.correct, s.kind)
        for pid, j, v in zip(problem_ids, sample_idx, verdicts, strict=True)
        for i, s in enumerate(v.steps or ())
    ]
    return pl.DataFrame(rows, schema=STEP_SCHEMA, orient="row")


def token_ids(c: Completion) -> list[int] | None:
    """The ids the sampler reported for `c`, as stored in `rollouts.token_ids` (migration 0013);
    None when it reported none (an openai server without `return_token_ids`; an empty
    completion's ids are empty too, and its replay re-tokenises "" to the same nothing)."""
    return list(c.token_ids) if c.token_ids else None


def score_groups(
    run_id: str,
    problems: pl.DataFrame,
    groups: list[list[Completion]],
    *,
    marker_required: bool = True,
) -> Scored:
    """Every completion of every group, scored with its problem's verifier, as ledger rows.

    `marker_required` (chat models, asked for a `\\boxed{}` answer): an answer counts only when
    it comes from an answer marker, never from free prose."""
    sizes = [len(g) for g in groups]
    flat = [c for g in groups for c in g]
    answers = [a for a, k in zip(problems["answer"], sizes, strict=True) for _ in range(k)]
    verifiers = [v for v, k in zip(problems["verifier"], sizes, strict=True) for _ in range(k)]
    verdicts = verify_batch(
        [c.text for c in flat],
        answers,
        verifiers,
        marker_required=marker_required,
        contexts=step_contexts(problems, sizes),
        truncated=[c.finish_reason == "length" for c in flat],
    )
    problem_ids = pl.Series(problems["problem_id"]).gather(
        [i for i, k in enumerate(sizes) for _ in range(k)]
    )
    sample_idx = [j for k in sizes for j in range(k)]
    steps = step_frame(run_id, problem_ids.to_list(), sample_idx, verdicts)
    rows = pl.DataFrame(
        {
            "run_id": run_id,
            "problem_id": problem_ids,
            "sample_idx": pl.Series(sample_idx, dtype=pl.Int32),
            "completion": [c.text for c in flat],
            "n_tokens": pl.Series([c.n_tokens for c in flat], dtype=pl.Int32),
            "token_ids": pl.Series([token_ids(c) for c in flat], dtype=pl.List(pl.Int32)),
            "finish_reason": [c.finish_reason for c in flat],
            "reward": pl.Series([v.reward for v in verdicts], dtype=pl.Float64),
            "correct": pl.Series([v.correct for v in verdicts], dtype=pl.Boolean),
            "reward_components": [json.dumps(v.components) for v in verdicts],
        }
    )
    return Scored(rows, steps, tuple(verdicts))


def rollout_frame(
    run_id: str,
    problems: pl.DataFrame,
    groups: list[list[Completion]],
    *,
    marker_required: bool = True,
) -> pl.DataFrame:
    """Rows for `rollouts` only (`score_groups(...).rollouts`; the steps are not kept)."""
    return score_groups(run_id, problems, groups, marker_required=marker_required).rollouts


def record_run(
    ledger: Ledger, info: RunInfo, problems: pl.DataFrame, groups: list[list[Completion]]
) -> tuple[RunInfo, pl.DataFrame]:
    """Score and write one finished run (run row + rollouts + their steps, one transaction)."""
    info = info.with_id()
    started = datetime.now(UTC)
    scored = score_groups(
        info.run_id, problems, groups, marker_required=info.prompt_format == "chat"
    )
    ledger.write_batch({"sampling_runs": run_row(info, started, "finished"), **scored.tables()})
    return info, scored.rollouts
