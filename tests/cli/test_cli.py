"""The `sieve` command line, run as a user would (subprocesses): output and one-line errors; and
where the shared option blocks (`flows.cli.options`) sit in each command's options."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import polars as pl
import pytest

from flows import cli
from pipeline.store import Ledger
from tests.cli_runner import run_cli, shown_frames


def sieve(*args: str, home: Path) -> subprocess.CompletedProcess[str]:
    """Run `sieve ARGS`; commands that use the ledger get `--home HOME`."""
    uses_home = {"generate", "ingest", "sql", "stats", "eval", "bootstrap", "curate", "curriculum"}
    extra = ["--home", str(home)] if args[0] in uses_home else []
    return subprocess.run(
        [sys.executable, "-m", "flows.cli", *args, *extra],
        capture_output=True,
        text=True,
        timeout=120,
    )


SAMPLING_OPTIONS = ["--max-new-tokens", "--temperature", "--top-p", "--stop"]
SELECTION_OPTIONS = [
    "--selection", "--selection-model", "--selection-score", "--selection-prior",
    "--selection-target-share",
]  # fmt: skip


@pytest.mark.parametrize(
    ("command", "before", "block", "after"),
    [
        ("curate", "--ingested", [*SAMPLING_OPTIONS, "--engine"], "--home"),
        ("eval", "--seed", [*SAMPLING_OPTIONS, "--engine"], "--home"),
        ("train", "--base-url", ["--engine"], "--print-config"),
        ("loop", "--base-url", ["--engine"], "--home"),
        ("train", "--steps", SELECTION_OPTIONS, "--resume"),
        ("loop", "--steps", SELECTION_OPTIONS, "--start"),
        ("plan", "--train-config", SELECTION_OPTIONS[1:3], "--raw-answers"),
    ],
)
def test_option_blocks_take_the_place_of_their_parameter(
    command: str, before: str, block: list[str], after: str
) -> None:
    import typer

    from flows.cli import app

    group = typer.main.get_group(app)
    names = [param.opts[0] for param in group.commands[command].params]
    start = names.index(before)
    assert names[start : start + len(block) + 2] == [before, *block, after]


def test_block_options_are_the_settings_objects_fields() -> None:
    """--temperature & co. are generated from SamplingConfig's fields and `--engine`'s keys are
    EngineOptions' fields: same names, the field's description as help, values handed back as
    the settings object (a bad one is one error line)."""
    import dataclasses

    import typer

    from flows.cli import app
    from flows.cli.options import ENGINE, SAMPLING
    from pipeline.core.errors import SieveError
    from pipeline.sampling import EngineOptions
    from pipeline.sampling.budget import SamplingConfig

    params = {p.opts[0]: p for p in typer.main.get_group(app).commands["curate"].params}
    for name, info in SamplingConfig.model_fields.items():
        assert str(info.description) in str(params[f"--{name.replace('_', '-')}"].help)
    helps = {f.name: f.metadata["help"] for f in dataclasses.fields(EngineOptions) if f.metadata}
    assert set(helps) == set(ENGINE.fields)
    for name in helps:
        assert name in str(params["--engine"].help)
    given = SAMPLING.with_given({"temperature": 0.6, "top_p": None, "stop": ["###"]})
    assert given.overrides() == {"temperature": 0.6, "stop": ("###",)}
    pairs = ["kv_cache_gib=2,max-model-len=1024", "dtype=float32"]
    assert ENGINE.with_given({"engine_pairs": pairs}).options() == EngineOptions(
        kv_cache_gib=2.0, max_model_len=1024, dtype="float32"
    )
    assert ENGINE.with_given({"engine_pairs": None}).options() == EngineOptions()
    for bad, needle in [
        (["dtype=int3"], "invalid engine option"),
        (["kv_cache=2"], "KEY one of gpu_memory_utilization"),
        (["max_model_len"], "expected KEY=VALUE"),
        (["max_model_len=big"], "max_model_len takes an integer"),
        (["max_model_len=0"], "invalid engine option"),
    ]:
        with pytest.raises(SieveError, match=needle):
            ENGINE.with_given({"engine_pairs": bad}).options()


def test_a_bad_engine_pair_is_one_error_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    Ledger.open(tmp_path).close()
    argv = ["eval", "--backend", "vllm", "--engine", "kv=1", "--home", str(tmp_path)]
    code, _, err = run_cli(argv, capsys)
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 1 and len(lines) == 1 and lines[0].startswith("error: "), err
    assert "--engine" in lines[0] and "kv_cache_gib" in lines[0]


def one_error_line(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode != 0
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ")
    assert "Traceback" not in result.stderr
    return lines[0]


def test_generate_writes_problems_and_prints_counts_by_level(tmp_path: Path) -> None:
    args = ("generate", "--family", "arith", "--levels", "2-4", "--n", "300", "--seed", "0")
    result = sieve(*args, home=tmp_path)
    assert result.returncode == 0, result.stderr
    for level in ("2", "3", "4"):
        assert f"│ arith  │ {level}" in result.stdout
    with Ledger.open(tmp_path, read_only=True) as led:
        counts = led.sql("SELECT level, count(*) AS n FROM problems GROUP BY 1 ORDER BY 1")
    assert counts.rows() == [(2, 100), (3, 100), (4, 100)]
    again = sieve(*args, home=tmp_path)
    assert "(0 new)" in again.stdout


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (("generate", "--family", "nope"), "valid: arith, linear, modular, word"),
        (("generate", "--family", "arith", "--levels", "99"), "not in arith levels"),
        (("sql", "DROP TABLE problems"), "read-only"),
        (("sql", "SELEC 1"), "invalid SQL"),
        (("sql", "SELECT * FROM no_such_table"), "query failed"),
        (("sql", "SELECT 1", "--format", "parquet"), "--output"),
        (("verify", "--answer", "1", "--completion", "1", "--verifier", "nope"), "nope"),
        # these three load torch and the model code in the child: 8-9 s each
        pytest.param(
            ("eval", "--model", "/nonexistent/model"),
            "does not exist",
            marks=pytest.mark.integration,
        ),
        pytest.param(
            ("eval", "--samples", "0"),
            "--samples must be an integer in [1, 2147483647], got 0",
            marks=pytest.mark.integration,
        ),
        pytest.param(
            ("bootstrap", "--max-minutes", "0"),
            "--max-minutes must be a finite number > 0",
            marks=pytest.mark.integration,
        ),
    ],
)
def test_bad_input_gives_one_clear_line(tmp_path: Path, args: tuple[str, ...], needle: str) -> None:
    Ledger.open(tmp_path).close()  # an empty ledger: read commands refuse a home without one
    assert needle in one_error_line(sieve(*args, home=tmp_path))


@pytest.mark.parametrize("argv", [[], ["models"], ["curriculum"]], ids=["sieve", "models", "curr"])
def test_a_bare_command_group_prints_its_help_not_an_empty_error(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    """Bare `sieve` (or `sieve models`) printed its help and then `error: ` with nothing after
    it; it prints the help alone and exits 2, as Click does for a group called without a
    command."""
    code, out, err = run_cli(argv, capsys)
    assert code == 2
    assert f"Usage: sieve {' '.join(argv)}".rstrip() in " ".join(out.split())
    assert "error" not in err and not err.strip(), err


def test_drop_is_refused_and_the_table_stays(tmp_path: Path) -> None:
    sieve("generate", "--family", "linear", "--levels", "1", "--n", "20", home=tmp_path)
    one_error_line(sieve("sql", "DROP TABLE problems", home=tmp_path))
    with Ledger.open(tmp_path, read_only=True) as led:
        assert led.checksum("problems")[0] == 20


def test_malformed_jsonl_names_file_and_line_and_imports_nothing(tmp_path: Path) -> None:
    good = json.dumps({"q": "What is 2+2?", "a": "#### 4"})
    path = tmp_path / "bad.jsonl"
    path.write_text(f"{good}\n{good.replace('2+2', '3+3')}\n{{not json\n")
    Ledger.open(tmp_path).close()  # so that "imports nothing" can be read back below
    line = one_error_line(
        sieve("ingest", str(path), "--question-field", "q", "--answer-field", "a", home=tmp_path)
    )
    assert "bad.jsonl:3" in line
    with Ledger.open(tmp_path, read_only=True) as led:
        assert led.checksum("problems")[0] == 0


def test_ingest_gsm8k_style_answers(tmp_path: Path) -> None:
    path = tmp_path / "gsm.jsonl"
    rows = [{"q": "Sum?", "a": "3 + 4 = 7 apples\n#### 1,234"}, {"q": "Half?", "a": "1/2"}]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    result = sieve(
        "ingest", str(path), "--question-field", "q", "--answer-field", "a", home=tmp_path
    )
    assert result.returncode == 0, result.stderr
    with Ledger.open(tmp_path, read_only=True) as led:
        answers = sorted(led.sql("SELECT answer FROM problems")["answer"].to_list())
    assert answers == ["1/2", "1234"]


def test_ledger_locked_by_another_writer_is_one_line(tmp_path: Path, lock_holder) -> None:
    Ledger.open(tmp_path).close()
    with lock_holder(tmp_path / "sieve.duckdb"):
        line = one_error_line(sieve("generate", "--family", "arith", "--n", "5", home=tmp_path))
    assert "locked by another writer" in line


@pytest.mark.parametrize("fmt", ["csv", "json", "parquet", "table"])
def test_sql_output_formats(tmp_path: Path, fmt: str) -> None:
    sieve("generate", "--family", "modular", "--levels", "1-2", "--n", "10", home=tmp_path)
    out = tmp_path / f"out.{fmt}"
    query = "SELECT level, count(*) AS n FROM problems GROUP BY level ORDER BY level"
    result = sieve("sql", query, "--format", fmt, "--output", str(out), home=tmp_path)
    assert result.returncode == 0, result.stderr
    if fmt == "parquet":
        assert pl.read_parquet(out).rows() == [(1, 5), (2, 5)]
    elif fmt == "csv":
        assert out.read_text().splitlines() == ["level,n", "1,5", "2,5"]
    elif fmt == "json":
        assert json.loads(out.read_text()) == [{"level": 1, "n": 5}, {"level": 2, "n": 5}]
    else:
        assert "level" in out.read_text()


def test_verify_prints_the_verdict(tmp_path: Path) -> None:
    result = sieve("verify", "--answer", "1/2", "--completion", "\\boxed{0.5}", home=tmp_path)
    assert result.returncode == 0, result.stderr
    verdict = json.loads(result.stdout)
    assert (
        verdict["correct"] is True and verdict["reward"] == 1.0 and verdict["reason"] == "correct"
    )
    wrong = json.loads(
        sieve("verify", "--answer", "1/2", "--completion", "\\boxed{0.6}", home=tmp_path).stdout
    )
    assert wrong["correct"] is False


def test_verify_reads_chat_text_safely_by_default(tmp_path: Path) -> None:
    """`sieve verify` is the chat reading unless `--format raw`: a bare or hedged answer and an
    echoed question earn nothing; raw reads the bare answer."""

    def run(completion: str, *extra: str) -> dict:
        result = sieve(
            "verify", "--answer", "72", "--completion", completion, *extra, home=tmp_path
        )
        assert result.returncode == 0, result.stderr
        return json.loads(result.stdout)

    assert run("72")["reason"] == "no_answer" and run("72")["format"] == "chat"
    assert run("\\boxed{72 or 73}")["detail"].startswith("hedged")
    assert run("Solve 75 + 74 - 77 =")["correct"] is False
    assert run("72", "--format", "raw")["correct"] is True
    cut = run("The final answer is 72", "--truncated")  # the budget may have cut 723 to 72
    assert cut["correct"] is False and cut["truncated"] is True and cut["detail"].startswith("cut")
    bad = sieve("verify", "--answer", "1", "--completion", "1", "--format", "html", home=tmp_path)
    assert bad.returncode != 0 and bad.stderr.count("\n") == 1 and "--format" in bad.stderr


@pytest.mark.integration  # 9 s
def test_stats_on_a_fresh_home(tmp_path: Path) -> None:
    Ledger.open(tmp_path).close()  # an empty ledger (no ledger at all: tests/store/test_open.py)
    result = sieve("stats", home=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "problems" in result.stdout and "none yet" in result.stdout


@pytest.mark.integration  # 26 s
def test_eval_rejects_unknown_backend_and_broken_folder(
    tmp_path: Path, tiny_model_dir: Path
) -> None:
    line = one_error_line(
        sieve("eval", "--model", str(tiny_model_dir), "--backend", "nope", home=tmp_path)
    )
    assert "unknown backend 'nope'; valid: hf, vllm, openai" in line
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "config.json").write_text("{not json")
    assert "cannot load model" in one_error_line(
        sieve("eval", "--model", str(broken), home=tmp_path)
    )
    no_url = sieve("eval", "--model", "served-name", "--backend", "openai", home=tmp_path)
    assert "--base-url" in one_error_line(no_url)


@pytest.mark.integration  # 32 s
def test_eval_records_runs_for_a_model_folder(
    tmp_path: Path,
    tiny_model_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    result = sieve(
        "eval", "--model", str(tiny_model_dir), "--per-level", "2", "--samples", "2", home=tmp_path
    )
    assert result.returncode == 0, result.stderr
    assert "held-out pass@1" in result.stdout
    with Ledger.open(tmp_path, read_only=True) as led:
        runs = led.sql("SELECT purpose, group_size FROM sampling_runs ORDER BY group_size").rows()
    assert runs == [("eval", 1), ("eval", 2)]
    # the sampled eval run is history: stats shows each cell's yield and the next allocation
    # (asserted on the frames shown: a table's title wraps at the table's width)
    frames = shown_frames(monkeypatch, cli.query)
    code, _, err = run_cli(["stats", "--home", str(tmp_path)], capsys)
    assert code == 0, err
    assert [t for t in frames if "where the next curation's candidates go" in t], list(frames)


@pytest.mark.integration  # 20 s
def test_curate_config_errors_are_one_line(tmp_path: Path, tiny_model_dir: Path) -> None:
    bad_key = tmp_path / "bad_key.toml"
    bad_key.write_text("screen_gg = 8\n")
    line = one_error_line(sieve("curate", "--config", str(bad_key), home=tmp_path))
    assert "bad_key.toml" in line and "screen_gg" in line
    bad_value = tmp_path / "bad_value.toml"
    bad_value.write_text("band_low = 0.9\nband_high = 0.1\n")
    assert "band" in one_error_line(sieve("curate", "--config", str(bad_value), home=tmp_path))
    missing = one_error_line(sieve("curate", "--model", str(tmp_path / "none"), home=tmp_path))
    assert "does not exist" in missing


@pytest.mark.integration  # 39 s
def test_curate_on_a_random_policy_prints_the_summary(tmp_path: Path, tiny_model_dir: Path) -> None:
    """A random policy answers nothing right: the curriculum keeps no prompt, is recorded (its
    rejections shown by its id) and, with a warning line, is not `latest`."""
    args = ("curate", "--model", str(tiny_model_dir), "--n", "40", "--seed", "1")
    result = sieve(*args, home=tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    for part in ("curriculum cur-", "kept:", "all_wrong", "histogram", "rollouts spent:"):
        assert part in result.stdout
    cid = re.findall(r"curriculum (cur-\w+)", result.stdout)[0]
    warning = f"warning: curriculum {cid} kept no prompt, so it is not `latest` (there is none"
    assert warning in " ".join(result.stderr.split()), result.stderr
    shown = sieve("curriculum", "show", cid, home=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert "all_wrong" in shown.stdout
    latest = sieve("curriculum", "show", "latest", home=tmp_path)
    assert "no curriculum with items yet: 1 curated kept no prompt" in one_error_line(latest)


def test_every_command_decides_its_home_in_its_option() -> None:
    """Issue 49 point 2: `--home` hands each command the home it decided, so no command reads
    $SIEVE_HOME / ./data again below it."""
    import typer.main

    from flows.cli.options import decided_home

    group = typer.main.get_command(cli.app)
    commands = {}
    for name, command in group.commands.items():  # type: ignore[attr-defined]
        subs = getattr(command, "commands", None)
        commands.update({f"{name} {s}": c for s, c in subs.items()} if subs else {name: command})
    homes = {
        name: param
        for name, command in commands.items()
        for param in command.params
        if "--home" in getattr(param, "opts", [])
    }
    assert {"train", "curate", "stats", "sql", "loop"} <= set(homes)  # the option is found
    undecided = [n for n, p in homes.items() if p.callback is None]
    assert not undecided, undecided
    for param in homes.values():  # typer wraps the callback; the wrapped one is decided_home
        assert param.callback.__wrapped__ is decided_home  # type: ignore[union-attr]


def test_a_command_decides_its_home_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`sieve stats` with only $SIEVE_HOME set reads it once (in its option), then passes the
    decided folder down: one `resolve_home(None)` in the whole command."""
    import pipeline.core.home

    Ledger.open(tmp_path).close()
    monkeypatch.setenv("SIEVE_HOME", str(tmp_path))
    original, decisions = pipeline.core.home.resolve_home, []

    def counted(home: object = None) -> Path:
        decisions.extend([home] if home is None else [])
        return original(home)  # type: ignore[arg-type]

    for mod in list(sys.modules.values()):  # wherever it was imported by name
        if isinstance(mod, ModuleType) and vars(mod).get("resolve_home") is original:
            monkeypatch.setattr(mod, "resolve_home", counted)
    code, out, err = run_cli(["stats"], capsys)
    assert code == 0, err
    assert "problems" in out and len(decisions) == 1
