"""How many places a user's settings live in: counted now and at an earlier revision (issue 34).

Counts, read from the source (not timed, so any machine gives the same numbers):

- `classes`: classes in pipeline/, grpo_core/ and flows/ whose name ends in Config, Params,
  Options, Settings or Args (every object a setting is carried in);
- `toml_files`: committed TOML settings files (data/configs/, benchmarks/; not pyproject.toml);
- `cli_options`: options of every `sieve` command, summed over commands (`--help` left out), and
  the distinct option names among them, read from the Typer app itself; `cli_option_declarations`:
  the `typer.Option(` calls written in flows/cli/ (an option generated from a settings object's
  field is not one);
- `temperature_places`: places that give a temperature a value: a class field named temperature
  whose default is a value (not None), a `temperature = ...` line in a committed TOML file under
  data/configs, an option help string that writes a temperature default out, and a call passing a
  literal `temperature=` in pipeline/, grpo_core/ or flows/;
- `max_new_tokens_files`: source files of pipeline/, grpo_core/ and flows/ naming max_new_tokens.

Run: `.venv/bin/python benchmarks/settings_sprawl.py --before c17fec5^` (the revision the issue
was filed against) writes benchmarks/results/settings_sprawl.json with both columns and the
places behind each count. `--before` checks the revision out into a temporary git worktree and
counts it with this script (the same code counts both sides).
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
PACKAGES = ("pipeline", "grpo_core", "flows")
CLASS_NAME = re.compile(r"(Config|Params|Options|Settings|Args)$")


def sources(root: Path) -> list[Path]:
    return sorted(p for pkg in PACKAGES for p in (root / pkg).rglob("*.py"))


def settings_classes(root: Path) -> list[str]:
    found = []
    for path in sources(root):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef) and CLASS_NAME.search(node.name):
                found.append(f"{path.relative_to(root)}:{node.name}")
    return found


def toml_files(root: Path) -> list[str]:
    files = [*(root / "data" / "configs").glob("*.toml"), *(root / "benchmarks").glob("*.toml")]
    return sorted(str(p.relative_to(root)) for p in files)


def _gives_value(value: ast.expr | None) -> bool:
    """A field default that is a value (not None: unset)."""
    return value is not None and not (isinstance(value, ast.Constant) and value.value is None)


def _states_temperature(text: str) -> bool:
    """An option help string that writes a temperature's default out itself."""
    return "temperature" in text.lower() and re.search(r"default:? ?\d", text) is not None


def temperature_places(root: Path) -> list[str]:
    places = []
    for path in sources(root):
        where = path.relative_to(root)
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                for item in node.body:
                    target = getattr(item, "target", None)
                    named = isinstance(target, ast.Name) and target.id == "temperature"
                    if isinstance(item, ast.AnnAssign) and named and _gives_value(item.value):
                        places.append(f"{where}:{node.name}.temperature")
            elif isinstance(node, ast.Call):
                for kw in node.keywords:
                    if kw.arg == "temperature" and isinstance(kw.value, ast.Constant):
                        places.append(f"{where}:{node.lineno} temperature={kw.value.value!r}")
                    text = kw.value.value if isinstance(kw.value, ast.Constant) else None
                    if kw.arg == "help" and isinstance(text, str) and _states_temperature(text):
                        places.append(f"{where}:{node.lineno} help {text!r}")
    for name in toml_files(root):
        if not name.startswith("data/"):
            continue
        for i, line in enumerate((root / name).read_text().splitlines(), start=1):
            if re.match(r"\s*temperature\s*=", line):
                places.append(f"{name}:{i}")
    return places


def cli_options(root: Path) -> dict[str, Any]:
    """Options per command of the Typer app at `root`, in a child process importing that tree."""
    code = (
        "import json, typer.main\n"
        "from flows.cli import app\n"
        "cmd = typer.main.get_command(app)\n"
        "rows = []\n"
        "def walk(group, prefix):\n"
        "    for name, sub in group.commands.items():\n"
        "        if hasattr(sub, 'commands'):\n"
        "            walk(sub, prefix + [name]); continue\n"
        "        for p in sub.params:\n"
        "            if p.param_type_name == 'option' and p.name != 'help':\n"
        "                rows.append([' '.join(prefix + [name]), p.opts[0], p.help or ''])\n"
        "walk(cmd, [])\n"
        "print(json.dumps(rows))\n"
    )
    env = {"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin", "HOME": str(Path.home())}
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=root, env=env, capture_output=True, text=True
    )
    if done.returncode != 0:
        raise SystemExit(f"cannot read the CLI of {root}: {done.stderr.strip().splitlines()[-1]}")
    rows = json.loads(done.stdout)
    return {"total": len(rows), "distinct": len({opt for _, opt, _ in rows})}


