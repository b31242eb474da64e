"""Extract Math-Verify's regression table into `math_verify_cases.csv` (see math_verify_cases.md).

Reads the parametrized cases (gold, pred, expected, ...) of huggingface/Math-Verify's
`tests/test_all.py` by walking its syntax tree (nothing of it is imported or run), and writes one
CSV row per case: gold, candidate (= pred), expected, group (the test function's name), options
(the non-default math-verify arguments that test passes: match_types, precision,
allow_set_relation_comp) and scored. `scored` is 0 for a row whose expectation depends on those
options: math-verify itself, called with its defaults (`parse(text)`, `verify(gold, pred)`, as
Sieve calls it), disagrees with `expected` while the test's own options reproduce it. Measuring
that needs math-verify in this process; this script is a development tool, not part of Sieve.

Run: .venv/bin/python tests/scoring/make_math_verify_cases.py PATH/TO/test_all.py COMMIT
"""

from __future__ import annotations

import ast
import csv
import math
import sys
from pathlib import Path
from typing import Any

OUT = Path(__file__).with_name("math_verify_cases.csv")
DEFAULTS: dict[str, Any] = {
    "match_types": ["latex", "expr"],
    "precision": 6,
    "allow_set_relation_comp": False,
}


def _value(node: ast.expr) -> Any:
    """A literal, or an f-string over `math` (the one computed gold in the file)."""
    try:
        return ast.literal_eval(node)
    except ValueError:
        code = compile(ast.Expression(node), "<case>", "eval")
        return eval(code, {"__builtins__": {}, "math": math})  # only f"{math.sqrt(17):.15f}"


def _call_options(fn: ast.FunctionDef) -> dict[str, Any]:
    """Keyword arguments of the test body's `compare_strings(...)` call (names stay names)."""
    for node in ast.walk(fn):
        if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "compare_strings":
            out: dict[str, Any] = {}
            for kw in node.keywords:
                named = isinstance(kw.value, ast.Name)
                out[str(kw.arg)] = kw.value.id if named else _value(kw.value)  # type: ignore[attr-defined]
            return out
    raise ValueError(f"{fn.name}: no compare_strings call")


def cases(source: str) -> list[dict[str, Any]]:
    """One dict per parametrized case, with the options that case is checked under."""
    rows = []
    for fn in ast.parse(source).body:
        if not isinstance(fn, ast.FunctionDef):
            continue
        for deco in fn.decorator_list:
            if not (isinstance(deco, ast.Call) and getattr(deco.func, "attr", "") == "parametrize"):
                continue
            names = [n.strip() for n in _value(deco.args[0]).split(",")]
            call = _call_options(fn)
            for element in deco.args[1].elts:  # type: ignore[attr-defined]
                values = dict(zip(names, (_value(e) for e in element.elts), strict=True))
                options = dict(DEFAULTS)
                for key, arg in call.items():
                    options[key] = values[arg] if isinstance(arg, str) and arg in values else arg
                rows.append({"group": fn.name, **values, "options": options})
    return rows


def math_verify(gold: str, pred: str, options: dict[str, Any]) -> int:
    """math-verify's answer under `options`, built as the upstream test helper builds it."""
    from math_verify import ExprExtractionConfig, LatexExtractionConfig, parse, verify

    targets: list[Any] = []
    for kind in options["match_types"]:
        targets.append(
            LatexExtractionConfig(boxed_match_priority=0)
            if kind == "latex"
            else ExprExtractionConfig()
        )
    g, p = parse(gold, targets), parse(pred, targets)
    return int(
        verify(
            g,
            p,
            float_rounding=options["precision"],
            allow_set_relation_comp=options["allow_set_relation_comp"],
        )
    )


def default_math_verify(gold: str, pred: str) -> int:
    from math_verify import parse, verify

    return int(verify(parse(gold), parse(pred)))


def describe(options: dict[str, Any]) -> str:
    parts = []
    if options["match_types"] != DEFAULTS["match_types"]:
        parts.append("match_types=" + "+".join(options["match_types"]))
    for key in ("precision", "allow_set_relation_comp"):
        if options[key] != DEFAULTS[key]:
            parts.append(f"{key}={options[key]}")
    return "; ".join(parts)


def main(path: str, commit: str) -> None:
    rows = cases(Path(path).read_text(encoding="utf-8"))
    with OUT.open("w", newline="", encoding="utf-8") as f:
        f.write(
            f"# Cases from huggingface/Math-Verify tests/test_all.py at commit {commit}; "
            "MIT License, Copyright (c) 2024 The HuggingFace Team. See math_verify_cases.md.\n"
        )
        writer = csv.writer(f, quoting=csv.QUOTE_ALL, lineterminator="\n")
        writer.writerow(["gold", "candidate", "expected", "group", "options", "scored"])
        for row in rows:
            gold, pred, expected = str(row["gold"]), str(row["pred"]), int(row["expected"])
            opts = row["options"]
            own = math_verify(gold, pred, opts)
            default = default_math_verify(gold, pred)
            scored = 0 if (own == expected and default != expected) else 1
            writer.writerow([gold, pred, expected, row["group"], describe(opts), scored])
    print(f"{len(rows)} rows -> {OUT}")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
