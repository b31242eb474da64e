"""Sieve's data pipeline: problems, scoring, the DuckDB ledger, sampling, selection, the policy,
and the jobs over them.

Imports flow one way (flows -> pipeline -> grpo_core); the layers are in docs/architecture.md.
"""

__version__ = "0.1.0"
