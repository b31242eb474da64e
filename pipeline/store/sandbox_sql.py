"""`sieve sql`'s sandbox: one read-only query on the ledger that reads nothing else, writes
nothing, changes no setting, and stops at a time and a memory limit.

Three layers, each of which stops the attacks in `tests/cli/test_sql_sandbox.py` on its own:

1. `check_query` lets through exactly one SELECT-like statement (SELECT, SHOW, DESCRIBE,
   SUMMARIZE, or EXPLAIN of a SELECT, never EXPLAIN ANALYZE, which runs what it explains).
2. `lock_down` turns off the connection's access to files, the network and extensions, then
   locks DuckDB's configuration so no statement can turn any of it back on. External access
   off still lets a statement read the database's own files by name (the ledger, its `.wal`,
   `.wal.recovery` and `.wal.checkpoint`: DuckDB's `allowed_paths`), so the local file system
   is disabled as a whole (`disabled_filesystems`): no file function opens any path, however
   the statement builds it (`'sieve' || '.duckdb.wal'`), and `lock_down` checks that it took.
   DuckDB still reads the ledger through the file it already has open (and nothing else: no
   spill files next to it, no stored secrets).
3. `Sandbox.run` stops the query after `timeout_s`: DuckDB has no statement timeout, so a
   watchdog thread interrupts it, and, for the rare function that never checks for an interrupt
   (one huge `levenshtein`), calls `on_stuck` once a grace period has passed as well. DuckDB's
   own `memory_limit` only counts its buffer pool (a single `repeat('x', 1e9)` value is
   allocated outside it), so on Linux the process's data segment is also capped, while the
   query runs, at what it held before plus twice the limit (the Arrow copy of the result) and
   some slack. `Sandbox.stream` keeps both limits in force until the caller has written the
   last batch of the result, so fetching, rendering and writing it are capped as well.

Settings DuckDB fills from the environment (`http_proxy` from `$HTTP_PROXY`, credentials) are
blanked before the lock.

Results come back as Arrow tables shaped for the output format: `native` (DuckDB's own types,
for Parquet), `text` (numbers, booleans and strings only; lists, structs and maps as JSON text,
other types as DuckDB prints them: what CSV and a terminal table can show) or `json` (one JSON
object per row, made by DuckDB). Duplicate column names get `_1`, `_2`... as in DuckDB's `.pl()`.

Test: `pytest tests/cli/test_sql_sandbox.py`.
"""

from __future__ import annotations

import os
import re
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, NoReturn

import duckdb
import pyarrow as pa

from pipeline.core.errors import SieveError
from pipeline.store.ledger import check_read_only

View = Literal["native", "text", "json"]

