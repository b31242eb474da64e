"""benchmarks/real_curriculum.py --smoke: the earlier real-model headline's code path end to end
on the tiny policy (hf backend, tiny budgets): the JSON's structure, every runnable arm within
its rollout budget, a second run resuming from the finished progress files, the retired Sieve
arms refused in one line while their committed progress is still summarised."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import real_curriculum as rc


def test_the_hand_check_reads_distinct_problems() -> None:
    """A greedy answer and its sampled copies are one problem to read, not several."""
    one = {"family": "arith", "level": 1, "question": "2+2", "completion": "4"}
    two = {"family": "arith", "level": 1, "question": "3+3", "completion": "6"}
    picked = rc.distinct_problems([one, {**one, "completion": "The answer is 4"}, two, one])
    assert picked == [one, two]
    many = [{**one, "question": f"{i}+0"} for i in range(30)]
    assert rc.distinct_problems(many) == many[:20]


def test_every_seed_is_read_and_a_new_seed_leaves_the_old_candidates_alone() -> None:
    """Up to 20 texts per run: seed 2 adds its own without displacing seed 1's (whose labels
    are already written), even on the problems seed 1 answered too."""

    def text(q: str, seed: int) -> dict:
        return {"family": "arith", "level": 1, "question": q, "completion": f"{q} s{seed}"}

    s1 = {"arm": "uniform", "seed": 1, "correct": [text(f"{i}+0", 1) for i in range(25)]}
    s2 = {"arm": "uniform", "seed": 2, "correct": [text(f"{i}+0", 2) for i in range(3)]}
    alone = rc.hand_candidates([s1])["uniform"]
    both = rc.hand_candidates([s1, s2, {**s2, "arm": "greso"}])
    assert both["uniform"][:20] == alone and len(alone) == 20
    assert [c["seed"] for c in both["uniform"]] == [1] * 20 + [2] * 3
    assert len({c["key"] for c in both["uniform"]}) == 23  # same problems, other texts
    assert set(both) == {"uniform", "greso"}


def test_arms_are_compared_on_the_seeds_every_arm_has_finished() -> None:
    def run(arm: str, seed: int) -> dict:
        return {"arm": arm, "seed": seed}

    first = [run("uniform", 1), run("sieve", 1)]
    done, pending, seeds = rc.compared([*first, run("uniform", 2)], [1, 2])
    assert (done, pending, seeds) == (first, [run("uniform", 2)], [1])
    both = [*first, run("uniform", 2), run("sieve", 2)]
    assert rc.compared(both, [1, 2]) == (both, [], [1, 2])
    # the campaign's start: uniform has seed 1 only, sieve seed 2 only: compare what there is
    odd = [run("uniform", 1), run("sieve", 2)]
    assert rc.compared(odd, [1, 2]) == (odd, [], [1, 2])
    # four arms on both seeds, a fifth on seed 1 only: the four stay compared on both seeds
    four = [run(a, sd) for sd in (1, 2) for a in ("uniform", "dapo", "greso", "sieve")]
    late = run("sieve_every_rollout", 1)
    assert rc.compared([*four, late], [1, 2]) == (four, [late], [1, 2])
    # the fifth finishes seed 2: all five on both seeds
    fifth = [late, run("sieve_every_rollout", 2)]
    assert rc.compared([*four, *fifth], [1, 2]) == ([*four, *fifth], [], [1, 2])


def test_the_hand_labels_come_back_as_counts_per_arm(tmp_path: Path) -> None:
    """Labels are keyed by cell, question and the completion read; a problem no longer shown,
    or shown with another completion, is not counted; an unknown label is one error naming
    the file."""
    shown = [{"family": "arith", "level": 1, "question": q, "completion": "x"} for q in "abc"]
    a, b, c = (rc.hand_key(x) for x in shown)
    assert a.startswith("arith 1: a #") and len({a, b, c}) == 3
    path = tmp_path / "labels.json"
    gone = rc.hand_key({**shown[0], "question": "gone"})
    labels = {a: "correct", b: "contradicted", gone: "hacked"}
    path.write_text(json.dumps({"how": "read", "uniform": labels}))
    out = rc.hand_check({"uniform": shown, "sieve": shown[:1]}, path)
    assert out["uniform"] == {"read": 3, "unlabelled": 1, "correct": 1, "wrong_working": 0,
                              "contradicted": 1, "hacked": 0}  # fmt: skip
    assert out["sieve"]["unlabelled"] == 1 and out["how"] == "read"
    resampled = [{**x, "completion": "y"} for x in shown]  # a rerun's texts: read again
    assert rc.hand_check({"uniform": resampled}, path)["uniform"]["unlabelled"] == 3
    path.write_text(json.dumps({"uniform": {a: "fine"}}))
    with pytest.raises(SystemExit, match="unknown label 'fine'"):
        rc.hand_check({"uniform": shown}, path)
    assert rc.hand_check({"uniform": shown}, tmp_path / "none.json")["uniform"]["unlabelled"] == 3


def test_to_label_prints_only_the_candidates_without_a_label(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    shown = [
        {"family": "arith", "level": 1, "question": q, "answer": "4", "completion": f"text {q}"}
        for q in "ab"
    ]
    for c in shown:
        c["key"] = rc.hand_key(c)
    path = tmp_path / "labels.json"
    path.write_text(json.dumps({"uniform": {shown[0]["key"]: "correct"}}))
    rc.print_unlabelled({"hand_check_candidates": {"uniform": shown}}, path)
    out = capsys.readouterr().out
    assert "uniform: 1 of 2 to label" in out
    assert "text b" in out and "text a" not in out


def test_an_unfinished_run_without_its_weights_starts_over(tmp_path: Path) -> None:
    """Progress files are committed, weights are not: on a machine that lacks an unfinished
    run's weights the run starts from nothing (restarts counted); with them it resumes."""
    runs, state = tmp_path / "runs", tmp_path / "state"
    first = rc.Run("uniform", 1, rc.SMOKE, runs, state)
    first.p.update(rollouts=96, step=6, saved=6, curve=[{"rollouts": 0}, {"rollouts": 96}])
    first.save()
    (state / "uniform_s1").mkdir(parents=True)
    kept = rc.Run("uniform", 1, rc.SMOKE, runs, state)
    assert (kept.p["rollouts"], kept.p["saved"], kept.p["restarts"]) == (96, 6, 0)
    (state / "uniform_s1").rmdir()
    fresh = rc.Run("uniform", 1, rc.SMOKE, runs, state)
    assert (fresh.p["rollouts"], fresh.p["step"], fresh.p["saved"]) == (0, 0, None)
    assert fresh.p["curve"] == [] and fresh.p["restarts"] == 1 and fresh.left() == rc.SMOKE.budget


