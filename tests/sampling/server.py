"""A small OpenAI-compatible completions server over any `Sampler` (standard library only).

`serve(sampler)` starts `POST /v1/completions`, `GET /v1/models` and `GET /health` (vLLM's
liveness route: 200, empty object) on a background thread and returns `(server, base_url)`; stop
it with `server.shutdown(); server.server_close()` (or use `running(sampler)` as a context
manager). The tests point `OpenAISampler` at it; for a quick local endpoint over a model
folder, from the repository root: `python -m tests.sampling.server --model PATH --port 8000`.
Test code, not shipped: it lives under tests/ and the package never imports it.

The request becomes `SamplingParams` and one `sampler.sample(prompts, n, params)` call; a prompt
list gives choice indices `j * n + i`. Each choice has index, text and finish_reason; `logprobs`
(when the request asks for logprobs and the sampler gave a logprob) is
`{"token_logprobs": [summed logprob]}`: a single element holding the whole answer's sum, so a
client that sums `token_logprobs` gets the sampler's value back. `token_ids` is added to each
choice when the request sets `return_token_ids` (vLLM's extension). `usage.prompt_tokens` is 0:
the server does not tokenize.

For tests, `server.faults` is an iterator of HTTP status codes: each request first takes the next
one and, if there is one, answers it with an error instead (`iter([503, 503])`: two failures then
normal answers; `itertools.repeat(503)`: fail forever). `server.requests` counts requests seen,
`server.last_body` keeps the last completions request's JSON body.
Sampler calls are serialized by a lock unless `serialize=False` (the HF sampler is not
thread-safe: it seeds torch's global generator).

Test: `pytest tests/sampling/test_openai.py tests/sampling/test_training_sampler.py`.
"""

from __future__ import annotations

import argparse
import json
import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from pipeline.core.errors import SieveError
from pipeline.sampling.base import Completion, Sampler, SamplingParams


class BadRequest(Exception):
    """A request the server answers with 4xx; carries the status."""

    def __init__(self, message: str, status: int = HTTPStatus.BAD_REQUEST) -> None:
        super().__init__(message)
        self.status = status


class SamplerServer(ThreadingHTTPServer):
    """A threading HTTP server that holds the sampler, the fault queue and a request counter."""

    daemon_threads = True

    def __init__(
        self,
        address: tuple[str, int],
        sampler: Sampler,
        faults: Iterable[int] = (),
        serialize: bool = True,
    ) -> None:
        super().__init__(address, CompletionsHandler)
        self.sampler = sampler
        self.faults: Iterator[int] = iter(faults)
        self.requests = 0
        self.last_body: dict[str, Any] | None = None
        self._count_lock = threading.Lock()
        self.sample_lock: AbstractContextManager[Any] = (
            threading.Lock() if serialize else nullcontext()
        )

    def next_fault(self) -> int | None:
        """Count this request and take the next injected status, if any."""
        with self._count_lock:
            self.requests += 1
            return next(self.faults, None)


def _params(body: dict[str, Any]) -> tuple[list[str], int, SamplingParams]:
    prompt = body.get("prompt")
    prompts = [prompt] if isinstance(prompt, str) else prompt
    if not isinstance(prompts, list) or not prompts or not all(isinstance(p, str) for p in prompts):
        raise BadRequest("prompt must be a string or a non-empty list of strings")
    stop = body.get("stop") or ()
    stop = (stop,) if isinstance(stop, str) else tuple(stop)
    top_k = body.get("top_k") or 0
    seed = body.get("seed")
    try:
        params = SamplingParams(
            temperature=float(body.get("temperature", 1.0)),
            top_p=float(body.get("top_p", 1.0)),
            top_k=max(int(top_k), 0),  # vLLM's -1 means no filter, as our 0 does
            max_new_tokens=int(body.get("max_tokens") or 16),  # OpenAI's default
            seed=int(seed) if seed is not None else 0,
            stop=stop,
        )
    except (TypeError, ValueError) as exc:
        raise BadRequest(f"bad sampling parameter: {exc}") from None
    n = body.get("n", 1)
    if not isinstance(n, int) or n < 1:
        raise BadRequest(f"n must be an integer >= 1, got {n!r}")
    return prompts, n, params


def _choice(index: int, completion: Completion, body: dict[str, Any]) -> dict[str, Any]:
    choice: dict[str, Any] = {
        "index": index,
        "text": completion.text,
        "finish_reason": completion.finish_reason,
        "logprobs": None,
    }
    if body.get("logprobs") is not None and completion.logprob is not None:
        choice["logprobs"] = {"token_logprobs": [completion.logprob]}
    if body.get("return_token_ids"):
        choice["token_ids"] = list(completion.token_ids)
    return choice


