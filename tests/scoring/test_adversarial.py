"""A generated adversarial suite: wrong-but-tempting completions a policy could discover, in every
class issue 28 names, none judged correct; and the mirrored direction, the right answer stated
once and plainly after working that mentions other numbers, always judged correct.

Classes (templates x golds x wrong values, >= 500 completions each): hedges and alternatives,
negations / relations / qualifiers, retractions, joined digits and superscripts, marks touching
the box. Every completion is judged in the default (chat, marker) mode, the one the RL path uses.
Two hypothesis properties cover random golds and wrong values: a completion whose committed final
answer is w is never correct whatever else it mentions (the gold included), and one whose
committed final answer is g always is.

Test: `.venv/bin/pytest tests/scoring/test_adversarial.py -q -s`
"""

from __future__ import annotations

import random
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipeline.scoring import verify, verify_batch

GOLDS = [7, 12, 25, 41, 42, 56, 64, 72, 89, 99, 105, 128, 250, 317, 480, 512, 666, 729, 904, 999]
GOLDS += [-3, -15, -42, -120]

HEDGES = [
    "\\boxed{{{w} or {g}}}",
    "\\boxed{{{g} or {w}}}",
    "Final Answer: {w} or {g}",
    "Final Answer: {g} or {w}",
    "The final answer is {w} (or maybe {g})",
    "The final answer is {g} (or maybe {w})",
    "\\boxed{{{w} \\text{{ or }} {g} \\text{{ or }} {v}}}",
    "\\boxed{{{g}\\text{{or}}{w}}}",
    "The answer is between {lo} and {hi}.",
    "\\boxed{{\\text{{between }} {lo} \\text{{ and }} {hi}}}",
    "\\boxed{{{g}, {w}}}",
    "\\boxed{{{w}; {g}}}",
    "\\boxed{{{g} \\text{{ and }} {w}}}",
    "The answer is either {g} or {w}.",
    "\\boxed{{{g} \\lor {w}}}",
    "\\boxed{{{g} \\pm 1}}",
    "\\boxed{{{g} ± 1}}",
    "\\boxed{{{w}}} or \\boxed{{{g}}}",
    "\\boxed{{{g}}} \\text{{ or }} \\boxed{{{w}}}",
    "The answer is {lo} to {hi}.",
    "\\boxed{{{lo}–{hi}}}",
    "Answer: probably {g}",
    "Answer: maybe {g}",
    "\\boxed{{\\text{{about }} {g}}}",
    "The answer is approximately {g}.",
    "\\boxed{{\\text{{at least }} {g}}}",
    "\\boxed{{\\text{{at most }} {g}}}",
    "Answer: roughly {g}",
    "Answer: {g} or so",
    "\\boxed{{\\text{{more than }} {w}}}",
]
NEGATIONS = [
    "\\boxed{{\\neq {g}}}",
    "\\boxed{{\\ne {g}}}",
    "\\boxed{{\\not= {g}}}",
    "\\boxed{{\\le {g}}}",
    "\\boxed{{\\leq {g}}}",
    "\\boxed{{\\geq {g}}}",
    "\\boxed{{\\ge {g}}}",
    "\\boxed{{< {g}}}",
    "\\boxed{{> {g}}}",
    "\\boxed{{\\lt {g}}}",
    "\\boxed{{\\approx {g}}}",
    "\\boxed{{\\sim {g}}}",
    "\\boxed{{x \\neq {g}}}",
    "\\boxed{{x < {g}}}",
    "\\boxed{{\\text{{not }} {g}}}",
    "Answer: not {g}",
    "\\boxed{{{g} \\text{{ is wrong}}}}",
    "Answer: {g} is wrong",
    "The answer is not {g}.",
    "\\boxed{{≠ {g}}}",
    "\\boxed{{≈ {g}}}",
    "\\boxed{{≤ {g}}}",
    "\\boxed{{{g} \\text{{ is incorrect}}}}",
    "Final Answer: The final answer is $\\neq {g}$. I hope it is correct.",
    "\\boxed{{\\text{{never }} {g}}}",
    "\\boxed{{{g}?}} \\text{{ no}}",
    # negation is a class (sieve-math/10): each of these was paid under sieve-math/9
    "\\boxed{{\\text{{cannot be }} {g}}}",
    "\\boxed{{\\text{{isn’t }} {g}}}",
    "\\boxed{{\\text{{doesn't equal }} {g}}}",
    "\\boxed{{\\text{{none }} {g}}}",
    "Answer: neither {g}",
    "\\boxed{{{g} \\text{{ is untrue}}}}",
    "\\boxed{{\\text{{anything but }} {g}}}",
    "\\boxed{{\\text{{negative }} {g}}}",
]
RETRACTIONS = [
    "Answer: {g}. No, actually {w}.",
    "\\boxed{{{g}}}. Wait, actually it is {w}.",
    "The answer is {g}. Actually, the answer is {w}.",
    "\\boxed{{{g}}}\n\nHmm, I made a mistake: it is {w}.",
    "The final answer is {g}. Oops, correction: {w}.",
    "\\boxed{{{g}}} is wrong, the result is {w}.",
    "#### {g}\nThe answer is {w}",
    "\\boxed{{{g}}}. So the answer is {w}.",
    "\\boxed{{{g}}}\nNo, {w}.",
    "Answer: {g}. Scratch that, {w}.",
    "The answer is {w}, not {g}.",
    "The answer is {w} (not {g})",
    "\\boxed{{{g}}}. On second thought, {w}.",
    "\\boxed{{{g}}}. It should be {w}.",
    "\\boxed{{{g}}}. Wait.",
    "Final Answer: The final answer is {g}. Actually no.",
    "\\boxed{{{g}}} -- I was wrong, the total is {w}.",
    "\\boxed{{{g}}}\n\nThe correct answer is {w}.",
    "The answer is {g}.\nWait, let me redo it: the answer is {w}.",
    "\\boxed{{{g}}}. That is not the answer.",
    "\\boxed{{{g}}}. Or maybe {w}.",
]
JOINED = [
    "\\boxed{{{a} {b}}}",
    "\\boxed{{{a}\\,{b}}}",
    "\\boxed{{{a}\\!{b}}}",
    "\\boxed{{{a}~{b}}}",
    "\\boxed{{{a}\\;{b}}}",
    "\\boxed{{{a}\\ {b}}}",
    "\\boxed{{{a}\\quad {b}}}",
    "Answer: {a} {b}",
    "The final answer is {a} {b}.",
    "#### {a} {b}",
    "\\boxed{{{g}²}}",
    "\\boxed{{{g}³}}",
    "Answer: {g}²",
    "\\boxed{{{g}⁴}}",
]
TOUCHING = [
    "-\\boxed{{{g}}}",
    "\\boxed{{{g}}}0",
    "\\boxed{{{g}}}5",
    "1\\boxed{{{g}}}",
    "\\sqrt{{\\boxed{{{g}}}}}",
    "\\boxed{{{g}}}^{{2}}",
    "\\boxed{{{g}}}^2",
    "\\boxed{{{g}}}\\times 2",
    "\\boxed{{{g}}} \\cdot 3",
    "\\frac{{\\boxed{{{g}}}}}{{2}}",
    "2\\times\\boxed{{{g}}}",
    "\\boxed{{{g}}}!",
    "$-\\boxed{{{g}}}$",
    "x = -\\boxed{{{g}}}",
    "\\boxed{{{g}}}*4",
    "\\boxed{{{g}}}/7",
    "\\sqrt[3]{{\\boxed{{{g}}}}}",
    "\\boxed{{{g}}}²",
]
PLAIN = [
    "We compute {a} + {b} = {s}, then {w} is not it. So the answer is \\boxed{{{g}}}.",
    "First, {w} is too big. Then we try again.\nFinal Answer: The final answer is {g}. "
    "I hope it is correct.",
    "Step 1: {a} + {b} = {s}\nStep 2: {w} - {w} = 0\n#### {g}",
    "Answer: {g}",
    "The answer is {g}.",
    "**Answer:** {g}",
    "$\\boxed{{{g}}}$",
    "Thus, $x = \\boxed{{{g}}}$.",
    "The answer is \\boxed{{{g}}}. I hope it is correct.",
    "I first thought {w}, but {a} + {b} = {s}, so the result is \\boxed{{{g}}}",
    "Checking {w} and {v}: neither works.\n\nThe final answer is $\\boxed{{{g}}}$",
    "- \\boxed{{{g}}}",
    "The total is {a} + {b} = {s}.\n\\boxed{{{g}}}\n\nThis is the number of apples.",
    "\\boxed{{{g}}} (since {a} + {b} = {s})",
    "Final Answer: The final answer is ${g}$. I hope it is correct.",
]
CLASSES = {
    "hedge": HEDGES,
    "negation": NEGATIONS,
    "retraction": RETRACTIONS,
    "joined": JOINED,
    "touching": TOUCHING,
}


