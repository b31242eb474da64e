"""The docs renderer (`docs/render/render_docs.py`, `make docs` / `make docs-check`): a fresh
render passes the check, a stale block is reported one line per block, and a missing results
file or key is one clear error. Every registered block renders from the committed results and
sits on a page. Fast: small pages in a temporary folder, no benchmark is run."""

from __future__ import annotations

import importlib.util
import json
import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
_spec = importlib.util.spec_from_file_location(
    "render_docs", ROOT / "docs" / "render" / "render_docs.py"
)
assert _spec is not None and _spec.loader is not None
render_docs = importlib.util.module_from_spec(_spec)
sys.modules["render_docs"] = render_docs  # benchmarks/ is a folder of scripts, not a package
_spec.loader.exec_module(render_docs)
BLOCKS, RenderError, Results = render_docs.BLOCKS, render_docs.RenderError, render_docs.Results
main, pages, render_page = render_docs.main, render_docs.pages, render_docs.render_page


def block(name: str, body: str = "") -> str:
    return f"<!-- generated:begin {name} -->\n{body}<!-- generated:end {name} -->\n"


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A README and one docs page with two generated blocks, and a results folder."""
    (tmp_path / "docs").mkdir()
    (tmp_path / "benchmarks" / "results").mkdir(parents=True)
    for name in ("ledger", "sandbox"):
        shutil.copy(RESULTS / f"{name}.json", tmp_path / "benchmarks" / "results")
    (tmp_path / "README.md").write_text("# Title\n\nBefore.\n\n" + block("ledger") + "\nAfter.\n")
    (tmp_path / "docs" / "page.md").write_text("# Page\n\n" + block("sandbox") + block("ledger"))
    return tmp_path


def check(repo: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, list[str]]:
    code = main(["--check", "--root", str(repo)])
    return code, capsys.readouterr().err.splitlines()


def test_a_fresh_render_passes_the_check(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert check(repo, capsys)[0] == 1  # empty blocks are stale
    assert main(["--root", str(repo)]) == 0
    capsys.readouterr()
    assert check(repo, capsys) == (0, [])
    readme = (repo / "README.md").read_text()
    rate = json.loads((RESULTS / "ledger.json").read_text())["ingest"]["sieve_rows_per_s"]
    assert f"{rate / 1e6:,.2f} M rows/s" in readme  # the number comes from the JSON
    assert readme.startswith("# Title\n\nBefore.\n\n") and readme.endswith("\nAfter.\n")
    assert main(["--root", str(repo)]) == 0  # rendering again changes nothing
    assert (repo / "README.md").read_text() == readme


def test_a_stale_block_is_reported_once_per_block_and_nothing_is_written(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    main(["--root", str(repo)])
    page = repo / "docs" / "page.md"
    page.write_text(page.read_text().replace("23.3", "25.0", 1))  # a hand-edited number
    readme = repo / "README.md"
    readme.write_text(readme.read_text().replace("| 1.5 s |", "| 1.4 s |"))
    edited = {p: p.read_text() for p in (page, readme)}
    capsys.readouterr()
    code, lines = check(repo, capsys)
    assert code == 1
    assert lines == [
        "README.md: generated block 'ledger' is stale (run `make docs`)",
        "docs/page.md: generated block 'sandbox' is stale (run `make docs`)",
    ]
    assert all(p.read_text() == text for p, text in edited.items())


def test_a_changed_result_makes_its_block_stale(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    main(["--root", str(repo)])
    path = repo / "benchmarks" / "results" / "ledger.json"
    data = json.loads(path.read_text())
    data["ingest"]["idempotent_rerun_s"] = 9.0
    path.write_text(json.dumps(data))
    capsys.readouterr()
    code, lines = check(repo, capsys)
    assert code == 1 and len(lines) == 2  # README and docs/page.md both show it
    assert all("'ledger' is stale" in line for line in lines)


def test_a_missing_json_key_is_one_clear_error(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = repo / "benchmarks" / "results" / "ledger.json"
    data = json.loads(path.read_text())
    del data["ingest"]["sieve_rows_per_s"]
    path.write_text(json.dumps(data))
    code, lines = check(repo, capsys)
    assert code == 2
    assert lines == ["error: ledger.json: no key 'ingest.sieve_rows_per_s'"]


def test_a_missing_results_file_is_one_clear_error(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (repo / "benchmarks" / "results" / "sandbox.json").unlink()
    code, lines = check(repo, capsys)
    assert code == 2 and len(lines) == 1
    assert lines[0].startswith("error: no results file ") and lines[0].endswith("sandbox.json")


def test_unknown_and_unclosed_blocks_are_refused() -> None:
    results = Results(RESULTS)
    with pytest.raises(RenderError, match=r"docs/x\.md: unknown generated block 'nope'"):
        render_page(block("nope"), results, "docs/x.md")
    unclosed = "<!-- generated:begin ledger -->\ntext\n"
    with pytest.raises(RenderError, match=r"block 'ledger' has no matching"):
        render_page(unclosed, results, "docs/x.md")
    crossed = block("ledger").replace("end ledger", "end sandbox")
    with pytest.raises(RenderError, match=r"block 'ledger' has no matching"):
        render_page(crossed, results, "docs/x.md")


def test_text_outside_the_blocks_is_left_as_it_is() -> None:
    text = "a 300 tokens/s claim outside\n" + block("ledger", "old\n") + "tail\n"
    new, stale = render_page(text, Results(RESULTS), "x.md")
    assert stale == ["ledger"]
    assert new.startswith("a 300 tokens/s claim outside\n") and new.endswith("tail\n")
    assert "old\n" not in new


@pytest.mark.parametrize("name", sorted(BLOCKS))
def test_every_block_renders_from_the_committed_results(name: str) -> None:
    body = BLOCKS[name](Results(RESULTS))
    assert body.strip() and "nan" not in body.lower().split()


def test_every_block_is_placed_on_a_page() -> None:
    text = "\n".join(page.read_text() for page in pages(ROOT) if page.is_file())
    assert set(render_docs.BEGIN.findall(text)) == set(BLOCKS)


def real_curriculum_results(folder: Path, sieve_ratio: float | None, with_sieve: bool) -> Path:
    """A minimal real_curriculum.json (the keys the headline reads) in `folder`."""
    uniform = {"sampled_mean": 0.2, "sampled_std": 0.01, "greedy_mean": 0.22}
    uniform |= {"start_sampled": 0.05, "zero_var_share": 0.6, "curation_rollouts": 0}
    final = {"uniform": uniform}
    runs = [
        {
            "arm": "uniform",
            "seed": 1,
            "seconds": 3000.0,
            "steps": 32,
            "counts": {"train_skipped_zero_var": 0},
        }
    ]
    runs += [{"arm": "uniform", "seed": 2, "seconds": 3600.0, "steps": 34,
              "counts": {"train_skipped_zero_var": 2}}]  # fmt: skip
    reach: dict[str, float | None] = {"uniform": 2048.0}
    ratio: dict[str, float | None] = {"uniform": 1.0}
    if with_sieve:
        final["sieve"] = {**final["uniform"], "sampled_mean": 0.25, "curation_rollouts": 900}
        runs += [
            {"arm": "sieve", "seed": s, "seconds": 60.0, "steps": 9,
             "counts": {"train_skipped_zero_var": 0}}
            for s in (1, 2)
        ]  # fmt: skip
        reach["sieve"] = None if sieve_ratio is None else 2048.0 * sieve_ratio
        ratio["sieve"] = sieve_ratio
    cells = [
        {"family": "arith", "level": 1, "pass_rate": 0.167, "zone": "learnable"},
        {"family": "rg:products", "level": 2, "pass_rate": None, "zone": "unmeasured"},
    ]
    gain = [
        {"family": c["family"], "level": c["level"], "base_sampled": 0.1, "sampled_gain": 0.05}
        for c in cells
    ]
    gains = {"uniform": gain}
    curated: dict[str, dict] = {}
    if with_sieve:
        gains["sieve"] = [gain[0], {**gain[1], "sampled_gain": None}]
        curated["sieve"] = {"arith 1": {"screened": 6, "kept": 2}}  # rg:products 2 never screened
    data = {
        "model": "smollm2-135m",
        "cells": cells,
        "per_level_gains": gains,
        "curation_cells": curated,
        "hand_check": {
            "uniform": {
                "read": 20,
                "unlabelled": 1,
                "correct": 15,
                "wrong_working": 3,
                "contradicted": 0,
                "hacked": 1,
            },
        },
        "timing": {"base_eval_seconds": 480.0},
        "seeds": [1, 2],
        "setup": {"budget": 2048, "samples": 4, "temperature": 0.6, "evals": 5, "seeds": [1, 2]},
        "heldout_problems": 226,
        "final": final,
        "uniform_final": 0.2,
        "rollouts_to_uniform_final": reach,
        "rollouts_to_uniform_final_vs_uniform": ratio,
        "runs": runs,
        "pending_runs": [],
    }
    (folder / "real_curriculum.json").write_text(json.dumps(data))
    return folder


@pytest.mark.parametrize(
    ("ratio", "with_sieve", "said"),
    [
        (0.4, True, "with **0.40× of uniform's rollouts**"),
        (None, True, "Sieve **did not reach** uniform's final"),
        (None, False, "Sieve's arm is not measured yet"),
    ],
)
def test_the_real_model_headline_says_how_sieve_did_whichever_way(
    tmp_path: Path, ratio: float | None, with_sieve: bool, said: str
) -> None:
    body = BLOCKS["headline-real-curriculum"](
        Results(real_curriculum_results(tmp_path, ratio, with_sieve))
    )
    assert said in body.splitlines()[0]
    assert "226 held-out rows × 4 samples" in body and "counted in both" in body
    assert ("| **Sieve** |" in body) == with_sieve
    assert "never" in body if with_sieve and ratio is None else "never" not in body
    assert "not compared" not in body


def test_a_seed_not_every_arm_has_finished_is_named_not_compared(tmp_path: Path) -> None:
    path = real_curriculum_results(tmp_path, 0.4, True) / "real_curriculum.json"
    data = json.loads(path.read_text())
    data["pending_runs"] = [
        {"arm": "uniform", "seed": 3, "rollouts": 2048, "sampled": 0.2477, "greedy": 0.2864}
    ]
    path.write_text(json.dumps(data))
    body = BLOCKS["headline-real-curriculum"](Results(tmp_path))
    last = body.splitlines()[-1]
    assert "not compared" in last and "uniform seed 3 (0.2477 sampled, 0.2864 greedy)" in last


def test_a_retired_arms_lone_seed_is_named_never_to_be_compared(tmp_path: Path) -> None:
    """A retired Sieve arm's other seeds will never run: its lone seed is not said to wait."""
    path = real_curriculum_results(tmp_path, 0.4, True) / "real_curriculum.json"
    data = json.loads(path.read_text())
    lone = {"seed": 1, "rollouts": 2048, "sampled": 0.1557, "greedy": 0.1182}
    data["pending_runs"] = [{**lone, "arm": "sieve_every_rollout"}]
    path.write_text(json.dumps(data))
    body = BLOCKS["headline-real-curriculum"](Results(tmp_path))
    last = body.splitlines()[-1]
    assert "never to be compared" in last and "retired" in last and "not compared yet" not in body
    assert "Sieve + every rollout counts seed 1 (0.1557 sampled, 0.1182 greedy)" in last
    data["pending_runs"].append({**lone, "arm": "uniform", "seed": 3})
    path.write_text(json.dumps(data))
    body = BLOCKS["headline-real-curriculum"](Results(tmp_path))
    assert "not compared yet" in body and "uniform seed 3" in body.split("never to be")[0]


