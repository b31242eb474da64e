"""A catalogue of bad inputs to the CLI and its config files (issue 7).

Every case runs `sieve` in-process against a home whose ledger already holds problems, a
curriculum and a finished sampling run, and must give exactly one line starting with `error:`
that names the problem, a non-zero exit, and leave every ledger table's checksum unchanged.
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from pipeline import cli
from pipeline.store import Ledger

TABLES = ("problems", "sampling_runs", "rollouts", "curricula", "curriculum_items", "train_runs")

# (id, files to write under the case dir, argv, needle expected in the error line)
CASES: list[tuple[str, dict[str, str], list[str], str]] = [
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
        "train: G out of range",
        {"t.toml": "[grpo]\ngroup_size = 1\n"},
        ["train", "--config", "{d}/t.toml"],
        "group_size",
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
]


def checksums(home: Path) -> dict[str, tuple[int, int]]:
    with Ledger.open(home, read_only=True) as led:
        return {t: led.checksum(t) for t in TABLES}


def run_cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    old = sys.argv
    sys.argv = ["sieve", *argv]
    try:
        cli.main()
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    finally:
        sys.argv = old
    return code, capsys.readouterr().err


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


@pytest.mark.parametrize(
    ("files", "argv", "needle"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_bad_input_is_one_line_and_leaves_the_ledger_unchanged(
    seeded_home: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    files: dict[str, str],
    argv: list[str],
    needle: str,
) -> None:
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    args = [a.replace("{d}", str(tmp_path)) for a in argv]
    if args[0] not in ("verify",):
        args += ["--home", str(seeded_home)]
    before = checksums(seeded_home)
    code, err = run_cli(args, capsys)
    lines = [line for line in err.splitlines() if line.strip()]
    assert code != 0
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert needle.replace("{d}", str(tmp_path)) in lines[0], lines[0]
    assert checksums(seeded_home) == before


def test_the_catalogue_is_at_least_twenty_cases() -> None:
    assert len(CASES) >= 20


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
