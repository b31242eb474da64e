"""Render every generated block of README.md and docs/*.md, from benchmarks/results/*.json and
from the code.

A page holds a generated block between two marker lines:

    <!-- generated:begin NAME -->
    ... written by this script, never by hand ...
    <!-- generated:end NAME -->

NAME is a key of `BLOCKS`; its function reads the results files (or the code, for the blocks
that describe it) and returns the block's Markdown. `python docs/render/render_docs.py` (`make
docs`) rewrites every block in place; `--check` (`make docs-check`, run by `.ci/run`) renders into
memory and prints one line per block whose committed text differs, exit 1. A missing results
file or key is one `error:` line naming the file and the key, exit 2. Tested in
`tests/test_docs.py`.

This file is the entry point: it finds the blocks on the pages and fills them. The blocks live
in one module per page or group of pages (`docs_<page>.py`, each with its own `BLOCKS`), over
the shared pieces in `render_base.py`. To publish a new figure: add a function to its page's
module, register it in that module's `BLOCKS`, put the two marker lines where it belongs and run
`make docs`. A number with no results file is not published.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import docs_architecture  # docs/architecture.md
import docs_benchmarks  # docs/benchmarks.md
import docs_curation  # docs/curation.md
import docs_fresh  # README: the fresh-clone timings
import docs_headline  # selection headline: README; its runs real-models.md; tiny benchmarks.md
import docs_ledger  # docs/ledger.md
import docs_real_models  # docs/real-models.md
import docs_scaling  # docs/scaling.md, docs/reliability.md
import docs_training  # docs/training.md, docs/process-rewards.md
import docs_verifier  # docs/verifier.md
from render_base import ROOT, RenderError, Results

__all__ = [
    "BEGIN",
    "BLOCK",
    "BLOCKS",
    "RenderError",
    "Results",
    "main",
    "pages",
    "render_page",
]

BEGIN = re.compile(r"^<!-- generated:begin ([a-z0-9-]+) -->$", re.MULTILINE)
BLOCK = re.compile(
    r"^(?P<head><!-- generated:begin (?P<name>[a-z0-9-]+) -->\n)"
    r"(?P<body>.*?)"
    r"^(?P<tail><!-- generated:end (?P=name) -->)$",
    re.MULTILINE | re.DOTALL,
)

HEADLINE_BLOCKS: dict[str, Callable[[Results], str]] = {
    "headline-selection": docs_headline.headline_selection,
    "headline-selection-runs": docs_headline.headline_selection_runs,
    "headline-selection-tiny": docs_headline.headline_selection_tiny,
    "headline-selection-tiny-runs": docs_headline.headline_selection_tiny_runs,
    "headline-selection-cells": docs_headline.headline_selection_cells,
    "headline-selection-tiny-cells": docs_headline.headline_selection_tiny_cells,
    "headline-selection-updates": docs_headline.headline_selection_updates,
    "headline-selection-tiny-updates": docs_headline.headline_selection_tiny_updates,
}
PAGE_BLOCKS: tuple[dict[str, Callable[[Results], str]], ...] = (
    HEADLINE_BLOCKS,
    docs_real_models.BLOCKS,
    docs_benchmarks.BLOCKS,
    docs_training.BLOCKS,
    docs_curation.BLOCKS,
    docs_scaling.BLOCKS,
    docs_ledger.BLOCKS,
    docs_verifier.BLOCKS,
    docs_architecture.BLOCKS,
    docs_fresh.BLOCKS,
)


def all_blocks(
    groups: tuple[dict[str, Callable[[Results], str]], ...],
) -> dict[str, Callable[[Results], str]]:
    """Every page module's blocks in one table; a name registered twice is refused."""
    merged: dict[str, Callable[[Results], str]] = {}
    for group in groups:
        twice = sorted(set(merged) & set(group))
        if twice:
            raise RuntimeError(f"generated block {twice[0]!r} is registered twice")
        merged.update(group)
    return merged


BLOCKS = all_blocks(PAGE_BLOCKS)


# --- pages -----------------------------------------------------------------------------------


def render_page(
    text: str,
    results: Results,
    where: str,
    blocks: dict[str, Callable[[Results], str]] = BLOCKS,
) -> tuple[str, list[str]]:
    """The page with every block re-rendered, and the names of the blocks that changed."""
    begun = BEGIN.findall(text)
    closed = [m["name"] for m in BLOCK.finditer(text)]
    if begun != closed:
        lost = next(n for i, n in enumerate(begun) if i >= len(closed) or closed[i] != n)
        raise RenderError(
            f"{where}: block {lost!r} has no matching `<!-- generated:end {lost} -->`"
        )
    stale: list[str] = []

    def fill(m: re.Match[str]) -> str:
        name = m["name"]
        if name not in blocks:
            raise RenderError(
                f"{where}: unknown generated block {name!r} (known: {', '.join(blocks)})"
            )
        body = blocks[name](results).strip("\n") + "\n"
        if body != m["body"]:
            stale.append(name)
        return m["head"] + body + m["tail"]

    return BLOCK.sub(fill, text), stale


def pages(root: Path) -> list[Path]:
    return [root / "README.md", *sorted((root / "docs").glob("*.md"))]


def run(root: Path, results_dir: Path, check: bool) -> list[str]:
    """Render every page; write them unless `check`. Returns one line per changed block."""
    results = Results(results_dir, root)
    lines = []
    for page in pages(root):
        if not page.is_file():
            continue
        where = str(page.relative_to(root))
        text = page.read_text()
        new, stale = render_page(text, results, where)
        state = "is stale (run `make docs`)" if check else "rendered"
        lines += [f"{where}: generated block {name!r} {state}" for name in stale]
        if stale and not check:
            page.write_text(new)
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="fail on stale blocks, write nothing")
    parser.add_argument("--root", type=Path, default=ROOT, help="repository root")
    parser.add_argument("--results", type=Path, default=None, help="results folder")
    args = parser.parse_args(argv)
    results_dir = args.results or args.root / "benchmarks" / "results"
    try:
        lines = run(args.root, results_dir, args.check)
    except RenderError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    for line in lines:
        print(line, file=sys.stderr if args.check else sys.stdout)
    if args.check:
        return 1 if lines else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
