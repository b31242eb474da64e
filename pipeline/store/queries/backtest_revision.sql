-- The model revision of the newest screen run: what `sieve backtest` replays by default.
SELECT model_revision
FROM sampling_runs
WHERE purpose = 'screen'
ORDER BY started_at DESC NULLS LAST, run_id DESC
LIMIT 1
