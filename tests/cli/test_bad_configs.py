"""Bad config files and values, each refused with one line (issue 32 point 4).

The catalogue of config probes: every case runs `sieve train` or `sieve curate` in-process with
a `--config` file against an empty home, and must exit non-zero with exactly one stderr line,
`error: ...`, naming the field and the bad value, and write nothing (the home stays empty: no
ledger, no `.prefect`). `--config` paths that are not regular files (a FIFO, `/dev/zero`, a file
over 1 MiB) are refused before they are read. `train --print-config` writes nothing either, and
every committed config file still loads.

Test: `.venv/bin/pytest tests/cli/test_bad_configs.py -q`.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.core.errors import SieveError
from pipeline.core.tomlconfig import MAX_CONFIG_BYTES
from pipeline.jobs.train.settings import RECIPES, load_settings
from pipeline.selection import load_curate_config
from pipeline.selection.config import load_mix
from tests.cli_runner import error_line, run_cli

ROOT = Path(__file__).resolve().parents[2]
BIG = "9223372036854775807"  # 2**63 - 1

# (id, command, TOML text, text expected in the error line)
TRAIN_NAN = [
    "adv_eps",
    "beta",
    "clip_eps_high",
    "length_penalty_coef",
    "repetition_coef",
    "tis_cap",
    "weight_decay",
    "zero_var_tol",
]
TRAIN_INF = ["lr", "temperature", "max_grad_norm", "reward_clip", "kl_target"]
CASES: list[tuple[str, str, str, str]] = [
    *[
        (f"train: {k} = nan", "train", f"[grpo]\n{k} = nan\n", f"grpo.{k} must be")
        for k in TRAIN_NAN
    ],
    *[
        (f"train: {k} = inf", "train", f"[grpo]\n{k} = inf\n", f"grpo.{k} must be")
        for k in TRAIN_INF
    ],
    (
        "train: lr = inf names the range",
        "train",
        "[grpo]\nlr = inf\n",
        "grpo.lr must be a finite number > 0, got inf",
    ),
    (
        "train: total_steps = 0",
        "train",
        "[grpo]\ntotal_steps = 0\n",
        "grpo.total_steps must be an integer in [1, ",
    ),
    (
        "train: max_new_tokens = 2^63-1",
        "train",
        f"[grpo]\nmax_new_tokens = {BIG}\n",
        f"grpo.max_new_tokens must be an integer in [1, 1048576], got {BIG}",
    ),
    (
        "train: temperature above the cap",
        "train",
        "[grpo]\ntemperature = 1e6\n",
        "grpo.temperature must be a finite number in (0, 10]",
    ),
    (
        'train: rollouts_per_step = "128"',
        "train",
        'rollouts_per_step = "128"\n',
        "rollouts_per_step must be an integer in [2, 2147483647], got '128'",
    ),
    (
        "train: unknown eval family",
        "train",
        'eval_families = ["arith", "nope"]\n',
        "eval_families: unknown family 'nope'",
    ),
    (
        "train: an eval level the family lacks",
        "train",
        'eval_families = {arith = "1-2", linear = "9"}\n',
        "eval_families: linear: level 9 not in linear levels 1-",
    ),
    (
        "train: no eval family",
        "train",
        "eval_families = []\n",
        "eval_families: give at least one family",
    ),
    (
        'train: "yes" for a bool',
        "train",
        'tensorboard = "yes"\n',
        "tensorboard must be true or false",
    ),
    ("train: a float for an int", "train", "eval_every = 2.0\n", "eval_every must be an integer"),
    ("train: a bool for a number", "train", "[grpo]\nbeta = true\n", "grpo.beta must be a finite"),
    (
        "curate: n_candidates = 2^63-1",
        "curate",
        f"n_candidates = {BIG}\n",
        f"n_candidates must be an integer in [1, 10000000], got {BIG}",
    ),
    ("curate: seed = 1e20", "curate", "seed = 1e20\n", "seed must be an integer in [0, "),
    ("curate: seed = -1", "curate", "seed = -1\n", "seed must be an integer in [0, "),
    (
        "curate: replay_weight = inf",
        "curate",
        "replay_weight = inf\n",
        "replay_weight must be a finite number",
    ),
    ("curate: band_low = nan", "curate", "band_low = nan\n", "band_low must be a finite number"),
    (
        'curate: stop = [""]',
        "curate",
        '[sampling]\nstop = [""]\n',
        "sampling.stop[0] must be a string of at least one character, got ''",
    ),
    (
        "curate: max_new_tokens = 2^63-1",
        "curate",
        f"[sampling]\nmax_new_tokens = {BIG}\n",
        "sampling.max_new_tokens must be an integer in [1, 1048576]",
    ),
    (
        "curate: temperature = inf",
        "curate",
        "[sampling]\ntemperature = inf\n",
        "sampling.temperature must be a finite number in [0",
    ),
    (
        'curate: "yes" for a bool',
        "curate",
        'process_signal = "yes"\n',
        "process_signal must be true or false, got 'yes'",
    ),
    ("curate: a string for an int", "curate", 'screen_g = "8"\n', "screen_g must be an integer"),
    # issue 47: shapes that cost the parser unbounded time or memory, sizes no machine holds
    (
        "curate: arrays nested 3,000 deep",
        "curate",
        "screen_g = " + "[" * 3000 + "]" * 3000 + "\n",
        "arrays or inline tables nested more than 32 deep",
    ),
    (
        "train: arrays nested 3,000 deep",
        "train",
        "[grpo]\nlr = " + "[" * 3000 + "]" * 3000 + "\n",
        "arrays or inline tables nested more than 32 deep",
    ),
    (
        "curate: a dotted key of 2,000 parts",
        "curate",
        "a." * 1999 + "a = 1\n",
        "a key or value of more than 32 dotted parts",
    ),
    (
        "train: a table name of 2,000 parts",
        "train",
        "[" + "a." * 1999 + "a]\n",
        "a key or value of more than 32 dotted parts",
    ),
    (
        "train: a 2,000-character bare key",
        "train",
        "k" * 2000 + " = 1\n",
        "1024 characters (outside quotes)",
    ),
    (
        "curate: screen_g = 100000",
        "curate",
        "screen_g = 100000\nrefine_g = 100000\n",
        "screen_g = 100000 is more samples of one prompt than a sampler holds at once; at most",
    ),
    (
        "curate: sampling.temperature = 0",
        "curate",
        "[sampling]\ntemperature = 0.0\n",
        "temperature 0 (greedy) samples every prompt alike, so no group can disagree",
    ),
    (
        "curate: max_group_size = 100000",
        "curate",
        "max_group_size = 100000\n",
        "max_group_size = 100000 is more samples of one prompt",
    ),
]


def run_refused(argv: list[str], home: Path, capfd: pytest.CaptureFixture[str]) -> str:
    """The one error line of `sieve ARGV --home HOME`, which must leave HOME empty."""
    code, _, err = run_cli([*argv, "--home", str(home)], capfd)
    line = error_line(code, err)
    assert sorted(p.name for p in home.iterdir()) == [], "the command wrote into the home"
    return line


@pytest.fixture
def empty_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty home; no Prefect home chosen for this process (an earlier command in it may
    have set one), so a command that sets Prefect up would create `<home>/.prefect`."""
    monkeypatch.delenv("PREFECT_HOME", raising=False)
    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    home = tmp_path / "home"
    home.mkdir()
    return home


