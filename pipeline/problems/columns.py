"""Which column of a user's file holds what (`Columns`, the `sieve ingest --*-field` options), and
how two kinds of mapped value read: a chat conversation as its question, a split name as one of
Sieve's splits.

A chat conversation is a list of `{role, content}` turns (a JSON list in JSONL, JSON text in a
CSV cell, `list<struct<role, content>>` in Parquet or a saved dataset). Its question is the
content of its one user turn; assistant turns after it (a reference reply) are ignored. A system
turn is refused: Sieve's prompt is its own instruction plus the question
(`pipeline/policy/prompts.py`), so there is no place to keep one, and importing the user turn
alone would change the problem without a word. Turns before the user turn are refused for the
same reason.

Test: `.venv/bin/pytest tests/problems/test_ingest_formats.py -q`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from pipeline.core.errors import SieveError
from pipeline.problems.base import Split

# a user's split name -> Sieve's split ("test" is what datasets call Sieve's held-out problems)
SPLITS: dict[str, Split] = {"train": "train", "test": "heldout", "heldout": "heldout"}
_SYSTEM_ROLES = ("system", "developer")


@dataclass(frozen=True)
class Columns:
    """The columns of an input file that `sieve ingest` reads; None: not in the file."""

    question: str = "question"  # the question text, or with `chat` a conversation holding it
    answer: str = "answer"  # a final answer, or a solution ending '#### 42' or holding \boxed{}
    level: str | None = None  # an integer level (int32); None: level 0
    split: str | None = None  # train or test per row; None: the split the content hash fixes
    family: str | None = None  # a family name per row; None: one name for the whole file
    id: str | None = None  # the file's own id of each row, kept in params as "id"
    chat: bool = False  # `question` holds a chat conversation, not text

    def __post_init__(self) -> None:
        names = self.fields()
        for name in names:
            if not name.strip():
                raise SieveError("a column name given to ingest is empty")
        repeated = [name for name in dict.fromkeys(names) if names.count(name) > 1]
        if repeated:
            raise SieveError(
                f"column {repeated[0]!r} is given for two roles; each of --question-field "
                "(or --chat-field), --answer-field, --level-field, --split-field, "
                "--family-field and --id-field names its own column"
            )

    def fields(self) -> list[str]:
        """The columns read, question and answer first."""
        optional = (self.level, self.split, self.family, self.id)
        return [self.question, self.answer, *(name for name in optional if name is not None)]


def sieve_split(value: Any, where: str) -> Split:
    """Sieve's split for a user's split value (`train`, `test`; `heldout` too)."""
    name = value.strip().lower() if isinstance(value, str) else None
    if name not in SPLITS:
        shown = repr(value) if isinstance(value, str | int | float | None) else type(value).__name__
        raise SieveError(
            f"{where}: split {shown} is not train or test (a test problem is held out)"
        )
    return SPLITS[name]


def chat_question(value: Any, field: str, where: str) -> str:
    """The content of the one user turn of a chat conversation (checked as text by the caller)."""
    turns = _turns(value, field, where)
    users = [i for i, turn in enumerate(turns) if turn["role"] == "user"]
    if not users:
        raise SieveError(f"{where}: the conversation in {field!r} has no user turn")
    system = next((t["role"] for t in turns if t["role"] in _SYSTEM_ROLES), None)
    if system is not None:
        raise SieveError(
            f"{where}: the conversation in {field!r} has a {system} turn; Sieve keeps no system "
            "prompt (each prompt is its instruction and the question), so remove those turns "
            "to import the user turn alone"
        )
    if len(users) > 1 or users[0] > 0:
        raise SieveError(
            f"{where}: the conversation in {field!r} has turns before its last user turn; a "
            "problem is one question, so earlier turns would be lost (keep only the user turn)"
        )
    content = turns[users[0]]["content"]
    if not isinstance(content, str):
        raise SieveError(
            f"{where}: the user turn of {field!r} holds {type(content).__name__}, not text"
        )
    return content


def _turns(value: Any, field: str, where: str) -> list[dict[str, Any]]:
    """The turns of a conversation: a list of {role, content}, or JSON text of one."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except (json.JSONDecodeError, RecursionError):
            value = None
    if not isinstance(value, list) or not value:
        raise SieveError(
            f"{where}: {field!r} is not a chat conversation (a non-empty list of "
            "{role, content} turns)"
        )
    for number, turn in enumerate(value, start=1):
        if not isinstance(turn, dict) or not isinstance(turn.get("role"), str):
            raise SieveError(f"{where}: turn {number} of {field!r} has no text 'role'")
        if turn["role"] not in ("user", "assistant", *_SYSTEM_ROLES):
            raise SieveError(
                f"{where}: turn {number} of {field!r} has role {turn['role']!r}; a conversation "
                "holds user, assistant and system turns"
            )
        if "content" not in turn:
            raise SieveError(f"{where}: turn {number} of {field!r} has no 'content'")
    return value
