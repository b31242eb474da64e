"""Curation: candidates -> history prior -> screen -> refine -> curriculum, and what checks it.

`curation` holds the steps of one curation (the sequence is `flows/curate.py`), `shards` their
distributed form (workers write Parquet shards, one committer merges them), `rollouts` scores
and records every sampling run's groups (curation's, evaluation's), `audit` gives math-verify's
second opinion on a sample of the verdicts, and `rescore` re-judges stored completions with the
current verifier.

Test: `.venv/bin/pytest tests/test_curate.py tests/test_audit.py tests/test_rescore.py
tests/test_rollouts.py -q`.
"""
