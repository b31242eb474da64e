"""`sieve train` / `sieve loop`: which model and which recipe, decided before Prefect starts.

In-process (`flows.cli.main`), with the Prefect flow replaced by a recorder: these tests check
what the CLI hands the flow (model, settings, backend) and what it prints; the flows themselves
are tested under `tests/flows/`.
"""

from __future__ import annotations

import json
import shutil
import sys
import tomllib
from collections.abc import Callable
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest

from grpo_core.config import GRPOConfig
from pipeline.jobs.train.settings import RECIPES, TINY_RECIPE, load_settings
from pipeline.policy.model import SIEVE_META, folder_revision
from pipeline.store import Ledger
from tests.cli_runner import run_cli


def one_error_line(code: int, err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 1 and len(lines) == 1 and lines[0].startswith("error: "), err
    return lines[0]


@pytest.fixture(autouse=True)
def own_prefect_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PREFECT_HOME", str(tmp_path / "prefect"))  # nothing leaks out


@pytest.fixture
def curated_home(
    tmp_path: Path, tiny_model_dir: Path, write_curriculum: Callable[..., object]
) -> Callable[[Path | None], Path]:
    """A home with curriculum `cur-test` curated with `model` (not under <home>/models/tiny)."""

    def make(model: Path | None) -> Path:
        home = tmp_path / "home"
        with Ledger.open(home) as ledger:
            write_curriculum(ledger)
            revision = folder_revision(model) if model and model.exists() else "r"
            ledger.run(
                "UPDATE curricula SET model = $m, model_revision = $r",
                {"m": str(model) if model else None, "r": revision},
            )
        return home

    return make


def chat_copy(model_dir: Path, dest: Path) -> Path:
    shutil.copytree(model_dir, dest)
    meta = json.loads((dest / SIEVE_META).read_text())
    (dest / SIEVE_META).write_text(json.dumps({**meta, "prompt_format": "chat"}))
    return dest


@pytest.fixture
def flow_calls(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Records what `sieve train` hands the train flow instead of training: the resolved job's
    curriculum, model, home and settings and the run's options (`TrainParams`' fields)."""
    import flows.commands.common
    import flows.train

    calls: list[Any] = []

    def fake(params: Any, runtime: Any = None) -> dict[str, Any]:
        job = params.job
        resolved = {"curriculum": job.curriculum_id, "model": str(job.model), "home": job.home}
        options = {
            k: getattr(params, k) for k in ("backend", "base_urls", "engine", "max_steps", "resume")
        }
        calls.append(SimpleNamespace(**resolved, settings=job.settings, job=job, **options))
        same = {"greedy": 0.1, "sampled": 0.1}
        return {
            "train_id": "train-x", "steps": 1, "rollouts": 8, "seconds": 0.1, "before": [],
            "after": [], "heldout_before": same, "heldout_after": same,
            "checkpoint": "ckpt", "final_revision": "rev",
        }  # fmt: skip

    monkeypatch.setattr(flows.train, "train_flow", fake)
    monkeypatch.setattr(flows.commands.common, "start_flows", lambda home: None)
    return calls


def test_train_without_model_trains_the_curriculum_model_with_its_recipe(
    tiny_model_dir: Path,
    tmp_path: Path,
    curated_home: Callable[[Path | None], Path],
    flow_calls: list[Any],
    capsys: pytest.CaptureFixture[str],
) -> None:
    model = tmp_path / "elsewhere" / "tiny-copy"
    shutil.copytree(tiny_model_dir, model)
    home = curated_home(model)
    assert not (home / "models" / "tiny").exists()  # not the tiny fallback of old
    code, out, err = run_cli(["train", "--home", str(home)], capsys)
    assert code == 0, err
    (params,) = flow_calls
    assert params.model == str(model) and params.curriculum == "cur-test"
    assert params.settings == TINY_RECIPE and params.backend == "hf"
    line = next(x for x in out.splitlines() if x.startswith("train cur-test"))
    assert "tiny_train.toml" in line and str(model) in line and "curated with" in line


def test_sieve_train_resolves_its_job_once(
    tiny_model_dir: Path,
    tmp_path: Path,
    curated_home: Callable[[Path | None], Path],
    flow_calls: list[Any],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 49: `sieve train --config F --steps 3` reads F once, builds its GRPOConfig once
    (and the one --steps copy), decides the home once ($SIEVE_HOME here) and resolves the
    curriculum once, and hands the flow that job (benchmarks/settings_sprawl.py counts the
    whole command, the flow included)."""
    import pipeline.core.home
    import pipeline.core.tomlconfig
    import pipeline.store.ids

    home = curated_home(tiny_model_dir)
    config = tmp_path / "f.toml"
    config.write_text("[grpo]\nlr = 5e-5\n")
    monkeypatch.setenv("SIEVE_HOME", str(home))
    calls: list[str] = []

    def count(module: ModuleType, name: str, counts: Callable[..., bool]) -> None:
        original = vars(module)[name]

        def counted(*args: Any, **kwargs: Any) -> Any:
            calls.extend([name] if counts(*args, **kwargs) else [])
            return original(*args, **kwargs)

        for mod in list(sys.modules.values()):  # wherever it was imported by name
            if isinstance(mod, ModuleType) and vars(mod).get(name) is original:
                monkeypatch.setattr(mod, name, counted)

    count(pipeline.core.home, "resolve_home", lambda home=None: home is None)  # a decision
    count(pipeline.store.ids, "resolve_curriculum", lambda *a: True)
    count(pipeline.core.tomlconfig, "read_config_text", lambda *a: True)
    init = GRPOConfig.__init__

    def built(self: GRPOConfig, **kwargs: Any) -> None:
        calls.append("GRPOConfig")
        init(self, **kwargs)

    monkeypatch.setattr(GRPOConfig, "__init__", built)
    code, _, err = run_cli(["train", "--config", str(config), "--steps", "3"], capsys)
    assert code == 0, err
    assert sorted(calls) == [
        "GRPOConfig", "GRPOConfig", "read_config_text", "resolve_curriculum", "resolve_home"
    ]  # fmt: skip
    (params,) = flow_calls
    assert params.home == home and params.curriculum == "cur-test"
    cfg = params.settings.grpo_config()
    assert (cfg.lr, cfg.total_steps) == (
        5e-5,
        3,
    ) and params.job.recipe == f"recipe {config} (--config)"


def test_a_chat_model_gets_the_real_recipe_not_the_tiny_one(
    tiny_model_dir: Path,
    tmp_path: Path,
    curated_home: Callable[[Path | None], Path],
    flow_calls: list[Any],
    capsys: pytest.CaptureFixture[str],
) -> None:
    home = curated_home(chat_copy(tiny_model_dir, tmp_path / "chat"))
    argv = [
        "train",
        "--home",
        str(home),
        "--steps",
        "3",
        "--backend",
        "vllm",
        "--engine",
        "kv_cache_gib=2",
    ]
    code, out, err = run_cli(argv, capsys)
    assert code == 0, err
    (params,) = flow_calls
    real = load_settings(RECIPES / "real_train.toml")
    assert params.settings == real.with_steps(3)
    cfg = params.settings.grpo_config()
    assert cfg.max_new_tokens == real.grpo_config().max_new_tokens >= 256  # not 16
    assert params.backend == "vllm" and params.engine.kv_cache_gib == 2
    assert "real_train.toml" in out


def test_print_config_shows_the_effective_settings_and_trains_nothing(
    tiny_model_dir: Path,
    tmp_path: Path,
    curated_home: Callable[[Path | None], Path],
    flow_calls: list[Any],
    capsys: pytest.CaptureFixture[str],
) -> None:
    home = curated_home(chat_copy(tiny_model_dir, tmp_path / "chat"))
    code, out, err = run_cli(["train", "--print-config", "--home", str(home)], capsys)
    assert code == 0, err
    assert flow_calls == []
    shown = tomllib.loads(out)
    real = tomllib.loads((RECIPES / "real_train.toml").read_text())
    assert shown["grpo"]["lr"] == real["grpo"]["lr"]
    assert shown["grpo"]["max_new_tokens"] == real["grpo"]["max_new_tokens"] >= 256
    assert shown["rollouts_per_step"] == real["rollouts_per_step"]
    assert set(shown["grpo"]) == set(GRPOConfig.__dataclass_fields__)  # resolved: every field
    assert "real_train.toml" in out.splitlines()[1]
    # --config FILE alone on GRPOConfig's defaults: nothing merged under it
    own = tmp_path / "own.toml"
    own.write_text("[grpo]\nlr = 5e-5\n")
    argv = ["train", "--print-config", "--config", str(own), "--home", str(home)]
    code, out, err = run_cli(argv, capsys)
    assert code == 0, err
    shown = tomllib.loads(out)
    defaults = GRPOConfig()
    assert shown["grpo"]["lr"] == 5e-5
    assert shown["grpo"]["max_new_tokens"] == defaults.max_new_tokens
    assert shown["grpo"]["beta_schedule"] == defaults.beta_schedule
    assert shown["rollouts_per_step"] == 128  # TrainSettings' default


def test_a_missing_curriculum_model_is_one_error_line(
    tmp_path: Path,
    curated_home: Callable[[Path | None], Path],
    flow_calls: list[Any],
    capsys: pytest.CaptureFixture[str],
) -> None:
    home = curated_home(tmp_path / "gone")
    for extra in ([], ["--print-config"]):
        code, _, err = run_cli(["train", "--home", str(home), *extra], capsys)
        line = one_error_line(code, err)
        assert str(tmp_path / "gone") in line and "--model" in line
    assert flow_calls == []


def test_an_old_curriculum_without_a_model_falls_back_and_says_so(
    tiny_model_dir: Path,
    curated_home: Callable[[Path | None], Path],
    flow_calls: list[Any],
    capsys: pytest.CaptureFixture[str],
) -> None:
    home = curated_home(None)
    code, _, err = run_cli(["train", "--home", str(home)], capsys)
    assert "no tiny policy" in one_error_line(code, err)
    shutil.copytree(tiny_model_dir, home / "models" / "tiny")
    code, out, err = run_cli(["train", "--home", str(home)], capsys)
    assert code == 0, err
    assert flow_calls[0].model == str(home / "models" / "tiny")
    assert "records no model: using the tiny policy" in out


def test_loop_takes_model_backend_and_base_url(
    tiny_model_dir: Path,
    tmp_path: Path,
    curated_home: Callable[[Path | None], Path],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    import flows.loop

    calls: list[dict[str, Any]] = []

    def fake_loop(home: Any, nights: int, cfg: Any, settings: Any, *args: Any, **kw: Any) -> list:
        calls.append({"nights": nights, "settings": settings, **kw})
        return []

    monkeypatch.setattr(flows.loop, "loop", fake_loop)
    model = chat_copy(tiny_model_dir, tmp_path / "chat")
    home = curated_home(None)
    url = "http://127.0.0.1:9/v1"
    argv = ["loop", "--nights", "1", "--model", str(model), "--backend", "openai"]
    code, out, err = run_cli([*argv, "--base-url", url, "--home", str(home)], capsys)
    assert code == 0, err
    (call,) = calls
    assert call["model"] == str(model) and call["backend"] == "openai"
    assert call["base_urls"] == [url]
    assert call["settings"] == load_settings(RECIPES / "real_train.toml")  # the model's recipe
    assert f"night 1 starts from {model}" in out
    code, _, err = run_cli(["loop", "--model", str(tmp_path / "nope"), "--home", str(home)], capsys)
    assert "nope" in one_error_line(code, err)


def test_eval_and_curate_without_model_follow_the_curated_models_lineage(
    tiny_model_dir: Path,
    tmp_path: Path,
    curated_home: Callable[[Path | None], Path],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`sieve curate --model M` -> `sieve train` -> `sieve eval`: M is named once; eval (and the
    next curation) take the newest checkpoint trained from M, not the tiny policy."""
    import pipeline.jobs.curate.curation
    from tests.test_train import register

    model = tmp_path / "elsewhere" / "tiny-copy"
    shutil.copytree(tiny_model_dir, model)
    home = curated_home(model)
    with Ledger.open(home) as ledger:
        paths = register(ledger, tmp_path, "train-a", folder_revision(model), [(2, "R1", 3)])
    shutil.rmtree(paths["R1"])  # a checkpoint is a whole model folder: curate reads its format
    shutil.copytree(model, paths["R1"])
    loaded: list[Path] = []

    class Stop(Exception):
        pass

    def fake_policy_for(folder: Path, *args: Any, **kw: Any) -> Any:
        loaded.append(Path(folder))
        raise Stop

    monkeypatch.setattr(pipeline.jobs.curate.curation, "policy_for", fake_policy_for)
    for argv in (["eval", "--per-level", "1"], ["curate", "--n", "4"]):
        with pytest.raises(Stop):
            run_cli([*argv, "--home", str(home)], capsys)
    assert loaded == [paths["R1"], paths["R1"]]
    lines = capsys.readouterr().out.splitlines()  # one line each: the console is 1000 wide
    said = f"model: {paths['R1']} (the newest checkpoint trained from {model}"
    assert sum(line.startswith(said) for line in lines) == 2, lines


@pytest.mark.parametrize(
    ("sampling", "differs"),
    [
        ({"temperature": 1.0}, ["temperature 1 (curated) vs 0.6", "max_new_tokens 512 (curated)"]),
        ({"temperature": 0.6, "top_p": 0.9, "max_new_tokens": 256}, ["top-p 0.9 (curated) vs 1"]),
        ({"temperature": 0.6, "max_new_tokens": 256}, []),
    ],
)
def test_train_at_other_sampling_than_curated_warns_and_strict_refuses(
    tiny_model_dir: Path,
    tmp_path: Path,
    curated_home: Callable[[Path | None], Path],
    flow_calls: list[Any],
    capsys: pytest.CaptureFixture[str],
    sampling: dict[str, Any],
    differs: list[str],
) -> None:
    """The chat recipe trains at T 0.6 / 256 tokens / top-p 1; a curriculum curated otherwise
    gets one warning line naming each difference, and --strict refuses before anything runs."""
    from pipeline.selection import CurateConfig

    home = curated_home(chat_copy(tiny_model_dir, tmp_path / "chat"))
    config = CurateConfig.model_validate({"sampling": sampling}).model_dump_json()
    with Ledger.open(home) as ledger:
        ledger.run("UPDATE curricula SET config = $c", {"c": config})
    code, _, err = run_cli(["train", "--home", str(home)], capsys)
    assert code == 0, err
    warnings = [line for line in err.splitlines() if line.startswith("warning: ")]
    assert len(warnings) == (1 if differs else 0), err
    assert all(d in warnings[0] for d in differs), warnings
    code, _, err = run_cli(["train", "--home", str(home), "--strict"], capsys)
    if differs:
        line = one_error_line(code, err)
        assert "cur-test" in line and all(d in line for d in differs), line
        assert len(flow_calls) == 1  # only the first, lenient run reached the flow
    else:
        assert code == 0 and len(flow_calls) == 2, err


# ------------------------------------------------------------------ a probe round


def gpu_out_of_memory() -> Exception:
    import torch

    return torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 ...")


@pytest.mark.parametrize(
    ("command", "failure", "needle"),
    [
        (
            "train",
            MemoryError,
            "error: out of memory (RAM): an allocation failed in `sieve train`; lower "
            "eval_per_level or eval_samples (the held-out evaluation) or rollouts_per_step",
        ),
        (
            "train",
            gpu_out_of_memory,
            "error: out of GPU memory (CUDA out of memory) in `sieve train`; lower eval_per_level",
        ),
        ("eval", MemoryError, "in `sieve eval`; lower --per-level or --samples, and re-run"),
    ],
    ids=["train RAM", "train GPU", "eval RAM"],
)
def test_running_out_of_memory_is_one_line_saying_what_to_lower(
    tiny_model_dir: Path,
    curated_home: Callable[[Path | None], Path],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    command: str,
    failure: Callable[[], Exception],
    needle: str,
) -> None:
    """An allocation that failed in a run (the probe's: training's held-out evaluation) was a
    207-line traceback; it is one line saying what ran out and what the command can lower."""
    import flows.commands.common
    import flows.commands.evaluation
    import flows.train

    def out_of_memory(*args: Any, **kwargs: Any) -> Any:
        raise failure()

    monkeypatch.setattr(flows.train, "train_flow", out_of_memory)
    monkeypatch.setattr(flows.commands.evaluation, "run_eval", out_of_memory)
    monkeypatch.setattr(flows.commands.common, "start_flows", lambda home: None)
    home = curated_home(tiny_model_dir)
    argv = [command, "--home", str(home), "--model", str(tiny_model_dir)]
    code, _, err = run_cli(argv, capsys)
    line = one_error_line(code, err)
    assert needle in line and "what was committed is kept" in line, line


def test_resuming_a_finished_run_says_so_and_changes_nothing(
    tiny_model_dir: Path,
    curated_home: Callable[[Path | None], Path],
    flow_calls: list[Any],
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`train --resume` of a run the ledger records as finished ran its evaluations again (and
    could mark the run failed); it says the run is finished, with its checkpoint, and exits 0
    without starting the flow or touching the ledger."""
    from grpo_core.checkpoint import PREFIX
    from pipeline.jobs.train.trainee import train_id_for

    home = curated_home(tiny_model_dir)
    assert run_cli(["train", "--home", str(home)], capsys)[0] == 0  # the job it resolves
    (job,) = [c.job for c in flow_calls]
    train_id = train_id_for("cur-test", folder_revision(tiny_model_dir), job.settings, "hf")
    steps = job.settings.grpo_config().total_steps
    final = home / "checkpoints" / train_id / f"{PREFIX}{steps:06d}"
    final.mkdir(parents=True)
    with Ledger.open(home) as ledger:
        ledger.run(
            "INSERT INTO train_runs (train_id, curriculum_id, status) "
            "VALUES ($t, 'cur-test', 'finished')",
            {"t": train_id},
        )
        before = {t: ledger.checksum(t) for t in ("train_runs", "train_metrics", "checkpoints")}
    code, out, err = run_cli(["train", "--resume", "--home", str(home)], capsys)
    assert code == 0 and err == "", err
    assert f"{train_id} is already finished" in out and str(final) in out, out
    assert len(flow_calls) == 1  # the flow never started
    with Ledger.open(home, read_only=True) as ledger:
        assert {t: ledger.checksum(t) for t in before} == before


def test_selection_options_set_the_recipes_selection_fields(
    tiny_model_dir: Path,
    curated_home: Callable[[Path | None], Path],
    flow_calls: list[Any],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`--selection`, `--selection-model`, `--selection-score`, `--selection-prior` (made from
    the recipe's fields, `SelectionSettings`) replace them in the recipe `sieve train` and
    `sieve loop` train with; set where nothing reads them, they are one error line."""
    import flows.loop

    home = curated_home(tiny_model_dir)
    given = ["--selection", "posterior", "--selection-model", "learning",
             "--selection-score", "ucb", "--selection-prior", "ledger"]  # fmt: skip
    code, out, err = run_cli(["train", "--print-config", *given, "--home", str(home)], capsys)
    assert code == 0, err
    shown = tomllib.loads(out)
    fields = ("selection", "selection_model", "selection_score", "selection_prior")
    assert [shown[k] for k in fields] == ["posterior", "learning", "ucb", "ledger"]
    assert shown["grpo"]["lr"] == TINY_RECIPE.grpo_config().lr  # the rest is the recipe's
    code, _, err = run_cli(["train", *given[:4], "--home", str(home)], capsys)
    assert code == 0, err
    (params,) = flow_calls
    assert (params.settings.selection, params.settings.selection_model) == ("posterior", "learning")
    assert params.settings.selection_prior == "none"
    code, _, err = run_cli(["train", "--selection-model", "learning", "--home", str(home)], capsys)
    line = one_error_line(code, err)
    assert "--selection-model learning: selection_model = 'learning' applies only" in line
    nights: list[Any] = []
    monkeypatch.setattr(
        flows.loop, "loop", lambda home, n, cfg, settings, *a, **kw: nights.append(settings) or []
    )
    argv = ["loop", "--nights", "1", "--model", str(tiny_model_dir), *given[:2]]
    code, _, err = run_cli([*argv, "--selection-score", "ucb", "--home", str(home)], capsys)
    assert code == 0, err
    (settings,) = nights
    assert (settings.selection, settings.selection_score) == ("posterior", "ucb")
    assert settings.selection_model == "static"
