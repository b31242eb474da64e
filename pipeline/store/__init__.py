"""The DuckDB ledger (see `ledger.py`): tables, views, migrations, bulk writes, read-only SQL."""

from pipeline.store.ledger import Ledger, check_read_only, load_query, migrations
from pipeline.store.sandbox_sql import QueryLimits, Sandbox, check_query

__all__ = [
    "Ledger",
    "QueryLimits",
    "Sandbox",
    "check_query",
    "check_read_only",
    "load_query",
    "migrations",
]
