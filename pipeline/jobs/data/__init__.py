"""Data in and out of the ledger: problems in (`intake`: `sieve generate`, `sieve ingest`),
curricula out for other trainers (`export`), and the demo's first part (`demo`: problems in and
a check of the verifiers).

Test: `.venv/bin/pytest tests/test_export.py tests/test_demo.py -q`.
"""
