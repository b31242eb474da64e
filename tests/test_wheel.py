"""The wheel runs anywhere (issue 64 point 1): everything a command reads ships as package data
and is found through the package, never through the source tree.

The wheel is built from a copy of the sources (the checkout gets no build/ folder) and installed
alone (`pip install --no-deps --target`) outside the checkout; its `sieve` runs from an empty
folder with that folder as PYTHONPATH, beside the test environment's dependencies. The
editable install of the checkout stays in that environment, but its finder comes after
PYTHONPATH, and a test checks that every package and data file is the wheel's. Building and
installing take seconds; the two CLI runs (a curation, two training steps) cost the rest, most of
it the children importing torch and starting Prefect's temporary server. It takes over the 5 s
that marks a test `integration` (tests/conftest.py) and stays in `make test` all the same: the
developer's check is what proves the package runs installed.

Test: `.venv/bin/pytest tests/test_wheel.py -q`.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest

from pipeline.core.errors import SieveError
from pipeline.core.tomlconfig import RECIPES, recipe_file, shipped_recipes
from pipeline.policy.model import folder_revision
from pipeline.store import Ledger

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("pipeline", "flows", "grpo_core")
SOURCES = (*PACKAGES, "pyproject.toml", "README.md")  # what setuptools builds the wheel from


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(the wheel, the folder it is installed into)."""
    tmp = tmp_path_factory.mktemp("wheel")
    src = tmp / "src"
    for name in SOURCES:
        path = ROOT / name
        if path.is_dir():
            shutil.copytree(path, src / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            src.mkdir(exist_ok=True)
            shutil.copy2(path, src / name)
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "--no-input"]
    offline = ["--no-deps", "--no-index"]  # the wheel alone; the environment has the rest
    build = [*pip, "wheel", *offline, "--no-build-isolation", "-w", str(tmp / "dist"), "."]
    subprocess.run(build, cwd=src, check=True, capture_output=True, timeout=300)
    (wheel,) = (tmp / "dist").glob("grpo_sieve-*.whl")
    site = tmp / "site"
    install = [*pip, "install", *offline, "--target", str(site), str(wheel)]
    subprocess.run(install, check=True, capture_output=True, timeout=300)
    return wheel, site


def wheel_env(*path: Path) -> dict[str, str]:
    """The environment of a command run from the wheel: `path` first on sys.path, no user
    site-packages, nothing of the current folder."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "SIEVE_HOME")}
    env["PYTHONPATH"] = os.pathsep.join(map(str, path))
    return {**env, "PYTHONNOUSERSITE": "1", "PYTHONSAFEPATH": "1"}


def run(
    argv: list[str], cwd: Path, *path: Path, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        argv, cwd=cwd, env=wheel_env(*path), capture_output=True, text=True, timeout=timeout
    )


@pytest.fixture
def empty(tmp_path: Path) -> Path:
    folder = tmp_path / "empty"
    folder.mkdir()
    return folder


# ---------------------------------------------------------------------- what ships


def test_the_wheel_holds_the_three_packages_and_every_file_they_read(
    installed: tuple[Path, Path],
) -> None:
    wheel, _ = installed
    names = set(zipfile.ZipFile(wheel).namelist())
    tops = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}
    assert tops == set(PACKAGES)  # the fixed top-level names a user's environment must spare
    data = {
        p.relative_to(ROOT).as_posix()
        for package in PACKAGES
        for p in (ROOT / package).rglob("*")
        if p.is_file() and p.suffix not in (".py", ".pyc") and "__pycache__" not in p.parts
    }
    assert data - names == set()  # a data file the package reads and the wheel lacks
    assert {f"pipeline/recipes/{n}.toml" for n in shipped_recipes()} <= names
    assert {"pipeline/recipes/tiny_train.toml", "pipeline/recipes/tiny_curate.toml"} <= names


def test_the_installed_packages_and_their_files_are_the_wheels(
    installed: tuple[Path, Path], empty: Path
) -> None:
    _, site = installed
    code = (
        "import json, flows, grpo_core, pipeline\n"
        "from importlib import resources\n"
        "from pipeline.core.tomlconfig import recipe_file, shipped_recipes\n"
        "print(json.dumps({\n"
        "    'modules': [m.__file__ for m in (flows, grpo_core, pipeline)],\n"
        "    'recipe': str(recipe_file('tiny_train')),\n"
        "    'recipes': shipped_recipes(),\n"
        "    'sql': str(resources.files('pipeline.store').joinpath('queries')),\n"
        "    'examples': str(resources.files('pipeline.problems').joinpath('examples')),\n"
        "}))\n"
    )
    shown = run([sys.executable, "-c", code], empty, site)
    assert shown.returncode == 0, shown.stderr
    found = json.loads(shown.stdout)
    for path in [*found["modules"], found["recipe"], found["sql"], found["examples"]]:
        assert Path(path).is_relative_to(site), path  # the wheel's, not the checkout's
    assert found["recipes"] == shipped_recipes()


# ---------------------------------------------------------------------- the commands

OWN_TRAIN = """\
rollouts_per_step = 8
eval_per_level = 1
eval_samples = 1
eval_families = {arith = "1"}

