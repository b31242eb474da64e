"""The generated blocks of docs/benchmarks.md.

Each function reads benchmarks/results/*.json (through `Results`) or the code and returns one
block's Markdown; `BLOCKS` names them for `render_docs.py`, which puts each between its
`<!-- generated:begin NAME -->` markers.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from render_base import Results, num, pts, table, times

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


def curriculum_quick(r: Results) -> str:
    return curriculum(r, "curriculum_quick")


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


REGIME_ARMS = {
    "sieve": "**Sieve** (ledger posterior)",
    "sieve_learning": "Sieve, learning model + start prior",
    "dapo": "DAPO dynamic sampling",
    "mopps": "MoPPS-style posterior",
}


def _delta(stat: Any) -> str:
    """`+0.012 [crossed]; t [..]` for a paired Δ, `–` without one."""
    if stat is None or stat["ci95"] is None:
        return "–"
    lo, hi = stat["ci95"]
    t = stat.get("t_ci95")
    tail = "; t: 1 block" if t is None else f"; t [{t[0]:+.3f}, {t[1]:+.3f}]"
    return f"{stat['mean']:+.3f} [{lo:+.3f}, {hi:+.3f}]{tail}"


def regime_map(r: Results) -> str:
    """The tiny regime map: per pool, its uniform informative share at the start, `sieve plan`'s
    prediction, and each arm against uniform (final sampled pass@1 Δ, AUC Δ), with the verdicts
    the summary computed."""
    pools = r("regime_map_summary", "pools")
    verdicts = r("regime_map_summary", "verdicts")
    seeds = sorted({s for p in pools for a in p["arms"].values() for s in a["seeds"]})
    lines = [
        f"Tiny policy (revision {r('regime_map_summary', 'model_revision')}), "
        f"{num(r('regime_map_summary', 'setup', 'budget'))} rollouts per arm × seed, the tiny "
        f"headline's protocol on each pool; verifier `{r('regime_map_summary', 'verifier')}`; "
        f"seeds finished so far: {', '.join(str(s) for s in seeds) or 'none'} of "
        f"{', '.join(str(s) for s in r('regime_map_summary', 'seeds'))}. Brackets: crossed "
        "bootstrap, then the t interval over seeds; an arm is *ahead* or *behind* only where "
        "both exclude zero.",
        "",
    ]
    rows = []
    for p in pools:
        plan = p["plan"]
        for arm, label in REGIME_ARMS.items():
            a = p["arms"].get(arm)
            if a is None:
                continue
            rows.append(
                [
                    f"{p['name']} ({p['cells']} cells)",
                    num(plan["uniform_share_screen"], 3),
                    f"{plan['best_policy']} {times(plan['best_ratio'])}",
                    label,
                    str(len(a["seeds"])),
                    _delta(a["diff_sampled_vs_uniform"]),
                    _delta(a["auc_gain_delta"]),
                    verdicts["arms"].get(arm, {}).get(p["name"], "–"),
                ]
            )
    lines.append(
        table(
            [
                "pool",
                "uniform informative share at the start (screen, G 8)",
                "sieve plan: cheapest policy per informative group vs uniform",
                "arm",
                "seeds",
                "Δ final sampled pass@1 vs uniform",
                "Δ area under the greedy-gain curve",
                "verdict",
            ],
            rows,
        )
    )
    agree = verdicts["plan_agrees_with_sieve"]
    if agree:
        right = sum(1 for v in agree.values() if v)
        pays = sum(1 for p in pools if p["plan"]["verdict"].startswith("Curation pays"))
        lines += [
            "",
            f"`sieve plan` said curation pays on {pays} of {len(pools)} pools; its verdict "
            f"matched Sieve's measured one on {right} of {len(agree)}.",
        ]
    return "\n".join(lines)


BLOCKS: dict[str, Callable[[Results], str]] = {
    "regime-map": regime_map,
    "curriculum": curriculum,
    "curriculum-quick": curriculum_quick,
    "curriculum-levels": curriculum_levels,
    "ledger": ledger,
    "sampling": sampling,
    "verifier-throughput": verifier_throughput,
}
