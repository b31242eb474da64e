-- The difficulty model's calibration (view selection_calibration) of the $limit most recent
-- training runs it picked for (runs without a train_runs row count as oldest), a row per
-- quarter of each run's steps: predicted vs realised informative share, rounded for reading.
WITH recent AS (
    SELECT c.train_id, any_value(t.started_at) AS started_at
    FROM selection_calibration AS c
    LEFT JOIN train_runs AS t USING (train_id)
    GROUP BY c.train_id
    ORDER BY started_at DESC NULLS LAST, c.train_id DESC
    LIMIT $limit
)
SELECT
    c.train_id,
    c.quarter,
    c.first_step || '-' || c.last_step         AS steps,
    c.groups,
    round(c.predicted_informative, 3)          AS predicted,
    round(c.realised_informative, 3)           AS realised,
    round(c.abs_error, 3)                      AS abs_error
FROM selection_calibration AS c
JOIN recent AS r USING (train_id)
ORDER BY r.started_at DESC NULLS LAST, c.train_id DESC, c.quarter
