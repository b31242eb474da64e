"""How many places a user's settings live in: counted now and at an earlier revision (issue 34).

Counts, read from the source (not timed, so any machine gives the same numbers):

- `classes`: classes in pipeline/, grpo_core/ and flows/ whose name ends in Config, Params,
  Options, Settings or Args (every object a setting is carried in);
- `toml_files`: committed TOML settings files (data/configs/, benchmarks/; not pyproject.toml);
- `cli_options`: options of every `sieve` command, summed over commands (`--help` left out), and
  the distinct option names among them, read from the Typer app itself; `cli_option_declarations`:
  the `typer.Option(` calls written in flows/cli/ (an option generated from a settings object's
  field is not one); `home_undecided_commands`: commands whose `--home` hands them the value as
  given instead of the home it decided (`decided_home`), so the home is read again below them
  (issue 49 point 2's target: 0);
- `temperature_places`: places in the code that give a temperature a value: a class field named
  temperature whose default is a value (not None), an option help string that writes a
  temperature default out, and a call passing a literal `temperature=` in pipeline/, grpo_core/
  or flows/ (issue 49's target: 1, the trainer's default that every unset sampling takes);
  `temperature_recipe_values`: the `temperature = ...` lines of the committed TOML recipes under
  data/configs (a recipe choosing its temperature is what a recipe is for, so they are counted
  apart);
- `max_new_tokens_files`: source files of pipeline/, grpo_core/ and flows/ naming max_new_tokens.

pipeline/'s shape (issue 49 point 3), from every import of its modules (lazy ones too): its
modules, those loose beside its folders, its folders, the import edges between its modules, the
circles among them, the lines of logic in its `__init__.py` files, the pipeline modules flows/cli
imports, and `pipeline_layer_violations`: the import edges from a module of one pipeline package
to one of another that the layering forbids (`PIPELINE_LAYERS` in tests/test_layers.py, the one
definition; a module of a tree from before the packages `core/` and `jobs/` existed is placed
where it moved, `MOVED`, so an earlier revision is counted against the same layers).

The CLI's thickness (issue 49 point 4: "commands call flows or one job function each"), read
from the source of flows/cli: for each `sieve` command, the calls it makes into the layers below
(`cli_job_calls`: functions, and methods of classes, of pipeline/ or flows/ outside
`pipeline.core`'s plumbing, reached by the command itself or through the CLI's own helpers;
building a settings or parameters object is not counted), `cli_commands`, the sum of those calls
over commands (`cli_job_calls`) and `cli_commands_over_one_job`: the commands that make more
than one (the target: 0). Each command's calls are listed under `structure_where`.

One count is taken at run time instead (`train_job`, issue 49 point 2: a train job resolved once):
one `sieve train --config F` on the built-in tiny policy (a random-init one; a 24-problem
curriculum recorded as curated at the run's sampling; 1 step of 8 rollouts), run in a child
process with `$SIEVE_HOME` naming a home made for it, counts how often, while the command runs
(module imports left out):

- `grpo_config_constructions`: a `GRPOConfig` is created (`dataclasses.replace` included);
- `home_resolutions`: `resolve_home` runs, and `home_decisions`: of those, the ones given no home
  (so they read `$SIEVE_HOME` / `./data` themselves);
- `recipe_loads`: a TrainSettings TOML is loaded (`load_settings`), `config_reads`: the `--config`
  file is read, `recipe_choices`: the recipe is chosen (`recipe_for`, `given_recipe`);
- `curriculum_resolutions`: `resolve_curriculum` runs.

Each count lists where it happened (the calling functions, innermost first). The train job is
counted at HEAD's tree and at `--train-job-before` (default: the revision issue 49's point 2 was
worked from), in git worktrees as above.

Run: `.venv/bin/python benchmarks/settings_sprawl.py --before c17fec5^` (the revision the issue
was filed against) writes benchmarks/results/settings_sprawl.json with both columns and the
places behind each count. `--before` checks the revision out into a temporary git worktree and
counts it with this script (the same code counts both sides). `--no-train-job` skips the run-time
count (about a minute a side) and keeps the one in the results file.
"""

from __future__ import annotations

