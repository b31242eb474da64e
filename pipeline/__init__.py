"""Sieve's data pipeline: problems, policy, sampling, scoring, the DuckDB ledger, selection, CLI.

Imports flow one way (flows -> pipeline -> grpo_core); nothing here imports Prefect.
"""

__version__ = "0.1.0"
