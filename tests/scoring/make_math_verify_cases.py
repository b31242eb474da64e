"""Extract every parametrized gold/prediction case of Math-Verify's test files into
`math_verify_cases.csv` (see math_verify_cases.md).

The upstream test files (huggingface/Math-Verify `tests/test_*.py`, one folder per stored commit)
are run, not parsed: each module is executed with its `assert`s made non-fatal and with recording
stand-ins for the calls a test compares a gold with a prediction through:

* `compare_strings(gold, pred, match_types=..., precision=..., strict=...,
  allow_set_relation_comp=...)`, test_all.py's helper (the other files import it): both texts
  parsed with `LatexExtractionConfig(boxed_match_priority=0)` / `ExprExtractionConfig()` per
  `match_types`, then `verify(..., float_rounding=precision, strict=..., ...)`;
* `verify(parse(gold[, configs]), parse(pred[, configs]), **options)`, math-verify's own calls.

Every case of every `pytest.mark.parametrize` (stacked ones as their product, `pytest.param`
values included) calls the test function once. What a recorded call is compared with (`== x`,
`is x`, an element of a list compared with `==`) is its expected value, so a test that makes
several comparisons per case (test_mixed_number_extraction.py) gives one row for each. A
parametrized test that records no comparison (parser-only checks, mocks) is reported as skipped,
and so is a comparison whose gold is not a text (`verify([sympy.Integer(4)], parsed)`).

One CSV row per recorded comparison: gold, candidate (= pred), expected, group (`FILE::FUNCTION`),
options (the non-default math-verify arguments the case is checked under), scored, helper
(`compare_strings` or `parse+verify`) and commit (of the file version the case was read from).
`scored` is 0 for a row whose expectation depends on those options: math-verify called with its
defaults (`parse(text)`, `verify(gold, pred)`, as Sieve calls it) disagrees with `expected` while
the test's own options reproduce it.

Several versions of one file: the folders are read in order; a case (group, gold, candidate,
options) keeps the expectation of the last version that has it, and cases only an earlier version
has are kept (all versions' cases, once each; a case repeated within one version stays repeated).

This script imports math-verify and executes the upstream test modules (with the stand-ins): a
development tool, not part of Sieve, run on downloaded copies of the files. Nothing of it runs in
the test suite, which reads the committed CSV.

Run: .venv/bin/python tests/scoring/make_math_verify_cases.py DIR=COMMIT [DIR=COMMIT ...]
"""

from __future__ import annotations

import ast
import builtins
import csv
import itertools
import sys
import types
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

OUT = Path(__file__).with_name("math_verify_cases.csv")
DEFAULTS: dict[str, Any] = {
    "match_types": ["latex", "expr"],
    "precision": 6,
    "strict": True,
    "allow_set_relation_comp": False,
}
COMPARE = "compare_strings"
PARSE_VERIFY = "parse+verify"
_CONFIG_KIND = {
    "LatexExtractionConfig": "latex",
    "ExprExtractionConfig": "expr",
    "StringExtractionConfig": "string",
}


class NotACase(Exception):
    """Raised by the stand-ins where a test does something other than compare texts."""


@dataclass
class Call:
    """One recorded gold/prediction comparison."""

    helper: str
    gold: str
    pred: str
    options: dict[str, Any]
    expected: list[int] = field(default_factory=list)


class Parsed:
    """What the `parse` stand-in returns: the text and the configs it was asked to read with."""

    def __init__(self, text: str, configs: Any, kwargs: dict[str, Any]) -> None:
        self.text, self.configs, self.kwargs = text, configs, kwargs

    def _refuse(self, *_: Any) -> Any:
        raise NotACase("a parser-only check")

    __getitem__ = __sub__ = __rsub__ = __add__ = __iter__ = __len__ = _refuse


class Probe:
    """What a recorded comparison returns: `== x` records x as the expected value."""

    def __init__(self, call: Call) -> None:
        self.call = call

    def __eq__(self, other: object) -> bool:
        if isinstance(other, bool | int) and other in (0, 1):
            self.call.expected.append(int(other))
            return True
        raise NotACase(f"compared with {other!r}")

    def __ne__(self, other: object) -> bool:
        raise NotACase("compared with !=")

    __hash__ = None  # type: ignore[assignment]

    def __bool__(self) -> bool:
        raise NotACase("truth value of a comparison (not a table case)")


