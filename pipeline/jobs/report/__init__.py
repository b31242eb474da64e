"""`build_report(ledger, output_dir)`: one self-contained HTML page about the ledger.

Why: the ledger answers any question in SQL, but the recurring ones — where did the sampling
compute land, how hard is each family for each checkpoint, what did curation keep and why, is
training moving, did held-out accuracy improve — deserve one page that opens anywhere (no
server, no JavaScript: figures are embedded as base64 PNGs and also written beside it).

`sections.py` reads the ledger (queries in pipeline/store/queries/report_*.sql), `plots.py` draws,
`page.py` assembles and writes. Run `sieve report --output DIR`.

Test: `.venv/bin/pytest tests/test_report.py -q`.
"""

from pipeline.jobs.report.page import ReportResult, build_report

__all__ = ["ReportResult", "build_report"]
