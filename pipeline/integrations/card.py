"""The dataset card `sieve export` writes beside the data: `README.md` in Hugging Face's format.

A published curated set should answer "filtered with what, on which model". The card is YAML
front matter (`pretty_name`, `tags`, `task_categories`, `configs` naming the data file, so the
Hub's viewer and `datasets.load_dataset(<folder>)` find it) and Markdown sections: provenance
(curriculum id, model and weights revision, verifier version, reasoning-gym version when a family
comes from it), counts by family × level × stage, the rejection reasons with counts, the
selection config as curated (`curricula.config`), the columns, and how each trainer consumes the
file, including how a trainer with one group size approximates Sieve's per-prompt G. Everything
in it comes from the ledger and the exported table; nothing is typed by hand.

Test: `.venv/bin/pytest tests/test_export.py -q -k card`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa

from pipeline.core.errors import SieveError
from pipeline.store import Ledger

COLUMNS = {
    "stage": "1: screened at the small G and kept; 2: refined at a larger G",
    "group_size": "Sieve's per-prompt G (rollouts per prompt) for this prompt",
    "weight": "sampling weight of the prompt within its stage",
    "p_mean / p_low / p_high": "posterior pass rate of the curated model: mean and interval",
    "n_samples / n_correct": "rollouts this curation drew of the prompt, and how many were right",
    "model_revision": "hash of the weights that drew them",
    "verifier_version": "the verifier that judged them",
    "curriculum_id": "the curriculum this row belongs to",
    "position": "training order (stage 1 before stage 2); keep it: do not shuffle",
    "source / params": "where the problem came from (reasoning-gym: version, dataset, config, "
    "seed, index: enough to rebuild it)",
}


def _front_matter(cid: str, data_file: str) -> str:
    return "\n".join(
        [
            "---",
            f"pretty_name: Sieve curriculum {cid}",
            "tags: [rlvr, grpo, curriculum, sieve]",
            "task_categories: [text-generation]",
            "configs:",
            "- config_name: default",
            "  data_files:",
            "  - split: train",
            f"    path: {data_file}",
            "---",
        ]
    )


def _table(frame: pl.DataFrame) -> list[str]:
    """A Markdown table of a small frame."""
    head = "| " + " | ".join(frame.columns) + " |"
    rule = "|" + "|".join("---" for _ in frame.columns) + "|"
    rows = ["| " + " | ".join(str(v) for v in row) + " |" for row in frame.iter_rows()]
    return (
        [head, rule, *rows]
        if rows
        else [head, rule, "| " + " | ".join("" for _ in frame.columns) + " |"]
    )


def _head(ledger: Ledger, cid: str) -> dict[str, Any]:
    rows = ledger.run(
        "SELECT model, model_revision, config, created_at FROM curricula WHERE curriculum_id = $c",
        {"c": cid},
    )
    model, revision, config, created = rows[0] if rows else (None, None, None, None)
    return {"model": model, "revision": revision, "config": config, "created": created}


def _rg_versions(items: pl.DataFrame) -> list[str]:
    rg = items.filter(pl.col("family").str.starts_with("rg:"))["params"].unique().to_list()
    return sorted({str(json.loads(p).get("rg_version")) for p in rg if p})


def _consumers(kind: str, data_file: str, repeat_for_g: int | None) -> list[str]:
    """How the format's trainer reads the file, and how it approximates per-prompt G."""
    if repeat_for_g:
        repeat = (
            f"Rows were repeated max(1, round(group_size / {repeat_for_g})) times in place "
            f"(`--repeat-for-g {repeat_for_g}`), so with {repeat_for_g} generations per prompt "
            "each prompt gets about its own G rollouts."
        )
    else:
        repeat = (
            "Rows are not repeated: export with `--repeat-for-g N` (N = the trainer's group "
            "size) to repeat each row max(1, round(group_size / N)) times in place."
        )
    usage = {
        "trl": f"TRL: `datasets.load_dataset('parquet', data_files='{data_file}')` and "
        "`GRPOConfig(shuffle_dataset=False)` keep the stage order; the reward is "
        "`pipeline.integrations.trl.reward_function()` (it reads `answer`, `verifier`, "
        "`answer_format`, `family`, `params`). TRL has no per-prompt weight: `weight` is carried, "
        "not applied. " + repeat,
        "verl": f"verl: `data.train_files={data_file}`, `data.shuffle=False`, and "
        "`pipeline.integrations.verl.CurriculumSampler(train_dataset, {'seed': S, 'rollout_n': "
        "N})` as `RayPPOTrainer(train_sampler=...)`: stage by stage, weighted by `weight` within "
        "a stage, each prompt yielded max(1, round(G / N)) times (N = "
        "`actor_rollout_ref.rollout.n`). Use that or `--repeat-for-g`, not both. " + repeat,
        "openrlhf": f"OpenRLHF: `--prompt_data {data_file} --input_key input --label_key label` "
        "in file order (no shuffling); the Sieve fields ride along in each JSON line. OpenRLHF "
        "has one `--n_samples_per_prompt`: " + repeat,
        "jsonl": "Plain JSONL with every column. " + repeat,
    }
    return [
        "TRL, verl and OpenRLHF use one group size for every prompt, so Sieve's per-prompt G is "
        "approximated as below.",
        "",
        usage[kind],
    ]


