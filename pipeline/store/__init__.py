"""The DuckDB ledger (see `ledger.py`): tables, views, migrations, bulk writes, read-only SQL."""

from pipeline.store.ledger import Ledger, check_read_only, load_query, migrations

__all__ = ["Ledger", "check_read_only", "load_query", "migrations"]
