"""The HTML report on an empty and on a busy ledger (opened in headless Chromium), and the SQL
examples of the README and the user guide (docs/guide.md) run against a small ledger."""

from __future__ import annotations

import base64
import io
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import polars as pl
import pytest
from PIL import Image

from flows import cli
from flows.commands.evaluation import run_eval
from flows.curate import curate
from pipeline.jobs.analysis.evaluate import EvalConfig, evaluate, heldout_set
from pipeline.jobs.curate.curation import Policy
from pipeline.jobs.report import build_report
from pipeline.jobs.report.page import table_html
from pipeline.jobs.report.sections import CURVES, heldout_table, verifier_audit
from pipeline.sampling.base import Completion
from pipeline.scoring.verdict import Verdict, verifier_error
from pipeline.selection import CurateConfig
from pipeline.store import Ledger, check_read_only
from tests.cli_runner import wide_console
from tests.simulated import reachable_problems, simulated_policy
from tests.store.eval_rows import Outcomes, add_problems, add_run

ROOT = Path(__file__).resolve().parents[1]
GUIDE = [
    ROOT / "README.md",
    *(
        ROOT / "docs" / f"{page}.md"
        for page in ("guide", "ledger", "real-models", "process-rewards")
    ),
]
IMG = re.compile(r'<img src="data:image/png;base64,([A-Za-z0-9+/=]+)"')
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def train_metrics() -> pl.DataFrame:
    steps = list(range(6))
    rows = {
        "reward_mean": [0.1, 0.2, 0.25, 0.3, 0.4, 0.45],
        "pass_rate": [0.1, 0.2, 0.25, 0.3, 0.4, 0.45],
        "kl": [0.0, 0.01, float("nan"), 0.02, 0.03, 0.03],  # a skipped step's NaN is left out
        "zero_var_share": [0.6, 0.5, 0.5, 0.4, 0.4, 0.3],
        "completion_len": [9.0, 9.5, 10.0, 10.0, 11.0, 11.0],
        "grad_norm": [1.0] * 6,  # not plotted
        "predicted_informative": [0.5] * 6,  # the difficulty model picked (not plotted)
    }
    return pl.DataFrame(
        {
            "train_id": "train-1",
            "step": steps * len(rows),
            "name": [n for n in rows for _ in steps],
            "value": [v for values in rows.values() for v in values],
        }
    )


def train_rollouts() -> pl.DataFrame:
    """train-1's groups: two prompts a step, groups of 2; p0's disagree, p1's never do."""
    rows = [
        ("train-1", step, pid, i, "rev-a", float(pid == "p0" and i == 0), pid == "p0" and i == 0)
        for step in range(6)
        for pid in ("p0", "p1")
        for i in range(2)
    ]
    schema = ["train_id", "step", "problem_id", "sample_idx", "policy", "reward", "correct"]
    return pl.DataFrame(rows, schema=schema, orient="row")


@pytest.fixture(scope="module")
def busy() -> Iterator[Ledger]:
    """Two revisions curated and evaluated (before: never right, after: always), and metrics."""
    ledger = Ledger.memory()
    cfg = CurateConfig(n_candidates=120, mix={"arith": "1-6"}, seed=3, chunk_size=40)
    problems = reachable_problems(cfg)  # however the curation spreads the candidates
    rates_a = {1: 1.0, 2: 0.9, 3: 0.6, 4: 0.3, 5: 0.1}
    curate(ledger, simulated_policy(problems, rates_a, "rev-a"), cfg)
    cfg2 = cfg.model_copy(update={"refine_g": 24})
    rates_b = {1: 1.0, 2: 1.0, 3: 0.8, 4: 0.5, 5: 0.3}
    curate(ledger, simulated_policy(problems, rates_b, "rev-b"), cfg2)
    held = heldout_set(2, ["arith"])
    prompts_of = {q: f"{q}=" for q in held["question"]}
    for revision, rate in (("rev-a", 0.0), ("rev-b", 1.0)):
        policy = simulated_policy(held, dict.fromkeys(range(1, 11), rate), revision)
        evaluate(policy.sampler, ledger, revision, prompts_of, EvalConfig(2, 4), held)
    ledger.write("train_metrics", train_metrics())
    ledger.write("train_rollouts", train_rollouts())
    yield ledger
    ledger.close()


