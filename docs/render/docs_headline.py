"""The selection headline's generated blocks (results/headline.json, benchmarks/headline.py),
registered in render_docs.BLOCKS: `headline-selection` (README) and `headline-selection-runs`
(docs/real-models.md, the per-run accounting) and `headline-selection-cells` (there too: where
each arm's difference comes from, per held-out cell); the tiny policy's run of the same protocol
(results/headline_tiny.json, `--policy tiny`): `headline-selection-tiny`,
`headline-selection-tiny-runs` and `headline-selection-tiny-cells` (docs/benchmarks.md)."""

from __future__ import annotations

import re
from typing import Any

ARM_NAMES = {
    "uniform": "uniform",
    "sieve": "**Sieve** (ledger posterior)",
    "sieve_screen": "Sieve, two stages in the step",
    "mopps": "MoPPS-style posterior",
    "greso": "GRESO with refill",
    "dapo": "DAPO dynamic sampling",
    "night": "**Sieve's night** (`sieve loop`: refresh + posterior)",
    "sieve_learning": "Sieve, learning model (start prior + drift)",
    "second": "**Sieve's second run** (`sieve loop --fresh` on a ledger holding one run)",
    "oracle": "cell oracle (knows each cell's measured rate, uncharged)",
}
FRACTION_NAMES = ("a third", "two thirds", "all")  # headline_stats.FRACTIONS, in words
MIN_CELL_PROBLEMS = 12  # held-out problems per cell the protocol asks for (issue 45 point 4)
ORDER = (
    "uniform", "sieve", "sieve_learning", "sieve_screen", "night", "second", "mopps", "greso",
    "dapo", "oracle",
)  # fmt: skip
GOAL = (
    "Goal of the matched headline: from the warm start, Sieve's default reaches uniform's "
    "held-out greedy gain (its mean over the paired seeds) with ≤ 0.5× of uniform's rollouts, "
    "all counted, ahead of GRESO, DAPO and the MoPPS-style arm, with intervals that exclude "
    "zero; from the cold start it does not fall behind uniform."
)


def _f(x: Any, digits: int = 3) -> str:
    return "–" if x is None else f"{x:.{digits}f}"


def _ci(d: Any, digits: int = 3, unit: str = "") -> str:
    """'0.012 [−0.004, 0.028]': a value and its 95 % interval; a paired statistic (it has a t
    interval over blocks, or none where one block gives none) shows that interval beside the
    crossed bootstrap's: '0.012 [−0.004, 0.028]; t [−0.010, 0.034]'."""
    if d is None:
        return "–"
    paired = "t_ci95" in d or "problems" in d
    if d.get("seeds") == 1 and not paired:  # an interval over one seed says nothing
        return f"{_f(d['mean'], digits)}{unit} (1 seed)"
    lo, hi = d["ci95"]
    # a bootstrap over two seeds' values spans exactly those two values: their range, not a CI
    two = " (range of 2 seeds)" if d.get("seeds") == 2 and not paired else ""
    text = f"{_f(d['mean'], digits)}{unit} [{_f(lo, digits)}, {_f(hi, digits)}]{two}"
    if "t_ci95" in d:
        t = d["t_ci95"]
        text += "; t: 1 block" if t is None else f"; t [{_f(t[0], digits)}, {_f(t[1], digits)}]"
    return text


def _table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return "\n".join([*lines, *("| " + " | ".join(r) + " |" for r in rows)])


def _no_target(row: Any) -> bool:
    """Uniform's mean greedy gain over the arm's paired blocks is not above zero: there is no
    target to reach, so rollouts-to-target says nothing (n/a)."""
    return row.get("target_gain") is not None and row["target_gain"] <= 0


def _blocks(labels: list[str]) -> str:
    return f"block{'s' if len(labels) > 1 else ''} {', '.join(labels)}"


def _count(n: int, noun: str) -> str:
    """'1 paired seed', '5 paired seeds'."""
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _unreached(entry: Any) -> str:
    """Which paired blocks' runs never reached the target within the budget (each counted at
    its last rollouts, a lower bound: the arm's in the ratio's favour, uniform's against it),
    or ""."""
    parts = [
        f"{who} in {_blocks(entry[key])}"
        for who, key in (("the arm", "not_reached_paired"), ("uniform", "uniform_not_reached"))
        if entry.get(key)
    ]
    return ("not reached within the budget by " + " and by ".join(parts)) if parts else ""


