"""How one curation's ledger ids follow from its key: the curriculum `cur-<key>`, its screen and
refine sampling runs `screen-<key>` / `refine-<key>` (`pipeline.jobs.curate` derives the key from
the config and the model revision). Here, below every job, so the jobs that read a curation's runs
(audit, export, report, train, backtest) need not import the curation job."""

from __future__ import annotations


def curriculum_id(key: str) -> str:
    """The id of the curriculum of the curation with this key."""
    return f"cur-{key}"


def curation_runs(curriculum: str) -> list[str]:
    """The screen and refine run ids of the curation that wrote `curriculum` (every id of one
    curation is derived from its key: `curriculum_id`, `pipeline.jobs.curate.run_info`)."""
    key = curriculum.removeprefix("cur-")
    return [f"{purpose}-{key}" for purpose in ("screen", "refine")]
