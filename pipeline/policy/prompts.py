"""Prompt rendering shared by every sampling backend.

Two formats, decided from the model folder:
* `raw` (the built-in tiny model, marked in its `sieve.json`, or any tokenizer without a chat
  template): the question followed by `=`; the answer is the completion up to end-of-sequence.
* `chat`: the tokenizer's own chat template, with an instruction to put the final answer in
  `\\boxed{}` (what the verifiers extract first).

Test: `pytest tests/test_models.py tests/test_export.py` (`prompt_format` of a model folder;
`render_raw` / `render_chat` as the exports send them).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Literal

from transformers import PreTrainedTokenizerBase

from pipeline.policy.model import read_meta

PromptFormat = Literal["raw", "chat"]
INSTRUCTION = "Solve the problem. Put the final answer in \\boxed{}."


def prompt_format(model_dir: str | Path, tokenizer: PreTrainedTokenizerBase) -> PromptFormat:
    """`raw` when the folder says so or the tokenizer has no chat template, else `chat`."""
    declared = read_meta(Path(model_dir)).get("prompt_format")
    if declared in ("raw", "chat"):
        return "raw" if declared == "raw" else "chat"
    return "chat" if getattr(tokenizer, "chat_template", None) else "raw"


def render_raw(question: str) -> str:
    return f"{question}="


def render_chat(question: str, tokenizer: PreTrainedTokenizerBase) -> str:
    messages = [{"role": "user", "content": f"{INSTRUCTION}\n\n{question}"}]
    text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    return str(text)


def render(
    questions: Sequence[str], fmt: PromptFormat, tokenizer: PreTrainedTokenizerBase | None = None
) -> list[str]:
    """Render questions as prompts in the given format."""
    if fmt == "raw":
        return [render_raw(q) for q in questions]
    if tokenizer is None:
        raise ValueError("the chat format needs the model's tokenizer")
    return [render_chat(q, tokenizer) for q in questions]
