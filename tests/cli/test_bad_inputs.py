"""A catalogue of bad inputs to the CLI and its config files (issues 7 and 17).

Every case runs `sieve` in-process against a home whose ledger already holds problems and a
curriculum, and must give exactly one non-blank line on stderr (file descriptor 2 included),
starting with `error:` and naming the problem, a non-zero exit, and leave every ledger table's
checksum unchanged. Model failures run the real Prefect flow: its logs must go to
`<home>/logs/prefect.log`, not the terminal. Disk-full cases mount a small tmpfs (root only; they
skip with the reason otherwise). `test_verbose_*` runs the CLI as a subprocess, with and without
`--verbose`.
"""

from __future__ import annotations

import html
import importlib.util
import io
import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from pipeline.core.errors import SieveError, printable
from pipeline.store import Ledger
from tests.cli_runner import run_cli as run_sieve
from tests.store.audit_rows import LONG, STRAY

TABLES = ("problems", "sampling_runs", "rollouts", "curricula", "curriculum_items", "train_runs")

TINY = "<tiny model>"  # a file value: copy the tiny policy folder here
GONE = "<delete>"  # a file value: delete this file (after the copies above it)
LOOP = "<symlink loop>"  # a file value: a symlink to itself
FIFO = "<fifo>"  # a file value: a named pipe
BAD_JSON = '{"model_type": "llama", "hidden_size": '
LEVEL_ABOVE_INT32 = '{"question": "1+1?", "answer": "2", "level": 99999999999}\n'
TRUNCATED = b"\x08\x00\x00\x00"  # weights cut short: loading the model fails
FRACTIONS = "1"  # 16 nested \\frac, as JSON text: no bracket wraps it whole, so none is peeled
for _ in range(16):
    FRACTIONS = f"\\\\frac{{{FRACTIONS}}}{{2}}"


def parquet_bytes(**columns: list[Any]) -> bytes:
    """A zstd-compressed Parquet file of `columns`."""
    buffer = io.BytesIO()
    pl.DataFrame(columns).write_parquet(buffer, compression="zstd")
    return buffer.getvalue()


BIG_CELL = "x" * (2 << 20)  # 2 MiB: a few KB once compressed


def pool_bytes(**columns: list[Any]) -> bytes:
    """A Parquet pool for `sieve backtest --pool` (two samples of one prompt, to be scored), with
    `columns` replaced."""
    values: dict[str, list[Any]] = {
        "problem_id": ["a", "a"], "sample_idx": [0, 1], "completion": ["\\boxed{2}", "3"],
        "answer": ["2", "2"], "verifier": ["math", "math"], **columns,
    }  # fmt: skip
    buffer = io.BytesIO()
    pl.DataFrame(values, schema_overrides={"completion": pl.String}).write_parquet(buffer)
    return buffer.getvalue()


def scored_pool_bytes(rewards: list[float], correct: list[Any] | None = None) -> bytes:
    """A scored Parquet pool: two prompts, `rewards` split between them in draw order;
    `correct` as given (default: reward == 1)."""
    half = len(rewards) // 2
    frame = pl.DataFrame(
        {
            "problem_id": ["a"] * half + ["b"] * (len(rewards) - half),
            "sample_idx": list(range(half)) + list(range(len(rewards) - half)),
            "reward": rewards,
        },
        schema_overrides={"problem_id": pl.String, "sample_idx": pl.Int64, "reward": pl.Float64},
    )
    buffer = io.BytesIO()
    if correct is None:
        frame.with_columns(correct=pl.col("reward") == 1).write_parquet(buffer)
    else:
        frame.with_columns(correct=pl.Series(correct)).write_parquet(buffer)
    return buffer.getvalue()


def empty_pool_bytes() -> bytes:
    """A Parquet pool with every column `sieve backtest` scores from, and no row."""
    schema = {"problem_id": pl.String, "sample_idx": pl.Int64, "completion": pl.String,
              "answer": pl.String, "verifier": pl.String}  # fmt: skip
    buffer = io.BytesIO()
    pl.DataFrame(schema=schema).write_parquet(buffer)
    return buffer.getvalue()


MAX_SEED = 2**63 - 1


