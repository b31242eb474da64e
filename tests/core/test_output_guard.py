"""One guard for every path a command writes (issue 61 point 3; `pipeline/core/outputs.py`).

Generated in both directions. Each route a path can take to a file (a plain or relative path,
symbolic links and chains of them, a hard link, `/dev/fd/N`, `/proc/self/fd/N`,
`/proc/<pid>/fd/N` of this process and of another one, a link to a folder) x each protected file
(another home's ledger, its write-ahead log, this home's ledger, the name of this home's
write-ahead log before it exists) x each writing command (`sql --output`, `backtest --png`,
`report`, `export`): refused with one `error: refused:` line naming the path, and every file of
both homes keeps its bytes. The same routes to an ordinary file: written as the command writes
it, links kept, no temporary file left. For the folder commands the route is the name of the
file they write (`report.html`, the export's data file) inside the `--output` folder.

Then the edges of a write: SIGTERM during a slow `sql --output` (a child process); SIGTERM,
SIGHUP, SIGINT and SIGKILL during a write in a process with no handler of its own (the leftover
of SIGKILL is removed by the next write to the same target); a FIFO named like the report's page
or a figure (refused before the work; a timer opens the FIFO if the command waits on it, so the
harness cannot hang). `sieve sql` reading the ledger's write-ahead log however the statement
spells its name is in `tests/cli/test_sql_sandbox.py`.

Test: `pytest tests/core/test_output_guard.py`.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path

import polars as pl
import pytest

from pipeline.store import Ledger
from tests.cli_runner import error_line, run_cli

ROOT = Path(__file__).resolve().parents[2]
REASONS = (
    "is the ledger itself",
    "is a DuckDB database",
    "is a DuckDB write-ahead log",
    "a side file of the DuckDB database",
)

# command -> (argv; {o} is the output), the file a folder command writes in {o} (None: {o} is
# the file), the suffix of the names a route makes, and what the written file starts with
COMMANDS: dict[str, tuple[list[str], str | None, str, bytes]] = {
    "sql --output": (["sql", "SELECT 42 AS x", "--format", "csv", "--output", "{o}"], None,
                     ".csv", b"x\n42\n"),
    "backtest --png": (["backtest", "--pool", "{pool}", "--policy", "uniform:g=4", "--png", "{o}"],
                       None, ".png", b"\x89PNG"),
    "report": (["report", "--output", "{o}"], "report.html", ".html", b"<!DOCTYPE html>"),
    "export": (["export", "--output", "{o}"], "cur-test.trl.parquet", ".parquet", b"PAR1"),
}  # fmt: skip
# a folder command's file linked to a plain or relative name is "symlink" or "relative symlink
# with ..", which a one-file command's "plain path" and "relative path with .." stand for
ONE_FILE_ONLY = ("plain path", "relative path with ..")
FOLDER_ONLY = ("relative symlink with ..",)
DESCRIPTORS = ("/dev/fd/N", "/proc/self/fd/N", "/proc/<pid>/fd/N", "/proc/<other pid>/fd/N")
ROUTES = ("plain path", "relative path with ..", "symlink", "relative symlink with ..",
          "symlink chain", "hard link", *DESCRIPTORS, "symlinked folder")  # fmt: skip
# protected file -> (home, file name, whether it exists)
PROTECTED = {
    "another home's ledger": ("other", "sieve.duckdb", True),
    "another home's .wal": ("other", "sieve.duckdb.wal", True),
    "this home's ledger": ("home", "sieve.duckdb", True),
    "this home's .wal, not there yet": ("home", "sieve.duckdb.wal", False),
}
NEEDS_A_FILE = ("hard link", *DESCRIPTORS)  # routes that only lead to a file that exists


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory, write_curriculum: Callable) -> dict[str, Path]:
    """This home (a curriculum to report and export) and another home whose ledger has a
    write-ahead log (its writer ended without a checkpoint), and a pool for `backtest`."""
    root = tmp_path_factory.mktemp("homes")
    with Ledger.open(root / "home") as ledger:
        write_curriculum(ledger)
    Ledger.open(root / "other").close()
    leave_a_wal = (
        "import duckdb, os, sys\ncon = duckdb.connect(sys.argv[1])\n"
        "con.execute(\"SET checkpoint_threshold = '1TB'\")\n"
        "con.execute('CREATE TABLE scratch AS SELECT 42 AS x')\nos._exit(0)\n"
    )
    subprocess.run([sys.executable, "-c", leave_a_wal, str(root / "other" / "sieve.duckdb")],
                   check=True, timeout=120)  # fmt: skip
    assert (root / "other" / "sieve.duckdb.wal").stat().st_size > 0
    rows = [(p, i, float(x)) for p, text in {"a": "1010", "b": "1100"}.items()
            for i, x in enumerate(text)]  # fmt: skip
    frame = pl.DataFrame(rows, schema=["problem_id", "sample_idx", "reward"], orient="row")
    frame.with_columns(correct=pl.col("reward") == 1).write_parquet(root / "pool.parquet")
    return {"home": root / "home", "other": root / "other", "pool": root / "pool.parquet"}


@pytest.fixture
def homes(made: dict[str, Path], tmp_path: Path) -> dict[str, Path]:
    """A copy of both homes for this test, so that a write that got through spoils no other."""
    copies = {key: tmp_path / "homes" / key for key in ("home", "other")}
    for key, copy in copies.items():
        shutil.copytree(made[key], copy)
    return {**copies, "pool": made["pool"]}


def snapshot(*folders: Path) -> dict[str, str]:
    """sha256 of every file directly in `folders`."""
    return {
        str(p): hashlib.sha256(p.read_bytes()).hexdigest()
        for folder in folders
        for p in sorted(folder.iterdir())
        if p.is_file()
    }


def parts(folder: Path) -> list[str]:
    """The temporary files of a guarded write under `folder` (`.<name>.part-<pid>-<random>`, or
    any other hidden `.part` name)."""
    return sorted(p.name for p in folder.rglob(".*") if ".part" in p.name)


@pytest.fixture
def held() -> Iterator[ExitStack]:
    """Descriptors and child processes a route holds open, closed and ended after the test."""
    with ExitStack() as stack:
        yield stack


def descriptor(route: str, target: Path, flags: int, held: ExitStack) -> str:
    """A descriptor name for `target`, opened with `flags` (held by this process or a child)."""
    fd = os.open(target, flags)
    held.callback(os.close, fd)
    if route == "/proc/<other pid>/fd/N":
        child = subprocess.Popen(["sleep", "120"], stdin=fd)
        held.callback(child.wait)
        held.callback(child.kill)
        return f"/proc/{child.pid}/fd/0"
    pid = {"/dev/fd/N": None, "/proc/self/fd/N": "self", "/proc/<pid>/fd/N": os.getpid()}[route]
    return f"/dev/fd/{fd}" if pid is None else f"/proc/{pid}/fd/{fd}"


def route_name(route: str, target: Path, work: Path, base: Path, suffix: str, flags: int,
               held: ExitStack) -> str:  # fmt: skip
    """A name that leads to `target` by `route`, made under `work` (relative names are relative
    to `base`)."""
    link = work / f"link{suffix}"
    if route == "plain path":
        return str(target)
    if route == "relative path with ..":
        up = os.path.relpath(target.parent, base)
        return f"{up}/../{target.parent.name}/{target.name}"
    if route in ("symlink", "relative symlink with .."):
        (work / "sub").mkdir(exist_ok=True)
        relative = f"sub/../{os.path.relpath(target, work)}"
        link.symlink_to(target if route == "symlink" else relative)
        return str(link)
    if route == "symlink chain":
        (work / f"chain-2{suffix}").symlink_to(target)
        (work / f"chain-1{suffix}").symlink_to(f"chain-2{suffix}")
        link.symlink_to(work / f"chain-1{suffix}")
        return str(link)
    if route == "hard link":
        os.link(target, link)
        return str(link)
    if route == "symlinked folder":
        (work / "folder").symlink_to(target.parent, target_is_directory=True)
        return str(work / "folder" / target.name)
    return descriptor(route, target, flags, held)


def command_args(
    command: str, route: str, target: Path, work: Path, pool: Path, flags: int, held: ExitStack
) -> tuple[list[str], Path]:
    """argv of `command` writing through `route` to `target`, and the name it is given (the
    output, or the file a folder command writes in its folder)."""
    argv, inside, suffix, _ = COMMANDS[command]
    if inside is None:
        name = route_name(route, target, work, work, suffix, flags, held)
        output, given = name, Path(name)
    else:
        folder = work / "out"
        folder.mkdir()
        given = folder / inside
        if route == "hard link":
            os.link(target, given)
        else:
            given.symlink_to(route_name(route, target, work, folder, suffix, flags, held))
        output = str(folder)
    args = [a.replace("{o}", output).replace("{pool}", str(pool)) for a in argv]
    return args, given


def applies(command: str, route: str, kind: str) -> bool:
    """Whether `route` can lead `command` to `kind` (a protected file or an ordinary one)."""
    folder = COMMANDS[command][1] is not None
    if route in (ONE_FILE_ONLY if folder else FOLDER_ONLY):
        return False
    if route in NEEDS_A_FILE and kind in PROTECTED and not PROTECTED[kind][2]:
        return False
    by_its_name = route in (*ONE_FILE_ONLY, "symlinked folder")  # the name ends as the file's
    return not (command == "backtest --png" and by_its_name and kind in PROTECTED)  # not .png


def cases(kinds: list[str]) -> list[tuple[str, str, str]]:
    return [(c, r, k) for c in COMMANDS for r in ROUTES for k in kinds if applies(c, r, k)]


@pytest.mark.parametrize(("command", "route", "kind"), cases(list(PROTECTED)))
def test_a_route_to_any_ledger_file_is_refused_and_nothing_changes(
    homes: dict[str, Path],
    tmp_path: Path,
    capfd: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    held: ExitStack,
    command: str,
    route: str,
    kind: str,
) -> None:
    monkeypatch.chdir(tmp_path)
    home_key, file_name, _ = PROTECTED[kind]
    target = homes[home_key] / file_name
    before = snapshot(homes["home"], homes["other"])
    args, given = command_args(command, route, target, tmp_path, homes["pool"], os.O_RDWR, held)
    code, _, err = run_cli([*args, "--home", str(homes["home"])], capfd)
    line = error_line(code, err)
    assert line.startswith("error: refused: ") and str(given) in line, line
    assert any(reason in line for reason in REASONS), line
    assert snapshot(homes["home"], homes["other"]) == before
    assert not (homes["home"] / "sieve.duckdb.wal").exists()
    assert parts(tmp_path) == []


@pytest.mark.parametrize(("command", "route", "kind"), cases(["an ordinary file"]))
def test_the_same_routes_to_an_ordinary_file_are_written(
    homes: dict[str, Path],
    tmp_path: Path,
    capfd: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    held: ExitStack,
    command: str,
    route: str,
    kind: str,
) -> None:
    monkeypatch.chdir(tmp_path)
    _, _, suffix, starts = COMMANDS[command]
    (tmp_path / "files").mkdir()
    target = tmp_path / "files" / f"ordinary{suffix}"
    target.write_bytes(b"old contents\n")
    flags = os.O_RDWR | os.O_TRUNC  # as a shell opens `3<>file` after `>file`
    args, given = command_args(command, route, target, tmp_path, homes["pool"], flags, held)
    before = snapshot(homes["home"], homes["other"])
    code, _, err = run_cli([*args, "--home", str(homes["home"])], capfd)
    assert code == 0, err
    written = given if route == "hard link" else target  # a hard-linked name is replaced alone
    assert written.read_bytes().startswith(starts)
    if route == "hard link":
        assert target.read_bytes() == b"old contents\n"
    if route in ("symlink", "relative symlink with ..", "symlink chain"):
        assert given.is_symlink()
    assert snapshot(homes["home"], homes["other"]) == before
    assert parts(tmp_path) == []


# -- the edges of a write --------------------------------------------------------------------


def wait_for(ready: Callable[[], bool], what: str) -> None:
    """Poll until `ready()`; the harness gives up after two minutes (not a timing claim)."""
    for _ in range(2400):
        if ready():
            return
        time.sleep(0.05)
    raise AssertionError(f"never saw {what}")


def test_sigterm_during_a_slow_sql_output_leaves_no_temporary_file(
    homes: dict[str, Path], tmp_path: Path
) -> None:
    out = tmp_path / "out.csv"
    query = "SELECT range AS x FROM range(1000000000)"  # minutes of CSV: still writing when hit
    argv = [sys.executable, "-m", "flows.cli", "sql", query, "--format", "csv", "--output",
            str(out), "--timeout", "600", "--home", str(homes["home"])]  # fmt: skip
    child = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        wait_for(lambda: any((tmp_path / p).stat().st_size for p in parts(tmp_path)),
                 "the output being written")  # fmt: skip
        child.send_signal(signal.SIGTERM)
        _, err = child.communicate(timeout=120)
    finally:
        child.kill()
        child.wait()
    assert child.returncode == 128 + signal.SIGTERM, err
    assert parts(tmp_path) == [] and not out.exists()


SLOW_WRITER = """
import sys, time
from pipeline.core.outputs import write_output

