"""The jobs over the pipeline's parts, and the pieces only jobs share.

One module a job: curation (`curate`, sharded in `shards`), its verifier audit (`audit`),
re-scoring (`rescore`), backtests and `sieve plan` (`backtest`, `plan`), the tiny policy's
bootstrap (`bootstrap`), held-out evaluation (`evaluate`), a training run's steps and recorder
(`trainee`, `recorder`, with its batches `curriculum_batches`, curation replay `replay`, settings
`recipes` and starting model `lineage`), export (`export`), the HTML report (`report/`) and the
demo's first part (`demo`); `rollouts` records every sampling job's scored groups. The top layer
inside `pipeline/`: a job may import any pipeline package and other jobs, and nothing below
imports a job; `flows/` runs them.

Test: `.venv/bin/pytest tests/test_layers.py -q` (the layering); each job has its own test file.
"""