def test_the_real_model_levels_show_each_cell_zone_and_each_arm_gain(tmp_path: Path) -> None:
    body = BLOCKS["real-curriculum-levels"](Results(real_curriculum_results(tmp_path, 0.4, True)))
    lines = body.splitlines()
    assert lines[0].startswith("| cell | zone") and "**Sieve** (points)" in lines[0]
    assert lines[0].endswith("| **Sieve**: prompts kept of screened |")
    assert lines[2] == "| arith 1 | learnable (16.7 %) | 10.0 % | +5.0 | +5.0 | 2 of 6 |"
    assert lines[3] == "| rg:products 2 | unmeasured | 10.0 % | +5.0 | — | 0 of 0 |"


def test_the_real_model_hand_check_and_wall_times_per_arm(tmp_path: Path) -> None:
    body = BLOCKS["real-curriculum-runs"](Results(real_curriculum_results(tmp_path, 0.4, True)))
    lines = body.splitlines()
    assert lines[0].startswith("| arm | steps per run (empty ones included) | prompt draws skipped")
    assert len(lines) == 5
    # updates, draws skipped and wall time: means of two seeds
    assert lines[2] == "| uniform | 33 | 1 | 20 | 15 | 3 | 0 | 1 | 1 | 55 min |"
    assert lines[4] == (
        "Of the 20 texts read: 1 hacked, 0 contradicted. "
        "The base model's evaluation, shared by every run: 8 min."
    )