[grpo]
total_steps = 2
checkpoint_every = 2
max_new_tokens = 4
lr = 1e-3
"""


def test_curate_and_train_run_from_the_wheel_in_an_empty_folder(
    installed: tuple[Path, Path],
    empty: Path,
    tmp_path: Path,
    tiny_model_dir: Path,
    write_curriculum: Callable[[Ledger], object],
) -> None:
    """`sieve curate --config tiny_curate` (a shipped recipe, by name) on the random tiny
    policy, then `sieve train` for two steps with the user's own recipe file: the random
    policy's curation keeps nothing, so training gets a small curriculum written beside it."""
    _, site = installed
    sieve, home = str(site / "bin" / "sieve"), tmp_path / "home"
    model = ["--model", str(tiny_model_dir), "--home", str(home)]
    argv = [sieve, "curate", "--config", "tiny_curate", "--n", "8", "--max-new-tokens", "8"]
    curated = run([*argv, *model], empty, site)
    assert curated.returncode == 0, curated.stderr[-3000:]
    with Ledger.open(home) as ledger:
        (config,) = ledger.run("SELECT config FROM curricula WHERE status = 'finished'")[0]
        write_curriculum(ledger)  # cur-test, curated with the tiny policy
        ledger.run(
            "UPDATE curricula SET model = $m, model_revision = $r WHERE curriculum_id = 'cur-test'",
            {"m": str(tiny_model_dir), "r": folder_revision(tiny_model_dir)},
        )
    assert json.loads(config)["hard_max_p"] == 0.01  # tiny_curate.toml's, not the default 0.2

    (empty / "own.toml").write_text(OWN_TRAIN)
    argv = [sieve, "train", "--curriculum", "cur-test", "--config", "own.toml"]
    trained = run([*argv, "--home", str(home)], empty, site)
    assert trained.returncode == 0, trained.stderr[-3000:]
    assert "recipe own.toml (--config)" in trained.stdout
    with Ledger.open(home, read_only=True) as ledger:
        runs = ledger.run("SELECT curriculum_id, status FROM train_runs")
        saved = ledger.run("SELECT step FROM checkpoints")
    assert runs == [("cur-test", "finished")] and saved == [(2,)]
    assert sorted(p.name for p in empty.iterdir()) == ["own.toml"]  # nothing else written here


def test_a_pipeline_that_shadows_the_wheels_stops_sieve_with_one_line(
    installed: tuple[Path, Path], empty: Path, tmp_path: Path
) -> None:
    _, site = installed
    other = tmp_path / "other" / "pipeline"  # another distribution's `pipeline`, found first
    other.mkdir(parents=True)
    (other / "__init__.py").write_text("")
    result = run([str(site / "bin" / "sieve"), "--help"], empty, other.parent, site, timeout=120)
    assert result.returncode != 0
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("ImportError: `pipeline` resolves to") and str(other) in last


# ---------------------------------------------------------------------- recipes by name


def test_a_bare_name_is_a_shipped_recipe_and_a_file_of_that_name_wins(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    shipped = RECIPES / "tiny_train.toml"
    assert recipe_file("tiny_train") == recipe_file("tiny_train.toml") == shipped
    assert recipe_file(Path("tiny_train.toml")) == shipped
    (tmp_path / "tiny_train.toml").write_text("rollouts_per_step = 8\n")
    assert recipe_file("tiny_train.toml") == Path("tiny_train.toml")  # the user's own
    assert recipe_file("sub/tiny_train.toml") == Path("sub/tiny_train.toml")  # a path: as given
    with pytest.raises(SieveError) as err:
        recipe_file("nope")
    assert str(err.value) == (
        "nope: no such file, nor a recipe Sieve ships "
        "(curate, real_mix, real_train, tiny_curate, tiny_train)"
    )


def test_the_repository_links_data_configs_to_the_shipped_recipes() -> None:
    """One copy of each recipe: data/configs (docs, benchmarks) is a link to the package's."""
    link = ROOT / "data" / "configs"
    assert link.is_symlink() and link.resolve() == RECIPES.resolve()