import argparse
import ast
import importlib
import importlib.util
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from types import FrameType, ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
LAYERS_TEST = ROOT / "tests" / "test_layers.py"  # where pipeline's layering is defined
LAYERING_TEST = ROOT / "tests" / "grpo_core" / "test_layering.py"  # where circles are found
# where the modules of pipeline/ moved when its listing was made to read as the architecture
# (issue 49 point 3): a module (or package) of an older tree -> the package of pipeline/ it is in
MOVED = {
    **{f"pipeline.{m}": "core" for m in
       ("errors", "home", "hooks", "procs", "runlog", "crash", "timing", "tomlconfig", "outputs")},
    **{f"pipeline.{m}": "jobs" for m in
       ("audit", "backtest", "curate", "demo", "export", "plan", "rescore", "shards", "replay",
        "rollouts", "lineage", "recipes", "batches", "train", "report", "policy.bootstrap",
        "policy.evaluate")},
    "pipeline.models": "policy",
}  # fmt: skip
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
    """A field default that is a value (not None: unset; pydantic's `Field(default=None, ...)`
    is unset too)."""
    if isinstance(value, ast.Call) and getattr(value.func, "id", None) == "Field":
        given = [kw.value for kw in value.keywords if kw.arg == "default"] + value.args[:1]
        return any(_gives_value(v) for v in given)
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
    return places


def temperature_recipe_values(root: Path) -> list[str]:
    """The `temperature = ...` lines of the committed TOML files under data/configs."""
    places = []
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
        "                cb = getattr(p.callback, '__wrapped__', p.callback)\n"
        "                cb = getattr(cb, '__name__', '') if cb else ''\n"
        "                rows.append([' '.join(prefix + [name]), p.opts[0], p.help or '', cb])\n"
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
    undecided = sorted(c for c, opt, _, cb in rows if opt == "--home" and cb != "decided_home")
    return {
        "total": len(rows),
        "distinct": len({opt for _, opt, _, _ in rows}),
        "home_undecided": undecided,
    }


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
    """The import circles: strongly connected groups of more than one module, found by the
    tests' own `cycles` (tests/grpo_core/test_layering.py, one Tarjan for both), loaded from its
    file: the tests package need not be on a benchmark's or the docs renderer's path."""
    spec = importlib.util.spec_from_file_location("_sieve_layering", LAYERING_TEST)
    if spec is None or spec.loader is None:
        raise SystemExit(f"cannot load {LAYERING_TEST}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.cycles(graph)


def pipeline_layers() -> dict[str, tuple[str, ...]]:
    """`PIPELINE_LAYERS` of tests/test_layers.py (each pipeline package -> the other pipeline
    packages it may import), read from that file's source as a literal: the test module imports
    the tests package, which a benchmark or the docs renderer need not have on its path."""
    tree = ast.parse(LAYERS_TEST.read_text(), str(LAYERS_TEST))
    for node in tree.body:
        target = node.target if isinstance(node, ast.AnnAssign) else None
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
        if isinstance(target, ast.Name) and target.id == "PIPELINE_LAYERS" and node.value:
            table = ast.literal_eval(node.value)
            return {str(k): tuple(v) for k, v in table.items()}
    raise SystemExit(f"{LAYERS_TEST}: no PIPELINE_LAYERS table")


def place(module: str) -> str:
    """The package of pipeline/ a module is in (`MOVED` for a module of an older tree)."""
    for old, package in MOVED.items():
        if module == old or module.startswith(old + "."):
            return package
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def layer_violations(graph: dict[str, set[str]]) -> list[str]:
    """`a -> b` for each import edge from one pipeline package to another that the layering
    forbids (a module in no package of the layering counts with every edge out of it)."""
    layers = pipeline_layers()
    found = []
    for a, targets in sorted(graph.items()):
        for b in sorted(targets):
            pa, pb = place(a), place(b)
            if pa and pb and pa != pb and pb not in layers.get(pa, ()):
                found.append(f"{a} -> {b}")
    return found


def _bindings(root: Path, path: Path) -> dict[str, str]:
    """Names bound by the imports of `path` (anywhere in it) -> the absolute name they read."""
    module = _module(root, path)
    package = module.split(".")[:-1]
    out: dict[str, str] = {}
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            for a in node.names:  # `import a.b` binds `a`; `import a.b as c` binds `c`
                head = a.name.split(".")[0]
                out[a.asname or head] = a.name if a.asname else head
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                kept = package[: len(package) - node.level + 1]
                base = ".".join([*kept, *([base] if base else [])])
            for a in node.names:
                out[a.asname or a.name] = f"{base}.{a.name}"
    return out


def _called(node: ast.Call, names: dict[str, str]) -> str | None:
    """The absolute name a call reaches through an import (None: a local or an object's method)."""
    parts: list[str] = []
    func: ast.expr = node.func
    while isinstance(func, ast.Attribute):
        parts.append(func.attr)
        func = func.value
    if not isinstance(func, ast.Name):
        return None
    head = names.get(func.id)
    if head is None:
        return f"<local>.{func.id}" if not parts else None
    return ".".join([head, *reversed(parts)])


def is_job_call(name: str) -> bool:
    """A call into the layers below the CLI that does work: a function (or a class's method) of
    pipeline/ or flows/ outside pipeline.core's plumbing (errors, home, logs, hooks, outputs);
    a class called (a settings or parameters object built) is not one."""
    if not name.startswith(("pipeline.", "flows.")):
        return False
    if name.startswith(("pipeline.core.", "flows.cli.")):
        return False
    return not name.rsplit(".", 1)[-1][:1].isupper()


def cli_commands(root: Path) -> dict[str, tuple[str, str]]:
    """`sieve` command -> (module, function) from flows/cli: `app.command()(mod.fn)` calls and
    `@x.command("name")` decorators."""
    cli = root / "flows" / "cli"
    found: dict[str, tuple[str, str]] = {}
    init = ast.parse((cli / "__init__.py").read_text())
    for node in ast.walk(init):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Call)
                and isinstance(node.func.func, ast.Attribute) and node.func.func.attr == "command"
                and isinstance(node.args[0], ast.Attribute)):  # fmt: skip
            fn = node.args[0]
            given = node.func.args[0].value if node.func.args else fn.attr
            found[given] = (f"flows.cli.{fn.value.id}", fn.attr)
    for path in sorted(cli.glob("*.py")):
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.FunctionDef):
                for dec in node.decorator_list:
                    if (isinstance(dec, ast.Call) and isinstance(dec.func, ast.Attribute)
                            and dec.func.attr == "command"):  # fmt: skip
                        group = dec.func.value.id.removesuffix("_app")
                        given = dec.args[0].value if dec.args else node.name
                        found[f"{group} {given}"] = (_module(root, path), node.name)
    return found


