"""The DuckDB ledger: connection, forward-only migrations, bulk idempotent writes, read-only SQL.

Every write takes a Polars frame or Arrow table, drops duplicate natural keys inside the batch
(keeping the first row: DuckDB itself would silently keep the first of duplicate keys in one upsert
batch, which we prefer to make explicit), and inserts it in one transaction, so a batch lands whole
or not at all. Natural keys are declared per table in `sieve_natural_keys` (migration 0001); stored
rows are skipped (`ignore`) or overwritten (`replace`) by an anti-join on that key, which also
works for `rollouts`, whose key has no index because an index makes bulk ingest ~20x slower.

Test: `pytest tests/store`.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from importlib import resources
from pathlib import Path
from typing import Any, Literal

import duckdb
import polars as pl
import pyarrow as pa

from pipeline.crash import crash_point
from pipeline.errors import SieveError
from pipeline.home import ledger_path

OnConflict = Literal["ignore", "replace"]
_MIGRATION_NAME = re.compile(r"^(\d{4})_[a-z0-9_]+\.sql$")
READ_ONLY_STATEMENTS = {"SELECT", "EXPLAIN"}


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
    return " ".join(str(exc).split())


def _connect(path: Path | None, read_only: bool) -> duckdb.DuckDBPyConnection:
    if path is None:
        return duckdb.connect(":memory:")
    try:
        return duckdb.connect(str(path), read_only=read_only)
    except duckdb.IOException as exc:
        text = _one_line(exc)
        if "lock" in text.lower():
            holder = re.search(r"\(PID (\d+)\)", text)
            who = f" (process {holder.group(1)})" if holder else ""
            raise SieveError(
                f"ledger {path} is locked by another writer{who}; wait for it to finish "
                "or point --home / SIEVE_HOME at another ledger"
            ) from exc
        raise SieveError(f"cannot open ledger {path}: {text}") from exc
    except duckdb.Error as exc:
        raise SieveError(f"cannot open ledger {path}: {_one_line(exc)}") from exc


class Ledger:
    """One open connection to the ledger. Use `Ledger.open(...)` or `Ledger.memory()`."""

    def __init__(self, con: duckdb.DuckDBPyConnection, path: Path | None, read_only: bool):
        self.con = con
        self.path = path
        self.read_only = read_only
        self._keys: dict[str, list[str]] = {}
        self._columns: dict[str, list[str]] = {}

    # -- opening ---------------------------------------------------------------------------
    @classmethod
    def open(
        cls, home: str | Path | None = None, *, read_only: bool = False, path: Path | None = None
    ) -> Ledger:
        """Open (and create or migrate, if needed) the ledger under `home`."""
        path = Path(path) if path is not None else ledger_path(home)
        if read_only:
            if not path.exists() or cls._pending(path):
                cls.open(path=path).close()  # create / migrate first, then reopen read-only
            return cls(_connect(path, read_only=True), path, True)
        path.parent.mkdir(parents=True, exist_ok=True)
        ledger = cls(_connect(path, read_only=False), path, False)
        ledger.migrate()
        return ledger

    @classmethod
    def memory(cls) -> Ledger:
        """A migrated in-memory ledger (tests, benchmarks)."""
        ledger = cls(_connect(None, read_only=False), None, False)
        ledger.migrate()
        return ledger

    @staticmethod
    def _pending(path: Path) -> bool:
        con = _connect(path, read_only=True)
        try:
            return bool(Ledger(con, path, True).pending_migrations())
        finally:
            con.close()

    def close(self) -> None:
        self.con.close()

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def run(self, statement: Any, params: Mapping[str, Any] | None = None) -> list[tuple[Any, ...]]:
        """Execute one statement and fetch its whole result (DuckDB 2 keeps an unfinished result
        open on the connection until every row is fetched)."""
        return self.con.execute(statement, dict(params or {})).fetchall()

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
        self.run(load_query("create_schema_migrations"))
        done = []
        for version, name, text in self.pending_migrations():
            with self.transaction():
                for statement in self.con.extract_statements(text):
                    self.run(statement)
                self.run(
                    "INSERT INTO schema_migrations VALUES ($v, $n, $c, now())",
                    {"v": version, "n": name, "c": _checksum(text)},
                )
            done.append(version)
        return done

    # -- transactions and writes -----------------------------------------------------------
    def transaction(self) -> _Transaction:
        return _Transaction(self)

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
        prepared = {t: self._prepare(t, rows) for t, rows in batches.items()}
        views = {t: f"_sieve_batch_{t}" for t in prepared}
        for table, arrow in prepared.items():  # registered outside the transaction, so a failed
            self.con.register(views[table], arrow)  # insert leaves nothing to clean up inside it
        try:
            with self.transaction():
                written = {t: self._insert(t, views[t], on_conflict) for t in prepared}
                crash_point("ledger.before_commit")
        finally:
            for view in views.values():
                self.con.unregister(view)
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
    def ledger_id(self) -> str:
        """A random id given to this ledger file when it was created (migration 0002)."""
        return str(self.run("SELECT value FROM sieve_meta WHERE key = 'ledger_id'")[0][0])

    def sql(self, query: str, params: Mapping[str, Any] | None = None) -> pl.DataFrame:
        """Run one statement and return its result as a Polars frame."""
        return self.con.sql(query, params=dict(params or {})).pl()

    def query(self, name: str, **params: Any) -> pl.DataFrame:
        """Run the stored query `queries/<name>.sql` with bound parameters."""
        return self.sql(load_query(name), params)

    def checksum(self, table: str) -> tuple[int, int]:
        """(row count, order-independent hash of all rows) — equal tables give equal checksums."""
        self.table_columns(table)  # validates the name before it is spliced into SQL
        rows = self.run(f"SELECT count(*), coalesce(bit_xor(hash(t)), 0) FROM {table} AS t")
        return int(rows[0][0]), int(rows[0][1])


class _Transaction:
    def __init__(self, ledger: Ledger):
        self.ledger = ledger

    def __enter__(self) -> None:
        self.ledger.run("BEGIN TRANSACTION")

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        self.ledger.run("COMMIT" if exc_type is None else "ROLLBACK")


def _may_have_duplicates(frame: pl.DataFrame, key: list[str]) -> bool:
    """Cheap pre-check: distinct row hashes == rows proves the key is unique in the batch."""
    if frame.height < 2:
        return False
    distinct = frame.select(pl.struct(key).hash().n_unique()).item()
    return bool(distinct < frame.height)


def _checksum(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def check_read_only(query: str) -> None:
    """Refuse anything but SELECT / EXPLAIN (SHOW and DESCRIBE parse as SELECT)."""
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