def _sig(d: Any) -> str:
    return " (significant)" if d["significant"] else " (n.s.)"


def _ratio_cell(entry: Any) -> str:
    ratio, miss = entry["ratio_to_uniform"], _unreached(entry)
    if ratio is None:
        return "n/a"
    return _ci(ratio, 2, "×") + _sig(ratio) + (f"; {miss}" if miss else "")


def _per_seed(values: list[int]) -> str:
    return "/".join(f"{v:,}" for v in values)


def _setting_table(block: Any) -> str:
    arms = block["arms"]
    runs = block["runs"]
    rows = []
    for arm in ORDER:
        if arm not in arms:
            continue
        a = arms[arm]
        mine = sorted((r for r in runs if r["arm"] == arm), key=lambda r: a["seeds"].index(
            r.get("block", str(r["seed"]))))  # fmt: skip
        diff = a.get("diff_sampled_vs_uniform") if arm != "uniform" else None
        reach = a.get("rollouts_to_target")
        auc = a.get("auc_gain_delta")
        informative = [r["informative_share_per_update"] for r in mine]
        informative = [x for x in informative if x is not None]
        rows.append([
            ARM_NAMES[arm],
            ", ".join(str(s) for s in a["seeds"]),
            _ci(a["final_sampled"]),
            _ci(a["final_greedy"]),
            "–" if diff is None else _ci(diff) + _sig(diff),
            *(("–", "–") if arm == "uniform" or not reach
              else (_ratio_cell(reach[1]), _ratio_cell(reach[-1]))),
            "–" if auc is None else _ci(auc) + _sig(auc),
            "/".join(str(u) for u in a["updates"]),
            _f(sum(informative) / len(informative), 2) if informative else "–",
            _per_seed([r["rollouts_decided_not_trained"] for r in mine]),
        ])  # fmt: skip
    return _table(
        [
            "arm", "seeds", "final sampled pass@1 [95% CI over seeds]", "final greedy",
            "paired Δ sampled vs uniform [95% CI: crossed bootstrap; t over blocks]",
            "rollouts to 2/3 of uniform's mean greedy gain, ratio to uniform's",
            "rollouts to all of uniform's mean greedy gain, ratio",
            "paired Δ mean greedy gain over the budget (area under the curve)",
            "updates per seed", "informative share per update (mean over seeds)",
            "rollouts that decided and did not train, per seed",
        ],
        rows,
    )  # fmt: skip


def _verdict(block: Any, cold: bool = False) -> str:
    """Sieve against the goal: from the warm start, the whole goal (all of uniform's mean gain
    reached with ≤ 0.5× of uniform's rollouts, both intervals below 0.5, in every paired block;
    ahead of every other method; intervals excluding zero; ≥ 4 paired seeds); from the cold
    start (`cold`), not falling behind uniform: no paired measure significantly against Sieve."""
    arms = block["arms"]
    if "sieve" not in arms or "uniform" not in arms:
        return "Sieve's arm has not finished a seed from this start yet: no verdict."
    s = arms["sieve"]
    reach = s.get("rollouts_to_target") or []
    ratio = reach[-1]["ratio_to_uniform"] if reach else None
    diff = s.get("diff_sampled_vs_uniform")
    parts = []
    if _no_target(s):
        parts.append(
            "uniform's greedy accuracy did not rise on average over the paired blocks, so "
            "rollouts to a share of its gain say nothing (n/a)"
        )
    elif ratio is not None:
        parts.append(
            f"Sieve's rollouts to all of uniform's mean greedy gain were {_ci(ratio, 2, '×')} "
            f"of uniform's (geometric mean over {_count(ratio['seeds'], 'paired block')})"
        )
        if _unreached(reach[-1]):
            parts[-1] += "; " + _unreached(reach[-1])
    if diff is not None:
        word = "a significant" if diff["significant"] else "no significant"
        parts.append(
            f"{word} difference in final sampled pass@1 ({_ci(diff)}, "
            f"{_count(diff['seeds'], 'paired seed')})"
        )
    others = s.get("diff_sampled_vs_others") or {}
    if others:
        parts.append(
            "against the other methods, Sieve's final sampled pass@1 minus theirs: "
            + ", ".join(
                f"{ARM_NAMES[o]} {_ci(d)} ({'significant' if d['significant'] else 'n.s.'})"
                for o, d in others.items()
            )
        )
    if cold:
        return "; ".join(parts) + _cold_goal(s, block)
    ahead = all(d["significant"] and d["mean"] > 0 for d in others.values())
    fast = (
        ratio is not None and not _no_target(s) and ratio["significant"]
        and max(ratio["ci95"][1], ratio["t_ci95"][1]) <= 0.5
        and not reach[-1].get("not_reached_paired")
    )  # fmt: skip
    met = (
        fast and diff is not None and diff["significant"] and diff["mean"] > 0
        and len(s["paired_seeds"]) >= 4 and ahead and len(others) == 3
    )  # fmt: skip
    return "; ".join(parts) + (". **Goal met.**" if met else ". **Goal not met**" + _left(block))


