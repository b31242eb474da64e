"""benchmarks/headline.py: the matched-update protocol's accounting end to end on the tiny
policy (hf backend, tiny budgets), and its statistics on made-up numbers.

The tiny random-init policy never answers right, so the smoke runs score with a reward that
pays half of the completions by a hash of their text: groups then disagree, and every arm has
something to choose and train on."""

from __future__ import annotations

import hashlib
import json
import math
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "docs" / "render"))
import headline as hl

from grpo_core.types import Scores


def coin_reward(setup: Any) -> Any:
    def reward(items: Any, samples: Any) -> Scores:
        ok = [hashlib.sha256(s.text.encode()).digest()[0] % 2 == 0 for s in samples]
        return Scores([float(x) for x in ok], ok)

    return reward


# the arms the coin reward reaches (the night arm runs the product's loop, which scores with
# Sieve's verifiers: on the random policy it pays nothing, so it runs once, for its accounting);
# every other arm, `sieve_learning` and the cell oracle included, runs on the coin reward
ONLINE = [a for a in hl.ARMS if a not in ("night", "second")]


@pytest.fixture(scope="module")
def smoke(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("headline")
    mp = pytest.MonkeyPatch()
    mp.setattr(hl, "reward_fn", coin_reward)
    try:
        hl.main(["--smoke", "--results", str(out), "--seeds", "1", "2", "--arms", ",".join(ONLINE)])
        hl.main(["--smoke", "--results", str(out), "--seeds", "1", "--setting", "cold",
                 "--arms", "uniform,night"])  # fmt: skip
    finally:
        mp.undo()
    return out


def runs(folder: Path) -> dict[str, dict[str, Any]]:
    return {
        f.stem: json.loads(f.read_text())
        for f in (folder / "headline_smoke_runs").glob("*_s*.json")
    }


def test_every_update_trains_the_same_number_of_rollouts_and_no_run_overruns(smoke: Path) -> None:
    setup = hl.SMOKE
    got = runs(smoke)
    assert set(got) == {f"warm_{a}_s{s}" for a in ONLINE for s in (1, 2)} | {
        "cold_uniform_s1",
        "cold_night_s1",
    }
    for name, r in got.items():
        if r["arm"] == "night":
            continue  # test_the_night_arm_counts_its_curation_and_never_overruns
        steps = r["steps"]
        assert r["done"] and r["final"]["scored"] > 0, name
        assert sum(s["sampled"] for s in steps) <= setup.budget, name
        assert sum(s["sampled"] for s in steps) > setup.budget - setup.per_update, name
        for s in steps:
            # a batch is the same size for every arm: batch_prompts groups of G, or nothing
            assert s["trained"] in (0, setup.per_update), (name, s)
            assert s["groups"] in (0, setup.batch_prompts), (name, s)
            assert not s["update"] or s["informative"] > 0, (name, s)
            if r["arm"] == "sieve_screen":  # flat screens decide without training
                assert s["sampled"] >= s["trained"], (name, s)
                # what did not train is whole screens of G / 2 (or a whole unfilled batch)
                assert (s["sampled"] - s["trained"]) % (setup.group_size // 2) == 0, (name, s)
            elif r["arm"] != "dapo":  # only DAPO and the screens sample groups not trained
                assert s["sampled"] == setup.per_update, (name, s)
                # ... and a step whose batch was all zero-variance: it made no update
                assert s["trained"] == (setup.per_update if s["update"] else 0), (name, s)
            else:
                assert s["trained"] in (0, setup.per_update) and s["sampled"] >= s["trained"]
                assert s["trained"] == 0 or s["informative"] == setup.batch_prompts
        assert sum(s["update"] for s in steps) > 0, name  # the coin reward gives spread


def test_the_night_arm_counts_its_curation_and_never_overruns(smoke: Path) -> None:
    """The `night` arm (the product's `sieve loop`): each night's curation is a record of its
    own (sampled, none trained), its training steps never train more than a batch, the nights'
    curation adds up, and no night is started that the budget could not pay for."""
    setup = hl.SMOKE
    r = runs(smoke)["cold_night_s1"]
    steps, nights = r["steps"], r["nights"]
    assert r["done"] and r["final"]["scored"] > 0 and nights
    assert sum(s["sampled"] for s in steps) <= setup.budget
    curation = [s for s in steps if s.get("curation")]
    assert len(curation) == len(nights)
    assert [s["sampled"] for s in curation] == [n["curation_rollouts"] for n in nights]
    assert all(s["trained"] == 0 and not s["update"] for s in curation)
    for s in steps:
        assert s["trained"] <= setup.per_update and s["groups"] <= setup.batch_prompts
    assert sum(n["kept"] for n in nights) == sum(sum(n["kept_by_reason"].values()) for n in nights)
    assert r["curve"][0]["rollouts"] == 0 and r["curve"][-1]["rollouts"] == sum(
        s["sampled"] for s in steps
    )


def test_the_warm_start_is_shared_and_cells_are_measured_from_it(smoke: Path) -> None:
    got = runs(smoke)
    warm = {r["start"] for n, r in got.items() if n.startswith("warm")}
    assert len(warm) == 1
    (record,) = (smoke / "headline_smoke_runs").glob(f"start_warm_{warm.pop()}.json")
    start = json.loads(record.read_text())
    assert start["cost"]["updates"] <= hl.SMOKE.warm_updates
    assert start["cost"]["rollouts"] == hl.SMOKE.warm_updates * hl.SMOKE.per_update
    assert {c["zone"] for c in start["cells"]} <= {"always", "learnable", "never"}
    assert len(start["cells"]) == sum(len(v) for v in hl.SMOKE_MIX.values())
    cold = got["cold_uniform_s1"]["start"]
    assert cold != start["hash"]  # the cold runs start from the base


def test_a_second_invocation_runs_nothing_again(smoke: Path, monkeypatch: Any) -> None:
    before = {n: r["seconds"] for n, r in runs(smoke).items()}
    monkeypatch.setattr(hl, "reward_fn", coin_reward)
    hl.main(["--smoke", "--results", str(smoke), "--seeds", "1", "--arms", "uniform,dapo"])
    assert {n: r["seconds"] for n, r in runs(smoke).items()} == before


def test_the_summary_pairs_arms_to_uniform_with_intervals(smoke: Path) -> None:
    result = json.loads((smoke / "headline_smoke.json").read_text())
    warm = result["settings"]["warm"]
    assert set(warm["arms"]) == set(ONLINE)
    for arm in ("dapo", "greso", "mopps"):
        d = warm["arms"][arm]["diff_sampled_vs_uniform"]
        assert d["seeds"] == 2 and d["ci95"][0] <= d["mean"] <= d["ci95"][1]
    # the goal names the other methods too: Sieve's arms are paired with each of them
    for arm in ("sieve", "sieve_screen"):
        others = warm["arms"][arm]["diff_sampled_vs_others"]
        assert set(others) == {"mopps", "greso", "dapo"}
        assert all(
            d["seeds"] == 2 and d["ci95"][0] <= d["mean"] <= d["ci95"][1] for d in others.values()
        )
    assert "diff_sampled_vs_others" not in warm["arms"]["mopps"]
    rows = {(r["arm"], r["seed"]): r for r in warm["runs"]}
    # uniform decides nothing, but a step whose batch was all zero-variance trained none of it
    uni = rows[("uniform", 1)]
    assert uni["rollouts_decided_not_trained"] == hl.SMOKE.per_update * uni["empty_steps"]
    assert warm["held_out"]["same_in_every_run"]
    dapo = rows[("dapo", 1)]
    assert (
        dapo["rollouts_sampled"] == dapo["rollouts_trained"] + dapo["rollouts_decided_not_trained"]
    )
    assert "cold" in result["settings"] and (smoke / "headline_smoke.png").is_file()


def test_cells_vs_uniform_pairs_seeds_per_cell_and_ranks_gains_first(smoke: Path) -> None:
    def final(sampled: dict[tuple[str, int], float | None]) -> dict[str, Any]:
        return {
            "sampled": 0.1 if None not in sampled.values() else None,
            "by_level": [
                {"family": f, "level": lv, "problems": 16, "greedy": 0.0, "sampled": v}
                for (f, lv), v in sampled.items()
            ],
        }

    mine = [
        final({("arith", 1): 0.5, ("linear", 2): 0.1}),
        final({("arith", 1): 0.7, ("linear", 2): 0.2}),
    ]
    uni = [
        final({("arith", 1): 0.4, ("linear", 2): 0.3}),
        final({("arith", 1): 0.4, ("linear", 2): 0.2}),
    ]
    cells = hl.cells_vs_uniform(mine, uni)
    assert [(c["family"], c["level"]) for c in cells] == [("arith", 1), ("linear", 2)]
    assert cells[0]["delta"] == pytest.approx(0.2) and cells[1]["delta"] == pytest.approx(-0.1)
    assert all(c["seeds"] == 2 and c["measure"] == "sampled" for c in cells)
    # a final without a sampled evaluation falls back to greedy for every cell
    greedy = hl.cells_vs_uniform([final({("arith", 1): None})], [final({("arith", 1): 0.4})])
    assert greedy[0]["measure"] == "greedy" and greedy[0]["delta"] == 0.0
    # the smoke campaign's summary carries the table for every arm paired with uniform
    warm = json.loads((smoke / "headline_smoke.json").read_text())["settings"]["warm"]
    for arm in ("dapo", "greso", "mopps"):
        got = warm["arms"][arm]["cells_vs_uniform"]
        assert got and [c["delta"] for c in got] == sorted((c["delta"] for c in got), reverse=True)


def test_the_readme_block_gives_a_verdict_against_the_goal_whichever_way(smoke: Path) -> None:
    """The generated headline from a smoke result: a table per start, Sieve's verdict (the
    goal needs ≥ 4 paired seeds, so two seeds never meet it), the per-run accounting."""
    import docs_headline
    import render_docs

    results = render_docs.Results(smoke)
    (smoke / "headline.json").write_text((smoke / "headline_smoke.json").read_text())
    for name in ("power.json", "headline_stats.json"):  # the committed power figures
        (smoke / name).write_text((hl.RESULTS / name).read_text())
    body = docs_headline.headline_selection(results)
    assert "*Warm start* (built by uniform GRPO for" in body
    assert "**Goal not met** (yet)." in body and "GRESO with refill" in body
    assert "against the other methods, Sieve's final sampled pass@1 minus theirs: " in body
    assert "MoPPS-style posterior " in body.split("minus theirs: ")[1]
    assert ", 2 paired seeds)" in body  # and "1 paired seed)" with one: test below
    assert "*Cold start* (the base model;" in body
    runs = docs_headline.headline_selection_runs(results)
    assert runs.count("\n| warm |") == 2 * len(ONLINE) and "| cold | uniform | 1 |" in runs
    # no finished run: the start records still show what each start is
    started = dict(json.loads((smoke / "headline.json").read_text()), settings={})
    (smoke / "headline.json").write_text(json.dumps(started))
    body = docs_headline.headline_selection(render_docs.Results(smoke))
    assert "*Warm start* (built by uniform GRPO for" in body
    assert "no arm × seed has finished yet" in body and "its cells:" in body
    (smoke / "headline.json").write_text(json.dumps(dict(started, starts={})))
    body = docs_headline.headline_selection(render_docs.Results(smoke))
    assert "*Warm start:* no run has finished yet." in body


def test_the_verdict_says_whether_the_campaign_has_runs_left(tmp_path: Path) -> None:
    """A verdict from a finished campaign is final, one with planned runs left says which: the
    plan's runs not finished under the campaign's verifier (unfinished, missing, or scored under
    another verifier) are left, in plan order, one setting at a time."""
    import docs_headline

    def put(name: str, done: bool, verifier: str = "v9") -> None:
        (tmp_path / name).write_text(json.dumps({"done": done, "verifier": verifier}))

    put("warm_uniform_s1.json", True)
    put("warm_sieve_s1.json", True, verifier="v8")  # another verifier: not this campaign's
    put("warm_dapo_s1.json", False)  # unfinished
    put("cold_uniform_s1.json", True)
    plan = ["warm:uniform:1", "warm:sieve:1", "warm:dapo:1", "warm:greso:1", "cold:uniform:1"]
    assert hl.planned_left(tmp_path, "warm", plan, "v9") == [
        "warm:sieve:1", "warm:dapo:1", "warm:greso:1"
    ]  # fmt: skip
    assert hl.planned_left(tmp_path, "cold", plan, "v9") == []
    # the tiny plan: every arm with a run file, seeds 1-5 (an arm name with '_s' in it too)
    put("cold_sieve_screen_s2.json", True)
    tiny = hl.planned_runs("tiny", tmp_path)
    assert len(tiny) == 10 and "cold:sieve_screen:5" in tiny and "cold:uniform:3" in tiny
    verdict = docs_headline._left
    assert verdict({"planned_left": []}) == " (every planned run has finished)."
    assert verdict({}) == " (yet)."
    assert verdict({"planned_left": ["warm:dapo:4", "warm:sieve:5"]}) == (
        " (yet: 2 planned runs left, DAPO dynamic sampling seed 4, Sieve seed 5)."
    )


def test_a_two_seed_bracket_is_labelled_as_their_range() -> None:
    """A bootstrap over two seeds' values spans exactly those values: the README marks such a
    bracket as the seeds' range, not as a 95 % interval; a paired Δ (seeds × problems) and a
    bracket over more seeds keep the interval's label."""
    import docs_headline

    vals = [0.198, 0.222]
    two = hl.seed_bootstrap(vals, np.random.default_rng(0))
    assert two["ci95"] == [min(vals), max(vals)]  # why it is a range
    assert docs_headline._ci(two).endswith("[0.198, 0.222] (range of 2 seeds)")
    four = hl.seed_bootstrap([0.18, 0.2, 0.21, 0.23], np.random.default_rng(0))
    assert "range" not in docs_headline._ci(four)
    paired = {"mean": 0.01, "ci95": [-0.006, 0.028], "t_ci95": [-0.1, 0.12], "seeds": 2,
              "problems": 281}  # fmt: skip
    assert docs_headline._ci(paired) == "0.010 [-0.006, 0.028]; t [-0.100, 0.120]"


MARKS = (0, 512, 1024, 1536, 2048)


def _curve_run(arm: str, seed: int, curve: tuple[float, ...], start: str = "w") -> dict[str, Any]:
    """A finished run with the greedy `curve` at MARKS (per-problem scores all its final)."""
    points = [{"rollouts": x, "updates": x // 64, "greedy": g}
              for x, g in zip(MARKS, curve, strict=True)]  # fmt: skip
    return {**_final_run(arm, seed, start, [curve[-1]] * 4, curve[0]), "curve": points}


def test_targets_come_from_uniforms_seed_mean_gain_and_favour_neither_arm() -> None:
    """Each block's targets are its start plus 1/3, 2/3 and all of uniform's mean gain over the
    paired blocks, the same for both runs of a block: uniform's own run need not reach them (a
    target set by its own final is reached by its fit by construction). A run that never
    reaches one counts at its last rollouts, named; ratios are geometric means; an unpaired
    uniform seed (3, far higher) moves no arm's target."""
    runs = [_curve_run("uniform", 1, (0.1, 0.15, 0.2, 0.2, 0.2)),  # gain 0.1
            _curve_run("uniform", 2, (0.1, 0.2, 0.24, 0.3, 0.3)),  # gain 0.2
            _curve_run("sieve", 1, (0.1, 0.26, 0.26, 0.26, 0.26)),
            _curve_run("sieve", 2, (0.1, 0.3, 0.3, 0.3, 0.3))]  # fmt: skip
    out = hl.summarise_setting(runs, {"greedy": 0.1})
    sieve = out["arms"]["sieve"]
    assert sieve["target_gain"] == pytest.approx(0.15)
    reach = sieve["rollouts_to_target"]
    assert [t["fraction_of_uniform_gain"] for t in reach] == pytest.approx([1 / 3, 2 / 3, 1.0])
    full = reach[-1]  # target 0.25 in both blocks
    assert full["rollouts_by_block"] == pytest.approx({"1": 480.0, "2": 384.0})
    uniform_2 = 1024 + 512 / 6  # 0.24 at 1,024 to 0.3 at 1,536
    assert full["uniform_rollouts_by_block"] == {"1": None, "2": pytest.approx(uniform_2)}
    assert full["uniform_not_reached"] == ["1"] and full["not_reached_paired"] == []
    # block 1's uniform counts at its last rollouts, 2,048
    assert full["ratio_to_uniform"]["mean"] == pytest.approx(
        math.sqrt(480 / 2048 * 384 / uniform_2)
    )
    assert full["ratio_to_uniform"]["seeds"] == 2
    assert "rollouts_to_target" not in out["arms"]["uniform"]
    higher = _curve_run("uniform", 3, (0.1, 0.3, 0.4, 0.5, 0.5))
    more = hl.summarise_setting([*runs, higher], {"greedy": 0.1})
    assert more["arms"]["sieve"]["rollouts_to_target"] == reach
    # the area under the gain curves, per rollout of the budget, paired per block
    auc = sieve["auc_gain_delta"]
    assert auc["mean"] > 0 and auc["seeds"] == 2 and auc["t_ci95"] is not None


def test_a_paired_block_that_never_reaches_is_named_and_counted_at_the_budget() -> None:
    """A block whose arm never reaches a target counts at its last rollouts (a lower bound, in
    the arm's favour): the block is named and the verdict cannot call the goal met."""
    import docs_headline

    # uniform's mean gain is 0.3 (target 0.4); its fit (0.45 over the last two marks) reaches
    # it at 1,024 + 512 x 2/3
    up = (0.1, 0.2, 0.3, 0.5, 0.4)
    runs = [_curve_run("uniform", 1, up), _curve_run("uniform", 2, up),
            _curve_run("sieve", 1, (0.1, 0.5, 0.5, 0.5, 0.5)),  # at 384
            _curve_run("sieve", 2, (0.1, 0.2, 0.2, 0.2, 0.2))]  # never: at 2,048  # fmt: skip
    out = hl.summarise_setting(runs, {"greedy": 0.1})
    last = out["arms"]["sieve"]["rollouts_to_target"][-1]
    uniform = 1024 + 512 * 2 / 3
    assert last["ratio_to_uniform"]["mean"] == pytest.approx(math.sqrt(384 * 2048) / uniform)
    assert last["not_reached_paired"] == ["2"] and last["uniform_not_reached"] == []
    assert "not reached within the budget by the arm in block 2" in docs_headline._ratio_cell(last)
    block = {**out, "start": {"greedy": 0.1, "hash": "w"}}
    s = block["arms"]["sieve"]
    s["diff_sampled_vs_uniform"] = {
        "mean": 0.1, "ci95": [0.05, 0.15], "t_ci95": [0.04, 0.16], "significant": True,
        "seeds": 4}  # fmt: skip
    s["paired_seeds"] = ["1", "2", "3", "4"]
    s["diff_sampled_vs_others"] = {
        o: {"mean": 0.1, "ci95": [0.05, 0.15], "t_ci95": [0.04, 0.16], "significant": True}
        for o in ("mopps", "greso", "dapo")
    }
    # every other condition of the goal holds: both intervals at or below 0.5
    last["ratio_to_uniform"].update(ci95=[0.2, 0.4], t_ci95=[0.25, 0.5], significant=True)
    verdict = docs_headline._verdict(block)
    assert "not reached within the budget by the arm in block 2" in verdict
    assert "**Goal not met**" in verdict
    last["not_reached_paired"] = []  # the same block without the miss meets it
    assert "**Goal met.**" in docs_headline._verdict(block)
    last["ratio_to_uniform"]["t_ci95"] = [0.25, 0.6]  # the t interval reaches past 0.5
    assert "**Goal not met**" in docs_headline._verdict(block)


def test_the_cold_verdict_asks_only_not_to_fall_behind_uniform() -> None:
    """From the cold start the goal is not to fall behind uniform: met when no paired measure
    (final Δ, area under the gain curve, rollouts ratio) is significantly against Sieve and its
    runs missed no target in more blocks than uniform's; behind when one is significant."""
    import docs_headline

    def d(mean: float, significant: bool) -> dict[str, Any]:
        return {"mean": mean, "ci95": [mean - 0.01, mean + 0.01],
                "t_ci95": [mean - 0.02, mean + 0.02], "significant": significant,
                "seeds": 2}  # fmt: skip

    def target() -> dict[str, Any]:
        return {"ratio_to_uniform": {**d(1.1, False), "ci95": [1.0, 1.2]},
                "not_reached_paired": [], "uniform_not_reached": []}  # fmt: skip

    sieve = {
        "paired_seeds": ["1", "2"], "diff_sampled_vs_uniform": d(-0.004, False),
        "diff_greedy_vs_uniform": d(-0.03, False), "diff_sampled_vs_others": {},
        "target_gain": 0.1, "auc_gain_delta": d(-0.01, False),
        "rollouts_to_target": [target(), target(), target()],
    }  # fmt: skip
    block = {"arms": {"uniform": {}, "sieve": sieve}, "start": {"greedy": 0.075},
             "planned_left": []}  # fmt: skip
    verdict = docs_headline._verdict(block, cold=True)
    assert "**Goal met** (not behind uniform)" in verdict  # a ratio > 1, n.s., is not behind
    assert "**Goal not met**" in docs_headline._verdict(block)  # the warm goal asks far more
    sieve["rollouts_to_target"][-1]["not_reached_paired"] = ["1"]
    verdict = docs_headline._verdict(block, cold=True)
    assert "**Goal not met**: no paired measure is significantly against Sieve" in verdict
    assert "Sieve missed all of uniform's mean gain in 1, uniform in 0" in verdict
    assert "keeping up is not shown" in verdict
    sieve["rollouts_to_target"][-1]["uniform_not_reached"] = ["2"]  # both missed once: even
    assert "**Goal met**" in docs_headline._verdict(block, cold=True)
    sieve["rollouts_to_target"][1]["ratio_to_uniform"]["significant"] = True
    verdict = docs_headline._verdict(block, cold=True)
    assert "behind uniform in rollouts to two thirds of uniform's mean gain" in verdict
    sieve["diff_greedy_vs_uniform"] = d(-0.05, True)
    verdict = docs_headline._verdict(block, cold=True)
    assert "**Goal not met**: Sieve is significantly behind uniform in final greedy" in verdict


def _step(informative: int, update: bool = True, predicted: float | None = None) -> dict[str, Any]:
    return {"sampled": 64, "trained": 64 if update else 0, "groups": 8, "keys": [],
            "informative": informative, "update": update, "unfilled": False, "skipped": 0,
            "predicted_informative": predicted, "seconds": 1.0, "load_1m": 1.0}  # fmt: skip


def test_updates_by_part_reads_each_quarter_of_the_updates_and_what_was_expected() -> None:
    """The informative share per quarter of a run's updates (an empty step is not an update and
    sits in no quarter), the posterior's expectation where every update has one, and informative
    groups per 1,000 rollouts sampled (the empty step's rollouts counted)."""
    inf = [8, 8, 4, 4, 2, 2, 0, 0]
    steps = [_step(i, predicted=0.9) for i in inf[:4]] + [_step(0, update=False)]
    steps += [_step(i, predicted=0.5) for i in inf[4:]]
    one = {"steps": steps}
    other = {"steps": [_step(4) for _ in range(8)]}  # no expectation: counts for the share only
    got = hl.updates_by_part([one, other])
    assert got["seeds"] == 2
    assert got["realized"] == pytest.approx([(1.0 + 0.5) / 2, (0.5 + 0.5) / 2, (0.25 + 0.5) / 2,
                                             (0.0 + 0.5) / 2])  # fmt: skip
    assert got["predicted_at_mean"] == pytest.approx([0.9, 0.9, 0.5, 0.5])
    # no observations kept: the posterior predictive cannot be rebuilt
    assert got["predicted"] is None and got["expected_vs_realized"] is None
    assert got["informative_per_1k_sampled"] == pytest.approx(
        [1000 * sum(inf) / (9 * 64), 1000 * 32 / (8 * 64)]
    )
    assert hl.updates_by_part([{"steps": steps[:3]}])["seeds"] == 0  # fewer updates than parts


def test_the_posterior_predictive_share_is_the_beta_binomial_one() -> None:
    """1 − E[p^G] − E[(1 − p)^G] under p ~ Beta(α, β) against Monte Carlo, and below the
    plug-in at the posterior mean (which ignores the posterior's spread)."""
    rng = np.random.default_rng(0)
    a, b, g = np.array([0.5, 2.0, 9.0]), np.array([3.0, 2.0, 1.0]), 8
    p = rng.beta(a, b, (400_000, 3))
    k = rng.binomial(g, p)
    mc = ((k > 0) & (k < g)).mean(0)
    assert hl.expected_informative(a, b, g) == pytest.approx(mc, abs=0.003)
    m = a / (a + b)
    assert np.all(hl.expected_informative(a, b, g) < 1 - m**g - (1 - m) ** g)


def test_the_predictive_share_is_rebuilt_from_the_observations_a_sieve_run_keeps() -> None:
    """The posterior at step i is a function of the groups observed before update i: the
    rebuilt posterior's mean gives back the share the run recorded at the mean, and its
    predictive share is smaller. Steps past the last observation kept have none; a recorded
    share the rebuild does not give back (another posterior configuration) disowns the run."""
    import polars as pl

    from pipeline.selection.posterior import OBSERVATION_SCHEMA, PosteriorConfig, prompt_posterior

    rng = np.random.default_rng(2)
    keys = [f"p{i}" for i in range(12)]
    cell = {k: f"c {i % 3}" for i, k in enumerate(keys)}
    obs: list[list[Any]] = []
    steps = []
    for i in range(8):
        batch = [keys[int(j)] for j in rng.choice(12, 3, replace=False)]
        seen = pl.DataFrame(obs or None, schema=OBSERVATION_SCHEMA, orient="row")
        prompts = pl.DataFrame({"problem_id": batch, "cell": [cell[k] for k in batch]})
        m = prompt_posterior(seen, prompts, PosteriorConfig(), i)["mean"].to_numpy()
        steps.append({**_step(2, predicted=float(np.mean(1 - m**8 - (1 - m) ** 8))),
                      "keys": batch})  # fmt: skip
        obs += [[k, cell[k], float(rng.integers(0, 9)), 8.0, i] for k in batch]
    run = {"arm": "sieve", "setup": {"group_size": 8}, "steps": steps,
           "state": {"observations": [o for o in obs if o[4] < 6]}}  # kept to update 5  # fmt: skip
    got = hl.predictive_steps(run)
    assert got is not None and got[6:] == [None, None]
    assert all(p is not None and p < s["predicted_informative"]
               for p, s in zip(got[:6], steps, strict=False))  # fmt: skip
    steps[2]["predicted_informative"] += 0.01
    assert hl.predictive_steps(run) is None
    assert hl.predictive_steps({**run, "arm": "mopps"}) is None


def test_a_step_that_trains_nothing_counts_nothing_as_trained() -> None:
    """A step whose batch made no update decided and did not train, whatever it recorded."""
    steps = [_step(4), {**_step(0, update=False), "trained": 64}, _step(4)]
    assert hl.totals(steps) == {"sampled": 192, "trained": 128, "updates": 2}
    row = hl.run_row({**_final_run("uniform", 1, "w", [0.5] * 4), "steps": steps})
    assert row["rollouts_trained"] == 128 and row["rollouts_decided_not_trained"] == 64
    assert row["empty_steps"] == 1


def test_the_held_out_check_sees_a_run_that_scored_other_problems() -> None:
    runs = [_final_run("uniform", s, "w", [0.5] * 4) for s in (1, 2)]
    assert hl.held_out_check(runs) == {"problems": 4, "same_in_every_run": True}
    other = _final_run("sieve", 1, "w", [0.5] * 5)
    assert hl.held_out_check([*runs, other])["same_in_every_run"] is False


def test_group_outcomes_splits_first_visits_from_revisits_by_quarter() -> None:
    """Sieve's kept observations (key, cell, k, n, update), read in update order: a prompt's first
    group is a first visit, later ones revisits; mixed / all wrong / all right per quarter of the
    run's updates, and the start's measured rate of the cells behind each kind."""
    obs = [
        ["b", "hard 1", 0.0, 8.0, 6],  # out of order on purpose: read by update
        ["a", "easy 1", 3.0, 8.0, 0],
        ["b", "hard 1", 0.0, 8.0, 1],
        ["a", "easy 1", 8.0, 8.0, 7],
    ]
    run = {"steps": [_step(4) for _ in range(8)], "state": {"observations": obs}, "start": "w"}
    got = hl.group_outcomes([run], {"w": {"easy 1": 0.3, "hard 1": 0.05}, "x": {"hard 1": 0.9}})
    assert got is not None and got["seeds"] == 1 and got["covered"] == [8]
    assert got["whole_parts"] == 4
    q1, q4 = got["parts"][0], got["parts"][3]
    assert q1["first"] == {"mixed": 1, "all_wrong": 1, "all_right": 0}
    assert q4["revisit"] == {"mixed": 0, "all_wrong": 1, "all_right": 1}
    assert got["parts"][1]["first"] == got["parts"][2]["revisit"] == dict.fromkeys(hl.OUTCOMES, 0)
    assert got["start_rate"]["first_all_wrong"] == 0.05 and got["start_rate"]["first_mixed"] == 0.3
    assert got["start_rate"]["revisit_all_right"] == 0.3
    # b went 0/8 -> 0/8 (5 updates apart), a 3/8 -> 8/8 (7 apart): moves 0 and +5/8
    rc = got["revisit_change"]
    assert rc["groups"] == 2 and rc["mean"] == pytest.approx(5 / 16)
    assert rc["share_up"] == 0.5 and rc["share_down"] == 0.0 and rc["median_updates_between"] == 6
    assert hl.group_outcomes([{"steps": run["steps"], "state": {}}]) is None


def test_a_quarter_the_checkpoint_cut_is_not_a_whole_quarter() -> None:
    """Observations saved with a checkpoint end before the run does: of 10 updates (quarters
    0-2, 3-4, 5-7, 8-9 by update * 4 // 10), observations up to update 8 cover three quarters
    in full, and the seed that stops first decides for all."""
    steps = [_step(4) for _ in range(10)]

    def run(last: int) -> dict[str, Any]:
        return {"steps": steps, "state": {"observations": [["a", "c", 1.0, 8.0, last]]}}

    assert hl.group_outcomes([run(8)])["whole_parts"] == 3
    assert hl.group_outcomes([run(9)])["whole_parts"] == 4
    assert hl.group_outcomes([run(9), run(4)])["whole_parts"] == 2  # update 4 ends quarter 2
    assert hl.group_outcomes([run(3)])["whole_parts"] == 1


def test_the_smoke_summary_reads_every_arm_by_quarter_and_sieves_groups_to_the_end(
    smoke: Path,
) -> None:
    """Every arm's quarters are in the summary; Sieve's observations are saved with the finished
    run, so they cover every update (a checkpoint's copy is a mark behind)."""
    import docs_headline

    result = json.loads((smoke / "headline_smoke.json").read_text())
    warm = result["settings"]["warm"]
    for arm in ONLINE:
        assert warm["arms"][arm]["by_part"]["seeds"] == 2, arm
    sieve = warm["arms"]["sieve"]
    assert min(sieve["updates"]) > 0
    assert sieve["group_outcomes"]["covered"] == sieve["updates"]
    groups = sum(sum(sum(v.values()) for v in p.values()) for p in sieve["group_outcomes"]["parts"])
    assert groups == result["setup"]["batch_prompts"] * sum(sieve["updates"])
    assert warm["arms"]["mopps"]["group_outcomes"] is None
    body = docs_headline.headline_selection_updates(
        lambda name, *keys: _dig(result, keys), "headline_smoke"
    )
    assert "| warm | **Sieve** (ledger posterior) | 2 |" in body
    assert "Sieve's trained groups by what they turned out to be" in body


def test_the_learning_arm_runs_the_protocol_from_its_start_prior(
    smoke: Path, tmp_path: Path, monkeypatch: Any
) -> None:
    """`sieve_learning` under the protocol (the smoke's warm weights): a full batch every step,
    the posterior predictive recorded per step, its observations saved at the eval mark and
    every group at the end, and a start prior read from the warm start's cell measurement."""
    saved: list[tuple[bool, int]] = []
    write = hl.atomic_write

    def spy(path: Path, p: dict[str, Any]) -> None:
        if p.get("arm") == "sieve_learning":
            saved.append((p["done"], len(p["state"].get("observations", []))))
        write(path, p)

    monkeypatch.setattr(hl, "reward_fn", coin_reward)
    monkeypatch.setattr(hl, "atomic_write", spy)
    hl.main(["--smoke", "--results", str(tmp_path), "--state", str(smoke / "state"),
             "--seeds", "1", "--arms", "sieve_learning"])  # fmt: skip
    r = runs(tmp_path)["warm_sieve_learning_s1"]
    setup = hl.SMOKE
    assert r["done"] and sum(s["sampled"] for s in r["steps"]) <= setup.budget
    assert all(s["sampled"] == setup.per_update for s in r["steps"])
    assert all(0.0 < s["expected_informative"] < 1.0 for s in r["steps"])
    assert hl.predictive_steps(r) == [s["expected_informative"] for s in r["steps"]]
    groups = len(r["steps"]) * setup.batch_prompts
    assert saved[0] == (False, groups // 2)  # the mark (halfway, 2 marks) kept its groups
    assert saved[-1] == (True, groups) == (True, len(r["state"]["observations"]))
    (record,) = (tmp_path / "headline_smoke_runs").glob("start_warm_*.json")
    prior = hl.start_prior(json.loads(record.read_text()), setup.cell_samples, setup.samples)
    n = setup.cell_prompts * setup.cell_samples
    assert prior is not None and all(c[1] == n for c in prior.cells.values())
    learning = json.loads((tmp_path / "headline_smoke.json").read_text())["settings"]["warm"]
    assert learning["arms"]["sieve_learning"]["group_outcomes"]["seeds"] == 1


def _dig(d: Any, keys: tuple[str, ...]) -> Any:
    for k in keys:
        d = d[k]
    return d


def test_the_reading_of_the_updates_is_computed_from_the_table() -> None:
    """The generated sentences: uniform's and Sieve's informative groups per 1,000 rollouts, the
    1,000 / G ceiling, the ratio they imply, and the quarter shares, from made-up numbers."""
    import docs_headline

    def part(realized: list[float], per_k: list[float], predicted: Any = None) -> dict[str, Any]:
        return {"seeds": len(per_k), "realized": realized, "predicted": predicted,
                "informative_per_1k_sampled": per_k}  # fmt: skip

    block = {"arms": {
        "uniform": {"by_part": part([0.4, 0.4, 0.4, 0.4], [50.0, 50.0])},
        "sieve": {"by_part": part([0.6, 0.5, 0.4, 0.3], [60.0, 40.0], [0.9, 0.9, 0.9, 0.9]),
                  "group_outcomes": None},
    }}  # fmt: skip
    text = " ".join(docs_headline._reading("warm", block, 8))
    assert "uniform trained 50 informative groups per 1,000" in text
    assert "gives 125 (1,000 / G)" in text and "less than 0.40× its rollouts" in text
    assert "Sieve's 50 per 1,000 would make its ratio 1.00×" in text
    assert "the goal's ≤ 0.5× asks for 100" in text
    assert "0.60 → 0.50 → 0.40 → 0.30" in text and "expected 0.90 → 0.90" in text
    assert "uniform 0.40, Sieve (ledger posterior) 0.30" in text


def test_the_outcome_reading_compares_whole_quarters_and_marks_the_cut_one() -> None:
    """Sieve's observations end at its last checkpoint: the quarter they reach only in part
    holds a few groups, so the sentence compares the first and the last whole quarter (with the
    counts behind each share) and the table marks the cut quarter."""
    import docs_headline

    def outcome(first: tuple[int, int, int], revisit: tuple[int, int, int]) -> dict[str, Any]:
        return {"first": dict(zip(hl.OUTCOMES, first, strict=True)),
                "revisit": dict(zip(hl.OUTCOMES, revisit, strict=True))}  # fmt: skip

    parts = [outcome((50, 40, 10), (8, 1, 1)), outcome((30, 40, 5), (20, 10, 10)),
             outcome((10, 30, 5), (20, 20, 40)), outcome((1, 1, 0), (1, 2, 3))]  # fmt: skip
    go = {"seeds": 2, "covered": [25, 26], "whole_parts": 3, "parts": parts,
          "start_rate": None, "revisit_change": None}  # fmt: skip
    by_part = {"seeds": 2, "realized": [0.5] * 4, "predicted": [0.9] * 4,
               "informative_per_1k_sampled": [50.0, 50.0]}  # fmt: skip
    block = {"arms": {"uniform": {"by_part": {**by_part, "predicted": None}},
                      "sieve": {"by_part": by_part, "group_outcomes": go}},
             "start": {"hash": "w"}}  # fmt: skip
    text = " ".join(docs_headline._reading("warm", block, 8))
    assert "quarter 4, which it reaches only in part, is left out" in text
    assert "revisits, 10 % (1 of 10) ended all right in quarter 1 and 50 % (40 of 80)" in text
    assert "40 % (40 of 100) ended all wrong in quarter 1 and 67 % (30 of 45) in quarter 3" in text
    result = {"setup": {"group_size": 8}, "settings": {"warm": block}}
    table = docs_headline.headline_selection_updates(lambda name, *keys: _dig(result, keys))
    assert "| warm | **Sieve** (ledger posterior) | 4 (in part) | 1 / 1 / 0 | 1 / 2 / 3 |" in table
    assert "| warm | **Sieve** (ledger posterior) | 3 | 10 / 30 / 5 | 20 / 20 / 40 |" in table
    go["whole_parts"] = 4  # a run whose observations reach its end: every quarter compares
    text = " ".join(docs_headline._reading("warm", block, 8))
    assert "left out" not in text and "in quarter 4" in text
    go["seeds"] = 1
    assert "keeps (1 seed, updates" in " ".join(docs_headline._reading("warm", block, 8))
    assert docs_headline._count(1, "paired seed") == "1 paired seed"


def test_the_reading_gives_every_builds_final_accuracies_and_names_the_flat_blocks() -> None:
    """With runs from two builds of the start, a generated sentence gives each build's start and
    the range and mean of its runs' final accuracies, and says which blocks compare by the
    sampled Δ alone; with one build there is nothing to say."""
    import docs_headline

    def row(start: str, greedy: float, sampled: float) -> dict[str, Any]:
        return {"start": start, "final_greedy": greedy, "final_sampled": sampled}

    block = {
        "start": {"hash": "A", "greedy": 0.1, "sampled": 0.09},
        "other_starts_used": [{"hash": "B", "greedy": 0.2, "sampled": 0.14}],
        "runs": [row("A", 0.2, 0.18), row("A", 0.26, 0.24), row("B", 0.19, 0.2)],
        "blocks_without_gain": ["4b"],
    }
    text = " ".join(docs_headline._by_start("warm", block))
    assert "first build (held-out greedy 0.100, sampled 0.090) its 2 finished runs" in text
    assert "greedy 0.200–0.260 (mean 0.230) and sampled 0.180–0.240 (mean 0.210)" in text
    assert "second build (held-out greedy 0.200, sampled 0.140) its 1 finished run ended" in text
    assert "In block 4b uniform's greedy accuracy ended at or below its start" in text
    one = {**block, "other_starts_used": [], "runs": block["runs"][:2]}
    assert docs_headline._by_start("warm", one) == []


def test_runs_from_two_builds_of_the_start_pair_only_within_their_own_block() -> None:
    """A warm start rebuilt on a new machine is other weights (its hash differs): its runs pair
    with runs of the same seed *and* start, in blocks named by the seed and the start's letter
    ("3b"); each block's targets start from its own start's accuracy; intervals are over blocks.
    A seed with runs from both starts is two blocks, never one pair across starts."""

    def run(arm: str, seed: int, start: str, final: float) -> dict[str, Any]:
        return _final_run(arm, seed, start, [final] * 4, {"A": 0.1, "B": 0.3}[start])

    runs = [run("uniform", 1, "A", 0.2), run("sieve", 1, "A", 0.3),
            run("uniform", 3, "A", 0.2),  # seed 3's uniform from A: no sieve from A to pair
            run("uniform", 3, "B", 0.4), run("sieve", 3, "B", 0.5),
            run("sieve", 4, "B", 0.6)]  # fmt: skip
    out = hl.summarise_setting(
        runs, {"hash": "A", "greedy": 0.1}, {"B": {"hash": "B", "greedy": 0.3}}
    )
    sieve = out["arms"]["sieve"]
    assert sieve["seeds"] == ["1", "3b", "4b"] and sieve["paired_seeds"] == ["1", "3b"]
    assert out["arms"]["uniform"]["seeds"] == ["1", "3", "3b"]
    diff = sieve["diff_sampled_vs_uniform"]
    assert diff["seeds"] == 2 and diff["mean"] == pytest.approx(0.1)  # never 0.5 - 0.2 across
    # uniform gained 0.1 in block 1 (0.1 -> 0.2) and 0.1 in block 3b (0.3 -> 0.4): block 3b's
    # full target is its own start plus the mean gain, 0.4, which its sieve run reached
    assert sieve["target_gain"] == pytest.approx(0.1)
    assert sieve["rollouts_to_target"][-1]["not_reached_paired"] == []
    assert (
        out["other_starts_used"][0]["hash"] == "B" and out["other_starts_used"][0]["suffix"] == "b"
    )
    assert {r["block"] for r in out["runs"]} == {"1", "3", "3b", "4b"}
    # a block whose uniform ended at or below its start is named; it still has targets (the
    # mean gain's), and its runs count in every ratio
    flat = [run("uniform", 5, "B", 0.25), run("sieve", 5, "B", 0.35)]
    got = hl.summarise_setting(
        [*runs, *flat], {"hash": "A", "greedy": 0.1}, {"B": {"hash": "B", "greedy": 0.3}}
    )
    assert got["blocks_without_gain"] == ["5b"]
    reach = got["arms"]["sieve"]["rollouts_to_target"][-1]
    assert "5b" in reach["rollouts_by_block"] and reach["ratio_to_uniform"]["seeds"] == 3
    assert got["arms"]["sieve"]["target_gain"] == pytest.approx((0.1 + 0.1 - 0.05) / 3)
    # every run from one start: blocks are plain seeds, whichever start that is
    alone = hl.summarise_setting(
        [runs[3], runs[4]], {"hash": "A", "greedy": 0.1}, {"B": {"hash": "B", "greedy": 0.3}}
    )
    assert alone["arms"]["sieve"]["paired_seeds"] == ["3"]


def test_an_interval_does_not_move_when_another_arms_run_finishes() -> None:
    """Each interval resamples from its own stream, named by what it compares: Sieve's paired
    difference to uniform is the same bits whether or not a GRESO run (or an unpaired uniform
    seed) has finished. With one shared stream a finished uniform seed once turned a
    'significant' Δ whose bound sat at 0.000 into an n.s. one on the same paired seeds."""
    rng = np.random.default_rng(1)

    def run(arm: str, seed: int, start: str = "A") -> dict[str, Any]:
        return _final_run(arm, seed, start, rng.integers(0, 2, 40).astype(float).tolist())

    base = [run(a, s) for s in (1, 2, 3) for a in ("uniform", "sieve")]
    start = {"hash": "A", "greedy": 0.1}
    alone = hl.summarise_setting(base, start)["arms"]["sieve"]
    more = hl.summarise_setting([*base, run("greso", 1), run("uniform", 9)], start)
    assert more["arms"]["sieve"]["diff_sampled_vs_uniform"] == alone["diff_sampled_vs_uniform"]
    assert more["arms"]["sieve"]["final_sampled"] == alone["final_sampled"]


def _final_run(
    arm: str, seed: int, start: str, per: list[float], begin: float = 0.1
) -> dict[str, Any]:
    """A finished run whose every per-problem score is `per` (greedy and sampled alike), its
    curve from its start's accuracy `begin` to their mean."""
    g = float(np.mean(per))
    return {"arm": arm, "seed": seed, "start": start, "steps": [],
            "curve": [{"rollouts": 0, "updates": 0, "greedy": begin},
                      {"rollouts": 2048, "updates": 32, "greedy": g}],
            "final": {"greedy": g, "sampled": g, "scored": len(per), "by_level": [],
                      "per_problem_sampled": per, "per_problem_greedy": per},
            "seconds": 1.0}  # fmt: skip


def test_the_oracle_knows_each_cells_measured_informative_share_and_nothing_else() -> None:
    """The cell oracle's scores are the start's measured P(informative) per cell; a start with
    no cell measurement (the cold setting) cannot run it."""
    start = {"cells": [
        {"family": "arith", "level": 1, "pass_rate": 0.5, "informative": 0.75, "prompts": 4},
        {"family": "rg:gcd", "level": 2, "pass_rate": 0.0, "informative": 0.0, "prompts": 4},
    ]}  # fmt: skip
    assert hl.oracle_scores(start) == {"arith 1": 0.75, "rg:gcd 2": 0.0}
    with pytest.raises(SystemExit, match="cell measurement"):
        hl.oracle_scores({"cells": None})


def test_the_user_setting_draws_its_pool_from_every_cell_of_its_mix() -> None:
    """The user pool's mix: every generator family at every level, each reasoning-gym dataset
    Sieve has levels for at its two easiest; 2,048 prompts per seed, the budget under an epoch."""
    from pipeline.problems import FAMILIES, family_levels
    from pipeline.problems.rg import LEVEL_CONFIGS
    from pipeline.selection.config import load_mix

    mix = load_mix(hl.USER_MIX_FILE).levels()
    assert {f: mix[f] for f in FAMILIES} == {f: family_levels(f) for f in FAMILIES}
    assert {f.removeprefix("rg:") for f in mix if f.startswith("rg:")} == set(LEVEL_CONFIGS)
    assert all(mix[f] == [1, 2] for f in mix if f.startswith("rg:"))
    setup = hl.USER
    assert setup.budget // setup.group_size <= setup.pool_size  # at most one epoch
    assert setup.per_update == hl.Setup().per_update  # the protocol's batch, as the warm runs'


@pytest.mark.timeout(900)  # the product's loop: Prefect flows, each night a curation and a train
def test_the_user_night_runs_the_product_loop_with_replay_from_the_warm_weights(
    smoke: Path, tmp_path: Path
) -> None:
    """The `user` setting's night (Sieve as a user runs it): the product's loop from the same
    warm weights as the warm setting, with curation replay and posterior selection, its nights'
    curation charged inside the budget. (That a replayed prompt trains its stored samples once
    and every step trains a full batch is tested on the collector, tests/selection.)"""
    import importlib

    fl = importlib.import_module("flows.loop")  # run_night imports `loop` from it at call time
    seen: list[Any] = []
    real = fl.loop

    def spy(home: Any, nights: int, cfg: Any, train: Any, *a: Any, **kw: Any) -> Any:
        seen.append(train)
        return real(home, nights, cfg, train, *a, **kw)

    mp = pytest.MonkeyPatch()
    mp.setattr(fl, "loop", spy)
    try:
        hl.main(["--smoke", "--results", str(tmp_path), "--state", str(smoke / "state"),
                 "--seeds", "1", "--setting", "user", "--arms", "night"])  # fmt: skip
    finally:
        mp.undo()
    r = runs(tmp_path)["user_night_s1"]
    assert r["done"] and sum(s["sampled"] for s in r["steps"]) <= hl.SMOKE.budget
    assert len(seen) == len(r["nights"]) >= 1
    assert all(t.replay_curation and t.selection == "posterior" for t in seen)
    curation = [s for s in r["steps"] if s.get("curation")]
    assert [s["sampled"] for s in curation] == [n["curation_rollouts"] for n in r["nights"]]
    (start,) = (tmp_path / "headline_smoke_runs").glob("start_user_*.json")
    (warm,) = (smoke / "headline_smoke_runs").glob("start_warm_*.json")
    assert start.name.split("_")[-1] == warm.name.split("_")[-1]  # the same start weights
    assert json.loads(start.read_text())["cells"]
    # the other settings' nights do not replay (their committed runs did not)
    _, cold = hl.night_settings(hl.SMOKE, 1, 2, 8, hl.SMOKE_MIX)
    assert not cold.replay_curation


@pytest.mark.timeout(1200)  # three runs of the product's loop
def test_the_second_run_reads_its_partners_ledger_and_starts_a_fresh_lineage(
    smoke: Path, tmp_path: Path
) -> None:
    """Sieve's second run: seed 1's night keeps its ledger; seed 2's second run starts from a
    copy of it (recorded by hash), from the start folder itself (`--fresh`, so the partner's
    checkpoints, gone with its weights, are never its base), and trains its own lineage; a
    second run whose partner has not run is one line naming it."""
    from pipeline.store import Ledger

    args = ["--smoke", "--results", str(tmp_path), "--state", str(tmp_path / "state"),
            "--setting", "cold"]  # fmt: skip
    with pytest.raises(SystemExit, match="night run of seed 1"):
        hl.main([*args, "--seeds", "2", "--arms", "second"])
    hl.main([*args, "--seeds", "1", "--arms", "night"])
    kept = tmp_path / "state" / "ledgers" / "cold_night_s1.duckdb"
    assert kept.is_file()
    hl.main([*args, "--seeds", "2", "--arms", "second"])
    r = runs(tmp_path)["cold_second_s2"]
    assert r["done"] and r["partner"] == {"seed": 1, "ledger_sha256": hl.file_hash(kept)}
    assert r["nights"] and r["nights"][0]["night"] == hl.SECOND_START
    assert r["nights"][0]["model"] == "start"  # the folder itself, not the partner's head
    assert sum(s["sampled"] for s in r["steps"]) <= hl.SMOKE.budget
    with Ledger.open(path=kept, read_only=True) as ledger:  # the partner's own record, kept
        assert ledger.sql("SELECT count(*) FROM nights").item() >= 1
