"""The selection headline's generated blocks (results/headline.json, benchmarks/headline.py),
registered in render_docs.BLOCKS: `headline-selection` (README) and `headline-selection-runs`
(docs/real-models.md, the per-run accounting) and `headline-selection-cells` (there too: where
each arm's difference comes from, per held-out cell); the tiny policy's run of the same protocol
(results/headline_tiny.json, `--policy tiny`): `headline-selection-tiny` (README),
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
}
MIN_CELL_PROBLEMS = 12  # held-out problems per cell the protocol asks for (issue 45 point 4)
ORDER = ("uniform", "sieve", "sieve_screen", "night", "mopps", "greso", "dapo")
GOAL = (
    "Goal (issue 45): from the warm start, Sieve's default reaches uniform's final held-out "
    "accuracy with ≤ 0.5× of uniform's rollouts, all counted, ahead of GRESO, DAPO and the "
    "MoPPS-style arm, with intervals that exclude zero; from the cold start it does not fall "
    "behind uniform."
)


def _f(x: Any, digits: int = 3) -> str:
    return "–" if x is None else f"{x:.{digits}f}"


def _ci(d: Any, digits: int = 3, unit: str = "") -> str:
    if d is None:
        return "–"
    if d.get("seeds") == 1 and "problems" not in d:  # an interval over one seed says nothing
        return f"{_f(d['mean'], digits)}{unit} (1 seed)"
    lo, hi = d["ci95"]
    # a bootstrap over two seeds' values spans exactly those two values: their range, not a CI
    two = " (range of 2 seeds)" if d.get("seeds") == 2 and "problems" not in d else ""
    return f"{_f(d['mean'], digits)} [{_f(lo, digits)}, {_f(hi, digits)}]{unit}{two}"


def _table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return "\n".join([*lines, *("| " + " | ".join(r) + " |" for r in rows)])


def _no_target(block: Any) -> bool:
    """Uniform ended at or below the start's greedy accuracy: every arm 'reaches' its final at
    0 rollouts, so rollouts-to-target says nothing."""
    u = block["arms"].get("uniform")
    return u is not None and u["final_greedy"]["mean"] <= block["start"]["greedy"]


def _blocks(labels: list[str]) -> str:
    return f"block{'s' if len(labels) > 1 else ''} {', '.join(labels)}"


def _count(n: int, noun: str) -> str:
    """'1 paired seed', '5 paired seeds'."""
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _unreached(entry: Any) -> str:
    """The paired blocks where an arm never reached a target uniform reached, and the ratio
    counting each of them at the budget (a lower bound), or ""."""
    blocks = entry.get("not_reached_paired") or []
    if not blocks:
        return ""
    low = entry.get("ratio_counting_unreached_at_budget")
    return f"not reached within the budget in {_blocks(blocks)}" + (
        f" (counting {'them' if len(blocks) > 1 else 'it'} at the budget, a lower bound: "
        f"{_ci(low, 2, '×')})"
        if low
        else ""
    )


def _ratio_cell(entry: Any) -> str:
    ratio, miss = entry["ratio_to_uniform"], _unreached(entry)
    if ratio is None:
        return miss or "–"
    return _ci(ratio, 2, "×") + (f"; {miss}" if miss else "")


def _setting_table(block: Any) -> str:
    arms = block["arms"]
    runs = block["runs"]
    no_target = _no_target(block)
    rows = []
    for arm in ORDER:
        if arm not in arms:
            continue
        a = arms[arm]
        mine = [r for r in runs if r["arm"] == arm]
        diff = a.get("diff_sampled_vs_uniform") if arm != "uniform" else None
        sig = "" if diff is None else (" (significant)" if diff["significant"] else " (n.s.)")
        reach = a.get("rollouts_to_target")
        informative = [r["informative_share_per_update"] for r in mine]
        informative = [x for x in informative if x is not None]
        rows.append([
            ARM_NAMES[arm],
            ", ".join(str(s) for s in a["seeds"]),
            _ci(a["final_sampled"]),
            _ci(a["final_greedy"]),
            "–" if arm == "uniform" else _ci(diff) + sig,
            "n/a" if no_target
            else "1.00×" if arm == "uniform"
            else ("–" if not reach else _ratio_cell(reach[-1])),
            "/".join(str(u) for u in a["updates"]),
            _f(sum(informative) / len(informative), 2) if informative else "–",
            str(sum(r["rollouts_decided_not_trained"] for r in mine)),
        ])  # fmt: skip
    return _table(
        [
            "arm", "seeds", "final sampled pass@1 [95% CI over seeds]", "final greedy",
            "paired Δ sampled vs uniform [95% CI, seeds × problems]",
            "rollouts to uniform's final greedy, ratio [95% CI]", "updates per seed",
            "informative share per update", "rollouts that decided and did not train",
        ],
        rows,
    )  # fmt: skip


def _verdict(block: Any, cold: bool = False) -> str:
    """Sieve against the goal: from the warm start, the whole goal (≤ 0.5× of uniform's
    rollouts, ahead of every other method, intervals excluding zero, ≥ 4 paired seeds); from the
    cold start (`cold`), not falling behind uniform: neither paired Δ (sampled, greedy)
    significantly below zero, and uniform's final greedy reached on every paired seed."""
    arms = block["arms"]
    if "sieve" not in arms or "uniform" not in arms:
        return "Sieve's arm has not finished a seed from this start yet: no verdict."
    s = arms["sieve"]
    reach = s.get("rollouts_to_target") or []
    ratio = reach[-1]["ratio_to_uniform"] if reach else None
    diff = s.get("diff_sampled_vs_uniform")
    parts = []
    if _no_target(block):
        parts.append(
            "uniform ended at or below the start's greedy accuracy, so rollouts to its final "
            "say nothing (n/a)"
        )
    elif ratio is None:
        parts.append("Sieve did not reach uniform's final greedy accuracy on any paired seed")
    else:
        parts.append(
            f"Sieve reached uniform's final greedy accuracy with {_ci(ratio, 2, '×')} of uniform's "
            "rollouts" + (" (seed mean [95% CI])" if ratio.get("seeds", 0) > 2 else "")
        )
        if reach[-1].get("not_reached_paired"):
            parts[-1] += (
                f" on the {_count(ratio['seeds'], 'paired block')} where it reached it; "
                + _unreached(reach[-1])
            )
    flat = block.get("blocks_without_gain") or []
    if flat and not _no_target(block):
        parts[-1] += (
            f" (uniform ended at or below its start in {_blocks(flat)}: no target there, left "
            "out of the ratio)"
        )
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
        return "; ".join(parts) + _cold_goal(s, reach, block)
    ahead = all(d["significant"] and d["mean"] > 0 for d in others.values())
    met = (
        not _no_target(block) and ratio is not None and ratio["ci95"][1] <= 0.5
        and not reach[-1].get("not_reached_paired") and diff is not None
        and diff["significant"] and diff["mean"] > 0 and len(s["paired_seeds"]) >= 4
        and ahead and len(others) == 3
    )  # fmt: skip
    return "; ".join(parts) + (". **Goal met.**" if met else ". **Goal not met**" + _left(block))


