"""The import layers cli -> flows -> pipeline -> grpo_core, checked by parsing, not importing.

Every module under grpo_core/, pipeline/ and flows/ is parsed with `ast`, and every import in
it is checked wherever it sits (top level, inside a function or class, under `if
TYPE_CHECKING:` or `try:`): `import x`, `import x.y as z`, `from x import y`, `from x.y import
z`, relative imports resolved against the module's package, and `importlib.import_module` /
`__import__` called with a literal name. `grpo_core` may import neither `pipeline` nor `flows`,
and `pipeline` may not import `flows`; a failure lists each offending import as file:line.
The self-tests run the checker on violating snippets, so the check cannot pass by finding
nothing.

Test: `.venv/bin/pytest tests/test_layers.py -q`.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# each layer and the layers above it, which it must not import
FORBIDDEN: dict[str, tuple[str, ...]] = {
    "grpo_core": ("pipeline", "flows"),
    "pipeline": ("flows",),
    "flows": (),
}


def module_name(path: Path) -> str:
    """`pipeline/store/ledger.py` -> `pipeline.store.ledger`; a package's `__init__` -> itself."""
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _from_base(node: ast.ImportFrom, module: str, is_package: bool) -> str:
    """The absolute module a `from ... import` reads from (relative levels resolved)."""
    if node.level == 0:
        return node.module or ""
    package = module.split(".") if is_package else module.split(".")[:-1]
    base = package[: len(package) - node.level + 1]
    return ".".join([*base, *([node.module] if node.module else [])])


def imported_names(tree: ast.AST, module: str, is_package: bool) -> Iterator[tuple[int, str]]:
    """(line, absolute module name) of every import anywhere in `tree`."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):  # `from pkg import sub`: sub is inside pkg
            yield node.lineno, _from_base(node, module, is_package)
        elif isinstance(node, ast.Call) and _is_dynamic_import(node.func) and node.args:
            arg = node.args[0]
            if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                yield node.lineno, arg.value


def _is_dynamic_import(func: ast.expr) -> bool:
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
    return name in ("import_module", "__import__")


def violations(source: str, path: str, module: str, is_package: bool = False) -> list[str]:
    """`path:line: <module> imports <name> (<layer> must not import <upper>)`, one per import
    statement (one per name for `import a, b`)."""
    layer = module.split(".")[0]
    found = []
    for line, name in imported_names(ast.parse(source, path), module, is_package):
        upper = name.split(".")[0]
        if upper in FORBIDDEN.get(layer, ()):
            found.append(
                f"{path}:{line}: {module} imports {name} ({layer} must not import {upper})"
            )
    return found


def layer_modules() -> list[Path]:
    return sorted(p for layer in FORBIDDEN for p in (ROOT / layer).rglob("*.py"))


def test_no_module_imports_a_layer_above_its_own() -> None:
    paths = layer_modules()
    per_layer = {
        layer: sum(p.relative_to(ROOT).parts[0] == layer for p in paths) for layer in FORBIDDEN
    }
    assert all(n > 0 for n in per_layer.values()), per_layer  # the walk found every package
    found = [
        v
        for p in paths
        for v in violations(
            p.read_text(), str(p.relative_to(ROOT)), module_name(p), p.name == "__init__.py"
        )
    ]
    assert not found, "imports against cli -> flows -> pipeline -> grpo_core:\n" + "\n".join(found)


BAD = [
    ("grpo_core/x.py", "import flows\n", "grpo_core/x.py:1: grpo_core.x imports flows"),
    (
        "grpo_core/x.py",
        "import os\nimport pipeline.store as s\n",
        ":2: grpo_core.x imports pipeline",
    ),
    ("grpo_core/x.py", "from pipeline import store\n", ":1: grpo_core.x imports pipeline"),
    ("pipeline/x.py", "from flows.curate import curate\n", ":1: pipeline.x imports flows.curate"),
    (
        "pipeline/a/x.py",
        "def f():\n    from flows import nightly\n",
        ":2: pipeline.a.x imports flows",
    ),
    (
        "pipeline/x.py",
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from flows.cli import app\n",
        ":3: pipeline.x imports flows.cli",
    ),
    (
        "grpo_core/x.py",
        "class A:\n    def m(self):\n        try:\n            import pipeline\n"
        "        except ImportError:\n            pass\n",
        ":4: grpo_core.x imports pipeline",
    ),
    (
        "pipeline/x.py",
        "import importlib\nmod = importlib.import_module('flows.train')\n",
        ":2: pipeline.x imports flows.train",
    ),
]


@pytest.mark.parametrize(("path", "source", "needle"), BAD)
def test_the_checker_catches_an_import_against_the_layers(
    path: str, source: str, needle: str
) -> None:
    found = violations(source, path, module_name(ROOT / path))
    assert len(found) >= 1 and needle in found[0], found


@pytest.mark.parametrize(
    ("path", "source"),
    [
        ("flows/x.py", "from pipeline.store import Ledger\nimport grpo_core.trainer\n"),
        ("pipeline/x.py", "import grpo_core\nfrom pipeline import store\nimport flowsy\n"),
        ("pipeline/x.py", "from grpo_core.flows import x\nfrom .flows import y\n"),
        ("grpo_core/x.py", "from . import advantages\nfrom .kl import k3\n"),
    ],
)
def test_the_checker_allows_imports_down_the_layers(path: str, source: str) -> None:
    assert violations(source, path, module_name(ROOT / path)) == []


def test_relative_imports_are_resolved_against_the_package() -> None:
    tree = ast.parse("from ..store import Ledger\nfrom . import rules\n")
    names = [n for _, n in imported_names(tree, "pipeline.selection.config", False)]
    assert names == ["pipeline.store", "pipeline.selection"]
    package = [n for _, n in imported_names(ast.parse("from . import x\n"), "pipeline.store", True)]
    assert package == ["pipeline.store"]