def card_text(
    ledger: Ledger, cid: str, table: pa.Table, data_file: str, kind: str, prompt_format: str,
    repeat_for_g: int | None = None,
) -> str:  # fmt: skip
    """The card for one exported curriculum (see the module docstring)."""
    items = pl.from_arrow(table)
    assert isinstance(items, pl.DataFrame)
    head = _head(ledger, cid)
    counts = (
        items.group_by("family", "level", "stage").len("prompts").sort("family", "level", "stage")
    )
    rejected = ledger.sql(
        "SELECT reason, count(*) AS prompts FROM rejections WHERE curriculum_id = $c "
        "GROUP BY reason ORDER BY prompts DESC, reason",
        {"c": cid},
    )
    versions = sorted({v for v in items["verifier_version"].to_list() if v})
    rg = _rg_versions(items)
    config = json.dumps(json.loads(head["config"]), indent=2) if head["config"] else "{}"
    lines = [
        _front_matter(cid, data_file),
        "",
        f"# Sieve curriculum `{cid}`",
        "",
        f"{items.height} prompts for GRPO, kept by Sieve from sampled groups of the model "
        "below: each was screened at a small group size, then refined, and kept only where its "
        "groups were informative (neither all right nor all wrong).",
        "",
        "## Provenance",
        "",
        f"- curriculum: `{cid}` (created {head['created']})",
        f"- filtered on model: `{head['model']}`, weights revision `{head['revision']}`",
        f"- verifier: `{' | '.join(versions) or 'unknown'}`",
        f"- rollouts drawn of the kept prompts: {int(items['n_samples'].sum())} "
        f"({int(items['n_correct'].sum())} right)",
        f"- format: `{kind}`, prompts `{prompt_format}`, file `{data_file}`",
    ]
    if rg:
        lines.append(f"- reasoning-gym: {', '.join(rg)} (each row's `params` rebuilds it)")
    lines += ["", "## Counts by family × level × stage", "", *_table(counts)]
    lines += ["", "## Rejected, by reason", "", *_table(rejected)]
    lines += ["", "## Selection config", "", "```json", config, "```"]
    lines += ["", "## Columns", ""]
    lines += [f"- `{name}`: {text}" for name, text in COLUMNS.items()]
    lines += ["", "## Using it", "", *_consumers(kind, data_file, repeat_for_g), ""]
    return "\n".join(lines)


def card_data_file(text: str) -> str | None:
    """The data file a Sieve card's front matter names (`configs`' `path:`), None when `text`
    is not such a card."""
    lines = text.splitlines()
    if not lines or lines[0] != "---" or "---" not in lines[1:]:
        return None
    front = lines[1 : lines.index("---", 1)]
    if not any(line.startswith("pretty_name: Sieve curriculum ") for line in front):
        return None
    paths = [line.split(":", 1)[1].strip() for line in front if line.startswith("    path: ")]
    return paths[0] if len(paths) == 1 else None


def check_card_free(card: Path, data_file: str) -> None:
    """SieveError unless `card` (a folder's README.md) may be written for `data_file`: absent,
    or the card of that same file (an export repeated). Two exports into one folder replaced the
    first one's card, and a README of the user's would be lost as well."""
    if not card.exists() and not card.is_symlink():
        return
    try:
        text = card.read_text(encoding="utf-8", errors="replace") if card.is_file() else None
    except OSError:
        text = None
    other = card_data_file(text) if text is not None else None
    if other == data_file:
        return
    what = (
        f"the dataset card of {other}, another export"
        if other is not None
        else "not the dataset card of a Sieve export"
    )
    raise SieveError(
        f"refused: {card} is {what}; a folder holds one exported curriculum and format (its "
        "README.md is the card): export into another folder, or remove that file first"
    )
