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

import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from pipeline.store import Ledger
from tests.cli_runner import run_cli as run_sieve

TABLES = ("problems", "sampling_runs", "rollouts", "curricula", "curriculum_items", "train_runs")

TINY = "<tiny model>"  # a file value: copy the tiny policy folder here
GONE = "<delete>"  # a file value: delete this file (after the copies above it)
BAD_JSON = '{"model_type": "llama", "hidden_size": '
LEVEL_ABOVE_INT32 = '{"question": "1+1?", "answer": "2", "level": 99999999999}\n'

# (id, files to write under the case dir, argv, needle expected in the error line)
CASES: list[tuple[str, dict[str, str | bytes], list[str], str]] = [
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
    # engine/model failures inside the Prefect flow: one line, Prefect's logs in the log file
    (
        "curate: model config.json broken",
        {"m": TINY, "m/config.json": BAD_JSON},
        ["curate", "--n", "10", "--model", "{d}/m"],
        "config.json",
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
]
FLOW_CASES = {c[0] for c in CASES if c[2][0] in ("curate", "train") and TINY in c[1].values()}


def checksums(home: Path) -> dict[str, tuple[int, int]]:
    with Ledger.open(home, read_only=True) as led:
        return {t: led.checksum(t) for t in TABLES}


def write_files(root: Path, files: dict[str, str | bytes], tiny: Path) -> None:
    for name, value in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if value == TINY:
            shutil.copytree(tiny, path)
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


@pytest.mark.parametrize(
    ("case", "files", "argv", "needle"), [c for c in CASES], ids=[c[0] for c in CASES]
)
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
    if args[0] not in ("verify",):
        args += ["--home", str(seeded_home)]
    log = seeded_home / "logs" / "prefect.log"
    logged = log.stat().st_size if log.exists() else 0
    before = checksums(seeded_home)
    code, err = run_cli(args, capfd)
    line = error_line(code, err)
    assert needle.replace("{d}", str(tmp_path)) in line, line
    assert checksums(seeded_home) == before
    if case in FLOW_CASES:  # the flow's failure was logged, to the file
        assert log.stat().st_size > logged, f"nothing logged to {log}"
        assert "Traceback" in log.read_text(errors="replace")[logged:]


def test_the_catalogue_holds_every_case() -> None:
    assert len(CASES) == 49 and len({c[0] for c in CASES}) == len(CASES)
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


# ------------------------------------------------------------------------------ --verbose


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