def slow(handle):
    handle.write(b"half of it")
    handle.flush()
    print("writing", flush=True)
    while True:
        time.sleep(0.05)

write_output(sys.argv[1], slow)
"""


def killed_mid_write(target: Path, signum: int) -> int:
    """Run `write_output(target, ...)` in a child with the default signal handlers, send
    `signum` while it writes; its exit status."""
    child = subprocess.Popen([sys.executable, "-c", SLOW_WRITER, str(target)], cwd=ROOT,
                             stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert child.stdout is not None and child.stdout.readline() == "writing\n"
        child.send_signal(signum)
        return child.wait(timeout=120)
    finally:
        child.kill()
        child.wait()


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT])
def test_a_signal_during_a_write_removes_the_temporary_file(tmp_path: Path, signum: int) -> None:
    """A process with no handler of its own for the signal: ended by it all the same, its
    temporary file removed first, the target as it was."""
    target = tmp_path / "out.bin"
    target.write_bytes(b"old")
    assert killed_mid_write(target, signum) == -signum
    assert parts(tmp_path) == [] and target.read_bytes() == b"old"


def test_a_sigkill_leftover_is_removed_by_the_next_write(tmp_path: Path) -> None:
    from pipeline.core.outputs import write_output

    target = tmp_path / "out.bin"
    assert killed_mid_write(target, signal.SIGKILL) == -signal.SIGKILL
    (leftover,) = parts(tmp_path)  # SIGKILL cannot be caught
    assert leftover.startswith(".out.bin.part-")
    write_output(target, lambda handle: handle.write(b"whole"))
    assert parts(tmp_path) == [] and target.read_bytes() == b"whole"


@pytest.mark.parametrize("name", ["report.html", "fig_curriculum_0.png"])
def test_a_fifo_named_like_a_report_file_is_refused_without_waiting(
    homes: dict[str, Path], tmp_path: Path, capfd: pytest.CaptureFixture[str], name: str
) -> None:
    """The report's pre-check refuses the FIFO before the work. A command that opened it to
    write would wait for a reader: the harness's timer then reads it, so the test ends either
    way, and the timer having fired fails it."""
    out = tmp_path / "out"
    out.mkdir()
    if name == "report.html":  # an older report's figure, to be left as it is
        (out / "fig_curriculum_0.png").write_bytes(b"an older report's figure")
    os.mkfifo(out / name)
    before = snapshot(out), sorted(p.name for p in out.iterdir())
    fired = threading.Event()

    def drain() -> None:
        fired.set()
        with open(out / name, "rb") as fifo:
            fifo.read()

    timer = threading.Timer(30, drain)
    timer.daemon = True
    timer.start()
    try:
        code, _, err = run_cli(["report", "--output", str(out), "--home", str(homes["home"])],
                               capfd)  # fmt: skip
    finally:
        timer.cancel()
    assert not fired.is_set(), "the report waited on the FIFO"
    line = error_line(code, err)
    assert f"refused: {out / name} is a FIFO (named pipe)" in line, line
    assert (snapshot(out), sorted(p.name for p in out.iterdir())) == before
    assert parts(tmp_path) == []