# --- issue 47 point 5: numbers the docs used to carry by hand -----------------------------------


def test_the_real_demo_night_is_rendered_from_the_code_that_runs_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """docs/real-models.md's account of `make demo-real` reads `flows.loop.demo_real_settings`:
    a change there changes the page (it said 48 candidates and 12 steps where the code ran 40
    and 10)."""
    import flows.loop

    curate, train, engine = flows.loop.demo_real_settings()
    body = BLOCKS["demo-real-night"](Results(RESULTS))
    grpo = train.grpo_config()
    assert f"{curate.n_candidates} candidates screened at G = {curate.screen_g}" in body
    assert f"{grpo.total_steps} GRPO steps of {train.rollouts_per_step} rollouts" in body
    assert f"{train.eval_per_level} problems per cell ({train.eval_samples} samples" in body
    grown = curate.model_copy(update={"n_candidates": curate.n_candidates + 8})
    monkeypatch.setattr(flows.loop, "demo_real_settings", lambda: (grown, train, engine))
    assert f"{curate.n_candidates + 8} candidates" in BLOCKS["demo-real-night"](Results(RESULTS))


def test_measured_ranges_are_the_cells_own_extremes(tmp_path: Path) -> None:
    """The learnable-zone range is the smallest and largest learnable pass rate, to one decimal
    (the page said 7-17 % where the cells measured 6.25-17.2 %)."""
    cells = [
        {"family": "a", "level": 1, "pass_rate": 0.0625, "zone": "learnable"},
        {"family": "a", "level": 2, "pass_rate": 0.171875, "zone": "learnable"},
        {"family": "b", "level": 1, "pass_rate": 0.01, "zone": "never"},
    ]
    zones = {"always": 0, "learnable": 2, "never": 1, "unmeasured": 0}
    (tmp_path / "real_curriculum.json").write_text(json.dumps({"cells": cells, "zones": zones}))
    body = BLOCKS["real-curriculum-zones"](Results(tmp_path))
    assert "2 in the learnable zone (6.2-17.2 % pass@1 when measured), 1 near never" in body
    zones["learnable"] = 3  # the counts and the cells disagree: refused, not rendered
    (tmp_path / "real_curriculum.json").write_text(json.dumps({"cells": cells, "zones": zones}))
    with pytest.raises(RenderError, match="disagrees"):
        BLOCKS["real-curriculum-zones"](Results(tmp_path))


