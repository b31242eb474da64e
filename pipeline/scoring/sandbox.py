"""Run untrusted Python in a throwaway bubblewrap sandbox and hand back what it wrote.

Model-written code is hostile until proven otherwise, so each run gets a fresh process tree under
`bwrap` (bubblewrap) and is torn down whole afterwards. The layers, each exercised by
tests/scoring/test_sandbox_hostile.py:

* namespaces: `--unshare-all` (user, pid, net, ipc, uts, cgroup), so no network (only a private
  loopback), no view of host processes, `--die-with-parent`, `--new-session` (no terminal);
* filesystem: a fresh root holding only read-only binds of /usr and the Python installation, the
  /bin, /lib* links, and a private size-capped tmpfs at /tmp (the work dir); no /dev, /proc, /etc
  or /home; the root itself is remounted read-only;
* identity: uid/gid 65534 inside the user namespace, `--cap-drop ALL`, `--clearenv` plus a
  minimal PATH, `python -I -S` (no site, no user env);
* seccomp (x86_64): fork, clone, clone3 and vfork fail with EPERM, so there is never a second
  process or thread to bomb with or to orphan; namespace, mount, ptrace, bpf, keyring and
  io_uring calls fail too. Other architectures run without this layer (the rest still hold);
* rlimits, set by a `prlimit` wrapper before bwrap starts: CPU seconds, address space, file size,
  open files, no core dumps;
* a cgroup v2 with pids.max and memory.max, only where this machine delegates a writable one
  (`cgroup_status()` says why not otherwise);
* the parent's wall-clock deadline: on expiry the whole process group is SIGKILLed, and with it
  (die-with-parent) the sandbox's pid 1, which takes every process in the namespace down.

Output is drained by one selector loop in the calling thread, not a reader thread per stream: the
same loop feeds stdin, caps what it keeps of stdout, stderr and the result channel (the rest is
read and dropped, so a flood cannot block the child or the parent) and enforces the deadline.
The result channel is a pipe on its own fd, so nothing the code prints can be mistaken for a
result; callers judge what arrives on it in the parent and never trust the exit code.

Run as root, the sandbox uid maps to host root outside the user namespace (bwrap maps the
caller's uid); every host path it sees is read-only, so this buys it nothing it can use, but
running the pipeline as an ordinary user makes the sandbox unprivileged on the host too.

Test: `.venv/bin/pytest tests/scoring/test_sandbox_hostile.py -q`
"""

from __future__ import annotations

import contextlib
import errno
import functools
import itertools
import math
import os
import platform
import selectors
import shutil
import signal
import struct
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from pipeline.core.errors import SieveError

BWRAP_MISSING = (
    "bubblewrap (bwrap) is not installed; the code verifier refuses to run code without it: "
    "apt-get install bubblewrap"
)
SANDBOX_UID = 65534  # "nobody" inside the user namespace
WORK_DIR = "/tmp"  # the private tmpfs the code runs in
_PATH = "/usr/bin:/bin"
_ROOT_LINKS = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")


class SandboxUnavailable(SieveError):
    """This machine cannot run the sandbox (bwrap or prlimit missing)."""


class SandboxError(SieveError):
    """The sandbox itself failed (not the code inside it)."""


@dataclass(frozen=True)
class Limits:
    """What one sandboxed run may use; every limit is enforced outside the code it constrains."""

    wall_s: float = 3.0  # parent-enforced deadline for the whole run, start-up included
    cpu_s: int = 4  # RLIMIT_CPU backstop (SIGXCPU), per process
    memory_bytes: int = 512 << 20  # RLIMIT_AS: a memory bomb gets MemoryError, not the host's RAM
    file_bytes: int = 8 << 20  # RLIMIT_FSIZE: a bigger file gets EFBIG/SIGXFSZ
    open_files: int = 64  # RLIMIT_NOFILE
    tmpfs_bytes: int = 16 << 20  # size of the private /tmp
    output_bytes: int = 64 << 10  # kept of stdout and of stderr; the rest is drained and dropped
    channel_bytes: int = 1 << 20  # kept of the result channel; more marks the run truncated
    pids: int = 16  # cgroup pids.max, where a cgroup is available
    block_spawn: bool = True  # the seccomp layer (tests switch it off to probe the others)

    def __post_init__(self) -> None:
        if not (math.isfinite(self.wall_s) and self.wall_s > 0):
            raise ValueError(f"wall_s must be a positive number of seconds, got {self.wall_s}")


