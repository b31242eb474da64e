"""Pull the final answer out of a model completion, and say which answer marker it came from.

Order of precedence:
1. the last `\\boxed{...}` / `\\fbox{...}` (braces matched by a linear scan, so nested braces and
   100 000-character inputs are fine) — unless a `Final Answer:` / `final answer is` phrase
   follows it, which then wins (the Minerva format ends "Final Answer: The final answer is X.");
   several boxes in a row separated only by connectors (`\\boxed{-2} and \\boxed{1}`,
   `\\boxed{1}\\boxed{2}`) are one answer, their contents joined by ", " (a set or tuple, as
   math-verify reads them);
2. the `final answer` phrase when there is no box;
3. the text after the last `####` (first line);
4. the text after the last `Answer:` / `answer is` (case-insensitive);
5. else no marker: the whole completion (the tiny built-in model emits bare answers like `17/3`).

A single box is read with the marks that touch it and change its value: a sign or operator
before it (`-\\boxed{42}` is -42, `3\\times\\boxed{4}` is `3\\times4`), a command it is the
argument of (`\\sqrt{\\boxed{42}}`, `\\frac{\\boxed{1}}{2}`), and digits, an exponent, a
factorial or a product right after it (`\\boxed{42}0` is 420, `\\boxed{42}^{2}`,
`\\boxed{42}\\times 2`).
`Extracted.end` is where the answer's span ends: the text after it is the "tail" that
pipeline/scoring/commit.py reads for retractions.

A phrase's answer runs to the end of its sentence (`. ` or the line end), so "The final answer is
12,000,023. I hope it is correct." gives `12,000,023`. A phrase followed by a numbered list on the
next line ("Answer:\\n1. Define ...") gives no answer: the `1` is a list number. Each step is a
bounded number of `rfind` calls plus forward scans over disjoint spans, so the cost is linear in
the completion length.

Test: `.venv/bin/pytest tests/scoring/test_extract.py -q`
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

Marker = Literal["boxed", "final", "hashes", "phrase"]
_BOX_COMMANDS = ("\\boxed", "\\fbox")
_FINAL_MARKERS = ("final answer is", "final answer:")
_PHRASE_MARKERS = ("answer:", "answer is")
_MAX_GROUP = 8  # boxes joined into one answer, at most
_MAX_GAP = 40  # characters between two boxes of one answer, at most
# What may stand between two boxes of one answer: spacing, punctuation, `$`, `\\quad`, `and`/`or`,
# a short `\\text{...}` ("for part (a) and"), and the label of the next part (`y_2 =`, `b =`:
# "\\( y_1 = \\boxed{...} \\) and \\( y_2 = \\boxed{...} \\)", sieve-math/10). Joined boxes are one
# answer of several values, so a single-value gold still rejects them (pipeline/scoring/commit.py).
_CONNECTOR = re.compile(
    r"(?:\s|[,;.&$()\[\]{}]|\\text\{[^{}]{0,30}\}|\\[A-Za-z]+|\\[,;!()\[\]]|\band\b|\bor\b"
    r"|(?<![A-Za-z\\])[A-Za-z](?:_\{?[A-Za-z0-9]{1,3}\}?)?\s*=)*"
)
_SENTENCE_END = re.compile(r"(?<!\.)\.(?=\s|$)")  # not the dots of an ellipsis
_LIST_ITEM = re.compile(r"\d{1,3}[.)]\s+\S")


@dataclass(frozen=True, slots=True)
class Extracted:
    """An extracted answer (None when there is nothing to judge) and the marker it came from."""

    text: str | None
    marker: Marker | None  # None: no answer marker, `text` is the whole completion
    end: int = -1  # index just after the answer's span in the completion (-1: the end)
    start: int = -1  # index where the answer's marker or box opens (-1: no marker)


def _last_box(text: str, end: int) -> tuple[int, int]:
    """(command start, index just after the command name) of the last box before `end`."""
    best, after = -1, -1
    for command in _BOX_COMMANDS:
        pos = text.rfind(command, 0, end)
        if pos > best:
            best, after = pos, pos + len(command)
    return best, after


def _braced_group(text: str, start: int, stop: int | None = None) -> tuple[str, int] | None:
    """(contents, end) of the `{...}` group opening at or after `start` (skipping spaces).

    `end` is the index after the closing brace. Escaped braces `\\{` / `\\}` are ordinary
    characters. An unclosed group yields the rest of the text (a completion cut off by the token
    limit), or None when `stop` is given and the group does not close before it.
    """
    n = len(text) if stop is None else stop
    i = start
    while i < n and text[i] == " ":
        i += 1
    if i >= n or text[i] != "{":
        return None
    depth, j = 0, i
    while j < n:
        ch = text[j]
        if ch == "\\":
            j += 2
            continue
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                return text[i + 1 : j], j + 1
        j += 1
    return None if stop is not None else (text[i + 1 :], len(text))


def boxed_content(text: str, *, closed: bool = False) -> str | None:
    """Contents of the last `\\boxed{}` / `\\fbox{}` in `text`, or None when there is none
    (`closed`: nor when its braces do not close; a cut-off completion's box runs to the end)."""
    start, after = _last_box(text, len(text))
    if start < 0:
        return None
    group = _braced_group(text, after, stop=len(text) if closed else None)
    return None if group is None else group[0]


# What may touch a box and change its value (see the module doc). Spaces and tabs only: a line
# break ends the box's expression. Every pattern is anchored and bounded.
_ENCLOSING = re.compile(
    r"(\\(?:sqrt|frac|dfrac|tfrac|binom|log|ln|exp|sin|cos|tan)(?:\[[^\]]{0,20}\])?|[\^_])"
    r"[ \t]*\{[ \t]*\Z"
)
_TWO_ARGS = ("\\frac", "\\dfrac", "\\tfrac", "\\binom")
_BEFORE = re.compile(
    r"(?P<operand>\d+(?:\.\d+)?[ \t]*)?"
    r"(?P<op>\\times|\\cdot|\\div|\\pm|\\mp|\\sqrt|[-+*/×·÷^±−])[ \t]*\Z"
    r"|(?P<digits>\d+)\Z"
)
_AFTER = re.compile(
    r"\d+"
    r"|[ \t]*[\^_][ \t]*(?:\{[^{}]{0,40}\}|\\[A-Za-z]+|[A-Za-z0-9])"
    r"|[ \t]*(?:\\times|\\cdot|\\div|[*/×·÷])[ \t]*[-+]?[ \t]*"
    r"(?:\d+(?:\.\d+)?|\{[^{}]{0,40}\}|\\[A-Za-z]+(?:\{[^{}]{0,40}\})*)"
    r"|!(?!=)|[⁰¹²³⁴⁵⁶⁷⁸⁹]+"
)
_LOOKBACK = 48


def _touching(text: str, start: int, end: int, content: str) -> tuple[str, int, int]:
    """`content` of the box at text[start:end] read with the marks touching it; new start and
    end."""
    head = text[max(0, start - _LOOKBACK) : start]
    enclosing = _ENCLOSING.search(head)
    if enclosing is not None:
        closing = _braced_close(text, end)
        if closing >= 0:
            command = enclosing.group(1)
            inner = f"{command}{{{content}}}"
            end = closing
            if command in _TWO_ARGS:
                second = _braced_group(text, end)
                if second is not None:
                    inner += f"{{{second[0]}}}"
                    end = second[1]
            content = inner
            start = max(0, start - _LOOKBACK) + enclosing.start()
            head = text[max(0, start - _LOOKBACK) : start]
    before = _BEFORE.search(head)
    if before is not None and _is_bullet(text, start - len(head) + before.start(), before):
        before = None  # "- \\boxed{42}" at the start of a line is a list bullet, not a sign
    if before is not None:
        start -= len(head) - before.start()
        if before.group("digits") is not None:
            content = before.group("digits") + content
        else:
            content = (before.group("operand") or "") + before.group("op") + content
    after = _AFTER.match(text, end)
    if after is not None:
        content += after.group(0)
        end = after.end()
    return content, start, end


def _is_bullet(text: str, at: int, before: re.Match[str]) -> bool:
    """True when the mark before a box is a list bullet: `-`, `+` or `*` opening a line, followed
    by a space."""
    op = before.group("op")
    if op not in ("-", "+", "*") or before.group("operand") or before.group(0) == op:
        return False
    line_start = text.rfind("\n", 0, at) + 1
    return not text[line_start:at].strip(" \t")


def _braced_close(text: str, end: int) -> int:
    """Index after the `}` that closes the group a box sits in (spaces allowed), or -1."""
    i = end
    while i < len(text) and text[i] in " \t":
        i += 1
    return i + 1 if i < len(text) and text[i] == "}" else -1


def _box_group(text: str) -> tuple[str, int, int] | None:
    """(answer, start, end) of the last box, joined with the boxes just before it (see module
    doc)."""
    start, after = _last_box(text, len(text))
    if start < 0:
        return None
    last = _braced_group(text, after)
    if last is None:
        return None
    contents, end = [last[0].strip()], last[1]
    while len(contents) < _MAX_GROUP:
        prev_start, prev_after = _last_box(text, start)
        if prev_start < 0:
            break
        prev = _braced_group(text, prev_after, stop=start)
        if prev is None or start - prev[1] > _MAX_GAP:
            break
        if _CONNECTOR.fullmatch(text, prev[1], start) is None:
            break
        contents.append(prev[0].strip())
        start = prev_start
    unique = list(dict.fromkeys(reversed(contents)))
    if len(contents) == 1:
        return _touching(text, start, end, contents[0])
    return ", ".join(unique), start, end


def _rfind_any(lowered: str, markers: tuple[str, ...]) -> tuple[int, int]:
    """(start, end) of the last occurrence of any of `markers`, or (-1, -1)."""
    best, best_end = -1, -1
    for marker in markers:
        pos = lowered.rfind(marker)
        if pos > best:
            best, best_end = pos, pos + len(marker)
    return best, best_end


def _clean(answer: str) -> str:
    """Strip emphasis, quotes and one trailing sentence mark from a phrase's answer."""
    s = answer.strip().strip("*").strip()
    if len(s) >= 2 and s[0] == s[-1] and s[0] in "\"'":
        s = s[1:-1].strip()
    if s.endswith(".") and not s.endswith(".."):
        s = s[:-1].rstrip()
    return s


def _phrase_answer(text: str, end: int) -> tuple[str, int]:
    """(answer, end of its span) after a phrase marker ending at `end`: the rest of its
    sentence ("" if none)."""
    rest = text[end:]
    stripped = rest.lstrip(" \t:*")
    next_line = stripped.startswith(("\n", "\r"))
    stripped = stripped.lstrip()
    offset = end + len(rest) - len(stripped)
    line_end = stripped.find("\n")
    line = stripped if line_end < 0 else stripped[:line_end]
    if next_line and _LIST_ITEM.match(line):
        return "", offset  # "Answer:\n1. Define ..." is a numbered list, not the answer 1
    cut = _SENTENCE_END.search(line)
    if cut is not None:
        line = line[: cut.start()]
    return _clean(line.lstrip(":").strip()), offset + len(line)


def _first_line(text: str, start: int) -> tuple[str, int]:
    """(first non-empty line of `text[start:]` stripped, index after it); ("", end) if none."""
    i = start
    n = len(text)
    while i < n:
        stop = text.find("\n", i)
        stop = n if stop < 0 else stop
        line = text[i:stop].strip()
        if line:
            return line, stop
        i = stop + 1
    return "", n


# The last call's (completion, result): the verifier and the step checker extract the same
# completion one after the other. One tuple, replaced whole, so threads see a consistent pair.
_last: tuple[str, Extracted] | None = None


def extract(completion: str) -> Extracted:
    """The answer of `completion` and its marker, by the precedence in the module docstring."""
    global _last
    last = _last
    if last is not None and (last[0] is completion or last[0] == completion):
        return last[1]
    found = _extract(completion)
    _last = (completion, found)
    return found


def _extract(completion: str) -> Extracted:
    lowered = completion.lower()
    final_start, final_end = _rfind_any(lowered, _FINAL_MARKERS)
    group = _box_group(completion)
    if final_start >= 0 and (group is None or final_start >= group[2]):
        answer, end = _phrase_answer(completion, final_end)
        if answer or group is None:  # an empty "Final Answer:" after a box leaves the box
            return Extracted(answer or None, "final", end, final_start)
    if group is not None:
        return Extracted(group[0].strip() or None, "boxed", group[2], group[1])
    hashes = completion.rfind("####")
    if hashes >= 0:
        line, end = _first_line(completion, hashes + 4)
        return Extracted(line or None, "hashes", end, hashes)
    phrase_start, phrase_end = _rfind_any(lowered, _PHRASE_MARKERS)
    if phrase_start >= 0:
        answer, end = _phrase_answer(completion, phrase_end)
        return Extracted(answer or None, "phrase", end, phrase_start)
    return Extracted(completion.strip() or None, None, len(completion))


def extract_answer(completion: str) -> tuple[str | None, bool]:
    """`(answer text or None, whether an explicit answer marker was found)`; see `extract`.

    None means there is nothing to judge (an empty or whitespace-only completion, or an empty
    marker such as `\\boxed{}`).
    """
    found = extract(completion)
    return found.text, found.marker is not None
