"""Hostile code against the sandbox: every case scores reward 0 (never a verifier error) and
leaves the host as it was (no surviving process, no file outside the sandbox, no secret read,
no connection made, the parent and a sentinel process alive).

Candidates are built so that the attack, if it worked, would make them pass (read the secret,
reach the network, exit 0, forge the report); the rest end in a wrong answer either way and
check the host. Cases marked `layer` switch the seccomp filter off to show the next layer
(pid namespace, deadline, cgroup) still holds on its own.

Run: `.venv/bin/pytest tests/scoring/test_sandbox_hostile.py -q`
"""

from __future__ import annotations

import os
import socket
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from pipeline.scoring import Verdict, verify
from pipeline.scoring.code import HARNESS, decode_spec, encode_spec, run_tests
from pipeline.scoring.sandbox import (
    CGROUP_ENV,
    Limits,
    cgroup_status,
    require_tools,
    seccomp_filter,
)
from tests.scoring.waits import recorded

try:
    require_tools()
    MISSING = ""
except Exception as exc:
    MISSING = str(exc)
pytestmark = pytest.mark.skipif(bool(MISSING), reason=MISSING)

SPEC = encode_spec("f", [[[1, 2, 3, 4]], [[]], [[5, 7, 8]]], [6, 0, 8])
WRONG_F = "def f(xs):\n    return -1\n"
DEADLINE = 1.0  # short deadline for the cases that must hit it


def judge(source: str, answer: str = SPEC, timeout: float = 3.0) -> Verdict:
    """Verify and check the verdict is a plain wrong answer (reward 0, not an error), and that
    the hostile code could not hold the parent past the deadline: its waits on the sandbox are
    recorded, not timed (tests/scoring/waits.py), each at most `timeout` but the reap of a
    process group already sent SIGKILL, and the sandbox was reaped."""
    with recorded() as waits:
        verdict = verify(source, answer, "code", timeout=timeout)
    waits.check(timeout)
    assert waits.count("reap") >= 1, waits.events
    assert verdict.reason == "wrong", verdict
    assert verdict.correct is False and verdict.reward == 0.0, verdict
    return verdict


