"""The `code` problem family: seeded, deterministic, opt-in, and every template's reference
solution passes its own hidden tests in the sandbox.

Run: `.venv/bin/pytest tests/problems/test_code_family.py -q`.
"""

from __future__ import annotations

import json
import random
import shutil
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

from pipeline.core.errors import SieveError
from pipeline.problems import FAMILIES, family_levels, generate, generate_mix, parse_levels
from pipeline.problems import code as family
from pipeline.problems.base import problem_id
from pipeline.problems.mix import DEFAULT_MIX
from pipeline.scoring import verify
from pipeline.scoring.code import decode_spec, encode_spec

needs_bwrap = pytest.mark.skipif(
    shutil.which("bwrap") is None, reason="bubblewrap not installed: apt-get install bubblewrap"
)
TEMPLATE_NAMES = sorted(t.function for group in family.TEMPLATES.values() for t in group)


def one_of(template: str, seed: int = 0) -> tuple[str, str, dict[str, object]]:
    """A problem of the given template (drawn from its level's stream)."""
    level = next(
        lv for lv, group in family.TEMPLATES.items() if template in {t.function for t in group}
    )
    rng = random.Random(seed)
    while True:
        question, answer, params = family.make(level, rng)
        if params["template"] == template:
            return question, answer, params


def test_generation_is_deterministic_with_unique_ids() -> None:
    levels = family_levels("code")
    assert levels == [1, 2, 3, 4, 5]
    first = generate("code", levels, 150, seed=4).drop("created_at")
    again = generate("code", levels, 150, seed=4).drop("created_at")
    assert first.equals(again)
    assert first["problem_id"].n_unique() == first.height == 150
    assert set(first["verifier"]) == {"code"} and set(first["family"]) == {"code"}
    other = generate("code", levels, 150, seed=5).drop("created_at")
    assert not first["problem_id"].equals(other["problem_id"])
    for row in first.iter_rows(named=True):
        assert row["problem_id"] == problem_id(row["question"], row["answer"], "code")


def test_answers_are_canonical_specs_matching_the_reference() -> None:
    frame = generate("code", family_levels("code"), 100, seed=9)
    for question, answer, params_text in frame.select("question", "answer", "params").iter_rows():
        spec = decode_spec(answer)
        params = json.loads(params_text)
        assert encode_spec(spec.function, spec.args, spec.expected) == answer
        assert spec.function == params["template"] and f"`{spec.function}(" in question
        assert len(spec.args) == family.N_TESTS and len({json.dumps(a) for a in spec.args}) == 8
        namespace: dict[str, object] = {}
        exec(family.reference_solution(params), namespace)
        reference = namespace[spec.function]
        assert callable(reference)
        got = [json.loads(json.dumps(reference(*args))) for args in spec.args]
        assert got == spec.expected, question
        assert question.isascii() and len(question) < 300


def test_same_question_same_tests_whatever_the_seed() -> None:
    pools = [generate("code", [1], 300, seed=s) for s in (1, 2)]
    joined = pools[0].join(pools[1], on="question", suffix="_other")
    assert joined.height > 0
    assert (joined["answer"] == joined["answer_other"]).all()


def test_opt_in_only_never_in_a_default() -> None:
    assert "code" not in FAMILIES
    assert "code" not in DEFAULT_MIX.families
    assert parse_levels("all", "code") == [1, 2, 3, 4, 5]
    frame = generate_mix({"code": "1-2", "arith": "1"}, 20, seed=0)
    assert set(frame["family"]) == {"code", "arith"}
    with pytest.raises(SieveError, match="not in code levels"):
        family.make(6, random.Random(0))
    for config in Path("data/configs").glob("*.toml"):
        assert "code" not in config.read_text().split(), config


def test_levels_are_described_and_templates_named_uniquely() -> None:
    assert all(text.strip() for text in family.LEVELS.values())
    assert set(family.TEMPLATES) == set(family.LEVELS)
    assert len(TEMPLATE_NAMES) == len(set(TEMPLATE_NAMES))


def test_reference_source_is_plain_python() -> None:
    _, _, params = one_of("balanced")
    source = family.reference_solution(params)
    assert source.startswith("KINDS = ") and "def balanced(s):" in source
    compile(source, "<reference>", "exec")


@needs_bwrap
@pytest.mark.parametrize("template", TEMPLATE_NAMES)
def test_every_template_reference_passes_its_tests_in_the_sandbox(template: str) -> None:
    _, answer, params = one_of(template)
    verdict = verify(family.reference_solution(params), answer, "code", timeout=5.0)
    assert verdict.correct is True, verdict
    wrong = f"def {template}(*args):\n    return 'nope'\n"
    assert verify(wrong, answer, "code", timeout=5.0).correct is False


def test_cli_generate_family_code(tmp_path: Path) -> None:
    args = ["generate", "--family", "code", "--n", "50", "--seed", "3", "--home", str(tmp_path)]
    result = subprocess.run(
        [sys.executable, "-m", "flows.cli", *args], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert "code: 50 problems" in " ".join(result.stdout.split())
    from pipeline.store import Ledger

    with Ledger.open(tmp_path) as ledger:
        stored = ledger.sql("select family, verifier from problems")
    assert isinstance(stored, pl.DataFrame)
    assert set(stored["family"]) == {"code"} and set(stored["verifier"]) == {"code"}
