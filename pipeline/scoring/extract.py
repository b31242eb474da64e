"""Pull the final answer out of a model completion.

Order of precedence: the last `\\boxed{...}` / `\\fbox{...}` (braces matched by a linear scan, so
nested braces and 100 000-character inputs are fine), else the text after the last `####`, else the
text after the last `Answer:` / `answer is` (case-insensitive), else the whole completion (the tiny
built-in model emits bare answers such as `17/3`). Every step is a constant number of `rfind` calls
plus one forward scan, so the cost is linear in the completion length.

Test: `.venv/bin/pytest tests/scoring/test_extract.py -q`
"""

from __future__ import annotations

_BOX_COMMANDS = ("\\boxed", "\\fbox")
_PHRASE_MARKERS = ("answer:", "answer is")


def _last_box_start(text: str) -> int:
    """Index just after the last `\\boxed` / `\\fbox` command name, or -1 when there is none."""
    best = -1
    for command in _BOX_COMMANDS:
        pos = text.rfind(command)
        if pos >= 0:
            best = max(best, pos + len(command))
    return best


def _braced_group(text: str, start: int) -> str | None:
    """Contents of the `{...}` group opening at or after `start` (skipping spaces), or None.

    Escaped braces `\\{` / `\\}` are ordinary characters. An unclosed group yields the rest of the
    text, which is what a completion cut off by the token limit looks like.
    """
    i, n = start, len(text)
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
                return text[i + 1 : j]
        j += 1
    return text[i + 1 :]


def boxed_content(text: str) -> str | None:
    """Contents of the last `\\boxed{}` / `\\fbox{}` in `text`, or None when there is none."""
    start = _last_box_start(text)
    if start < 0:
        return None
    return _braced_group(text, start)


def _first_line(text: str) -> str:
    """The first non-empty line of `text`, stripped (empty string when there is none)."""
    for line in text.splitlines():
        if line.strip():
            return line.strip()
    return ""


def _after_phrase(text: str) -> str | None:
    """Text after the last `Answer:` / `answer is` marker, up to the end of that line."""
    lowered = text.lower()
    best, best_end = -1, -1
    for marker in _PHRASE_MARKERS:
        pos = lowered.rfind(marker)
        if pos > best:
            best, best_end = pos, pos + len(marker)
    if best < 0:
        return None
    rest = _first_line(text[best_end:]).lstrip(":").strip()
    return rest.rstrip(".").strip()


def extract_answer(completion: str) -> tuple[str | None, bool]:
    """Return `(answer text or None, whether an explicit answer marker was found)`.

    None means there is nothing to judge (an empty or whitespace-only completion, or an empty
    marker such as `\\boxed{}`).
    """
    boxed = boxed_content(completion)
    if boxed is not None:
        return (boxed.strip() or None), True
    hashes = completion.rfind("####")
    if hashes >= 0:
        return (_first_line(completion[hashes + 4 :]) or None), True
    phrase = _after_phrase(completion)
    if phrase is not None:
        return (phrase or None), True
    stripped = completion.strip()
    return (stripped or None), False