class Recorder:
    def __init__(self) -> None:
        self.calls: list[Call] = []

    def compare_strings(self, gold: str, pred: str, **kwargs: Any) -> Probe:
        options = dict(DEFAULTS)
        for key, value in kwargs.items():
            if key not in DEFAULTS:
                raise ValueError(f"compare_strings: unknown option {key}")
            options[key] = list(value) if key == "match_types" else value
        call = Call(COMPARE, str(gold), str(pred), options)
        self.calls.append(call)
        return Probe(call)

    @staticmethod
    def parse(text: str, extraction_config: Any = None, **kwargs: Any) -> Parsed:
        return Parsed(text, extraction_config, kwargs)

    def verify(self, gold: Any, target: Any, **kwargs: Any) -> Probe:
        if not (isinstance(gold, Parsed) and isinstance(target, Parsed)):
            raise NotACase("verify on something other than two parsed texts")
        if gold.kwargs or target.kwargs:
            raise NotACase("parse with non-default keyword arguments")
        kinds = [_kinds(gold.configs), _kinds(target.configs)]
        if kinds[0] != kinds[1]:
            raise NotACase("gold and prediction parsed with different configs")
        options = dict(DEFAULTS)
        options["match_types"] = kinds[0]
        for key, value in kwargs.items():
            name = {"float_rounding": "precision"}.get(key, key)
            if name not in DEFAULTS:
                raise NotACase(f"verify option {key}")
            options[name] = value
        call = Call(PARSE_VERIFY, gold.text, target.text, options)
        self.calls.append(call)
        return Probe(call)


def _kinds(configs: Any) -> list[str]:
    if configs is None:
        return list(DEFAULTS["match_types"])
    return [_CONFIG_KIND[type(c).__name__] for c in configs]


class _Soften(ast.NodeTransformer):
    """`assert x is y` reads as `assert x == y`, and a failing assert does not end the test."""

    def visit_Assert(self, node: ast.Assert) -> ast.AST:
        test = node.test
        if isinstance(test, ast.Compare):
            test.ops = [ast.Eq() if isinstance(op, ast.Is) else op for op in test.ops]
        body = ast.Assert(test=test, msg=None)
        handler = ast.ExceptHandler(type=ast.Name("Exception", ast.Load()), body=[ast.Pass()])
        return ast.copy_location(ast.Try(body=[body], handlers=[handler], orelse=[],
                                         finalbody=[]), node)  # fmt: skip


def _cases(fn: Any) -> list[dict[str, Any]] | None:
    """The keyword arguments of each parametrized case of `fn` (None: not parametrized)."""
    marks = [m for m in getattr(fn, "pytestmark", []) if m.name == "parametrize"]
    if not marks:
        return None
    axes = []
    for mark in marks:
        names, values = mark.args[0], mark.args[1]
        names = [n.strip() for n in names.split(",")] if isinstance(names, str) else list(names)
        rows = []
        for value in values:
            if type(value).__name__ == "ParameterSet":
                if any(m.name in ("xfail", "skip", "skipif") for m in value.marks):
                    raise ValueError(f"{fn.__name__}: marked cases are not handled")
                value = value.values
            elif len(names) == 1:
                value = (value,)
            rows.append(dict(zip(names, value, strict=True)))
        axes.append(rows)
    return [{k: v for part in combo for k, v in part.items()} for combo in itertools.product(*axes)]


def run_file(path: Path, package: str) -> tuple[list[tuple[str, Call]], list[str]]:
    """([(FUNCTION, recorded call)], skipped notes) of one upstream test file."""
    recorder = Recorder()
    tree = _Soften().visit(ast.parse(path.read_text(encoding="utf-8")))
    ast.fix_missing_locations(tree)
    name = f"{package}.{path.stem}"
    module = types.ModuleType(name)
    module.__file__ = str(path)
    sys.modules[name] = module
    try:
        exec(
            compile(tree, str(path), "exec"), module.__dict__
        )  # the upstream tests, with the stand-ins
    except Exception as exc:  # an unimportable file is reported, not extracted
        return [], [f"{path.name}: not importable ({type(exc).__name__}: {exc})"]
    found: list[tuple[str, Call]] = []
    skipped = []
    for attr, fn in list(vars(module).items()):
        if not (attr.startswith("test_") and callable(fn)):
            continue
        cases = _cases(fn)
        if cases is None:
            continue
        before = len(recorder.calls)
        module.__dict__.update(
            compare_strings=recorder.compare_strings,
            parse=recorder.parse,
            verify=recorder.verify,
            int=lambda x, *a: x if isinstance(x, Probe) else builtins.int(x, *a),
        )
        notes: Counter[str] = Counter()
        for kwargs in cases:
            start = len(recorder.calls)
            try:
                fn(**kwargs)
            except NotACase as exc:
                notes[str(exc)] += 1
            except TypeError as exc:  # fixtures the case does not give
                notes[f"needs fixtures ({exc})"] += 1
            for call in recorder.calls[start:]:
                if len(call.expected) != 1:
                    notes[f"a comparison checked {len(call.expected)} times"] += 1
                    continue
                found.append((attr, call))
        if len(recorder.calls) == before:
            why = "; ".join(sorted(notes)) or "no gold/prediction comparison"
            skipped.append(f"{path.name}::{attr} ({len(cases)} cases: {why})")
        elif notes:
            skipped.append(f"{path.name}::{attr}: some checks left out: {dict(notes)}")
    return found, skipped


