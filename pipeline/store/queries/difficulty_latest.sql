-- Measured pass rate by family x level for the three most recently sampled model revisions,
-- one column per revision (newest first): the calibration view of `sieve stats`.
WITH recent AS (
    SELECT model_revision, max(coalesce(finished_at, started_at)) AS seen
    FROM sampling_runs
    GROUP BY model_revision
    ORDER BY seen DESC NULLS LAST
    LIMIT 3
), ranked AS (
    SELECT model_revision, row_number() OVER (ORDER BY seen DESC NULLS LAST) AS r FROM recent
)
SELECT
    d.family,
    d.level,
    round(max(d.pass_rate) FILTER (WHERE k.r = 1), 3) AS newest,
    round(max(d.pass_rate) FILTER (WHERE k.r = 2), 3) AS previous,
    round(max(d.pass_rate) FILTER (WHERE k.r = 3), 3) AS before_that,
    sum(d.n_samples) FILTER (WHERE k.r = 1) AS newest_samples
FROM difficulty_by_family AS d
JOIN ranked AS k USING (model_revision)
GROUP BY d.family, d.level
ORDER BY d.family, d.level
