-- Measured difficulty by family x level for the most recently sampled model revision.
WITH latest AS (
    SELECT model_revision
    FROM sampling_runs
    ORDER BY coalesce(finished_at, started_at) DESC NULLS LAST
    LIMIT 1
)
SELECT d.family, d.level, d.n_problems, d.n_samples, d.pass_rate, d.informative_share
FROM difficulty_by_family AS d
JOIN latest USING (model_revision)
ORDER BY d.family, d.level
