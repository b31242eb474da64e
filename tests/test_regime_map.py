"""The regime map's pool construction (benchmarks/regime_map.py): pools hit their target
informative shares as `generate_mix` would weight their cells, and the share formula is the
Beta-free binomial one checked by enumeration.

Test: `.venv/bin/pytest tests/test_regime_map.py -q`
"""

from __future__ import annotations

import itertools
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import regime_map as rm

from pipeline.problems import generate_mix


def test_informative_probability_matches_enumeration() -> None:
    for p in (0.0, 0.1, 0.5, 0.93, 1.0):
        brute = 0.0
        for outcome in itertools.product((0, 1), repeat=rm.G):
            k = sum(outcome)
            if 0 < k < rm.G:
                brute += p**k * (1 - p) ** (rm.G - k)
        assert rm.informative_probability(p) == pytest.approx(brute, abs=1e-12)


def test_cell_weights_follow_generate_mix() -> None:
    # cells with large problem spaces (a small one, such as arith 1, runs out of distinct problems
    # and gets less than its share: `measure` reports the pool's share from the pool itself)
    cells = [("arith", 4), ("arith", 5), ("arith", 6), ("linear", 3)]
    weights = rm.cell_weights(cells)
    assert sum(weights.values()) == pytest.approx(1.0)
    frame = generate_mix({"arith": [4, 5, 6], "linear": [3]}, 1200, 7)
    for (family, level), w in weights.items():
        share = frame.filter((frame["family"] == family) & (frame["level"] == level)).height
        assert share / frame.height == pytest.approx(w, abs=0.01)


def _cells() -> list[dict[str, object]]:
    shares = [0.7, 0.65, 0.6, 0.55, 0.5, 0.45, 0.3, 0.2, 0.1] + [0.0] * 10 + [0.01] * 4
    return [
        {"family": f"fam{i // 3}", "level": i % 3 + 1, "informative": s}
        for i, s in enumerate(shares)
    ]


def test_pools_come_close_to_every_target_and_are_deterministic() -> None:
    pools = rm.choose_pools(_cells())
    assert [p["target"] for p in pools] == list(rm.TARGETS)
    for p in pools:
        assert abs(p["predicted_share"] - p["target"]) < 0.03, p
        assert p["cells"] >= 4
    assert rm.choose_pools(_cells()) == pools
    # the predicted share is recomputed from the chosen mix, as generate_mix spreads it
    share = {(c["family"], c["level"]): c["informative"] for c in _cells()}
    for p in pools:
        cells = [(f, lv) for f, lvs in p["mix"].items() for lv in lvs]
        assert rm.predicted_share(cells, share) == pytest.approx(p["predicted_share"])
