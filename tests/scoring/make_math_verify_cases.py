"""Extract Math-Verify's regression tables into `math_verify_cases.csv` (see math_verify_cases.md).

Reads the parametrized cases of huggingface/Math-Verify's test files (`tests/test_*.py`) by
walking their syntax trees (nothing of them is imported or run). A parametrized test is a table of
gold/prediction comparisons when its body asserts `HELPER(...) == NAME` (or `int(HELPER(...)) ==
NAME`) for one of the two helpers the upstream tests use:

* `compare_strings(gold, pred, match_types=..., precision=..., strict=...,
  allow_set_relation_comp=...)` (defined in test_all.py, imported by the other files): both texts
  parsed with `LatexExtractionConfig(boxed_match_priority=0)` / `ExprExtractionConfig()` per
  `match_types`, then `verify(..., float_rounding=precision, strict=...,
  allow_set_relation_comp=...)`;
* `verify(parse(gold), parse(pred))`: math-verify's plain defaults.

Any other parametrized test (parser-only checks, mocks, timeouts) is reported as skipped.

One CSV row per case: gold, candidate (= pred), expected, group (`FILE::FUNCTION`), options (the
non-default math-verify arguments that case is checked under: match_types, precision, strict,
allow_set_relation_comp) and scored. `scored` is 0 for a row whose expectation depends on those
options: math-verify itself, called with its defaults (`parse(text)`, `verify(gold, pred)`, as
Sieve calls it), disagrees with `expected` while the test's own options reproduce it. Measuring
that needs math-verify in this process; this script is a development tool, not part of Sieve.

Run: .venv/bin/python tests/scoring/make_math_verify_cases.py DIR=COMMIT [DIR=COMMIT ...]
Each DIR holds test files as of COMMIT; a file found in a later DIR replaces the earlier one's.
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
    "strict": True,
    "allow_set_relation_comp": False,
}
COMPARE = "compare_strings"  # keyword options as in DEFAULTS
PARSE_VERIFY = "parse+verify"  # verify(parse(gold), parse(pred)): math-verify's defaults


def _value(node: ast.expr) -> Any:
    """A literal, or an f-string over `math` (the one computed gold, in test_all.py)."""
    try:
        return ast.literal_eval(node)
    except ValueError:
        code = compile(ast.Expression(node), "<case>", "eval")
        return eval(code, {"__builtins__": {}, "math": math})  # only f"{math.sqrt(17):.15f}"


def _name(node: ast.expr) -> str:
    return node.id if isinstance(node, ast.Name) else ""


def _func(node: ast.expr) -> str:
    if not isinstance(node, ast.Call):
        return ""
    return node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", "")


def _helper(fn: ast.FunctionDef) -> tuple[str, list[str], dict[str, Any], str] | None:
    """(helper, [gold argument, pred argument], keyword options, expected argument) of the
    body's `assert HELPER(...) == NAME`, or None when the test compares no gold and prediction."""
    for node in ast.walk(fn):
        if not (isinstance(node, ast.Assert) and isinstance(node.test, ast.Compare)):
            continue
        cmp = node.test
        if len(cmp.ops) != 1 or not isinstance(cmp.ops[0], ast.Eq):
            continue
        call, expected = cmp.left, _name(cmp.comparators[0])
        if _func(call) == "int":
            call = call.args[0]  # type: ignore[attr-defined]
        if not expected or not isinstance(call, ast.Call):
            continue
        if _func(call) == COMPARE:
            args = [_name(a) for a in call.args[:2]]
            options = {
                str(kw.arg): _name(kw.value) or _value(kw.value) for kw in call.keywords
            }  # a Name stays a name: it is filled in from the case's values
            return COMPARE, args, options, expected
        if _func(call) == "verify" and all(_func(a) == "parse" for a in call.args[:2]):
            args = [_name(a.args[0]) for a in call.args[:2]]  # type: ignore[attr-defined]
            if not call.keywords and all(len(a.args) == 1 for a in call.args[:2]):  # type: ignore[attr-defined]
                return PARSE_VERIFY, args, {}, expected
    return None


def _parametrize(fn: ast.FunctionDef) -> list[ast.Call]:
    return [
        d
        for d in fn.decorator_list
        if isinstance(d, ast.Call) and getattr(d.func, "attr", "") == "parametrize"
    ]


def _case_values(names: list[str], element: ast.expr) -> dict[str, Any]:
    if _func(element) == "param":  # pytest.param(v1, v2, ..., id=...)
        element = ast.Tuple(elts=element.args)  # type: ignore[attr-defined]
    elts = element.elts if isinstance(element, ast.Tuple) else [element]
    return dict(zip(names, (_value(e) for e in elts), strict=True))


