"""The nightly flow: curate with the newest checkpoint (the trainer issue adds train -> eval).

Each night draws fresh candidates: the curation seed is the configured seed plus the date
(YYYYMMDD), so re-exploration by the history prior rotates instead of revisiting the same
prompts (a fixed seed re-explores the same ones every night). A re-run on the same night is a
no-op, because curation ids follow from the inputs.

Serve it on a schedule with `sieve schedule --cron "0 2 * * *"` (needs a Prefect server:
`prefect server start`, then `PREFECT_API_URL=http://127.0.0.1:4200/api`).
Test: `pytest tests/flows/test_schedule.py`.
"""

from __future__ import annotations

from datetime import UTC, date, datetime
from typing import Any

from prefect import flow
from pydantic import BaseModel, ConfigDict, Field

from flows.curate import CurateParams, curate_flow
from pipeline.selection import CurateConfig

DEPLOYMENT = "nightly"


class NightlyParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    model: str = Field(description="Model folder (the newest checkpoint once training lands).")
    backend: str = "hf"
    base_urls: list[str] = Field(default_factory=list)
    home: str | None = None
    config: CurateConfig = Field(default_factory=CurateConfig)
    night: str | None = Field(default=None, description="YYYY-MM-DD; default today (UTC).")


def night_seed(config: CurateConfig, night: date) -> int:
    return config.seed + int(night.strftime("%Y%m%d"))


@flow(name="sieve-nightly", log_prints=True)
def nightly_flow(params: NightlyParams) -> dict[str, Any]:
    night = date.fromisoformat(params.night) if params.night else datetime.now(UTC).date()
    config = params.config.model_copy(update={"seed": night_seed(params.config, night)})
    curate = CurateParams(
        model=params.model,
        backend=params.backend,
        base_urls=params.base_urls,
        home=params.home,
        config=config,
    )
    summary = curate_flow(curate)
    print(f"night {night}: curriculum {summary['curriculum_id']} kept {summary['kept']}")
    return {"night": night.isoformat(), "curate": summary}


def serve(cron: str, params: NightlyParams, name: str = DEPLOYMENT) -> None:
    """Register the deployment with its cron schedule and run it here (blocks until stopped)."""
    nightly_flow.serve(
        name=name,
        cron=cron,
        parameters={"params": params.model_dump(mode="json")},
        description="Sieve: curate (then train, eval) every night",
        print_starting_message=True,
    )
