-- The chosen metrics of the most recent training runs (runs with metrics but no train_runs row
-- count as oldest), in step order; non-finite values are left out of the curves.
WITH recent AS (
    SELECT m.train_id, any_value(t.started_at) AS started_at
    FROM train_metrics AS m
    LEFT JOIN train_runs AS t USING (train_id)
    GROUP BY m.train_id
    ORDER BY started_at DESC NULLS LAST, m.train_id DESC
    LIMIT $limit
)
SELECT m.train_id, m.step, m.name, m.value
FROM train_metrics AS m
JOIN recent AS r USING (train_id)
WHERE list_contains($names, m.name)
  AND isfinite(m.value)
ORDER BY m.train_id, m.name, m.step