def completions_answer(server: SamplerServer, body: dict[str, Any]) -> dict[str, Any]:
    """Run the sampler for one completions request and shape the OpenAI answer."""
    model = body.get("model")
    if model is not None and model != server.sampler.model_name:
        raise BadRequest(f"the model `{model}` does not exist", HTTPStatus.NOT_FOUND)
    prompts, n, params = _params(body)
    with server.sample_lock:
        try:
            groups = server.sampler.sample(prompts, n, params)
        except SieveError as exc:
            raise BadRequest(str(exc)) from None
    choices = [
        _choice(j * n + i, completion, body)
        for j, group in enumerate(groups)
        for i, completion in enumerate(group)
    ]
    completion_tokens = sum(c.n_tokens for group in groups for c in group)
    return {
        "id": f"cmpl-{time.monotonic_ns()}",
        "object": "text_completion",
        "created": int(time.time()),
        "model": server.sampler.model_name,
        "choices": choices,
        "usage": {
            "prompt_tokens": 0,
            "completion_tokens": completion_tokens,
            "total_tokens": completion_tokens,
        },
    }


def models_answer(server: SamplerServer) -> dict[str, Any]:
    model = {"id": server.sampler.model_name, "object": "model", "owned_by": "sieve"}
    return {"object": "list", "data": [model]}


def error_body(status: int, message: str) -> dict[str, Any]:
    kind = "invalid_request_error" if status < 500 else "server_error"
    return {"error": {"message": message, "type": kind, "code": status}}


class CompletionsHandler(BaseHTTPRequestHandler):
    """Routes `/v1/completions` and `/v1/models`; everything else is 404."""

    server: SamplerServer

    def do_GET(self) -> None:
        if self._faulted():
            return
        if self.path.rstrip("/") == "/v1/models":
            self._send(HTTPStatus.OK, models_answer(self.server))
        elif self.path.rstrip("/") == "/health":
            self._send(HTTPStatus.OK, {})
        else:
            self._send_error(HTTPStatus.NOT_FOUND, f"no route {self.path}")

    def do_POST(self) -> None:
        body = self._read_json()  # read first so that a fault answer leaves a clean connection
        self.server.last_body = body
        if self._faulted():
            return
        if self.path.rstrip("/") != "/v1/completions":
            self._send_error(HTTPStatus.NOT_FOUND, f"no route {self.path}")
            return
        try:
            if body is None:
                raise BadRequest("the body is not a JSON object")
            self._send(HTTPStatus.OK, completions_answer(self.server, body))
        except BadRequest as exc:
            self._send_error(exc.status, str(exc))
        except Exception as exc:  # a sampler bug: answer 500 rather than drop the connection
            self._send_error(HTTPStatus.INTERNAL_SERVER_ERROR, f"{type(exc).__name__}: {exc}")

    def _read_json(self) -> dict[str, Any] | None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw)
        except ValueError:
            return None
        return body if isinstance(body, dict) else None

    def _faulted(self) -> bool:
        status = self.server.next_fault()
        if status is None:
            return False
        self._send_error(status, f"injected fault {status}")
        return True

    def _send_error(self, status: int, message: str) -> None:
        self._send(status, error_body(status, message))

    def _send(self, status: int, payload: dict[str, Any]) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:  # quiet: tests read no access log
        pass


def serve(
    sampler: Sampler,
    host: str = "127.0.0.1",
    port: int = 0,
    *,
    faults: Iterable[int] = (),
    serialize: bool = True,
) -> tuple[SamplerServer, str]:
    """Serve on a daemon thread (port 0: a free one); returns the server and its base URL."""
    server = SamplerServer((host, port), sampler, faults, serialize)
    thread = threading.Thread(
        target=server.serve_forever, args=(0.05,), name="sieve-sampler-server"
    )
    thread.daemon = True
    thread.start()
    bound_host, bound_port = server.server_address[:2]
    return server, f"http://{bound_host!s}:{bound_port}"


@contextmanager
def running(sampler: Sampler, **options: Any) -> Iterator[tuple[SamplerServer, str]]:
    """`with running(sampler) as (server, url):` serves for the block, then stops."""
    server, url = serve(sampler, **options)
    try:
        yield server, url
    finally:
        server.shutdown()
        server.server_close()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Serve a local model folder over /v1/completions")
    parser.add_argument("--model", required=True, help="a local causal-LM folder")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--device", default=None, help="cpu, cuda, ... (default: cuda if present)")
    args = parser.parse_args(argv)
    from pipeline.sampling.hf import HFSampler  # torch loads only for the CLI

    try:
        sampler = HFSampler(args.model, device=args.device)
    except SieveError as exc:
        raise SystemExit(f"error: {exc}") from None
    server = SamplerServer((args.host, args.port), sampler)
    print(f"serving {sampler.model_name} at http://{args.host}:{server.server_address[1]}/v1")
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


if __name__ == "__main__":
    main()
