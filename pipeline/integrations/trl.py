"""Sieve's verifiers as a TRL reward function, so TRL's GRPOTrainer scores exactly like Sieve.

`reward_function()` returns a callable with TRL's reward signature,
`(prompts, completions, **kwargs) -> list[float | None]`: TRL passes every dataset column as a
keyword list (one entry per completion), so the gold answer comes from the `answer` column of a
`sieve export --format trl` dataset and, unless a verifier is fixed, the verifier from its
`verifier` column. Completions may be plain strings or conversations ([{role, content}]; the
assistant turns are scored). By default only a marked, committed final answer counts
(`marker_required=True`, the safe reading of chat text: an echoed question or a hedge earns
nothing); a row whose `answer_format` column (written by `sieve export --format trl`) says `raw`
is read as a bare answer, and `marker_required=False` reads every row that way. Scoring goes
through `pipeline.scoring.verify_batch`, so a verifier that fails gives `None` (TRL turns it
into NaN and leaves it out of the mean), never a silent 0. The export's `params` and `family`
columns reach the verifier as its `StepContext`: the "rg" verifier (reasoning-gym problems)
rebuilds the problem from them.

Cut completions: an answer that runs to the token budget's cut is not paid (the cut may have
shortened it; pipeline/scoring/verifiers.py, "Cut at the budget"). TRL passes each completion's
token ids (`completion_ids`) but not why it ended, so give `stop_token_ids` (the tokenizer's
end-of-sequence and pad ids, as TRL's own `mask_truncated_completions` reads them; `stop_ids(tok)`
lists them): a completion whose last id is not one of them was cut. Without it every completion
is read as finished.

It is a small class rather than a closure so it pickles (TRL and accelerate may copy reward
functions to workers) and carries a `__name__`, which TRL uses in its `rewards/<name>/mean` logs.

    from pipeline.integrations.trl import reward_function
    trainer = GRPOTrainer(model=..., reward_funcs=[reward_function()], train_dataset=ds, ...)

Test: `.venv/bin/pytest tests/integrations/test_trl.py -q`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pipeline.scoring import RewardSpec, StepContext, Verdict, verify_batch
from pipeline.scoring.verifiers import get_verifier


def completion_text(completion: Any) -> str:
    """The text to score: a plain string, or the assistant turns of a conversation."""
    if isinstance(completion, str):
        return completion
    turns = [m for m in completion if m.get("role", "assistant") == "assistant"]
    return "".join(_content_text(m.get("content")) for m in turns)


def _content_text(content: Any) -> str:
    """Message content as text: a string, or the text parts of a list of content blocks."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return "".join(str(part.get("text", "")) for part in content if isinstance(part, dict))


def stop_ids(tokenizer: Any) -> list[int]:
    """The ids that end a completion: the tokenizer's end-of-sequence and pad tokens."""
    ids = [getattr(tokenizer, "eos_token_id", None), getattr(tokenizer, "pad_token_id", None)]
    return sorted({int(i) for i in ids if i is not None})


