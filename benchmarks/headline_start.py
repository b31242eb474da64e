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
aside to `<state>/warm.mismatch`, so the benchmark does not pick them up).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from pathlib import Path


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
            raise SystemExit(
                f"start_warm_{digest}.json was scored under another verifier than {code} has: "
                "run the campaign with the tree that scored it"
            )
        shutil.rmtree(args.state / "warm.mismatch", ignore_errors=True)
        folder.rename(args.state / "warm.mismatch")
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
    print(f"warm start {start['hash']} matches the committed start_warm_{start['hash']}.json")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
