"""OpenAISampler against `tests/sampling/server.py` over real HTTP on 127.0.0.1 (no mocks).

A tiny deterministic fake sampler answers most tests; the last one serves the real HFSampler over
a random tiny model and checks the HTTP path gives what a direct call gives.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from pipeline.core.errors import SieveError
from pipeline.policy.model import create_tiny_model
from pipeline.sampling import EngineOptions, make_sampler
from pipeline.sampling.base import Completion, FinishReason, SamplingParams, check_n
from pipeline.sampling.hf import HFSampler
from pipeline.sampling.openai import OpenAISampler, completions_url, request_body
from tests.sampling.server import SamplerServer, running


def client(urls: str | list[str], model: str = "fake-model", **options: Any) -> OpenAISampler:
    """An OpenAISampler with a tiny backoff, so retry tests take milliseconds."""
    return OpenAISampler(urls, model, backoff=0.001, timeout=10.0, **options)


class FakeSampler:
    """Answer i of prompt p is `p#i@t`; odd answers are cut off; logprob -i - 0.5."""

    backend = "fake"
    model_name = "fake-model"

    def __init__(self, delay: float = 0.0) -> None:
        self.delay = delay  # seconds per prompt character: longer prompts answer later

    def sample(
        self, prompts: Sequence[str], n: int, params: SamplingParams
    ) -> list[list[Completion]]:
        check_n(n)
        time.sleep(self.delay * sum(len(p) for p in prompts))
        return [[self._answer(p, i, params) for i in range(n)] for p in prompts]

    @staticmethod
    def _answer(prompt: str, i: int, params: SamplingParams) -> Completion:
        text = f"{prompt}#{i}@{params.temperature:g}"
        reason: FinishReason = "length" if i % 2 else "stop"
        return Completion(text, tuple(map(ord, text)), reason, logprob=-i - 0.5)


@pytest.fixture
def fake() -> Iterator[tuple[SamplerServer, str]]:
    with running(FakeSampler()) as served:
        yield served


def test_base_urls_are_normalised() -> None:
    for base in ("http://h:1", "http://h:1/", "http://h:1/v1", "http://h:1/v1/"):
        assert completions_url(base) == "http://h:1/v1/completions"


def test_round_trip_keeps_prompt_order_under_concurrency() -> None:
    prompts = [("x" * (12 - k)) + str(k) for k in range(12)]  # early prompts answer last
    with running(FakeSampler(delay=0.002), serialize=False) as (server, url):
        sampler = client(url, concurrency=6)
        got = sampler.sample(prompts, 3, SamplingParams(temperature=0.7, max_new_tokens=8))
    assert server.requests == len(prompts)
    assert got == [
        [FakeSampler._answer(p, i, SamplingParams(0.7)) for i in range(3)] for p in prompts
    ]
    assert [c.finish_reason for c in got[0]] == ["stop", "length", "stop"]
    assert [c.logprob for c in got[0]] == [-0.5, -1.5, -2.5]
    assert sampler.backend == "openai" and sampler.model_name == "fake-model"


def test_greedy_is_temperature_zero_with_one_answer_repeated(
    fake: tuple[SamplerServer, str],
) -> None:
    server, url = fake
    got = client(url + "/v1").sample(["q"], 3, SamplingParams(0.0))
    assert [c.text for c in got[0]] == ["q#0@0"] * 3
    assert server.last_body is not None and server.last_body["n"] == 1  # vLLM refuses n > 1


def test_without_token_ids_the_ids_are_empty(fake: tuple[SamplerServer, str]) -> None:
    _, url = fake
    sampler = client(url, return_token_ids=False)
    [[c]] = sampler.sample(["q"], 1, SamplingParams(1.0))
    assert c.token_ids == () and c.text == "q#0@1" and c.logprob == -0.5


def test_two_503s_are_retried(fake: tuple[SamplerServer, str]) -> None:
    server, url = fake
    server.faults = iter([503, 503])
    got = client(url, max_retries=4).sample(["a"], 2, SamplingParams(1.0))
    assert [c.text for c in got[0]] == ["a#0@1", "a#1@1"]
    assert server.requests == 3


def test_503_forever_gives_up_after_max_retries(fake: tuple[SamplerServer, str]) -> None:
    server, url = fake
    server.faults = itertools.repeat(503)
    sampler = client(url, max_retries=2)
    with pytest.raises(SieveError) as info:
        sampler.sample(["a"], 1, SamplingParams(1.0))
    message = str(info.value)
    assert "\n" not in message
    assert f"{url}/v1/completions" in message and "3 attempts" in message and "503" in message
    assert server.requests == 3


def test_400_raises_at_once(fake: tuple[SamplerServer, str]) -> None:
    server, url = fake
    server.faults = iter([400])
    with pytest.raises(SieveError, match=r"HTTP 400: injected fault 400$"):
        client(url).sample(["a"], 1, SamplingParams(1.0))
    assert server.requests == 1


def test_unknown_model_is_a_404_with_the_servers_message(fake: tuple[SamplerServer, str]) -> None:
    server, url = fake
    with pytest.raises(SieveError, match=r"HTTP 404: the model `other` does not exist"):
        client(url, "other").sample(["a"], 1, SamplingParams(1.0))
    assert server.requests == 1


def test_connection_refused_is_retried_then_reported() -> None:
    with running(FakeSampler()) as (_, url):
        pass  # the port is closed again
    sampler = client(url, max_retries=1)
    with pytest.raises(SieveError, match=r"gave up after 2 attempts, last: ConnectError"):
        sampler.sample(["a"], 1, SamplingParams(1.0))


def test_requests_alternate_between_servers() -> None:
    with running(FakeSampler()) as (one, url1), running(FakeSampler()) as (two, url2):
        sampler = client([url1, url2], concurrency=2)
        sampler.sample(["a", "b", "c"], 1, SamplingParams(1.0))
        assert (one.requests, two.requests) == (2, 1)
        sampler.sample(["d"], 1, SamplingParams(1.0))  # the turn carries over between calls
        assert (one.requests, two.requests) == (2, 2)


def test_n_below_one_is_rejected(fake: tuple[SamplerServer, str]) -> None:
    server, url = fake
    with pytest.raises(SieveError, match="n \\(samples per prompt\\)"):
        client(url).sample(["a"], 0, SamplingParams(1.0))
    assert server.requests == 0


class WrongCount(FakeSampler):
    def sample(
        self, prompts: Sequence[str], n: int, params: SamplingParams
    ) -> list[list[Completion]]:
        return [group[:-1] for group in super().sample(prompts, n, params)]


def test_malformed_answer_is_a_sieve_error() -> None:
    with running(WrongCount()) as (_, url):
        sampler = client(url)
        with pytest.raises(SieveError, match="malformed completions answer: expected 2 choices"):
            sampler.sample(["a"], 2, SamplingParams(1.0))


def _tiny_model(tmp_path: Path) -> str:
    path = tmp_path / "tiny"
    create_tiny_model(path, seed=0)
    return str(path)


def test_http_path_matches_hf_sampler_directly(tmp_path: Path) -> None:
    direct = HFSampler(_tiny_model(tmp_path), device="cpu")
    prompts = ["12+7=", "What is 3*4? ", "9-2="]
    params = SamplingParams(temperature=0.0, max_new_tokens=12, seed=3)
    expected = direct.sample(prompts, 2, params)
    with running(direct) as (_, url):
        got = client(url, direct.model_name, concurrency=2).sample(prompts, 2, params)
    for want_group, got_group in zip(expected, got, strict=True):
        for want, have in zip(want_group, got_group, strict=True):
            # the direct call pads prompts into one batch, HTTP sends one prompt per request,
            # so the summed logprob may differ in the last float digits
            assert (have.text, have.token_ids, have.finish_reason) == (
                want.text,
                want.token_ids,
                want.finish_reason,
            )
            assert have.logprob == pytest.approx(want.logprob, abs=1e-4)


def test_token_count_falls_back_to_the_logprob_tokens() -> None:
    from pipeline.sampling.openai import parse_choices

    choice = {
        "index": 0,
        "text": "42",
        "finish_reason": "stop",
        "logprobs": {"tokens": ["4", "2"], "token_logprobs": [-0.25, -0.5]},
    }
    [completion] = parse_choices({"choices": [choice]}, 1)
    assert completion.token_ids == () and completion.n_tokens == 2
    assert completion.logprob == -0.75


def test_no_seed_is_sent_unless_asked(fake: tuple[SamplerServer, str]) -> None:
    server, url = fake
    params = SamplingParams(1.0, seed=11)
    client(url).sample(["a"], 1, params)  # auto: a vLLM CPU server dies of seeded requests
    assert server.last_body is not None and "seed" not in server.last_body
    client(url, per_request_seed=True).sample(["a"], 1, params)
    assert server.last_body is not None and server.last_body["seed"] == 11
    assert "seed" not in request_body("m", "p", 1, params, return_token_ids=False)


class Tracking(FakeSampler):
    """Counts the requests in flight at once."""

    def __init__(self) -> None:
        super().__init__(delay=0.01)
        self.now = self.most = 0
        self.lock = threading.Lock()

    def sample(
        self, prompts: Sequence[str], n: int, params: SamplingParams
    ) -> list[list[Completion]]:
        with self.lock:
            self.now += 1
            self.most = max(self.most, self.now)
        try:
            return super().sample(prompts, n, params)
        finally:
            with self.lock:
                self.now -= 1


def test_concurrency_is_per_server() -> None:
    one, two = Tracking(), Tracking()
    with (
        running(one, serialize=False) as (_, url1),
        running(two, serialize=False) as (_, url2),
    ):
        client([url1, url2], concurrency=2).sample(
            [f"prompt{k}" for k in range(12)], 1, SamplingParams(1.0)
        )
    assert (one.most, two.most) == (2, 2)  # both servers busy at their limit, never above


def test_health_check_passes_and_names_the_url_when_it_fails(
    fake: tuple[SamplerServer, str],
) -> None:
    _, url = fake
    client(url).check_health()
    with pytest.raises(SieveError) as info:
        client(url, "other").check_health()
    assert str(info.value) == f"{url}/v1/models: serves fake-model, not other"
    with running(FakeSampler()) as (_, closed):
        pass
    with pytest.raises(SieveError) as info:
        client([url, closed]).check_health()
    message = str(info.value)
    assert message.startswith(f"{closed}/v1/models: not reachable (ConnectError")
    assert "\n" not in message


def test_health_check_waits_for_a_server_that_is_starting() -> None:
    with running(FakeSampler()) as (server, url):
        server.faults = iter([503, 503])  # "still loading the model", twice
        client(url).check_health(wait=5.0, poll=0.01)
        assert server.requests == 3


def test_make_sampler_checks_the_servers_and_passes_the_seed_choice(
    fake: tuple[SamplerServer, str],
) -> None:
    _, url = fake
    sampler = make_sampler("openai", "fake-model", base_urls=[url])
    assert isinstance(sampler, OpenAISampler) and sampler.per_request_seed is False
    engine = EngineOptions(per_request_seed=True)
    sampler = make_sampler("openai", "fake-model", base_urls=[url], engine=engine)
    assert isinstance(sampler, OpenAISampler) and sampler.per_request_seed is True
    with pytest.raises(SieveError, match="serves fake-model, not nope"):
        make_sampler("openai", "nope", base_urls=[url])