def _cold_goal(s: Any, block: Any) -> str:
    """The cold goal's sentence: behind when any paired measure is significantly against Sieve
    (final Δ sampled or greedy below zero, the area under the gain curve below zero, a rollouts
    ratio above 1); keeping up not shown when Sieve's runs missed a target in more blocks than
    uniform's did; met otherwise."""
    diffs = {
        "final sampled pass@1": s.get("diff_sampled_vs_uniform"),
        "final greedy": s.get("diff_greedy_vs_uniform"),
    }
    if any(d is None for d in diffs.values()):
        return ". **Goal not met**: no paired seed to compare" + _left(block)
    behind = [k for k, d in diffs.items() if d["significant"] and d["mean"] < 0]
    auc = s.get("auc_gain_delta")
    if auc and auc["significant"] and auc["mean"] < 0:
        behind.append("mean greedy gain over the budget")
    reach = [] if _no_target(s) else s.get("rollouts_to_target") or []
    behind += [
        f"rollouts to {FRACTION_NAMES[i]} of uniform's mean gain"
        for i, t in enumerate(reach)
        if t["ratio_to_uniform"] and t["ratio_to_uniform"]["significant"]
        and t["ratio_to_uniform"]["mean"] > 1
    ]  # fmt: skip
    short = [
        (FRACTION_NAMES[i], len(t["not_reached_paired"]), len(t["uniform_not_reached"]))
        for i, t in enumerate(reach)
        if len(t["not_reached_paired"]) > len(t["uniform_not_reached"])
    ]
    g = diffs["final greedy"]
    greedy = f"paired Δ in final greedy {_ci(g)}, {'significant' if g['significant'] else 'n.s.'}"
    paired = _count(len(s["paired_seeds"]), "paired block")
    if behind:
        why = f"Sieve is significantly behind uniform in {', '.join(behind)} ({greedy})"
    elif short:
        why = (
            f"no paired measure is significantly against Sieve ({greedy}), yet of {paired} "
            + ", ".join(f"Sieve missed {f} of uniform's mean gain in {a}, uniform in {u}"
                        for f, a, u in short)
            + ", so keeping up is not shown"
        )  # fmt: skip
    else:
        return (
            f"; {greedy}; no paired measure (final Δ, area under the gain curve, rollouts to a "
            "target) is significantly against Sieve. **Goal met** (not behind uniform)"
            + _left(block)
        )
    return f". **Goal not met**: {why}" + _left(block)


def _left(block: Any) -> str:
    """How final a verdict is: the campaign's planned runs from this start not finished yet
    (a summary written without the plan leaves it provisional)."""
    left = block.get("planned_left")
    if left is None:
        return " (yet)."
    if not left:
        return " (every planned run has finished)."
    names = ", ".join(
        f"{re.sub(r'[*]{2}| [(].*[)]', '', ARM_NAMES.get(arm, arm))} seed {seed}"
        for arm, seed in (x.split(":")[1:] for x in left)
    )
    return f" (yet: {_count(len(left), 'planned run')} left, {names})."


def _made(st: Any, tiny: bool = False) -> str:
    cost = st["cost"]
    if tiny:
        return (
            f"the tiny policy `sieve bootstrap` makes (and `make demo`: 700 supervised steps, "
            f"seed 0), revision {st.get('model_revision')}"
        )
    if not cost:
        return "the base model"
    return (
        f"built by uniform GRPO for {cost['updates']} updates ({cost['rollouts']:,} rollouts, "
        "charged to no arm) from the base model"
    )


def _zones(st: Any) -> str:
    cells = st.get("cells")
    if not cells:
        return ""
    zones = [c["zone"] for c in cells]
    return "; its cells: " + ", ".join(
        f"{zones.count(z)} {z}" for z in ("always", "learnable", "never") if zones.count(z)
    )


