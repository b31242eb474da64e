"""Training: what `sieve train` and `sieve bootstrap` run around the trainer.

`trainee` resolves what a run trains and loads the policy, `recorder` writes what the trainer's
hooks report, `curriculum_batches` is the batch source and reward, `replay` reads stored
curation samples to train on, `lineage` says which model a job starts from, `settings` and
`selection_settings` are the recipe's fields, and `bootstrap` (with `bootstrap_settings`) trains
the tiny policy supervised.

Test: `.venv/bin/pytest tests/test_train.py tests/test_replay.py tests/test_selection_settings.py
tests/policy/test_bootstrap.py -q`.
"""