def cli_job_calls(root: Path) -> dict[str, list[str]]:
    """`sieve` command -> the job calls it makes (`is_job_call`), itself or through the CLI's own
    helpers (followed across flows/cli modules), sorted; every call site counts (a job called
    twice, or a helper that calls one reached twice, is two calls)."""
    cli = root / "flows" / "cli"
    defs: dict[tuple[str, str], ast.FunctionDef] = {}
    names: dict[str, dict[str, str]] = {}
    for path in sorted(cli.glob("*.py")):
        mod = _module(root, path)
        names[mod] = _bindings(root, path)
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.FunctionDef):
                defs[(mod, node.name)] = node

    def reach(key: tuple[str, str], stack: set[tuple[str, str]]) -> list[str]:
        if key in stack or key not in defs:  # a recursive helper is followed once
            return []
        stack = stack | {key}
        mod = key[0]
        calls: list[str] = []
        for node in ast.walk(defs[key]):
            if not isinstance(node, ast.Call):
                continue
            name = _called(node, names[mod])
            if name is None:
                continue
            if name.startswith("<local>."):
                calls += reach((mod, name.split(".", 1)[1]), stack)
            elif name.startswith("flows.cli."):
                target, _, fn = name.rpartition(".")
                calls += reach((target, fn), stack)
            elif is_job_call(name):
                calls.append(name)
        return calls

    return {cmd: sorted(reach(key, set())) for cmd, key in sorted(cli_commands(root).items())}


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
    """pipeline/'s shape (issue 49): modules, loose modules beside folders, import edges,
    circles and edges against the layering among its modules, logic in __init__ files, and the
    pipeline modules flows/cli imports."""
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
    against = layer_violations(graph)
    calls = cli_job_calls(root)
    return {
        "pipeline_modules": len(graph),
        "pipeline_loose_modules": len(loose),
        "pipeline_folders": len(folders),
        "pipeline_import_edges": sum(len(v) for v in graph.values()),
        "pipeline_import_circles": len(circles(graph)),
        "pipeline_layer_violations": len(against),
        "pipeline_init_logic_lines": sum(inits.values()),
        "cli_pipeline_modules": len(cli_modules),
        "cli_commands": len(calls),
        "cli_job_calls": sum(len(v) for v in calls.values()),
        "cli_commands_over_one_job": sum(len(v) > 1 for v in calls.values()),
        "structure_where": {
            "cli_job_calls": calls,
            "circles": circles(graph),
            "layer_violations": against,
            "init_logic": inits,
        },
    }