@dataclass(frozen=True)
class Run:
    """What came back from one sandboxed run."""

    channel: bytes  # what the code wrote on the result fd (at most channel_bytes)
    channel_truncated: bool
    stdout: bytes
    stderr: bytes
    returncode: int | None  # negative: killed by that signal; None: killed at the deadline
    timed_out: bool
    wall_s: float


# --- what is bound into the sandbox -------------------------------------------------------------


def require_tools() -> tuple[str, str]:
    """Paths of bwrap and prlimit; `SandboxUnavailable` (one line, how to fix) otherwise."""
    bwrap, prlimit = shutil.which("bwrap"), shutil.which("prlimit")
    if bwrap is None:
        raise SandboxUnavailable(BWRAP_MISSING)
    if prlimit is None:
        raise SandboxUnavailable("prlimit is not installed; apt-get install util-linux")
    return bwrap, prlimit


@functools.cache
def _python() -> tuple[str, tuple[str, ...]]:
    """The interpreter to run inside, and the directories (outside /usr) it needs bound."""
    exe = os.path.realpath(sys.executable)
    needed = {os.path.realpath(sys.base_prefix), os.path.dirname(os.path.dirname(exe))}
    binds = tuple(sorted(d for d in needed if not d.startswith("/usr/") and d != "/usr"))
    return exe, binds


@functools.cache
def _root_args() -> tuple[str, ...]:
    """bwrap arguments for a read-only /usr and the merged-/usr links (or dirs) beside it."""
    args = ["--ro-bind", "/usr", "/usr"]
    for path in _ROOT_LINKS:
        if os.path.islink(path):
            args += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            args += ["--ro-bind", path, path]
    for path in _python()[1]:
        args += ["--ro-bind", path, path]
    return tuple(args)


