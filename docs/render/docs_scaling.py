"""The generated blocks of docs/scaling.md and docs/reliability.md.

Each function reads benchmarks/results/*.json (through `Results`) or the code and returns one
block's Markdown; `BLOCKS` names them for `render_docs.py`, which puts each between its
`<!-- generated:begin NAME -->` markers.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from render_base import Results, num, table, times


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
            [
                "candidates",
                "runner",
                "workers",
                "rollouts",
                "wall s",
                "rollouts/s",
                "vs local",
            ],
            rows,
        )
        + f"\n\nThe full run's ledgers are {same} in every setting (rollout checksums compared)."
    )


def scale_estimate(r: Results) -> str:
    a = r("scale", "paper_estimate", "assumptions")
    one, four = (
        r("scale", "paper_estimate", "1_node"),
        r("scale", "paper_estimate", "4_node"),
    )
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


BLOCKS: dict[str, Callable[[Results], str]] = {
    "scale": scale,
    "scale-estimate": scale_estimate,
    "ddp-step": ddp_step,
    "sandbox": sandbox,
}
