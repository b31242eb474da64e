"""The committed-answer rule, tested by generated families in both directions.

Each family generates variations of one class of tempting wrong answer and its plain right twin:
the wrong one must never be paid, the right one always. Families:

* the lexicon's negating, alternative, conditional and hedging words in every language and
  script it holds (22), placed inside the box (in `\\text{}`, bare, split across two `\\text{}`
  pieces), in the clause that offers the box, in the rest of the box's sentence, and (other
  languages' denials and corrections) in the text after it;
* two boxes offered under conditions;
* scale words after a number (`5 million` is not 5, and is 5000000), units against a gold that
  states one (`5 km` is not `5 cm`; `5 centimeters` is), units a gold does not state;
* scientific notation (`1 \\times 10^{3}` is 1000);
* every bracket kind nested to every depth up to 60 around right and wrong answers: judged by the
  exact parser or refused as `too_deep`, never a timeout;
* real text: every completion the committed SmolLM2 pools paid before this rule
  (`real_right_answers.jsonl`, 162 rows from benchmarks/results/*pool*.parquet) and GSM8K-style
  worked solutions that end with a check sentence stay paid.

The families together judge more than 10,000 completions.

Test: `.venv/bin/pytest tests/scoring/test_committed_answer.py -q`
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.scoring import verify, verify_batch
from pipeline.scoring.depth import MAX_DEPTH, TOO_DEEP, peel
from pipeline.scoring.lexicon import FOREIGN, LEXICON, english_free_pattern, words
from pipeline.scoring.steps import StepContext
from pipeline.scoring.units import apply_scale

HERE = Path(__file__).parent
GOLDS = (7, 42, 315)
GOVERNING = ("negation", "alternative", "condition", "hedge")


def _judge(pairs: list[tuple[str, str]]) -> list[tuple[str, str, object, str]]:
    verdicts = verify_batch([c for c, _ in pairs], [g for _, g in pairs], timeout=10.0)
    return [(c, g, v.correct, v.detail) for (c, g), v in zip(pairs, verdicts, strict=True)]


def _paid(pairs: list[tuple[str, str]]) -> list[tuple[str, str, str]]:
    return [(c, g, d) for c, g, ok, d in _judge(pairs) if ok is True]


def _refused(pairs: list[tuple[str, str]]) -> list[tuple[str, str, str]]:
    return [(c, g, d) for c, g, ok, d in _judge(pairs) if ok is not True]


def _lexicon_words(categories: tuple[str, ...]) -> list[tuple[str, str]]:
    """(language, word) for every word of `categories`, one-letter Latin words excepted around
    the box (they are read as variables there; inside the box they are refused, see below)."""
    return [
        (lang, w)
        for lang, table in LEXICON.items()
        for cat in categories
        for w in table.get(cat, ())  # type: ignore[call-overload]
    ]


def test_the_lexicon_spans_at_least_fifteen_languages_and_five_scripts() -> None:
    assert len(LEXICON) >= 15
    scripts = {"Latn": "a", "Cyrl": "а", "Grek": "α", "Arab": "ا", "Hebr": "א", "Deva": "न"}
    seen = set()
    for table in LEXICON.values():
        text = "".join(w for ws in table.values() for w in ws)
        for name, sample in scripts.items():
            block = ord(sample) >> 7
            if any(ord(ch) >> 7 == block for ch in text):
                seen.add(name)
        if any("\u4e00" <= ch <= "\u9fff" for ch in text):
            seen.add("Hani")
    assert len(seen) >= 6, seen


INSIDE = (
    "The final answer is $\\boxed{{\\text{{{w} }}{g}}}$.",
    "The final answer is $\\boxed{{{g}\\text{{ {w}}}}}$.",
    "The final answer is $\\boxed{{{w} {g}}}$.",
    "So $\\boxed{{{g} \\text{{ ({w})}}}}$.",
)


@pytest.mark.parametrize("template", INSIDE)
def test_any_word_of_any_language_inside_the_box_is_refused(template: str) -> None:
    every = _lexicon_words(("negation", "alternative", "condition", "hedge", "denial"))
    pairs = [(template.format(w=w, g=g), str(g)) for _, w in every for g in GOLDS]
    assert len(pairs) > 900
    assert _paid(pairs) == []
    plain = [(template.format(w="", g=g).replace("\\text{ }", ""), str(g)) for g in GOLDS]
    assert _refused([(c.replace("\\text{}", ""), g) for c, g in plain]) == []


def test_a_negation_split_across_two_text_pieces_is_refused() -> None:
    pairs = []
    for _, w in _lexicon_words(("negation",)):
        if len(w) < 2:
            continue
        for cut in range(1, len(w)):
            for g in GOLDS:
                box = f"\\text{{{w[:cut]}}}\\text{{{w[cut:]} }}{g}"
                pairs.append((f"The final answer is $\\boxed{{{box}}}$.", str(g)))
    assert len(pairs) > 300
    assert _paid(pairs) == []


BEFORE = (
    "The answer is {w} $\\boxed{{{g}}}$.",
    "Therefore, {w} $\\boxed{{{g}}}$.",
    "So the result is {w} $\\boxed{{{g}}}$.",
)
AFTER_SAME = (
    "The answer is $\\boxed{{{g}}}$ {w} n is odd.",
    "The answer is $\\boxed{{{g}}}$, {w} 6.",
)


def _spaced_or_cjk(word: str) -> bool:
    """Words the scans around the box read: one-letter words of spaced scripts ("o", "ή") are
    read as variables there (inside the box they are refused, above)."""
    return len(word) > 1 or "\u3040" <= word <= "\ud7af"


@pytest.mark.parametrize("template", BEFORE + AFTER_SAME)
def test_a_governing_word_of_any_language_around_the_box_is_refused(template: str) -> None:
    every = [(lang, w) for lang, w in _lexicon_words(GOVERNING) if _spaced_or_cjk(w)]
    pairs = [(template.format(w=w, g=g), str(g)) for _, w in every for g in GOLDS]
    assert len(pairs) > 800
    assert _paid(pairs) == []
    plain = [(" ".join(template.format(w="", g=g).split()), str(g)) for g in GOLDS]
    assert _refused([(c.replace(" ,", ","), g) for c, g in plain]) == []


def test_another_language_withdrawing_the_answer_after_it_is_refused() -> None:
    foreign = english_free_pattern(FOREIGN, ("negation", "denial", "correction"))  # type: ignore[arg-type]
    tails = sorted(
        w
        for w in words(FOREIGN, ("negation", "denial", "correction"))  # type: ignore[arg-type]
        if foreign.fullmatch(w)
    )
    assert len(tails) > 150
    pairs = [
        (f"The answer is $\\boxed{{{g}}}$. {w.capitalize()}, {note}", str(g))
        for w in tails
        for g in GOLDS
        for note in ("…", "7.")
    ]
    assert _paid(pairs) == []


def test_two_boxes_offered_under_conditions_are_refused() -> None:
    conditions = [w for _, w in _lexicon_words(("condition",)) if _spaced_or_cjk(w)]
    alternatives = [w for _, w in _lexicon_words(("alternative",)) if _spaced_or_cjk(w)]
    pairs = []
    for g in GOLDS:
        other = g + 1
        for c in conditions:
            pairs.append(
                (f"$\\boxed{{{other}}}$ if n is even, $\\boxed{{{g}}}$ {c} n is odd.", str(g))
            )
        for a in alternatives:
            pairs.append((f"{a.capitalize()} $\\boxed{{{other}}}$, {a} $\\boxed{{{g}}}$.", str(g)))
            pairs.append((f"If n is even, $\\boxed{{{other}}}$; {a} $\\boxed{{{g}}}$.", str(g)))
    assert len(pairs) > 200
    assert _paid(pairs) == []


SCALES = {"hundred": 100, "thousand": 1000, "million": 10**6, "billion": 10**9, "dozen": 12}
SCALE_FORMS = ("\\boxed{{{n}\\text{{ {s}}}}}", "\\boxed{{{n} \\text{{{s}}}}}", "\\boxed{{{n} {s}}}")


def test_a_scale_word_changes_the_value() -> None:
    wrong, right = [], []
    for s, mult in SCALES.items():
        for n in (2, 5, 12, 3.5):
            for form in SCALE_FORMS:
                c = f"The final answer is ${form.format(n=n, s=s)}$."
                wrong.append((c, str(n)))
                value = n * mult
                right.append((c, str(int(value)) if value == int(value) else str(value)))
    for n in (2, 4, 9):
        wrong.append((f"The final answer is $\\boxed{{{n} \\text{{ squared}}}}$.", str(n)))
        right.append((f"The final answer is $\\boxed{{{n} \\text{{ squared}}}}$.", str(n * n)))
        wrong.append((f"The final answer is $\\boxed{{{n} \\text{{ cubed}}}}$.", str(n)))
        right.append((f"The final answer is $\\boxed{{{n} \\text{{ cubed}}}}$.", str(n**3)))
    assert _paid(wrong) == []
    assert _refused(right) == []


UNITS = {
    "cm": ("cm", "centimeters", "centimetres"),
    "km": ("km", "kilometers"),
    "m": ("meters", "metres"),
    "kg": ("kg", "kilograms"),
    "g": ("grams",),
    "h": ("hours", "hrs"),
    "min": ("minutes", "min"),
    "usd": ("dollars",),
    "ft": ("feet", "ft"),
}


def test_a_unit_must_be_the_golds_when_the_gold_states_one() -> None:
    wrong, right = [], []
    for gold_unit, gold_spellings in UNITS.items():
        for cand_unit, cand_spellings in UNITS.items():
            for gs in gold_spellings[:1]:
                for cs in cand_spellings:
                    for n in (5, 18):
                        c = f"The final answer is $\\boxed{{{n} \\text{{ {cs}}}}}$."
                        (right if gold_unit == cand_unit else wrong).append((c, f"{n} {gs}"))
    assert len(wrong) > 150
    assert _paid(wrong) == []
    assert _refused(right) == []


def test_a_unit_the_gold_does_not_state_is_ignored_and_question_nouns_are_allowed() -> None:
    pairs = [
        (f"The final answer is $\\boxed{{{n} \\text{{ {u}}}}}$.", str(n))
        for spellings in UNITS.values()
        for u in spellings
        for n in (5, 18, 250)
    ]
    assert _refused(pairs) == []
    ctx = StepContext(question="Anna bakes 3 trays of 6 cookies. How many cookies does she bake?")
    right = verify("The final answer is $\\boxed{18 \\text{ cookies}}$.", "18", context=ctx)
    assert right.correct is True
    no_question = verify("The final answer is $\\boxed{18 \\text{ cookies}}$.", "18")
    assert no_question.correct is False and no_question.detail == "hedged: cookies"
    negated = verify(
        "The final answer is $\\boxed{\\text{not } 18 \\text{ cookies}}$.", "18", context=ctx
    )
    assert negated.correct is False


SCIENTIFIC = (
    "{m} \\times 10^{{{e}}}",
    "{m}\\cdot10^{{{e}}}",
    "{m} × 10^{e}",
)


def test_scientific_notation_is_a_number() -> None:
    right, wrong = [], []
    for m in (1, 2.5, 7):
        for e in (2, 3, 6):
            value = m * 10**e
            gold = str(int(value)) if value == int(value) else str(value)
            for form in SCIENTIFIC:
                c = f"The final answer is $\\boxed{{{form.format(m=m, e=e)}}}$."
                right.append((c, gold))
                wrong.append((c, str(int(m * 10 ** (e + 1)))))
    for e in (2, 3, 5):
        right.append((f"The final answer is $\\boxed{{10^{{{e}}}}}$.", str(10**e)))
        right.append((f"The final answer is $\\boxed{{10^{e}}}$.", str(10**e)))
    assert _refused(right) == []
    assert _paid(wrong) == []
    assert apply_scale("2^{10}") == "2^{10}"  # a power of another base is still unevaluated


KINDS = (("{", "}"), ("(", ")"), ("[", "]"), ("\\left(", "\\right)"), ("\\left[", "\\right]"))


@pytest.mark.parametrize(("opener", "closer"), KINDS)
def test_every_bracket_kind_at_every_depth_is_judged_without_a_timeout(
    opener: str, closer: str
) -> None:
    pairs = []
    for d in (1, 5, 9, 15, 25, 40, 60):
        for g in (5, 42):
            for value in (g, g + 1):
                box = opener * d + str(value) + closer * d
                pairs.append((f"The final answer is $\\boxed{{{box}}}$.", str(g)))
    judged = _judge(pairs)
    assert [d for *_, ok, d in judged if ok is None] == []  # no verifier_error, no timeout
    for (c, g), (_, _, ok, _) in zip(pairs, judged, strict=True):
        assert ok is (c.count(g) == 1 and f"{int(g) + 1}" not in c.replace(g, "", 1)), c


@settings(max_examples=60, deadline=None, derandomize=True)
@given(
    layers=st.lists(st.sampled_from(KINDS), min_size=MAX_DEPTH + 1, max_size=40),
    g=st.integers(1, 999),
    wrong=st.booleans(),
)
def test_mixed_deep_nesting_is_decided_by_the_exact_parser(
    layers: list[tuple[str, str]], g: int, wrong: bool
) -> None:
    value = g + 1 if wrong else g
    box = "".join(o for o, _ in layers) + str(value) + "".join(c for _, c in reversed(layers))
    v = verify(f"The final answer is $\\boxed{{{box}}}$.", str(g), timeout=10.0)
    assert v.reason != "verifier_error"
    assert v.correct is (not wrong)


def test_a_deep_expression_that_the_exact_parser_cannot_read_is_too_deep_not_a_timeout() -> None:
    nested = "1"
    for _ in range(40):
        nested = f"\\frac{{{nested}}}{{2}}"
    v = verify(f"The final answer is $\\boxed{{{nested}}}$.", "\\frac{1}{3}")
    assert (v.correct, v.detail) == (False, TOO_DEEP)
    tuple_kept = peel("(1, 2)")
    assert tuple_kept == "(1, 2)"
    assert peel("((((1, 2))))") == "(1, 2)"
    assert peel("\\{1, 2\\}") == "\\{1, 2\\}"


def test_the_right_answers_real_models_wrote_stay_paid() -> None:
    rows = [json.loads(line) for line in (HERE / "real_right_answers.jsonl").open()]
    assert len(rows) == 162
    verdicts = verify_batch(
        [r["completion"] for r in rows],
        [r["gold"] for r in rows],
        [r["verifier"] for r in rows],
        timeout=10.0,
        truncated=[r["finish"] == "length" for r in rows],
        contexts=[StepContext(r["question"], r["family"], r["params"]) for r in rows],
    )
    refused = [
        (r["completion"][-120:], v.detail)
        for r, v in zip(rows, verdicts, strict=True)
        if v.correct is not True
    ]
    assert refused == []


CHECKS = (
    "\nCheck: {a} + {b} = {s}, which matches.",
    "\nCheck: {s} - {b} = {a}. ✓",
    "\n\nLet me verify: {a} plus {b} is {s}. Correct.",
    "\nSo the answer {s} makes sense.",
)


def test_worked_solutions_ending_with_a_check_sentence_stay_paid() -> None:
    lines = (HERE.parents[1] / "pipeline/problems/examples/gsm8k_style.jsonl").read_text()
    pairs = []
    for row in map(json.loads, lines.splitlines()):
        solution = row["answer"]
        gold = solution.rsplit("####", 1)[1].strip().replace(",", "")
        body = solution.rsplit("####", 1)[0].rstrip()
        for check in CHECKS:
            tail = check.format(a=1, b=int(gold) - 1 if gold.isdigit() else 0, s=gold)
            pairs.append((f"{body}\n#### {gold}{tail}", gold))
            pairs.append((f"{body}\nThe final answer is $\\boxed{{{gold}}}$.{tail}", gold))
    assert len(pairs) >= 40
    assert _refused(pairs) == []


def test_earlier_findings_stay_closed() -> None:
    """The round's reported instances, each as first written."""
    cases = [
        ("The final answer is $\\boxed{\\text{nicht } 5}$.", "5", False),
        ("The final answer is $\\boxed{\\text{ne pas } 5}$.", "5", False),
        ("The final answer is $\\boxed{\\text{не } 5}$.", "5", False),
        ("The final answer is $\\boxed{4 \\text{或} 5}$.", "5", False),
        ("The final answer is $\\boxed{4 \\text{ или } 5}$.", "5", False),
        ("The answer is not $\\boxed{5}$.", "5", False),
        ("If n is even the answer is $\\boxed{4}$, otherwise $\\boxed{5}$.", "5", False),
        ("The answer is $\\boxed{5}$. Actually, that is wrong.", "5", False),
        ("The final answer is $\\boxed{5\\text{ million}}$.", "5", False),
        ("The final answer is $\\boxed{5 \\text{ thousand}}$.", "5", False),
        ("The final answer is $\\boxed{5 \\text{ dozen}}$.", "5", False),
        ("The final answer is $\\boxed{4 \\text{ squared}}$.", "4", False),
        ("The final answer is $\\boxed{5 \\text{ km}}$.", "5 cm", False),
        ("The final answer is $\\boxed{\\text{n}\\text{ot } 5}$.", "5", False),
        ("The final answer is $\\boxed{1 \\times 10^{3}}$.", "1000", True),
        ("The final answer is $\\boxed{10^3}$.", "1000", True),
        ("The final answer is $\\boxed{" + "{" * 15 + "5" + "}" * 15 + "}$.", "5", True),
        ("The final answer is $\\boxed{" + "(" * 40 + "5" + ")" * 40 + "}$.", "5", True),
        ("The final answer is $\\boxed{" + "[" * 60 + "5" + "]" * 60 + "}$.", "5", True),
    ]
    for text, gold, paid in cases:
        v = verify(text, gold, timeout=10.0)
        assert v.correct is paid, (text, v.detail)
