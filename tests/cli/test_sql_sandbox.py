"""`sieve sql` as a sandbox (issue 17, point 1), and its output formats.

A catalogue of hostile statements runs in-process against one small ledger that sits next to
files holding a secret (text, CSV, JSON, Parquet, another DuckDB ledger, a model's
`config.json`) and with the secret in the environment. Every statement must exit non-zero
with one `error:` line that says why, the secret must appear nowhere in the output, and every
file under the test's root (the ledger included) must keep its bytes, with no file added or
removed; the ledger's table checksums are compared as well. A control test shows the same
reads do find the secret on a connection that is not locked down, so the probe can fail.

Test: `pytest tests/cli/test_sql_sandbox.py`.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import polars as pl
import pytest
from polars.testing import assert_frame_equal

from flows.cli import nightly
from flows.curate import curate
from pipeline.core.errors import SieveError
from pipeline.jobs.data.demo import EXAMPLE_SQL
from pipeline.selection import CurateConfig
from pipeline.store import Ledger
from tests.cli_runner import run_cli
from tests.simulated import reachable_problems, simulated_policy

SECRET = "sieve-sandbox-secret-7f3a9c"
TABLES = ("problems", "sampling_runs", "rollouts", "curricula", "curriculum_items")
ROOT = Path(__file__).resolve().parents[2]
# the pages whose SQL examples run on a curated ledger (docs/audit.md, rescore.md use placeholders)
GUIDE_PAGES = [
    ROOT / "README.md",
    *(
        ROOT / "docs" / f"{page}.md"
        for page in ("guide", "ledger", "real-models", "process-rewards")
    ),
]

# (id, SQL, needle in the error line, extra options); {o} is the folder of secret files,
# {l} the ledger file
HOSTILE: list[tuple[str, str, str, list[str]]] = [
    ("read_text a file", "SELECT * FROM read_text('{o}/secret.txt')", "reads only the ledger", []),
    (
        "read_text /etc/shadow",
        "SELECT * FROM read_text('/etc/shadow')",
        "reads only the ledger",
        [],
    ),
    (
        "read_text environ",
        "SELECT * FROM read_text('/proc/self/environ')",
        "reads only the ledger",
        [],
    ),
    (
        "read_blob environ",
        "SELECT content FROM read_blob('/proc/self/environ')",
        "reads only the ledger",
        [],
    ),
    ("read_text ~", "SELECT * FROM read_text('~/.bashrc')", "reads only the ledger", []),
    (
        "read_text past the ledger",
        "SELECT * FROM read_text('{l}/../../outside/secret.txt')",
        "reads only the ledger",
        [],
    ),
    ("read_csv", "SELECT * FROM read_csv('{o}/secret.csv')", "reads only the ledger", []),
    (
        "read_csv_auto no header",
        "SELECT * FROM read_csv_auto('{o}/secret.csv', header = false)",
        "reads only the ledger",
        [],
    ),
    ("read_json", "SELECT * FROM read_json('{o}/secret.json')", "reads only the ledger", []),
    (
        "read_parquet",
        "SELECT * FROM read_parquet('{o}/secret.parquet')",
        "reads only the ledger",
        [],
    ),
    ("file as a table", "SELECT * FROM '{o}/secret.csv'", "reads only the ledger", []),
    ("sniff_csv", "SELECT * FROM sniff_csv('{o}/secret.csv')", "reads only the ledger", []),
    (
        "parquet_metadata",
        "SELECT * FROM parquet_metadata('{o}/secret.parquet')",
        "reads only the ledger",
        [],
    ),
    ("glob /root", "SELECT * FROM glob('/root/*')", "reads only the ledger", []),
    ("glob beside the ledger", "SELECT * FROM glob('{o}/*')", "reads only the ledger", []),
    (
        "network read",
        "SELECT * FROM read_csv('https://example.com/x.csv')",
        "reads only the ledger",
        [],
    ),
    ("COPY TO a file", "COPY problems TO '{o}/dump.csv'", "read-only", []),
    ("COPY over another ledger", "COPY (SELECT 1) TO '{o}/other.duckdb'", "read-only", []),
    (
        "EXPLAIN ANALYZE COPY",
        "EXPLAIN ANALYZE COPY (SELECT * FROM problems) TO '{o}/dump.csv'",
        "EXPLAIN ANALYZE",
        [],
    ),
    (
        "EXPLAIN ANALYZE COPY over config.json",
        "EXPLAIN ANALYZE COPY (SELECT 1 AS x) TO '{o}/model/config.json' (FORMAT json)",
        "EXPLAIN ANALYZE",
        [],
    ),
    (
        "EXPLAIN (ANALYZE) COPY",
        "EXPLAIN (ANALYZE) COPY (SELECT 1) TO '{o}/dump.csv'",
        "EXPLAIN ANALYZE",
        [],
    ),
    ('EXPLAIN ("ANALYZE")', 'EXPLAIN ("ANALYZE") SELECT 1', "EXPLAIN ANALYZE", []),
    ("ANALYSE behind a comment", "explain /* x */ analyse SELECT 1", "EXPLAIN ANALYZE", []),
    ("EXPLAIN ANALYZE SET", "EXPLAIN ANALYZE SET threads = 64", "EXPLAIN ANALYZE", []),
    ("EXPLAIN ANALYZE INSTALL", "EXPLAIN ANALYZE INSTALL httpfs", "EXPLAIN ANALYZE", []),
    ("EXPLAIN of a COPY", "EXPLAIN COPY problems TO '{o}/dump.csv'", "only of a SELECT", []),
    ("ATTACH another ledger", "ATTACH '{o}/other.duckdb' AS other", "read-only", []),
    ("ATTACH a new file", "ATTACH '{o}/new.duckdb'", "read-only", []),
    ("DETACH", "DETACH sieve", "read-only", []),
    ("USE", "USE memory", "read-only", []),
    ("INSTALL", "INSTALL httpfs", "read-only", []),
    ("LOAD", "LOAD httpfs", "read-only", []),
    ("SET", "SET enable_external_access = true", "read-only", []),
    ("RESET", "RESET lock_configuration", "read-only", []),
    ("PRAGMA", "PRAGMA enable_profiling", "read-only", []),
    ("PRAGMA output file", "PRAGMA profiling_output = '{o}/profile.json'", "read-only", []),
    (
        "CALL enable_logging",
        "CALL enable_logging(storage := 'file', storage_path := '{o}/logs')",
        "read-only",
        [],
    ),
    (
        "enable_logging in FROM",
        "SELECT * FROM enable_logging(storage := 'file', storage_path := '{o}/logs')",
        "cannot change settings",
        [],
    ),
    ("CREATE SECRET", "CREATE SECRET s (TYPE s3, KEY_ID 'k', SECRET 'v')", "read-only", []),
    (
        "CREATE PERSISTENT SECRET",
        "CREATE PERSISTENT SECRET s (TYPE s3, KEY_ID 'k', SECRET 'v')",
        "read-only",
        [],
    ),
    ("EXPORT DATABASE", "EXPORT DATABASE '{o}/export'", "read-only", []),
    ("CHECKPOINT", "CHECKPOINT", "read-only", []),
    ("UPDATE", "UPDATE problems SET level = 0", "read-only", []),
    ("second statement", "SELECT 1; COPY problems TO '{o}/dump.csv'", "read-only", []),
    ("two SELECTs", "SELECT 1; SELECT 2", "one statement", []),
    (
        "statement after a comment",
        "SELECT 1 -- harmless\n; DROP TABLE problems",
        "read-only",
        [],
    ),
    ("comment hiding DELETE", "/* SELECT */ DELETE FROM problems", "read-only", []),
    (
        "query() running a COPY",
        "SELECT * FROM query('COPY problems TO ''{o}/dump.csv''')",
        "query failed",
        [],
    ),
    # a PIVOT without its IN list is one statement DuckDB runs as several (an enum type of the
    # pivoted values, then the query): it runs as a query, and only as one
    (
        "CREATE TABLE AS PIVOT",
        "CREATE TABLE t AS PIVOT problems ON family USING count(*)",
        "read-only",
        [],
    ),
    (
        "INSERT a PIVOT",
        "INSERT INTO problems PIVOT problems ON family USING count(*)",
        "read-only",
        [],
    ),
    (
        "COPY a PIVOT",
        "COPY (PIVOT problems ON family USING count(*)) TO '{o}/dump.csv'",
        "read-only",
        [],
    ),
    ("EXPLAIN a PIVOT", "EXPLAIN PIVOT problems ON family USING count(*)", "read-only", []),
    (
        "PIVOT a file",
        "PIVOT read_csv('{o}/secret.csv') ON token USING count(*)",
        "reads only the ledger",
        [],
    ),
    (
        "PIVOT then DROP",
        "PIVOT problems ON family USING count(*); DROP TABLE problems",
        "read-only",
        [],
    ),
    (
        "range(1e14)",
        "SELECT count(*) FROM range(100000000000000)",
        "--timeout",
        ["--timeout", "1"],
    ),
    (
        "endless recursion",
        "WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r) SELECT count(*) FROM r",
        "--timeout",
        ["--timeout", "1"],
    ),
    (
        "repeat('x', 1e9)",
        "SELECT strlen(repeat('x', 1000000000))",
        "--memory-limit",
        ["--memory-limit", "100MB"],
    ),
    (
        "a list of 1e8",
        "SELECT list(i) FROM range(100000000) AS t(i)",
        "--memory-limit",
        ["--memory-limit", "100MB"],
    ),
]

# statements that do run, and must still read no secret and change nothing
HARMLESS = [
    "SELECT * FROM duckdb_secrets()",
    "SELECT * FROM which_secret('s3://bucket/x', 's3')",
    "SELECT * FROM checkpoint()",
    "SELECT * FROM truncate_duckdb_logs()",
    "SELECT current_setting('home_directory') AS home",
    "SELECT 1;",
]


def sql(query: str, root: Path, *options: str) -> list[str]:
    """argv for `sieve sql` on the fixture's ledger (the query after `--`: it may start with
    a comment that reads like an option)."""
    return ["sql", "--home", str(root / "home"), *options, "--", query]


def tree(root: Path) -> dict[str, str]:
    """sha256 of every file under `root`, by relative path."""
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def checksums(root: Path) -> dict[str, tuple[int, int]]:
    with Ledger.open(root / "home", read_only=True) as ledger:
        return {t: ledger.checksum(t) for t in TABLES}


def one_error_line(code: int, out: str, err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert code != 0, (out, err)
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    return lines[0]


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A curated ledger under `home/` and secret files under `outside/`."""
    root = tmp_path_factory.mktemp("sandbox")
    cfg = CurateConfig(n_candidates=60, mix={"arith": "1-4"}, seed=1, chunk_size=30)
    rates = {1: 1.0, 2: 0.7, 3: 0.4, 4: 0.1}
    policy = simulated_policy(reachable_problems(cfg), rates, "rev-a")
    with Ledger.open(root / "home") as ledger:
        curate(ledger, policy, cfg)
    outside = root / "outside"
    (outside / "model").mkdir(parents=True)
    (outside / "secret.txt").write_text(SECRET + "\n")
    (outside / "secret.csv").write_text(f"token\n{SECRET}\n")
    (outside / "secret.json").write_text(json.dumps({"token": SECRET}))
    (outside / "model" / "config.json").write_text(json.dumps({"secret": SECRET}))
    pl.DataFrame({"token": [SECRET]}).write_parquet(outside / "secret.parquet")
    other = duckdb.connect(str(outside / "other.duckdb"))
    other.execute("CREATE TABLE t AS SELECT ? AS token", [SECRET])
    other.close()
    return root