def _bwrap_args(limits: Limits, seccomp_fd: int | None) -> list[str]:
    args = ["--unshare-all", "--die-with-parent", "--new-session", *_root_args()]
    args += ["--size", str(limits.tmpfs_bytes), "--tmpfs", WORK_DIR, "--remount-ro", "/"]
    args += ["--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_UID), "--cap-drop", "ALL"]
    args += ["--clearenv", "--setenv", "PATH", _PATH, "--chdir", WORK_DIR, "--hostname", "sandbox"]
    if seccomp_fd is not None:
        args += ["--seccomp", str(seccomp_fd)]
    return args


def _prlimit_args(limits: Limits) -> list[str]:
    cpu, mem, size, files = limits.cpu_s, limits.memory_bytes, limits.file_bytes, limits.open_files
    return [f"--cpu={cpu}", f"--as={mem}", f"--fsize={size}", f"--nofile={files}", "--core=0"]


# --- seccomp -------------------------------------------------------------------------------------

_AUDIT_ARCH_X86_64 = 0xC000003E
_X32_BIT = 0x40000000
# x86_64 syscall numbers that fail with EPERM. fork vfork clone clone3: no second process/thread.
_SPAWN = (57, 58, 56, 435)
# unshare setns mount umount2 pivot_root chroot open_tree move_mount fsopen fsconfig fsmount fspick
# mount_setattr: no new namespaces or mounts.
_ESCAPE = (272, 308, 165, 166, 155, 161, 428, 429, 430, 431, 432, 433, 442)
# ptrace bpf perf_event_open userfaultfd add_key request_key keyctl io_uring_setup/enter/register
# init_module finit_module kexec_load kexec_file_load: kernel attack surface nobody here needs.
_KERNEL = (101, 321, 298, 323, 248, 249, 250, 425, 426, 427, 175, 313, 246, 320)
_DENIED_X86_64 = _SPAWN + _ESCAPE + _KERNEL
_LD_ABS, _JEQ, _JGE, _RET = 0x20, 0x15, 0x35, 0x06  # BPF_LD|W|ABS, JMP|JEQ|K, JMP|JGE|K, RET|K
_ALLOW, _KILL, _EPERM = 0x7FFF0000, 0x80000000, 0x00050000 | 1  # RET_ALLOW, KILL_PROCESS, ERRNO


def seccomp_filter() -> bytes | None:
    """The classic-BPF program bwrap loads before exec; None where the layer is unsupported."""
    if platform.machine() != "x86_64":
        return None
    n = len(_DENIED_X86_64)
    allow, deny, kill = 4 + n, 5 + n, 6 + n  # instruction indexes of the three returns
    prog = [(_LD_ABS, 0, 0, 4), (_JEQ, 0, kill - 2, _AUDIT_ARCH_X86_64), (_LD_ABS, 0, 0, 0)]
    prog.append((_JGE, deny - 4, 0, _X32_BIT))
    prog += [(_JEQ, deny - (5 + i), 0, nr) for i, nr in enumerate(_DENIED_X86_64)]
    prog += [(_RET, 0, 0, _ALLOW), (_RET, 0, 0, _EPERM), (_RET, 0, 0, _KILL)]
    assert len(prog) == kill + 1 and allow == len(prog) - 3
    return b"".join(struct.pack("=HBBI", *ins) for ins in prog)


def _seccomp_fd(limits: Limits) -> int | None:
    """A fresh memfd holding the filter (bwrap reads it to EOF), or None."""
    program = seccomp_filter() if limits.block_spawn else None
    if program is None:
        return None
    fd = os.memfd_create("sieve-seccomp")
    os.write(fd, program)
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


# --- cgroup v2 (optional) ------------------------------------------------------------------------


CGROUP_ENV = "SIEVE_SANDBOX_CGROUP"  # a delegated cgroup v2 directory to use instead of our own
_RUN_IDS = itertools.count()


def _own_cgroup() -> Path | None:
    """This process's cgroup v2 directory, from /proc/self/cgroup and /proc/self/mountinfo."""
    lines = _read(Path("/proc/self/cgroup")).splitlines()
    own = next((line[3:] for line in lines if line.startswith("0::")), None)
    for line in _read(Path("/proc/self/mountinfo")).splitlines():
        left, _, right = line.partition(" - ")
        if own is not None and right.split(" ", 1)[0] == "cgroup2":
            return Path(left.split()[4]) / own.lstrip("/")
    return None


@functools.cache
def cgroup_status() -> tuple[Path | None, str]:
    """(cgroup v2 directory to create per-run groups in, how) or (None, why not).

    $SIEVE_SANDBOX_CGROUP names a delegated directory; otherwise this process's own cgroup is
    tried, which works only where it may enable pids and memory for child groups.
    """
    env = os.environ.get(CGROUP_ENV, "").strip()
    base = Path(env) if env else _own_cgroup()
    if base is None:
        return None, "no cgroup v2 hierarchy for this process"
    controllers = set(_read(base / "cgroup.controllers").split())
    if not {"pids", "memory"} <= controllers:
        return None, f"cgroup v2 at {base} offers {sorted(controllers)}, not pids and memory"
    if not os.access(base, os.W_OK):
        return None, f"cgroup v2 at {base} is not writable"
    if not {"pids", "memory"} <= set(_read(base / "cgroup.subtree_control").split()):
        try:
            (base / "cgroup.subtree_control").write_text("+pids +memory")
        except OSError as exc:
            return None, f"cannot enable pids+memory under {base}: {exc.strerror}"
    return base, f"per-run cgroups under {base}"


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


def _new_cgroup(limits: Limits) -> Path | None:
    """A fresh cgroup with pids.max and memory.max for one run, where one is available."""
    base, _ = cgroup_status()
    if base is None:
        return None
    group = base / f"sieve-sandbox-{os.getpid()}-{next(_RUN_IDS)}"
    try:
        group.mkdir()
        (group / "pids.max").write_text(str(limits.pids))
        (group / "memory.max").write_text(str(limits.memory_bytes + limits.tmpfs_bytes))
        with contextlib.suppress(OSError):
            (group / "memory.swap.max").write_text("0")
    except OSError as exc:
        _drop_cgroup(group)
        raise SandboxError(f"cannot set up cgroup {group}: {exc}") from None
    return group


def _drop_cgroup(group: Path) -> None:
    """Kill whatever is left in the group and remove it (retrying while it drains)."""
    with contextlib.suppress(OSError):
        (group / "cgroup.kill").write_text("1")
    for _ in range(100):
        try:
            group.rmdir()
            return
        except OSError as exc:
            if exc.errno != errno.EBUSY:  # gone already, or not a cgroup at all
                return
            time.sleep(0.01)


# --- running -------------------------------------------------------------------------------------


def sandbox_argv(source: str, args: list[str], limits: Limits, seccomp_fd: int | None) -> list[str]:
    """The full command line: prlimit wrapper, bwrap and `python -I -S -c source args...`."""
    bwrap, prlimit = require_tools()
    python = _python()[0]
    inner = [python, "-I", "-S", "-B", "-c", source, *args]
    return [prlimit, *_prlimit_args(limits), "--", bwrap, *_bwrap_args(limits, seccomp_fd), *inner]


def run_python(source: str, stdin: bytes, limits: Limits) -> Run:
    """Run `python -c source FD` in a fresh sandbox; FD (sys.argv[1]) is the result channel.

    Raises `SandboxUnavailable` / `SandboxError` only for failures of the sandbox itself.
    """
    read_fd, write_fd = os.pipe()
    seccomp_fd = _seccomp_fd(limits)
    group = _new_cgroup(limits)
    argv = sandbox_argv(source, [str(write_fd)], limits, seccomp_fd)
    if group is not None:  # join the cgroup before exec, so nothing escapes it
        argv = ["/bin/sh", "-c", 'echo $$ > "$0" && exec "$@"', str(group / "cgroup.procs"), *argv]
    passed = (write_fd,) if seccomp_fd is None else (write_fd, seccomp_fd)
    start = time.monotonic()
    try:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            pass_fds=passed,
            start_new_session=True,  # its own process group, killed whole at the deadline
            env={"PATH": _PATH},
        )
    except OSError as exc:
        os.close(read_fd)
        raise SandboxError(f"cannot start the sandbox: {exc}") from None
    finally:
        os.close(write_fd)
        if seccomp_fd is not None:
            os.close(seccomp_fd)
    try:
        return _collect(proc, read_fd, stdin, limits, start)
    except BaseException:  # never leave a sandbox running behind an error or ^C
        _kill(proc)
        raise
    finally:
        if group is not None:
            _drop_cgroup(group)