def images(page: Path) -> list[bytes]:
    return [base64.b64decode(data) for data in IMG.findall(page.read_text())]


def assert_png(data: bytes) -> None:
    assert data.startswith(PNG_MAGIC)
    with Image.open(io.BytesIO(data)) as image:
        image.load()
        assert image.width > 0 and image.height > 0


def test_an_empty_ledger_gives_a_page_of_no_data_notes(ledger: Ledger, tmp_path: Path) -> None:
    result = build_report(ledger, tmp_path)
    text = result.path.read_text()
    assert result.figures == [] and images(result.path) == []
    assert len(result.empty_sections) == 8 and text.count("No data yet") == 8
    assert "Ledger overview" not in result.empty_sections


def test_a_busy_ledger_gets_every_figure_embedded_and_on_disk(busy: Ledger, tmp_path: Path) -> None:
    result = build_report(busy, tmp_path)
    assert result.empty_sections == []
    keys = {p.name for p in result.figures}
    assert keys == {f"fig_{k}_0.png" for k in ("histograms", "difficulty", "curriculum",
                                                  "rejections", "training")}  # fmt: skip
    embedded = images(result.path)
    assert len(embedded) == len(result.figures)
    for data, path in zip(embedded, result.figures, strict=True):
        assert_png(data)
        assert path.read_bytes() == data
    assert not list(tmp_path.glob(".*tmp*"))


def test_the_heldout_table_compares_the_first_and_last_revision(
    busy: Ledger, tmp_path: Path
) -> None:
    frame = busy.query("report_heldout")
    assert set(frame["before_revision"]) == {"rev-a"} and set(frame["after_revision"]) == {"rev-b"}
    assert set(frame["mode"]) == {"greedy", "sampled"}
    assert frame["before"].to_list() == [0.0] * frame.height
    assert frame["after"].to_list() == [1.0] * frame.height
    text = build_report(busy, tmp_path).path.read_text()
    assert "Before: rev-a; after: rev-b." in text


# Two revisions, each with a greedy run and a one-sample sampled run (eval_samples = 1), some of
# whose verifier calls failed: rev-b's sampled run is 3 right + 1 verifier error = 0.75, which
# the report once showed as 1.00 (errors left out) while the CLI showed 0.75.
CELLS = {"a1": ("arith", 1), "a2": ("arith", 1), "a3": ("arith", 2), "w1": ("word", 1)}
RUNS: list[tuple[str, str, float, Outcomes]] = [
    ("a-g", "rev-a", 0.0, {"a1": [True], "a2": [False], "a3": [False], "w1": [False]}),
    ("a-s", "rev-a", 1.0, {"a1": [None], "a2": [True], "a3": [False], "w1": [False]}),
    ("b-g", "rev-b", 0.0, {"a1": [True], "a2": [True], "a3": [None], "w1": [False]}),
    ("b-s", "rev-b", 1.0, {"a1": [True], "a2": [True], "a3": [True], "w1": [None]}),
]


def shown_by_the_cli(monkeypatch: pytest.MonkeyPatch) -> dict[str, pl.DataFrame]:
    """The frames the CLI prints, by title (what `flows.cli.common.show` renders as a table;
    each command module imports it by name, so it is replaced in each of them)."""
    frames: dict[str, pl.DataFrame] = {}
    for module in (cli.curate, cli.query, cli.train):  # eval, stats, train's summary
        monkeypatch.setattr(module, "show", lambda frame, title: frames.__setitem__(title, frame))
    return frames


def report_table(ledger: Ledger, page: str) -> pl.DataFrame:
    section = heldout_table(ledger)
    assert len(section.tables) == 1
    caption, table = section.tables[0]
    assert table_html(caption, table) in page  # the page shows exactly this frame
    return table