def processes_with(marker: str) -> list[int]:
    """Host pids whose command line contains `marker`."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and entry.name != str(os.getpid()):
            try:
                if marker.encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def assert_none_survive(marker: str) -> None:
    for _ in range(40):  # namespace teardown is asynchronous but quick
        if not processes_with(marker):
            return
        time.sleep(0.05)
    raise AssertionError(f"processes survived the run: {processes_with(marker)}")


def assert_no_sandbox_left() -> None:
    """No sandboxed harness process (found by its docstring in the command line) is left."""
    assert_none_survive(HARNESS.splitlines()[0][3:40])


def sleep_marker() -> str:
    """A unique `sleep` argument to find escaped processes by."""
    return f"{300 + uuid.uuid4().int % 10_000}.{uuid.uuid4().int % 10**6:06d}"


@pytest.fixture
def sentinel() -> Iterator[subprocess.Popen[bytes]]:
    """A host process that must outlive every attack."""
    proc = subprocess.Popen(["sleep", "60"])
    yield proc
    assert proc.poll() is None, "the sentinel process was killed"
    proc.kill()
    proc.wait()


# --- time ---------------------------------------------------------------------------------------


def test_infinite_loop_is_stopped_at_the_deadline() -> None:
    code = "while True:\n    pass\n" + WRONG_F.replace("-1", "sum(x for x in xs if x % 2 == 0)")
    verdict = judge(code, timeout=DEADLINE)
    assert "timeout" in verdict.detail
    assert_no_sandbox_left()


def test_long_sleep_is_stopped_at_the_deadline() -> None:
    code = "import time\n\ndef f(xs):\n    time.sleep(3600)\n    return 0\n"
    assert "timeout" in judge(code, timeout=DEADLINE).detail
    assert_no_sandbox_left()


def test_cpu_burn_in_the_function_is_stopped() -> None:
    verdict = judge("def f(xs):\n    while True:\n        xs = xs\n", timeout=DEADLINE)
    assert "timeout" in verdict.detail
    assert_no_sandbox_left()


# --- processes ----------------------------------------------------------------------------------


def test_fork_bomb_cannot_fork() -> None:
    if seccomp_filter() is None:
        pytest.skip("no seccomp layer on this architecture")
    code = "import os\nwhile True:\n    os.fork()\n" + WRONG_F
    verdict = judge(code)
    assert "load error" in verdict.detail and "Operation not permitted" in verdict.detail


SPAWNS = {
    "os.system": "os.system('true') == 0",
    "posix.fork": "(pid := posix.fork()) == 0 and os._exit(0) or os.waitpid(pid, 0) is not None",
    "subprocess": "subprocess.run(['true']).returncode == 0",
}


@pytest.mark.parametrize("spawn", sorted(SPAWNS))
def test_spawning_is_refused(spawn: str) -> None:
    """The function is right only if the spawn worked."""
    if seccomp_filter() is None:
        pytest.skip("no seccomp layer on this architecture")
    code = (
        "import os, posix, subprocess\n\n"
        "def f(xs):\n"
        f"    worked = {SPAWNS[spawn]}\n"
        "    return sum(x for x in xs if x % 2 == 0) if worked else -1\n"
    )
    judge(code)


def test_threads_are_refused() -> None:
    code = "import threading\nthreading.Thread(target=print).start()\n" + WRONG_F
    assert "can't start new thread" in judge(code).detail


def test_layer_bounded_fork_bomb_dies_with_the_namespace() -> None:
    marker = sleep_marker()
    code = (
        "import os\n"
        "for _ in range(5):\n"
        "    if os.fork() == 0:\n"
        f"        os.execv('/bin/sleep', ['sleep', '{marker}'])\n"
        "while True:\n"
        "    pass\n"
    )
    spec = decode_spec(SPEC)
    passed, detail = run_tests(code, spec, Limits(wall_s=DEADLINE, block_spawn=False))
    assert passed == 0 and "timeout" in detail
    assert_none_survive(marker)


@pytest.mark.parametrize("spawn", [True, False], ids=["seccomp", "layer-pidns"])
def test_setsid_orphan_does_not_outlive_the_run(spawn: bool) -> None:
    marker = sleep_marker()
    code = (
        "import os\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    if os.fork() == 0:\n"
        f"        os.execv('/bin/sleep', ['sleep', '{marker}'])\n"
        "    os._exit(0)\n" + WRONG_F
    )
    passed, _ = run_tests(code, decode_spec(SPEC), Limits(wall_s=2.0, block_spawn=spawn))
    assert passed == 0
    assert_none_survive(marker)


def test_killing_the_parent_and_everyone(sentinel: subprocess.Popen[bytes]) -> None:
    code = (
        "import os, signal\n"
        f"for pid in (os.getppid(), {os.getpid()}, {sentinel.pid}, 1, -1):\n"
        "    try:\n"
        "        os.kill(pid, signal.SIGKILL)\n"
        "    except OSError:\n"
        "        pass\n"
        "os.killpg(0, signal.SIGKILL) if hasattr(os, 'killpg') else None\n" + WRONG_F
    )
    judge(code)
    assert sentinel.poll() is None


def test_kill_minus_one_from_a_shell_is_refused(sentinel: subprocess.Popen[bytes]) -> None:
    judge("import os\nos.system('kill -9 -1')\n" + WRONG_F)
    assert sentinel.poll() is None


# --- memory and files ---------------------------------------------------------------------------


@pytest.mark.parametrize("bomb", ["bytearray(10**11)", "[bytearray(10**7) for _ in range(10**4)]"])
def test_memory_bomb_gets_memory_error(bomb: str) -> None:
    verdict = judge(f"def f(xs):\n    hoard = {bomb}\n    return 6\n")
    assert "MemoryError" in verdict.detail or "killed" in verdict.detail


def test_large_file_is_capped_and_stays_inside(tmp_path: Path) -> None:
    name = f"sieve-big-{uuid.uuid4().hex}"
    code = (
        "def f(xs):\n"
        f"    with open('/tmp/{name}', 'wb') as out:\n"
        "        for _ in range(100):\n"
        "            out.write(bytes(1 << 20))\n"
        "    return 6\n"
    )
    verdict = judge(code)
    assert "File too large" in verdict.detail or "No space" in verdict.detail
    assert not Path("/tmp", name).exists()


def test_many_small_files_stay_inside() -> None:
    name = f"sieve-many-{uuid.uuid4().hex}"
    code = (
        "import os\n"
        f"os.mkdir('/tmp/{name}')\n"
        "for i in range(10**6):\n"
        f"    open(f'/tmp/{name}/{{i}}', 'w').close()\n" + WRONG_F
    )
    judge(code, timeout=DEADLINE)
    assert not Path("/tmp", name).exists()
    assert_no_sandbox_left()


def test_writes_outside_the_work_dir_do_not_reach_the_host(tmp_path: Path) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("original")
    fresh = tmp_path / "planted.txt"
    targets = [str(victim), str(fresh), "/usr/sieve-planted", f"{os.getcwd()}/sieve-planted"]
    code = (
        "import os\n"
        "def f(xs):\n"
        "    wrote = 0\n"
        f"    for path in {targets!r}:\n"
        "        try:\n"
        "            os.makedirs(os.path.dirname(path), exist_ok=True)\n"
        "            open(path, 'w').write('pwned')\n"
        "            wrote += 1\n"
        "        except OSError:\n"
        "            pass\n"
        "    return wrote + 100\n"
    )
    judge(code)
    assert victim.read_text() == "original"
    assert not fresh.exists() and not Path("/usr/sieve-planted").exists()
    assert not Path(os.getcwd(), "sieve-planted").exists()


# --- secrets and network ------------------------------------------------------------------------


def test_parent_environment_is_invisible(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SIEVE_TEST_SECRET", "hunter2")
    answer = encode_spec("f", [[]], ["hunter2"])
    code = (
        "import os\n"
        "def f():\n"
        "    for where in ('/proc/self/environ', '/proc/1/environ'):\n"
        "        try:\n"
        "            if b'hunter2' in open(where, 'rb').read():\n"
        "                return 'hunter2'\n"
        "        except OSError:\n"
        "            pass\n"
        "    return os.environ.get('SIEVE_TEST_SECRET', '')\n"
    )
    judge(code, answer=answer)


def test_no_network_not_even_the_hosts_loopback() -> None:
    server = socket.create_server(("127.0.0.1", 0))  # the kernel queues a connect without accept
    port = server.getsockname()[1]
    answer = encode_spec("f", [[]], ["connected"])
    code = (
        "import socket\n"
        "def f():\n"
        f"    for host, port in (('127.0.0.1', {port}), ('1.1.1.1', 53)):\n"
        "        try:\n"
        "            socket.create_connection((host, port), timeout=0.5).close()\n"
        "            return 'connected'\n"
        "        except OSError:\n"
        "            pass\n"
        "    return 'offline'\n"
    )
    judge(code, answer=answer)
    server.setblocking(False)
    with pytest.raises(BlockingIOError):
        server.accept()  # nobody connected
    server.close()


# --- output and the result channel --------------------------------------------------------------


@pytest.mark.parametrize("stream", ["sys.stdout", "sys.stderr"])
def test_endless_output_cannot_block_anything(stream: str) -> None:
    code = f"import sys\nwhile True:\n    {stream}.write('x' * 65536)\n" + WRONG_F
    assert "timeout" in judge(code, timeout=DEADLINE).detail
    assert_no_sandbox_left()


def test_closed_stdout_and_stderr() -> None:
    code = "import os\nos.close(1)\nos.close(2)\n\ndef f(xs):\n    print(xs)\n    return 6\n"
    judge(code)


def test_closing_the_result_channel() -> None:
    judge("import os, sys\nos.close(int(sys.argv[1]))\n" + WRONG_F)


def test_reading_stdin_gets_nothing_and_does_not_hang() -> None:
    code = "import sys\n\ndef f(xs):\n    return len(sys.stdin.read()) + len(input())\n"
    verdict = judge(code)
    assert "EOFError" in verdict.detail


@pytest.mark.parametrize("exit_call", ["sys.exit(0)", "os._exit(0)", "raise SystemExit(0)"])
def test_exit_zero_before_the_tests_is_not_a_pass(exit_call: str) -> None:
    judge(f"import os, sys\n{exit_call}\n" + WRONG_F)


@pytest.mark.parametrize("exit_call", ["sys.exit(0)", "os._exit(0)"])
def test_exit_zero_inside_the_function_is_not_a_pass(exit_call: str) -> None:
    judge(f"import os, sys\n\ndef f(xs):\n    {exit_call}\n")


def test_result_whose_eq_is_always_true() -> None:
    code = (
        "class Yes:\n"
        "    def __eq__(self, other):\n"
        "        return True\n"
        "    __hash__ = object.__hash__\n"
        "class YesInt(int):\n"
        "    def __eq__(self, other):\n"
        "        return True\n"
        "def f(xs):\n"
        "    return Yes() if xs else YesInt(12345)\n"
    )
    verdict = judge(code)
    assert "not plain JSON data" in verdict.detail


def test_printing_or_forging_a_prefix_of_the_expected_output() -> None:
    forged = '{"results": [6, 0, 8]}\\nS\\nR [["ok",6],["ok",0],["ok",8]]'
    code = (
        "import os, sys\n"
        f"print('{forged}')\n"
        "sys.stdout.flush()\n"
        'os.write(int(sys.argv[1]), b\'R [["ok",6],["ok",0]\')\n'
        "os._exit(0)\n"
    )
    verdict = judge(code)
    assert "garbled" in verdict.detail or "before reporting" in verdict.detail


def test_patching_builtins_and_json_does_not_forge_a_pass() -> None:
    code = (
        "import builtins, json, os\n"
        "class Any:\n"
        "    def __eq__(self, other):\n"
        "        return True\n"
        "builtins.type = lambda x: int\n"
        "builtins.isinstance = lambda *a: True\n"
        "json.dumps = lambda *a, **k: '6'\n"
        "os.write = lambda *a: 0\n"
        "def f(xs):\n"
        "    return Any()\n"
    )
    judge(code)


# --- cgroup (only where this machine delegates one) ---------------------------------------------


def test_layer_cgroup_pids_limit_holds_a_fork_bomb() -> None:
    base, why = cgroup_status()
    if base is None:
        pytest.skip(f"no writable cgroup v2 with pids+memory: {why}")
    code = (
        "import os, time\n"
        "n = 0\n"
        "try:\n"
        "    while True:\n"
        "        if os.fork() == 0:\n"
        "            time.sleep(30)\n"
        "            os._exit(0)\n"
        "        n += 1\n"
        "except OSError:\n"
        "    pass\n"
        "def f(xs):\n"
        "    return n\n"
    )
    before = {p.name for p in base.iterdir() if p.name.startswith("sieve-sandbox-")}
    limits = Limits(wall_s=2.0, block_spawn=False, pids=8)
    passed, detail = run_tests(code, decode_spec(SPEC), limits)
    assert passed == 0, detail
    after = {p.name for p in base.iterdir() if p.name.startswith("sieve-sandbox-")}
    assert after == before  # the run's group was removed


def test_killing_itself_is_a_wrong_answer_naming_the_signal() -> None:
    code = "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n" + WRONG_F
    assert "killed by SIGKILL" in judge(code).detail


@pytest.fixture
def fake_cgroup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A plain directory dressed as a delegated cgroup v2 (files, not a cgroupfs)."""
    (tmp_path / "cgroup.controllers").write_text("cpu memory pids\n")
    (tmp_path / "cgroup.subtree_control").write_text("memory pids\n")
    monkeypatch.setenv(CGROUP_ENV, str(tmp_path))
    cgroup_status.cache_clear()
    yield tmp_path
    cgroup_status.cache_clear()


def test_cgroup_plumbing_joins_before_exec(fake_cgroup: Path) -> None:
    """The wrapper writes its own pid into cgroup.procs, then execs the sandbox as usual."""
    assert cgroup_status() == (fake_cgroup, f"per-run cgroups under {fake_cgroup}")
    good = "def f(xs):\n    return sum(x for x in xs if x % 2 == 0)\n"
    assert verify(good, SPEC, "code").correct is True
    (group,) = fake_cgroup.glob("sieve-sandbox-*")
    assert (group / "pids.max").read_text() == str(Limits().pids)
    assert int((group / "memory.max").read_text()) == Limits().memory_bytes + Limits().tmpfs_bytes
    assert int((group / "cgroup.procs").read_text()) > 1
