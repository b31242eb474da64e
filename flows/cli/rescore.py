"""`sieve rescore`: judge a run's stored completions again with the current verifier.

The new verdicts are added to `rescored_verdicts` beside the stored ones (`pipeline.jobs.rescore`);
the rollouts are never rewritten. It prints how many verdicts were re-judged, how many changed
per family (right to wrong, wrong to right) under the current verifier version, and a few
changed verdicts; ledger text in them prints as it is, never as Rich markup.

Test: `.venv/bin/pytest tests/cli/test_rescore_cli.py -q`.
"""

from __future__ import annotations

from typing import Annotated

import typer

from flows.cli.common import out, show
from flows.cli.options import HomeOpt


def rescore(
    target: Annotated[
        str, typer.Argument(help="A sampling run id, a curriculum id, or 'latest'.")
    ] = "latest",
    examples: Annotated[int, typer.Option(help="Changed verdicts to list.")] = 5,
    home: HomeOpt = None,
) -> None:
    """Judge the stored completions of a run again with the current verifier and keep the new
    verdicts beside the old ones (`latest`: the newest curriculum's screen and refine runs;
    table rescored_verdicts, view verdict_changes). The rollouts are never rewritten; a second
    rescore under the same verifier version adds nothing."""
    from pipeline.jobs.rescore import rescore_home

    done, shown = rescore_home(home, target, examples)
    columns = ("rescored", "changed", "correct_to_wrong", "wrong_to_correct", "other")
    stored, changed, worse, better, other = (int(n) for n in done.changes[columns].sum().row(0))
    errors = f", {other} to or from a verifier error" if other else ""
    out.print(
        f"{done.label} ({', '.join(done.runs)}): {done.judged} verdicts "
        f"re-judged under verifier {done.version} ({stored - done.judged} rescored "
        f"under it before); {changed} of {stored} changed: {worse} correct -> wrong, "
        f"{better} wrong -> correct{errors}"
    )
    show(done.changes, f"verdict changes by family under {done.version}")
    if examples:
        show(shown, "example changed verdicts (first 200 characters of the completion)")