@pytest.mark.parametrize(("case", "command", "text", "needle"), CASES, ids=[c[0] for c in CASES])
def test_bad_config_value_is_one_line_and_writes_nothing(
    tmp_path: Path,
    empty_home: Path,
    capfd: pytest.CaptureFixture[str],
    case: str,
    command: str,
    text: str,
    needle: str,
) -> None:
    config = tmp_path / "c.toml"
    config.write_text(text, encoding="utf-8")
    line = run_refused([command, "--config", str(config)], empty_home, capfd)
    assert line.startswith(f"error: {config}: "), line
    assert needle in line, line


@pytest.mark.parametrize("command", ["loop", "schedule"])
@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("[sampling]\ntemperature = 0.0\n", "temperature 0 (greedy) samples every prompt alike"),
        ("screen_g = 100000\nrefine_g = 100000\n", "screen_g = 100000 is more samples of one"),
    ],
    ids=["temperature-0", "screen_g-100000"],
)
def test_every_entry_point_that_curates_refuses_what_curate_refuses(
    tmp_path: Path,
    empty_home: Path,
    capfd: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    command: str,
    text: str,
    needle: str,
) -> None:
    """Issue 49: the rule lives below the CLI (`pipeline.selection.check_samplable`, called by
    `flows.commands`), so `sieve loop` and `sieve schedule` (which once served a deployment
    whose every night curated nothing) refuse a config `sieve curate` refuses."""
    config = tmp_path / "c.toml"
    config.write_text(text, encoding="utf-8")
    argv = [command, "--config", str(config)]
    if command == "schedule":  # past its server check; the config is refused before serving
        monkeypatch.setenv("PREFECT_API_URL", "http://127.0.0.1:9/api")
        argv += ["--cron", "0 2 * * *"]
    line = run_refused(argv, empty_home, capfd)
    assert line.startswith(f"error: {config}: ") and needle in line, line


def test_the_config_catalogue_holds_every_probe() -> None:
    assert len(CASES) == 42 and len({c[0] for c in CASES}) == len(CASES)


@pytest.mark.timeout(30)  # today's main blocks in open() on a FIFO
@pytest.mark.parametrize("command", ["train", "curate"])
def test_config_fifo_is_refused_without_blocking(
    tmp_path: Path, empty_home: Path, capfd: pytest.CaptureFixture[str], command: str
) -> None:
    fifo = tmp_path / "c.toml"
    os.mkfifo(fifo)
    line = run_refused([command, "--config", str(fifo)], empty_home, capfd)
    assert f"{fifo}: is a FIFO (named pipe), not a regular TOML file" in line