def cases(source: str, file: str) -> tuple[list[dict[str, Any]], list[str]]:
    """(one dict per parametrized gold/pred case, with the options it is checked under;
    the names of the parametrized tests skipped as not gold/pred comparisons)."""
    rows, skipped = [], []
    for fn in ast.parse(source).body:
        if not isinstance(fn, ast.FunctionDef):
            continue
        decos = _parametrize(fn)
        if not decos:
            continue
        helper = _helper(fn)
        if helper is None:
            skipped.append(f"{file}::{fn.name}")
            continue
        if len(decos) != 1:
            raise ValueError(f"{file}::{fn.name}: stacked parametrize is not handled")
        kind, (gold_arg, pred_arg), call, expected_arg = helper
        spec = _value(decos[0].args[0])
        names = [n.strip() for n in spec.split(",")] if isinstance(spec, str) else list(spec)
        for element in decos[0].args[1].elts:  # type: ignore[attr-defined]
            values = _case_values(names, element)
            options = dict(DEFAULTS)
            for key, arg in call.items():
                if key not in DEFAULTS:
                    raise ValueError(f"{file}::{fn.name}: unknown option {key}")
                options[key] = values[arg] if isinstance(arg, str) and arg in values else arg
            rows.append(
                {
                    "group": f"{file}::{fn.name}",
                    "helper": kind,
                    "gold": str(values[gold_arg]),
                    "pred": str(values[pred_arg]),
                    "expected": int(values[expected_arg]),
                    "options": options,
                }
            )
    return rows, skipped


def math_verify(gold: str, pred: str, helper: str, options: dict[str, Any]) -> int:
    """math-verify's answer as the upstream test computes it (its helper, its options)."""
    from math_verify import ExprExtractionConfig, LatexExtractionConfig, parse, verify

    if helper == PARSE_VERIFY:
        return default_math_verify(gold, pred)
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
            strict=options["strict"],
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
    for key in ("precision", "strict", "allow_set_relation_comp"):
        if options[key] != DEFAULTS[key]:
            parts.append(f"{key}={options[key]}")
    return "; ".join(parts)


def sources(args: list[str]) -> dict[str, tuple[Path, str]]:
    """test file name -> (path, commit); later directories win."""
    found: dict[str, tuple[Path, str]] = {}
    for arg in args:
        folder, commit = arg.rsplit("=", 1)
        for path in sorted(Path(folder).glob("test_*.py")):
            found[path.name] = (path, commit)
    return dict(sorted(found.items()))


def header(found: dict[str, tuple[Path, str]]) -> str:
    by_commit: dict[str, list[str]] = {}
    for name, (_, commit) in found.items():
        by_commit.setdefault(commit, []).append(name)
    parts = [f"{', '.join(names)} at {commit}" for commit, names in by_commit.items()]
    return (
        "# Cases from huggingface/Math-Verify tests/: " + "; ".join(parts) + ". test_all.py: MIT "
        "License, Copyright (c) 2024 The HuggingFace Team (its header); the other files: Apache "
        "License 2.0 (the repository's LICENCE). See math_verify_cases.md.\n"
    )


def main(args: list[str]) -> None:
    found = sources(args)
    rows: list[dict[str, Any]] = []
    used: dict[str, tuple[Path, str]] = {}
    for name, (path, commit) in found.items():
        got, skipped = cases(path.read_text(encoding="utf-8"), name)
        rows += got
        if got:
            used[name] = (path, commit)
        print(
            f"{name} @ {commit[:7]}: {len(got)} rows" + "".join(f"; skipped {s}" for s in skipped)
        )
    with OUT.open("w", newline="", encoding="utf-8") as f:
        f.write(header(used))
        writer = csv.writer(f, quoting=csv.QUOTE_ALL, lineterminator="\n")
        writer.writerow(["gold", "candidate", "expected", "group", "options", "scored"])
        for row in rows:
            gold, pred, expected = row["gold"], row["pred"], row["expected"]
            opts = row["options"]
            own = math_verify(gold, pred, row["helper"], opts)
            default = default_math_verify(gold, pred)
            scored = 0 if (own == expected and default != expected) else 1
            writer.writerow([gold, pred, expected, row["group"], describe(opts), scored])
    print(f"{len(rows)} rows -> {OUT}")


if __name__ == "__main__":
    main(sys.argv[1:])
