"""Each Sieve home keeps its own Prefect state unless the user chose one."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.core.home import use_prefect_home

CODE = (
    "import os, sys; import pipeline.core.home as h; "
    "h._prefect_version = (lambda: sys.argv[2]) if len(sys.argv) > 2 else h._prefect_version; "
    "print(h.use_prefect_home(sys.argv[1])); print(os.environ.get('PREFECT_HOME'))"
)


def _run(home: Path, *version: str, **env: str) -> list[str]:
    import os

    base = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    done = subprocess.run(
        [sys.executable, "-c", CODE, str(home), *version],
        env={**base, **env},
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.split()


def test_two_homes_get_two_prefect_homes(tmp_path: Path) -> None:
    from importlib.metadata import version

    a, b = _run(tmp_path / "a"), _run(tmp_path / "b")
    assert a == [str((tmp_path / "a" / ".prefect" / version("prefect")).resolve())] * 2
    assert b[1] == str((tmp_path / "b" / ".prefect" / version("prefect")).resolve()) != a[1]
    assert (tmp_path / "a" / ".prefect").is_dir()


def test_two_prefect_versions_in_one_home_never_share_a_database(tmp_path: Path) -> None:
    """`.venv` (Prefect 3.9.1 today) and `.venv-vllm` (3.7.7) on one home: the newer release's
    migrations made the older one fail to start its server (issue 47); each keeps its own."""
    new, old = _run(tmp_path, "3.9.1"), _run(tmp_path, "3.7.7")
    assert new[1] == str((tmp_path / ".prefect" / "3.9.1").resolve())
    assert old[1] == str((tmp_path / ".prefect" / "3.7.7").resolve())


@pytest.mark.parametrize("var", ["PREFECT_API_URL", "PREFECT_HOME"])
def test_a_users_prefect_setting_stands(tmp_path: Path, var: str) -> None:
    value = "http://127.0.0.1:4200/api" if var == "PREFECT_API_URL" else str(tmp_path / "mine")
    got = _run(tmp_path / "h", **{var: value})
    assert got[0] == "None"
    assert not (tmp_path / "h" / ".prefect").exists()


def test_returns_none_inside_a_configured_prefect(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PREFECT_HOME", "/elsewhere")
    assert use_prefect_home("/tmp/x") is None
