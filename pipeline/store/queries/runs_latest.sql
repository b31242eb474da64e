-- The ten most recent sampling runs with their informative share.
SELECT
    run_id, purpose, model_revision, group_size, status, n_problems, n_rollouts,
    mean_pass_rate, informative_share, n_verifier_errors
FROM run_summary
ORDER BY started_at DESC NULLS LAST
LIMIT 10
