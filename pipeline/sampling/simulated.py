"""A sampler with known pass rates, for tests and benchmarks of selection and curation.

`SimulatedSampler(answers, pass_rate)` answers prompt p correctly with probability
`pass_rate[p]` (its gold answer) and otherwise with a wrong number ("9" + the answer); draws
are seeded from (params.seed, prompt, sample index), so they do not depend on batching or order.

Test: used by `tests/test_curate.py`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from grpo_core.seeds import derive_seed
from pipeline.sampling.base import Completion, SamplingParams, check_n


def _uniform(*parts: object) -> float:
    return derive_seed(*parts, bits=56) / float(1 << 56)


class SimulatedSampler:
    backend = "simulated"

    def __init__(
        self,
        answers: Mapping[str, str],
        pass_rate: Mapping[str, float],
        model_name: str = "simulated",
    ):
        self.answers, self.pass_rate, self.model_name = answers, pass_rate, model_name
        self.calls = 0  # completions drawn, for tests and cost accounting

    def sample(
        self, prompts: Sequence[str], n: int, params: SamplingParams
    ) -> list[list[Completion]]:
        check_n(n)
        self.calls += len(prompts) * n
        out = []
        for prompt in prompts:
            p = self.pass_rate[prompt]
            right = [_uniform(params.seed, prompt, i) < p for i in range(n)]
            gold = self.answers[prompt]
            texts = [gold if ok else "9" + gold.lstrip("-") for ok in right]  # wrong, numeric
            # no token ids (nothing tokenised them): the ledger stores NULL, not placeholders
            out.append([Completion(t, (), "stop", n_tokens=len(t)) for t in texts])
        return out
