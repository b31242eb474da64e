"""The generated blocks of docs/curation.md.

Each function reads benchmarks/results/*.json (through `Results`) or the code and returns one
block's Markdown; `BLOCKS` names them for `render_docs.py`, which puts each between its
`<!-- generated:begin NAME -->` markers.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from render_base import Results, num, table


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


BLOCKS: dict[str, Callable[[Results], str]] = {
    "selection": selection,
    "curate-overhead": curate_overhead,
    "curation-nights": curation_nights,
    "rg-pass-rates": rg_pass_rates,
}
