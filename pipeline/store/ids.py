"""How one curation's ledger ids follow from its key: the curriculum `cur-<key>`, its screen and
refine runs `screen-<key>` / `refine-<key>` (`pipeline.jobs.curate.curation` derives the key from
the config and the model revision), and which curriculum a name a user gives (an id, or `latest`:
the newest curriculum with items) stands for (`resolve_curriculum`). Here, below every job, so
the jobs that read a curation's runs (audit, export, report, train, backtest) need not import
the curation job."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pipeline.core.errors import SieveError

if TYPE_CHECKING:
    from pipeline.store.ledger import Ledger


def curriculum_id(key: str) -> str:
    """The id of the curriculum of the curation with this key."""
    return f"cur-{key}"


def curation_runs(curriculum: str) -> list[str]:
    """The screen and refine run ids of the curation that wrote `curriculum` (every id of one
    curation is derived from its key: `curriculum_id`, `pipeline.jobs.curate.curation.run_info`)."""
    key = curriculum.removeprefix("cur-")
    return [f"{purpose}-{key}" for purpose in ("screen", "refine")]


def resolve_curriculum(ledger: Ledger, curriculum: str) -> str:
    """A curriculum id, `latest` meaning the newest with items (`latest_curriculum`);
    SieveError when there is none."""
    if curriculum == "latest":
        latest = latest_curriculum(ledger)
        if latest is not None:
            return latest
        (empty,) = ledger.run("SELECT count(*) FROM curricula")[0]
        if empty:
            raise SieveError(
                f"no curriculum with items yet: {empty} curated kept no prompt (name one by "
                "its id to read it); curate again, e.g. at a higher temperature or on more "
                "candidates"
            )
        raise SieveError("no curriculum yet: run `sieve curate` first")
    if not ledger.run("SELECT 1 FROM curricula WHERE curriculum_id = $c", {"c": curriculum}):
        raise SieveError(
            f'no curriculum {curriculum!r} (see `sieve sql "SELECT * FROM curricula"`)'
        )
    return curriculum


def latest_curriculum(ledger: Ledger) -> str | None:
    """The id `latest` names: the newest curriculum with at least one item. A curation that
    kept nothing is recorded (its rejections; `sieve audit ID` reads its runs) but never
    `latest`, so `sieve train`, `export` and `curriculum show` keep to the newest one that can
    be trained on. None when there is none."""
    from pipeline.store.ledger import load_query

    rows = ledger.run(load_query("export_latest_curriculum"))
    return str(rows[0][0]) if rows else None
