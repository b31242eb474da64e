"""One curation end to end on a simulated policy: stages, rejections, idempotent re-runs, and
no run resumed under another verifier version than its stored rollouts were judged by."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import polars as pl
import pytest

from flows.curate import curate
from pipeline.core.errors import SieveError
from pipeline.jobs.curate.curation import Policy
from pipeline.sampling.base import Completion, Sampler
from pipeline.scoring import VERIFIER_VERSION
from pipeline.selection import REASONS, CurateConfig
from pipeline.store import Ledger
from pipeline.store.ids import resolve_curriculum
from tests.simulated import RATES, reachable_problems, simulated_policy, use_verifier_version

TABLES = ("sampling_runs", "rollouts", "curricula", "curriculum_items", "rejections", "problems")


@pytest.fixture
def cfg() -> CurateConfig:
    return CurateConfig(
        n_candidates=300, mix={"arith": "1-6"}, seed=3, chunk_size=40, history_skip_prob=0.8
    )


def test_curation_leaves_runs_two_stages_and_reasons(ledger: Ledger, cfg: CurateConfig) -> None:
    result = curate(ledger, simulated_policy(reachable_problems(cfg), RATES), cfg)
    runs = ledger.sql("SELECT purpose, group_size, status FROM sampling_runs ORDER BY purpose")
    assert runs.rows() == [("refine", 32, "finished"), ("screen", 8, "finished")]
    items = ledger.sql("SELECT * FROM curriculum_items")
    stages = items.group_by("stage").agg(pl.col("group_size").unique()).sort("stage")
    assert stages["stage"].to_list() == [1, 2]
    assert stages["group_size"][0].to_list() == [cfg.stage1_g]
    assert max(stages["group_size"][1].to_list()) > cfg.stage1_g  # hard prompts get a larger G
    reasons = set(ledger.sql("SELECT DISTINCT reason FROM rejections")["reason"])
    assert {"heldout", "all_correct", "all_wrong"} <= reasons <= set(REASONS)
    everything = items.height + ledger.checksum("rejections")[0]
    assert everything == result.candidates  # every candidate is kept or rejected with a reason
    assert (
        result.rollouts["screen"]
        == ledger.sql(f"SELECT count(*) AS n FROM rollouts WHERE run_id = '{result.screen_run}'")[
            "n"
        ][0]
    )


def test_running_again_with_the_same_seed_adds_nothing(ledger: Ledger, cfg: CurateConfig) -> None:
    policy = simulated_policy(reachable_problems(cfg), RATES)
    curate(ledger, policy, cfg)
    before = {t: ledger.checksum(t) for t in TABLES}
    drawn = policy.sampler.calls  # type: ignore[attr-defined]
    curate(ledger, policy, cfg)
    assert {t: ledger.checksum(t) for t in TABLES} == before
    assert policy.sampler.calls == drawn  # type: ignore[attr-defined]


def test_history_prior_skips_flat_prompts_next_time(ledger: Ledger, cfg: CurateConfig) -> None:
    policy = simulated_policy(reachable_problems(cfg), RATES)
    curate(ledger, policy, cfg)
    again = curate(ledger, policy, cfg.model_copy(update={"refine_g": 40}))  # a new curation
    skipped = again.rejections.filter(pl.col("reason") == "skipped_by_history")
    assert skipped.height > 0
    first_flat = ledger.sql(
        "SELECT problem_id FROM group_stats WHERE purpose = 'screen' AND zero_variance"
    )["problem_id"]
    assert skipped["problem_id"].is_in(first_flat.implode()).all()


def test_next_curation_spreads_candidates_by_cell_history(
    ledger: Ledger, cfg: CurateConfig
) -> None:
    first = curate(ledger, simulated_policy(reachable_problems(cfg), RATES), cfg)
    counts = ledger.sql("SELECT level, count(*) AS n FROM problems GROUP BY level ORDER BY level")
    assert counts["n"].to_list() == [50] * 6  # no history: the even spread
    nxt = cfg.model_copy(update={"seed": 4})
    second = curate(ledger, simulated_policy(reachable_problems(nxt), RATES), nxt)
    assert second.curriculum_id != first.curriculum_id
    made = ledger.sql(
        "SELECT p.level, count(*) AS n FROM problems AS p JOIN rollouts AS r USING (problem_id) "
        "JOIN sampling_runs AS s USING (run_id) WHERE s.run_id = $run AND r.sample_idx = 0 "
        "GROUP BY p.level ORDER BY p.level",
        {"run": second.screen_run},
    )
    per_level = dict(made.rows())
    # levels 1 (always right) and 6 (never) were flat; 3 and 4 were informative
    assert per_level[3] > 50 and per_level[4] > 50
    assert per_level[1] < 50 and per_level[6] < 50
    assert sum(per_level.values()) < cfg.n_candidates  # held-out ones never reach the screen
    # the explored share keeps every level in the screen
    assert set(per_level) == set(range(1, 7))


def test_an_empty_or_flat_pool_gives_an_empty_curriculum(ledger: Ledger) -> None:
    cfg = CurateConfig(n_candidates=60, mix={"arith": "1"}, seed=1, chunk_size=50)
    policy = simulated_policy(reachable_problems(cfg), RATES)  # level 1: always right
    result = curate(ledger, policy, cfg)
    assert result.items.filter(pl.col("reason") != "replay").height == 0
    assert set(result.rejections["reason"]) <= {"all_correct", "heldout", "duplicate"}


def test_an_empty_curriculum_is_recorded_but_never_latest(
    ledger: Ledger, cfg: CurateConfig, capsys: pytest.CaptureFixture[str]
) -> None:
    """A curation that keeps nothing (a flat pool; on the command line `--temperature 1e-6`)
    wrote an empty curriculum that became `latest`, so `sieve train`, `export` and `curriculum
    show` took it. It is still recorded (its rejections; `sieve audit ID` reads its runs), but
    `latest` names the newest curriculum with items, and the curation says so in a warning."""
    first = curate(ledger, simulated_policy(reachable_problems(cfg), RATES), cfg)
    assert first.items.height > 0
    flat = CurateConfig(n_candidates=60, mix={"arith": "1"}, seed=1, chunk_size=50)
    capsys.readouterr()
    empty = curate(ledger, simulated_policy(reachable_problems(flat), RATES), flat)
    assert empty.items.is_empty()
    assert ledger.sql("SELECT count(*) AS n FROM curricula")["n"][0] == 2  # recorded
    assert resolve_curriculum(ledger, "latest") == first.curriculum_id
    assert resolve_curriculum(ledger, empty.curriculum_id) == empty.curriculum_id
    line = (
        f"curriculum {empty.curriculum_id} kept no prompt, so it is not `latest` (still "
        f"{first.curriculum_id})"
    )
    assert any(w.startswith(line) for w in empty.warnings), empty.warnings
    assert f"warning: {line}" in capsys.readouterr().err


def test_latest_is_none_while_every_curriculum_is_empty(ledger: Ledger) -> None:
    flat = CurateConfig(n_candidates=60, mix={"arith": "1"}, seed=1, chunk_size=50)
    empty = curate(ledger, simulated_policy(reachable_problems(flat), RATES), flat)
    assert any("so it is not `latest` (there is none yet)" in w for w in empty.warnings)
    with pytest.raises(SieveError, match="no curriculum with items yet: 1 curated kept no prompt"):
        resolve_curriculum(ledger, "latest")


OLD_VERSION = "sieve-math/3+math-verify/0.8.0"


class StopsAfter:
    """A sampler that samples `chunks` chunks and then fails, as a crashed process would."""

    def __init__(self, inner: Sampler, chunks: int):
        self.inner, self.left = inner, chunks
        self.backend, self.model_name = inner.backend, inner.model_name

    def sample(self, prompts: Sequence[str], n: int, params: Any) -> list[list[Completion]]:
        if self.left == 0:
            raise RuntimeError("killed")
        self.left -= 1
        return self.inner.sample(prompts, n, params)


def crashed_under_old_version(
    ledger: Ledger, cfg: CurateConfig, monkeypatch: pytest.MonkeyPatch, chunks: int
) -> Policy:
    """A curation killed after `chunks` screen chunks under the old verifier; returns the
    policy, and the current verifier is the real one again."""
    policy = simulated_policy(reachable_problems(cfg), RATES)
    use_verifier_version(monkeypatch, OLD_VERSION)
    with pytest.raises(RuntimeError, match="killed"):
        curate(ledger, replace(policy, sampler=StopsAfter(policy.sampler, chunks)), cfg)
    use_verifier_version(monkeypatch, VERIFIER_VERSION)
    return policy


def test_a_run_crashed_under_another_verifier_is_not_resumed(
    ledger: Ledger, cfg: CurateConfig, monkeypatch: pytest.MonkeyPatch
) -> None:
    policy = crashed_under_old_version(ledger, cfg, monkeypatch, chunks=2)
    before = {t: ledger.checksum(t) for t in ("rollouts", "rollout_steps", "verifier_audit")}
    drawn = policy.sampler.calls  # type: ignore[attr-defined]
    with pytest.raises(SieveError) as refused:
        curate(ledger, policy, cfg)
    message = str(refused.value)
    run = ledger.sql("SELECT run_id, verifier_version FROM sampling_runs").row(0)
    assert "\n" not in message and run[0].startswith("screen-")
    for part in (run[0], OLD_VERSION, VERIFIER_VERSION, f"sieve rescore {run[0]}", "--seed"):
        assert part in message
    assert run[1] == OLD_VERSION  # the row keeps the version its rollouts were judged by
    assert {t: ledger.checksum(t) for t in before} == before  # nothing sampled or rewritten
    assert policy.sampler.calls == drawn  # type: ignore[attr-defined]


def test_a_run_without_rollouts_starts_under_the_current_verifier(
    ledger: Ledger, cfg: CurateConfig, monkeypatch: pytest.MonkeyPatch
) -> None:
    policy = crashed_under_old_version(ledger, cfg, monkeypatch, chunks=0)
    assert ledger.checksum("rollouts")[0] == 0
    curate(ledger, policy, cfg)
    versions = ledger.sql("SELECT DISTINCT verifier_version FROM sampling_runs")
    assert versions["verifier_version"].to_list() == [VERIFIER_VERSION]


def test_a_finished_curation_re_run_under_another_verifier_adds_and_rewrites_nothing(
    ledger: Ledger, cfg: CurateConfig, monkeypatch: pytest.MonkeyPatch
) -> None:
    policy = simulated_policy(reachable_problems(cfg), RATES)
    use_verifier_version(monkeypatch, OLD_VERSION)
    curate(ledger, policy, cfg)
    before = {t: ledger.checksum(t) for t in TABLES}
    drawn = policy.sampler.calls  # type: ignore[attr-defined]
    use_verifier_version(monkeypatch, VERIFIER_VERSION)
    curate(ledger, policy, cfg)
    assert {t: ledger.checksum(t) for t in TABLES} == before  # run rows keep the old version
    assert policy.sampler.calls == drawn  # type: ignore[attr-defined]


def test_a_refresh_night_screens_only_cells_the_lineage_does_not_know(
    ledger: Ledger, cfg: CurateConfig
) -> None:
    """`screen = "unknown"` (issue 46 point 4: nightly curation refreshes the prior): with no
    evidence every candidate is screened; the next curation (new candidates) screens only those
    of cells the first one did not cover, and puts the others in stage 2 by their cell's
    posterior (reason cell_prior / cell_prior_explore, G from the posterior) without sampling
    them; a re-run decides exactly as the first run did (its own screen is not evidence)."""
    refresh = cfg.model_copy(update={"screen": "unknown", "mix": {"arith": "1-3"}})
    wider = refresh.model_copy(update={"seed": 4, "mix": {"arith": "1-6"}})
    known = pl.concat([reachable_problems(refresh), reachable_problems(wider)])
    policy = simulated_policy(known, RATES)
    first = curate(ledger, policy, refresh)
    assert (
        first.rollouts["screen"]
        == 8
        * ledger.sql(  # every candidate the prior kept
            f"SELECT count(DISTINCT problem_id) FROM rollouts WHERE run_id = '{first.screen_run}'"
        ).item()
        > 0
    )
    assert not first.items["reason"].is_in(["cell_prior", "cell_prior_explore"]).any()
    second = curate(ledger, policy, wider)
    screened = ledger.sql(
        "SELECT DISTINCT p.level FROM rollouts r JOIN problems p USING (problem_id) "
        f"WHERE r.run_id = '{second.screen_run}'"
    )["level"].to_list()
    assert sorted(screened) == [4, 5, 6]  # levels 1-3 go by their cells' priors
    levels = dict(ledger.sql("SELECT problem_id, level FROM problems").rows())
    prior = second.items.filter(pl.col("reason").is_in(["cell_prior", "cell_prior_explore"]))
    assert prior.height > 0
    assert {levels[p] for p in prior["problem_id"]} <= {1, 2, 3}
    assert (prior["stage"] == 2).all()
    assert prior["group_size"].is_between(cfg.stage1_g, cfg.max_group_size).all()
    explore = prior.filter(pl.col("reason") == "cell_prior_explore")
    assert (explore["group_size"] == cfg.max_group_size).all()
    assert (prior["p_low"] <= prior["p_mean"]).all() and (prior["p_mean"] <= prior["p_high"]).all()
    # every candidate is kept or rejected with a reason, once
    rejected = ledger.sql(
        "SELECT count(*) FROM rejections WHERE curriculum_id = $c", {"c": second.curriculum_id}
    ).item()
    assert second.items.height + rejected == second.candidates
    before = {t: ledger.checksum(t) for t in TABLES}
    curate(ledger, policy, wider)
    assert {t: ledger.checksum(t) for t in TABLES} == before
    # the switch is part of the curation's identity; at its default it is left out of the key,
    # so curations made before it existed keep their ids (the key as it was computed before)
    import hashlib
    import json

    from pipeline.jobs.curate.curation import curation_key

    plain = cfg.model_copy(update={"mix": {"arith": "1-3"}})
    assert curation_key(refresh, "r") != curation_key(plain, "r")
    dump = plain.model_dump(mode="json")
    assert dump["sampling"]["temperature"] is None  # unset: hashed as the value it samples at
    dump["sampling"]["temperature"] = plain.sampling.sampling_temperature
    for name in (
        "process_signal",
        "screen",
        "known_cell_samples",
        "ingested",
        "audit_share",
        "audit_warn",
    ):
        dump.pop(name)
    payload = json.dumps({"cfg": dump, "rev": "r"}, sort_keys=True).encode()
    assert curation_key(plain, "r") == hashlib.sha256(payload).hexdigest()[:12]
