"""`pipeline.jobs.train.replay`: stored curation samples as the trainer's samples (their stored
token ids, re-tokenised text for rows without), refused settings, and the zero-variance streaks over
curation and training history.

Test: `.venv/bin/pytest tests/test_replay.py -q`.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from pipeline.core.errors import SieveError
from pipeline.jobs.curate.rollouts import RunInfo, record_run
from pipeline.jobs.train.replay import (
    ReplayBias,
    curation_visits,
    replay_bias,
    stored_groups,
    zero_var_streaks,
)
from pipeline.policy.tokenizer import build_tokenizer
from pipeline.problems import generate
from pipeline.sampling.base import Completion, SamplingParams
from pipeline.store import Ledger


@pytest.fixture
def ledger() -> Iterator[Ledger]:
    with Ledger.memory() as led:
        yield led


def add_run(
    ledger: Ledger,
    run_id: str,
    at: str,
    *,
    temperature: float = 1.0,
    top_p: float | None = None,
    tokens: int = 16,
    purpose: str = "screen",
) -> None:
    ledger.run(
        "INSERT INTO sampling_runs (run_id, purpose, model, model_revision, backend, group_size,"
        " temperature, top_p, max_new_tokens, started_at, status) VALUES ($r, $p, 'tiny', 'rev',"
        " 'hf', 2, $t, $tp, $n, $at::TIMESTAMPTZ, 'finished')",
        {"r": run_id, "p": purpose, "t": temperature, "tp": top_p, "n": tokens, "at": at},
    )


def add_rollouts(
    ledger: Ledger,
    run_id: str,
    rows: list[tuple[str, str, str, float]],
    ids: list[list[int] | None] | None = None,
) -> None:
    """rows: (problem_id, completion, finish_reason, reward); n_tokens = len(completion), or
    len(ids[i]) where row i has stored token ids (`ids`; None: none, as before migration 0013)."""
    ids = ids or [None] * len(rows)
    for i, ((pid, text, reason, reward), toks) in enumerate(zip(rows, ids, strict=True)):
        n = len(text) if toks is None else len(toks)
        ledger.run(
            "INSERT INTO rollouts (run_id, problem_id, sample_idx, completion, n_tokens,"
            " token_ids, finish_reason, reward, correct)"
            " VALUES ($r, $p, $i, $c, $n, $ids, $f, $w, $w > 0.5)",
            {"r": run_id, "p": pid, "i": i, "c": text, "n": n, "ids": toks, "f": reason,
             "w": reward},
        )  # fmt: skip


def test_stored_groups_are_retokenised_with_eos_where_they_stopped(ledger: Ledger) -> None:
    tok = build_tokenizer()
    add_run(ledger, "s1", "2026-01-01")
    add_rollouts(ledger, "s1", [("p", "12", "stop", 1.0), ("p", "1234", "length", 0.0),
                                ("q", "7", "stop", 0.0)])  # fmt: skip
    got = stored_groups(ledger, ["s1"], tok, temperature=1.0, max_new_tokens=16)
    assert sorted(got.groups) == ["p", "q"] and got.retokenised_off == 0
    first, second = got.groups["p"]
    eos = tok.eos_token_id
    assert first.token_ids == (*tok("12", add_special_tokens=False)["input_ids"], eos)
    assert not first.truncated and second.truncated and second.token_ids[-1] != eos
    assert tok.decode(list(second.token_ids)) == "1234"
    assert all(not s.replayed and s.logprobs is None for s in got.groups["p"])


def test_a_prompt_whose_tokens_do_not_round_trip_is_left_out(ledger: Ledger) -> None:
    add_run(ledger, "s1", "2026-01-01")
    add_rollouts(ledger, "s1", [("p", "12", "stop", 1.0), ("q", "7", "stop", 0.0)])
    ledger.run("UPDATE rollouts SET n_tokens = 5 WHERE problem_id = 'q'")
    got = stored_groups(ledger, ["s1"], build_tokenizer(), temperature=1.0, max_new_tokens=16)
    assert sorted(got.groups) == ["p"] and got.retokenised_off == 1


def test_a_token_count_that_includes_the_eos_of_a_stopped_completion_round_trips(
    ledger: Ledger,
) -> None:
    """vLLM's n_tokens counts the end-of-sequence token of a completion that stopped (the text
    lacks it): such a group is replayed. One more token than that, or a completion cut at the
    budget counted one over, is still off."""
    tok = build_tokenizer()
    add_run(ledger, "s1", "2026-01-01")
    rows = [("p", "12", "stop", 1.0), ("p", "7", "stop", 0.0), ("q", "12", "stop", 1.0)]
    add_rollouts(ledger, "s1", [*rows, ("r", "1234", "length", 0.0)])
    n = {t: len(tok(t, add_special_tokens=False)["input_ids"]) for t in ("12", "7", "1234")}
    for pid, text, extra in (("p", "12", 1), ("p", "7", 1), ("q", "12", 2), ("r", "1234", 1)):
        ledger.run(
            "UPDATE rollouts SET n_tokens = $n WHERE problem_id = $p AND completion = $c",
            {"n": n[text] + extra, "p": pid, "c": text},
        )
    got = stored_groups(ledger, ["s1"], tok, temperature=1.0, max_new_tokens=16)
    assert sorted(got.groups) == ["p"] and got.retokenised_off == 2
    assert got.groups["p"][0].token_ids == (*tok("12", add_special_tokens=False)["input_ids"],
                                            tok.eos_token_id)  # fmt: skip


def test_stored_token_ids_are_replayed_as_sampled_not_re_tokenised(ledger: Ledger) -> None:
    """Migration 0013: `record_run` stores each completion's sampled ids and replay trains on
    exactly those. Here no text re-tokenises to its ids (the sampler drew <unk>, which decoding
    skips). Re-tokenised, a's hf-style stopped row comes out one token short, which the vLLM EOS
    allowance accepts, so a would replay other ids than were sampled; b's vLLM-style row (ids
    ending with EOS) does not round-trip, so b would be left out."""
    tok = build_tokenizer()
    eos, unk = tok.eos_token_id, tok.unk_token_id
    one, two, three, five = tok.convert_tokens_to_ids(["1", "2", "3", "5"])
    problems = generate("arith", [1], 2, seed=0)
    a, b = problems["problem_id"].to_list()
    groups = [
        [
            Completion("1", (one, unk), "stop"),  # hf: ids end before the EOS it stopped at
            Completion("2", (two,), "stop"),
        ],
        [
            Completion("12", (one, unk, two, eos), "stop"),  # vLLM: ids end with that EOS
            Completion("35", (three, unk, five), "length"),  # cut at the budget: no EOS
        ],
    ]
    params = SamplingParams(temperature=1.0, max_new_tokens=16)
    record_run(ledger, RunInfo("screen", "tiny", "rev", "hf", 2, params, run_id="s1"),
               problems, groups)  # fmt: skip
    stored = ledger.sql("SELECT problem_id, token_ids, n_tokens FROM rollouts ORDER BY ALL")
    assert stored.rows() == [
        (a, [one, unk], 2),
        (a, [two], 1),
        (b, [one, unk, two, eos], 4),
        (b, [three, unk, five], 3),
    ]
    got = stored_groups(ledger, ["s1"], tok, temperature=1.0, max_new_tokens=16)
    assert got.retokenised_off == 0 and sorted(got.groups) == [a, b]
    assert [s.token_ids for s in got.groups[a]] == [(one, unk, eos), (two, eos)]
    assert [s.token_ids for s in got.groups[b]] == [
        (one, unk, two, eos),  # ends with EOS already: not doubled
        (three, unk, five),
    ]
    assert [(s.text, s.truncated) for s in got.groups[b]] == [("12", False), ("35", True)]
    # the same rows without their ids (as written before 0013) take the re-tokenising path:
    # a's ids come from its text, b is left out
    ledger.run("UPDATE rollouts SET token_ids = NULL")
    old = stored_groups(ledger, ["s1"], tok, temperature=1.0, max_new_tokens=16)
    assert list(old.groups) == [a] and old.retokenised_off == 1
    assert [s.token_ids for s in old.groups[a]] == [(one, eos), (two, eos)]


def test_rows_without_stored_ids_fall_back_to_re_tokenisation(ledger: Ledger) -> None:
    """Per row: p's rows have ids (used as they are), q's have none and round-trip (re-tokenised),
    r's have none and do not round-trip (left out, counted), and s mixes a row with ids and one
    without that does not round-trip: its group would be incomplete, so it is left out too."""
    tok = build_tokenizer()
    eos, unk = tok.eos_token_id, tok.unk_token_id
    seven, nine = tok.convert_tokens_to_ids(["7", "9"])
    add_run(ledger, "s1", "2026-01-01")
    rows = [("p", "7", "stop", 1.0), ("p", "9", "length", 0.0), ("q", "12", "stop", 1.0),
            ("r", "34", "stop", 0.0), ("s", "7", "stop", 1.0),
            ("s", "56", "stop", 0.0)]  # fmt: skip
    ids = [[seven, unk], [unk, nine], None, None, [seven], None]
    add_rollouts(ledger, "s1", rows, ids)
    ledger.run("UPDATE rollouts SET n_tokens = 5 WHERE completion IN ('34', '56')")
    got = stored_groups(ledger, ["s1"], tok, temperature=1.0, max_new_tokens=16)
    assert sorted(got.groups) == ["p", "q"] and got.retokenised_off == 2
    assert [s.token_ids for s in got.groups["p"]] == [(seven, unk, eos), (unk, nine)]
    assert [s.token_ids for s in got.groups["q"]] == [
        (*tok("12", add_special_tokens=False)["input_ids"], eos)
    ]


@pytest.mark.parametrize(
    ("settings", "named"),
    [({"temperature": 0.7}, "temperature 0.7"), ({"top_p": 0.9}, "top_p 0.9"),
     ({"tokens": 32}, "max_new_tokens 32")],
)  # fmt: skip
def test_other_sampling_settings_are_refused(
    ledger: Ledger, settings: dict[str, float], named: str
) -> None:
    add_run(ledger, "s1", "2026-01-01", **settings)  # type: ignore[arg-type]
    add_rollouts(ledger, "s1", [("p", "12", "stop", 1.0)])
    with pytest.raises(SieveError, match=f"cannot replay run s1: it sampled with {named}"):
        stored_groups(ledger, ["s1"], build_tokenizer(), temperature=1.0, max_new_tokens=16)


def test_samples_of_other_weights_than_training_starts_from_are_refused(ledger: Ledger) -> None:
    """The trainer weighs a replayed sample by its reference's log-probs (the weights training
    starts from): a curation run of another model revision is refused, the same one is read."""
    add_run(ledger, "s1", "2026-01-01")  # sampled with revision "rev"
    add_rollouts(ledger, "s1", [("p", "12", "stop", 1.0), ("p", "7", "stop", 0.0)])
    tok = build_tokenizer()
    named = r"it sampled with model revision rev \(training starts from rev2\)"
    with pytest.raises(SieveError, match=named):
        stored_groups(ledger, ["s1"], tok, temperature=1.0, max_new_tokens=16, revision="rev2")
    got = stored_groups(ledger, ["s1"], tok, temperature=1.0, max_new_tokens=16, revision="rev")
    assert sorted(got.groups) == ["p"]


def test_streaks_count_the_trailing_zero_variance_groups_over_curation_and_training(
    ledger: Ledger,
) -> None:
    add_run(ledger, "s1", "2026-01-01")
    add_run(ledger, "r1", "2026-01-02", purpose="refine")
    # p: informative at screen, flat at refine; q: flat, flat; u: informative last
    add_rollouts(ledger, "s1", [("p", "1", "stop", 1.0), ("p", "2", "stop", 0.0),
                                ("q", "1", "stop", 0.0), ("q", "2", "stop", 0.0),
                                ("u", "1", "stop", 0.0), ("u", "2", "stop", 0.0)])  # fmt: skip
    add_rollouts(ledger, "r1", [("p", "1", "stop", 1.0), ("p", "2", "stop", 1.0),
                                ("q", "1", "stop", 0.0), ("q", "2", "stop", 0.0),
                                ("u", "1", "stop", 1.0), ("u", "2", "stop", 0.0)])  # fmt: skip
    visits = curation_visits(ledger, ["s1", "r1"])
    assert visits.filter(problem_id="p")["flat"].to_list() == [False, True]
    assert visits["size"].to_list() == [2] * 6
    # groups of 2: each flat one is a quarter of a full group's visit (issue 46 point 6)
    assert zero_var_streaks(ledger) == {"p": 0.25, "q": 0.5}
    # a later training run: p flat twice more, q solved once (informative) then flat
    ledger.run(
        "INSERT INTO train_runs (train_id, started_at, status) "
        "VALUES ('t', '2026-01-03'::TIMESTAMPTZ, 'finished')"
    )
    rows = [(0, "p", 1.0), (0, "p", 1.0), (1, "p", 1.0), (1, "p", 1.0),
            (0, "q", 1.0), (0, "q", 0.0), (1, "q", 0.0), (1, "q", 0.0)]  # fmt: skip
    for i, (step, pid, reward) in enumerate(rows):
        ledger.run(
            "INSERT INTO train_rollouts (train_id, step, problem_id, sample_idx, policy, reward)"
            " VALUES ('t', $s, $p, $i, 'rev', $w)",
            {"s": step, "p": pid, "i": i, "w": reward},
        )
    assert zero_var_streaks(ledger) == {"p": 0.75, "q": 0.25}
    # skipped at step 2 (train_skips, rows of train_group_stats): a skip observes nothing
    ledger.run("INSERT INTO train_skips VALUES ('t', 2, 'p', 3, 0.79), ('t', 2, 'q', 1, 0.45)")
    skipped = ledger.sql("SELECT problem_id, n, skipped FROM train_group_stats WHERE step = 2")
    assert sorted(skipped.rows()) == [("p", 0, True), ("q", 0, True)]
    assert zero_var_streaks(ledger) == {"p": 0.75, "q": 0.25}


def test_streaks_weigh_each_group_by_its_size(ledger: Ledger) -> None:
    """Issue 46 point 6: a flat G = 4 screen adds half a visit, a flat group of 8 or more one
    whole visit (integers, as before, when every group is that large)."""
    add_run(ledger, "s1", "2026-01-01")
    add_rollouts(ledger, "s1", [(pid, "1", "stop", 0.0) for pid in ("small",) * 4 + ("full",) * 8])
    assert zero_var_streaks(ledger) == {"small": 0.5, "full": 1}
    ledger.run(
        "INSERT INTO train_runs (train_id, started_at, status) "
        "VALUES ('t', '2026-01-03'::TIMESTAMPTZ, 'finished')"
    )
    for i in range(24):  # small: a flat group of 8 at step 0; full: one at steps 0 and 1
        step, pid = (0, "small") if i < 8 else (i // 16, "full")
        ledger.run(
            "INSERT INTO train_rollouts (train_id, step, problem_id, sample_idx, policy, reward)"
            " VALUES ('t', $s, $p, $i, 'rev', 0.0)",
            {"s": step, "p": pid, "i": i},
        )
    streaks = zero_var_streaks(ledger)
    assert streaks == {"small": 1.5, "full": 3}
    assert type(streaks["full"]) is int  # whole visits stay integers


def test_a_fractional_streak_is_recorded_as_it_was(ledger: Ledger) -> None:
    """`sieve train` writes the streak a skip saw (now real-valued) to train_skips unrounded."""
    import polars as pl

    from pipeline.jobs.train.recorder import SKIP_SCHEMA

    skip = ("t", 2, "p", 0.5, 0.9 * (1 - 0.5**0.5))
    ledger.write("train_skips", pl.DataFrame([skip], schema=SKIP_SCHEMA, orient="row"))
    assert ledger.sql("SELECT streak, p_skip FROM train_skips").rows() == [skip[3:]]


def test_history_prior_reads_training_evidence_of_the_same_revision(ledger: Ledger) -> None:
    """Issue 30 point 4: a curriculum prompt (informative at its screen) that stayed at zero
    through training is zero-variance for the next night's history prior; one with a training
    group that disagreed is not (issue 46 point 6: flat means every training group flat);
    training samples join the pool (n, k)."""
    add_run(ledger, "s1", "2026-01-01")
    both = [("p", "1", "stop", 1.0), ("p", "2", "stop", 0.0),
            ("q", "1", "stop", 1.0), ("q", "2", "stop", 0.0)]  # fmt: skip
    add_rollouts(ledger, "s1", both)
    before = ledger.query("history_prior", exclude=[]).sort("problem_id")
    assert before["zero_variance"].to_list() == [False, False]
    ledger.run(
        "INSERT INTO train_runs (train_id, base_revision, started_at, status) "
        "VALUES ('t', 'rev', '2026-01-02'::TIMESTAMPTZ, 'finished')"
    )
    rows = [(0, "p", 0.0, False), (0, "p", 0.0, False), (1, "p", 0.0, False),
            (0, "q", 0.0, False), (0, "q", 1.0, True), (1, "q", 1.0, True)]  # fmt: skip
    for i, (step, pid, reward, correct) in enumerate(rows):
        ledger.run(
            "INSERT INTO train_rollouts (train_id, step, problem_id, sample_idx, policy, reward,"
            " correct) VALUES ('t', $s, $p, $i, 'rev', $w, $c)",
            {"s": step, "p": pid, "i": i, "w": reward, "c": correct},
        )
    # q skipped at the newest step: neither its evidence nor "solved in training" changes
    ledger.run("INSERT INTO train_skips VALUES ('t', 2, 'q', 0, 0.0)")
    after = ledger.query("history_prior", exclude=[]).sort("problem_id")
    assert after.select("problem_id", "n", "k", "zero_variance").rows() == [
        ("p", 5, 1, True),
        ("q", 5, 3, False),
    ]
    assert after["solved_in_training"].to_list() == [False, True]  # q's newest group: 1 of 1
    assert after["last_seen"].dt.day().to_list() == [2, 2]
    # the revision's history stays one row per problem x revision (the allocation counts rows)
    assert after.height == before.height


def test_history_prior_calls_a_prompt_flat_in_every_training_group_zero_variance(
    ledger: Ledger,
) -> None:
    """Issue 46 point 6: zero-variance training evidence is every training group flat (the one
    rule per group), not "never solved": r, solved in every training sample (k = n in each
    group), and f, all right at one step and all wrong at the next (its pooled samples disagree
    but no group ever gave a gradient), are zero-variance; m, one mixed group, is not."""
    import polars as pl

    from pipeline.selection import CurateConfig, history_prior

    add_run(ledger, "s1", "2026-01-01")
    add_rollouts(ledger, "s1", [(pid, str(i), "stop", float(i)) for pid in "fmr" for i in (0, 1)])
    ledger.run(
        "INSERT INTO train_runs (train_id, base_revision, started_at, status) "
        "VALUES ('t', 'rev', '2026-01-02'::TIMESTAMPTZ, 'finished')"
    )
    groups = {"f": [[1.0] * 4, [0.0] * 4], "m": [[0.0] * 4, [1.0, 0.0, 0.0, 0.0]],
              "r": [[1.0] * 4, [1.0] * 4]}  # fmt: skip
    i = 0
    for pid, steps in groups.items():
        for step, rewards in enumerate(steps):
            for reward in rewards:
                ledger.run(
                    "INSERT INTO train_rollouts (train_id, step, problem_id, sample_idx, policy,"
                    " reward, correct) VALUES ('t', $s, $p, $i, 'rev', $w, $w > 0.5)",
                    {"s": step, "p": pid, "i": i, "w": reward},
                )
                i += 1
    history = ledger.query("history_prior", exclude=[]).sort("problem_id")
    assert history.select("problem_id", "n", "k", "zero_variance", "solved_in_training").rows() == [
        ("f", 10, 5, True, False),
        ("m", 10, 2, False, False),
        ("r", 10, 9, True, True),
    ]
    cands = pl.DataFrame({"problem_id": ["f", "m", "r"]})
    kept, rejected = history_prior(cands, history, CurateConfig(history_skip_prob=1.0))
    assert dict(rejected.rows()) == {"f": "skipped_by_history", "r": "solved_in_training"}
    assert kept["problem_id"].to_list() == ["m"]


def test_a_prompt_solved_in_training_is_a_replay_candidate_not_screened_again(
    ledger: Ledger,
) -> None:
    """Issue 30 point 4: q's newest training group (run t, last step) was all correct, so the
    next night's prior takes it out of the screen (`solved_in_training`, every time) and the
    curriculum's replay pool gets it with its pooled counts; p (zero through training) is
    treated as zero-variance, and so is w, solved at one step and not at the next in groups that
    never disagreed (issue 46 point 6: every training group flat)."""
    import polars as pl

    from pipeline.jobs.curate.curation import replay_pool, solved_counts
    from pipeline.selection import CurateConfig, history_prior

    add_run(ledger, "s1", "2026-01-01")
    add_rollouts(ledger, "s1", [("p", "1", "stop", 1.0), ("p", "2", "stop", 0.0),
                                ("q", "1", "stop", 1.0), ("q", "2", "stop", 0.0),
                                ("w", "1", "stop", 1.0), ("w", "2", "stop", 0.0)])  # fmt: skip
    ledger.run(
        "INSERT INTO train_runs (train_id, base_revision, started_at, status) "
        "VALUES ('t', 'rev', '2026-01-02'::TIMESTAMPTZ, 'finished')"
    )
    rows = [(0, "p", 0.0, False), (1, "p", 0.0, False),
            (0, "q", 0.0, False), (1, "q", 1.0, True), (1, "q", 1.0, True),
            (0, "w", 1.0, True), (1, "w", 0.0, False)]  # fmt: skip
    for i, (step, pid, reward, correct) in enumerate(rows):
        ledger.run(
            "INSERT INTO train_rollouts (train_id, step, problem_id, sample_idx, policy, reward,"
            " correct) VALUES ('t', $s, $p, $i, 'rev', $w, $c)",
            {"s": step, "p": pid, "i": i, "w": reward, "c": correct},
        )
    history = ledger.query("history_prior", exclude=[]).sort("problem_id")
    assert history["solved_in_training"].to_list() == [False, True, False]
    cands = pl.DataFrame({"problem_id": ["p", "q", "w"]})
    for skip_prob in (0.0, 1.0):  # q is taken out whatever the re-exploration draw
        cfg = CurateConfig(history_skip_prob=skip_prob)
        kept, rejected = history_prior(cands, history, cfg)
        reasons = dict(rejected.rows())
        assert reasons.get("q") == "solved_in_training" and "q" not in kept["problem_id"]
        for flat in ("p", "w"):  # w: right at step 0, wrong at step 1, no group disagreed
            assert (reasons.get(flat) == "skipped_by_history") == (skip_prob == 1.0)
    all_correct = pl.DataFrame({"problem_id": ["z"], "n": [8], "k": [8]})
    pool, rest, solved = replay_pool(all_correct, rejected, solved_counts(history, rejected))
    assert solved.to_list() == ["q"] and "q" not in rest["problem_id"]
    assert sorted(pool.select("problem_id", "n", "k").rows()) == [("q", 5, 3), ("z", 8, 8)]
    # sieve stats' per-cell view: curation groups (s1: all three informative) vs training
    # groups (t: every step's group of a prompt is flat here)
    for pid, level in (("p", 1), ("q", 1), ("w", 2)):
        ledger.run(
            "INSERT INTO problems (problem_id, source, family, level, question, answer, "
            "verifier, split, created_at) VALUES ($p, 'gen:arith', 'arith', $l, $p, '1', "
            "'math', 'train', now())",
            {"p": pid, "l": level},
        )
    cells = ledger.query("cell_evidence").rows(named=True)
    assert [(c["level"], c["curation_prompts"], c["training_prompts"]) for c in cells] == [
        (1, 2, 2),
        (2, 1, 1),
    ]
    assert [c["curation_informative"] for c in cells] == [1.0, 1.0]
    assert [c["training_informative"] for c in cells] == [0.0, 0.0]
    assert [c["training_pass"] for c in cells] == [0.4, 0.5]


def test_replay_bias_sums_a_runs_replayed_and_fresh_groups(ledger: Ledger) -> None:
    """Issue 46 point 5: per training run, the replayed groups, how many were the samples that
    selected their prompt, and the zero-variance share of replayed against fresh groups."""
    steps: dict[int, dict[str, float]] = {  # step -> the collector's metrics (replay_curation)
        0: {"replayed_groups": 3, "replayed_selecting_groups": 3, "replayed_flat_groups": 0,
            "fresh_groups": 1, "fresh_flat_groups": 0},
        1: {"replayed_groups": 1, "replayed_selecting_groups": 0, "replayed_flat_groups": 1,
            "fresh_groups": 3, "fresh_flat_groups": 2, "loss": 0.5},
    }  # fmt: skip
    for step, metrics in steps.items():
        for name, value in metrics.items():
            ledger.run(
                "INSERT INTO train_metrics VALUES ($t, $s, $n, $v)",
                {"t": "run-1", "s": step, "n": name, "v": float(value)},
            )
    bias = replay_bias(ledger, "run-1")
    assert (bias.replayed_groups, bias.selecting_groups, bias.replayed_flat) == (4, 3, 1)
    assert (bias.fresh_groups, bias.fresh_flat) == (4, 2)
    assert (bias.replayed_flat_share, bias.fresh_flat_share) == (0.25, 0.5)
    none = replay_bias(ledger, "another-run")
    assert none == ReplayBias(0, 0, 0, 0, 0) and none.replayed_flat_share is None