THREADS = min(4, os.cpu_count() or 1)  # a query should not take every core from a running night
SLACK_BYTES = 256 << 20  # thread stacks and allocator arenas DuckDB makes while the query runs
MIN_MEMORY = 16 << 20  # below this DuckDB cannot even scan the views
_UNITS = {"b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12}
_UNITS |= {"kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-z]+)\s*$", re.IGNORECASE)
# DuckDB types a CSV cell or a terminal table shows as they are; the rest become text
_PLAIN = {"boolean", "tinyint", "smallint", "integer", "bigint", "utinyint", "usmallint"}
_PLAIN |= {"uinteger", "ubigint", "float", "double", "decimal", "varchar"}
_NESTED = {"list", "array", "struct", "map", "union"}
# text settings that may hold credentials (DuckDB reads `http_proxy` from $HTTP_PROXY)
_SECRET_SETTING = r"proxy|password|username|secret_access|access_key|session_token|_token$|key_id$"
BATCH_ROWS = 4096  # rows per streamed batch: a few MB of a typical result


@dataclass(frozen=True)
class QueryLimits:
    """How long and how much memory one `sieve sql` query may take."""

    timeout_s: float = 60.0
    memory_bytes: int = 2 * 10**9
    memory_label: str = "2GB"  # as the user wrote it, for messages
    threads: int = THREADS

    @classmethod
    def from_options(cls, timeout_s: float, memory_limit: str) -> QueryLimits:
        """Validate `--timeout` and `--memory-limit` (a size such as 512MB or 2GiB)."""
        if not 0 < timeout_s <= 86_400:
            raise SieveError(f"--timeout must be > 0 and at most 86400 seconds, got {timeout_s:g}")
        match = _SIZE.match(memory_limit)
        unit = match.group(2).lower() if match else ""
        if match is None or unit not in _UNITS:
            raise SieveError(
                f"--memory-limit must be a size such as 512MB or 2GiB, got {memory_limit!r}"
            )
        size = float(match.group(1)) * _UNITS[unit]
        if not size < 2**63:  # an integer in DuckDB (and not infinite, as 1e400 is)
            raise SieveError(f"--memory-limit is too large, got {memory_limit!r}")
        memory = int(size)
        if memory < MIN_MEMORY:
            raise SieveError(f"--memory-limit must be at least 16MiB, got {memory_limit!r}")
        return cls(timeout_s=timeout_s, memory_bytes=memory, memory_label=memory_limit.strip())

    @property
    def grace_s(self) -> float:
        """How long an interrupted query may take to stop before `on_stuck` is called."""
        return min(5.0, max(1.0, self.timeout_s))


def check_query(query: str) -> str:
    """The one statement `query` holds, if `sieve sql` may run it; else a SieveError."""
    statements = check_read_only(query)
    if len(statements) != 1:
        raise SieveError(
            f"refused: give one statement per `sieve sql` call (found {len(statements)})"
        )
    return str(statements[0].query)


def _secret_settings(con: duckdb.DuckDBPyConnection) -> list[str]:
    rows = con.execute(
        "SELECT name FROM duckdb_settings() WHERE input_type = 'VARCHAR' "
        "AND regexp_matches(name, ?)",
        [_SECRET_SETTING],
    ).fetchall()
    return [name for (name,) in rows if re.fullmatch(r"[a-z0-9_]+", name)]


def lock_down(con: duckdb.DuckDBPyConnection, limits: QueryLimits) -> None:
    """Confine `con` to the database it has open, cap its memory and threads, blank settings
    that may carry credentials, and lock it."""
    try:
        blank = [f"SET {name} = ''" for name in _secret_settings(con)]
    except duckdb.Error as exc:
        raise SieveError(f"cannot sandbox the ledger connection: {_one_line(exc)}") from exc
    # SET takes no bound parameters; both values are integers validated by QueryLimits
    settings = [
        *blank,
        # these two first: once external access is off they can no longer be changed
        "SET temp_directory = ''",  # no spill files by the ledger: the memory limit is a cap
        "SET allow_persistent_secrets = false",  # secrets stored under ~/.duckdb stay unread
        f"SET memory_limit = '{limits.memory_bytes}B'",
        f"SET threads = {limits.threads}",
        "SET enable_external_access = false",  # no files but the ledger's, no network, no ATTACH
        "SET disabled_filesystems = 'LocalFileSystem'",  # nor the ledger's files by name
        "SET autoload_known_extensions = false",
        "SET autoinstall_known_extensions = false",
        "SET lock_configuration = true",  # must come last: every SET after it fails
    ]
    try:
        for statement in settings:
            con.execute(statement)
    except duckdb.Error as exc:
        raise SieveError(f"cannot sandbox the ledger connection: {_one_line(exc)}") from exc
    _check_no_file_reads(con)


def _check_no_file_reads(con: duckdb.DuckDBPyConnection) -> None:
    """SieveError unless a statement on `con` fails to read even its own database file by name
    (the one path external access off still allows), so a DuckDB that ignored
    `disabled_filesystems` is not taken for a sandbox."""
    rows = con.execute(
        "SELECT path FROM duckdb_databases() WHERE path IS NOT NULL AND path <> '' AND NOT internal"
    ).fetchall()
    for (path,) in rows:
        try:
            con.execute(f"SELECT count(*) FROM read_blob({_literal(path)})").fetchall()
        except duckdb.PermissionException:
            continue
        except duckdb.Error as exc:
            raise SieveError(f"cannot sandbox the ledger connection: {_one_line(exc)}") from exc
        raise SieveError(
            "cannot sandbox the ledger connection: this DuckDB still reads the ledger's files "
            "by name with its local file system disabled"
        )


class Sandbox:
    """Runs checked queries on a connection after `lock_down`. DuckDB shares one database per
    file within a process, so the lock-down holds for every connection this process has to the
    ledger: give the sandbox a process of its own (as `sieve sql` is)."""

    def __init__(
        self,
        con: duckdb.DuckDBPyConnection,
        limits: QueryLimits,
        on_stuck: Callable[[str], object] | None = None,
    ):
        self.con = con
        self.limits = limits
        self.on_stuck = on_stuck
        lock_down(con, limits)

    def run(self, statement: str, view: View = "native") -> pa.Table:
        """Run one statement from `check_query` and return its result shaped for `view`."""
        with self.stream(statement, view) as batches:
            return pa.Table.from_batches(list(batches), batches.schema)

    @contextmanager
    def stream(self, statement: str, view: View = "native") -> Iterator[Batches]:
        """Run one statement from `check_query`; the body reads its result batch by batch and
        writes it, under the same timeout and memory cap as the query itself."""
        limits = self.limits
        extra = 2 * limits.memory_bytes + SLACK_BYTES
        with _Watchdog(self.con, limits, self.on_stuck) as dog, _data_segment_cap(extra):
            try:
                relation = self.con.sql(statement)
                if relation is None:
                    raise SieveError("refused: the statement returns no rows")
                reader = _shape(relation, view).to_arrow_reader(BATCH_ROWS)
                yield Batches(reader, dog)
            except (duckdb.Error, MemoryError, pa.ArrowException) as exc:
                raise _failure(exc, limits, dog.fired) from exc
            if dog.fired:  # the body finished after the deadline (the interrupt missed it)
                raise _failure(TimeoutError(), limits, True)


class Batches:
    """A streamed result: iterate for Arrow record batches; stops with the timeout error once
    the watchdog has fired, between batches."""

    def __init__(self, reader: pa.RecordBatchReader, dog: _Watchdog):
        self.reader, self.dog = reader, dog
        self.schema: pa.Schema = reader.schema

    def __iter__(self) -> Iterator[pa.RecordBatch]:
        for batch in self.reader:
            if self.dog.fired:
                raise _failure(TimeoutError(), self.dog.limits, True)
            yield batch


def exit_process(message: str) -> NoReturn:
    """`on_stuck` for command-line callers: print `error: message` and end the process now
    (the ledger is open read-only, so there is nothing to flush or roll back)."""
    sys.stderr.write(f"error: {message}\n")
    sys.stderr.flush()
    os._exit(1)


def end_command(message: str) -> NoReturn:
    """`on_stuck` of `sieve sql`: remove the output file a guarded writer had under way
    (`pipeline.core.outputs.remove_partials`), then `exit_process`."""
    from pipeline.core.outputs import remove_partials

    remove_partials()
    exit_process(message)


@contextmanager
def query_batches(
    home: str | Path | None,
    query: str,
    *,
    timeout: float,
    memory_limit: str,
    view: View = "native",
    output: Path | None = None,
    on_stuck: Callable[[str], object] = end_command,
) -> Iterator[Batches]:
    """`sieve sql`: `query` checked (`check_query`), its limits read from the options
    (`QueryLimits.from_options`), then run sandboxed on the ledger of `home`, opened read-only;
    the body reads the result batch by batch. `output`, the file the result goes to, is checked
    first (`pipeline.core.outputs`: never a ledger's database or side file, under any name)."""
    from pipeline.core.home import ledger_path
    from pipeline.core.outputs import check_output
    from pipeline.store.ledger import Ledger

    statement = check_query(query)
    limits = QueryLimits.from_options(timeout, memory_limit)
    if output is not None:
        check_output(output, ledger=ledger_path(home), label="--output ")
    with Ledger.open(home, read_only=True) as ledger:
        sandbox = Sandbox(ledger.con, limits, on_stuck=on_stuck)
        with sandbox.stream(statement, view) as batches:
            yield batches


def stuck_message(limits: QueryLimits) -> str:
    return (
        f"query stopped after {limits.timeout_s:g} s (--timeout): it did not yield to the "
        f"interrupt within {limits.grace_s:g} s more, so the process was ended"
    )


class _Watchdog:
    """Interrupts the query at the timeout; calls `on_stuck` if it is still running after the
    grace period (DuckDB only checks for an interrupt between chunks of work)."""

    def __init__(
        self,
        con: duckdb.DuckDBPyConnection,
        limits: QueryLimits,
        on_stuck: Callable[[str], object] | None,
    ):
        self.con, self.limits, self.on_stuck = con, limits, on_stuck
        self.done = threading.Event()
        self.fired = False
        self.thread = threading.Thread(target=self._watch, name="sieve-sql-watchdog", daemon=True)

    def __enter__(self) -> _Watchdog:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.done.set()
        self.thread.join()

    def _watch(self) -> None:
        if self.done.wait(self.limits.timeout_s):
            return
        self.fired = True
        self.con.interrupt()
        if not self.done.wait(self.limits.grace_s) and self.on_stuck is not None:
            self.on_stuck(stuck_message(self.limits))


@contextmanager
def _data_segment_cap(extra: int) -> Iterator[None]:
    """Lower the soft RLIMIT_DATA to the data segment in use now plus `extra` bytes, and put it
    back afterwards. A no-op where the kernel does not report the segment (not Linux)."""
    used = _data_segment_bytes()
    try:
        import resource
    except ImportError:  # not POSIX
        used = None
    if used is None:
        yield
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_DATA)
    cap = used + extra
    for limit in (soft, hard):
        if limit != resource.RLIM_INFINITY:
            cap = min(cap, limit)
    resource.setrlimit(resource.RLIMIT_DATA, (cap, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_DATA, (soft, hard))


def _data_segment_bytes() -> int | None:
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmData:"):
                    return int(line.split()[1]) * 1024  # reported in kB
    except (OSError, ValueError):
        return None
    return None


def _shape(relation: duckdb.DuckDBPyRelation, view: View) -> duckdb.DuckDBPyRelation:
    """A projection of `relation` with unique column names, typed for `view`."""
    names = _unique(relation.columns)
    ids = [t.id for t in relation.types]
    if view == "json":
        pairs = ", ".join(f"{_literal(n)}, #{i}" for i, n in enumerate(names, 1))
        return relation.project(f"json_object({pairs})::VARCHAR AS row")
    columns = []
    for i, (name, type_id) in enumerate(zip(names, ids, strict=True), 1):
        if view == "native" or type_id in _PLAIN:
            expr = f"#{i}"
        elif type_id in _NESTED:
            expr = f"to_json(#{i})::VARCHAR"
        else:
            expr = f"CAST(#{i} AS VARCHAR)"
        columns.append(f"{expr} AS {_identifier(name)}")
    return relation.project(", ".join(columns))


def _unique(names: list[str]) -> list[str]:
    seen: set[str] = set()
    unique = []
    for name in names:
        candidate, n = name, 0
        while candidate in seen:
            n += 1
            candidate = f"{name}_{n}"
        seen.add(candidate)
        unique.append(candidate)
    return unique


def _identifier(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _failure(exc: BaseException, limits: QueryLimits, timed_out: bool) -> SieveError:
    text = _one_line(exc).split(" Possible solutions:")[0]  # DuckDB's tuning advice, cut
    if timed_out:  # the watchdog's interrupt, whatever DuckDB raised on it
        return SieveError(
            f"query stopped after {limits.timeout_s:g} s (--timeout); narrow it or raise --timeout"
        )
    if isinstance(exc, duckdb.OutOfMemoryException | MemoryError | pa.ArrowMemoryError):
        return SieveError(
            f"query needs more memory than --memory-limit {limits.memory_label} allows: {text}"
        )
    if isinstance(exc, duckdb.PermissionException):
        return SieveError(f"refused: `sieve sql` reads only the ledger ({text})")
    if "configuration has been locked" in text:
        return SieveError(f"refused: `sieve sql` cannot change settings ({text})")
    return SieveError(f"query failed: {text}")


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__