def test_a_mix_nested_too_deep_is_one_line(
    tmp_path: Path, empty_home: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """`generate --mix` read a RecursionError's 3,000 lines (issue 47)."""
    mix = tmp_path / "m.toml"
    mix.write_text("[mix]\narith = " + "[" * 3000 + "]" * 3000 + "\n", encoding="utf-8")
    line = run_refused(["generate", "--mix", str(mix)], empty_home, capfd)
    assert (
        line == f"error: {mix}: arrays or inline tables nested more than 32 deep; a config has none"
    )


def test_an_absurd_dotted_key_is_refused_before_it_is_parsed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An 80 KB dotted key took the TOML parser GBs (OOM-killed at 23 GB, issue 47): the shape
    is checked first, and the parser is never called (here it would fail the test)."""
    import pipeline.core.tomlconfig

    def parse(text: str) -> dict:
        raise AssertionError("the TOML parser was called")

    monkeypatch.setattr(pipeline.core.tomlconfig.tomllib, "loads", parse)
    config = tmp_path / "c.toml"
    config.write_text("a." * 40_000 + "a = 1\n", encoding="utf-8")
    with pytest.raises(SieveError, match="more than 32 dotted parts"):
        load_curate_config(config)


@pytest.mark.parametrize("command", ["train", "curate"])
def test_config_over_the_size_cap_is_refused(
    tmp_path: Path, empty_home: Path, capfd: pytest.CaptureFixture[str], command: str
) -> None:
    big = tmp_path / "c.toml"
    big.write_text("# padding\n" * (MAX_CONFIG_BYTES // 10 + 1), encoding="utf-8")
    line = run_refused([command, "--config", str(big)], empty_home, capfd)
    assert f"a config file is at most {MAX_CONFIG_BYTES:,} bytes" in line


def _limit_memory() -> None:  # the child may not grow past 6 GiB (today's main reads forever)
    resource.setrlimit(resource.RLIMIT_AS, (6 << 30, 6 << 30))


@pytest.mark.slow  # a subprocess: ~5-15 s of imports
def test_config_device_is_refused_before_reading(tmp_path: Path) -> None:
    """`--config /dev/zero` in a memory-capped subprocess (reading it never ends)."""
    home = tmp_path / "home"
    home.mkdir()
    done = subprocess.run(
        [sys.executable, "-m", "flows.cli", "train", "--config", "/dev/zero", "--home", str(home)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        preexec_fn=_limit_memory,
        env={**os.environ, "COLUMNS": "1000"},
    )
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 1 and len(lines) == 1, done.stderr[-2000:]
    assert lines[0] == "error: /dev/zero: is a device, not a regular TOML file"
    assert list(home.iterdir()) == []


@pytest.mark.parametrize("kind", ["folder", "fifo", "device"])
def test_config_reader_refuses_what_is_not_a_regular_file(tmp_path: Path, kind: str) -> None:
    path = {"folder": tmp_path, "fifo": tmp_path / "f", "device": Path("/dev/null")}[kind]
    if kind == "fifo":
        os.mkfifo(path)
    with pytest.raises(SieveError) as err:
        load_settings(path)
    words = {"folder": "is a directory", "fifo": "is a FIFO", "device": "is a device"}[kind]
    assert str(err.value).startswith(f"{path}: {words}")


def test_print_config_writes_nothing(
    empty_home: Path, tiny_model_dir: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    argv = ["train", "--print-config", "--model", str(tiny_model_dir), "--home", str(empty_home)]
    code, out, err = run_cli(argv, capfd)
    assert code == 0, err
    assert "[grpo]" in out.splitlines() and "lr = 0.0002" in out.splitlines()
    assert list(empty_home.iterdir()) == [], "--print-config created files in the home"


COMMITTED = sorted([*RECIPES.glob("*.toml"), *(ROOT / "benchmarks").glob("*.toml")])


def test_the_committed_config_files_are_all_checked() -> None:
    names = {p.name for p in COMMITTED}
    assert {"tiny_train.toml", "real_train.toml", "curate.toml", "real_mix.toml"} <= names


@pytest.mark.parametrize("path", COMMITTED, ids=[p.name for p in COMMITTED])
def test_every_committed_config_file_validates(path: Path) -> None:
    if "mix" in path.stem:  # real_mix.toml
        assert load_mix(path).levels()
    elif "curate" in path.name:
        assert load_curate_config(path).n_candidates >= 1
        # its [mix] is what `sieve generate --mix <curate config>` generates
        assert load_mix(path).levels() == load_curate_config(path).mix_levels()
    else:
        assert "train" in path.name, f"{path.name}: which config is it?"
        assert load_settings(path).grpo_config().total_steps >= 1
