"""The generated blocks of docs/architecture.md.

Each function reads benchmarks/results/*.json (through `Results`) or the code and returns one
block's Markdown; `BLOCKS` names them for `render_docs.py`, which puts each between its
`<!-- generated:begin NAME -->` markers.
"""

from __future__ import annotations

from collections.abc import Callable

from render_base import Results, table


def settings_sprawl(r: Results) -> str:
    """Where settings live, at the revision issue 34 was filed against and now."""
    labels = {
        "classes": "settings classes (…Config/Params/Options/Settings/Args)",
        "toml_files": "committed TOML settings files",
        "cli_options": "CLI options, summed over commands",
        "cli_option_names": "distinct CLI option names",
        "cli_option_declarations": "CLI options written by hand (`typer.Option(`)",
        "temperature_places": "places that give a temperature a value",
        "max_new_tokens_files": "source files naming max_new_tokens",
    }
    before, now = (
        r("settings_sprawl", "before", "revision"),
        r("settings_sprawl", "now", "revision"),
    )
    rows = [
        [
            text,
            str(r("settings_sprawl", "before", key)),
            str(r("settings_sprawl", "now", key)),
        ]
        for key, text in labels.items()
    ]
    return table(["count", f"at {before}", f"at {now}"], rows)


BLOCKS: dict[str, Callable[[Results], str]] = {
    "settings-sprawl": settings_sprawl,
}