# (id, files to write under the case dir, argv, needle expected in the error line); a case that
# takes 5 s or more is a pytest.param with the `integration` mark, its id the same first value
CASES: list[tuple[str, dict[str, str | bytes], list[str], str] | pytest.ParameterSet] = [
    ("unknown family", {}, ["generate", "--family", "nope"], "nope"),
    ("level out of range", {}, ["generate", "--family", "arith", "--levels", "99"], "99"),
    ("n not a number", {}, ["generate", "--family", "arith", "--n", "many"], "'--n'"),
    ("missing input file", {}, ["ingest", "{d}/none.jsonl"], "none.jsonl"),
    (
        "malformed jsonl",
        {"bad.jsonl": '{"question": "1+1"\n'},
        ["ingest", "{d}/bad.jsonl"],
        "bad.jsonl",
    ),
    ("write sql refused", {}, ["sql", "DELETE FROM problems"], "read-only"),
    ("invalid sql", {}, ["sql", "SELEC 1"], "invalid SQL"),
    (
        "curate: unknown key",
        {"c.toml": "screen_gg = 8\n"},
        ["curate", "--config", "{d}/c.toml"],
        "screen_gg",
    ),
    (
        "curate: wrong type",
        {"c.toml": "screen_g = 'eight'\n"},
        ["curate", "--config", "{d}/c.toml"],
        "screen_g",
    ),
    (
        "curate: G out of range",
        {"c.toml": "screen_g = 1\n"},
        ["curate", "--config", "{d}/c.toml"],
        "screen_g",
    ),
    (
        "curate: malformed toml",
        {"c.toml": "screen_g = [\n"},
        ["curate", "--config", "{d}/c.toml"],
        "invalid TOML",
    ),
    ("curate: missing config", {}, ["curate", "--config", "{d}/nope.toml"], "no such file"),
    ("curate: missing model", {}, ["curate", "--model", "{d}/no-model"], "does not exist"),
    ("curate: unknown runner", {}, ["curate", "--runner", "spark"], "runner: input should be"),
    ("curate: no workers", {}, ["curate", "--runner", "dask", "--workers", "0"], "workers"),
    ("train: unknown curriculum", {}, ["train", "--curriculum", "cur-nope"], "cur-nope"),
    (
        "train: unknown key",
        {"t.toml": "[grpo]\nlrr = 1\n"},
        ["train", "--config", "{d}/t.toml"],
        "lrr",
    ),
    (
        "train: wrong type",
        {"t.toml": "[grpo]\nlr = 'fast'\n"},
        ["train", "--config", "{d}/t.toml"],
        "grpo.lr",
    ),
    (
        "train: bad temperature",
        {"t.toml": "[grpo]\ntemperature = -1.0\n"},
        ["train", "--config", "{d}/t.toml"],
        "temperature",
    ),
    (
        "train: a removed GRPO key",  # group_size was never read: G comes from each item
        {"t.toml": "[grpo]\ngroup_size = 8\n"},
        ["train", "--config", "{d}/t.toml"],
        "unknown key 'group_size'",
    ),
    ("train: max steps 0", {}, ["train", "--max-steps", "0"], "--max-steps"),
    ("train: model without config", {"m/x.txt": "x"}, ["train", "--model", "{d}/m"], "config.json"),
    ("export: unknown format", {}, ["export", "--format", "csv", "--output", "{d}/out"], "csv"),
    (
        "export: missing curriculum",
        {},
        ["export", "--curriculum", "cur-nope", "--output", "{d}/o"],
        "cur-nope",
    ),
    ("export: output under a file", {"f": "x"}, ["export", "--output", "{d}/f/sub"], "f/sub"),
    ("loop: zero nights", {}, ["loop", "--nights", "0"], "--nights"),
    ("loop: bad start date", {}, ["loop", "--start", "30/11/2026"], "30/11/2026"),
    ("eval: missing model", {}, ["eval", "--model", "{d}/no-model"], "does not exist"),
    ("eval: zero samples", {}, ["eval", "--samples", "0"], "--samples"),
    ("bootstrap: zero minutes", {}, ["bootstrap", "--max-minutes", "0"], "--max-minutes"),
    ("unknown option", {}, ["stats", "--colour"], "--colour"),
    ("audit: unknown run", {}, ["audit", "screen-nope"], "screen-nope"),
    # issue 17: config paths that are folders or not UTF-8
    ("curate: config is a folder", {"c/x": ""}, ["curate", "--config", "{d}/c"], "directory"),
    (
        "curate: config not UTF-8",
        {"c.toml": b"screen_g = 8 # \xff\xfe\n"},
        ["curate", "--config", "{d}/c.toml"],
        "UTF-8",
    ),
    ("train: config is a folder", {"t/x": ""}, ["train", "--config", "{d}/t"], "directory"),
    (
        "train: config not UTF-8",
        {"t.toml": b"[grpo]\nlr = 1e-4 # \xc3\x28\n"},
        ["train", "--config", "{d}/t.toml"],
        "UTF-8",
    ),
    ("loop: config is a folder", {"c/x": ""}, ["loop", "--config", "{d}/c"], "directory"),
    (
        "loop: train config not UTF-8",
        {"t.toml": b"\xff"},
        ["loop", "--train-config", "{d}/t.toml"],
        "UTF-8",
    ),
    ("generate: mix is a folder", {"m/x": ""}, ["generate", "--mix", "{d}/m"], "directory"),
    # levels beyond int32 (a range must not be listed before it is checked)
    (
        "level above int32",
        {},
        ["generate", "--family", "arith", "--levels", "99999999999"],
        "99999999999",
    ),
    (
        "level range above int32",
        {},
        ["generate", "--family", "arith", "--levels", "1-99999999999"],
        "99999999999",
    ),
    (
        "ingest: level above int32",
        {"l.jsonl": LEVEL_ABOVE_INT32},
        ["ingest", "{d}/l.jsonl", "--level-field", "level"],
        "level",
    ),
    # text that is not text, and answers that are not final answers
    (
        "ingest: lone surrogate in a question",
        {"s.jsonl": '{"question": "what \\ud800 is 1+1?", "answer": "2"}\n'},
        ["ingest", "{d}/s.jsonl"],
        "surrogate",
    ),
    (
        "ingest: 5,000-digit answer",
        {"a.jsonl": '{"question": "How many?", "answer": "' + "7" * 5000 + '"}\n'},
        ["ingest", "{d}/a.jsonl"],
        "5,000",
    ),
    # issue 47: golds and questions nobody can see, and a gold math-verify cannot judge in time
    (
        "ingest: a NUL in a gold",
        {"a.jsonl": '{"question": "What is 2+2?", "answer": "4\\u0000"}\n'},
        ["ingest", "{d}/a.jsonl"],
        "answer '4\\x00' holds a control character (U+0000) at character 1",
    ),
    (
        "ingest: a gold that is only U+200B",
        {"a.jsonl": '{"question": "What is zero?", "answer": "\\u200b"}\n'},
        ["ingest", "{d}/a.jsonl"],
        "a.jsonl:1: field 'answer' has no visible character (only U+200B)",
    ),
    (
        "ingest: a gold ending in U+200B",
        {"a.jsonl": '{"question": "What is 2+2?", "answer": "4\\u200b"}\n'},
        ["ingest", "{d}/a.jsonl"],
        "holds an invisible format character (U+200B) at character 1",
    ),
    (
        "ingest: a question that is only U+200B",
        {"a.jsonl": '{"question": "\\u200b", "answer": "3"}\n'},
        ["ingest", "{d}/a.jsonl"],
        "a.jsonl:1: field 'question' has no visible character (only U+200B)",
    ),
    (
        "ingest: a gold of 16 nested fractions",  # every verdict on it would be too_deep
        {"a.jsonl": '{"question": "What is one?", "answer": "' + FRACTIONS + '"}\n'},
        ["ingest", "{d}/a.jsonl"],
        "nests brackets deeper than 8 and is not a plain number",
    ),
    # engine/model failures inside the Prefect flow: one line, Prefect's logs in the log file
    pytest.param(
        "curate: model config.json broken",
        {"m": TINY, "m/config.json": BAD_JSON},
        ["curate", "--n", "10", "--model", "{d}/m"],
        "config.json",
        id="curate: model config.json broken",
        marks=pytest.mark.integration,  # 24 s (make test-integration)
    ),
    (
        "curate: model without weights",
        {"m": TINY, "m/model.safetensors": GONE},
        ["curate", "--n", "10", "--model", "{d}/m"],
        "no weights",
    ),
    (
        "curate: model weights truncated",
        {"m": TINY, "m/model.safetensors": b"\x08\x00\x00\x00"},
        ["curate", "--n", "10", "--model", "{d}/m"],
        "cannot load model",
    ),
    (
        "train: model config.json broken",
        {"m": TINY, "m/config.json": BAD_JSON},
        ["train", "--steps", "1", "--model", "{d}/m"],
        "config.json",
    ),
    (
        "train: model without weights",
        {"m": TINY, "m/model.safetensors": GONE},
        ["train", "--steps", "1", "--model", "{d}/m"],
        "no weights",  # the revision is read before the weights load: curate's line
    ),
    # issue 32: bytes that are not UTF-8, sizes past any integer, homes that cannot be folders
    ("sql: query not UTF-8", {}, ["sql", "SELECT '\udcff'"], "argument 2 is not UTF-8"),
    ("audit: run id not UTF-8", {}, ["audit", "screen-\udcff"], "screen-\\xff"),
    (
        "sql: memory limit past 2^63",
        {},
        ["sql", "SELECT 1", "--memory-limit", "1" + "0" * 400 + "TB"],
        "--memory-limit is too large",
    ),
    (
        "ingest: max line bytes past any line",
        {"b.jsonl": '{"question": "1+1?", "answer": "2"}\n'},
        ["ingest", "{d}/b.jsonl", "--max-line-bytes", "9" * 23],
        "--max-line-bytes must be at most",
    ),
    ("home is a file", {"f": "x"}, ["stats", "--home", "{d}/f"], "{d}/f is not a folder"),
    ("home is /dev/null", {}, ["generate", "--family", "arith", "--home", "/dev/null"], "folder"),
    ("home is a symlink loop", {"h": LOOP}, ["stats", "--home", "{d}/h"], "a loop"),
    (
        "home below a file",
        {"f": "x"},
        ["generate", "--family", "arith", "--home", "{d}/f/home"],
        "below {d}/f, which is not a folder",
    ),
    (
        "error text with control characters",
        {},
        ["generate", "--family", "a\x1b[2J\nb"],
        "a\\x1b[2J\\nb",
    ),
    # issue 47: tracebacks instead of one line
    *[
        (
            f"backtest: pool with {what}",
            {"p.parquet": pool_bytes(**columns)},
            ["backtest", "--pool", "{d}/p.parquet", "--policy", "uniform:g=2"],
            needle,
        )
        for what, columns, needle in [
            ("a string sample_idx", {"sample_idx": ["0", "1"]}, "sample_idx must be whole"),
            ("a negative sample_idx", {"sample_idx": [-1, 0]}, "sample_idx must be >= 0"),
            ("an unknown verifier", {"verifier": ["math", "nope"]}, "'nope' is not a verifier"),
            ("a null completion", {"completion": [None, "3"]}, "completion has a missing"),
            # issue 47: pools replayed wrong without a word
            ("a gap in sample_idx", {"sample_idx": [0, 2]}, "sample_idx of prompt 'a' skips 1"),
            (
                "a sample stored twice",
                {"sample_idx": [0, 0]},
                "sample_idx 0 of prompt 'a' is stored more than once",
            ),
        ]
    ],
    (
        "backtest: pool of NaN rewards",
        {"p.parquet": scored_pool_bytes([float("nan")] * 4)},
        ["backtest", "--pool", "{d}/p.parquet", "--policy", "uniform:g=2"],
        "reward must be a finite number, got nan (row 0)",
    ),
    (
        "backtest: --png out.txt",
        {"p.parquet": pool_bytes()},
        ["backtest", "--pool", "{d}/p.parquet", "--policy", "uniform:g=2", "--png", "{d}/o.txt"],
        "ending in .png",
    ),
    (
        "home under /proc",
        {},
        ["generate", "--family", "arith", "--home", "/proc/sieve-home"],
        "cannot use /proc/sieve-home",
    ),
    (
        "<home>/checkpoints is a file",
        {"h/checkpoints": "x"},
        ["train", "--home", "{d}/h"],
        "{d}/h/checkpoints is not a folder",
    ),
    (
        "<home>/tensorboard is a file",
        {"h/tensorboard": "x"},
        ["loop", "--home", "{d}/h"],
        "{d}/h/tensorboard is not a folder",
    ),
    (
        "models add: a 300-byte name",
        {"src/config.json": "{}"},
        ["models", "add", "x" * 300, "--from", "{d}/src"],
        "model name is 300 bytes",
    ),
    (
        "models add: a symlink loop in --from",
        {"src/config.json": "{}", "src/loop": LOOP},
        ["models", "add", "m", "--from", "{d}/src"],
        "{d}/src/loop is a loop of symbolic links",
    ),
    (
        "models add: a FIFO in --from",
        {"src/config.json": "{}", "src/pipe": FIFO},
        ["models", "add", "m", "--from", "{d}/src"],
        "{d}/src/pipe is not a regular file",
    ),
    ("train: steps past int32", {}, ["train", "--steps", "99999999999"], "--steps must be"),
    (
        "eval: per-level 0, before loading the model",
        {"m": TINY, "m/model.safetensors": TRUNCATED},
        ["eval", "--per-level", "0", "--model", "{d}/m"],
        "--per-level must be an integer in [1,",
    ),
    (
        "eval: 100,000 samples, before loading the model",
        {"m": TINY, "m/model.safetensors": TRUNCATED},
        ["eval", "--samples", "100000", "--model", "{d}/m"],
        "--samples 100000 is more samples of one prompt than a sampler holds at once",
    ),
    (
        "ingest: a 2 MiB Parquet question",
        {"q.parquet": parquet_bytes(question=[BIG_CELL], answer=["2"])},
        ["ingest", "{d}/q.parquet"],
        "column 'question' holds cells of",
    ),
    (
        "ingest: a 2 MiB Parquet answer among short rows",
        {"q.parquet": parquet_bytes(question=["a?", "b?", "c?"], answer=["1", BIG_CELL, "3"])},
        ["ingest", "{d}/q.parquet"],
        "column 'answer' holds a cell of 2,097,152 bytes; a cell is at most 1,048,576 bytes",
    ),
    # issue 47: surprises, each now refused
    (
        "curate: --temperature 0",
        {},
        ["curate", "--temperature", "0", "--n", "10"],
        "temperature 0 (greedy) samples every prompt alike",
    ),
    ("--home ''", {}, ["stats", "--home", ""], "--home '' is empty"),
    (
        "--engine with a key twice",
        {},
        ["train", "--curriculum", "cur-nope", "--engine", "max_model_len=1024,max_model_len=2048"],
        "invalid --engine: max_model_len is given twice",
    ),
    pytest.param(
        "generate: rg:sudoku, a dataset without levels",
        {},
        ["generate", "--family", "rg:sudoku"],
        "reasoning-gym dataset 'sudoku' has no levels in Sieve",
        id="generate: rg:sudoku, a dataset without levels",
        marks=pytest.mark.skipif(
            not importlib.util.find_spec("reasoning_gym"), reason="reasoning-gym is not installed"
        ),
    ),
    (
        "eval: samples past int32, before loading the model",
        {"m": TINY, "m/model.safetensors": TRUNCATED},
        ["eval", "--samples", "99999999999", "--model", "{d}/m"],
        "--samples must be an integer in [1,",
    ),
    # a probe round: numbers checked before any work (the demo wrote its problems first)
    *[
        (f"demo: {option} {value}", {}, ["demo", option, value], f"{option} must be an integer")
        for option, value in [
            ("--steps", "99999999999"),
            ("--steps", "0"),
            ("--n", "99999999999"),
            ("--bootstrap-steps", "99999999999"),
            ("--bootstrap-steps", "-1"),
        ]
    ],
    *[
        (
            f"curriculum show: --limit {value}",
            {},
            ["curriculum", "show", "--limit", value],
            f"--limit must be an integer in [0, {MAX_SEED}], got {value}",
        )
        for value in ("-5", "-1", str(2**63))
    ],
    *[
        (
            f"{argv[0]}: --seed {value}",
            {},
            [*argv, "--seed", value],
            f"--seed must be an integer in [0, {MAX_SEED}], got {value}",
        )
        for argv in (["plan"], ["generate", "--family", "arith"], ["curate", "--n", "10"])
        for value in ("-1", str(2**63))
    ],
    (
        "backtest: a policy seed below 0",
        {"p.parquet": pool_bytes()},
        ["backtest", "--pool", "{d}/p.parquet", "--policy", "dapo:g=2,batch=1,seed=-1"],
        f"policy dapo: seed must be an integer in [0, {MAX_SEED}], got -1",
    ),
    # a probe round: pools that ended in a traceback, or in a table of nothing
    *[
        (
            f"{command[0]}: pool with {what}",
            {"p.parquet": body},
            [*command, "--pool", "{d}/p.parquet"],
            needle,
        )
        for command in (["backtest", "--policy", "uniform:g=2"], ["plan"])
        for what, body, needle in [
            (
                "a code answer that is a number",
                pool_bytes(verifier=["code", "code"], answer=["42", "42"]),
                "answer '42' of prompt 'a' is not a code test spec (code answer must be a JSON "
                "object with args, expected and function) (row 0)",
            ),
            (
                "a code answer that is not JSON",
                pool_bytes(verifier=["math", "code"], answer=["2", "def f(): pass"]),
                "answer 'def f(): pass' of prompt 'a' is not a code test spec (code answer is "
                "not a JSON test spec) (row 1)",
            ),
            (
                "correct stored as text",
                scored_pool_bytes([1.0, 0.0, 1.0, 0.0], ["true", "false", "true", "false"]),
                "correct must be true/false (booleans), not String",
            ),
            ("no samples", empty_pool_bytes(), "{d}/p.parquet holds no samples"),
            ("no scored samples", scored_pool_bytes([]), "{d}/p.parquet holds no samples"),
        ]
    ],
]
PARAMS = [c if isinstance(c, pytest.ParameterSet) else pytest.param(*c, id=c[0]) for c in CASES]
ROWS = [tuple(p.values) for p in PARAMS]
FLOW_CASES = {c[0] for c in ROWS if c[2][0] in ("curate", "train") and TINY in c[1].values()}


