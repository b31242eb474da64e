"""The product's shape, counted from the source (parsed, never imported, so any machine gives the
same numbers): what `tests/architecture/test_shape.py` holds to its limits and what
`python tests/architecture/shape.py` prints.

Counts:
- `modules_per_folder`: the modules (`*.py` but `__init__.py`) of each folder of pipeline/,
  flows/ and grpo_core/; a newcomer reads a folder by `ls`, and a folder of more than 12
  modules is a drawer, not a package (limit 12 for pipeline/ and flows/);
- `lines_per_file`: the lines of each product file (limit 600; 400 in grpo_core, whose modules
  are each one idea of the trainer);
- `sql_outside_store`: string literals that are SQL statements (`SELECT ... FROM`, `INSERT
  INTO`, `UPDATE ... SET`, `DELETE FROM`, `CREATE [OR REPLACE] TABLE|VIEW|MACRO`, `COPY`)
  in product modules outside pipeline/store, per module: the ledger's SQL lives in one place,
  behind methods that return frames;
- `issue_references`: "issue N" in product code, the README and the manual pages of docs/
  (history belongs in commits and the lab record under benchmarks/, not in the rule's text);
- `readme_lines`: the README's length (limit 150: a front page, not a report).
"""

from __future__ import annotations

import ast
import re
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = ("pipeline", "flows", "grpo_core")
MODULES_PER_FOLDER = 12
LINES_PER_FILE = {"grpo_core": 400, "pipeline": 600, "flows": 600}
README_LINES = 150
# the pages of docs/ that describe the product (the lab record lives under benchmarks/)
MANUAL_PAGES = (
    "architecture.md", "audit.md", "curation.md", "guide.md", "ledger.md", "reliability.md",
    "rescore.md", "scaling.md", "verifier.md",
)  # fmt: skip

SQL = re.compile(
    r"\bSELECT\b[\s\S]*\bFROM\b|\bINSERT\s+INTO\b|\bUPDATE\s+\w+\s+SET\b|\bDELETE\s+FROM\b"
    r"|\bCREATE\s+(OR\s+REPLACE\s+)?(TEMP\s+)?(TABLE|VIEW|MACRO)\b|\bCOPY\s+\(?\s*\w+"
)
ISSUE = re.compile(r"\bissues?\s+#?\d+", re.IGNORECASE)


def product_files(root: Path = ROOT) -> list[Path]:
    """Every product module, sorted (caches and virtual environments left out)."""
    return sorted(
        p for top in PRODUCT for p in (root / top).rglob("*.py") if "__pycache__" not in p.parts
    )


def modules_per_folder(root: Path = ROOT) -> dict[str, int]:
    """Folder (relative) → its modules, `__init__.py` not counted."""
    count: Counter[str] = Counter()
    for path in product_files(root):
        folder = path.parent.relative_to(root).as_posix()
        count[folder] += path.name != "__init__.py"
    return dict(sorted(count.items()))


def lines_per_file(root: Path = ROOT) -> dict[str, int]:
    """File (relative) → its lines."""
    return {
        p.relative_to(root).as_posix(): len(p.read_text().splitlines()) for p in product_files(root)
    }


def line_limit(path: str) -> int:
    """The line limit of a product file by its top folder."""
    return LINES_PER_FILE[path.split("/", 1)[0]]


def _literal(node: ast.AST) -> str | None:
    """The text of a string literal (an f-string's literal parts), else None."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(str(v.value) for v in node.values if isinstance(v, ast.Constant))
    return None


def _docstrings(tree: ast.AST) -> set[int]:
    """The ids of the docstring nodes of a module, its classes and functions."""
    out = set()
    for item in ast.walk(tree):
        body = getattr(item, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr):
            out.add(id(body[0].value))
    return out


def sql_in(source: str) -> int:
    """The string literals of a module's code that are SQL statements (docstrings, which may
    describe SQL, left out; an f-string counts once, by its literal parts)."""
    tree = ast.parse(source)
    skip = _docstrings(tree)
    inner = {id(v) for n in ast.walk(tree) if isinstance(n, ast.JoinedStr) for v in n.values}
    found = 0
    for node in ast.walk(tree):
        text = None if id(node) in skip | inner else _literal(node)
        found += bool(text and SQL.search(text))
    return found


def sql_outside_store(root: Path = ROOT) -> dict[str, int]:
    """Module (relative) → SQL statements in it, for product modules outside pipeline/store."""
    out = {}
    for path in product_files(root):
        rel = path.relative_to(root).as_posix()
        if rel.startswith("pipeline/store/"):
            continue
        n = sql_in(path.read_text())
        if n:
            out[rel] = n
    return out


def issue_references(root: Path = ROOT) -> dict[str, int]:
    """File (relative) → "issue N" mentions, in product code, the README and the manual pages."""
    paths = [*product_files(root), root / "README.md"]
    paths += [root / "docs" / page for page in MANUAL_PAGES if (root / "docs" / page).exists()]
    out = {}
    for path in paths:
        n = len(ISSUE.findall(path.read_text()))
        if n:
            out[path.relative_to(root).as_posix()] = n
    return out


def readme_lines(root: Path = ROOT) -> int:
    return len((root / "README.md").read_text().splitlines())


def counts(root: Path = ROOT) -> dict[str, object]:
    """Every count, with the items over their limits."""
    folders = modules_per_folder(root)
    lines = lines_per_file(root)
    return {
        "folders_over_limit": {
            f: n
            for f, n in folders.items()
            if n > MODULES_PER_FOLDER and not f.startswith("grpo_core")
        },
        "files_over_limit": {f: n for f, n in lines.items() if n > line_limit(f)},
        "sql_outside_store": sql_outside_store(root),
        "issue_references": issue_references(root),
        "readme_lines": readme_lines(root),
    }


if __name__ == "__main__":
    import json

    print(json.dumps(counts(), indent=1))