def fill(query: str, root: Path) -> str:
    return query.replace("{o}", str(root / "outside")).replace(
        "{l}", str(root / "home" / "sieve.duckdb")
    )


@pytest.mark.parametrize(
    ("query", "needle", "options"), [c[1:] for c in HOSTILE], ids=[c[0] for c in HOSTILE]
)
def test_hostile_sql_is_one_line_reads_no_secret_and_changes_no_file(
    root: Path,
    capsys: pytest.CaptureFixture[str],
    query: str,
    needle: str,
    options: list[str],
) -> None:
    files, tables = tree(root), checksums(root)
    code, out, err = run_cli(sql(fill(query, root), root, *options), capsys)
    line = one_error_line(code, out, err)
    assert needle in line, line
    assert SECRET not in out + err
    assert tree(root) == files  # nothing written, created or removed, the ledger included
    assert checksums(root) == tables


def test_the_environment_stays_unread(root: Path) -> None:
    """/proc/self/environ shows the environment a process started with, so this runs `sieve`
    as a child started with the secret in its environment (and a control child that finds it)."""
    env = {**os.environ, "SIEVE_SANDBOX_SECRET": SECRET}
    control = (
        "import duckdb; print(duckdb.sql(\"FROM read_text('/proc/self/environ')\").fetchall())"
    )
    found = subprocess.run([sys.executable, "-c", control], env=env, capture_output=True, text=True)
    assert SECRET in found.stdout
    for query in (
        "SELECT * FROM read_text('/proc/self/environ')",
        "SELECT content FROM read_blob('/proc/self/environ')",
    ):
        result = subprocess.run(
            [sys.executable, "-m", "flows.cli", *sql(query, root)],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        line = one_error_line(result.returncode, result.stdout, result.stderr)
        assert "reads only the ledger" in line
        assert SECRET not in result.stdout + result.stderr


@pytest.mark.parametrize("query", HARMLESS)
def test_harmless_system_functions_run_and_still_change_nothing(
    root: Path, capsys: pytest.CaptureFixture[str], query: str
) -> None:
    files = tree(root)
    code, out, err = run_cli(sql(query, root, "--format", "csv"), capsys)
    assert code == 0 and err == "", err
    assert SECRET not in out
    assert tree(root) == files


def test_the_catalogue_covers_every_attack_of_the_issue() -> None:
    assert len(HOSTILE) >= 25
    text = "\n".join(q for _, q, _, _ in HOSTILE)
    for attack in ("/etc/shadow", "/proc/self/environ", "glob('/root", "EXPLAIN ANALYZE COPY",
                   "EXPLAIN ANALYZE SET", "EXPLAIN ANALYZE INSTALL", "range(100000000000000)",
                   "repeat('x', 1000000000)", "ATTACH", "INSTALL", "LOAD", "PRAGMA", "CALL",
                   "SECRET", "read_parquet", "read_csv", "--", "/*"):  # fmt: skip
        assert attack in text, attack


@pytest.mark.parametrize(
    "query",
    [
        "SELECT * FROM read_text('{o}/secret.txt')",
        "SELECT * FROM read_csv('{o}/secret.csv')",
        "SELECT * FROM read_parquet('{o}/secret.parquet')",
        "SELECT token FROM other.t",
    ],
)
def test_control_the_same_reads_find_the_secret_without_the_sandbox(root: Path, query: str) -> None:
    con = duckdb.connect()
    con.execute(f"ATTACH '{root / 'outside' / 'other.duckdb'}' AS other (READ_ONLY)")
    try:
        found = str(con.execute(fill(query, root)).fetchall())
    finally:
        con.close()
    assert SECRET in found


def test_the_sandboxed_connection_reports_its_locked_settings(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    names = (
        "enable_external_access",
        "autoload_known_extensions",
        "autoinstall_known_extensions",
        "lock_configuration",
        "allow_persistent_secrets",
        "threads",
        "memory_limit",
    )
    query = f"SELECT name, value FROM duckdb_settings() WHERE name IN {names}"
    plain = duckdb.connect()  # how this DuckDB prints a 300MB limit
    plain.execute("SET memory_limit = '300MB'")
    limit = plain.execute("SELECT current_setting('memory_limit')").fetchall()[0][0]
    plain.close()
    code, out, err = run_cli(
        sql(query, root, "--format", "json", "--memory-limit", "300MB"), capsys
    )
    assert code == 0, err
    settings = {row["name"]: row["value"] for row in json.loads(out)}
    assert settings["enable_external_access"] == "false"
    assert settings["autoload_known_extensions"] == "false"
    assert settings["autoinstall_known_extensions"] == "false"
    assert settings["allow_persistent_secrets"] == "false"
    assert settings["lock_configuration"] == "true"
    assert 1 <= int(settings["threads"]) <= 4
    assert settings["memory_limit"] == limit


@pytest.mark.parametrize(
    ("options", "needle"),
    [
        (["--timeout", "0"], "--timeout must be > 0"),
        (["--timeout", "-3"], "--timeout must be > 0"),
        (["--timeout", "soon"], "--timeout"),
        (["--memory-limit", "lots"], "--memory-limit must be a size"),
        (["--memory-limit", "2 parsecs"], "--memory-limit must be a size"),
        (["--memory-limit", "1KB"], "at least 16MiB"),
        (["--output", "{o}/no/such/dir/x.csv", "--format", "csv"], "does not exist"),
        (["--output", "{o}/model", "--format", "csv"], "cannot write"),
        (["--format", "parquet"], "--output"),
        (["--output", "{l}", "--format", "csv"], "is the ledger itself"),
    ],
)
def test_bad_sql_options_are_one_line(
    root: Path, capsys: pytest.CaptureFixture[str], options: list[str], needle: str
) -> None:
    files = tree(root)
    args = [fill(o, root) for o in options]
    line = one_error_line(*run_cli(sql("SELECT 1 AS x", root, *args), capsys))
    assert needle in line, line
    assert tree(root) == files


def test_the_timeout_can_come_from_the_environment(
    root: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SIEVE_SQL_TIMEOUT", "0.5")
    started = time.monotonic()
    code, out, err = run_cli(sql("SELECT count(*) FROM range(100000000000000)", root), capsys)
    assert "query stopped after 0.5 s (--timeout)" in one_error_line(code, out, err)
    assert time.monotonic() - started < 30


def test_a_query_that_ignores_the_interrupt_ends_the_process_soon_after_the_timeout(
    root: Path,
) -> None:
    # one jaro_winkler over two 3 MB strings runs for minutes and never checks for an interrupt
    query = "SELECT jaro_winkler_similarity(repeat('a', 3000000), repeat('b', 3000000))"
    started = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-m", "flows.cli", *sql(query, root, "--timeout", "1")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    elapsed = time.monotonic() - started
    line = one_error_line(result.returncode, result.stdout, result.stderr)
    assert "query stopped after 1 s (--timeout)" in line and "process was ended" in line
    assert elapsed < 30  # interpreter start (~3 s) + 1 s + 1 s of grace, with room for a busy CI


def guide_queries() -> list[str]:
    """Every statement of the README's and docs' SQL examples, and the ones the demo prints."""
    text = "\n".join(page.read_text() for page in GUIDE_PAGES)
    blocks = re.findall(r"```sql\n(.*?)```", text, flags=re.DOTALL)
    found = [str(s.query).strip() for b in blocks for s in duckdb.extract_statements(b)]
    return [*found, *EXAMPLE_SQL, *nightly.LOOP_SQL, "SELECT * FROM run_summary"]


def direct(root: Path, query: str) -> pl.DataFrame:
    with Ledger.open(root / "home", read_only=True) as ledger:
        return ledger.sql(query)


@pytest.mark.parametrize("fmt", ["table", "csv", "json", "parquet"])
@pytest.mark.parametrize("query", guide_queries(), ids=lambda q: q.strip().split("\n")[0][:40])
def test_each_guide_query_prints_in_every_format(
    root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], query: str, fmt: str
) -> None:
    expected = direct(root, query)
    target = tmp_path / f"out.{fmt}"
    code, _, err = run_cli(sql(query, root, "--format", fmt, "--output", str(target)), capsys)
    assert code == 0 and err == "", err
    if fmt == "csv":
        got = pl.read_csv(target, infer_schema=False)
        assert got.columns == expected.columns and got.height == expected.height
    elif fmt == "json":
        rows = json.loads(target.read_text())
        assert len(rows) == expected.height
        assert all(list(row) == expected.columns for row in rows)
    elif fmt == "parquet":
        got = pl.read_parquet(target)
        assert got.schema == expected.schema and got.height == expected.height
        if "LIMIT" not in query.upper():  # a LIMIT over tied rows may keep other rows each run
            # row order of ties and sums over threads may differ from run to run
            assert_frame_equal(got.sort(pl.all()), expected.sort(pl.all()), check_exact=False)
    else:  # a whole box (rich folds long headers over several lines, so they are not matched)
        lines = target.read_text().splitlines()
        assert lines[0].startswith("┏") and lines[-1].startswith("└")
        assert len(lines) >= 4 + expected.height


def test_list_columns_become_json_text_in_csv_and_stay_lists_in_json(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    query = "SELECT run_id, pass_rate_histogram FROM run_summary ORDER BY run_id"
    expected = direct(root, query)
    assert isinstance(expected.schema["pass_rate_histogram"], pl.List)  # the case the issue hit
    code, out, err = run_cli(sql(query, root, "--format", "csv"), capsys)
    assert code == 0 and err == "", err
    cells = pl.read_csv(out.encode(), infer_schema=False)["pass_rate_histogram"].to_list()
    assert [json.loads(c) for c in cells] == expected["pass_rate_histogram"].to_list()
    code, out, err = run_cli(sql(query, root, "--format", "json"), capsys)
    assert code == 0 and err == "", err
    assert [r["pass_rate_histogram"] for r in json.loads(out)] == expected[
        "pass_rate_histogram"
    ].to_list()


def test_types_polars_cannot_print_become_duckdbs_text(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    query = (
        "SELECT 1 AS a, 2 AS a, INTERVAL 3 DAY AS gap, union_value(k := 1) AS u, "
        "'infinity'::DATE AS never, {'x': [1, 2]} AS nested, '\\xAA'::BLOB AS raw"
    )
    code, out, err = run_cli(sql(query, root, "--format", "csv"), capsys)
    assert code == 0 and err == "", err
    assert out.splitlines() == [
        "a,a_1,gap,u,never,nested,raw",
        '1,2,3 days,"{""k"":1}",infinity,"{""x"":[1,2]}",\\xAA',
    ]
    code, out, err = run_cli(sql(query, root, "--format", "json"), capsys)
    assert code == 0 and err == "", err
    assert json.loads(out) == [
        {
            "a": 1,
            "a_1": 2,
            "gap": "3 days",
            "u": {"k": 1},
            "never": "infinity",
            "nested": {"x": [1, 2]},
            "raw": "\\xAA",
        }
    ]
    code, out, err = run_cli(sql(query, root), capsys)
    assert code == 0 and err == "" and "3 days" in out and "a_1" in out


@pytest.mark.parametrize(
    "query", ["EXPLAIN SELECT * FROM prompt_stats", "EXPLAIN (FORMAT json) SELECT 1", "SHOW TABLES"]
)
def test_plain_explain_and_show_still_work(
    root: Path, capsys: pytest.CaptureFixture[str], query: str
) -> None:
    code, out, err = run_cli(sql(query, root, "--format", "json"), capsys)
    assert code == 0 and err == "", err
    assert len(json.loads(out)) >= 1


PIVOTS = {
    "PIVOT": "PIVOT problems ON family USING count(*) GROUP BY level ORDER BY level",
    "PIVOT_WIDER": "PIVOT_WIDER problems ON family USING count(*) GROUP BY level ORDER BY level",
    "FROM ... PIVOT": (
        "FROM (SELECT family, level FROM problems) PIVOT (count(*) FOR family IN ('arith')) "
        "ORDER BY ALL"
    ),
    "a PIVOT in a subquery": (
        "SELECT * FROM (PIVOT (SELECT family, split FROM problems) ON split USING count(*)) "
        "ORDER BY ALL"
    ),
    "a PIVOT in a CTE": (
        "WITH p AS (PIVOT problems ON split USING count(*) GROUP BY family) "
        "SELECT * FROM p ORDER BY ALL"
    ),
    "a commented PIVOT": "PIVOT problems ON split USING count(*) GROUP BY level -- by level",
}


@pytest.mark.parametrize("name", list(PIVOTS))
def test_a_pivot_is_one_read_only_statement(
    root: Path, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    """DuckDB runs a PIVOT without its IN list as several statements (an enum type of the
    pivoted values, then the query), so it was refused as a statement of type MULTI; it runs
    as the query it is, gives what DuckDB gives unsandboxed, and changes nothing."""
    query = PIVOTS[name]
    files, tables = tree(root), checksums(root)
    code, out, err = run_cli(sql(query, root, "--format", "json"), capsys)
    assert code == 0 and err == "", err
    with Ledger.open(root / "home", read_only=True) as ledger:
        want = ledger.con.sql(query).pl()
    assert json.loads(out) == json.loads(want.write_json())
    assert tree(root) == files and checksums(root) == tables


# -- issue 32: a home that cannot be turned against its user, caps over the whole command ---


@pytest.fixture
def small_home(tmp_path: Path) -> Path:
    """A fresh ledger under `home/`, a file holding the secret beside it under `outside/`."""
    home = tmp_path / "home"
    Ledger.open(home).close()
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "secret.txt").write_text(SECRET + "\n")
    return home


@pytest.mark.parametrize("suffix", [".wal", ".wal.recovery", ".wal.checkpoint"])
def test_a_side_file_linked_to_a_secret_is_not_read(
    small_home: Path, capsys: pytest.CaptureFixture[str], suffix: str
) -> None:
    side = small_home / f"sieve.duckdb{suffix}"
    side.symlink_to(small_home.parent / "outside" / "secret.txt")
    query = f"SELECT content FROM read_text('{side}')"
    code, out, err = run_cli(sql(query, small_home.parent), capsys)
    line = one_error_line(code, out, err)
    assert f"{side} beside ledger" in line and "symbolic link" in line, line
    assert SECRET not in out + err


# issue 61: the side-file refusal was a text match, which a name built by the statement passed;
# DuckDB lets a connection with external access off read its database's own files by name
# (`allowed_paths`), so the sandbox disables the local file system as a whole
SPELLINGS = {
    "the log by name": "read_blob('{h}/sieve.duckdb.wal')",
    "the log in capitals": "read_blob('{h}/SIEVE.DUCKDB.WAL.recovery')",
    "the log concatenated": "read_blob('{h}/sieve' || '.duckdb.wal')",
    "the log by concat()": "read_blob(concat('{h}/sieve', '.duck', 'db', '.wal'))",
    "the log by replace()": "read_blob(replace('{h}/sieve.duckdb.xal', 'xal', 'wal'))",
    "the log by lower()": "read_blob(lower('{H}/SIEVE.DUCKDB.WAL'))",
    "the log by a detour": "read_blob('{h}/../' || 'home/./sieve.duckdb.wal')",
    "the log as text": "read_text('{h}/sieve.duck' || 'db.wal')",
    "the ledger file": "read_blob('{h}/sieve.' || 'duckdb')",
    "the home listed": "glob('{h}/' || '*')",
}


@pytest.fixture
def home_with_a_log(small_home: Path) -> Path:
    """`small_home` whose ledger has a write-ahead log (its writer ended without a checkpoint);
    a ledger opened read-only reads it and leaves it there."""
    leave_a_wal = (
        "import duckdb, os, sys\ncon = duckdb.connect(sys.argv[1])\n"
        "con.execute(\"SET checkpoint_threshold = '1TB'\")\n"
        f"con.execute(\"CREATE TABLE scratch AS SELECT '{SECRET}' AS s\")\nos._exit(0)\n"
    )
    ledger = small_home / "sieve.duckdb"
    subprocess.run([sys.executable, "-c", leave_a_wal, str(ledger)], check=True, timeout=120)
    assert (small_home / "sieve.duckdb.wal").stat().st_size > 0
    return small_home


@pytest.mark.parametrize("spelling", list(SPELLINGS))
def test_the_ledgers_files_are_unreadable_however_the_statement_names_them(
    home_with_a_log: Path, capsys: pytest.CaptureFixture[str], spelling: str
) -> None:
    home = home_with_a_log
    source = SPELLINGS[spelling].replace("{h}", str(home)).replace("{H}", str(home).upper())
    files = tree(home)
    code, out, err = run_cli(sql(f"SELECT * FROM {source}", home.parent), capsys)
    assert "reads only the ledger" in one_error_line(code, out, err)
    assert SECRET not in out + err and tree(home) == files


def test_the_lock_down_check_refuses_a_connection_that_still_reads_files(small_home: Path) -> None:
    """`lock_down` checks that the file system is off: a connection with external access off
    alone fails that check."""
    from pipeline.store.sandbox_sql import _check_no_file_reads

    con = duckdb.connect(str(small_home / "sieve.duckdb"), read_only=True)
    try:
        con.execute("SET enable_external_access = false")
        with pytest.raises(SieveError, match="still reads the ledger's files by name"):
            _check_no_file_reads(con)
    finally:
        con.close()


def test_control_external_access_off_alone_reads_the_ledgers_log(home_with_a_log: Path) -> None:
    """Without the file system disabled, the same statement does read the log: the probe above
    can fail."""
    con = duckdb.connect(str(home_with_a_log / "sieve.duckdb"), read_only=True)
    try:
        con.execute("SET enable_external_access = false")
        source = SPELLINGS["the log concatenated"].replace("{h}", str(home_with_a_log))
        (content,) = con.execute(f"SELECT content FROM {source}").fetchone() or (b"",)
    finally:
        con.close()
    assert SECRET.encode() in content


def test_a_side_file_linked_after_the_lock_down_is_still_unreadable(small_home: Path) -> None:
    """The statement check aside (a name built at run time slips past it), DuckDB itself refuses
    a side file that has become a link to a file it was not given."""
    from pipeline.store import QueryLimits, Sandbox

    side = small_home / "sieve.duckdb.wal.recovery"
    with Ledger.open(small_home, read_only=True) as ledger:
        sandbox = Sandbox(ledger.con, QueryLimits())
        side.symlink_to(small_home.parent / "outside" / "secret.txt")
        query = f"SELECT content FROM read_text('{small_home}/sieve.duck' || 'db.wal.recovery')"
        with pytest.raises(SieveError, match="reads only the ledger") as caught:
            sandbox.run(query, "text")
    assert SECRET not in str(caught.value)


@pytest.mark.integration  # 15 s
def test_settings_filled_from_the_environment_show_no_credentials(root: Path) -> None:
    env = {
        **os.environ,
        "HTTP_PROXY": f"http://user:{SECRET}@proxy.invalid:3128",
        "HTTPS_PROXY": f"http://user:{SECRET}@proxy.invalid:3128",
        "http_proxy": f"http://user:{SECRET}@proxy.invalid:3128",
        "AWS_ACCESS_KEY_ID": SECRET,
        "AWS_SECRET_ACCESS_KEY": SECRET,
        "AWS_SESSION_TOKEN": SECRET,
    }
    control = (
        "import duckdb; print(duckdb.sql(\"SELECT current_setting('http_proxy')\").fetchall())"
    )
    found = subprocess.run([sys.executable, "-c", control], env=env, capture_output=True, text=True)
    assert SECRET in found.stdout  # DuckDB does read the proxy from the environment
    queries = [
        "SELECT current_setting('http_proxy') AS p",
        "SELECT name, value FROM duckdb_settings()",
        "SELECT * FROM duckdb_settings() WHERE name ILIKE '%proxy%' OR name ILIKE '%secret%'",
    ]
    for query in queries:
        for fmt in ("table", "csv", "json"):
            result = subprocess.run(
                [sys.executable, "-m", "flows.cli", *sql(query, root, "--format", fmt)],
                env=env,
                capture_output=True,
                text=True,
                timeout=120,
            )
            assert result.returncode == 0, result.stderr
            assert SECRET not in result.stdout + result.stderr, (query, fmt)
    query = "SELECT name, value FROM duckdb_settings() WHERE name = 'http_proxy'"
    listed = subprocess.run(
        [sys.executable, "-m", "flows.cli", *sql(query, root, "--format", "json")],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert json.loads(listed.stdout) == [{"name": "http_proxy", "value": ""}]  # there, blank


def test_output_hardlinked_to_the_ledger_is_refused_and_the_ledger_kept(
    small_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ledger = small_home / "sieve.duckdb"
    before = ledger.read_bytes()
    link = small_home.parent / "x.csv"
    os.link(ledger, link)
    code, out, err = run_cli(
        sql("SELECT 1", small_home.parent, "--format", "csv", "--output", str(link)), capsys
    )
    assert "is the ledger itself" in one_error_line(code, out, err)
    assert ledger.read_bytes() == before


def test_output_replaces_a_hardlinked_name_and_leaves_the_other_name_alone(
    small_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    other = small_home.parent / "outside" / "secret.txt"
    link = small_home.parent / "out.csv"
    os.link(other, link)
    code, _, err = run_cli(
        sql("SELECT 42 AS x", small_home.parent, "--format", "csv", "--output", str(link)),
        capsys,
    )
    assert code == 0, err
    assert link.read_text() == "x\n42\n"
    assert other.read_text() == SECRET + "\n"  # written as a new file, renamed over the name
    assert sorted(p.name for p in link.parent.iterdir()) == ["home", "out.csv", "outside"]


def test_a_failed_parquet_write_leaves_the_output_path_in_place(
    small_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    full = small_home.parent / "full"
    try:  # a /dev/full of our own: writes fail with ENOSPC
        os.mknod(full, 0o666 | stat.S_IFCHR, os.makedev(1, 7))
    except PermissionError:
        pytest.skip("making a device node needs root")
    code, out, err = run_cli(
        sql("SELECT 1 AS x", small_home.parent, "--format", "parquet", "--output", str(full)),
        capsys,
    )
    assert f"cannot write {full}" in one_error_line(code, out, err)
    assert full.is_char_device()  # not unlinked


def test_a_table_cuts_a_huge_cell_with_a_note(
    small_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # rendering the whole 30 MB cell took minutes, past any --timeout
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "flows.cli",
            *sql("SELECT repeat('x', 30000000) AS big", small_home.parent, "--timeout", "30"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert len(result.stdout) < 100_000
    assert "(cut:30000000characters;use--formatcsv)" in re.sub(r"[\s│]", "", result.stdout)


def test_cut_cells_keeps_the_first_characters_and_names_the_length() -> None:
    import pyarrow as pa

    from flows.cli.query import CELL_CHARS, _cut_cells

    batch = pa.record_batch({"t": ["a" * (CELL_CHARS + 5), "short", None], "n": [1, 2, 3]})
    cut = _cut_cells(batch)
    assert cut.column("t").to_pylist() == [
        "a" * CELL_CHARS + f" ... (cut: {CELL_CHARS + 5} characters; use --format csv)",
        "short",
        None,
    ]
    assert cut.column("n").to_pylist() == [1, 2, 3]


def test_the_timeout_covers_writing_the_result(small_home: Path) -> None:
    """A body that writes the result past the deadline is ended by `on_stuck`, and a body that
    finishes late still fails with the timeout line."""
    from pipeline.store import QueryLimits, Sandbox

    called: list[str] = []
    limits = QueryLimits(timeout_s=0.2)
    with Ledger.open(small_home, read_only=True) as ledger:
        sandbox = Sandbox(ledger.con, limits, on_stuck=called.append)
        late = pytest.raises(SieveError, match=r"query stopped after 0.2 s \(--timeout\)")
        with late, sandbox.stream("SELECT 1 AS x", "text") as batches:
            assert [b.num_rows for b in batches] == [1]
            for _ in range(600):  # the writing that does not return (a slow render)
                if called:
                    break
                time.sleep(0.05)
    assert len(called) == 1 and "--timeout" in called[0]


# runs `sieve` and then prints the process's peak resident memory (VmHWM, kB), which, unlike a
# child's ru_maxrss, does not count the pages of the test process it was forked from
_PEAK = """
import atexit, sys
from flows import cli
def peak():
    status = open("/proc/self/status").read()
    sys.stderr.write("VmHWM " + status.split("VmHWM:")[1].split()[0] + "\\n")
atexit.register(peak)
sys.argv = ["sieve", *sys.argv[1:]]
cli.main()
"""


def peak_rss_mib(argv: list[str]) -> float:
    """Peak resident memory of `sieve ARGV` (which must succeed) in a child process."""
    result = subprocess.run(
        [sys.executable, "-c", _PEAK, *argv], capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr
    return int(result.stderr.split("VmHWM ")[-1].split()[0]) / 1024


@pytest.mark.skipif(sys.platform != "linux", reason="ru_maxrss in kB and RLIMIT_DATA: Linux")
@pytest.mark.parametrize("fmt", ["json", "csv"])
def test_the_memory_limit_covers_writing_the_result(small_home: Path, fmt: str) -> None:
    """150 MB of text with --memory-limit 64MB: written in batches the process grows by less
    than three times the limit (the whole result, as one JSON string, took 860 MB more)."""
    root = small_home.parent
    base = peak_rss_mib(sql("SELECT 1", root, "--format", fmt, "--output", "/dev/null"))
    query = "SELECT repeat('x', 1000) AS t FROM range(150000)"
    options = ["--format", fmt, "--memory-limit", "64MB", "--output", "/dev/null"]
    peak = peak_rss_mib(sql(query, root, *options))
    assert peak - base < 3 * 64, (base, peak)