def _collect(
    proc: subprocess.Popen[bytes], read_fd: int, stdin: bytes, limits: Limits, start: float
) -> Run:
    """Pump stdin/stdout/stderr/channel until the child is done or the deadline passes."""
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    deadline = start + limits.wall_s
    out_fd, err_fd = proc.stdout.fileno(), proc.stderr.fileno()
    caps = {out_fd: limits.output_bytes, err_fd: limits.output_bytes, read_fd: limits.channel_bytes}
    kept: dict[int, bytearray] = {fd: bytearray() for fd in caps}
    overflow: set[int] = set()
    timed_out = False
    with selectors.DefaultSelector() as sel:
        for fd in caps:
            os.set_blocking(fd, False)
            sel.register(fd, selectors.EVENT_READ)
        pending = memoryview(stdin)
        os.set_blocking(proc.stdin.fileno(), False)
        sel.register(proc.stdin, selectors.EVENT_WRITE)
        while len(sel.get_map()) > 0:
            left = deadline - time.monotonic()
            if left <= 0:
                timed_out = True
                break
            for key, _ in sel.select(left):
                if key.fileobj is proc.stdin:
                    pending = _feed(sel, proc.stdin, pending)
                else:
                    _drain(sel, key.fd, kept[key.fd], caps[key.fd], overflow)
        for key in list(sel.get_map().values()):
            sel.unregister(key.fd)
    returncode = _finish(proc, read_fd, deadline, timed_out)
    timed_out = timed_out or returncode is None
    return Run(
        channel=bytes(kept[read_fd]),
        channel_truncated=read_fd in overflow,
        stdout=bytes(kept[out_fd]),
        stderr=bytes(kept[err_fd]),
        returncode=returncode,
        timed_out=timed_out,
        wall_s=time.monotonic() - start,
    )


def _feed(sel: selectors.BaseSelector, stdin: IO[bytes], pending: memoryview) -> memoryview:
    """Write what the pipe takes now; close stdin once all is written (or the child is gone)."""
    try:
        pending = pending[os.write(stdin.fileno(), pending) :]
    except BlockingIOError:
        return pending
    except BrokenPipeError:
        pending = pending[:0]
    if not pending:
        sel.unregister(stdin)
        stdin.close()
    return pending


def _drain(sel: selectors.BaseSelector, fd: int, kept: bytearray, cap: int, over: set[int]) -> None:
    """Read what is there; keep up to `cap` bytes, drop the rest; unregister at EOF."""
    try:
        chunk = os.read(fd, 1 << 16)
    except BlockingIOError:
        return
    if not chunk:
        sel.unregister(fd)
        return
    room = cap - len(kept)
    kept += chunk[: max(room, 0)]
    if len(chunk) > room:
        over.add(fd)


def _finish(proc: subprocess.Popen[bytes], read_fd: int, deadline: float, late: bool) -> int | None:
    """Kill the group if it is late, reap it, close our pipe ends; the exit code or None."""
    code: int | None = None
    if not late:
        with contextlib.suppress(subprocess.TimeoutExpired):
            code = proc.wait(max(deadline - time.monotonic(), 0.0))
    if code is None:
        _kill(proc)
    os.close(read_fd)
    for stream in (proc.stdin, proc.stdout, proc.stderr):
        if stream is not None:
            with contextlib.suppress(OSError):
                stream.close()
    return code


def _kill(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL the process group (bwrap's pid 1 then takes the namespace down) and reap it."""
    if proc.returncode is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