def test_a_run_measured_with_another_verifier_starts_over(tmp_path: Path) -> None:
    """A finished run trained on another reward (an older verifier) is not a result of this
    one: it runs again."""
    runs, state = tmp_path / "runs", tmp_path / "state"
    first = rc.Run("sieve", 2, rc.SMOKE, runs, state)
    assert first.p["verifier"] == rc.verifier_version()
    first.p.update(rollouts=192, done=True, curve=[{"rollouts": 0}, {"rollouts": 192}])
    first.save()
    assert rc.Run("sieve", 2, rc.SMOKE, runs, state).p["done"]  # same verifier: kept
    assert rc.finished(first.path)  # and the driver skips it
    first.p["verifier"] = "math/1+rg/0.1.25/1"
    first.save()
    assert not rc.finished(first.path) and not rc.finished(runs / "dapo_s2.json")
    (state / "sieve_s2").mkdir(parents=True)
    again = rc.Run("sieve", 2, rc.SMOKE, runs, state)
    assert not again.p["done"] and again.p["rollouts"] == 0 and again.p["restarts"] == 1
    assert again.p["verifier"] == rc.verifier_version()
    assert (state / "sieve_s2").exists()  # reading progress deletes nothing; run_arm clears it


def test_the_base_evaluation_is_kept_per_verifier(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another verifier reads the base model's texts differently: its evaluation is another file,
    and `--summarise` reads the one of today's verifier (it fails without it)."""
    held = rc.held_out(rc.SMOKE_MIX, rc.SMOKE.per_level)
    today = rc.base_eval_path(rc.SMOKE, "m", held, tmp_path)
    assert today == rc.base_eval_path(rc.SMOKE, "m", held, tmp_path)
    monkeypatch.setattr(rc, "verifier_version", lambda: "math/1")
    assert rc.base_eval_path(rc.SMOKE, "m", held, tmp_path) != today
    assert rc.base_eval_path(rc.SMOKE, "other", held, tmp_path) != today


@pytest.mark.parametrize("arm", rc.RETIRED)
def test_a_retired_arm_is_refused_in_one_line(arm: str, tmp_path: Path) -> None:
    """The Sieve arms ran a copy of the product's night: asking to run one says, in one line,
    that it is retired, where its committed runs are and what runs the product's own night;
    nothing is loaded or written first."""
    with pytest.raises(SystemExit) as refused:
        rc.main(["--smoke", "--arms", f"uniform,{arm}", "--results", str(tmp_path)])
    line = str(refused.value.code)
    assert "\n" not in line and f"{arm!r} is retired" in line
    assert "real_curriculum.json" in line and "headline.py --arms night" in line
    assert list(tmp_path.iterdir()) == []
    assert set(rc.RUNNABLE) == {"uniform", "dapo", "greso"} and set(rc.RETIRED) <= set(rc.ARMS)


@pytest.mark.slow  # ~25 s on 2 cores, past the fixture's tiny-policy training
def test_smoke_structure_budget_and_resume(partly_trained_dir: Path, tmp_path: Path) -> None:
    argv = ["--smoke", "--seeds", "1", "2", "--model", str(partly_trained_dir),
            "--results", str(tmp_path)]  # fmt: skip
    rc.main(argv)  # without --arms: the runnable arms
    out = json.loads((tmp_path / "real_curriculum_smoke.json").read_text())
    budget = out["setup"]["budget"]
    assert out["seeds"] == [1, 2]
    assert [r["arm"] for r in out["runs"]] == [*rc.RUNNABLE, *rc.RUNNABLE]
    for key in ("rollouts_to_uniform_final", "final_gap_vs_uniform", "per_level_gains",
                "hand_check_candidates"):  # fmt: skip
        assert set(out[key]) == set(rc.RUNNABLE), key
    assert {(c["family"], c["level"]) for c in out["cells"]} == {
        (f, lv) for f, levels in rc.SMOKE_MIX.items() for lv in levels
    }
    assert all(c["zone"] in ("always", "learnable", "never", "unmeasured") for c in out["cells"])
    assert out["final_gap_vs_uniform"]["uniform"]["mean"] == 0.0
    for run in out["runs"]:
        curve = run["curve"]
        assert curve[0]["rollouts"] == 0 and curve[-1]["rollouts"] == run["rollouts"]
        assert len(curve) >= out["setup"]["evals"] + 1
        assert run["rollouts"] <= budget, run["arm"]
        assert len(run["load_1m"]) == run["steps"]
        # every rollout counted: the online arms curate nothing, so all of it is training's
        assert run["curation_rollouts"] == 0 and run["nights"] == []
        assert run["rollouts"] == run["counts"].get("train_rollouts", 0), run["arm"]
    assert out["curation_cells"] == {}
    assert all(out["budget_respected"].values())
    for checks in out["hand_check_candidates"].values():
        for seed in (1, 2):  # up to 20 per seed, each on its own problem
            mine = [c for c in checks if c["seed"] == seed]
            assert len(mine) <= 20
            assert len({(c["family"], c["level"], c["question"]) for c in mine}) == len(mine)
        assert all(c["key"] == rc.hand_key(c) for c in checks)
    assert {a: v["read"] for a, v in out["hand_check"].items() if a in rc.ARMS} == {
        a: len(v) for a, v in out["hand_check_candidates"].items()
    }
    progress = sorted((tmp_path / "real_curriculum_smoke_runs").glob("*.json"))
    assert len(progress) == len(rc.RUNNABLE) * 2 + 1  # and the base evaluation's cache
    assert len(list((tmp_path / "real_curriculum_smoke_runs").glob("base_eval_*.json"))) == 1
    before = {p.name: p.read_text() for p in progress}
    rc.main(argv)  # every arm × seed is done: nothing runs again, the progress is unchanged
    assert {p.name: p.read_text() for p in progress} == before
    again = json.loads((tmp_path / "real_curriculum_smoke.json").read_text())
    assert again["rollouts_to_uniform_final"] == out["rollouts_to_uniform_final"]
    with pytest.raises(SystemExit) as done:  # what the driver asks before running an arm
        rc.main([*argv, "--is-done"])
    assert done.value.code == 0
    rc.main([*argv, "--summarise"])  # the summary alone, from the progress and base evaluation
    summary = json.loads((tmp_path / "real_curriculum_smoke.json").read_text())
    assert summary["rollouts_to_uniform_final"] == out["rollouts_to_uniform_final"]

    # A retired arm's committed progress (here: uniform's files relabelled, with a night) is
    # still read: by --summarise, by --is-done, and by the summary a run writes; never run.
    runs_dir = tmp_path / "real_curriculum_smoke_runs"
    night = {"curation_rollouts": 0, "candidates": 4, "kept": 1,
             "cells": {"arith 2": {"screened": 4, "kept": 1}}}  # fmt: skip
    for seed in (1, 2):
        old = json.loads((runs_dir / f"uniform_s{seed}.json").read_text())
        relabelled = {**old, "arm": "sieve", "nights": [night]}
        rc.atomic_write(runs_dir / f"sieve_s{seed}.json", relabelled)
    with pytest.raises(SystemExit) as done:
        rc.main([*argv, "--is-done", "--arms", "sieve"])
    assert done.value.code == 0
    for extra in (["--summarise"], []):  # every arm's progress / the summary after a run
        rc.main([*argv, *extra])
        got = json.loads((tmp_path / "real_curriculum_smoke.json").read_text())
        assert [r["arm"] for r in got["runs"]] == [*rc.RUNNABLE, "sieve"] * 2, extra
        assert got["final_gap_vs_uniform"]["sieve"]["mean"] == 0.0  # uniform's curves
        assert got["curation_cells"] == {"sieve": {"arith 2": {"screened": 8, "kept": 2}}}
        assert (
            got["rollouts_to_uniform_final"]["uniform"]
            == out["rollouts_to_uniform_final"]["uniform"]
        )
    assert sorted(runs_dir.glob("*.json")) == sorted(
        [*progress, runs_dir / "sieve_s1.json", runs_dir / "sieve_s2.json"]
    )