def count(root: Path) -> dict[str, Any]:
    classes = settings_classes(root)
    tomls = toml_files(root)
    cli = cli_options(root)
    temps = temperature_places(root)
    recipe_temps = temperature_recipe_values(root)
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
        "home_undecided_commands": len(cli["home_undecided"]),
        "temperature_places": len(temps),
        "temperature_recipe_values": len(recipe_temps),
        "max_new_tokens_files": len(tokens),
        **{k: v for k, v in shape.items() if k != "structure_where"},
        "where": {
            "classes": classes,
            "toml_files": tomls,
            "home_undecided_commands": cli["home_undecided"],
            "temperature_places": temps,
            "temperature_recipe_values": recipe_temps,
            **shape["structure_where"],
        },
    }


# ---------------------------------------------------------------------- the train job, at run time

# the tree issue 49's point 2 (a train job resolved once) was worked from
TRAIN_JOB_BEFORE = "d0773b9"
TRAIN_JOB_KEYS = (
    "grpo_config_constructions",
    "home_resolutions",
    "home_decisions",
    "recipe_loads",
    "config_reads",
    "recipe_choices",
    "curriculum_resolutions",
)
# the --config file of the counted run: the tiny policy, one step of 8 rollouts, a small eval
TRAIN_CONFIG = """\
rollouts_per_step = 8
eval_per_level = 1
eval_samples = 1
eval_families = ["arith"]
tensorboard = false

[grpo]
total_steps = 1
checkpoint_every = 0
max_new_tokens = 4
"""


def train_job(root: Path) -> dict[str, Any]:
    """The run-time counts of one `sieve train --config F` with the code at `root`, taken in a
    child process (this script's `--train-job-child`) that imports that tree."""
    with tempfile.TemporaryDirectory(prefix="sprawl-train-") as tmp:
        out = Path(tmp) / "counts.json"
        env = {
            "PYTHONPATH": str(root),
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(Path.home()),
            "OMP_NUM_THREADS": "1",  # a count, not a timing: one core is plenty
            "MKL_NUM_THREADS": "1",
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
            "COLUMNS": "200",
        }
        done = subprocess.run(
            [sys.executable, str(Path(__file__).resolve()), "--train-job-child", str(out)],
            cwd=tmp, env=env, capture_output=True, text=True,
        )  # fmt: skip
        if done.returncode != 0 or not out.is_file():
            tail = (done.stderr.strip() or done.stdout.strip() or "no output").splitlines()[-1]
            raise SystemExit(f"cannot count the train job of {root}: {tail}")
        counts: dict[str, Any] = json.loads(out.read_text())
        return counts


def _in_packages(filename: str, root: Path) -> str | None:
    """`filename` relative to `root` when it is a module of PACKAGES there, else None."""
    try:
        rel = Path(filename).resolve().relative_to(root)
    except ValueError:
        return None
    return rel.as_posix() if rel.parts and rel.parts[0] in PACKAGES else None


def _callers(frame: FrameType | None, root: Path, skip: tuple[str, ...] = ()) -> tuple[str, bool]:
    """(the first three functions of PACKAGES on the stack from `frame` outwards, innermost
    first, those in files ending in `skip` left out; whether a module is being imported)."""
    names: list[str] = []
    importing = False
    while frame is not None:
        rel = _in_packages(frame.f_code.co_filename, root)
        if rel is not None:
            importing |= frame.f_code.co_name == "<module>"
            if len(names) < 3 and not rel.endswith(skip):
                names.append(f"{rel}:{frame.f_code.co_name}")
        frame = frame.f_back
    return " < ".join(names), importing


def _tree_module(name: str) -> ModuleType | None:
    """`pipeline.<name>` of the counted tree, or None where that tree has no such file. The
    module's file is looked for first: this venv's editable install of the repository can
    otherwise serve a module the counted tree lacks from the repository's own tree."""
    import pipeline

    base = Path(pipeline.__file__).resolve().parent / Path(*name.split("."))
    if not (base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()):
        return None
    return importlib.import_module(f"pipeline.{name}")


def _first_module(*names: str) -> ModuleType:
    """The first of `pipeline.<name>` the counted tree has: it may be laid out before or after
    pipeline/'s modules moved into core/ and jobs/ (issue 49 point 3)."""
    for name in names:
        module = _tree_module(name)
        if module is not None:
            return module
    raise SystemExit(f"none of pipeline.{{{', '.join(names)}}} is in the counted tree")


