"""Build the headline's warm start with the code that first built it, and check its weights.

The warm start is rebuilt on every new machine (its weights live in /tmp). Its weights are
the same bits only when the same code builds them on the same kind of machine: the campaign's
later pinned tree (issue 48's update path: the LM head at scored positions, micro-batches cut by
completion length, fused AdamW) computes the same gradients within float tolerance, yet after
12 updates its weights differ, hash and all; and on the machine of 2026-12-06 even the tree that
built the first record built other weights (the same tree built the same weights twice there).
Runs from other weights pair with none of the runs already finished. So the driver builds the
start with the tree named by `START_CODE` and this script refuses to go on unless the hash
matches a committed record: it never scores or writes a start of other weights (the benchmark
would spend ~30 min evaluating one).

    START_CODE=/work/campaign-start .venv-vllm/bin/python benchmarks/headline_start.py \\
        --results benchmarks/results --state /tmp/sieve-headline

`benchmarks/headline_driver.sh` runs it before its first run when `START_CODE` is set and the
warm weights are not in the state folder. Exit 0: the weights are in `<state>/warm` and match a
committed start record; exit 1 with one line saying what differs otherwise (the weights are moved
aside to `<state>/warm.mismatch`, so the benchmark does not pick them up). Either way it writes
`<results>/headline_start.json` + `.png`: the tree, the hash built, whether a record holds it,
this build's cost beside the record's, and the machine's load (the driver commits them).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from pathlib import Path


def report(
    results: Path, commit: str | None, digest: str, folder: Path, records: list[str]
) -> None:
    """The build's outcome as JSON + PNG under `results`: a rebuild is a measurement (which tree,
    which machine, which weights, at what cost), whether or not it matches."""
    cost_file = folder / "cost.json"
    record = results / "headline_runs" / f"start_warm_{digest}.json"
    out = {
        "code": commit,
        "hash": digest,
        "matches_record": record.is_file(),
        "records": records,
        "build": json.loads(cost_file.read_text()) if cost_file.is_file() else None,
        "record_build": json.loads(record.read_text()).get("cost") if record.is_file() else None,
        "cpus": os.cpu_count(),
        "load_1m": os.getloadavg()[0],
    }
    (results / "headline_start.json").write_text(json.dumps(out, indent=1) + "\n")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 3))
    bars = {"this build": out["build"], "the record's build": out["record_build"]}
    names = [k for k, v in bars.items() if v]
    ax.bar(names, [bars[k]["seconds"] / 60 for k in names], color="tab:gray")
    ax.set_ylabel("minutes to build the warm start")
    ax.set_title(f"{commit}: {digest} ({'matches' if out['matches_record'] else 'no'} record)")
    fig.tight_layout()
    fig.savefig(results / "headline_start.png", dpi=100)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--results", type=Path, required=True, help="the results folder")
    ap.add_argument("--state", type=Path, required=True, help="the campaign's weights folder")
    ap.add_argument("--model", type=Path, default=None, help="the base model folder")
    args = ap.parse_args(argv)
    code = Path(os.environ.get("START_CODE", Path(__file__).resolve().parents[1]))
    sys.path[:0] = [str(code), str(code / "benchmarks")]
    import headline as hl

    runs_dir = args.results / "headline_runs"
    records = sorted(p.name for p in runs_dir.glob("start_warm_*.json"))
    if not records:
        print(f"no committed warm start record in {runs_dir}", file=sys.stderr)
        return 1

    def refuse(*_: object, **__: object) -> None:
        folder = args.state / "warm"
        digest = hl.weights_hash(pol.model)
        if f"start_warm_{digest}.json" in records:  # the weights match; the verifier does not
            report(args.results, hl.code_commit(), digest, folder, records)
            raise SystemExit(
                f"start_warm_{digest}.json was scored under another verifier than {code} has: "
                "run the campaign with the tree that scored it"
            )
        shutil.rmtree(args.state / "warm.mismatch", ignore_errors=True)
        folder.rename(args.state / "warm.mismatch")
        report(args.results, hl.code_commit(), digest, args.state / "warm.mismatch", records)
        raise SystemExit(
            f"the warm start built by {code} has weights {digest}, which no committed record "
            f"({', '.join(records)}) holds: build it with the tree that made the record"
        )

    hl.evaluate = refuse  # a start of other weights is never scored nor recorded
    from pipeline.problems.mix import load_mix

    setup = hl.Setup()
    mix = load_mix(hl.MIX_FILE).levels()
    model_dir = args.model or hl.MODEL
    held = hl.held_out(mix, setup.per_level).unique("problem_id", keep="first", maintain_order=True)
    pol = hl.load(setup, model_dir)
    base = {k: v.detach().clone() for k, v in pol.model.state_dict().items()}
    _, start = hl.start_point(setup, "warm", pol, base, mix, held, runs_dir, args.state, model_dir)
    report(args.results, hl.code_commit(), start["hash"], args.state / "warm", records)
    print(f"warm start {start['hash']} matches the committed start_warm_{start['hash']}.json")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
