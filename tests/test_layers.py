"""The import layers cli -> flows -> pipeline -> grpo_core, and the layers inside pipeline/,
checked by parsing, not importing.

Every module under grpo_core/, pipeline/ and flows/ is parsed with `ast`, and every import in
it is checked wherever it sits (top level, inside a function or class, under `if
TYPE_CHECKING:` or `try:`): `import x`, `import x.y as z`, `from x import y`, `from x.y import
z`, relative imports resolved against the module's package, and `importlib.import_module` /
`__import__` called with a literal name. `grpo_core` may import neither `pipeline` nor `flows`,
and `pipeline` may not import `flows`; a failure lists each offending import as file:line.

Inside pipeline/, every module sits in a package (no module loose beside the folders), and each
package imports only the pipeline packages `PIPELINE_LAYERS` lists for it (a package may import
itself freely): plumbing (`core`) at the bottom, then the ledger (`store`), the verifiers
(`scoring`), the problem families (`problems`, which name their verifiers), the policy's files
(`policy`), the samplers (`sampling`, which load a policy), the selection rules (`selection`,
over problem mixes and sampling settings) and the adapters for other trainers (`integrations`,
which run the selection inside them and name their weights by the policy's revision), and the
jobs on top (`jobs`, which may import all of them and each other). The pipeline modules'
imports form no circle. `benchmarks/settings_sprawl.py` counts the imports against this table
(the `pipeline-shape` table of docs/architecture.md, which also shows the table itself).

The self-tests run the checkers on violating snippets, so no check can pass by finding nothing.

Test: `.venv/bin/pytest tests/test_layers.py -q`.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.grpo_core.test_layering import cycles  # the circle finder grpo_core uses

ROOT = Path(__file__).resolve().parents[1]
# each layer and the layers above it, which it must not import
FORBIDDEN: dict[str, tuple[str, ...]] = {
    "grpo_core": ("pipeline", "flows"),
    "pipeline": ("flows",),
    "flows": (),
}
# each package of pipeline/ and the other pipeline packages it may import, bottom to top
PIPELINE_LAYERS: dict[str, tuple[str, ...]] = {
    "core": (),  # plumbing: errors, the home, progress hooks, child processes, TOML files, outputs
    "store": ("core",),  # the DuckDB ledger
    "scoring": ("core",),  # the verifiers
    "problems": ("core", "scoring"),  # problem families, each naming its verifier
    "policy": ("core",),  # model folders, the tiny policy, prompt rendering
    "sampling": ("core", "policy"),  # sampling backends (hf loads a policy folder)
    "selection": ("core", "problems", "sampling"),  # group stats, posterior, rules, curriculum
    # adapters for TRL, verl, dataset cards; the posterior's selection inside their trainers
    "integrations": ("core", "store", "scoring", "policy", "selection"),
    # the jobs (curation, training, evaluation, export, the report, ...): any package below
    "jobs": (
        "core",
        "store",
        "scoring",
        "problems",
        "policy",
        "sampling",
        "selection",
        "integrations",
    ),
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


def imported_names(
    tree: ast.AST, module: str, is_package: bool, members: bool = False
) -> Iterator[tuple[int, str]]:
    """(line, absolute module name) of every import anywhere in `tree`; with `members`, a `from x
    import a, b` gives `x.a` and `x.b` (a submodule or a name of x) instead of `x`."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):  # `from pkg import sub`: sub is inside pkg
            base = _from_base(node, module, is_package)
            if members:
                for alias in node.names:
                    yield node.lineno, f"{base}.{alias.name}"
            else:
                yield node.lineno, base
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


