"""Adapters that let other trainers use Sieve's pieces (a TRL reward function, a verl sampler,
the dataset card `sieve export` writes, the ledger posterior's selection inside TRL and verl).

Why a separate package: `pipeline` must not depend on TRL; these modules only import what the
caller's trainer already has, and only when used.

Test: `.venv/bin/pytest tests/integrations -q`.
"""