def _fill(template: str, g: int, rng: random.Random) -> str | None:
    """The template for gold g with wrong values drawn from rng; None when it does not apply."""
    w = g + rng.choice([-3, -2, -1, 1, 2, 5, 10])
    v = w + rng.choice([1, 2, 3])
    lo, hi = sorted((g, w))
    digits = str(abs(g))
    if (
        "{a}" in template and "{b}" in template and "\\boxed" in template
    ) or "#### {a}" in template:
        if len(digits) < 2:
            return None
        cut = rng.randrange(1, len(digits))
        a, b = ("-" if g < 0 else "") + digits[:cut], digits[cut:]
        return template.format(a=a, b=b, g=g, w=w)
    if template.startswith(("Answer: {a}", "The final answer is {a}")):
        if len(digits) < 2:
            return None
        cut = rng.randrange(1, len(digits))
        return template.format(a=("-" if g < 0 else "") + digits[:cut], b=digits[cut:])
    if any(mark in template for mark in "²³⁴^") and g in (0, 1):
        return None  # 1² is 1
    if ("\\sqrt" in template or "!" in template) and g < 2:
        return None
    if template.startswith(("-\\boxed", "$-\\boxed", "x = -\\boxed")) and g == 0:
        return None
    return template.format(g=g, w=w, v=v, lo=lo, hi=hi)