def _defining_module(attr: str, *names: str) -> ModuleType:
    """The first of `pipeline.<name>` the counted tree has that defines `attr` (a function that
    moved between the counted trees, e.g. `resolve_curriculum` from the export job to
    store.ids)."""
    for name in names:
        module = _tree_module(name)
        if module is not None and attr in vars(module):
            return module
    raise SystemExit(f"none of pipeline.{{{', '.join(names)}}} defines {attr}")


def _train_job_child(out: Path) -> None:
    """In the child: make a home with the tiny policy and a small curriculum, count the calls
    while `sieve train --config F` runs in this process, write the counts to `out`."""
    import dataclasses
    from datetime import UTC, datetime

    import polars as pl

    import flows.cli
    import flows.cli.train
    import pipeline
    from grpo_core.config import GRPOConfig
    from pipeline.policy.model import create_tiny_model, folder_revision
    from pipeline.problems import generate
    from pipeline.store import Ledger

    root = Path(pipeline.__file__).resolve().parents[1]
    home_mod = _first_module("core.home", "home")
    toml_mod = _first_module("core.tomlconfig", "tomlconfig")
    curricula_mod = _defining_module(
        "resolve_curriculum", "store.ids", "jobs.data.export", "jobs.export", "export"
    )
    recipes_mod = _first_module("jobs.train.settings", "jobs.recipes", "recipes")
    work = out.parent
    home, config = work / "home", work / "train.toml"
    model = home / "models" / "tiny"
    create_tiny_model(model, seed=0)
    problems = generate("arith", [1, 2], 24, seed=3).filter(pl.col("split") == "train")
    n = problems.height
    items = pl.DataFrame({
        "curriculum_id": "cur-sprawl", "problem_id": problems["problem_id"],
        "stage": [1 if i < n // 2 else 2 for i in range(n)], "position": list(range(n)),
        "group_size": 4, "weight": 1.0, "p_mean": 0.5, "p_low": 0.2, "p_high": 0.8,
        "reason": "mid_band",
    })  # fmt: skip
    head = pl.DataFrame({
        "curriculum_id": ["cur-sprawl"], "created_at": [datetime(2026, 1, 1, tzinfo=UTC)],
        "model": [str(model)], "model_revision": [folder_revision(model)],
        "config": [json.dumps({"sampling": {"max_new_tokens": 4}})],  # as the run samples
        "status": ["finished"],
    })  # fmt: skip
    with Ledger.open(home) as ledger:
        ledger.write("problems", problems)
        ledger.write_batch({"curricula": head, "curriculum_items": items})
    config.write_text(TRAIN_CONFIG)
    os.environ["SIEVE_HOME"] = str(home)
    for name in ("PREFECT_HOME", "PREFECT_API_URL"):
        os.environ.pop(name, None)

    counts: Counter[str] = Counter()
    where: dict[str, Counter[str]] = {key: Counter() for key in TRAIN_JOB_KEYS}
    at_import: Counter[str] = Counter()

    def tally(key: str, frame: FrameType | None, skip: tuple[str, ...] = ()) -> None:
        place, importing = _callers(frame, root, skip)
        if importing:  # a module-level constant built while a module is imported
            at_import[key] += 1
            return
        counts[key] += 1
        where[key][place] += 1

    def wrap(module: ModuleType, name: str, keys: Callable[..., list[str]]) -> None:
        """Count each call of `module.name` under `keys(*args)`, wherever it was imported."""
        original = vars(module)[name]

        def counted(*args: Any, **kwargs: Any) -> Any:
            for key in keys(*args, **kwargs):
                tally(key, sys._getframe(1))
            return original(*args, **kwargs)

        for mod in list(sys.modules.values()):
            if isinstance(mod, ModuleType) and vars(mod).get(name) is original:
                setattr(mod, name, counted)

    def home_keys(home: Any = None) -> list[str]:
        return ["home_resolutions"] + (["home_decisions"] if home is None else [])

    def read_keys(path: Any, *args: Any) -> list[str]:
        return ["config_reads"] if Path(path).resolve() == config.resolve() else []

    wrap(home_mod, "resolve_home", home_keys)
    wrap(recipes_mod, "load_settings", lambda *a, **k: ["recipe_loads"])
    wrap(toml_mod, "read_config_text", read_keys)
    wrap(recipes_mod, "recipe_for", lambda *a, **k: ["recipe_choices"])
    wrap(recipes_mod, "given_recipe", lambda *a, **k: ["recipe_choices"])
    wrap(curricula_mod, "resolve_curriculum", lambda *a, **k: ["curriculum_resolutions"])
    init = GRPOConfig.__init__

    def counted_init(self: Any, *args: Any, **kwargs: Any) -> None:
        tally("grpo_config_constructions", sys._getframe(1), skip=("grpo_core/config.py",))
        init(self, *args, **kwargs)

    GRPOConfig.__init__ = counted_init  # type: ignore[method-assign]
    assert dataclasses.is_dataclass(GRPOConfig)

    argv = ["sieve", "train", "--config", str(config)]
    sys.argv = argv
    started = time.perf_counter()
    try:
        flows.cli.main()
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0) if not isinstance(exc.code, str) else 1
    seconds = time.perf_counter() - started
    if code != 0:
        raise SystemExit(f"`{' '.join(argv[:3])} ...` exited {code}")
    result = {
        "command": "sieve train --config F ($SIEVE_HOME: a tiny-policy home)",
        "exit_code": code,
        "seconds": round(seconds, 1),
        **{key: counts[key] for key in TRAIN_JOB_KEYS},
        "where": {key: dict(sorted(where[key].items())) for key in TRAIN_JOB_KEYS},
        "at_import": dict(at_import),
    }
    out.write_text(json.dumps(result, indent=1) + "\n")