def checksums(home: Path) -> dict[str, tuple[int, int]]:
    with Ledger.open(home, read_only=True) as led:
        return {t: led.checksum(t) for t in TABLES}


def write_files(root: Path, files: dict[str, str | bytes], tiny: Path) -> None:
    for name, value in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if value == TINY:
            shutil.copytree(tiny, path)
        elif value == LOOP:
            path.symlink_to(path)
        elif value == FIFO:
            os.mkfifo(path)
        elif value == GONE:
            path.unlink()
        elif isinstance(value, bytes):
            path.write_bytes(value)
        else:
            path.write_text(value)


def error_line(code: int, err: str) -> str:
    """The one non-blank stderr line, which must be an `error:` line after a non-zero exit."""
    lines = [line for line in err.splitlines() if line.strip()]
    assert code != 0
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    return lines[0]


def run_cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code, _, err = run_sieve(argv, capsys)
    return code, err


@pytest.fixture(scope="module")
def seeded_home(
    tmp_path_factory: pytest.TempPathFactory,
    tiny_model_dir: Path,
    write_curriculum: Callable[[Ledger], object],
) -> Path:
    home = tmp_path_factory.mktemp("home")
    shutil.copytree(tiny_model_dir, home / "models" / "tiny")
    with Ledger.open(home) as ledger:
        write_curriculum(ledger)
    return home


@pytest.mark.parametrize(("case", "files", "argv", "needle"), PARAMS)
def test_bad_input_is_one_line_and_leaves_the_ledger_unchanged(
    seeded_home: Path,
    tmp_path: Path,
    capfd: pytest.CaptureFixture[str],
    tiny_model_dir: Path,
    case: str,
    files: dict[str, str | bytes],
    argv: list[str],
    needle: str,
) -> None:
    write_files(tmp_path, files, tiny_model_dir)
    args = [a.replace("{d}", str(tmp_path)) for a in argv]
    if args[0] not in ("verify",) and "--home" not in args:
        args += ["--home", str(seeded_home)]
    log = seeded_home / "logs" / "prefect.log"
    logged = log.stat().st_size if log.exists() else 0
    before = checksums(seeded_home)
    code, err = run_cli(args, capfd)
    line = error_line(code, err)
    assert needle.replace("{d}", str(tmp_path)) in line, line
    assert "\x1b" not in line
    assert checksums(seeded_home) == before
    if case in FLOW_CASES:  # the flow's failure was logged, to the file
        assert log.stat().st_size > logged, f"nothing logged to {log}"
        assert "Traceback" in log.read_text(errors="replace")[logged:]


def test_the_catalogue_holds_every_case() -> None:
    assert len(ROWS) == 112 and len({c[0] for c in ROWS}) == len(ROWS)
    assert all(p.id == p.values[0] for p in PARAMS)
    assert len(FLOW_CASES) == 5


