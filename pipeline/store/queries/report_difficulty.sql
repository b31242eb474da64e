-- Measured pass rate by family x level for every model revision, revisions in the order they
-- were first sampled (the heat map's columns).
WITH first_seen AS (
    SELECT model_revision, min(coalesce(started_at, finished_at)) AS seen
    FROM sampling_runs
    GROUP BY model_revision
)
SELECT
    d.family,
    d.level,
    d.model_revision,
    d.pass_rate,
    d.n_samples,
    dense_rank() OVER (ORDER BY f.seen NULLS LAST, d.model_revision) AS revision_order
FROM difficulty_by_family AS d
JOIN first_seen AS f USING (model_revision)
ORDER BY revision_order, d.family, d.level