def test_the_cli_tables_and_the_report_agree_on_runs_with_verifier_errors(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from flows.train import summary
    from pipeline.jobs.train.recorder import heldout_table as revision_heldout
    from pipeline.jobs.train.trainee import TrainResult

    with Ledger.open(home) as ledger:
        add_problems(ledger, CELLS)
        for minute, (run_id, revision, temperature, outcomes) in enumerate(RUNS):
            add_run(ledger, run_id, revision, temperature, outcomes, minute=minute)
        before, after = revision_heldout(ledger, "rev-a"), revision_heldout(ledger, "rev-b")
        page = build_report(ledger, home / "report").path.read_text()
        report = report_table(ledger, page)
    frames = shown_by_the_cli(monkeypatch)
    cli.query.stats(home=home)  # `sieve stats`: held-out sampled pass@1 by revision
    result = TrainResult("t", "c", "rev-a", "rev-b", home, 1, 1, 1.0, before, after)
    printed = wide_console(monkeypatch, cli.train)  # 1,000 columns: no line is wrapped
    cli.train.print_train(
        {**summary(result), "before": before.to_dicts(), "after": after.to_dicts()}
    )
    line = printed.getvalue()
    by_revision = frames["held-out sampled pass@1 by revision (oldest first)"]
    train_table = frames["held-out pass@1 before -> after"]

    cells = ["family", "level"]
    for mode in ("greedy", "sampled"):
        rows = report.filter(pl.col("mode") == mode).sort(cells)
        joined = rows.join(train_table, on=cells)
        assert joined.height == 3
        assert joined["before"].to_list() == joined[f"{mode}_before"].to_list()
        assert joined["after"].to_list() == joined[f"{mode}_after"].to_list()
    sampled = report.filter(pl.col("mode") == "sampled").sort(cells)
    assert sampled["before"].to_list() == by_revision.sort(cells)["rev-a"].to_list()
    assert sampled["after"].to_list() == by_revision.sort(cells)["rev-b"].to_list()
    # the verifier errors count as wrong everywhere: word 1 (error only) is 0, not missing or 1
    assert sampled["after"].to_list() == [1.0, 1.0, 0.0]
    assert sampled["after_errors"].to_list() == [0, 0, 1]
    assert "held-out sampled 25.0% -> 75.0%, greedy 25.0% -> 50.0%" in line


class ErrsOnLevelOne:
    """The gold answer everywhere, but level-1 prompts get a completion whose check fails."""

    backend = "fake"
    model_name = "fake"

    def __init__(self, answers: dict[str, str], level_one: set[str]):
        self.answers, self.level_one = answers, level_one

    def sample(self, prompts: list[str], n: int, params: object) -> list[list[Completion]]:
        texts = ["ERR" if p in self.level_one else self.answers[p] for p in prompts]
        return [[Completion(t, (1,), "stop")] * n for t in texts]


def test_sieve_eval_prints_what_the_report_shows_with_verifier_errors(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`sieve eval`'s own code path (`flows.commands.evaluation.run_eval`, then the CLI's
    `show_eval`) against the report, on a run whose verifier fails on every level-1 completion."""
    import pipeline.jobs.curate.rollouts

    real = pipeline.jobs.curate.rollouts.verify_batch

    def failing(texts: list[str], *args: object, **kwargs: object) -> list[Verdict]:
        verdicts = real(texts, *args, **kwargs)  # type: ignore[arg-type]
        return [
            verifier_error("test") if t == "ERR" else v
            for t, v in zip(texts, verdicts, strict=True)
        ]

    monkeypatch.setattr(pipeline.jobs.curate.rollouts, "verify_batch", failing)
    held = heldout_set(2)
    prompt = {q: f"{q}=" for q in held["question"]}
    answers = {prompt[q]: a for q, a in zip(held["question"], held["answer"], strict=True)}
    level_one = {
        prompt[q] for q, lv in zip(held["question"], held["level"], strict=True) if lv == 1
    }
    policy = Policy(ErrsOnLevelOne(answers, level_one), "rev", lambda qs: [prompt[q] for q in qs])
    frames = shown_by_the_cli(monkeypatch)
    cfg = EvalConfig(per_level=2, samples=3)
    cli.curate.show_eval(run_eval(policy, cfg, home), cfg)
    (printed,) = frames.values()
    with Ledger.open(home, read_only=True) as ledger:
        page = build_report(ledger, home / "report").path.read_text()
        report = report_table(ledger, page)
    cells = ["family", "level"]
    wide = report.pivot(on="mode", index=cells, values="after").sort(cells)
    assert wide["greedy"].to_list() == printed["greedy"].to_list()
    assert wide["sampled"].to_list() == printed["sampled"].to_list()
    errors = report.group_by(cells).agg(pl.col("after_errors").sum()).sort(cells)
    assert errors["after_errors"].to_list() == printed["errors"].to_list()
    level1 = printed.filter(pl.col("level") == 1)
    assert set(level1["greedy"]) == {0.0} and set(level1["errors"]) == {2 * 4}  # 2 problems x 4
    assert set(printed.filter(pl.col("level") > 1)["sampled"]) == {1.0}


def test_the_verifier_audit_of_the_latest_curation_is_shown(busy: Ledger, tmp_path: Path) -> None:
    from pipeline.jobs.curate.audit import by_family
    from pipeline.store.ids import curation_runs

    section = verifier_audit(busy)
    ((caption, frame),) = section.tables
    latest = busy.sql("SELECT curriculum_id FROM curricula ORDER BY created_at DESC LIMIT 1")
    expected = by_family(busy, curation_runs(latest.item()))
    assert frame.equals(expected) and frame["family"].to_list() == ["arith"]
    assert frame["audited"][0] > 0 and "disagreement_rate" in frame.columns
    assert table_html(caption, frame) in build_report(busy, tmp_path).path.read_text()


def test_training_curves_skip_missing_and_non_finite_values(busy: Ledger) -> None:
    names = [name for _, name in CURVES]
    frame = busy.query("report_train_metrics", names=names, limit=5)
    assert set(frame["name"]) == set(names)  # grad_norm is not asked for
    assert frame.filter(pl.col("name") == "kl").height == 5  # the NaN step is left out


def test_figures_of_an_earlier_report_are_removed_when_no_longer_drawn(
    busy: Ledger, ledger: Ledger, tmp_path: Path
) -> None:
    build_report(busy, tmp_path)
    assert list(tmp_path.glob("fig_*.png"))
    build_report(ledger, tmp_path)
    assert list(tmp_path.glob("fig_*.png")) == []


def chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def open_in_chromium(page: Path, shot: Path, profile: Path) -> list[str]:
    """Render `page` headless, save a screenshot; returns the page's console messages."""
    browser = chromium()
    assert browser is not None
    run = subprocess.run(
        [
            browser, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
            f"--user-data-dir={profile}", f"--screenshot={shot}", "--window-size=1200,4000",
            "--enable-logging=stderr", "--v=0", page.resolve().as_uri(),
        ],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-2000:]
    return [line for line in run.stderr.splitlines() if "CONSOLE" in line or "Uncaught" in line]


@pytest.mark.skipif(chromium() is None, reason="chromium is not installed (make report-deps)")
def test_the_page_renders_in_headless_chromium_without_console_errors(
    busy: Ledger, tmp_path: Path
) -> None:
    result = build_report(busy, tmp_path / "report")
    shot = tmp_path / "screenshot.png"
    assert open_in_chromium(result.path, shot, tmp_path / "profile") == []
    assert shot.stat().st_size > 0
    assert_png(shot.read_bytes())
    broken = tmp_path / "broken.html"  # the console check itself catches a failing page
    broken.write_text("<html><body><script>throw new Error('boom')</script></body></html>")
    messages = open_in_chromium(broken, tmp_path / "broken.png", tmp_path / "profile2")
    assert any("Uncaught Error: boom" in m for m in messages)


def guide_queries() -> list[str]:
    text = "\n".join(page.read_text() for page in GUIDE)
    return re.findall(r"```sql\n(.*?)```", text, flags=re.DOTALL)


def test_the_user_guide_has_at_least_five_queries_over_the_views() -> None:
    text = "\n".join(guide_queries())
    assert len(guide_queries()) >= 5
    for view in ("group_stats", "prompt_stats", "difficulty_by_family", "run_summary",
                 "curriculum_summary", "rejection_summary"):  # fmt: skip
        assert view in text


@pytest.mark.parametrize("query", guide_queries(), ids=lambda q: q.split("\n")[0][:40])
def test_each_user_guide_query_runs_and_finds_rows(busy: Ledger, query: str) -> None:
    check_read_only(query)  # `sieve sql` accepts it
    assert busy.sql(query).height > 0