def test_unreadable_ledger_is_one_line_and_the_file_is_untouched(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ledger = tmp_path / "sieve.duckdb"
    ledger.write_bytes(b"this is not a duckdb file" * 100)
    before = ledger.read_bytes()
    code, err = run_cli(["sql", "SELECT 1", "--home", str(tmp_path)], capsys)
    lines = [line for line in err.splitlines() if line.strip()]
    assert code != 0 and len(lines) == 1 and lines[0].startswith("error: "), err
    assert "sieve.duckdb" in lines[0]
    assert ledger.read_bytes() == before


@pytest.mark.timeout(60)  # today's main blocks in DuckDB's open of the FIFO, for good
@pytest.mark.parametrize("kind", ["FIFO", "folder"])
@pytest.mark.parametrize(
    "argv", [["generate", "--family", "arith"], ["sql", "SELECT 1"]], ids=["generate", "sql"]
)
def test_a_ledger_that_is_not_a_file_is_one_line_without_blocking(
    tmp_path: Path, capfd: pytest.CaptureFixture[str], kind: str, argv: list[str]
) -> None:
    """`mkfifo H/sieve.duckdb; sieve generate --home H` never returned (issue 47)."""
    ledger = tmp_path / "sieve.duckdb"
    if kind == "FIFO":
        os.mkfifo(ledger)
    else:
        ledger.mkdir()
    code, err = run_cli([*argv, "--home", str(tmp_path)], capfd)
    line = error_line(code, err)
    assert str(ledger) in line and ("not a ledger file" in line or "no ledger at" in line), line
    assert stat.S_ISFIFO(ledger.stat().st_mode) if kind == "FIFO" else ledger.is_dir()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["sieve.duckdb"]


def test_parquet_text_past_the_import_cap_is_one_line(
    seeded_home: Path,
    tmp_path: Path,
    capfd: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """One short question repeated by Parquet's dictionary: tiny on disk, each cell under the
    cap, its text in all past the import's cap (here lowered to 1 MiB) before it is expanded."""
    import pipeline.problems.ingest

    monkeypatch.setattr(pipeline.problems.ingest, "MAX_PARQUET_TEXT", 1 << 20)
    file = tmp_path / "q.parquet"
    file.write_bytes(parquet_bytes(question=["y" * 4096] * 300, answer=["1"] * 300))
    before = checksums(seeded_home)
    code, err = run_cli(["ingest", str(file), "--home", str(seeded_home)], capfd)
    assert "1,229,100 bytes of text in 'question', 'answer'" in error_line(code, err)
    assert checksums(seeded_home) == before


def test_a_question_stored_with_another_answer_is_one_line(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """The same question from a second file with another answer (56, then 57) was added without
    a word: the conflict check saw one file. It now sees the ledger too; the same answer again
    is a duplicate, and --allow-conflicts keeps both, as within one file."""
    home = tmp_path / "home"
    for name, answer in [("a", 56), ("b", 57), ("c", 56)]:
        rows = [{"question": "How many eggs?", "answer": answer}, {"question": name, "answer": 1}]
        (tmp_path / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    code, _, _ = run_sieve(["ingest", str(tmp_path / "a.jsonl"), "--home", str(home)], capfd)
    assert code == 0
    before = checksums(home)
    code, err = run_cli(["ingest", str(tmp_path / "b.jsonl"), "--home", str(home)], capfd)
    assert error_line(code, err) == (
        "error: b.jsonl: question 'How many eggs?' is already in the ledger with a different "
        "answer ('57' here, '56' from file:a.jsonl); 1 question(s) with conflicting answers in "
        "all; fix the file, or pass --allow-conflicts to keep them all"
    )
    assert checksums(home) == before  # nothing of b.jsonl, not even its other question
    code, _, _ = run_sieve(["ingest", str(tmp_path / "c.jsonl"), "--home", str(home)], capfd)
    assert code == 0
    argv = ["ingest", str(tmp_path / "b.jsonl"), "--allow-conflicts", "--home", str(home)]
    assert run_sieve(argv, capfd)[0] == 0
    with Ledger.open(home, read_only=True) as ledger:
        stored = ledger.sql("SELECT answer FROM problems WHERE question = 'How many eggs?'")
    assert sorted(stored["answer"]) == ["56", "57"]


def test_train_resume_with_nothing_to_resume_is_one_line(
    seeded_home: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """`train --resume` with no checkpoint of that run trained a fresh run without a word
    (issue 47); it is refused before Prefect starts, naming the run and where it looked."""
    model = seeded_home / "models" / "tiny"
    argv = ["train", "--resume", "--steps", "1", "--model", str(model)]
    before = checksums(seeded_home)
    code, err = run_cli([*argv, "--home", str(seeded_home)], capfd)
    line = error_line(code, err)
    assert "--resume: training train-" in line and "nothing to resume" in line, line
    assert f"has no checkpoint in {seeded_home}/checkpoints/train-" in line
    assert checksums(seeded_home) == before


@pytest.mark.parametrize("value", ["inf", "1e300", "3601", "nan", "-1", "1e-9", "0.05"])
@pytest.mark.parametrize(
    "argv",
    [["verify", "--answer", "1+x", "--completion", "\\boxed{x+1}"], ["stats"]],
    ids=["verify", "stats"],
)
def test_a_verifier_deadline_past_any_wait_is_one_line(
    seeded_home: Path,
    capfd: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    value: str,
    argv: list[str],
) -> None:
    """`SIEVE_VERIFY_TIMEOUT=inf` (or 1e300) was taken, and every math-verify verdict became
    verifier_error (an OverflowError in the wait); so was `1e-9`, shorter than any worker's round
    trip; every command now refuses both up front."""
    monkeypatch.setenv("SIEVE_VERIFY_TIMEOUT", value)
    home = [] if argv[0] == "verify" else ["--home", str(seeded_home)]
    code, err = run_cli([*argv, *home], capfd)
    line = error_line(code, err)
    assert "SIEVE_VERIFY_TIMEOUT must be a number of seconds from 0.1 to 3600" in line
    assert repr(value) in line


def test_a_prefect_folder_that_is_a_file_is_one_line(
    tmp_path: Path, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`<home>/.prefect` a file (issue 47): NotADirectoryError's traceback, now one line naming
    it. No Prefect home chosen for this process, so the command sets up the home's own."""
    monkeypatch.delenv("PREFECT_HOME", raising=False)
    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    (tmp_path / ".prefect").write_text("x")
    code, err = run_cli(["curate", "--n", "10", "--home", str(tmp_path)], capfd)
    assert f"cannot use {tmp_path}/.prefect/" in error_line(code, err)
    assert (tmp_path / ".prefect").read_text() == "x"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="mount(8)")
def test_a_home_on_a_read_only_file_system_is_one_line(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """A read-only tmpfs (root and the mount capability; skips otherwise)."""
    mount = tmp_path / "ro"
    mount.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "ro,size=1m", "tmpfs", str(mount)],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip() or 'mount failed'}")
    try:
        argv = ["generate", "--family", "arith", "--home", str(mount / "home")]
        code, err = run_cli(argv, capfd)
        assert f"cannot use {mount}/home: Read-only file system" in error_line(code, err)
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


@pytest.fixture(scope="module")
def big_ledger(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    """The bytes of a ledger of ~4.7 MB (about 30,000 problems)."""
    from pipeline.problems import generate_mix

    home = tmp_path_factory.mktemp("big")
    with Ledger.open(home) as ledger:
        mix = {"arith": list(range(1, 9)), "word": [1, 2, 3, 4]}
        ledger.write("problems", generate_mix(mix, 40_000, seed=1))
    data = (home / "sieve.duckdb").read_bytes()
    assert len(data) > 4 << 20
    return data


@pytest.mark.parametrize("megabytes", [1, 2, 3])
@pytest.mark.parametrize("argv", [["sql", "SELECT 1"], ["generate", "--family", "arith"]])
def test_truncated_ledger_is_one_line_and_the_file_is_untouched(
    tmp_path: Path,
    capfd: pytest.CaptureFixture[str],
    big_ledger: bytes,
    megabytes: int,
    argv: list[str],
) -> None:
    ledger = tmp_path / "sieve.duckdb"
    ledger.write_bytes(big_ledger[: megabytes << 20])
    before = ledger.read_bytes()
    code, err = run_cli([*argv, "--home", str(tmp_path)], capfd)
    assert "sieve.duckdb" in error_line(code, err)
    assert ledger.read_bytes() == before


# ------------------------------------------------------------------------------ ledger text

# Text in the ledger is data, never markup: Rich ate `[bold]`, raised on a stray `[/red]` (after
# the ingest had committed, and in every `sieve stats` after it), passed ESC to the terminal and
# read `:smile:`; matplotlib read `$...$` as mathtext (a parse error stopped `sieve report`).
FAMILY = "[/red]$\\x$\x1b[31m"
QUESTION = "[x] 5 [bold] \x1b]0;title\x07 :smile: [/]"
ANSWER = "[/i]7"
REVISION = "rev[/x]$\\x$\x1b[2J"
CID = "cur-[/c]"
REASON = "[/r]mid"


def hostile_problems(ids: list[str], split: str) -> pl.DataFrame:
    from tests.store.audit_rows import NOW

    return pl.DataFrame(
        {
            "problem_id": ids,
            "source": "test",
            "family": FAMILY,
            "level": pl.Series([1 + i % 2 for i in range(len(ids))], dtype=pl.Int32),
            "params": "{}",
            "question": [f"{QUESTION} {i}" for i in ids],
            "answer": ANSWER,
            "verifier": "math",
            "split": split,
            "created_at": NOW,
        }
    )


@pytest.fixture(scope="module")
def hostile_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A home whose ledger text is hostile: problems, a curriculum, eval and screen runs of a
    revision, and a verifier audit (tests/store/audit_rows: `[bold]...`, `[/oops]`)."""
    from tests.store.audit_rows import NOW, hand_built
    from tests.store.eval_rows import add_run

    home = tmp_path_factory.mktemp("hostile")
    train = [f"t{i}" for i in range(6)]
    held = [f"h{i}" for i in range(4)]
    with Ledger.open(home) as ledger:
        hand_built(ledger)
        ledger.write("problems", pl.concat([hostile_problems(train, "train"),
                                            hostile_problems(held, "heldout")]))  # fmt: skip
        for run, temperature in (("eval-0", 0.0), ("eval-1", 1.0)):
            add_run(ledger, run, REVISION, temperature, {p: [True, False] for p in held})
        add_run(ledger, "screen-h", REVISION, 1.0, {p: [True, False] for p in train},
                minute=5, purpose="screen")  # fmt: skip
        head = pl.DataFrame(
            {"curriculum_id": [CID], "created_at": [NOW], "model": ["m"],
             "model_revision": [REVISION], "config": ["{}"], "status": ["finished"]}
        )  # fmt: skip
        items = pl.DataFrame(
            {"curriculum_id": CID, "problem_id": train, "stage": 1,
             "position": list(range(len(train))), "group_size": 4, "weight": 1.0,
             "p_mean": 0.5, "p_low": 0.2, "p_high": 0.8, "reason": REASON}
        )  # fmt: skip
        ledger.write_batch({"curricula": head, "curriculum_items": items})
    return home


def assert_shown(out: str, *texts: str) -> None:
    """Each text printed as it is, control characters escaped; no raw escape anywhere."""
    for text in texts:
        assert printable(text) in out, (text, out)
    assert "\x1b" not in out and "\x07" not in out


@pytest.mark.parametrize(
    ("argv", "texts"),
    [
        (["stats"], [FAMILY, CID, REVISION]),
        (["curriculum", "show", "latest"], [CID, FAMILY, QUESTION, ANSWER, REASON]),
        (["audit", "screen-k"], [LONG[:200], STRAY]),
        (["sql", 'SELECT question, family AS "[/x]" FROM problems'], [QUESTION, "[/x]"]),
        (["rescore", "screen-k", "--examples", "0"], ["run screen-k"]),
    ],
    ids=["stats", "curriculum show", "audit", "sql column name", "rescore"],
)
def test_ledger_text_prints_as_it_is(
    hostile_home: Path, capsys: pytest.CaptureFixture[str], argv: list[str], texts: list[str]
) -> None:
    code, out, err = run_sieve([*argv, "--home", str(hostile_home)], capsys)
    assert code == 0 and err == "", err
    assert_shown(out, *texts)


def test_the_report_shows_ledger_text_as_it_is(
    hostile_home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["report", "--output", str(tmp_path), "--home", str(hostile_home)]
    code, _, err = run_sieve(argv, capsys)
    assert code == 0 and err == "", err  # no mathtext error, no warning of a missing glyph
    page = (tmp_path / "report.html").read_text()
    assert html.escape(printable(FAMILY)) in page
    assert html.escape(f"Before: {REVISION[:10]}") in page  # the report shortens revisions
    assert "\x1b" not in page and len(list(tmp_path.glob("fig_*.png"))) >= 3


def test_ingested_text_prints_as_it_is(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The issue's first probe: the ingest committed, then its own table raised."""
    lines = [json.dumps({"question": f"{QUESTION} {i}", "answer": ANSWER}) for i in range(3)]
    (tmp_path / "q.jsonl").write_text("\n".join(lines) + "\n")
    argv = ["ingest", str(tmp_path / "q.jsonl"), "--family", FAMILY, "--home", str(tmp_path / "h")]
    code, out, err = run_sieve(argv, capsys)
    assert code == 0 and err == "", err
    assert_shown(out, FAMILY)
    code, out, err = run_sieve(["stats", "--home", str(tmp_path / "h")], capsys)
    assert code == 0 and err == "", err
    assert_shown(out, FAMILY)


def test_json_output_has_no_nan_or_infinity(
    seeded_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    query = (
        "SELECT 'nan'::DOUBLE AS a, 'inf'::DOUBLE AS b, ['-inf'::DOUBLE, 1.5] AS c, "
        "'NaN, Infinity' AS \"NaN\""
    )
    argv = ["sql", query, "--format", "json", "--home", str(seeded_home)]
    code, out, err = run_sieve(argv, capsys)
    assert code == 0 and err == "", err

    def refuse(name: str) -> None:
        raise AssertionError(f"{name} in JSON output")

    rows = json.loads(out, parse_constant=refuse)
    assert rows == [{"a": None, "b": None, "c": [None, 1.5], "NaN": "NaN, Infinity"}]


def test_help_shows_brackets_as_written(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every option help with a `[` in it, in its command's --help (Typer reads help as
    markup: `--runner` read "(needs '.')")."""
    import typer

    from flows import cli

    monkeypatch.setenv("COLUMNS", "1000")  # Typer's own console: one row per option
    root = typer.main.get_command(cli.app)
    found = []
    for name, command in root.commands.items():
        for sub, leaf in getattr(command, "commands", {None: command}).items():
            path = [name] if sub is None else [name, sub]
            found += [(path, p.help) for p in leaf.params if "[" in (getattr(p, "help", "") or "")]
    assert (["curate"], "Where chunks run: local, dask or ray (needs '.[scale]').") in found
    for path, text in found:
        code, out, _ = run_sieve([*path, "--help"], capsys)
        assert code == 0 and text in out, (path, text)


# ------------------------------------------------------------------------------ disk full


@pytest.fixture
def small_disk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A 16 MiB tmpfs (needs root and the mount capability; skips with the reason otherwise).
    Prefect's own state stays off it (where Prefect is not imported yet), so what fills up is
    the ledger or the checkpoints, and the process's Prefect home outlives the mount."""
    monkeypatch.setenv("PREFECT_HOME", str(tmp_path / "prefect"))
    mount = tmp_path / "disk"
    mount.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", str(mount)],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here: {done.stderr.strip() or 'mount failed'}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def fill(disk: Path) -> None:
    """Write a filler file until the disk has no byte left."""
    with (disk / "filler").open("wb", buffering=0) as f:
        for size in (1 << 20, 1 << 12, 1):
            try:
                while True:
                    f.write(b"\0" * size)
            except OSError:
                pass
    assert shutil.disk_usage(disk).free == 0


@pytest.mark.parametrize(
    "command",
    [["curate", "--n", "10"], ["train", "--steps", "1"]],
    ids=["curate", "train"],
)
def test_disk_full_during_a_run_is_one_line_and_leaves_the_ledger_unchanged(
    command: list[str],
    small_disk: Path,
    tiny_model_dir: Path,
    write_curriculum: Callable[[Ledger], object],
    capfd: pytest.CaptureFixture[str],
) -> None:
    home = small_disk / "home"
    with Ledger.open(home) as ledger:
        write_curriculum(ledger)
    fill(small_disk)
    before = checksums(home)
    code, err = run_cli([*command, "--model", str(tiny_model_dir), "--home", str(home)], capfd)
    assert "disk full" in error_line(code, err)
    assert checksums(home) == before


SMALL_TRAIN = """rollouts_per_step = 8
eval_per_level = 1
eval_samples = 1
eval_families = ["arith"]
tensorboard = false
[grpo]
total_steps = 2
checkpoint_every = 1
max_new_tokens = 4
"""


def test_disk_full_while_writing_a_checkpoint_is_one_line_and_leaves_no_temp_folder(
    small_disk: Path,
    tmp_path: Path,
    tiny_model_dir: Path,
    write_curriculum: Callable[[Ledger], object],
    capfd: pytest.CaptureFixture[str],
) -> None:
    home = tmp_path / "home"  # the ledger has room; only the checkpoints' disk is full
    with Ledger.open(home) as ledger:
        write_curriculum(ledger)
    (home / "checkpoints").symlink_to(small_disk)
    fill(small_disk)
    config = tmp_path / "t.toml"
    config.write_text(SMALL_TRAIN)
    argv = ["train", "--config", str(config), "--model", str(tiny_model_dir), "--home", str(home)]
    code, err = run_cli(argv, capfd)
    assert "disk full" in error_line(code, err)
    runs = [p for p in small_disk.iterdir() if p.is_dir()]
    assert runs, "training never reached its first checkpoint"
    assert not [p.name for run in runs for p in run.iterdir()]  # no .tmp-step-* left behind


# ------------------------------------------------------------------------------ interrupted

CURATE_NOTE = "interrupted: screen 3 of 8 chunks committed; rerun the same command to resume"


def only_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    return lines[0]


@pytest.fixture
def no_flows(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Callable[[str, Callable], None]:
    """`no_flows(job, flow)`: the command `job` (curate, train) runs `flow` in place of its
    Prefect flow, with no Prefect server started."""
    import flows.commands.common
    import flows.curate
    import flows.train

    monkeypatch.setenv("PREFECT_HOME", str(tmp_path / "prefect"))  # this test's, set back after

    def replace(job: str, flow: Callable) -> None:
        monkeypatch.setattr(flows.commands.common, "start_flows", lambda home: None)
        monkeypatch.setattr(getattr(flows, job), f"{job}_flow", flow)

    return replace


def test_sigterm_names_what_was_committed_and_drops_later_stderr(
    seeded_home: Path,
    tiny_model_dir: Path,
    no_flows: Callable[[str, Callable], None],
    capsys: pytest.CaptureFixture[str],
) -> None:
    from pipeline.core.hooks import ProgressEvent

    def flow(params: object, runtime: Any) -> None:
        runtime.progress(ProgressEvent("curate", "screen", 3, 8))
        try:
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(30)  # the handler raises in here
        except KeyboardInterrupt:
            print("Traceback (most recent call last): a crash report", file=sys.stderr)
            raise

    no_flows("curate", flow)
    argv = ["curate", "--model", str(tiny_model_dir), "--home", str(seeded_home)]
    code, _, err = run_sieve(argv, capsys)
    assert code == 128 + signal.SIGTERM and only_line(err) == CURATE_NOTE
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # pytest's own, put back


def test_prefects_termination_signal_under_a_later_error_is_one_line(
    seeded_home: Path,
    tiny_model_dir: Path,
    no_flows: Callable[[str, Callable], None],
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Prefect's SIGTERM handler raises TerminationSignal; with its server gone too (a signal to
    the whole process group) reporting the crash raised an httpx error instead, a traceback."""
    from prefect.exceptions import TerminationSignal

    from pipeline.core.hooks import ProgressEvent

    def flow(params: object, runtime: Any) -> None:
        runtime.progress(ProgressEvent("curate", "screen", 3, 8))
        try:
            raise TerminationSignal(signal=signal.SIGTERM)
        except TerminationSignal:
            raise ConnectionError("All connection attempts failed") from None

    no_flows("curate", flow)
    argv = ["curate", "--model", str(tiny_model_dir), "--home", str(seeded_home)]
    code, _, err = run_sieve(argv, capsys)
    assert code == 128 + signal.SIGTERM and only_line(err) == CURATE_NOTE


def test_ctrl_c_in_training_names_the_steps_done(
    seeded_home: Path,
    tiny_model_dir: Path,
    no_flows: Callable[[str, Callable], None],
    capsys: pytest.CaptureFixture[str],
) -> None:
    from pipeline.core.hooks import ProgressEvent

    metrics = {"reward_mean": 0.5, "pass_rate": 0.5, "kl": 0.0, "zero_var_share": 0.1}

    def flow(params: object, runtime: Any) -> None:
        runtime.progress(ProgressEvent("train", "train", 2, 10, metrics))
        raise KeyboardInterrupt  # Ctrl-C as Python delivers it

    no_flows("train", flow)
    argv = ["train", "--steps", "10", "--model", str(tiny_model_dir), "--home", str(seeded_home)]
    code, _, err = run_sieve(argv, capsys)
    assert code == 128 + signal.SIGINT
    assert only_line(err) == (
        "interrupted: trained 2 of 10 steps; the checkpoints written are kept "
        "(`sieve train --resume` continues from the newest)"
    )


def handles_sigterm(pid: int) -> bool:
    """True once the process catches SIGTERM (the CLI's handler is installed; Linux /proc)."""
    status = Path(f"/proc/{pid}/status").read_text()
    caught = int(next(x for x in status.splitlines() if x.startswith("SigCgt:")).split()[1], 16)
    return bool(caught >> (signal.SIGTERM - 1) & 1)


def sieve_process(argv: list[str], **kwargs: Any) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_", "SIEVE_"))}
    return subprocess.Popen(
        [sys.executable, "-m", "flows.cli", *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        **kwargs,
    )


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux /proc")
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signalled_run_ends_with_one_line(tmp_path: Path, sig: signal.Signals) -> None:
    """A real `sieve bootstrap` (a long supervised run, no Prefect) signalled once its handler
    is in place: one `interrupted:` line and 128 + the signal."""
    proc = sieve_process(["bootstrap", "--max-steps", "1000000", "--home", str(tmp_path)])
    try:
        deadline = time.monotonic() + 60
        while not handles_sigterm(proc.pid):
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.05)
        time.sleep(1)  # into the command itself
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 128 + sig, err
    assert only_line(err) == "interrupted: nothing half-written"


def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        try:
            stat = (entry / "stat").read_text()
        except (OSError, ValueError):
            continue
        if int(stat[stat.rindex(")") + 2 :].split()[1]) == pid:
            found += [int(entry.name), *_children(int(entry.name))]
    return found


@pytest.mark.crash
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux /proc")
def test_a_curation_stopped_like_timeout_does_is_one_line(
    tmp_path: Path, tiny_model_dir: Path
) -> None:
    """`timeout` signals the whole process group, Prefect's server with it: the run still ends
    with one line (Prefect's httpx traceback and "Error logging to API" before), and nothing
    of it is left running."""
    argv = ["curate", "--n", "400", "--model", str(tiny_model_dir), "--home", str(tmp_path)]
    proc = sieve_process(argv, start_new_session=True)
    try:
        deadline = time.monotonic() + 240
        while not any("uvicorn" in _cmdline(p) for p in _children(proc.pid)):
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.3)
        time.sleep(5)  # the flow is running
        children = _children(proc.pid)
        os.killpg(proc.pid, signal.SIGTERM)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 128 + signal.SIGTERM, err
    assert only_line(err).startswith("interrupted: "), err
    deadline = time.monotonic() + 10
    while (left := [p for p in children if Path(f"/proc/{p}").exists()]) and (
        time.monotonic() < deadline
    ):
        time.sleep(0.2)
    assert not left, [_cmdline(p) for p in left]


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


# ------------------------------------------------------------------------------ --verbose


@pytest.mark.integration  # 64 s
def test_verbose_shows_prefect_logs_and_the_default_keeps_them_in_the_log_file(
    tmp_path: Path, tiny_model_dir: Path
) -> None:
    """The real command in a subprocess, with a model whose weights are cut short: without
    --verbose stderr is the one `error:` line and Prefect's traceback is in the log file; with
    --verbose the same failure shows Prefect's own log lines on the console."""
    model = tmp_path / "m"
    write_files(tmp_path, {"m": TINY, "m/model.safetensors": b"\x08\x00\x00\x00"}, tiny_model_dir)
    home = tmp_path / "home"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_", "SIEVE_"))}

    def sieve(*options: str) -> subprocess.CompletedProcess[str]:
        argv = [*options, "curate", "--n", "10", "--model", str(model), "--home", str(home)]
        return subprocess.run(
            [sys.executable, "-m", "flows.cli", *argv],
            capture_output=True,
            text=True,
            env=env,
            timeout=280,
        )

    quiet = sieve()
    assert "cannot load model" in error_line(quiet.returncode, quiet.stderr)
    log = (home / "logs" / "prefect.log").read_text()
    assert "Traceback" in log and "cannot load model" in log
    loud = sieve("--verbose")
    assert loud.returncode == 1
    assert "Traceback" in loud.stderr and "Flow run" in loud.stderr, loud.stderr
    assert any(x.startswith("error: cannot load model") for x in loud.stderr.splitlines())


def test_an_interrupt_raised_in_a_string_exec_still_exits_with_the_signal_code(
    tmp_path: Path,
) -> None:
    """CPython marks a KeyboardInterrupt that ends a string `exec` as unhandled even once it is
    caught, and under `python -m` then dies by SIGINT (-2): the flaky SIGTERM run above, when
    the signal landed in code run from a string. The CLI still exits 130 with one line."""
    (tmp_path / "interrupted_app.py").write_text(
        "import typer\n"
        "from flows.cli.common import run_app\n"
        "app = typer.Typer()\n"
        "@app.command()\n"
        "def go() -> None:\n"
        "    exec('raise KeyboardInterrupt', {})\n"
        "@app.command()\n"
        "def other() -> None:\n"
        "    pass\n"
        "run_app(app)\n"
    )
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(root)])}
    proc = subprocess.run(
        [sys.executable, "-m", "interrupted_app", "go"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=120,
    )
    assert proc.returncode == 128 + signal.SIGINT, proc.stderr
    assert only_line(proc.stderr) == "interrupted: nothing half-written"


# ------------------------------------------------------------------------------ output paths

# Issue 47: one guarded writer (pipeline.core.outputs) for every file a command writes where the
# user said. `backtest --png` overwrote the ledger through a link, `report`/`export` replaced a link
# instead of writing through it, `sql --output /dev/stdout` renamed a file over /dev/stdout (as
# root), and `--output -` wrote a file named `-`.


def scored_pool(folder: Path) -> Path:
    """A small scored pool for `sieve backtest --pool` (two prompts, four samples each)."""
    rows = [(p, i, float(x)) for p, text in {"a": "1010", "b": "1100"}.items() for i, x in
            enumerate(text)]  # fmt: skip
    frame = pl.DataFrame(rows, schema=["problem_id", "sample_idx", "reward"], orient="row")
    path = folder / "pool.parquet"
    frame.with_columns(correct=pl.col("reward") == 1).write_parquet(path)
    return path


# command -> (argv writing OUT, where the link goes: OUT itself or a file in the folder OUT)
OUTPUTS: dict[str, tuple[list[str], str]] = {
    "sql --output": (["sql", "SELECT 1 AS x", "--format", "csv", "--output", "{o}"], "{o}"),
    "backtest --png": (
        ["backtest", "--pool", "{d}/pool.parquet", "--policy", "uniform:g=4", "--png", "{o}"],
        "{o}",
    ),
    "report": (["report", "--output", "{o}"], "{o}/report.html"),
    "export": (["export", "--output", "{o}"], "{o}/cur-test.trl.parquet"),
}


@pytest.mark.parametrize("link", ["symlink", "hard link"])
@pytest.mark.parametrize("command", list(OUTPUTS))
def test_an_output_linked_to_the_ledger_is_refused(
    seeded_home: Path, tmp_path: Path, capfd: pytest.CaptureFixture[str], command: str, link: str
) -> None:
    argv, where = OUTPUTS[command]
    scored_pool(tmp_path)
    out = tmp_path / "out"
    name = Path(where.replace("{o}", str(out)))
    name.parent.mkdir(parents=True, exist_ok=True)
    ledger = seeded_home / "sieve.duckdb"
    if link == "symlink":
        name.symlink_to(ledger)
    else:
        os.link(ledger, name)
    before, data = checksums(seeded_home), ledger.read_bytes()
    args = [a.replace("{o}", str(out)).replace("{d}", str(tmp_path)) for a in argv]
    code, err = run_cli([*args, "--home", str(seeded_home)], capfd)
    assert "is the ledger itself (sieve.duckdb)" in error_line(code, err)
    assert ledger.read_bytes() == data and checksums(seeded_home) == before
    assert name.is_symlink() == (link == "symlink") and name.samefile(ledger)


def test_an_output_over_any_duckdb_file_is_refused(
    seeded_home: Path, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """Another home's ledger (not this home's): refused by what it is, a DuckDB database."""
    other = tmp_path / "other.duckdb"
    shutil.copyfile(seeded_home / "sieve.duckdb", other)
    data = other.read_bytes()
    png = tmp_path / "fig.png"
    png.symlink_to(other)
    pool = scored_pool(tmp_path)
    argv = ["backtest", "--pool", str(pool), "--png", str(png), "--home", str(seeded_home)]
    code, err = run_cli(argv, capfd)
    assert f"refused: --png {png} is a DuckDB database" in error_line(code, err)
    assert other.read_bytes() == data


def _null_device(path: Path) -> Path:
    try:  # a /dev/null of our own
        os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    except PermissionError:
        pytest.skip("making a device node needs root")
    return path


@pytest.mark.parametrize(
    "target",
    ["a symlink to a file", "a symlink to /dev/stdout", "the name /dev/stdout", "-", "a device",
     "a symlink to a device", "a FIFO"],
)  # fmt: skip
def test_sql_output_is_written_through_links_devices_and_stdout(
    seeded_home: Path,
    tmp_path: Path,
    capfd: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    target: str,
) -> None:
    monkeypatch.chdir(tmp_path)
    link, file = tmp_path / "out.csv", tmp_path / "file.csv"
    reader = -1
    if target == "a symlink to a file":
        file.write_text("old\n")
        link.symlink_to(file)
    elif target == "a symlink to /dev/stdout":
        link.symlink_to("/dev/stdout")
    elif target == "the name /dev/stdout":
        link = Path("/dev/stdout")
    elif target == "-":
        link = Path("-")
    elif target == "a device":
        _null_device(link)
    elif target == "a symlink to a device":
        link.symlink_to(_null_device(file))
    else:  # a reader already there (opened without waiting): the command never waits for one
        os.mkfifo(link)
        reader = os.open(link, os.O_RDONLY | os.O_NONBLOCK)
    argv = ["sql", "SELECT 42 AS x", "--format", "csv", "--output", str(link)]
    code, out, err = run_sieve([*argv, "--home", str(seeded_home)], capfd)
    assert code == 0 and err == "", err
    listed = sorted(p.name for p in tmp_path.iterdir())
    if target == "a symlink to a file":
        assert link.is_symlink() and file.read_text() == "x\n42\n"
    elif target in ("a symlink to /dev/stdout", "the name /dev/stdout", "-"):
        assert out == "x\n42\n" and Path("/dev/stdout").is_symlink()  # not renamed over
        assert listed == (["out.csv"] if link.name == "out.csv" else [])  # no file named `-`
        assert link.is_symlink() or target == "-"
    elif target == "a FIFO":
        got = os.read(reader, 1024)  # the command has written and closed its end
        os.close(reader)
        assert got == b"x\n42\n" and stat.S_ISFIFO(link.lstat().st_mode)
    else:
        assert file.is_char_device() if link.is_symlink() else link.is_char_device()


# Issue 47: a failed `report` or `export` left partial files (new figures beside the old page,
# data without its card, a new folder holding half of it), and a second export into a folder
# overwrote the first one's README.md (its dataset card).


def listing(folder: Path) -> dict[str, bytes | None]:
    """Every name under `folder` with its bytes (None for a folder)."""
    return {
        str(p.relative_to(folder)): None if p.is_dir() else p.read_bytes()
        for p in sorted(folder.rglob("*"))
    }


@pytest.mark.parametrize(
    ("command", "blocked"),
    [(["report"], "report.html"), (["export"], "README.md")],
    ids=["report", "export"],
)
def test_a_failed_report_or_export_leaves_its_folder_as_it_was(
    seeded_home: Path,
    tmp_path: Path,
    capfd: pytest.CaptureFixture[str],
    command: list[str],
    blocked: str,
) -> None:
    """A folder where the last file cannot be written (here a folder in its place): the report
    wrote its figures, the export its data file, and then failed."""
    out = tmp_path / "out"
    (out / blocked).mkdir(parents=True)
    (out / "fig_curriculum_0.png").write_bytes(b"an older report's figure")
    before = listing(out)
    code, err = run_cli([*command, "--output", str(out), "--home", str(seeded_home)], capfd)
    assert f"{out}/{blocked}" in error_line(code, err)
    assert listing(out) == before


@pytest.mark.parametrize("command", [["report"], ["export"]], ids=["report", "export"])
def test_a_report_or_export_on_a_full_disk_leaves_no_folder(
    small_disk: Path,
    write_curriculum: Callable[[Ledger], object],
    capfd: pytest.CaptureFixture[str],
    tmp_path: Path,
    command: list[str],
) -> None:
    home = tmp_path / "home"
    with Ledger.open(home) as ledger:
        write_curriculum(ledger)
    fill(small_disk)
    out = small_disk / "new" / "out"
    code, err = run_cli([*command, "--output", str(out), "--home", str(home)], capfd)
    assert "No space left on device" in error_line(code, err) or "disk full" in err
    assert sorted(p.name for p in small_disk.iterdir()) == ["filler"]


def test_write_outputs_is_all_or_nothing(tmp_path: Path) -> None:
    """The second file fails while it is written: the first is not replaced either, and no
    temporary file is left."""
    import errno

    from pipeline.core.outputs import PARTIAL, write_outputs

    first, second = tmp_path / "a.png", tmp_path / "b.html"
    first.write_bytes(b"old a")

    def full(handle: Any) -> None:
        handle.write(b"half")
        raise OSError(errno.ENOSPC, "No space left on device")

    with pytest.raises(Exception, match=f"cannot write {second}: No space left on device"):
        write_outputs([(first, lambda h: h.write(b"new a")), (second, full)])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.png"] and PARTIAL == []
    assert first.read_bytes() == b"old a"
    write_outputs([(first, lambda h: h.write(b"new a")), (second, lambda h: h.write(b"b"))])
    assert first.read_bytes() == b"new a" and second.read_bytes() == b"b"


def test_a_second_export_into_a_folder_is_refused(
    tmp_path: Path, capfd: pytest.CaptureFixture[str], write_curriculum: Callable[..., object]
) -> None:
    """`export` of another curriculum (or format) into a folder replaced its README.md, the first
    export's dataset card; the same export again still replaces its own files."""
    home = tmp_path / "home"
    with Ledger.open(home) as ledger:
        write_curriculum(ledger, "cur-a")
        write_curriculum(ledger, "cur-b")
    out = tmp_path / "out"
    export = ["export", "--output", str(out), "--home", str(home)]
    assert run_sieve([*export, "--curriculum", "cur-a"], capfd)[0] == 0
    assert run_sieve([*export, "--curriculum", "cur-a"], capfd)[0] == 0  # repeated: fine
    card = (out / "README.md").read_bytes()
    for other in (["--curriculum", "cur-b"], ["--curriculum", "cur-a", "--format", "jsonl"]):
        code, err = run_cli([*export, *other], capfd)
        assert error_line(code, err) == (
            f"error: refused: {out}/README.md is the dataset card of cur-a.trl.parquet, another "
            "export; a folder holds one exported curriculum and format (its README.md is the "
            "card): export into another folder, or remove that file first"
        )
    assert sorted(p.name for p in out.iterdir()) == ["README.md", "cur-a.trl.parquet"]
    assert (out / "README.md").read_bytes() == card
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "README.md").write_text("# my notes\n")
    code, err = run_cli(["export", "--output", str(mine), "--home", str(home)], capfd)
    assert "README.md is not the dataset card of a Sieve export" in error_line(code, err)
    assert (mine / "README.md").read_text() == "# my notes\n"


# ------------------------------------------------------------------------------ nights


def test_a_finished_night_is_not_run_again(
    tmp_path: Path,
    capfd: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tiny_model_dir: Path,
) -> None:
    """Re-running a finished `sieve loop --nights 1 --start D` trained night D again, from the
    weights night D had made (issue 47). The night is stubbed as the nightly flow leaves one: a
    curriculum of the night's model, a finished training run from it and its checkpoint."""
    import flows.commands.common
    import flows.loop
    import flows.nightly
    from pipeline.jobs.train.lineage import current_model
    from pipeline.policy.model import create_tiny_model, folder_revision

    home, base = tmp_path / "home", tmp_path / "base"
    shutil.copytree(tiny_model_dir, base)
    ran: list[str] = []

    def night(params: Any, runtime: Any = None) -> dict[str, Any]:
        folder, _ = current_model(params.home, params.model)
        start, n = folder_revision(folder), len(ran)
        ran.append(str(params.night))
        step = home / "checkpoints" / f"train-{n}" / "step-000001"
        final = create_tiny_model(step, seed=n + 1)
        now = datetime.now(UTC)
        with Ledger.open(home) as ledger:
            ledger.write_batch({
                "curricula": pl.DataFrame({"curriculum_id": [f"cur-{n}"], "created_at": [now],
                    "model": [str(folder)], "model_revision": [start]}),
                "train_runs": pl.DataFrame({"train_id": [f"train-{n}"], "curriculum_id":
                    [f"cur-{n}"], "base_model": [str(folder)], "base_revision": [start],
                    "started_at": [now], "finished_at": [now], "status": ["finished"]}),
                "checkpoints": pl.DataFrame({"train_id": [f"train-{n}"], "step": [1], "path":
                    [str(step)], "model_revision": [final], "created_at": [now]}),
            })  # fmt: skip
        held = {"sampled": 0.1}
        train = {
            "train_id": f"train-{n}",
            "base_revision": start,
            "final_revision": final,
            "steps": 1,
            "rollouts": 8,
            "heldout_before": held,
            "heldout_after": held,
        }
        curate = {"curriculum_id": f"cur-{n}", "kept": {"1": 4}, "rollouts_spent": {"1": 32}}
        return {"night": params.night, "model": str(folder), "curate": curate, "train": train}

    monkeypatch.setattr(flows.nightly, "nightly_flow", night)
    monkeypatch.setattr(flows.commands.common, "start_flows", lambda home: None)
    monkeypatch.setattr(flows.loop, "quiet_prefect", lambda home: None)
    argv = ["loop", "--nights", "1", "--start", "2026-11-01", "--home", str(home)]
    code, _, err = run_sieve([*argv, "--model", str(base)], capfd)
    assert code == 0 and ran == ["2026-11-01"], err
    tables = (*TABLES, "checkpoints")
    with Ledger.open(home, read_only=True) as ledger:
        before = {t: ledger.checksum(t) for t in tables}
    for model in (["--model", str(base)], []):  # its lineage named, or the newest curriculum's
        code, out, err = run_sieve([*argv, *model], capfd)
        assert code == 0 and ran == ["2026-11-01"], err  # not trained again
        assert "night 1 (2026-11-01): done already (curriculum cur-0, training train-0" in out
        assert "--again runs it again" in out
    with Ledger.open(home, read_only=True) as ledger:
        assert {t: ledger.checksum(t) for t in tables} == before
        assert ledger.run("SELECT count(*) FROM nights") == [(1,)]
    assert run_sieve([*argv, "--again"], capfd)[0] == 0 and ran == ["2026-11-01"] * 2
    two = ["loop", "--nights", "2", "--start", "2026-11-01", "--home", str(home)]
    assert run_sieve(two, capfd)[0] == 0  # night 1 done (twice), night 2 not yet
    assert ran == ["2026-11-01", "2026-11-01", "2026-11-02"]


# ------------------------------------------------------------------------------ moved homes

# Issue 47: the ledger named its models and checkpoints by absolute path, so `mv A B; sieve
# curate --home B` fell back to the untrained tiny policy without a word, and a `cp -a` copy of a
# home kept training from the original home's checkpoints. Rows now name folders inside the home
# relative to it; rows written before are read as the home's own folders where it holds them;
# a recorded checkpoint that is missing is one error line.


@pytest.fixture
def trained_home(
    tmp_path: Path, tiny_model_dir: Path, write_curriculum: Callable[[Ledger], object]
) -> Path:
    """A home as the pipeline's writers leave it: a curriculum curated with models/tiny
    (`pipeline.jobs.curate.curation.write_curriculum`) and one finished training of it
    (`flows.train.train`: its run, checkpoints and evaluations)."""
    from types import SimpleNamespace

    from flows.train import train
    from pipeline.jobs.curate.curation import write_curriculum as write_head
    from pipeline.policy.model import folder_revision
    from pipeline.selection import CurateConfig
    from tests.test_train import SMALL, even_length

    home = tmp_path / "A"
    model = home / "models" / "tiny"
    shutil.copytree(tiny_model_dir, model)
    with Ledger.open(home) as ledger:
        items = write_curriculum(ledger)
        policy = SimpleNamespace(
            sampler=SimpleNamespace(model_name=str(model.resolve())),
            model_revision=folder_revision(model),
        )
        empty = pl.DataFrame(schema={"problem_id": pl.Utf8, "reason": pl.Utf8})
        ledger.run("DELETE FROM curricula")  # the fixture's row names model "m"
        write_head(ledger, "cur-test", policy, CurateConfig(), items.drop("curriculum_id"), empty)
        train(ledger, "cur-test", model, SMALL, home, reward=even_length)
    return home


def homes_model(home: Path) -> tuple[Path, Path]:
    """(what a night or `sieve curate` starts from, the model `sieve train` trains) in `home`."""
    from pipeline.jobs.train.lineage import curriculum_model, nightly_model

    with Ledger.open(home, read_only=True) as ledger:
        return nightly_model(ledger, None, home)[0], curriculum_model(ledger, "cur-test")[0]


def test_a_moved_or_copied_home_trains_on_its_own_checkpoints(
    trained_home: Path, tmp_path: Path
) -> None:
    home = trained_home
    with Ledger.open(home, read_only=True) as ledger:
        (step,) = ledger.run("SELECT path FROM checkpoints ORDER BY step DESC LIMIT 1")[0]
        assert ledger.run("SELECT model FROM curricula") == [("models/tiny",)]
        assert ledger.run("SELECT base_model FROM train_runs") == [("models/tiny",)]
    assert step.startswith("checkpoints/train-")  # relative to the home
    assert homes_model(home) == (home / step, home / "models" / "tiny")
    copy, moved = tmp_path / "C", tmp_path / "B"
    shutil.copytree(home, copy, symlinks=True)  # cp -a
    assert homes_model(copy) == (copy / step, copy / "models" / "tiny")
    home.rename(moved)  # mv A B
    assert homes_model(moved) == (moved / step, moved / "models" / "tiny")


@pytest.mark.parametrize("weights_gone", [False, True])
def test_a_fresh_night_starts_from_the_folder_whatever_its_lineage_holds(
    trained_home: Path, tmp_path: Path, weights_gone: bool
) -> None:
    """`sieve loop --fresh` (a second run, a sweep member): the first night starts from the
    model folder itself, not from the newest checkpoint trained from it, and even where that
    checkpoint is gone (a ledger copied from another machine); without --fresh a gone
    checkpoint is one error line. --fresh without a model folder is one line too."""
    from pipeline.jobs.train.lineage import night_start

    home = tmp_path / "H"
    shutil.copytree(trained_home, home, symlinks=True)
    model = str(home / "models" / "tiny")
    if weights_gone:
        shutil.rmtree(home / "checkpoints")
        with pytest.raises(SieveError, match="missing") as err:
            night_start(home, model)
        assert "\n" not in str(err.value)
    else:
        head, _ = night_start(home, model)
        assert head != Path(model) and "checkpoints" in head.parts
    assert night_start(home, model, fresh=True)[0] == Path(model)
    for bad in (None, str(tmp_path / "nowhere"), str(home / "checkpoints")):
        with pytest.raises(SieveError, match="--fresh starts a new lineage"):
            night_start(home, bad, fresh=True)


def test_a_moved_or_copied_home_of_absolute_rows_trains_on_its_own_checkpoints(
    trained_home: Path, tmp_path: Path
) -> None:
    """A ledger written before rows were relative: its absolute names are read as the home's
    own folders (a checkpoint of its own runs always; a model where the home holds it)."""
    home = trained_home
    with Ledger.open(home) as ledger:
        prefix = f"{home.resolve()}/"
        for table, column in [("checkpoints", "path"), ("curricula", "model"),
                              ("train_runs", "base_model")]:  # fmt: skip
            absolute = f"CASE WHEN {column} LIKE '/%' THEN {column} ELSE $p || {column} END"
            ledger.run(f"UPDATE {table} SET {column} = {absolute}", {"p": prefix})
        (step,) = ledger.run("SELECT path FROM checkpoints ORDER BY step DESC LIMIT 1")[0]
    step = str(Path(step).relative_to(home.resolve()))
    copy, moved = tmp_path / "C", tmp_path / "B"
    shutil.copytree(home, copy, symlinks=True)
    assert homes_model(copy) == (copy / step, copy / "models" / "tiny")
    home.rename(moved)
    assert homes_model(moved) == (moved / step, moved / "models" / "tiny")


def test_a_home_without_its_recorded_checkpoint_is_one_line(
    trained_home: Path, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """A home copied without its checkpoints: `sieve curate` fell back to another model (the
    original home's checkpoint, or the untrained tiny policy); it now names what is missing."""
    copy = tmp_path / "C"
    shutil.copytree(trained_home, copy, symlinks=True, ignore=shutil.ignore_patterns("train-*"))
    with Ledger.open(copy, read_only=True) as ledger:
        (run, step, path) = ledger.run(
            "SELECT train_id, step, path FROM checkpoints ORDER BY step DESC LIMIT 1"
        )[0]
    before = checksums(copy)
    code, err = run_cli(["curate", "--n", "10", "--home", str(copy)], capfd)
    assert error_line(code, err) == (
        f"error: the newest checkpoint of this lineage, {copy / path} (training {run}, step "
        f"{step}), is missing: restore it (was the home moved or copied without it?), or start "
        "from another model with --model"
    )
    assert checksums(copy) == before


def test_a_signal_inside_an_import_is_delivered_again_after_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A first SIGTERM that lands while a module is being imported (CI: inside torch's import,
    where the KeyboardInterrupt crossed pybind11 and the process aborted with `terminate
    called ...`) raises nothing there: it is sent again a moment later; outside an import it
    raises as before."""
    import importlib
    import threading

    from flows.cli import common

    sent: list[tuple[int, int]] = []
    started = threading.Event()

    class Timer:
        def __init__(self, delay: float, fn: Any, args: tuple[int, int]) -> None:
            assert delay == common.SIGNAL_RETRY_S and fn is os.kill
            self.args, self.daemon = args, False

        def start(self) -> None:
            sent.append(self.args)
            started.set()

    monkeypatch.setattr(threading, "Timer", Timer)
    monkeypatch.setattr(common, "_run", common._Run())
    monkeypatch.setattr(sys, "stderr", sys.stderr)  # the handler swaps stderr for devnull
    (tmp_path / "mod_signalled.py").write_text(
        "import sys\nfrom flows.cli import common\n"
        "common._on_signal(15, sys._getframe())\nREACHED = True\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    mod = importlib.import_module("mod_signalled")
    assert mod.REACHED and started.is_set()
    assert sent == [(os.getpid(), 15)]
    assert common._run.signal is None  # not taken yet: the re-sent one is the first
    with pytest.raises(KeyboardInterrupt):
        common._on_signal(15, sys._getframe())
    assert common._run.signal == 15


# ------------------------------------------------------------- a probe round: model folders

# sieve.json bodies a model folder may hold by mistake, and what the one line says of each
BROKEN_SIEVE_JSON: dict[str, tuple[str | bytes, str]] = {
    "invalid JSON": ('{"prompt_format": ', "sieve.json is not valid JSON (Expecting value"),
    "a list": ("[1, 2]", "sieve.json must hold a JSON object, not a list"),
    "a string": ('"raw"', "sieve.json must hold a JSON object, not a string"),
    "null": ("null", "sieve.json must hold a JSON object, not null"),
    "a number": ("7", "sieve.json must hold a JSON object, not a number"),
    "prompt_format a number": ('{"prompt_format": 5}', "prompt_format must be one of"),
    "prompt_format unknown": ('{"prompt_format": "Raw"}', "got 'Raw'"),
    "source a number": ('{"source": 3}', "source must be a string (or unset), got 3"),
    "model_revision a list": ('{"model_revision": []}', "model_revision must be a string"),
    "step a boolean": ('{"step": true}', "step must be an integer (or unset), got True"),
    "not UTF-8": (b'{"source": "\xff"}', "sieve.json is not UTF-8 text (byte 12)"),
}
META_COMMANDS = {
    "models add": ["models", "add", "copy", "--from", "{m}"],
    "curate": ["curate", "--n", "10", "--model", "{m}"],
    "eval": ["eval", "--per-level", "1", "--samples", "1", "--model", "{m}"],
}


@pytest.mark.parametrize("body", list(BROKEN_SIEVE_JSON))
@pytest.mark.parametrize("command", list(META_COMMANDS))
def test_a_broken_sieve_json_is_one_line_before_any_work(
    seeded_home: Path,
    tmp_path: Path,
    capfd: pytest.CaptureFixture[str],
    tiny_model_dir: Path,
    body: str,
    command: str,
) -> None:
    """A model folder's sieve.json that is not JSON, not an object, or holds a key Sieve reads
    with the wrong type was a traceback (JSONDecodeError, `'list' object has no attribute
    'get'`) or, for a bad `prompt_format`, ignored without a word; it is one line naming the
    file, before anything is copied, sampled or written. (No key is required: a folder without
    sieve.json, or with `{}`, is a plain Hugging Face folder.)"""
    text, needle = BROKEN_SIEVE_JSON[body]
    model = tmp_path / "m"
    write_files(tmp_path, {"m": TINY, "m/sieve.json": text}, tiny_model_dir)
    argv = [a.replace("{m}", str(model)) for a in META_COMMANDS[command]]
    before = checksums(seeded_home)
    code, err = run_cli([*argv, "--home", str(seeded_home)], capfd)
    line = error_line(code, err)
    assert f"{model}/sieve.json" in line and needle in line, line
    assert "delete it (a model folder needs no sieve.json)" in line
    assert checksums(seeded_home) == before
    assert not (seeded_home / "models" / "copy").exists()
    assert not (seeded_home / "models" / ".copy.tmp").exists()


@pytest.mark.parametrize("text", ["{}", '{"prompt_format": "chat", "anything": [1, {}]}'])
def test_a_sieve_json_without_sieve_keys_is_read_as_it_is(tmp_path: Path, text: str) -> None:
    from pipeline.policy.model import read_meta

    (tmp_path / "sieve.json").write_text(text)
    assert read_meta(tmp_path) == json.loads(text)
    assert read_meta(tmp_path / "nothing-here") == {}


# ------------------------------------------------------------- a probe round: the Prefect API

BAD_API_URLS = {
    "nothing listening": ("http://127.0.0.1:9/api", "cannot reach a Prefect server there"),
    "not a URL": ("not a url", "is not an http:// or https:// URL"),
    "an unclosed IPv6 host": ("http://[::1", "is not a URL (Invalid IPv6 URL)"),
    "another scheme": ("ftp://127.0.0.1/api", "is not an http:// or https:// URL"),
    "no host": ("http:///api", "names no host"),
    "a port past 65535": ("http://127.0.0.1:99999/api", "is not a URL (Port out of range"),
    "empty": ("   ", "is not an http:// or https:// URL"),
}


@pytest.mark.parametrize("case", list(BAD_API_URLS))
def test_schedule_with_a_bad_prefect_api_url_is_one_line(
    seeded_home: Path,
    capfd: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    case: str,
) -> None:
    """`PREFECT_API_URL` unreachable or malformed: 70-130 lines of httpx's or pydantic's
    traceback from inside Prefect's serve; one line naming the URL and what is wrong with it,
    checked before Prefect reads it."""
    url, needle = BAD_API_URLS[case]
    monkeypatch.setenv("PREFECT_API_URL", url)
    argv = ["schedule", "--cron", "0 2 * * *", "--home", str(seeded_home)]
    started = time.monotonic()
    code, err = run_cli(argv, capfd)
    line = error_line(code, err)
    assert f"PREFECT_API_URL {url!r}" in line and needle in line, line
    assert time.monotonic() - started < 30
