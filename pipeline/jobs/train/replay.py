"""The ledger side of `grpo_core.history`: stored curation samples to replay, zero-variance streaks.

- `stored_groups` reads a curriculum's screen/refine rollouts (`CurateResult.screen_run`,
  `refine_run`) as the trainer's samples: each completion's token ids as sampled (the ledger's
  `rollouts.token_ids`, migration 0013), the end-of-sequence token appended where it stopped and
  the ids do not end with it already (vLLM's do, the hf backend's do not), `truncated` where it
  hit the budget. Refused, with one line, when a run sampled with other settings than the
  trainer (temperature, top-p ≠ 1, another token budget, stop strings): those samples are not
  from the reference policy the importance weights assume. A row without stored ids (written
  before 0013, or by a sampler that reported none) is re-tokenised from its text with the
  policy's tokenizer (no special tokens); a prompt with such a completion whose re-tokenisation
  has another length than the stored count is left out (sampled fresh instead), counted in
  `ReplaySet.retokenised_off`; a stopped completion's count may include its end-of-sequence
  token (vLLM counts it, the hf backend does not).
- `curation_visits`: whether each group of the given curation runs was zero-variance, and its
  size, in order (a night's screen and refine extend the skip's streaks:
  `ZeroVarSkip.observe_flags(keys, flats, sizes)`);
- `zero_var_streaks`: per problem, its most recent zero-variance groups in a row over curation
  runs and training steps (query `zero_var_streaks`), each weighed by its size
  (`grpo_core.history.visit_weight`: a G = 4 screen is half a visit), the history `ZeroVarSkip`
  starts from.
- `replay_bias`: per training run, how many replayed groups were the very curation samples that
  selected their prompt, and how often replayed and fresh groups were zero-variance (the step
  metrics `grpo_core.history.replay_curation` reports, summed from `train_metrics`): replayed
  groups were kept because they disagreed, so their flat share is not a fresh draw's.

Test: `.venv/bin/pytest tests/test_replay.py -q`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from grpo_core.history import FULL_GROUP
from grpo_core.types import Sample
from pipeline.core.errors import SieveError
from pipeline.store import Ledger


@dataclass
class ReplaySet:
    """Stored groups by problem id, and the prompts left out because a completion without stored
    ids did not round-trip through re-tokenisation (only rows written before migration 0013, or
    by a sampler that reported no ids, are re-tokenised)."""

    groups: dict[str, list[Sample]] = field(default_factory=dict)
    retokenised_off: int = 0


def _check_settings(
    frame: pl.DataFrame, temperature: float, max_new_tokens: int, revision: str | None
) -> None:
    runs = frame.unique("run_id")
    for row in runs.iter_rows(named=True):
        bad = []
        if revision is not None and row["model_revision"] != revision:
            # the trainer reads a replayed sample's behaviour log-probs as its reference's, the
            # weights training starts from: samples of other weights would be weighted wrongly
            bad.append(f"model revision {row['model_revision']} (training starts from {revision})")
        if row["temperature"] is None or abs(row["temperature"] - temperature) > 1e-9:
            bad.append(f"temperature {row['temperature']} (training samples at {temperature})")
        if row["top_p"] is not None and row["top_p"] < 1.0:
            bad.append(f"top_p {row['top_p']} (training samples the full distribution)")
        if row["max_new_tokens"] != max_new_tokens:
            bad.append(f"max_new_tokens {row['max_new_tokens']} (training: {max_new_tokens})")
        if row["n_stop"]:
            bad.append("stop strings (training stops at end-of-sequence only)")
        if bad:
            raise SieveError(
                f"cannot replay run {row['run_id']}: it sampled with {', '.join(bad)}; match the "
                "curation's sampling settings to training or turn replay_curation off"
            )


def _round_trips(retokenised: pl.Expr) -> pl.Expr:
    """Whether a stored completion's re-tokenisation has as many tokens as were sampled. vLLM
    counts the end-of-sequence token of a completion that stopped in `n_tokens`, the hf backend
    does not (its ids end before it); the text never holds it. So a stopped completion
    round-trips at `n_tokens` or `n_tokens - 1` tokens. The allowance sits here rather than in
    the vLLM sampler because ledgers already hold vLLM counts with the token. Before it, every
    stopped vLLM completion read as "off" and the real-model runs replayed nothing (the first
    night of benchmarks/real_curriculum.py's every-rollout seed 1: 82 prompts off, 0 replayed)."""
    n = pl.col("n_tokens")
    stopped = pl.col("finish_reason") == "stop"
    return (retokenised == n) | (stopped & (retokenised == n - 1))


def stored_groups(
    ledger: Ledger,
    runs: Sequence[str],
    tokenizer: Any,
    *,
    temperature: float,
    max_new_tokens: int,
    revision: str | None = None,
) -> ReplaySet:
    """The samples of `runs` per problem, as the trainer's `Sample`s (see the module docstring).
    `revision`: the model revision training starts from; runs sampled with another are refused
    (None: the caller vouches that the runs sampled with the trainer's reference weights)."""
    frame = ledger.query("replay_samples", runs=list(runs))
    if frame.is_empty():
        return ReplaySet()
    _check_settings(frame, temperature, max_new_tokens, revision)
    texts = [t or "" for t in frame["completion"].to_list()]
    ids = frame["token_ids"].to_list()  # as sampled; None where the row has none
    redo = [i for i, row in enumerate(ids) if row is None]
    if redo:  # rows without stored ids: re-tokenised, in one batched call
        again = tokenizer([texts[i] for i in redo], add_special_tokens=False)["input_ids"]
        for i, row in zip(redo, again, strict=True):
            ids[i] = row
    frame = frame.with_columns(
        pl.Series("ids", ids, dtype=pl.List(pl.Int64)),
        pl.Series("text", texts, dtype=pl.Utf8),
    ).with_columns(off=pl.col("token_ids").is_null() & ~_round_trips(pl.col("ids").list.len()))
    off = frame.group_by("problem_id").agg(pl.col("off").any()).filter("off")["problem_id"]
    eos = tokenizer.eos_token_id
    out = ReplaySet(retokenised_off=off.len())
    kept = frame.filter(~pl.col("problem_id").is_in(off.implode()))
    for pid, toks, text, reason in kept.select("problem_id", "ids", "text", "finish_reason").rows():
        out.groups.setdefault(pid, []).append(_sample(toks, text, reason, eos))
    return out


def _sample(ids: list[int], text: str, reason: str | None, eos: int | None) -> Sample:
    """A stored completion as the trainer's sample: one that stopped ends with exactly one
    end-of-sequence token (appended unless its ids end with it: vLLM's stored ids do, the hf
    backend's and a re-tokenised text do not); one cut at the budget gets none."""
    toks = tuple(ids)
    if reason == "stop" and eos is not None and (not toks or toks[-1] != eos):
        toks = (*toks, eos)
    return Sample(toks, text, truncated=reason == "length")


def curation_visits(ledger: Ledger, runs: Sequence[str]) -> pl.DataFrame:
    """problem_id, run_id, flat (zero-variance), size (samples) per group of `runs`, oldest run
    first."""
    return ledger.query("curation_visits", runs=list(runs))


def zero_var_streaks(ledger: Ledger) -> dict[str, float]:
    """Problem id → zero-variance groups in a row at the end of its ledger history, each
    weighed by its size (`visit_weight`; > 0 only). A whole number comes back as an int."""
    frame = ledger.query("zero_var_streaks", full_group=FULL_GROUP).filter(pl.col("streak") > 0)
    return {
        pid: int(k) if float(k).is_integer() else float(k)
        for pid, k in zip(frame["problem_id"].to_list(), frame["streak"].to_list(), strict=True)
    }


BIAS_METRICS = (
    "replayed_groups",
    "replayed_selecting_groups",
    "replayed_flat_groups",
    "fresh_groups",
    "fresh_flat_groups",
)


@dataclass(frozen=True)
class ReplayBias:
    """One training run's replay, summed over its steps (`replay_bias`)."""

    replayed_groups: int  # groups trained on stored curation samples
    selecting_groups: int  # of those, the very samples the curation kept the prompt on
    replayed_flat: int  # replayed groups that were zero-variance (task reward)
    fresh_groups: int  # groups sampled fresh by the run (under a replaying collector)
    fresh_flat: int  # of those, zero-variance

    @property
    def replayed_flat_share(self) -> float | None:
        return self.replayed_flat / self.replayed_groups if self.replayed_groups else None

    @property
    def fresh_flat_share(self) -> float | None:
        return self.fresh_flat / self.fresh_groups if self.fresh_groups else None


def replay_bias(ledger: Ledger, train_id: str) -> ReplayBias:
    """How much of `train_id`'s replay trained on the samples that selected its prompts, and the
    zero-variance share of its replayed groups against its fresh ones (all 0 for a run without
    a replaying collector, or one recorded before these metrics existed)."""
    names = ", ".join(f"'{n}'" for n in BIAS_METRICS)
    frame = ledger.sql(
        f"SELECT name, sum(value) AS total FROM train_metrics WHERE train_id = $t "
        f"AND name IN ({names}) GROUP BY name",
        {"t": train_id},
    )
    got = {name: int(total or 0) for name, total in frame.rows()}
    return ReplayBias(*(got.get(n, 0) for n in BIAS_METRICS))
