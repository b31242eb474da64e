"""The "code" verifier: extraction, the test-spec format, strict comparison, verdicts, and the
one-line refusal without bubblewrap. Hostile code is in test_sandbox_hostile.py.

Run: `.venv/bin/pytest tests/scoring/test_code_verifier.py -q`
"""

from __future__ import annotations

import math
import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from pipeline.scoring import VERIFIERS, RewardSpec, verify, verify_batch
from pipeline.scoring import sandbox as sandbox_module
from pipeline.scoring.code import decode_spec, encode_spec, extract_code, same
from pipeline.scoring.sandbox import BWRAP_MISSING, Limits

needs_bwrap = pytest.mark.skipif(
    shutil.which("bwrap") is None, reason="bubblewrap not installed: apt-get install bubblewrap"
)
SPEC = encode_spec("f", [[[1, 2, 3, 4]], [[]], [[5, 7, 8]]], [6, 0, 8])
GOOD = "def f(xs):\n    return sum(x for x in xs if x % 2 == 0)\n"


# --- pure parts (no sandbox) ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("completion", "source", "fenced"),
    [
        ("```python\nA\n```", "A\n", True),
        ("text\n```py\nA\n```\nmore\n```python\nB\n```\n", "B\n", True),  # the last block
        ("```\nA\n```", "A\n", True),
        ("```python\nA = 1\n", "A = 1\n", True),  # unterminated (truncated) fence
        ("def f(): pass", "def f(): pass", False),
    ],
)
def test_extract_code(completion: str, source: str, fenced: bool) -> None:
    assert extract_code(completion) == (source, fenced)


def test_spec_is_canonical_json() -> None:
    assert SPEC == '{"args":[[[1,2,3,4]],[[]],[[5,7,8]]],"expected":[6,0,8],"function":"f"}'
    spec = decode_spec(SPEC)
    assert (spec.function, spec.args, spec.expected) == (
        "f",
        [[[1, 2, 3, 4]], [[]], [[5, 7, 8]]],
        [6, 0, 8],
    )
    assert (
        encode_spec("g", [(1, 2)], [(3, 4)]) == '{"args":[[1,2]],"expected":[[3,4]],"function":"g"}'
    )
    with pytest.raises(ValueError):
        encode_spec("f", [[1.0]], [math.nan])


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        ("42", "JSON object with args, expected and function"),
        ("not json", "not a JSON test spec"),
        ('{"args":[[1]],"expected":[1],"function":"class"}', "no valid function"),
        ('{"args":[1],"expected":[1],"function":"f"}', "list of argument lists"),
        ('{"args":[[1]],"expected":[],"function":"f"}', "one expected value per argument list"),
        ('{"args":[],"expected":[],"function":"f"}', "at least one"),
    ],
)
def test_bad_spec_is_a_verifier_error(answer: str, message: str) -> None:
    verdict = verify(GOOD, answer, "code")
    assert verdict.reason == "verifier_error" and verdict.reward is None
    assert message in verdict.detail


def test_same_is_strict_about_json_types() -> None:
    assert same([1, "a", None, {"k": [True]}], [1, "a", None, {"k": [True]}])
    assert not same(True, 1) and not same(1, True) and not same(2.0, 2) and not same(2, 2.0)
    assert same(0.1 + 0.2, 0.3) and not same(0.31, 0.3)
    assert not same([1, 2], [1, 2, 3]) and not same({"a": 1}, {"a": 1, "b": 2})


def test_registered_with_a_tests_component() -> None:
    assert "code" in VERIFIERS
    RewardSpec(weights={"correctness": 0.5, "tests": 0.5})  # "tests" is a known component