def _module(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(root: Path, path: Path) -> set[str]:
    """Absolute names every import of `path` reads (anywhere in it, lazy ones too)."""
    module = _module(root, path)
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(
                    [*package[: len(package) - node.level + 1], *([base] if base else [])]
                )
            out.add(base)
            out |= {f"{base}.{a.name}" for a in node.names}  # `from pkg import submodule`
    return out


def import_graph(root: Path, package: str = "pipeline") -> dict[str, set[str]]:
    """Module -> the modules of `package` it imports (a name resolved to the longest module of
    the package it starts with; a module importing itself or its own package left out)."""
    mods = {_module(root, p): p for p in sorted((root / package).rglob("*.py"))}
    graph: dict[str, set[str]] = {}
    for name, path in mods.items():
        targets = set()
        for imp in _imports(root, path):
            parts = imp.split(".")
            hit = next((".".join(parts[:k]) for k in range(len(parts), 0, -1)
                        if ".".join(parts[:k]) in mods), None)  # fmt: skip
            if hit and hit != name and not name.startswith(hit + "."):
                targets.add(hit)
        graph[name] = targets
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import circles: strongly connected groups of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(found)


def init_logic_lines(root: Path, package: str = "pipeline") -> dict[str, int]:
    """Lines of each `__init__.py` of `package` inside definitions (functions, classes)."""
    out = {}
    for path in sorted((root / package).rglob("__init__.py")):
        tree = ast.parse(path.read_text())
        n = sum(
            (node.end_lineno or node.lineno) - node.lineno + 1
            for node in tree.body
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
        )
        if n:
            out[str(path.relative_to(root))] = n
    return out


def structure(root: Path) -> dict[str, Any]:
    """pipeline/'s shape (issue 49): modules, loose modules beside folders, import edges and
    circles among its modules, logic in __init__ files, and the pipeline modules flows/cli
    imports."""
    graph = import_graph(root)
    loose = [p for p in (root / "pipeline").glob("*.py") if p.name != "__init__.py"]
    folders = [p for p in (root / "pipeline").iterdir() if (p / "__init__.py").is_file()]
    cli = set()
    for path in (root / "flows" / "cli").glob("*.py"):
        cli |= {i for i in _imports(root, path) if i.startswith("pipeline")}
    cli_modules = set(import_graph(root).keys()) & {
        ".".join(i.split(".")[:k]) for i in cli for k in range(2, len(i.split(".")) + 1)
    }
    inits = init_logic_lines(root)
    return {
        "pipeline_modules": len(graph),
        "pipeline_loose_modules": len(loose),
        "pipeline_folders": len(folders),
        "pipeline_import_edges": sum(len(v) for v in graph.values()),
        "pipeline_import_circles": len(circles(graph)),
        "pipeline_init_logic_lines": sum(inits.values()),
        "cli_pipeline_modules": len(cli_modules),
        "structure_where": {"circles": circles(graph), "init_logic": inits},
    }


def count(root: Path) -> dict[str, Any]:
    classes = settings_classes(root)
    tomls = toml_files(root)
    cli = cli_options(root)
    temps = temperature_places(root)
    tokens = [str(p.relative_to(root)) for p in sources(root) if "max_new_tokens" in p.read_text()]
    declared = sum(
        p.read_text().count("typer.Option(") for p in (root / "flows" / "cli").glob("*.py")
    )
    shape = structure(root)
    return {
        "classes": len(classes),
        "toml_files": len(tomls),
        "cli_options": cli["total"],
        "cli_option_names": cli["distinct"],
        "cli_option_declarations": declared,
        "temperature_places": len(temps),
        "max_new_tokens_files": len(tokens),
        **{k: v for k, v in shape.items() if k != "structure_where"},
        "where": {
            "classes": classes,
            "toml_files": tomls,
            "temperature_places": temps,
            **shape["structure_where"],
        },
    }


def count_revision(rev: str) -> tuple[str, dict[str, Any]]:
    sha = subprocess.run(
        ["git", "rev-parse", "--short", rev], cwd=ROOT, check=True, capture_output=True, text=True
    ).stdout.strip()
    with tempfile.TemporaryDirectory() as tmp:
        tree = Path(tmp) / "tree"
        subprocess.run(["git", "worktree", "add", "--detach", "-q", str(tree), sha], cwd=ROOT,
                       check=True)  # fmt: skip
        try:
            return sha, count(tree)
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(tree)], cwd=ROOT,
                           check=True)  # fmt: skip


def dirty() -> bool:
    """Whether the counted source differs from HEAD (results files aside)."""
    status = subprocess.run(
        ["git", "status", "--porcelain", "--", *PACKAGES, "data/configs"], cwd=ROOT,
        check=True, capture_output=True, text=True,
    ).stdout  # fmt: skip
    return bool(status.strip())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", default="c17fec5^", help="the revision to compare with")
    args = parser.parse_args()
    head = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, check=True, capture_output=True,
        text=True,
    ).stdout.strip()  # fmt: skip
    before_rev, before = count_revision(args.before)
    now = count(ROOT)
    keys = [k for k in now if k != "where"]
    report = {
        "benchmark": "settings_sprawl",
        "before": {"revision": before_rev, **before},
        "now": {"revision": head + (" + working tree" if dirty() else ""), **now},
        "change": {k: now[k] - before[k] for k in keys},
    }
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / "settings_sprawl.json"
    out.write_text(json.dumps(report, indent=1) + "\n")
    for k in keys:
        print(f"{k:22} {before[k]:>4} -> {now[k]:>4}")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
