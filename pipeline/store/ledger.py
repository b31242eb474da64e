"""The DuckDB ledger: connection, forward-only migrations, bulk idempotent writes, read-only SQL.

Every write takes a Polars frame or Arrow table, drops duplicate natural keys inside the batch
(keeping the first row: DuckDB itself would silently keep the first of duplicate keys in one upsert
batch, which we prefer to make explicit), and inserts it in one transaction, so a batch lands whole
or not at all. Natural keys are declared per table in `sieve_natural_keys` (migration 0001); stored
rows are skipped (`ignore`) or overwritten (`replace`) by an anti-join on that key, which also
works for `rollouts`, whose key has no index because an index makes bulk ingest ~20x slower.

Connections. `Ledger.open(home)` holds one connection until closed (short commands). A
long-running writer (a curation, a training run) opens with `transient=True`: it connects for
each statement, batch or transaction and disconnects right after, so DuckDB's file lock is free
between commits and `sieve sql` or a DuckDB shell can read while a night runs. A read-write
ledger also holds the writer lease for its whole life, so two writers never interleave (a
curation's `reconcile_running` relies on that). Whoever finds the file or the lease taken waits
up to `$SIEVE_LOCK_WAIT` seconds (default 60) and then fails naming the holder (`locks.py`).
A read-only open never creates a ledger (a missing one is an error) but applies pending
migrations first; a file DuckDB cannot read is reported as damaged and left as it is.

Test: `pytest tests/store`.
"""

from __future__ import annotations

import hashlib
import re
import stat
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from importlib import resources
from pathlib import Path
from typing import Any, Literal

import duckdb
import polars as pl
import pyarrow as pa

from pipeline.core.crash import crash_point
from pipeline.core.errors import SieveError
from pipeline.core.home import ledger_path
from pipeline.store import locks

OnConflict = Literal["ignore", "replace"]
_MIGRATION_NAME = re.compile(r"^(\d{4})_[a-z0-9_]+\.sql$")
READ_ONLY_STATEMENTS = {"SELECT", "EXPLAIN", "MULTI"}  # MULTI: a PIVOT, checked by `_check_multi`


def _sql_file(folder: str, name: str) -> str:
    return resources.files("pipeline.store").joinpath(folder, name).read_text(encoding="utf-8")


def load_query(name: str) -> str:
    """Text of `pipeline/store/queries/<name>.sql` (one statement, `$name` parameters)."""
    try:
        return _sql_file("queries", f"{name}.sql")
    except FileNotFoundError as exc:
        raise SieveError(f"no stored query named {name!r}") from exc


def migrations() -> list[tuple[int, str, str]]:
    """All migration files as (version, file name, text), in version order."""
    folder = resources.files("pipeline.store").joinpath("migrations")
    found = []
    for entry in folder.iterdir():
        match = _MIGRATION_NAME.match(entry.name)
        if match:
            found.append((int(match.group(1)), entry.name, entry.read_text(encoding="utf-8")))
    return sorted(found)


def _one_line(exc: BaseException) -> str:
    return locks.one_line(exc)


def _connect(path: Path | None, read_only: bool) -> duckdb.DuckDBPyConnection:
    if path is None:
        return duckdb.connect(":memory:")
    return locks.connect(path, read_only)