def _other_starts(block: Any) -> str:
    """The other builds of the start some blocks ran from: a start rebuilt on a new machine is
    other weights, so its runs pair only among themselves (seeds marked with its letter)."""
    used = block.get("other_starts_used") or []
    return "".join(
        f"; seeds marked {o['suffix']} ran from a second build of it by the same recipe on "
        f"another machine (weights {o['hash']}, held-out greedy {_f(o['greedy'])}, sampled "
        f"{_f(o['sampled'])}), paired only with runs from that build"
        for o in used
    )


def _verifier_note(r: Any, name: str) -> str:
    """Why a campaign's verifier may not be the repository's: it runs pinned code."""
    now = r(name, "verifier_now")
    if now == r(name, "verifier"):
        return ""
    return (
        f" (the campaign runs pinned code: the repository's verifier is now `{now}`, and every "
        "run compared here was scored under the one named)"
    )


def _power(r: Any, block: Any) -> str:
    """What the warm campaign can detect, from results/power.json (benchmarks/power.py): the
    smallest effects at its number of paired blocks and held-out problems, and the seeds a
    1.5× rollouts saving needs."""
    c = r("power", "campaigns", "warm")
    pool, table, rec = c["pooled"], c["mde"], c["recommendation"]
    if not table:
        return "*Power:* no comparison with two paired blocks yet (`benchmarks/power.py`)."
    n = len(block["arms"]["sieve"]["paired_seeds"]) if block and "sieve" in block["arms"] else 3
    h = block["held_out"]["problems"] if block and block.get("held_out") else 281
    grid = r("power", "problems")
    hh = str(min(grid, key=lambda x: abs(x - h)))

    def at(metric: str, key: str = "mde") -> str:
        rows = [x for x in table[metric][hh] if x["seeds"] == max(n, r("power", "seeds")[0])]
        return f"{rows[0][key]:.2f}" if key == "detectable_saving" else _f(rows[0][key])

    ratio = f"{r('power', 'saving'):g}×"
    need = rec["ratio_all"]
    shows = float(at("ratio_all", "detectable_saving")) <= r("power", "saving")
    first = pool["final_sampled"]
    return (
        f"*Power* (`benchmarks/power.py`, `results/power.json`; the variance of these runs, "
        f"pooled over {_count(first['comparisons'], 'comparison')} with uniform, "
        f"{first['df']} block degrees of freedom; 80 % power, α = 0.05 two-sided): with "
        f"{max(n, 3)} seeds and {hh} held-out problems the campaign detects a final Δ of "
        f"{at('final_sampled')} sampled and {at('final_greedy')} greedy, and a rollouts saving "
        f"of {at('ratio_all', 'detectable_saving')}× to all of uniform's mean gain "
        f"({at('ratio_two_thirds', 'detectable_saving')}× to two thirds), so a {ratio} saving "
        f"{'shows' if shows else 'does not show'}. A {ratio} saving to all of the gain needs "
        + ", ".join(
            f"{_seeds(need['seeds_needed'][str(x)])} at {x:,} problems "
            f"({_seeds(need['seeds_needed_at_upper_variance'][str(x)])} if the between-seed "
            f"variance is at its 80 % upper bound)"
            for x in grid
        )
        + f"; {_where(need['seeds_needed'], grid)} A run that never reaches a target counts at "
        "the budget, which shrinks the ratio's spread: these counts are optimistic. "
        + _calibrated(r)
    )


def _calibrated(r: Any) -> str:
    """How often the crossed bootstrap itself calls a faster arm, simulated on synthetic
    campaigns (results/headline_stats.json, benchmarks/headline_stats.py): the check of the
    power counts above against the statistic the verdicts use."""
    cells = r("headline_stats", "cells")
    blocks = sorted({c["blocks"] for c in cells})

    def share(speed: float, key: str) -> str:
        row = {c["blocks"]: c[key] for c in cells if c["speed"] == speed}
        return "/".join(f"{100 * row[b]:.0f}" for b in blocks) + " %"

    fastest = max(c["speed"] for c in cells)
    null = max(c["called_different"] for c in cells if c["speed"] == 1.0)
    return (
        f"Simulated against the verdicts' own statistic (`benchmarks/headline_stats.py`, "
        f"{r('headline_stats', 'target')}, {blocks[0]}/{blocks[1]}/{blocks[-1]} blocks): an arm "
        f"1.5× faster is called faster in {share(1.5, 'called_faster')} of campaigns, one "
        f"{fastest:g}× faster in {share(fastest, 'called_faster')}, two identical arms called "
        f"different in at most {100 * null:.0f} %; the paired area-under-the-curve Δ finds the "
        f"1.5× arm in {share(1.5, 'auc_significant')}. The rollouts ratio is the strict "
        "statistic: a campaign of this size reports a real 1.5× saving as not shown."
    )


