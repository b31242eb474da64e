-- The most recent sampling runs with their pass-rate histograms (ten bins), oldest first.
WITH recent AS (
    SELECT run_id, purpose, model_revision, group_size, n_problems, started_at,
        pass_rate_histogram
    FROM run_summary
    WHERE n_problems > 0
    ORDER BY started_at DESC NULLS LAST, run_id DESC
    LIMIT $limit
)
SELECT run_id, purpose, model_revision, group_size, n_problems, pass_rate_histogram
FROM recent
ORDER BY started_at NULLS FIRST, run_id
