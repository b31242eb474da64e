"""One exception type for errors a user can fix, and how data text is shown to a user.

The CLI prints a `SieveError` as one line (`error: ...`) and exits non-zero; anything else is a bug
and keeps its traceback. Text that came from data (ledger text, file names, column names, user
arguments) goes through `printable` before it reaches a terminal or a report: a control
character would otherwise move the cursor, recolour the terminal or hide the text after it.

Test: `pytest tests/cli/test_text.py tests/cli/test_bad_inputs.py`.
"""


class SieveError(Exception):
    """A user-facing error: the message names what is wrong and, where possible, how to fix it."""


def check_range(option: str, value: int | None, low: int, high: int) -> None:
    """A SieveError naming `option` when the integer `value` (None: not given) is outside
    [low, high]; every integer option a command checks before its work says it in these words."""
    if value is not None and not low <= value <= high:
        raise SieveError(f"{option} must be an integer in [{low}, {high}], got {value}")


def _escapes() -> dict[int, str]:
    """Code point -> what `printable` shows instead: C0 controls, DEL and C1 controls as `\\xNN`
    (tab, newline and carriage return as `\\t`, `\\n`, `\\r`),
    the bidirectional overrides and isolates (which reorder the text shown after them) as
    `\\uNNNN`, a byte that was not UTF-8 (Python's surrogateescape) as the byte, `\\xNN`, and
    any other lone surrogate (not encodable at all) as `\\uNNNN`."""
    table = {c: f"\\x{c:02x}" for c in [*range(0x20), *range(0x7F, 0xA0)]}
    table |= {0x09: "\\t", 0x0A: "\\n", 0x0D: "\\r"}
    table |= {c: f"\\u{c:04x}" for c in [*range(0x202A, 0x202F), *range(0x2066, 0x206A)]}
    table |= {c: f"\\u{c:04x}" for c in range(0xD800, 0xE000)}
    table |= {c: f"\\x{c - 0xDC00:02x}" for c in range(0xDC80, 0xDD00)}
    return table


_SHOWN = _escapes()
_SHOWN_KEEP_LINES = {c: v for c, v in _SHOWN.items() if c not in (0x09, 0x0A)}


def printable(text: str, *, lines: bool = True) -> str:
    """`text` with every control character shown as its escape (`\\x1b`, not ESC). `lines`: keep
    newlines and tabs as they are (False: `\\n`, `\\t`, for text that must stay one line)."""
    return text.translate(_SHOWN_KEEP_LINES if lines else _SHOWN)