class Ledger:
    """The ledger and its connection. Use `Ledger.open(...)` or `Ledger.memory()`."""

    def __init__(
        self,
        con: duckdb.DuckDBPyConnection | None,
        path: Path | None,
        read_only: bool,
        *,
        transient: bool = False,
        lease: Path | None = None,
    ):
        self._con = con
        self.path = path
        self.read_only = read_only
        self.transient = transient
        self._lease = lease
        self._keys: dict[str, list[str]] = {}
        self._columns: dict[str, list[str]] = {}

    # -- opening ---------------------------------------------------------------------------
    @classmethod
    def open(
        cls,
        home: str | Path | None = None,
        *,
        read_only: bool = False,
        path: Path | None = None,
        transient: bool = False,
        create: bool = True,
    ) -> Ledger:
        """Open the ledger under `home` (or at `path`); see the module docstring.

        Read-write creates or migrates it (`create=False`: a missing one is an error, as for a
        command that only adds to a ledger's rows). Read-only needs it to exist (pending
        migrations are applied first). `transient`: connect only inside each operation
        (long-running writers).
        """
        path = Path(path) if path is not None else ledger_path(home)
        kind = _special_kind(path)
        if kind is not None:  # DuckDB would block on a FIFO forever
            raise SieveError(
                f"{path} is {kind}, not a ledger file: move it away or choose another --home"
            )
        if (read_only or not create) and not path.is_file():
            raise SieveError(
                f"no ledger at {path}: run `sieve generate`, `sieve ingest` or `sieve curate` "
                "first (or check --home / SIEVE_HOME)"
            )
        if not read_only:
            path.parent.mkdir(parents=True, exist_ok=True)
        lease = None if read_only else locks.take_lease(path)
        ledger = cls(None, path, read_only, transient=transient, lease=lease)
        try:
            ledger._con = _connect(path, read_only)
            ledger._prepare_file()
        except BaseException:
            ledger.close()
            raise
        if transient:
            ledger._disconnect()
        return ledger

    def _prepare_file(self) -> None:
        """Read the migration state (a file DuckDB cannot read fails here, unchanged) and apply
        what is pending; a read-only ledger does that over a brief read-write connection."""
        assert self.path is not None
        try:
            self._check_size(self.path)
            pending = self.pending_migrations()
        except duckdb.Error as exc:
            raise locks.damaged(self.path, exc) from None
        if not pending:
            return
        writer = self
        if self.read_only:
            self._disconnect()
            writer = Ledger(_connect(self.path, read_only=False), self.path, False)
        try:
            writer.migrate()
        except duckdb.Error as exc:
            raise SieveError(f"cannot migrate ledger {self.path}: {_one_line(exc)}") from None
        finally:
            if writer is not self:
                writer.close()
        if self.read_only:
            self._con = _connect(self.path, read_only=True)

    def _check_size(self, path: Path) -> None:
        """A file too short to hold the blocks in use was truncated (a partial copy or restore);
        DuckDB itself would fail only once a query reached a missing block. Skipped while a
        write-ahead log is pending (its changes are not in the file yet)."""
        if path.with_name(path.name + ".wal").exists():
            return
        block, used = self.run("SELECT block_size, used_blocks FROM pragma_database_size()")[0]
        size = path.stat().st_size
        if size < block * used:  # free blocks at the end are cut off, used ones never
            raise SieveError(
                f"ledger {path} is damaged or not a DuckDB file: it is {size} bytes, too short "
                f"for its {used} blocks of {block} bytes in use (truncated?)"
            )

    @classmethod
    def memory(cls) -> Ledger:
        """A migrated in-memory ledger (tests, benchmarks)."""
        ledger = cls(_connect(None, read_only=False), None, False)
        ledger.migrate()
        return ledger

    @property
    def con(self) -> duckdb.DuckDBPyConnection:
        """The open connection; a transient ledger has one only inside `connected()`."""
        if self._con is None:
            raise SieveError(
                f"ledger {self.path} is not connected"
                + (" (transient: use `with ledger.connected():`)" if self.transient else "")
            )
        return self._con

    @contextmanager
    def connected(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """The connection for a group of statements. A transient ledger connects here (waiting
        for other processes' locks) and disconnects when the outermost such block ends."""
        if self._con is not None or not self.transient:
            yield self.con
            return
        assert self.path is not None
        self._con = _connect(self.path, self.read_only)
        try:
            yield self._con
        finally:
            self._disconnect()

    def _disconnect(self) -> None:
        con, self._con = self._con, None
        if con is not None:
            con.close()

    def close(self) -> None:
        try:
            self._disconnect()
        finally:
            lease, self._lease = self._lease, None
            if lease is not None:
                locks.drop_lease(lease)

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def run(self, statement: Any, params: Mapping[str, Any] | None = None) -> list[tuple[Any, ...]]:
        """Execute one statement and fetch its whole result (DuckDB 2 keeps an unfinished result
        open on the connection until every row is fetched)."""
        with self.connected() as con:
            return con.execute(statement, dict(params or {})).fetchall()

    # -- migrations ------------------------------------------------------------------------
    def applied_migrations(self) -> dict[int, str]:
        exists = self.run(load_query("has_table"), {"table": "schema_migrations"})
        if not exists[0][0]:
            return {}
        rows = self.run("SELECT version, checksum FROM schema_migrations")
        return {int(v): str(c) for v, c in rows}

    def pending_migrations(self) -> list[tuple[int, str, str]]:
        applied = self.applied_migrations()
        known = migrations()
        newest_known = max((v for v, _, _ in known), default=0)
        newer = [v for v in applied if v > newest_known]
        if newer:
            raise SieveError(
                f"ledger {self.path} has schema version {max(newer)}, newer than this Sieve "
                f"({newest_known}); upgrade Sieve"
            )
        for version, name, text in known:
            if version in applied and applied[version] != _checksum(text):
                raise SieveError(
                    f"migration {name} changed after it was applied to {self.path}; "
                    "migrations are forward-only: add a new numbered file instead"
                )
        return [m for m in known if m[0] not in applied]

    def migrate(self) -> list[int]:
        """Apply pending migrations, each in its own transaction. Returns the versions applied."""
        with self.connected() as con:
            pending = self.pending_migrations()
            if pending:
                self.run(load_query("create_schema_migrations"))
            for version, name, text in pending:
                with self.transaction():
                    for statement in con.extract_statements(text):
                        self.run(statement)
                    self.run(
                        "INSERT INTO schema_migrations VALUES ($v, $n, $c, now())",
                        {"v": version, "n": name, "c": _checksum(text)},
                    )
            return [version for version, _, _ in pending]

    # -- transactions and writes -----------------------------------------------------------
    @contextmanager
    def transaction(self) -> Iterator[None]:
        """BEGIN ... COMMIT on one connection; ROLLBACK when the block raises."""
        with self.connected():
            self.run("BEGIN TRANSACTION")
            try:
                yield
            except BaseException:
                self.run("ROLLBACK")
                raise
            self.run("COMMIT")

    def table_columns(self, table: str) -> list[str]:
        if table not in self._columns:
            rows = self.run(load_query("table_columns"), {"table": table})
            if not rows:
                raise SieveError(f"ledger has no table {table!r}")
            self._columns[table] = [r[0] for r in rows]
        return self._columns[table]

    def natural_key(self, table: str) -> list[str]:
        """The columns of the table's natural key (from `sieve_natural_keys`)."""
        if table not in self._keys:
            rows = self.run(
                "SELECT key_columns FROM sieve_natural_keys WHERE table_name = $t", {"t": table}
            )
            if not rows:
                raise SieveError(f"table {table!r} has no natural key to write idempotently")
            self._keys[table] = list(rows[0][0])
        return self._keys[table]

    def write(
        self, table: str, rows: pl.DataFrame | pa.Table, on_conflict: OnConflict = "ignore"
    ) -> int:
        """Write one batch to one table in one transaction. Returns the number of new rows."""
        return self.write_batch({table: rows}, on_conflict=on_conflict)[table]

    def write_batch(
        self, batches: Mapping[str, pl.DataFrame | pa.Table], on_conflict: OnConflict = "ignore"
    ) -> dict[str, int]:
        """Write several tables' batches in one transaction: all of them land, or none.

        `ignore` keeps rows already stored (idempotent re-runs); `replace` overwrites them
        (status updates). Either way a batch's own duplicate keys keep their first row.
        """
        if self.read_only:
            raise SieveError(f"ledger {self.path} is open read-only")
        with self.connected() as con:
            prepared = {t: self._prepare(t, rows) for t, rows in batches.items()}
            views = {t: f"_sieve_batch_{t}" for t in prepared}
            for table, arrow in prepared.items():  # registered outside the transaction, so a
                con.register(views[table], arrow)  # failed insert leaves nothing to clean up
            try:
                with self.transaction():
                    written = {t: self._insert(t, views[t], on_conflict) for t in prepared}
                    crash_point("ledger.before_commit")
            finally:
                for view in views.values():
                    con.unregister(view)
        return written

    def write_parts(
        self,
        table: str,
        parts: Iterable[pl.DataFrame | pa.Table],
        on_conflict: OnConflict = "ignore",
    ) -> int:
        """Write one table's rows in parts, all in one transaction: all land, or none. Each
        part becomes Arrow only while it is inserted, so a large import (`sieve ingest` of
        millions of problems) never holds a second copy of itself. A key repeated across parts
        keeps its first row, as within one batch. Returns the number of new rows."""
        if self.read_only:
            raise SieveError(f"ledger {self.path} is open read-only")
        view, written = f"_sieve_part_{table}", 0
        with self.connected() as con:
            try:
                with self.transaction():
                    for part in parts:
                        con.register(view, self._prepare(table, part))
                        written += self._insert(table, view, on_conflict)
                        con.unregister(view)
                    crash_point("ledger.before_commit")
            finally:  # after a rollback: an aborted transaction cannot drop the view
                with suppress(duckdb.Error):
                    con.unregister(view)
        return written

    def _prepare(self, table: str, rows: pl.DataFrame | pa.Table) -> pa.Table:
        frame = rows if isinstance(rows, pl.DataFrame) else pl.from_arrow(rows)
        assert isinstance(frame, pl.DataFrame)
        columns = self.table_columns(table)
        unknown = [c for c in frame.columns if c not in columns]
        if unknown:
            raise SieveError(f"table {table!r} has no column(s) {', '.join(unknown)}")
        key = self.natural_key(table)
        missing = [c for c in key if c not in frame.columns]
        if missing:
            raise SieveError(f"batch for {table!r} lacks key column(s) {', '.join(missing)}")
        if _may_have_duplicates(frame, key):
            frame = frame.unique(subset=key, keep="first", maintain_order=True)
        return frame.to_arrow()

    def _insert(self, table: str, view: str, on_conflict: OnConflict) -> int:
        cols = ", ".join(f'"{c}"' for c in self.con.table(view).columns)
        key = ", ".join(f'"{c}"' for c in self.natural_key(table))
        if on_conflict == "replace":
            self.run(f"DELETE FROM {table} WHERE ({key}) IN (SELECT ({key}) FROM {view})")
            source = view
        else:
            source = f"(SELECT * FROM {view} ANTI JOIN {table} USING ({key}))"
        rows = self.run(f"INSERT INTO {table} ({cols}) SELECT {cols} FROM {source}")
        return int(rows[0][0]) if rows else 0

    # -- reads -----------------------------------------------------------------------------
    @property
    def home(self) -> Path | None:
        """The Sieve home this ledger file lies in (its folder); None in memory. Rows name the
        folders inside it relative to it (`pipeline.core.home.to_home`)."""
        return self.path.parent if self.path is not None else None

    @property
    def ledger_id(self) -> str:
        """A random id given to this ledger file when it was created (migration 0002)."""
        return str(self.run("SELECT value FROM sieve_meta WHERE key = 'ledger_id'")[0][0])

    def sql(self, query: str, params: Mapping[str, Any] | None = None) -> pl.DataFrame:
        """Run one statement and return its result as a Polars frame."""
        with self.connected() as con:
            return con.sql(query, params=dict(params or {})).pl()

    def query(self, name: str, **params: Any) -> pl.DataFrame:
        """Run the stored query `queries/<name>.sql` with bound parameters."""
        return self.sql(load_query(name), params)

    # -- the difficulty model's evidence (pipeline.selection.evidence) ---------------------
    def train_run_bases(self) -> pl.DataFrame:
        """train_id, base_revision of every training run (stored query `train_run_bases`)."""
        return self.query("train_run_bases")

    def checkpoint_revisions(self) -> pl.DataFrame:
        """train_id, step, model_revision of every checkpoint (`checkpoint_revisions`)."""
        return self.query("checkpoint_revisions")

    def curation_groups(
        self, revisions: Sequence[str] | None = None, exclude: Sequence[str] = ()
    ) -> pl.DataFrame:
        """problem_id, cell, k, n, revision of the curation groups the difficulty model counts
        (`posterior_curation_groups`): those sampled by `revisions` (None: by any revision),
        but for the sampling runs in `exclude`."""
        revs = None if revisions is None else list(revisions)
        return self.query("posterior_curation_groups", revisions=revs, exclude=list(exclude))

    def training_groups(self, runs: Sequence[str] | None = None) -> pl.DataFrame:
        """problem_id, cell, k, n, train_id, step of the trained groups the difficulty model
        counts (`posterior_train_groups`) of the training runs `runs` (None: of every run)."""
        return self.query("posterior_train_groups", runs=None if runs is None else list(runs))

    def step_shares(self, train_id: str) -> pl.DataFrame:
        """step, share: each step of run `train_id`, its informative share (`train_step_shares`)."""
        return self.query("train_step_shares", train_id=train_id)

    def train_prompts(self) -> pl.DataFrame:
        """problem_id, cell of every train-split problem (`train_prompts`)."""
        return self.query("train_prompts")

    def cell_prior(self, revision: str) -> pl.DataFrame:
        """cell, k, n: per cell, what the weights `revision` were sampled to pass (`cell_prior`)."""
        return self.query("cell_prior", revision=revision)

    def checksum(self, table: str) -> tuple[int, int]:
        """(row count, order-independent hash of all rows) — equal tables give equal checksums."""
        self.table_columns(table)  # validates the name before it is spliced into SQL
        rows = self.run(f"SELECT count(*), coalesce(bit_xor(hash(t)), 0) FROM {table} AS t")
        return int(rows[0][0]), int(rows[0][1])


def _may_have_duplicates(frame: pl.DataFrame, key: list[str]) -> bool:
    """Cheap pre-check: distinct row hashes == rows proves the key is unique in the batch."""
    if frame.height < 2:
        return False
    distinct = frame.select(pl.struct(key).hash().n_unique()).item()
    return bool(distinct < frame.height)


def _checksum(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def check_read_only(query: str) -> list[duckdb.Statement]:
    """The statements of `query` if each is a SELECT (SHOW, DESCRIBE and SUMMARIZE parse as
    one), a PIVOT that is a query (`_check_multi`) or an EXPLAIN of a SELECT without ANALYZE;
    else a SieveError saying why not."""
    try:
        statements = duckdb.extract_statements(query)
    except duckdb.Error as exc:
        raise SieveError(f"invalid SQL: {_one_line(exc)}") from exc
    if not statements:
        raise SieveError("no SQL statement given")
    for statement in statements:
        kind = statement.type.name
        if kind not in READ_ONLY_STATEMENTS:
            raise SieveError(
                f"refused: {kind} statements are not allowed; `sieve sql` is read-only "
                "(SELECT, EXPLAIN, SHOW, DESCRIBE)"
            )
        if kind == "EXPLAIN":
            _check_explain(str(statement.query))
        if kind == "MULTI":
            _check_multi(str(statement.query))
    return statements


def _check_multi(text: str) -> None:
    """A statement DuckDB runs as several: a PIVOT without its IN list, run as a temporary enum
    type of the pivoted values (in the connection's in-memory temp catalog, never the file)
    and then the query. It is read-only only when it is a query as a whole, which is when it
    parses as a subquery: a CREATE TABLE AS, INSERT, COPY or EXPLAIN around the PIVOT does not."""
    try:
        kinds = [s.type.name for s in duckdb.extract_statements(f"SELECT * FROM (\n{text}\n)")]
    except duckdb.Error:
        kinds = []
    if kinds not in (["SELECT"], ["MULTI"]):
        raise SieveError(
            "refused: this PIVOT is not a query; `sieve sql` is read-only (SELECT, EXPLAIN, "
            "SHOW, DESCRIBE, PIVOT)"
        )


_ANALYZE = {"analyze", "analyse"}


def _check_explain(text: str) -> None:
    """EXPLAIN [(FORMAT name)] followed by one SELECT. EXPLAIN ANALYZE, in any spelling, runs
    the statement it explains (a COPY writes its file, a SET changes a setting), so it is out."""
    words = _words(text)
    if not words or words[0][1].lower() != "explain":
        raise SieveError("refused: cannot read this EXPLAIN statement")
    rest = 1
    if len(words) > 1 and words[1][1] == "(":
        close = next((i for i, (_, w) in enumerate(words) if w == ")"), len(words))
        options = [w.strip('"').lower() for _, w in words[2:close]]
        analyze = bool(_ANALYZE.intersection(options))
        if not analyze and (options[:1] != ["format"] or len(options) != 2):
            raise SieveError("refused: EXPLAIN takes no option but (FORMAT name) here")
        rest = close + 1
    else:
        analyze = len(words) > 1 and words[1][1].strip('"').lower() in _ANALYZE
    if analyze:
        raise SieveError(
            "refused: EXPLAIN ANALYZE runs the statement it explains; use EXPLAIN without ANALYZE"
        )
    inner = text[words[rest][0] :] if rest < len(words) else ""
    try:
        kinds = [s.type.name for s in duckdb.extract_statements(inner)]
    except duckdb.Error as exc:
        raise SieveError(f"invalid SQL: {_one_line(exc)}") from exc
    if kinds != ["SELECT"]:
        raise SieveError("refused: EXPLAIN is allowed only of a SELECT")


def _words(text: str) -> list[tuple[int, str]]:
    """(offset, text) of each token of `text` but its comments, from DuckDB's own tokenizer."""
    tokens = duckdb.tokenize(text)
    ends = [start for start, _ in tokens[1:]] + [len(text)]
    return [
        (start, text[start:end].strip())
        for (start, kind), end in zip(tokens, ends, strict=True)
        if kind != duckdb.token_type.comment
    ]


def _special_kind(path: Path) -> str | None:
    """What `path` is when it exists and is not a regular file (a symbolic link is followed):
    a folder, a FIFO, a device, a socket; None otherwise."""
    try:
        mode = path.stat().st_mode
    except OSError:
        return None  # missing, or unreachable: the open says why
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "a socket" if stat.S_ISSOCK(mode) else "not a regular file"