def test_refuses_without_bubblewrap(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # nothing to find there
    verdict = verify(GOOD, SPEC, "code")
    assert verdict.reason == "verifier_error" and verdict.reward is None
    assert verdict.detail == f"SandboxUnavailable: {BWRAP_MISSING}" and "\n" not in verdict.detail
    assert "apt-get install bubblewrap" in verdict.detail


def test_limits_reject_a_bad_deadline() -> None:
    with pytest.raises(ValueError, match="wall_s"):
        Limits(wall_s=0)


def test_no_code_is_no_answer() -> None:
    verdict = verify("  \n", SPEC, "code")
    assert verdict.reason == "no_answer" and verdict.reward == 0.0


# --- through the sandbox -------------------------------------------------------------------------


@needs_bwrap
@pytest.mark.parametrize("completion", [GOOD, f"Sure:\n```python\n{GOOD}```\nDone."])
def test_correct_solution_passes(completion: str) -> None:
    verdict = verify(completion, SPEC, "code")
    assert verdict.reason == "correct" and verdict.reward == 1.0, verdict
    assert verdict.components["tests"] == 1.0
    assert verdict.components["format"] == float("```" in completion)


@needs_bwrap
def test_wrong_solution_fails_with_partial_share() -> None:
    verdict = verify("def f(xs):\n    return sum(xs) if not xs else 6\n", SPEC, "code")
    assert verdict.reason == "wrong" and verdict.reward == 0.0
    assert verdict.components["tests"] == pytest.approx(2 / 3)
    assert verdict.detail.startswith("2/3 tests passed")
    partial = verify(
        "def f(xs):\n    return 6\n", SPEC, "code", spec=RewardSpec(weights={"tests": 1.0})
    )
    assert partial.reward == pytest.approx(1 / 3)


@needs_bwrap
@pytest.mark.parametrize(
    ("source", "detail"),
    [
        ("def f(xs) return 1", "load error: SyntaxError"),
        ("def g(xs):\n    return 6\n", "no function named 'f'"),
        ("def f(xs):\n    return xs[99]\n", "IndexError"),
        ("def f(xs):\n    return float(sum(x for x in xs if x % 2 == 0))\n", "0/3"),
        ("def f(xs):\n    return {1, 2}\n", "not plain JSON data"),
        ("def f(xs):\n    return float('inf')\n", "Out of range float"),
    ],
)
def test_failures_are_wrong_with_a_reason(source: str, detail: str) -> None:
    verdict = verify(source, SPEC, "code")
    assert verdict.reason == "wrong" and verdict.reward == 0.0, verdict
    assert detail in verdict.detail


@needs_bwrap
def test_tuples_dicts_strings_none_and_floats() -> None:
    answer = encode_spec("g", [[1], [2]], [[1, {"k": None}, "é"], [2, {"k": None}, "é"]])
    assert verify("def g(n):\n    return (n, {'k': None}, 'é')\n", answer, "code").correct
    floats = encode_spec("h", [[3]], [1 / 3])
    assert verify("def h(n):\n    return 1 / n\n", floats, "code").correct
    assert not verify("def h(n):\n    return 0.333\n", floats, "code").correct


@needs_bwrap
def test_arguments_are_fresh_per_test() -> None:
    answer = encode_spec("f", [[[1]], [[1]]], [1, 1])
    mutating = "def f(xs):\n    xs.append(0)\n    return len(xs) - 1\n"
    assert verify(mutating, answer, "code").correct


@needs_bwrap
def test_verify_batch_mixes_verifiers() -> None:
    verdicts = verify_batch(
        [GOOD, "\\boxed{4}", "def f(xs):\n    return 0\n"],
        [SPEC, "4", SPEC],
        ["code", "math", "code"],
    )
    assert [v.reason for v in verdicts] == ["correct", "correct", "wrong"]


@needs_bwrap
def test_threads_can_verify_concurrently() -> None:
    completions = [GOOD if i % 2 else "def f(xs):\n    return 1\n" for i in range(12)]
    with ThreadPoolExecutor(4) as pool:
        verdicts = list(pool.map(lambda c: verify(c, SPEC, "code"), completions))
    assert [v.correct for v in verdicts] == [bool(i % 2) for i in range(12)]


@needs_bwrap
def test_sandbox_that_cannot_start_is_a_verifier_error(monkeypatch: pytest.MonkeyPatch) -> None:
    real = sandbox_module._bwrap_args
    monkeypatch.setattr(sandbox_module, "_bwrap_args", lambda *a: ["--no-such-option", *real(*a)])
    verdict = verify(GOOD, SPEC, "code")
    assert verdict.reason == "verifier_error" and verdict.reward is None
    assert verdict.detail.startswith("SandboxError: sandbox failed to start: bwrap: Unknown option")