def pipeline_package(module: str) -> str | None:
    """`pipeline.jobs.report.page` -> `jobs`; None for `pipeline` itself and names outside it."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[0] == "pipeline" else None


def pipeline_violations(source: str, path: str, module: str, is_package: bool = False) -> list[str]:
    """`path:line: <module> imports <name> (<package> may import ...)`, one per imported name
    against PIPELINE_LAYERS; a module that sits in no package of the table is one violation."""
    own = pipeline_package(module)
    if own is None:
        return []
    allowed = PIPELINE_LAYERS.get(own)
    if allowed is None:
        where = "loose in pipeline/" if module.count(".") == 1 else f"in pipeline/{own}/"
        return [f"{path}:1: {module} sits {where}, which PIPELINE_LAYERS does not place"]
    found = []
    for line, name in imported_names(ast.parse(source, path), module, is_package, members=True):
        other = pipeline_package(name)
        if other is None or other == own or other.startswith("__"):
            continue
        if other not in allowed:
            may = ", ".join(allowed) or "no other pipeline package"
            found.append(f"{path}:{line}: {module} imports {name} ({own} may import {may})")
    return found


def pipeline_graph(modules: dict[str, str]) -> dict[str, set[str]]:
    """Module -> the pipeline modules it imports, from {module: source} (a package's source
    keyed by the package); a name resolves to the longest module it starts with, a module's
    imports of itself and of its own packages left out."""
    graph: dict[str, set[str]] = {}
    for module, source in modules.items():
        is_package = any(m.startswith(module + ".") for m in modules)
        tree = ast.parse(source)
        targets = set()
        for _, name in imported_names(tree, module, is_package, members=True):
            parts = name.split(".")
            hit = next(
                (".".join(parts[:k]) for k in range(len(parts), 0, -1)
                 if ".".join(parts[:k]) in modules),
                None,
            )  # fmt: skip
            if hit and hit != module and not module.startswith(hit + "."):
                targets.add(hit)
        graph[module] = targets
    return graph


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


def pipeline_sources() -> dict[str, str]:
    return {module_name(p): p.read_text() for p in sorted((ROOT / "pipeline").rglob("*.py"))}


def test_every_pipeline_package_is_placed_and_imports_only_the_layers_below() -> None:
    paths = sorted((ROOT / "pipeline").rglob("*.py"))
    packages = {pipeline_package(module_name(p)) for p in paths} - {None}
    assert packages == set(PIPELINE_LAYERS), packages ^ set(PIPELINE_LAYERS)
    found = [
        v
        for p in paths
        for v in pipeline_violations(
            p.read_text(), str(p.relative_to(ROOT)), module_name(p), p.name == "__init__.py"
        )
    ]
    assert not found, "imports against pipeline's layers (PIPELINE_LAYERS):\n" + "\n".join(found)


def test_pipeline_layers_are_ordered_bottom_to_top() -> None:
    """Each package may import only packages listed before it, so the table itself has no
    circle."""
    order = list(PIPELINE_LAYERS)
    for package, allowed in PIPELINE_LAYERS.items():
        assert all(order.index(a) < order.index(package) for a in allowed), package


def test_pipeline_modules_import_in_no_circle() -> None:
    graph = pipeline_graph(pipeline_sources())
    assert len(graph) > 50 and sum(map(len, graph.values())) > 100  # the walk found the imports
    assert cycles(graph) == []


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


PIPELINE_BAD = [
    ("pipeline/core/x.py", "from pipeline.store import Ledger\n", ":1: pipeline.core.x imports"),
    (
        "pipeline/store/x.py",
        "def f():\n    from pipeline.jobs import curate\n",
        ":2: pipeline.store.x imports pipeline.jobs.curate (store may import core)",
    ),
    ("pipeline/scoring/x.py", "from ..problems import rg\n", "imports pipeline.problems.rg"),
    ("pipeline/sampling/x.py", "from pipeline import store\n", "imports pipeline.store"),
    (
        "pipeline/problems/x.py",
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
        "    from pipeline.selection.config import CurateConfig\n",
        ":3: pipeline.problems.x imports pipeline.selection.config",
    ),
    (
        "pipeline/policy/x.py",
        "import importlib\nm = importlib.import_module('pipeline.sampling.hf')\n",
        ":2: pipeline.policy.x imports pipeline.sampling.hf",
    ),
    ("pipeline/x.py", "import os\n", "pipeline.x sits loose in pipeline/"),
    ("pipeline/extra/x.py", "import os\n", "pipeline.extra.x sits in pipeline/extra/"),
    ("pipeline/core/x.py", "import pipeline.jobs.report.page\n", "imports pipeline.jobs.report"),
]


@pytest.mark.parametrize(("path", "source", "needle"), PIPELINE_BAD)
def test_the_checker_catches_an_import_against_pipelines_layers(
    path: str, source: str, needle: str
) -> None:
    found = pipeline_violations(source, path, module_name(ROOT / path))
    assert len(found) == 1 and needle in found[0], found


@pytest.mark.parametrize(
    ("path", "source"),
    [
        ("pipeline/jobs/x.py", "from pipeline.core.errors import E\nfrom pipeline import store\n"),
        ("pipeline/jobs/report/x.py", "from pipeline.jobs import audit\nfrom .. import export\n"),
        ("pipeline/sampling/x.py", "from pipeline.policy.model import m\nfrom . import base\n"),
        ("pipeline/problems/x.py", "import pipeline.scoring.code\nimport grpo_core.seeds\n"),
        ("pipeline/core/x.py", "from . import errors\nimport pipelines.other\n"),
        ("flows/x.py", "from pipeline.jobs import curate\n"),
    ],
)
def test_the_checker_allows_imports_down_pipelines_layers(path: str, source: str) -> None:
    assert pipeline_violations(source, path, module_name(ROOT / path)) == []


def test_the_circle_finder_finds_a_circle_through_lazy_and_relative_imports() -> None:
    modules = {
        "pipeline.jobs.a": "from pipeline.jobs.b import f\n",
        "pipeline.jobs.b": "def g():\n    from . import c\n",
        "pipeline.jobs.c": "import pipeline.jobs.a\n",
        "pipeline.jobs.d": "from pipeline.jobs import a\n",
    }
    graph = pipeline_graph(modules)
    assert graph["pipeline.jobs.b"] == {"pipeline.jobs.c"}
    assert cycles(graph) == [["pipeline.jobs.a", "pipeline.jobs.b", "pipeline.jobs.c"]]
    del modules["pipeline.jobs.c"]
    assert cycles(pipeline_graph(modules)) == []


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