# ---------------------------------------------------------------------- revisions


def at_revision(rev: str, measure: Callable[[Path], dict[str, Any]]) -> tuple[str, dict[str, Any]]:
    """(short sha, `measure` of the tree at `rev`, checked out in a temporary git worktree)."""
    sha = subprocess.run(
        ["git", "rev-parse", "--short", rev], cwd=ROOT, check=True, capture_output=True, text=True
    ).stdout.strip()
    with tempfile.TemporaryDirectory() as tmp:
        tree = Path(tmp) / "tree"
        subprocess.run(["git", "worktree", "add", "--detach", "-q", str(tree), sha], cwd=ROOT,
                       check=True)  # fmt: skip
        try:
            return sha, measure(tree)
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(tree)], cwd=ROOT,
                           check=True)  # fmt: skip


def count_revision(rev: str) -> tuple[str, dict[str, Any]]:
    return at_revision(rev, count)


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
    parser.add_argument(
        "--train-job-before", default=TRAIN_JOB_BEFORE,
        help="the revision to compare the run-time train job counts with",
    )  # fmt: skip
    parser.add_argument(
        "--no-train-job", action="store_true",
        help="skip the run-time train job count; keep the one in the results file",
    )  # fmt: skip
    parser.add_argument("--train-job-child", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.train_job_child is not None:
        _train_job_child(args.train_job_child)
        return
    head = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, check=True, capture_output=True,
        text=True,
    ).stdout.strip()  # fmt: skip
    revision = head + (" + working tree" if dirty() else "")
    before_rev, before = count_revision(args.before)
    now = count(ROOT)
    keys = [k for k in now if k != "where"]
    out = RESULTS / "settings_sprawl.json"
    report: dict[str, Any] = {
        "benchmark": "settings_sprawl",
        "before": {"revision": before_rev, **before},
        "now": {"revision": revision, **now},
        "change": {k: now[k] - before[k] for k in keys},
    }
    if args.no_train_job:
        kept = json.loads(out.read_text()).get("train_job") if out.is_file() else None
        if kept is not None:
            report["train_job"] = kept
    else:
        job_rev, job_before = at_revision(args.train_job_before, train_job)
        job_now = train_job(ROOT)
        report["train_job"] = {
            "before": {"revision": job_rev, **job_before},
            "now": {"revision": revision, **job_now},
            "change": {k: job_now[k] - job_before[k] for k in TRAIN_JOB_KEYS},
        }
    RESULTS.mkdir(exist_ok=True)
    out.write_text(json.dumps(report, indent=1) + "\n")
    for k in keys:
        print(f"{k:26} {before[k]:>4} -> {now[k]:>4}")
    job = report.get("train_job")
    if job is not None:
        print(f"train job ({job['before']['revision']} -> {job['now']['revision']}):")
        for k in TRAIN_JOB_KEYS:
            print(f"  {k:24} {job['before'][k]:>4} -> {job['now'][k]:>4}")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
