"""What every page module of the docs renderer shares: results files with keyed access, the one
error type, and the number formats and Markdown tables the blocks are written with.

`Results(folder)` reads `folder/NAME.json` once per name; `r("curriculum", "final", "sieve")` is
one value, and a missing file or key is a `RenderError` naming both. `Results.root` is the
repository the pages and the code belong to (blocks generated from the code read it).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


class RenderError(Exception):
    """A page or a results file the renderer cannot use; the message is one line."""


class Keyed(dict[str, Any]):
    """A JSON object that names its file and key path when a key is missing."""

    def __init__(self, items: dict[str, Any], where: tuple[str, ...]) -> None:
        super().__init__(items)
        self.where = where

    def __missing__(self, key: str) -> Any:
        path = ".".join([*self.where[1:], str(key)])
        raise RenderError(f"{self.where[0]}.json: no key {path!r}")


class KeyedList(list[Any]):
    """A JSON array that names its file and key path when an index is missing."""

    def __init__(self, items: list[Any], where: tuple[str, ...]) -> None:
        super().__init__(items)
        self.where = where

    def __getitem__(self, index: Any) -> Any:
        try:
            return super().__getitem__(index)
        except IndexError:
            path = ".".join([*self.where[1:], str(index)])
            raise RenderError(f"{self.where[0]}.json: no key {path!r}") from None


def keyed(value: Any, where: tuple[str, ...]) -> Any:
    """Wrap every object and array of a parsed JSON value so a missing key is a clear error."""
    if isinstance(value, dict):
        return Keyed({k: keyed(v, (*where, k)) for k, v in value.items()}, where)
    if isinstance(value, list):
        return KeyedList([keyed(v, (*where, str(i))) for i, v in enumerate(value)], where)
    return value


class Results:
    """The JSON files of one results folder, read once each, with keyed access."""

    def __init__(self, folder: Path, root: Path = ROOT) -> None:
        self.folder = folder
        self.root = root
        self._cache: dict[str, Any] = {}

    def __call__(self, name: str, *path: str | int) -> Any:
        """`r("curriculum", "final", "sieve")`: one value, or an error naming file and key."""
        value = self._load(name)
        for i, key in enumerate(path):
            if not isinstance(value, Keyed | KeyedList):
                where = ".".join(str(k) for k in path[: i + 1])
                raise RenderError(f"{name}.json: no key {where!r}")
            container: Any = value  # a Keyed raises RenderError on a missing key
            value = container[key]
        return value

    def _load(self, name: str) -> Any:
        if name not in self._cache:
            path = self.folder / f"{name}.json"
            if not path.is_file():
                raise RenderError(f"no results file {path}")
            try:
                self._cache[name] = keyed(json.loads(path.read_text()), (name,))
            except json.JSONDecodeError as e:
                raise RenderError(f"{path}: not JSON ({e})") from None
        return self._cache[name]


def num(x: float, digits: int = 0) -> str:
    """Thousands-grouped number: 31352 -> '31,352', num(0.4375, 3) -> '0.438'."""
    return f"{x:,.{digits}f}"


def pts(x: float, digits: int = 1) -> str:
    """A change in accuracy (a fraction) as signed points: 0.0389 -> '+3.9', -0.05 -> '−5.0'."""
    value = round(100 * x, digits)
    if value == 0:
        return f"{0:.{digits}f}"
    return f"{value:+.{digits}f}".replace("-", "−")


def times(x: float, digits: int = 2) -> str:
    return f"{x:.{digits}f}×"


def table(header: Iterable[str], rows: Iterable[Iterable[str]]) -> str:
    head = list(header)
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def binomial_halfwidth(p: float, n: int) -> float:
    """Two standard errors of a share p over n independent draws (a rough noise scale)."""
    return 2 * math.sqrt(max(p * (1 - p), 0.0) / n)