def math_verify(call: Call) -> int:
    """math-verify's answer as the upstream test computes it (its helper, its options)."""
    from math_verify import ExprExtractionConfig, LatexExtractionConfig, parse, verify

    if call.helper == PARSE_VERIFY and call.options == DEFAULTS:
        return default_math_verify(call.gold, call.pred)
    targets: list[Any] = []
    for kind in call.options["match_types"]:
        if kind == "latex":
            targets.append(
                LatexExtractionConfig(boxed_match_priority=0)
                if call.helper == COMPARE
                else LatexExtractionConfig()
            )
        else:
            targets.append(ExprExtractionConfig())
    g, p = parse(call.gold, targets), parse(call.pred, targets)
    return int(
        verify(
            g,
            p,
            float_rounding=call.options["precision"],
            strict=call.options["strict"],
            allow_set_relation_comp=call.options["allow_set_relation_comp"],
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


def header(used: dict[str, list[str]]) -> str:
    parts = [f"{name} at {', '.join(commits)}" for name, commits in used.items()]
    return (
        "# Cases from huggingface/Math-Verify tests/: " + "; ".join(parts) + ". test_all.py: MIT "
        "License, Copyright (c) 2024 The HuggingFace Team (its header); the other files: Apache "
        "License 2.0 (the repository's LICENCE). See math_verify_cases.md.\n"
    )


def extract(args: list[str]) -> tuple[list[dict[str, Any]], dict[str, list[str]]]:
    """(rows in file order, file name -> commits read) over the DIR=COMMIT folders in order."""
    files: dict[str, dict[tuple[str, ...], dict[str, Any]]] = {}
    used: dict[str, list[str]] = {}
    real_tests = sys.modules.get("tests")
    try:
        for arg in args:
            folder, commit = arg.rsplit("=", 1)
            package = f"_math_verify_tests_{commit[:12]}"
            pkg = types.ModuleType(package)
            pkg.__path__ = [folder]
            sys.modules[package] = sys.modules["tests"] = pkg  # `from tests.test_all import ...`
            for path in sorted(Path(folder).glob("test_*.py")):
                calls, skipped = run_file(path, package)
                if path.stem == "test_all":
                    sys.modules["tests.test_all"] = sys.modules[f"{package}.test_all"]
                print(f"{path.name} @ {commit[:10]}: {len(calls)} comparisons")
                for note in skipped:
                    print(f"  skipped {note}")
                if not calls:
                    continue
                used.setdefault(path.name, []).append(commit)
                seen: Counter[tuple[str, ...]] = Counter()
                version: dict[tuple[str, ...], dict[str, Any]] = {}
                for function, call in calls:
                    group = f"{path.name}::{function}"
                    base = (group, call.gold, call.pred, describe(call.options))
                    seen[base] += 1
                    version[(*base, str(seen[base]))] = {
                        "call": call, "group": group, "commit": commit
                    }  # fmt: skip
                earlier = files.get(path.name, {})
                version.update({k: v for k, v in earlier.items() if k not in version})
                files[path.name] = version
    finally:
        for name in [m for m in sys.modules if m == "tests" or m.startswith("tests.")]:
            del sys.modules[name]
        if real_tests is not None:
            sys.modules["tests"] = real_tests
    rows = [row for name in sorted(files) for row in files[name].values()]
    return rows, used


def main(args: list[str]) -> None:
    rows, used = extract(args)
    with OUT.open("w", newline="", encoding="utf-8") as f:
        f.write(header(used))
        writer = csv.writer(f, quoting=csv.QUOTE_ALL, lineterminator="\n")
        writer.writerow(
            ["gold", "candidate", "expected", "group", "options", "scored", "helper", "commit"]
        )
        for row in rows:
            call: Call = row["call"]
            expected = call.expected[0]
            own = math_verify(call)
            default = default_math_verify(call.gold, call.pred)
            scored = 0 if (own == expected and default != expected) else 1
            writer.writerow(
                [call.gold, call.pred, expected, row["group"], describe(call.options), scored,
                 call.helper, row["commit"]]
            )  # fmt: skip
    print(f"{len(rows)} rows -> {OUT}")


if __name__ == "__main__":
    main(sys.argv[1:])
