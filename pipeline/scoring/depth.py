"""Bounded nesting: an answer's brackets are counted in this process before math-verify sees it.

math-verify's parser is exponential in nesting: a right answer inside 15 braces, 40 parentheses
or 60 `\\left(` ran past the 3 s deadline, and every verdict on a gold of 40 nested `\\frac` was
a timeout. So, in one linear scan:

* `peel` removes pairs that wrap the whole answer and change nothing: braces always, parentheses
  and brackets when they hold one value (no top-level `,` or `;`; `(1, 2)` is a tuple and
  stays), `\\left` / `\\right` sizing with them. `{{{{5}}}}` and `((((5))))` are 5 and the exact
  parser judges them.
* `depth` is the deepest nesting of `(`, `[`, `{` (`\\left(` and `\\{` included) left after that.
  An answer or gold deeper than `MAX_DEPTH` is never handed to math-verify: the exact parser
  decides it, or the verdict is wrong with the detail `too_deep`; ingest refuses a gold of that
  kind, since no completion could be judged against it.

Test: `.venv/bin/pytest tests/scoring/test_depth.py -q`
"""

from __future__ import annotations

import re

# Deepest nesting handed to math-verify. Real answers nest 2-4 deep (`\\frac{\\sqrt{2}}{2}`,
# `\\left(\\frac{1}{2}\\right)^{2}`). Measured on 2 busy cores (math-verify 0.9, a wrong
# answer inside n braces, worker start included): n = 8 took 0.6 s, 10 took 0.9 s, 12 took
# 2.6 s and 14 took 8.9 s, so 8 keeps a verdict well inside the 3 s default deadline.
MAX_DEPTH = 8
TOO_DEEP = "too_deep"

_SIZING = re.compile(
    r"\\(?:left|right|bigl|bigr|Bigl|Bigr|biggl|biggr|Biggl|Biggr|big|Big)(?![A-Za-z])"
)
_OPEN = {"(": ")", "[": "]", "{": "}"}
_CLOSE = {")", "]", "}"}


def _unsized(text: str) -> str:
    """`text` without `\\left` / `\\right` sizing commands (`\\left.` drops its dot too)."""
    if "\\" not in text:
        return text
    return _SIZING.sub("", text.replace("\\left.", "").replace("\\right.", ""))


def _pairs(text: str) -> tuple[list[int], list[bool]]:
    """For each index, the index of the bracket that closes the one opening there (-1 if none),
    and whether a `,` / `;` sits directly inside it. Escaped `\\{` `\\}` are brackets too."""
    match = [-1] * len(text)
    separated = [False] * len(text)
    stack: list[int] = []
    for i, ch in enumerate(text):
        if ch in _OPEN:
            stack.append(i)
        elif ch in _CLOSE:
            if stack and _OPEN[text[stack[-1]]] == ch:
                match[stack.pop()] = i
            else:
                stack.clear()  # unbalanced: nothing outside it is a clean pair
        elif ch in ",;" and stack:
            separated[stack[-1]] = True
    return match, separated


def peel(text: str) -> str:
    """`text` without the bracket pairs that wrap all of it and change nothing (module doc)."""
    s = _unsized(text).strip()
    if not s or s[0] not in _OPEN:
        return text.strip()
    match, separated = _pairs(s)
    i, j = 0, len(s) - 1
    while i < j and s[i] in _OPEN and match[i] == j:
        escaped = i > 0 and s[i - 1] == "\\"
        if escaped or (s[i] != "{" and separated[i]):
            break
        i, j = i + 1, j - 1
        while i < j and s[i] == " ":
            i += 1
        while j > i and s[j] == " ":
            j -= 1
    peeled = s[i : j + 1]
    if peeled.endswith("\\") or not peeled:  # never leave a dangling escape
        return text.strip()
    return peeled if i > 0 else text.strip()


def depth(text: str) -> int:
    """The deepest nesting of brackets in `text` (unbalanced closers ignored)."""
    deepest = level = 0
    for ch in text:
        if ch in _OPEN:
            level += 1
            deepest = max(deepest, level)
        elif ch in _CLOSE and level:
            level -= 1
    return deepest


def too_deep(text: str) -> bool:
    """True when `text`, peeled, nests deeper than `MAX_DEPTH`."""
    return depth(peel(text)) > MAX_DEPTH