class SieveReward:
    """A TRL reward function backed by `verify_batch` (see the module docstring)."""

    def __init__(
        self,
        verifier: str | None = None,
        *,
        answer_key: str = "answer",
        verifier_key: str = "verifier",
        spec: RewardSpec | None = None,
        timeout: float | None = None,
        name: str = "sieve_reward",
        marker_required: bool = True,
        format_key: str = "answer_format",
        stop_token_ids: Sequence[int] | None = None,
    ):
        if verifier is not None:
            get_verifier(verifier)  # an unknown name fails here, not mid-training
        self.verifier = verifier
        self.answer_key = answer_key
        self.verifier_key = verifier_key
        self.spec = spec
        self.timeout = timeout
        self.marker_required = marker_required
        self.format_key = format_key
        self.stop_token_ids = None if stop_token_ids is None else frozenset(stop_token_ids)
        self.__name__ = name
        self.verifier_errors = 0  # completions whose verifier failed (reward None), all calls

    def __call__(
        self, prompts: Sequence[Any], completions: Sequence[Any], **kwargs: Any
    ) -> list[float | None]:
        return [v.reward for v in self.judge(prompts, completions, **kwargs)]

    def judge(
        self, prompts: Sequence[Any], completions: Sequence[Any], **kwargs: Any
    ) -> list[Verdict]:
        """The verdicts behind the rewards (reward, correct, reason), counted and logged."""
        answers = self._answers(kwargs, len(completions))
        verdicts = verify_batch(
            [completion_text(c) for c in completions],
            answers,
            self._verifiers(kwargs, len(completions)),
            spec=self.spec,
            timeout=self.timeout,
            marker_required=self._markers(kwargs, len(completions)),
            contexts=self._contexts(kwargs, len(completions)),
            truncated=self._cut(kwargs, len(completions)),
        )
        errors = sum(v.reward is None for v in verdicts)
        self.verifier_errors += errors
        log_metric = kwargs.get("log_metric")
        if callable(log_metric) and verdicts:
            log_metric(f"{self.__name__}/verifier_error_share", errors / len(verdicts))
        return verdicts

    def _answers(self, kwargs: dict[str, Any], n: int) -> list[str]:
        if self.answer_key not in kwargs:
            columns = sorted(k for k, v in kwargs.items() if isinstance(v, list))
            raise KeyError(
                f"{self.__name__}: no {self.answer_key!r} column in the dataset (columns: "
                f"{', '.join(columns) or 'none'}); pass answer_key= or export with "
                "`sieve export --format trl`"
            )
        answers = [str(a) for a in kwargs[self.answer_key]]
        if len(answers) != n:
            raise ValueError(f"{self.__name__}: {len(answers)} answers for {n} completions")
        return answers

    def _markers(self, kwargs: dict[str, Any], n: int) -> bool | list[bool]:
        """One flag for all rows, or per row from the export's `answer_format` column."""
        column = kwargs.get(self.format_key)
        if not self.marker_required or column is None:
            return self.marker_required
        flags = [str(f) != "raw" for f in column]
        if len(flags) != n:
            raise ValueError(f"{self.__name__}: {len(flags)} {self.format_key} values for {n} rows")
        return flags

    def _cut(self, kwargs: dict[str, Any], n: int) -> bool | list[bool]:
        """Per completion, whether the budget cut it: its last token id is not a stop id."""
        ids = kwargs.get("completion_ids")
        if self.stop_token_ids is None or ids is None:
            return False
        if len(ids) != n:
            raise ValueError(f"{self.__name__}: {len(ids)} completion_ids for {n} completions")
        return [len(row) > 0 and int(row[-1]) not in self.stop_token_ids for row in ids]

    def _contexts(self, kwargs: dict[str, Any], n: int) -> list[StepContext | None] | None:
        """Per row, the problem's family and params (an export's columns), when present."""
        params = kwargs.get("params")
        if params is None:
            return None
        families = kwargs.get("family") or [""] * n
        if len(params) != n or len(families) != n:
            raise ValueError(f"{self.__name__}: {len(params)} params values for {n} rows")
        return [StepContext("", str(f or ""), p) for f, p in zip(families, params, strict=True)]

    def _verifiers(self, kwargs: dict[str, Any], n: int) -> str | list[str]:
        if self.verifier is not None:
            return self.verifier
        column = kwargs.get(self.verifier_key)
        if column is None:
            return "math"
        return [str(v) if v else "math" for v in column]

    def __repr__(self) -> str:
        return (
            f"SieveReward(verifier={self.verifier!r}, answer_key={self.answer_key!r}, "
            f"marker_required={self.marker_required!r})"
        )


def reward_function(
    verifier: str | None = None,
    *,
    answer_key: str = "answer",
    verifier_key: str = "verifier",
    spec: RewardSpec | None = None,
    timeout: float | None = None,
    name: str = "sieve_reward",
    marker_required: bool = True,
    stop_token_ids: Sequence[int] | None = None,
) -> SieveReward:
    """A TRL reward function scoring completions with Sieve's verifiers.

    `verifier` fixes the verifier for every row; by default each row's `verifier_key` column is
    used (falling back to "math"). `answer_key` names the gold-answer column; `spec` weights the
    reward components and `timeout` bounds each verification (seconds), as in `verify_batch`.
    `marker_required=False` turns off the safe chat reading (bare answers count).
    `stop_token_ids` (end-of-sequence and pad ids) lets it tell a completion cut at the budget
    from a finished one (module docstring).
    """
    return SieveReward(
        verifier,
        answer_key=answer_key,
        verifier_key=verifier_key,
        spec=spec,
        timeout=timeout,
        name=name,
        marker_required=marker_required,
        stop_token_ids=stop_token_ids,
    )
