"""The generated blocks of docs/ledger.md.

Each function reads benchmarks/results/*.json (through `Results`) or the code and returns one
block's Markdown; `BLOCKS` names them for `render_docs.py`, which puts each between its
`<!-- generated:begin NAME -->` markers. `ledger-tables` is read from the code: an in-memory
ledger with every migration applied, its tables' columns and natural keys.
"""

from __future__ import annotations

from collections.abc import Callable

from render_base import Results, num, table, times

_COLUMNS = """
SELECT c.table_name, list(c.column_name ORDER BY c.ordinal_position)
FROM information_schema.columns AS c
JOIN information_schema.tables AS t USING (table_catalog, table_schema, table_name)
WHERE t.table_type = 'BASE TABLE' AND c.table_schema = 'main'
GROUP BY c.table_name
ORDER BY c.table_name
"""


def ledger_tables(r: Results) -> str:
    """Every table of a freshly migrated ledger: its natural key and its other columns."""
    from pipeline.store.ledger import Ledger

    ledger = Ledger.memory()
    try:
        keys = dict(ledger.run("SELECT table_name, key_columns FROM sieve_natural_keys"))
        tables = ledger.run(_COLUMNS)
    finally:
        ledger.close()
    rows = []
    for name, columns in tables:
        key = keys.get(name, [])
        rest = [c for c in columns if c not in key]
        rows.append(
            [
                f"`{name}`",
                ", ".join(f"`{c}`" for c in key) or "—",
                ", ".join(f"`{c}`" for c in rest),
            ]
        )
    return table(["table", "natural key", "other columns"], rows)


def train_rollouts_storage(r: Results) -> str:
    label = {
        "chat": "chat completions (real-model pool)",
        "tiny": "tiny-policy answers",
    }
    rows = [
        [
            label.get(kind, kind),
            num(r("train_rollouts_storage", "kinds", kind, "completion_chars_mean")),
            num(r("train_rollouts_storage", "kinds", kind, "mib_per_10k_rollouts"), 2) + " MiB",
            times(r("train_rollouts_storage", "kinds", kind, "commit_last_over_first"), 1),
        ]
        for kind in ("chat", "tiny")
    ]
    per_step = r("train_rollouts_storage", "rows_per_step")
    total = r("train_rollouts_storage", "kinds", "chat", "rows_written")
    header = ["completions", "mean chars", "per 10 k rollouts", "last commit / first"]
    intro = f"{per_step} rows per step up to {total:,} rows, DuckDB file growth:\n\n"
    return intro + table(header, rows)


BLOCKS: dict[str, Callable[[Results], str]] = {
    "ledger-tables": ledger_tables,
    "train-rollouts-storage": train_rollouts_storage,
}
