"""Analysis over what the ledger stores: backtests, `sieve plan`, held-out evaluation, stats.

`backtest` replays prompt-selection policies on stored samples (`sieve backtest`): its pools
are read and checked in `backtest_pool`, its policies are `backtest_arms`. `policy_forecast` is
`sieve plan`: what each policy would get from a pool before any training rollout. `evaluate`
measures held-out pass@1 and `stats` reads the ledger's summary tables.

Test: `.venv/bin/pytest tests/test_backtest.py tests/test_backtest_posterior.py tests/test_plan.py
tests/policy/test_evaluate.py -q`.
"""
