"""`sieve curate --ingested FAMILY`: a user's own problems (stored by `sieve ingest`) are the
candidates, not the generator's mix; a family the ledger does not hold is one line."""

from __future__ import annotations

from pathlib import Path

import pytest

from flows import commands
from pipeline.core.errors import SieveError
from pipeline.jobs.data.intake import ingest_file
from pipeline.problems.columns import Columns
from pipeline.selection import CurateConfig
from pipeline.store import Ledger

FIXTURE = Path(__file__).parent / "fixtures" / "ingest" / "gsm8k.jsonl"


def test_curation_screens_the_ingested_train_problems(tmp_path: Path, tiny_model_dir: Path) -> None:
    home = tmp_path / "home"
    ingest_file(home, FIXTURE, Columns(split="split"))
    with Ledger.open(home, read_only=True) as ledger:
        train = set(ledger.sql("SELECT problem_id FROM problems WHERE split = 'train'")[
            "problem_id"])  # fmt: skip
        before = ledger.sql("SELECT count(*) FROM problems").item()
    request = commands.CurateRequest(
        overrides={"n_candidates": 4, "seed": 3, "ingested": ["external"]},
        model=tiny_model_dir,
    )
    commands.curate(request, home)
    with Ledger.open(home, read_only=True) as ledger:
        screened = set(ledger.sql(
            "SELECT DISTINCT r.problem_id FROM rollouts r JOIN sampling_runs s USING (run_id) "
            "WHERE s.purpose = 'screen'")["problem_id"])  # fmt: skip
        after = ledger.sql("SELECT count(*) FROM problems").item()
    assert screened and screened <= train  # only the user's train problems, no generated one
    assert len(screened) == min(4, len(train)) and after == before  # nothing generated


@pytest.mark.parametrize("families", [["gsm8k"], ["external", "nope"], ["arith"]])
def test_a_family_the_ledger_does_not_hold_is_one_line(tmp_path: Path, families: list[str]) -> None:
    from pipeline.jobs.curate.curation import ingested_candidates

    home = tmp_path / "home"
    ingest_file(home, FIXTURE, Columns(split="split"))
    cfg = CurateConfig(ingested=families, n_candidates=10)
    with Ledger.open(home, read_only=True) as ledger:
        if "external" in families:  # one of them is there: its problems, the other adds none
            got = ingested_candidates(ledger, cfg)
            assert set(got["family"]) == {"external"} and set(got["split"]) == {"train"}
            return
        with pytest.raises(SieveError, match="holds no train-split problem") as err:
            ingested_candidates(ledger, cfg)
    assert "\n" not in str(err.value)
