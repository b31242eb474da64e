"""The generated blocks of docs/architecture.md, all read from the code itself.

- `modules`: every module of grpo_core/, pipeline/ and flows/ with the first sentence of its
  docstring, folder by folder (a package's own docstring heads its folder);
- `settings-objects`: every settings class (the classes `benchmarks/settings_sprawl.py` counts),
  where it is, how many fields it has and the first sentence of its docstring;
- `pipeline-layers`: each package of pipeline/, the pipeline packages it may import
  (`PIPELINE_LAYERS` in tests/test_layers.py, which checks every import against it) and the
  first sentence of its docstring;
- `settings-sprawl` and `pipeline-shape`: `benchmarks/settings_sprawl.py`'s counts, the "now"
  column counted from the code at render time (so `make docs-check` fails when the code moved
  and the page did not) and the earlier revision's column read from its results file;
- `train-job`: the same script's run-time counts of one `sieve train --config F` both
  columns read from its results file (a training run is not repeated at render time).

The code is parsed, never imported, except for the CLI option counts, which settings_sprawl.py
reads from the Typer app in a child process.
"""

from __future__ import annotations

import ast
import importlib.util
import re
from collections.abc import Callable, Iterator
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any

from render_base import RenderError, Results, table

PACKAGES = ("grpo_core", "pipeline", "flows")
NO_DOCSTRING = "*(no docstring)*"
# a sentence ends at . ! or ? followed by a space and a capital, a backtick or an opening bracket
_SENTENCE_END = re.compile(r"(?<!e\.g\.)(?<!i\.e\.)(?<=[.!?])\s+(?=[A-Z`(*\"])")


def first_sentence(doc: str | None) -> str:
    """The first sentence of a docstring's first paragraph, on one line."""
    if not doc:
        return NO_DOCSTRING
    paragraph = " ".join(doc.strip().split("\n\n")[0].split())
    end = _SENTENCE_END.search(paragraph)
    return paragraph[: end.start()] if end else paragraph


def _docstring(path: Path) -> str | None:
    return ast.get_docstring(ast.parse(path.read_text(encoding="utf-8")))


def _folders(root: Path) -> Iterator[Path]:
    """Every package folder of PACKAGES, each package before its subpackages."""
    for package in PACKAGES:
        top = root / package
        yield top
        yield from sorted(p.parent for p in top.rglob("*/__init__.py"))


def modules(r: Results) -> str:
    """Each package folder in bold with its purpose, then one line per module in it."""
    parts = []
    for folder in _folders(r.root):
        init = folder / "__init__.py"
        if not init.is_file():
            raise RenderError(f"{folder.relative_to(r.root)}: not a package (no __init__.py)")
        name = folder.relative_to(r.root).as_posix()
        items = [
            f"- `{path.name}` — {first_sentence(_docstring(path))}"
            for path in sorted(folder.glob("*.py"))
            if path.name != "__init__.py"
        ]
        head = f"**`{name}/`** — {first_sentence(_docstring(init))}"
        parts.append(head + ("\n\n" + "\n".join(items) if items else ""))
    return "\n\n".join(parts)


@cache
def _sprawl_module(root: Path) -> ModuleType:
    """benchmarks/settings_sprawl.py of the tree at `root`, loaded as a module (not a package)."""
    path = root / "benchmarks" / "settings_sprawl.py"
    spec = importlib.util.spec_from_file_location("settings_sprawl", path)
    if spec is None or spec.loader is None or not path.is_file():
        raise RenderError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@cache
def counted_now(root: Path) -> dict[str, Any]:
    """settings_sprawl's counts of the code at `root` (once per render)."""
    try:
        return dict(_sprawl_module(root).count(root))
    except SystemExit as e:  # settings_sprawl's one-line refusal (e.g. the CLI does not import)
        raise RenderError(f"benchmarks/settings_sprawl.py: {e}") from None


def _before_and_now(r: Results, labels: dict[str, str], title: str) -> str:
    now = counted_now(r.root)
    before = r("settings_sprawl", "before", "revision")
    rows = [
        [text, str(r("settings_sprawl", "before", key)), str(now[key])]
        for key, text in labels.items()
    ]
    return table([title, f"at {before}", "now (counted from the code)"], rows)


def settings_sprawl(r: Results) -> str:
    """Where settings live: before settings were unified, and in the code now."""
    labels = {
        "classes": "settings classes (…Config/Params/Options/Settings/Args)",
        "toml_files": "committed TOML settings files",
        "cli_options": "CLI options, summed over commands",
        "cli_option_names": "distinct CLI option names",
        "cli_option_declarations": "CLI options written by hand (`typer.Option(`)",
        "home_undecided_commands": "commands whose `--home` is not decided in its option",
        "temperature_places": "places in the code that give a temperature a value",
        "temperature_recipe_values": "committed recipes that set a temperature",
        "max_new_tokens_files": "source files naming max_new_tokens",
    }
    return _before_and_now(r, labels, "count")