def _where(need: Any, grid: list[int]) -> str:
    """Whether more held-out problems would buy what more seeds do."""
    few, many = need[str(grid[0])], need[str(grid[-1])]
    if few is not None and many is not None and few - many <= 1:
        return "the spread is between seeds, so seeds, not held-out problems, buy the resolution."
    return "held-out problems matter too: the problems' own spread is a large part of it."


def _seeds(n: int | None) -> str:
    return "more than 1,000 seeds" if n is None else _count(n, "seed")


def headline_selection(r: Any, name: str = "headline") -> str:
    """The README's headline: each setting's table and a verdict against the stated goal."""
    tiny = name == "headline_tiny"
    setup = r(name, "setup")
    settings = r(name, "settings")
    goal = (
        "The same protocol on the tiny policy (issue 45 point 6), cold from the bootstrapped "
        "policy, where many seeds are cheap; the goal is the real model's (the README's headline)."
        if tiny
        else GOAL
    )
    out = [
        f"{r(name, 'model')}, {setup['budget']:,} rollouts sampled per arm × seed, every update "
        f"training {setup['batch_prompts']} groups × G {setup['group_size']} "
        f"({setup['batch_prompts'] * setup['group_size']} rollouts), lr {setup['lr']:g} "
        f"constant, KL β {setup['beta']:g} fixed, verifier `{r(name, 'verifier')}`"
        f"{_verifier_note(r, name)}. {goal}"
    ]
    for setting in ("cold",) if tiny else ("warm", "cold"):
        if setting not in settings:
            built = [
                st for st in r(name, "starts").get(setting, [])
                if st["verifier"] == r(name, "verifier")
            ]  # fmt: skip
            if not built:
                out.append(f"*{setting.capitalize()} start:* no run has finished yet.")
                continue
            st = built[-1]
            out.append(
                f"*{setting.capitalize()} start* ({_made(st, tiny)}; weights {st['hash']}; "
                f"held-out greedy {_f(st['greedy'])}, sampled {_f(st['sampled'])} on "
                f"{st['scored']} problems{_zones(st)}): no arm × seed has finished yet."
            )
            continue
        b = settings[setting]
        st = b["start"]
        made = _made(st, tiny)
        out.append(
            f"*{setting.capitalize()} start* ({made}; held-out greedy {_f(st['greedy'])}, "
            f"sampled {_f(st['sampled'])} on {st['scored']} problems{_other_starts(b)}): "
            f"{_verdict(b, cold=setting == 'cold' and not tiny)}\n\n" + _setting_table(b)
        )
    out.append(
        "Brackets: 95 % intervals. An arm's own level: a bootstrap over its seeds (\"range of 2 "
        'seeds" where there are two: such a bootstrap spans exactly their values). A paired '
        "measure (arm − uniform, block by block): first a crossed bootstrap, which resamples the "
        "blocks and, once per replicate, the held-out problems every block shares; then, after "
        '"t", the Student t interval over the per-block values (n − 1 degrees of freedom). It '
        "is called significant only when both exclude no difference. Rollouts to a target: each "
        "block's start plus two thirds or all of uniform's mean greedy gain over the paired "
        "blocks, the same for both runs of a block (a target set by uniform's own final in each "
        "block is reached by uniform's fit by construction, and favours it), read from each "
        "run's isotonic fit of its greedy curve; a run that never reaches it counts at its last "
        "rollouts (a lower bound) and its block is named; ratios are geometric means over "
        "blocks; the third target is in the JSON. The area under the curve is the run's greedy "
        "gain over its start averaged over the budget's rollouts."
    )
    if not tiny:
        out.append(_power(r, settings.get("warm")))
    return "\n\n".join(out)


