"""Opening the ledger: read commands never create one, and a damaged file is one error line.

A missing home or ledger is an error for every read-only open (nothing is created on disk); a
ledger truncated to 1-3 MB, or a file that is not DuckDB's, is reported as damaged by every open
path and by the CLI, and left byte for byte as it was.
"""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import pytest

from pipeline.core.errors import SieveError
from pipeline.problems import generate_mix
from pipeline.store import Ledger, migrations
from pipeline.store import ledger as ledger_module
from tests.cli_runner import run_cli as run_sieve

MB = 2**20


def run_cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, list[str]]:
    """`sieve ARGV` in this process: (exit code, non-empty stderr lines)."""
    code, _, err = run_sieve(argv, capsys)
    return code, [line for line in err.splitlines() if line.strip()]


@pytest.mark.parametrize("transient", [False, True])
def test_a_read_only_open_of_a_missing_ledger_is_an_error_and_creates_nothing(
    tmp_path: Path, transient: bool
) -> None:
    home = tmp_path / "nowhere"
    with pytest.raises(SieveError, match=r"no ledger at .*nowhere/sieve\.duckdb.*--home"):
        Ledger.open(home, read_only=True, transient=transient)
    assert not home.exists()


@pytest.mark.parametrize(
    "argv",
    [
        ["stats"],
        ["sql", "SELECT count(*) FROM problems"],
        ["curriculum", "show"],
        ["report"],
        ["export", "--output", "{tmp}/out"],
    ],
    ids=lambda a: a[0],
)
def test_read_commands_on_a_missing_home_fail_in_one_line_and_create_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    home = tmp_path / "nowhere"
    args = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    code, lines = run_cli([*args, "--home", str(home)], capsys)
    assert code == 1
    assert len(lines) == 1 and lines[0].startswith("error: no ledger at "), lines
    assert str(home / "sieve.duckdb") in lines[0]
    assert not home.exists() and not (tmp_path / "out").exists()


def test_a_read_only_open_applies_pending_migrations_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    known = migrations()
    path = tmp_path / "sieve.duckdb"
    monkeypatch.setattr(ledger_module, "migrations", lambda: known[:-1])  # an older Sieve
    Ledger.open(path=path).close()
    monkeypatch.undo()
    with Ledger.open(path=path, read_only=True) as led:
        assert sorted(led.applied_migrations()) == [v for v, _, _ in known]
        assert led.pending_migrations() == []


@pytest.fixture(scope="module")
def big_ledger(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A ledger of a little over 5 MB (checkpointed, no write-ahead log)."""
    path = tmp_path_factory.mktemp("big") / "sieve.duckdb"
    with Ledger.open(path=path) as led:
        seed = 0
        while path.stat().st_size <= 5 * MB:
            led.write("problems", generate_mix({"word": list(range(1, 9))}, 20_000, seed=seed))
            led.run("CHECKPOINT")
            seed += 1
    return path


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def damaged_copy(big: Path, home: Path, size: int | None) -> Path:
    home.mkdir(parents=True)
    path = home / "sieve.duckdb"
    if size is None:
        path.write_text("question,answer\n1+1,2\n" * 1000)  # not a DuckDB file at all
    else:
        shutil.copy(big, path)
        with path.open("r+b") as f:
            f.truncate(size)
    return path


@pytest.mark.parametrize("size", [1 * MB, 2 * MB, 3 * MB, None], ids=["1MB", "2MB", "3MB", "csv"])
@pytest.mark.parametrize(
    "how", [{}, {"read_only": True}, {"transient": True}], ids=["write", "read", "transient"]
)
def test_a_damaged_ledger_is_one_error_naming_the_file_and_stays_unchanged(
    big_ledger: Path, tmp_path: Path, size: int | None, how: dict[str, bool]
) -> None:
    path = damaged_copy(big_ledger, tmp_path / "home", size)
    before = digest(path)
    with pytest.raises(SieveError) as info:
        Ledger.open(path=path, **how)
    message = str(info.value)
    assert message.startswith(f"ledger {path} is damaged or not a DuckDB file: ")
    assert "\n" not in message
    assert digest(path) == before
    assert {p.name for p in path.parent.iterdir()} <= {"sieve.duckdb", "sieve.duckdb.writer"}


@pytest.mark.parametrize(
    "argv",
    [["stats"], ["sql", "SELECT 1"], ["generate", "--family", "arith", "--n", "3"]],
    ids=lambda a: a[0],
)
def test_cli_commands_on_a_truncated_ledger_print_one_error_line(
    big_ledger: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    home = tmp_path / "home"
    path = damaged_copy(big_ledger, home, 2 * MB)
    before = digest(path)
    code, lines = run_cli([*argv, "--home", str(home)], capsys)
    assert code == 1
    assert len(lines) == 1 and lines[0].startswith(f"error: ledger {path} is damaged"), lines
    assert digest(path) == before