def pipeline_shape(r: Results) -> str:
    """pipeline/'s shape: modules, folders, import edges, circles and imports against
    the layers, __init__ logic, then each circle and each import against the layers found now."""
    labels = {
        "pipeline_modules": "modules in pipeline/",
        "pipeline_loose_modules": "modules loose in pipeline/ beside its folders",
        "pipeline_folders": "folders (packages) in pipeline/",
        "pipeline_import_edges": "import edges between pipeline modules",
        "pipeline_import_circles": "import circles among pipeline modules",
        "pipeline_layer_violations": "imports against pipeline's layers (module to module)",
        "pipeline_init_logic_lines": "lines of functions and classes in pipeline's `__init__.py`",
        "cli_pipeline_modules": "pipeline modules that flows/cli/ imports",
        "cli_commands": "`sieve` commands",
        "cli_job_calls": "calls from the commands into flows/ and pipeline/, summed",
        "cli_commands_over_one_job": "commands that make more than one such call",
    }
    body = _before_and_now(r, labels, "pipeline/ and the CLI above it")
    found = counted_now(r.root)["where"]["circles"]
    circles = "; ".join(" → ".join(f"`{m}`" for m in group) for group in found) or "none"
    against = counted_now(r.root)["where"]["layer_violations"]
    upward = "; ".join(f"`{edge}`" for edge in against) or "none"
    calls = counted_now(r.root)["where"]["cli_job_calls"]
    thick = "; ".join(
        f"`sieve {cmd}` ({', '.join(f'`{c}`' for c in found)})"
        for cmd, found in calls.items()
        if len(found) > 1
    )
    return (
        body + f"\n\nImports against the layers in the code now: {upward}."
        f"\n\nImport circles in the code now: {circles}."
        f"\n\nCommands that call more than one job now: {thick or 'none'}."
    )


def pipeline_layers(r: Results) -> str:
    """pipeline/'s packages bottom to top, what each may import, what each holds."""
    layers = _sprawl_module(r.root).pipeline_layers()
    rows = []
    for package, allowed in layers.items():
        init = r.root / "pipeline" / package / "__init__.py"
        if not init.is_file():
            raise RenderError(f"PIPELINE_LAYERS names {package}, which pipeline/ does not hold")
        may = ", ".join(f"`{a}`" for a in allowed) or "no other pipeline package"
        rows.append([f"`{package}/`", may, first_sentence(_docstring(init))])
    return table(["package", "may import", "what it holds"], rows)


def train_job(r: Results) -> str:
    """One `sieve train --config F` on the tiny policy, counted while it runs (issue 49: a train
    job resolved once), at the revision the work started from and at the one counted last."""
    labels = {
        "grpo_config_constructions": "`GRPOConfig` objects built",
        "home_decisions": "times the home is decided (`resolve_home` given none)",
        "home_resolutions": "`resolve_home` calls (a decided home passed down included)",
        "config_reads": "reads of the `--config` file",
        "recipe_loads": "recipe files loaded (`load_settings`)",
        "recipe_choices": "recipes chosen (`recipe_for`, `given_recipe`)",
        "curriculum_resolutions": "curriculum ids resolved (`resolve_curriculum`)",
    }
    sides = ("before", "now")
    revisions = [str(r("settings_sprawl", "train_job", side, "revision")) for side in sides]
    rows = [
        [text, *(str(r("settings_sprawl", "train_job", side, key)) for side in sides)]
        for key, text in labels.items()
    ]
    return table(["while one `sieve train --config F` runs", *(f"at {v}" for v in revisions)], rows)


def _fields(cls: ast.ClassDef) -> int:
    """Annotated fields of a settings class (constants in capitals, ClassVars and private
    attributes, named with a leading underscore, left out)."""
    return sum(
        1
        for item in cls.body
        if isinstance(item, ast.AnnAssign)
        and isinstance(item.target, ast.Name)
        and not item.target.id.isupper()
        and not item.target.id.startswith("_")
        and "ClassVar" not in ast.unparse(item.annotation)
    )


def settings_objects(r: Results) -> str:
    """Every settings class: name, file, field count, the first sentence of its docstring."""
    rows = []
    for where in counted_now(r.root)["where"]["classes"]:
        path, name = where.split(":")
        tree = ast.parse((r.root / path).read_text(encoding="utf-8"))
        cls = next(
            (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == name), None
        )
        if cls is None:
            raise RenderError(f"{path}: no class {name}")
        rows.append(
            [f"`{name}`", f"`{path}`", str(_fields(cls)), first_sentence(ast.get_docstring(cls))]
        )
    return table(["object", "file", "fields", "what it holds"], rows)


def shape_limits(r: Results) -> str:
    """The product's shape against its limits, counted by tests/architecture/shape.py (which
    tests/architecture/test_shape.py holds to them): what is over a limit, per item."""
    path = r.root / "tests" / "architecture" / "shape.py"
    spec = importlib.util.spec_from_file_location("shape", path)
    if spec is None or spec.loader is None or not path.is_file():
        raise RenderError(f"cannot load {path}")
    shape = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(shape)
    c = shape.counts(r.root)

    def over(items: dict[str, int]) -> str:
        if not items:
            return "none"
        return ", ".join(f"`{k}` ({v})" for k, v in sorted(items.items()))

    sql = c["sql_outside_store"]
    rows = [
        ("folders of pipeline/ and flows/ over 12 modules", over(c["folders_over_limit"])),
        ("product files over 600 lines (grpo_core: 400)", over(c["files_over_limit"])),
        (f"modules with SQL outside pipeline/store ({sum(sql.values())} statements)", over(sql)),
        ('"issue N" in product code, README and manual pages', over(c["issue_references"])),
        ("README lines (limit 150)", str(c["readme_lines"])),
    ]
    return "| limit | over it now |\n|---|---|\n" + "\n".join(f"| {a} | {b} |" for a, b in rows)


BLOCKS: dict[str, Callable[[Results], str]] = {
    "shape-limits": shape_limits,
    "modules": modules,
    "settings-objects": settings_objects,
    "pipeline-layers": pipeline_layers,
    "settings-sprawl": settings_sprawl,
    "pipeline-shape": pipeline_shape,
    "train-job": train_job,
}
