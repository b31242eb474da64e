"""benchmarks/curriculum.py, the earlier tiny headline: its Sieve arms (a copy of the product's
night) are retired, refused in one line, while their committed runs are still summarised as
they were measured."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import curriculum as cb


@pytest.mark.parametrize("arm", cb.RETIRED_ARMS)
def test_a_retired_arm_is_refused_in_one_line(arm: str, tmp_path: Path) -> None:
    """Refused before anything else is looked at (here: a model that does not exist)."""
    with pytest.raises(SystemExit) as refused:
        cb.main(["--arms", f"uniform,{arm}", "--model", str(tmp_path / "none"), "--out", "x"])
    line = str(refused.value.code)
    assert "\n" not in line and f"{arm!r} is retired" in line
    assert "curriculum*.json" in line and "headline.py --arms night" in line
    assert not set(cb.RETIRED_ARMS) & set(cb.ARMS)


def test_a_run_never_overwrites_the_retired_arms_results(tmp_path: Path) -> None:
    """curriculum.json and curriculum_quick.json hold the retired arms' runs: a new run of the
    runnable arms must name another results file."""
    for quick in ([], ["--quick"]):
        with pytest.raises(SystemExit, match=r"holds retired arms' runs.*another --out"):
            cb.main(["--arms", "uniform", "--model", str(tmp_path / "none"), *quick])
    with pytest.raises(SystemExit, match="no model at"):  # another name: on to the model check
        cb.main(["--arms", "uniform", "--model", str(tmp_path / "none"), "--out", "x"])


@pytest.mark.parametrize("name", ["curriculum", "curriculum_quick", "curriculum_every_rollout"])
def test_the_committed_runs_summarise_as_measured(name: str) -> None:
    """What `--resummarise` computes from a committed file, retired arms included, is what the
    file holds (the docs render these keys)."""
    result = json.loads((cb.RESULTS / f"{name}.json").read_text())
    setup = cb.Setup(**{**result["setup"], "seeds": tuple(result["setup"]["seeds"])})
    assert any(r["arm"] in cb.RETIRED_ARMS for r in result["runs"])
    again = cb.summarise(result["runs"], setup)
    assert again == {k: result[k] for k in again}
