"""The generated blocks of docs/ledger.md.

Each function reads benchmarks/results/*.json (through `Results`) or the code and returns one
block's Markdown; `BLOCKS` names them for `render_docs.py`, which puts each between its
`<!-- generated:begin NAME -->` markers.
"""

from __future__ import annotations

from collections.abc import Callable

from render_base import Results, num, table, times


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
    "train-rollouts-storage": train_rollouts_storage,
}
