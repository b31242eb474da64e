"""The README's fresh-clone block: `make demo`, `make demo-real`, `make test` twice, timed on one
fresh clone (benchmarks/fresh_clone.py → results/fresh_clone.json).

`BLOCKS` names the block for `render_docs.py`, which puts it between its
`<!-- generated:begin NAME -->` markers.
"""

from __future__ import annotations

from collections.abc import Callable

from render_base import RenderError, Results


def fresh_clone(r: Results) -> str:
    steps = r("fresh_clone", "steps")
    if not steps:
        raise RenderError("fresh_clone.json: no steps")
    parts = []
    for s in steps:
        minutes = s["seconds"] / 60
        what = f"`{s['command']}` {minutes:.1f} min"
        counts = s.get("pytest") or {}
        if counts.get("passed"):
            what += f" ({counts['passed']:,} passed)"
        if s["exit"] != 0:
            what += f" (FAILED, exit {s['exit']})"
        parts.append(what)
    verdict = (
        "every command passed" if r("fresh_clone", "all_passed") else "the sequence did NOT pass"
    )
    loads = [s["load_before"] for s in steps]
    return (
        f"Measured on one fresh clone of `{r('fresh_clone', 'commit')[:8]}` "
        f"({r('fresh_clone', 'machine', 'cpus')} cores, in this order, {verdict}): "
        + ", then ".join(parts)
        + f"; 1-minute load before each {min(loads):.1f}-{max(loads):.1f} "
        "(`benchmarks/fresh_clone.py`, `benchmarks/results/fresh_clone.json`)."
    )


BLOCKS: dict[str, Callable[[Results], str]] = {"fresh-clone": fresh_clone}