def headline_selection_runs(r: Any, name: str = "headline") -> str:
    """Per run: what it sampled, trained and decided, and its wall time and load."""
    rows = []
    for setting, b in r(name, "settings").items():
        for x in sorted(
            b["runs"], key=lambda x: (x.get("block", "")[-1:].isalpha(), x["seed"],
                                      ORDER.index(x["arm"]))
        ):  # fmt: skip
            rows.append([
                setting, x["arm"], x.get("block", str(x["seed"])), str(x["updates"]),
                str(x["empty_steps"]),
                f"{x['rollouts_sampled']:,}", f"{x['rollouts_trained']:,}",
                f"{x['rollouts_decided_not_trained']:,}", _f(x["informative_share_per_update"], 2),
                str(x["distinct_prompts_trained"]), str(x["scored"]), _f(x["final_greedy"]),
                _f(x["final_sampled"]), f"{x['seconds'] / 60:.0f}", _f(x["load_1m_median"], 1),
            ])  # fmt: skip
    if not rows:
        return "No run has finished yet."
    return _table(
        [
            "start", "arm", "seed", "updates", "empty steps", "sampled", "trained",
            "decided, not trained", "informative share per update", "distinct prompts",
            "held-out scored", "final greedy", "final sampled", "minutes", "median load",
        ],
        rows,
    )  # fmt: skip


def _points(x: float) -> str:
    """A difference in pass@1 as signed points: 0.0389 -> '+3.9', -0.05 -> '−5.0'."""
    v = round(100 * x, 1)
    return "0.0" if v == 0 else f"{v:+.1f}".replace("-", "−")


def _cell(c: dict[str, Any]) -> str:
    """'arith 3 (16) +9.4': the cell, its held-out problems, the difference in points."""
    return f"{c['family']} {c['level']} ({c['problems']}) {_points(c['delta'])}"


def headline_selection_cells(r: Any, name: str = "headline") -> str:
    """Per setting and arm, the held-out cells where the arm ended furthest ahead of uniform and
    furthest behind it (final pass@1, mean over the paired seeds)."""
    rows = []
    for setting, b in r(name, "settings").items():
        for arm in ORDER:
            cells = b["arms"].get(arm, {}).get("cells_vs_uniform")
            if not cells:
                continue
            ahead = [c for c in cells if c["delta"] > 0][:3]
            behind = [c for c in reversed(cells) if c["delta"] < 0][:3]
            rows.append([
                setting, ARM_NAMES[arm], str(cells[0]["seeds"]), cells[0]["measure"],
                ", ".join(map(_cell, ahead)) or "none",
                ", ".join(map(_cell, behind)) or "none",
                str(sum(c["delta"] > 0 for c in cells)), str(sum(c["delta"] < 0 for c in cells)),
            ])  # fmt: skip
    if not rows:
        return "No arm has a seed paired with uniform yet."
    small = []
    for setting, b in r(name, "settings").items():
        cells = next(
            (a["cells_vs_uniform"] for a in b["arms"].values() if a.get("cells_vs_uniform")), []
        )
        few = sorted(
            (c for c in cells if c["problems"] < MIN_CELL_PROBLEMS), key=lambda c: c["problems"]
        )
        if few:
            small.append(
                f"{setting}: {len(few)} of {len(cells)} cells ("
                + ", ".join(f"{c['family']} {c['level']} ({c['problems']})" for c in few)
                + ")"
            )
    note = (
        f"\n\nCells with fewer than {MIN_CELL_PROBLEMS} held-out problems scored (issue 45's "
        f"floor): {'; '.join(small)}."
        if small
        else f"\n\nEvery cell has at least {MIN_CELL_PROBLEMS} held-out problems scored."
    )
    return _table(
        [
            "start", "arm", "paired seeds", "pass@1",
            "furthest ahead of uniform: cell (problems) points", "furthest behind", "cells ahead",
            "cells behind",
        ],
        rows,
    ) + note  # fmt: skip


def headline_selection_tiny(r: Any) -> str:
    return headline_selection(r, "headline_tiny")


def headline_selection_tiny_runs(r: Any) -> str:
    return headline_selection_runs(r, "headline_tiny")


def headline_selection_tiny_cells(r: Any) -> str:
    return headline_selection_cells(r, "headline_tiny")


def _shares(xs: Any) -> str:
    return "–" if not xs else " → ".join(_f(x, 2) for x in xs)


def _per_k(v: list[float]) -> str:
    if not v:
        return "–"
    m = sum(v) / len(v)
    return f"{m:.0f}" if len(v) == 1 else f"{m:.0f} ({min(v):.0f}–{max(v):.0f})"


def _pct(a: int, b: int) -> str:
    return "–" if not b else f"{100 * a / b:.0f} %"


