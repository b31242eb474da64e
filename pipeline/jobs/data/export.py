"""Export a curriculum for other GRPO trainers: TRL, verl, OpenRLHF, or plain JSONL.

Why: `sieve train` is one consumer of a curriculum; teams already running TRL, verl or OpenRLHF
should get the same curated prompts *and* what Sieve learned about them (stage, per-prompt group
size, weight, posterior pass rate), in the layout each trainer reads without glue code:

* `trl` — Parquet for `datasets.load_dataset("parquet", ...)`: `prompt` (a plain string for the
  raw format, a list of {role, content} messages for chat models, both as TRL's GRPOTrainer
  expects), `answer` (what `pipeline.integrations.trl.reward_function` reads), `verifier`, and the
  Sieve columns.
* `verl` — Parquet in verl's RL data layout (its examples/data_preprocess scripts): `data_source`,
  chat-format `prompt`, `ability`, `reward_model` {style: "rule", ground_truth}, `extra_info`
  {split, index, ...Sieve stats}. verl always applies the chat template, so a raw-format model's
  prompt is one user message holding the raw prompt.
* `openrlhf` — JSONL with `--input_key` / `--label_key` fields (defaults `input` / `label`); the
  input is a string (chat models: the user message, for `--apply_chat_template`).
* `jsonl` — every column, one JSON object a line.

Every format also carries the evidence each prompt was kept on (`EVIDENCE_COLUMNS`): how many
rollouts this curation drew of it (`n_samples`) and how many were right (`n_correct`), the
weights that drew them (`model_revision`), the verifier that judged them (`verifier_version`),
the `curriculum_id`, and the problem's `source` and `params` (for a reasoning-gym problem, its
reproducible source; the "rg" verifier reads it). The pass rate is the posterior mean `p_mean`
with its interval [`p_low`, `p_high`]. `repeat_for_g=N` (for trainers with one group size N,
as TRL's `num_generations` or OpenRLHF's `n_samples_per_prompt`) repeats each row
max(1, round(group_size / N)) times in place, so a prompt gets about its own G rollouts.
Beside the data file, `README.md` is a Hugging Face dataset card (pipeline/integrations/card.py)
saying what was filtered with what, on which model. A folder is one dataset: a `README.md`
already there that is not the card of the same data file (another curriculum or format exported
there, or a README of the user's) is refused before the work, not overwritten.

Rows keep the curriculum's training order (`position`; stage 1 before stage 2). Columns are built
with Arrow compute in bulk, and the data file and its card are written all or nothing (each to a
temporary name, both renamed only once both are written), so a reader never sees half a file and
a failed export leaves the folder as it was, a folder it created removed (`pipeline.core.outputs`'
guard: a name that leads to any ledger's database or side file, or to a FIFO, device or socket, is
refused before the work; a symbolic link is written through).

Test: `.venv/bin/pytest tests/test_export.py -q`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import IO, TYPE_CHECKING, Literal, get_args

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from pipeline.core.errors import SieveError
from pipeline.core.home import from_home
from pipeline.store import Ledger, load_query
from pipeline.store.ids import resolve_curriculum

if TYPE_CHECKING:  # pipeline.policy imports torch and transformers (seconds): load on use
    from pipeline.policy.prompts import PromptFormat

ExportFormat = Literal["trl", "verl", "openrlhf", "jsonl"]
FORMATS: tuple[str, ...] = get_args(ExportFormat)
# The Sieve columns every format carries (verl nests them in `extra_info`).
SIEVE_COLUMNS = (
    "stage", "group_size", "weight", "p_mean", "p_low", "p_high",
    "family", "level", "problem_id", "position",
)  # fmt: skip
# What each kept prompt was kept on, and where it came from (every format carries these too).
EVIDENCE_COLUMNS = (
    "n_samples", "n_correct", "model_revision", "verifier_version", "curriculum_id",
    "source", "params",
)  # fmt: skip
_SUFFIX = {"trl": ".trl.parquet", "verl": ".verl.parquet", "openrlhf": ".openrlhf.jsonl"}


@dataclass(frozen=True)
class ExportResult:
    path: Path
    rows: int
    stages: dict[int, int]  # stage -> items
    prompt_format: PromptFormat
    card: Path | None = None  # the dataset card (README.md) written beside the data


def check_format(fmt: str) -> ExportFormat:
    """`fmt` as an ExportFormat, or a SieveError naming the valid ones."""
    if fmt not in FORMATS:
        raise SieveError(f"unknown export format {fmt!r}; valid formats: {', '.join(FORMATS)}")
    return fmt  # type: ignore[return-value]


def curriculum_prompt_format(ledger: Ledger, curriculum_id: str) -> PromptFormat:
    """The prompt format of the model the curriculum was curated for (raw when unknown)."""
    rows = ledger.run("SELECT model FROM curricula WHERE curriculum_id = $c", {"c": curriculum_id})
    folder = from_home(str(rows[0][0]), ledger.home) if rows and rows[0][0] else None
    if folder is None or not (folder / "tokenizer_config.json").is_file():
        return "raw"
    from transformers import AutoTokenizer

    from pipeline.policy.prompts import prompt_format

    try:
        tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True)
    except Exception:  # an unreadable folder: fall back to the tiny model's format
        return "raw"
    return prompt_format(folder, tokenizer)


def curriculum_table(ledger: Ledger, curriculum_id: str) -> pa.Table:
    """The curriculum's items joined with their problems and the evidence they were kept on
    (`EVIDENCE_COLUMNS`), in training order (standard Arrow)."""
    from pipeline.store.ids import curation_runs

    query = load_query("export_curriculum_items")
    params = {"curriculum_id": curriculum_id, "runs": curation_runs(curriculum_id)}
    return ledger.con.sql(query, params=params).to_arrow_table()


def repeat_rows(table: pa.Table, group_size: int) -> pa.Table:
    """Each row max(1, round(G / group_size)) times in place (G: its `group_size` column), for a
    trainer with one group size: a prompt then gets about its own G rollouts in order."""
    if group_size <= 0:
        raise SieveError(f"--repeat-for-g must be a positive group size, got {group_size}")
    sizes = table["group_size"].to_numpy().astype(np.int64)  # (rows,)
    copies = np.maximum(1, np.rint(sizes / group_size).astype(np.int64))
    return table.take(pa.array(np.repeat(np.arange(table.num_rows), copies)))


# -- prompt columns ----------------------------------------------------------------------------
def _concat(*parts: pa.Array | str) -> pa.Array:
    """Element-wise string concatenation of arrays and constant strings."""
    return pc.binary_join_element_wise(*parts, "")


def raw_prompts(questions: pa.Array) -> pa.Array:
    """`render_raw` for every question, vectorised (its text around a placeholder)."""
    from pipeline.policy.prompts import render_raw

    before, after = render_raw("\x00").split("\x00")
    return _concat(before, questions, after)


def chat_contents(questions: pa.Array) -> pa.Array:
    """The user message `render_chat` sends: the instruction, a blank line, the question."""
    from pipeline.policy.prompts import INSTRUCTION

    return _concat(INSTRUCTION + "\n\n", questions)


def user_messages(contents: pa.Array) -> pa.Array:
    """One single-message conversation [{role: user, content}] per row."""
    roles = pa.repeat(pa.scalar("user"), len(contents))
    messages = pa.StructArray.from_arrays([roles, contents], names=["role", "content"])
    offsets = pa.array(range(len(contents) + 1), type=pa.int32())
    return pa.ListArray.from_arrays(offsets, messages)


def prompt_text(table: pa.Table, fmt: PromptFormat) -> pa.Array:
    """The prompt as one string: the raw prompt, or the chat user message."""
    questions = table["question"].combine_chunks()
    return raw_prompts(questions) if fmt == "raw" else chat_contents(questions)


# -- per-format tables -------------------------------------------------------------------------
def trl_table(table: pa.Table, fmt: PromptFormat) -> pa.Table:
    text = prompt_text(table, fmt)
    prompt = text if fmt == "raw" else user_messages(text)
    extra = ("answer", "verifier", *SIEVE_COLUMNS, *EVIDENCE_COLUMNS)
    answer_format = pa.repeat(pa.scalar(fmt), table.num_rows)  # how the reward reads answers
    return pa.table(
        {"prompt": prompt, **{c: table[c] for c in extra}, "answer_format": answer_format}
    )


def verl_table(table: pa.Table, fmt: PromptFormat, data_source: str) -> pa.Table:
    n = table.num_rows
    reward_model = pa.StructArray.from_arrays(
        [pa.repeat(pa.scalar("rule"), n), table["answer"].combine_chunks()],
        names=["style", "ground_truth"],
    )
    stats = [c for c in (*SIEVE_COLUMNS, *EVIDENCE_COLUMNS) if c != "position"]
    extra_info = pa.StructArray.from_arrays(
        [
            table["split"].combine_chunks(),
            table["position"].combine_chunks().cast(pa.int64()),
            *(table[c].combine_chunks() for c in stats),
        ],
        names=["split", "index", *stats],
    )
    families = table["family"].combine_chunks()
    return pa.table(
        {
            "data_source": _concat(data_source + "/", families),
            "prompt": user_messages(prompt_text(table, fmt)),
            "ability": table["verifier"],  # the task category: math, exact, ...
            "reward_model": reward_model,
            "extra_info": extra_info,
        }
    )


def openrlhf_table(table: pa.Table, fmt: PromptFormat, input_key: str, label_key: str) -> pa.Table:
    kept = (*SIEVE_COLUMNS, *EVIDENCE_COLUMNS)
    if input_key == label_key or {input_key, label_key} & set(kept):
        raise SieveError(
            f"--input-key {input_key!r} and --label-key {label_key!r} must differ from each "
            f"other and from the Sieve columns ({', '.join(kept)})"
        )
    columns = {input_key: prompt_text(table, fmt), label_key: table["answer"]}
    return pa.table({**columns, **{c: table[c] for c in kept}})


def jsonl_table(table: pa.Table, fmt: PromptFormat) -> pa.Table:
    return table.append_column("prompt", prompt_text(table, fmt))


# -- writing -----------------------------------------------------------------------------------
def write_atomically(
    path: Path, write: Callable[[IO[bytes]], object], *, ledger: Path | None = None
) -> None:
    """`write(handle)` into `path` by the one guarded writer (`pipeline.core.outputs`): a new file
    beside it renamed onto it (through a symbolic link), never the ledger (`ledger`, under any
    name) nor any DuckDB database or log, a device in place."""
    from pipeline.core.outputs import write_output

    write_output(path, write, "wb", ledger=ledger)


def check_output_dir(output_dir: Path) -> None:
    """SieveError unless `output_dir` is, or could be created as, a writable directory.

    Creates nothing, so a command can check its output before doing the work.
    """
    if str(output_dir) == "-":
        raise SieveError("--output - (stdout) is for one file; this command writes a folder")
    if output_dir.exists() and not output_dir.is_dir():
        raise SieveError(f"cannot write to {output_dir}: it is not a directory")
    existing = next(p for p in (output_dir, *output_dir.parents) if p.exists())
    if not existing.is_dir():
        raise SieveError(f"cannot create {output_dir}: {existing} is not a directory")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise SieveError(f"cannot write to {existing}: permission denied")


def prepare_output_dir(output_dir: Path) -> Path:
    """Check, then create `output_dir` if needed; SieveError when it cannot hold new files."""
    output_dir = Path(output_dir)
    check_output_dir(output_dir)
    try:
        output_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise SieveError(f"cannot create {output_dir}: {exc.strerror or exc}") from exc
    return output_dir


@contextmanager
def output_folder(output_dir: Path) -> Iterator[Path]:
    """`prepare_output_dir(output_dir)` for a block that writes into it: when the block fails,
    the folders it created are removed again (an empty folder is not a result)."""
    output_dir = Path(output_dir)
    absent = [p for p in (output_dir, *output_dir.parents) if not p.exists()]
    folder = prepare_output_dir(output_dir)
    try:
        yield folder
    except BaseException:
        for made in absent:  # deepest first; a folder with anything in it stays
            with suppress(OSError):
                made.rmdir()
        raise


def _write_parquet(table: pa.Table) -> Callable[[IO[bytes]], object]:
    return lambda handle: pq.write_table(table, handle)


def _write_jsonl(table: pa.Table) -> Callable[[IO[bytes]], object]:
    frame = pl.from_arrow(table)
    assert isinstance(frame, pl.DataFrame)
    return lambda handle: frame.write_ndjson(handle)


def export_curriculum(
    ledger: Ledger,
    curriculum_id: str,
    fmt: str,
    output_dir: str | Path,
    *,
    prompt_format: PromptFormat | None = None,
    input_key: str = "input",
    label_key: str = "label",
    data_source: str = "sieve",
    repeat_for_g: int | None = None,
) -> ExportResult:
    """Write one curriculum in format `fmt` under `output_dir`; returns where and how much.

    `curriculum_id` may be `latest`. `prompt_format` defaults to the curated model's format
    (raw when its folder is not available). `input_key` / `label_key` name the OpenRLHF fields;
    `data_source` prefixes verl's `data_source` column (`sieve/<family>`). `repeat_for_g`: see
    the module docstring (`repeat_rows`). The dataset card is written after the data file.
    """
    from pipeline.core.outputs import check_output, write_outputs
    from pipeline.integrations.card import card_text, check_card_free

    kind = check_format(fmt)
    cid = resolve_curriculum(ledger, curriculum_id)
    check_output_dir(Path(output_dir))
    path = Path(output_dir) / f"{cid}{_SUFFIX.get(kind, '.jsonl')}"
    card = path.with_name("README.md")
    for existing in (path, card):  # never a ledger, nor a FIFO or device, before the work
        if existing.exists() or existing.is_symlink():
            check_output(existing, ledger=ledger.path, regular=True)
    check_card_free(card, path.name)  # another export's card is not overwritten
    chosen = prompt_format or curriculum_prompt_format(ledger, cid)
    items = curriculum_table(ledger, cid)
    table = items if repeat_for_g is None else repeat_rows(items, repeat_for_g)
    if kind == "trl":
        out, write = trl_table(table, chosen), _write_parquet
    elif kind == "verl":
        out, write = verl_table(table, chosen, data_source), _write_parquet
    elif kind == "openrlhf":
        out, write = openrlhf_table(table, chosen, input_key, label_key), _write_jsonl
    else:
        out, write = jsonl_table(table, chosen), _write_jsonl
    text = card_text(ledger, cid, items, path.name, kind, chosen, repeat_for_g).encode("utf-8")
    with output_folder(Path(output_dir)):  # the data and its card, both or neither
        write_outputs(
            [(path, write(out)), (card, partial(_write_bytes, data=text))], ledger=ledger.path
        )
    stages = pc.value_counts(items["stage"]).to_pylist()
    counts = {int(s["values"]): int(s["counts"]) for s in stages}
    return ExportResult(path, table.num_rows, dict(sorted(counts.items())), chosen, card)


def _write_bytes(handle: IO[bytes], data: bytes) -> None:
    handle.write(data)


# --prompt-format: "auto" is the curated model's own format
PROMPT_FORMATS: dict[str, PromptFormat | None] = {"auto": None, "raw": "raw", "chat": "chat"}


def export_home(
    home: str | Path | None,
    curriculum: str,
    fmt: str,
    output_dir: str | Path,
    *,
    prompt_format: str = "auto",
    input_key: str = "input",
    label_key: str = "label",
    repeat_for_g: int | None = None,
) -> ExportResult:
    """`sieve export`: the format and the prompt format (auto, raw or chat) checked, then
    `curriculum` ('latest' or an id) of the ledger of `home` exported (`export_curriculum`)."""
    check_format(fmt)
    if prompt_format not in PROMPT_FORMATS:
        raise SieveError(f"unknown --prompt-format {prompt_format!r}; valid: auto, raw, chat")
    with Ledger.open(home, read_only=True) as ledger:
        return export_curriculum(
            ledger,
            curriculum,
            fmt,
            output_dir,
            prompt_format=PROMPT_FORMATS[prompt_format],
            input_key=input_key,
            label_key=label_key,
            repeat_for_g=repeat_for_g,
        )