def test_the_verifier_tables_are_counted_in_the_committed_files() -> None:
    """docs/verifier.md's table sizes are the files' (it said 306 rows where the CSV has more)."""
    import csv

    with (ROOT / "tests" / "scoring" / "verifier_cases.csv").open(newline="") as f:
        rows = len(list(csv.reader(f))) - 1  # the header
    body = BLOCKS["verifier-tables"](Results(RESULTS))
    assert f"`verifier_cases.csv` has {rows:,} rows" in body


# --- issue 49 point 5: docs/architecture.md's lists are generated from the code ------------------


def code_tree(root: Path) -> Path:
    """A small tree with the three packages, a subpackage and one module without a docstring,
    and an architecture page holding the `modules` block."""
    files = {
        "grpo_core/__init__.py": '"""The trainer. More text."""\n',
        "grpo_core/loss.py": '"""The loss, e.g. `k3` of the KL. Then details."""\n',
        "pipeline/__init__.py": '"""The pipeline."""\n',
        "pipeline/jobs.py": '"""Jobs: one per command.\n\nA second paragraph."""\n',
        "pipeline/store/__init__.py": '"""The ledger."""\n',
        "pipeline/store/bare.py": "X = 1\n",
        "flows/__init__.py": '"""Flows."""\n',
    }
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    (root / "docs").mkdir()
    (root / "docs" / "architecture.md").write_text("# Architecture\n\n" + block("modules"))
    (root / "benchmarks" / "results").mkdir(parents=True)
    return root