def _reading(setting: str, b: Any, group_size: int) -> list[str]:
    """Generated sentences: the ceiling selection has against uniform in informative groups per
    rollout, Sieve's share across its updates, and what its groups turned out to be."""
    arms, out = b["arms"], []
    uni, me = arms.get("uniform", {}).get("by_part"), arms.get("sieve", {}).get("by_part")
    if not uni or not me or not uni["informative_per_1k_sampled"]:
        return out
    u = sum(uni["informative_per_1k_sampled"]) / len(uni["informative_per_1k_sampled"])
    s = sum(me["informative_per_1k_sampled"]) / len(me["informative_per_1k_sampled"])
    ceiling = 1000 / group_size
    out.append(
        f"*{setting.capitalize()}:* uniform trained {u:.0f} informative groups per 1,000 "
        f"rollouts sampled; training nothing else and spending no rollout to decide gives "
        f"{ceiling:.0f} (1,000 / G). If held-out gains tracked informative groups alone, no "
        f"selection could reach uniform's final with less than {u / ceiling:.2f}× its rollouts, "
        f"and Sieve's {s:.0f} per 1,000 would make its ratio {u / s:.2f}×; the goal's ≤ 0.5× "
        f"asks for {2 * u:.0f}."
    )
    at_mean = me.get("predicted_at_mean")
    if me["realized"] and (me.get("predicted") or at_mean):
        out.append(
            f"Sieve's informative share went {_shares(me['realized'])} across the quarters of "
            f"its updates while its posterior predictive expected {_shares(me.get('predicted'))}"
            f" (– where the observations a run kept end before the quarter does) and a plug-in "
            f"at the posterior mean, which ignores the posterior's spread, "
            f"{_shares(at_mean)}; uniform's went {_shares(uni['realized'])}."
        )
    ev = me.get("expected_vs_realized")
    if ev:
        out.append(
            f"Over the {ev['updates']} updates of {_count(ev['seeds'], 'seed')} the kept "
            f"observations cover, Sieve's posterior predictive expected a share of "
            f"{_f(ev['predictive'], 2)} informative groups (the plug-in at its mean "
            f"{_f(ev['at_mean'], 2)}); {_f(ev['realized'], 2)} were."
        )
    last = [
        f"{ARM_NAMES[a].replace('**', '')} {_f(arms[a]['by_part']['realized'][-1], 2)}"
        for a in ORDER
        if arms.get(a, {}).get("by_part", {}).get("realized")
    ]
    out.append(f"In the last quarter of updates, the informative share was: {', '.join(last)}.")
    go = arms["sieve"].get("group_outcomes")
    if go:
        filled = [q for q, p in enumerate(go["parts"]) if any(sum(v.values()) for v in p.values())]
        # compare whole quarters: the one the last checkpoint cut holds a few groups
        whole = [q for q in filled if q < go["whole_parts"]] or filled
        a, z = go["parts"][whole[0]], go["parts"][whole[-1]]

        def share(part: Any, visit: str, outcome: str) -> str:
            n, d = part[visit][outcome], sum(part[visit].values())
            return f"{_pct(n, d)} ({n} of {d})"

        first, last_q = whole[0] + 1, whole[-1] + 1
        cut = (
            f"; quarter {filled[-1] + 1}, which it reaches only in part, is left out"
            if filled[-1] > whole[-1]
            else ""
        )
        out.append(
            f"From the observations Sieve keeps ({_count(go['seeds'], 'seed')}, updates before "
            f"{min(go['covered'])}{cut}): of its revisits, {share(a, 'revisit', 'all_right')} "
            f"ended all right in quarter {first} and {share(z, 'revisit', 'all_right')} in "
            f"quarter {last_q}; of its first visits, {share(a, 'first', 'all_wrong')} ended all "
            f"wrong in quarter {first} and {share(z, 'first', 'all_wrong')} in quarter {last_q}."
        )
        rc = go.get("revisit_change") or {}
        if rc.get("groups"):
            out.append(
                f"Between a prompt's group and the run's next group of it (a median of "
                f"{rc['median_updates_between']:.0f} updates later, {rc['groups']} revisits), its "
                f"pass rate moved by {rc['mean']:+.2f} on average: up in "
                f"{_pct(round(rc['share_up'] * rc['groups']), rc['groups'])}, down in "
                f"{_pct(round(rc['share_down'] * rc['groups']), rc['groups'])}; the posterior "
                f"expects no move."
            )
        sr = go.get("start_rate")
        if sr and sr.get("first_all_wrong") is not None and sr.get("first_mixed") is not None:
            out.append(
                f"The start's own measurement of the cells put those of Sieve's first visits "
                f"that ended all wrong at a pass rate of {_f(sr['first_all_wrong'], 2)} on "
                f"average, and those that ended mixed at {_f(sr['first_mixed'], 2)}; the arm does "
                f"not read that measurement (every arm learns from its own groups only)."
            )
    return out


