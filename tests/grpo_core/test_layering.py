"""grpo_core's layering, read from the source with `ast`: no import circle among its modules
(imports under `if TYPE_CHECKING:` and inside functions count), and only a handful of functions
outside `grpo_core/trainer.py` take the `Trainer` itself (the rest take `grpo_core.state.
TrainerState`, the `grpo_core.types.Rollouts` protocol or plain objects).

The helpers are tested on made-up sources too, so the two checks are known to be able to fail.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Mapping
from pathlib import Path

import grpo_core

PACKAGE = Path(grpo_core.__file__).parent
MAX_TRAINER_TAKERS = 5


def grpo_imports(tree: ast.Module, modules: set[str]) -> set[str]:
    """The grpo_core modules a module's tree imports anywhere (TYPE_CHECKING blocks included)."""
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {a.name.split(".")[1] for a in node.names if a.name.startswith("grpo_core.")}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module == "grpo_core":  # `from grpo_core import fsdp`
                found |= {a.name for a in node.names if a.name in modules}
            elif node.module.startswith("grpo_core."):
                found.add(node.module.split(".")[1])
        elif isinstance(node, ast.ImportFrom) and node.level == 1:  # `from .fsdp import x`
            if node.module:
                found.add(node.module.split(".")[0])
            else:
                found |= {a.name for a in node.names if a.name in modules}
    return found & modules


def graph(sources: Mapping[str, str]) -> dict[str, set[str]]:
    """Module name -> the package modules it imports (itself left out)."""
    names = set(sources)
    return {m: grpo_imports(ast.parse(text), names) - {m} for m, text in sources.items()}


def cycles(g: Mapping[str, set[str]]) -> list[list[str]]:
    """The import circles: each strongly connected group of two or more modules, sorted
    (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(g.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for v in sorted(g):
        if v not in index:
            visit(v)
    return sorted(found)


def _names(annotation: ast.expr | None) -> Iterator[str]:
    """Every name an annotation mentions; a string annotation is parsed first."""
    if annotation is None:
        return
    if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
        annotation = ast.parse(annotation.value, mode="eval").body
    for node in ast.walk(annotation):
        if isinstance(node, ast.Name):
            yield node.id
        elif isinstance(node, ast.Attribute):
            yield node.attr
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            yield from _names(node)


def trainer_takers(module: str, text: str) -> list[str]:
    """`module.function` for each function (nested ones too) with a parameter annotated as
    the `Trainer` (alone, optional or inside another type)."""
    out = []
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            a = node.args
            params = [*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg]
            if any("Trainer" in _names(p.annotation) for p in params if p is not None):
                out.append(f"{module}.{node.name}")
    return sorted(out)


def package_sources() -> dict[str, str]:
    return {p.stem: p.read_text() for p in sorted(PACKAGE.glob("*.py"))}


# ---------------------------------------------------------------- the package


def test_grpo_core_has_no_import_circle() -> None:
    g = graph(package_sources())
    assert {"trainer", "state", "fsdp", "distributed", "types"} <= g.keys()
    assert "state" in g["trainer"]  # the graph is read: the trainer does import its state
    assert cycles(g) == []


def test_few_functions_outside_the_trainer_take_it() -> None:
    takers = [
        f for m, text in package_sources().items() if m != "trainer"
        for f in trainer_takers(m, text)
    ]  # fmt: skip
    assert len(takers) <= MAX_TRAINER_TAKERS, takers


# ---------------------------------------------------------------- the helpers can fail


def test_a_type_checking_import_closes_a_circle() -> None:
    sources = {
        "a": "from grpo_core import b\n",
        "b": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from grpo_core.c import X\n",
        "c": "def f():\n    import grpo_core.a\n",
        "d": "from grpo_core.a import y\nfrom grpo_core import torch_thing\n",
    }
    g = graph(sources)
    assert g == {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(g) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set(), "c": {"a", "b"}}) == []
    assert cycles({"x": {"y"}, "y": {"x"}, "p": {"q"}, "q": {"p"}}) == [["p", "q"], ["x", "y"]]


def test_trainer_takers_sees_every_spelling_of_the_annotation() -> None:
    text = (
        "def a(t: Trainer, step: int): ...\n"
        "def b(t: 'Trainer'): ...\n"
        "def c(*, t: trainer.Trainer | None = None): ...\n"
        "def d(ts: list[Trainer]): ...\n"
        "def outer(x: int):\n    def inner(t: Trainer): ...\n"
        "def e(t: TrainerState, h: TrainerHooks) -> Trainer: ...\n"
    )
    assert trainer_takers("m", text) == ["m.a", "m.b", "m.c", "m.d", "m.inner"]
