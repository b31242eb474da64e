"""The jobs over the pipeline's parts, one folder a job, and the pieces only jobs share.

- `curate/`: a curation's steps (`curation`), sharded in `shards`, its verifier audit (`audit`),
  re-scoring (`rescore`), and `rollouts`, which records every sampling job's scored groups;
- `train/`: a training run's steps and recorder (`trainee`, `recorder`), its batches
  (`curriculum_batches`), curation replay (`replay`), settings and recipes (`settings`,
  `selection_settings`), starting model (`lineage`), and the tiny policy's bootstrap
  (`bootstrap`, `bootstrap_settings`);
- `analysis/`: backtests of prompt-selection policies (`backtest`, over `backtest_pool` and
  `backtest_arms`), `sieve plan`'s forecast per policy (`policy_forecast`), held-out evaluation
  (`evaluate`) and the ledger's tables (`stats`);
- `data/`: problems into the ledger (`intake`), curricula out (`export`), and the demo's first
  part (`demo`);
- `report/`: the HTML report.

The top layer inside `pipeline/`: a job may import any pipeline package and other jobs, and
nothing below imports a job; `flows/` runs them.

Test: `.venv/bin/pytest tests/test_layers.py -q` (the layering); each job has its own test file.
"""
