"""`sieve export` and `sieve report` run as a user would: output files, and one clear error line
(exit 1, nothing written) for bad input."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from flows.curate import curate
from pipeline.problems import generate_mix
from pipeline.selection import CurateConfig
from pipeline.store import Ledger
from tests.simulated import simulated_policy


def sieve(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "flows.cli", *args], capture_output=True, text=True, timeout=120
    )


def one_error_line(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 1, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ") and "Traceback" not in result.stderr
    return lines[0]


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A Sieve home whose ledger holds one curriculum (simulated policy)."""
    path = tmp_path_factory.mktemp("home")
    cfg = CurateConfig(n_candidates=80, mix={"arith": "2-5"}, seed=1, chunk_size=40)
    problems = generate_mix(cfg.mix_levels(), cfg.n_candidates, cfg.seed)
    policy = simulated_policy(problems, {2: 0.9, 3: 0.6, 4: 0.3, 5: 0.1})
    with Ledger.open(path) as ledger:
        curate(ledger, policy, cfg)
    return path


@pytest.mark.integration  # 10 s
def test_export_writes_the_file_and_says_where(home: Path, tmp_path: Path) -> None:
    out = tmp_path / "exports"
    result = sieve("export", "--format", "openrlhf", "--output", str(out), "--home", str(home))
    assert result.returncode == 0, result.stderr
    (path,) = out.glob("cur-*.openrlhf.jsonl")
    assert f"-> {path}" in result.stdout and "stage 1:" in result.stdout
    first = json.loads(path.read_text().splitlines()[0])
    assert {"input", "label", "stage", "group_size"} <= set(first)


@pytest.mark.integration  # 6 s
def test_report_writes_the_page(home: Path, tmp_path: Path) -> None:
    result = sieve("report", "--output", str(tmp_path / "r"), "--home", str(home))
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "r" / "report.html").stat().st_size > 0
    assert "no data yet for:" in result.stdout  # no training or eval in this ledger


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (("--format", "csv"), "unknown export format 'csv'; valid formats: trl, verl"),
        (("--curriculum", "cur-nope"), "no curriculum 'cur-nope'"),
        (("--prompt-format", "fancy"), "unknown --prompt-format 'fancy'"),
        (("--format", "openrlhf", "--input-key", "stage"), "must differ"),
    ],
)
def test_bad_export_input_is_one_line_and_writes_nothing(
    home: Path, tmp_path: Path, args: tuple[str, ...], needle: str
) -> None:
    out = tmp_path / "out"
    result = sieve("export", *args, "--output", str(out), "--home", str(home))
    assert needle in one_error_line(result)
    assert not out.exists()


def test_no_curriculum_yet_is_one_line(tmp_path: Path) -> None:
    out = tmp_path / "out"
    Ledger.open(tmp_path / "fresh").close()  # an empty ledger; without one it is "no ledger at"
    result = sieve("export", "--output", str(out), "--home", str(tmp_path / "fresh"))
    assert "no curriculum yet" in one_error_line(result)
    assert not out.exists()


@pytest.mark.parametrize(
    "command",
    ["export", pytest.param("report", marks=pytest.mark.integration)],  # report: over 5 s
)
def test_an_unwritable_output_directory_is_one_line(
    home: Path, tmp_path: Path, command: str
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    line = one_error_line(sieve(command, "--output", str(blocker / "sub"), "--home", str(home)))
    assert "cannot create" in line and str(blocker / "sub") in line
    assert "not a directory" in one_error_line(
        sieve(command, "--output", str(blocker), "--home", str(home))
    )
    assert blocker.read_text() == ""