LEADS = ["", "So ", "Thus the answer is ", "We get ", "Adding {a} and {b} gives {s}, and then "]


def cases(name: str) -> Iterator[tuple[str, str]]:
    """(completion, gold) pairs of one class: each template for each gold, behind lead-ins."""
    rng = random.Random(f"adversarial-{name}")
    for template in CLASSES[name]:
        for g in GOLDS:
            for lead in rng.sample(LEADS, 2):
                text = _fill(template, g, rng)
                if text is not None:
                    a, b = rng.randint(1, 40), rng.randint(1, 40)
                    yield lead.format(a=a, b=b, s=a + b) + text, str(g)


@pytest.mark.parametrize("name", sorted(CLASSES))
def test_no_wrong_but_tempting_completion_is_correct(name: str) -> None:
    pairs = list(dict.fromkeys(cases(name)))
    assert len(pairs) >= 500, f"{name}: only {len(pairs)} generated completions"
    verdicts = verify_batch([c for c, _ in pairs], [g for _, g in pairs], timeout=10.0)
    paid = [(c, g, v.detail) for (c, g), v in zip(pairs, verdicts, strict=True) if v.correct]
    errors = [c for (c, _), v in zip(pairs, verdicts, strict=True) if v.reason == "verifier_error"]
    print(f"{name}: {len(pairs)} completions, {len(paid)} judged correct")
    assert paid == [], paid[:10]
    assert errors == []


def test_plain_right_answers_stay_correct() -> None:
    rng = random.Random("adversarial-plain")
    pairs = []
    for template in PLAIN:
        for g in GOLDS:
            a = rng.randint(1, 50)
            b = rng.randint(1, 50)
            w = g + rng.choice([-2, -1, 1, 3])
            text = template.format(g=g, w=w, v=w + 1, a=a, b=b, s=a + b)
            pairs.append((text, str(g)))
    verdicts = verify_batch([c for c, _ in pairs], [g for _, g in pairs], timeout=10.0)
    missed = [(c, v.detail) for (c, _), v in zip(pairs, verdicts, strict=True) if not v.correct]
    print(f"plain: {len(pairs)} completions, recall {1 - len(missed) / len(pairs):.3f}")
    assert missed == []


WORKING = st.sampled_from(
    [
        "",
        "Let me think. ",
        "I first tried {g}, then {o}. ",
        "We know {o} + 1 = {o1}. The gold might be {g}. ",
        "Is it {g}? Or {o}? Let us compute carefully.\n",
    ]
)
FINAL = st.sampled_from(
    [
        "\\boxed{{{x}}}",
        "So the answer is \\boxed{{{x}}}.",
        "Final Answer: The final answer is {x}. I hope it is correct.",
        "#### {x}",
        "The answer is {x}.",
        "Answer: {x}",
        "$\\boxed{{{x}}}$",
    ]
)
TAIL = st.sampled_from(["", " I hope it is correct.", "\n\nThis completes the solution."])
VALUES = st.integers(min_value=-5000, max_value=5000)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(g=VALUES, w=VALUES, o=VALUES, working=WORKING, final=FINAL, tail=TAIL)
def test_committed_wrong_answer_is_never_correct(
    g: int, w: int, o: int, working: str, final: str, tail: str
) -> None:
    if w == g:
        return
    text = working.format(g=g, o=o, o1=o + 1) + final.format(x=w) + tail
    assert verify(text, str(g), timeout=10.0).correct is not True, text


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(g=VALUES, o=VALUES, working=WORKING, final=FINAL, tail=TAIL)
def test_committed_right_answer_is_correct(
    g: int, o: int, working: str, final: str, tail: str
) -> None:
    text = working.format(g=o, o=o, o1=o + 1) + final.format(x=g) + tail
    verdict = verify(text, str(g), timeout=10.0)
    assert verdict.correct is True, (text, verdict.detail)


# Two values joined by something the hedge scan does not name as a list: math-verify reads the
# last one, so each of these pays for one value at most. What a hedge would need is both.
JOINERS = ["{a} & {b}", "{a} \\& {b}", "{a} \\cup {b}", "{a} \\\\ {b}", "{a} \\mid {b}",
           "\\begin{{cases}} {a} \\\\ {b} \\end{{cases}}", "{a} = {b}", "{a}. If not, {b}.",
           "{a}.\nOr {b}.", "{a}. Alternatively, {b}."]  # fmt: skip


@pytest.mark.parametrize("joiner", JOINERS)
def test_two_joined_values_never_pay_for_both(joiner: str) -> None:
    pairs = [(g, g + d) for g in GOLDS for d in (1, 7)]
    texts = [f"The final answer is {joiner.format(a=a, b=b)}" for a, b in pairs]
    first = verify_batch(texts, [str(a) for a, _ in pairs], timeout=10.0)
    second = verify_batch(texts, [str(b) for _, b in pairs], timeout=10.0)
    both = [t for t, x, y in zip(texts, first, second, strict=True) if x.correct and y.correct]
    assert both == []