def _by_start(setting: str, b: Any) -> list[str]:
    """Where blocks ran from two builds of a start: every run's final accuracy by build, so a
    reader sees whether the greedy target could move at all from each build (intermediate marks
    are greedy only; the final mark also samples)."""
    builds = [b["start"], *(b.get("other_starts_used") or [])]
    if len(builds) < 2:
        return []
    parts = []
    for i, st in enumerate(builds):
        runs = [x for x in b["runs"] if x["start"] == st["hash"]]
        if not runs:
            continue
        g = [x["final_greedy"] for x in runs]
        sm = [x["final_sampled"] for x in runs]
        parts.append(
            f"from the {('first', 'second', 'third')[min(i, 2)]} build (held-out greedy "
            f"{_f(st['greedy'])}, sampled {_f(st['sampled'])}) its {len(runs)} finished "
            f"run{'s' if len(runs) > 1 else ''} ended at greedy {_f(min(g))}–{_f(max(g))} (mean "
            f"{_f(sum(g) / len(g))}) and sampled {_f(min(sm))}–{_f(max(sm))} (mean "
            f"{_f(sum(sm) / len(sm))})"
        )
    flat = b.get("blocks_without_gain") or []
    tail = (
        f" In {_blocks(flat)} uniform's greedy accuracy ended at or below its start; targets "
        "come from uniform's mean gain over the blocks, so those blocks have them too."
        if flat
        else ""
    )
    return [f"*{setting.capitalize()}, by build of the start:* " + "; ".join(parts) + "." + tail]


def headline_selection_updates(r: Any, name: str = "headline") -> str:
    """Per setting and arm, what the selection bought per update and how it held up across the
    run: informative groups per 1,000 rollouts sampled, the informative share by quarter of
    the updates (and what the posterior arms expected), Sieve's trained groups by outcome,
    and generated sentences reading them against uniform."""
    rows, outcome_rows, reading = [], [], []
    g = int(r(name, "setup")["group_size"])
    for setting, b in r(name, "settings").items():
        for arm in ORDER:
            bp = b["arms"].get(arm, {}).get("by_part")
            if not bp or not bp["seeds"]:
                continue
            rows.append([
                setting, ARM_NAMES[arm], str(bp["seeds"]),
                _per_k(bp["informative_per_1k_sampled"]), _shares(bp["realized"]),
                _shares(bp.get("predicted")), _shares(bp.get("predicted_at_mean")),
            ])  # fmt: skip
            go = b["arms"][arm].get("group_outcomes")
            for q, part in enumerate(go["parts"] if go else []):
                if not any(sum(v.values()) for v in part.values()):
                    continue
                part_of = " (in part)" if q >= go["whole_parts"] else ""
                outcome_rows.append([
                    setting, ARM_NAMES[arm], f"{q + 1}{part_of}",
                    *(" / ".join(str(part[v][o]) for o in ("mixed", "all_wrong", "all_right"))
                      for v in ("first", "revisit")),
                ])  # fmt: skip
        reading += _by_start(setting, b) + _reading(setting, b, g)
    if not rows:
        return "No run has finished yet."
    text = _table(
        [
            "start", "arm", "seeds", "informative groups per 1,000 rollouts sampled (seeds' range)",
            "informative share by quarter of updates",
            "posterior predictive's expected share by quarter",
            "expected share at the posterior mean (ignores its spread)",
        ],
        rows,
    )  # fmt: skip
    if outcome_rows:
        text += (
            "\n\nSieve's trained groups by what they turned out to be (groups, summed over "
            "seeds; a first visit is the run's first group of that prompt; a quarter \"in part\" "
            "is one the last checkpoint's observations reach only in its first updates):\n\n"
            + _table(
                [
                    "start", "arm", "quarter of updates",
                    "first visits: mixed / all wrong / all right",
                    "revisits: mixed / all wrong / all right",
                ],
                outcome_rows,
            )
        )  # fmt: skip
    if reading:
        text += "\n\n" + "\n\n".join(reading)
    return text


def headline_selection_tiny_updates(r: Any) -> str:
    return headline_selection_updates(r, "headline_tiny")