def _cold_goal(s: Any, reach: list[Any], block: Any) -> str:
    """The cold goal's sentence: behind when a paired Δ is significantly below zero; not shown
    to keep up when no Δ is, yet some paired seed never reached uniform's final greedy."""
    diffs = {
        "sampled": s.get("diff_sampled_vs_uniform"), "greedy": s.get("diff_greedy_vs_uniform")
    }  # fmt: skip
    if any(d is None for d in diffs.values()):
        return ". **Goal not met**: no paired seed to compare" + _left(block)
    behind = [k for k, d in diffs.items() if d["significant"] and d["mean"] < 0]
    short = (reach[-1].get("not_reached_paired") or []) if reach and not _no_target(block) else []
    paired = len(s["paired_seeds"])
    sig = "significant" if diffs["greedy"]["significant"] else "n.s."
    greedy = f"paired Δ in final greedy {_ci(diffs['greedy'])}, {sig}"
    if behind:
        why = f"Sieve is significantly behind uniform in final {' and '.join(behind)} ({greedy})"
    elif short:
        why = (
            f"no paired Δ is significantly below zero ({greedy}), yet Sieve ended below "
            f"uniform's final greedy on {len(short)} of {_count(paired, 'paired seed')}, so "
            "keeping up is not shown"
        )
    else:
        return f"; {greedy}. **Goal met** (not behind uniform)" + _left(block)
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


def headline_selection(r: Any, name: str = "headline") -> str:
    """The README's headline: each setting's table and a verdict against the stated goal."""
    tiny = name == "headline_tiny"
    setup = r(name, "setup")
    settings = r(name, "settings")
    goal = (
        "The same protocol on the tiny policy (issue 45 point 6), cold from the bootstrapped "
        "policy, where many seeds are cheap; the goal above is the real model's."
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
        "± and brackets: 95 % bootstrap intervals (seeds; for Δ, seeds and held-out problems, "
        'paired), except where marked "range of 2 seeds": a bootstrap over two seeds\' values '
        "spans exactly those two values, so that bracket is their range, not an interval. "
        "With few seeds a bootstrap over seeds is also narrower than the truth. "
        "\"Rollouts to uniform's final\" reads each seed's isotonic fit of its greedy "
        "curve against uniform's final on the same seed, as a ratio to uniform's own rollouts "
        "on that seed; the two lower targets are in the JSON."
    )
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
    if me["realized"] and me["predicted"]:
        out.append(
            f"Sieve's informative share went {_shares(me['realized'])} across the quarters of "
            f"its updates while its posterior expected {_shares(me['predicted'])}; uniform's "
            f"went {_shares(uni['realized'])}."
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
        f" In {_blocks(flat)} uniform's greedy accuracy "
        "ended at or below its start, so only the final sampled pass@1 (the paired Δ) compares "
        "arms there; rollouts to a greedy target come from the other blocks."
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
                _shares(bp["predicted"]),
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
            "informative share by quarter of updates", "posterior's expected share by quarter",
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
