"""benchmarks/headline_start.py: the warm start is rebuilt with the tree that made the committed
record, and weights of another hash are refused before anything scores or records them.

The tree is a made-up `headline` module with the names the script reads; its `start_point`
behaves as the benchmark's: it builds the weights folder, and scores (calls `evaluate`) only
when no record of their hash exists."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "headline_start.py"

TREE = """
import json
from pathlib import Path

DIGEST = {digest!r}
RESCORE = {rescore!r}  # the record was scored under another verifier: the benchmark re-scores
MIX_FILE, MODEL = "mix.toml", Path("model")


class Setup:
    per_level = 2


class Model:
    def state_dict(self):
        return {{}}


class Pol:
    model = Model()


def held_out(mix, per_level):
    class Frame:
        def unique(self, *a, **k):
            return self
    return Frame()


def load(setup, model_dir):
    return Pol()


def weights_hash(model):
    return DIGEST


def code_commit():
    return "tree-" + DIGEST


def evaluate(*a, **k):
    raise AssertionError("the real evaluate must never run here")


def start_point(setup, setting, pol, base, mix, held, runs_dir, state, model_dir):
    (state / "warm").mkdir(parents=True, exist_ok=True)
    (state / "warm" / "config.json").write_text("{{}}")
    record = runs_dir / f"start_warm_{{DIGEST}}.json"
    if not record.is_file() or RESCORE:
        evaluate()  # the benchmark scores a start it has no record of
        record.write_text(json.dumps({{"hash": DIGEST}}))
    return {{}}, json.loads(record.read_text())
"""


def run(tmp: Path, digest: str, rescore: bool = False) -> subprocess.CompletedProcess[str]:
    tree = tmp / f"tree_{digest}"
    (tree / "benchmarks").mkdir(parents=True)
    (tree / "benchmarks" / "headline.py").write_text(TREE.format(digest=digest, rescore=rescore))
    pkg = tree / "pipeline" / "problems"
    pkg.mkdir(parents=True)
    (tree / "pipeline" / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "mix.py").write_text(
        "class _M:\n    def levels(self):\n        return {}\n\n\ndef load_mix(path):\n"
        "    return _M()\n"
    )
    env = {**os.environ, "START_CODE": str(tree)}
    return subprocess.run(
        [sys.executable, str(SCRIPT), "--results", str(tmp / "results"), "--state",
         str(tmp / "state")],
        env=env, capture_output=True, text=True, check=False,
    )  # fmt: skip


@pytest.fixture
def results(tmp_path: Path) -> Path:
    runs = tmp_path / "results" / "headline_runs"
    runs.mkdir(parents=True)
    (runs / "start_warm_aaaa.json").write_text(json.dumps({"hash": "aaaa"}))
    return tmp_path


def test_the_start_that_matches_the_record_is_kept(results: Path) -> None:
    got = run(results, "aaaa")
    assert got.returncode == 0, got.stderr
    assert "warm start aaaa matches" in got.stdout
    assert (results / "state" / "warm" / "config.json").is_file()
    report = json.loads((results / "results" / "headline_start.json").read_text())
    assert report["hash"] == "aaaa" and report["matches_record"] is True
    assert report["code"] == "tree-aaaa"  # the tree that built it, not this checkout
    assert (results / "results" / "headline_start.png").is_file()


def test_weights_of_another_hash_are_moved_aside_and_never_scored(results: Path) -> None:
    got = run(results, "bbbb")
    assert got.returncode == 1
    assert "has weights bbbb, which no committed record (start_warm_aaaa.json) holds" in got.stderr
    assert "AssertionError" not in got.stderr  # the tree's evaluate never ran
    assert not (results / "state" / "warm").exists()  # the benchmark will not pick them up
    assert (results / "state" / "warm.mismatch" / "config.json").is_file()
    runs = results / "results" / "headline_runs"
    assert sorted(p.name for p in runs.iterdir()) == ["start_warm_aaaa.json"]  # nothing recorded
    report = json.loads((results / "results" / "headline_start.json").read_text())
    assert report["hash"] == "bbbb" and report["matches_record"] is False


def test_matching_weights_under_another_verifier_stop_with_a_report(results: Path) -> None:
    """The weights are the record's but the tree's verifier is not: the campaign stops (one line,
    exit 1), the record stays as committed, and the build is still reported."""
    record = results / "results" / "headline_runs" / "start_warm_aaaa.json"
    before = record.read_text()
    got = run(results, "aaaa", rescore=True)
    assert got.returncode == 1 and got.stderr.strip().count("\n") == 0
    assert "start_warm_aaaa.json was scored under another verifier" in got.stderr
    assert "AssertionError" not in got.stderr and record.read_text() == before
    report = json.loads((results / "results" / "headline_start.json").read_text())
    assert report["hash"] == "aaaa" and report["matches_record"] is True


def test_no_committed_record_is_one_line_and_exit_1(tmp_path: Path) -> None:
    (tmp_path / "results" / "headline_runs").mkdir(parents=True)
    got = run(tmp_path, "aaaa")
    assert got.returncode == 1 and got.stderr.strip().count("\n") == 0
    assert "no committed warm start record" in got.stderr