def test_the_module_list_names_every_module_with_its_first_sentence(tmp_path: Path) -> None:
    body = BLOCKS["modules"](Results(tmp_path / "benchmarks" / "results", code_tree(tmp_path)))
    assert body.splitlines() == [
        "**`grpo_core/`** — The trainer.",
        "",
        "- `loss.py` — The loss, e.g. `k3` of the KL.",
        "",
        "**`pipeline/`** — The pipeline.",
        "",
        "- `jobs.py` — Jobs: one per command.",
        "",
        "**`pipeline/store/`** — The ledger.",
        "",
        "- `bare.py` — *(no docstring)*",
        "",
        "**`flows/`** — Flows.",
    ]


def test_a_new_module_makes_the_architecture_page_stale(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = code_tree(tmp_path)
    assert main(["--root", str(root)]) == 0
    capsys.readouterr()
    assert check(root, capsys) == (0, [])
    (root / "pipeline" / "store" / "views.py").write_text('"""The views."""\n')
    assert check(root, capsys) == (
        1,
        ["docs/architecture.md: generated block 'modules' is stale (run `make docs`)"],
    )


def test_every_module_of_the_packages_has_a_docstring() -> None:
    """The generated module list reads each module's docstring: none may be missing."""
    body = BLOCKS["modules"](Results(RESULTS))
    assert "(no docstring)" not in body
    for package in ("grpo_core", "pipeline", "flows"):
        for path in (ROOT / package).rglob("*.py"):
            if path.name != "__init__.py":
                assert f"- `{path.name}` — " in body, path


def test_the_settings_tables_count_the_code_as_it_is(monkeypatch: pytest.MonkeyPatch) -> None:
    """The "now" columns come from settings_sprawl.py's count of the code at render time, not
    from the results file: a changed count changes the page."""
    import docs_architecture

    now = dict(docs_architecture.counted_now(ROOT))
    committed = json.loads((RESULTS / "settings_sprawl.json").read_text())["before"]
    shape = BLOCKS["pipeline-shape"](Results(RESULTS))
    row = "| import circles among pipeline modules | "
    assert f"{row}{committed['pipeline_import_circles']} | {now['pipeline_import_circles']} |" in (
        shape
    )
    assert shape.endswith("Commands that call more than one job now: none.")
    circle = [["pipeline.a", "pipeline.b"]]
    calls = {**now["where"]["cli_job_calls"], "stats": ["pipeline.x.f", "pipeline.y.g"]}
    where = {
        **now["where"],
        "circles": circle,
        "layer_violations": ["pipeline.a -> pipeline.b"],
        "cli_job_calls": calls,
    }
    changed = {**now, "pipeline_import_circles": 1, "where": where}
    monkeypatch.setattr(docs_architecture, "counted_now", lambda root: changed)
    shape = BLOCKS["pipeline-shape"](Results(RESULTS))
    assert f"{row}{committed['pipeline_import_circles']} | 1 |" in shape
    assert "Import circles in the code now: `pipeline.a` → `pipeline.b`." in shape
    assert "Imports against the layers in the code now: `pipeline.a -> pipeline.b`." in shape
    assert shape.endswith(
        "Commands that call more than one job now: `sieve stats` (`pipeline.x.f`, `pipeline.y.g`)."
    )
    objects = BLOCKS["settings-objects"](Results(RESULTS))
    assert "| `CurateConfig` | `pipeline/selection/config.py` |" in objects
