"""No process outlives a killed Sieve run (issue 17, point 5).

Real processes throughout: a run of `sieve curate`, `sieve train` or `sieve loop` is started as a
subprocess, left until Prefect's temporary API server (uvicorn) runs under it, then SIGKILLed,
SIGTERMed or interrupted (SIGINT, as Ctrl-C). Every descendant recorded just before (by pid and
start time, read from /proc) must be gone within a few seconds. A unit test checks the launcher
(`pipeline.core.procs.popen_tied`) against an untied child, which does survive its parent, so the
check can fail. Linux only.

Test: `pytest tests/cli/test_children.py` (about a minute per run on 2 busy cores). The four
killed `sieve` runs are marked `crash` (`make test-crash`); the launcher tests run in `make test`.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from pipeline.store import Ledger

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux /proc")


def proc_table() -> dict[int, tuple[int, str, int]]:
    """pid -> (parent pid, state, start time in clock ticks) of every process."""
    table = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            text = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = text[text.rindex(")") + 2 :].split()  # after "pid (comm) "
        table[int(entry)] = (int(fields[1]), fields[0], int(fields[19]))
    return table


def descendants(root: int) -> dict[int, int]:
    """pid -> start time of every live descendant of `root`."""
    table = proc_table()
    found: dict[int, int] = {}
    todo = [root]
    while todo:
        parent = todo.pop()
        for pid, (ppid, state, start) in table.items():
            if ppid == parent and pid not in found and state != "Z":
                found[pid] = start
                todo.append(pid)
    return found


def survivors(recorded: dict[int, int], within: float) -> dict[int, str]:
    """Those of `recorded` still alive (same pid and start time, not a zombie) after `within`
    seconds, with their command lines."""
    deadline = time.monotonic() + within
    while True:
        table = proc_table()
        alive = {
            pid: _cmdline(pid)
            for pid, start in recorded.items()
            if pid in table and table[pid][2] == start and table[pid][1] != "Z"
        }
        if not alive or time.monotonic() > deadline:
            return alive
        time.sleep(0.2)


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()[:200]
    except OSError:
        return "?"


def wait_for_server(proc: subprocess.Popen[bytes], timeout: float = 240) -> dict[int, int]:
    """The descendants of `proc` once one of them is Prefect's uvicorn server (and has run a
    moment, so the run is past its start-up)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"the run ended first (exit {proc.returncode})"
        found = descendants(proc.pid)
        if any("uvicorn" in _cmdline(pid) for pid in found):
            time.sleep(3)
            return descendants(proc.pid)
        time.sleep(0.3)
    raise AssertionError("Prefect's server never started under the run")


def clean_env() -> dict[str, str]:
    """This environment without Prefect's or Sieve's settings: the run starts its own server."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_", "SIEVE_"))}
    return {**env, "OMP_NUM_THREADS": "1"}


def start(argv: list[str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "flows.cli", *argv],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=clean_env(),
        )


def stop_and_check(proc: subprocess.Popen[bytes], sig: signal.Signals, log: Path) -> None:
    try:
        recorded = wait_for_server(proc)
        os.kill(proc.pid, sig)
        proc.wait(60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    left = survivors(recorded, within=10)
    for pid in left:  # never leave a process behind a failed check
        os.kill(pid, signal.SIGKILL)
    assert not left, f"survived {sig.name} of the run: {left}\n{log.read_text()[-2000:]}"


@pytest.mark.parametrize("tied", [True, False], ids=["tied", "untied (control)"])
def test_a_tied_child_dies_with_its_parent_and_an_untied_one_does_not(tied: bool) -> None:
    code = (
        "import subprocess, sys, time\n"
        "from pipeline.core.procs import popen_tied\n"
        f"spawn = popen_tied if {tied} else subprocess.Popen\n"
        "child = spawn(['sleep', '120'])\n"
        "print(child.pid, flush=True)\n"
        "time.sleep(120)\n"
    )
    parent = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert parent.stdout is not None
    child = int(parent.stdout.readline())
    recorded = descendants(parent.pid)
    assert child in recorded
    parent.kill()
    parent.wait()
    left = survivors({child: recorded[child]}, within=5 if tied else 1)
    if left:
        os.kill(child, signal.SIGKILL)
    assert bool(left) is not tied


SIEVE_CHILDREN = {
    "math-verify worker": (
        "from pipeline.scoring.worker import default_worker\ndefault_worker().warm_up()\n"
    ),
    "code sandbox": (
        "import threading\n"
        "from pipeline.scoring.sandbox import Limits, run_python\n"
        "code = 'import time; time.sleep(120)'\n"
        "limits = Limits(wall_s=120, cpu_s=120)\n"
        "threading.Thread(target=run_python, args=(code, b'', limits), daemon=True).start()\n"
    ),
}


@pytest.mark.parametrize("setup", list(SIEVE_CHILDREN.values()), ids=list(SIEVE_CHILDREN))
def test_sieves_own_children_die_with_a_killed_parent(setup: str) -> None:
    """The math-verify worker (parent watch) and a sandboxed run (bwrap --die-with-parent,
    started from a thread that is still waiting on it) end when their parent is SIGKILLed."""
    if "sandbox" in setup and not all(map(_which, ("bwrap", "prlimit"))):
        pytest.skip("the code sandbox needs bwrap and prlimit")
    code = setup + "import time\nprint('ready', flush=True)\ntime.sleep(120)\n"
    parent = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert parent.stdout is not None and parent.stdout.readline().strip() == "ready"
    deadline = time.monotonic() + 30
    while not (recorded := descendants(parent.pid)) and time.monotonic() < deadline:
        time.sleep(0.2)  # the sandbox thread may still be starting its processes
    time.sleep(1)
    recorded = descendants(parent.pid)
    assert recorded, "no child was started"
    parent.kill()
    parent.wait()
    left = survivors(recorded, within=5)
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    assert not left, left


def _which(name: str) -> bool:
    import shutil

    return shutil.which(name) is not None


@pytest.mark.crash
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM], ids=["SIGKILL", "SIGTERM"])
def test_a_killed_curation_leaves_no_process_behind(
    tmp_path: Path, tiny_model_dir: Path, sig: signal.Signals
) -> None:
    home, log = tmp_path / "home", tmp_path / "run.log"
    argv = ["curate", "--n", "400", "--model", str(tiny_model_dir), "--home", str(home)]
    stop_and_check(start(argv, log), sig, log)


@pytest.mark.crash
def test_a_killed_training_run_leaves_no_process_behind(
    tmp_path: Path, tiny_model_dir: Path, write_curriculum: Callable[[Ledger], object]
) -> None:
    home, log = tmp_path / "home", tmp_path / "run.log"
    with Ledger.open(home) as ledger:
        write_curriculum(ledger)
    argv = ["train", "--steps", "200", "--model", str(tiny_model_dir), "--home", str(home)]
    stop_and_check(start(argv, log), signal.SIGKILL, log)


@pytest.mark.crash
def test_an_interrupted_loop_leaves_no_process_behind(tmp_path: Path, tiny_model_dir: Path) -> None:
    home, log = tmp_path / "home", tmp_path / "run.log"
    argv = ["loop", "--nights", "1", "--n", "400", "--model", str(tiny_model_dir)]
    stop_and_check(start([*argv, "--home", str(home)], log), signal.SIGINT, log)
