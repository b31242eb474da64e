-- Held-out sampled pass@1 by family x level and model revision (each revision's newest sampled
-- eval run, from the heldout_pass1 view), with the time each revision was first evaluated (for
-- column order).
WITH first_seen AS (
    SELECT model_revision, min(started_at) AS first_eval
    FROM heldout_runs
    GROUP BY model_revision
)
SELECT
    h.family,
    h.level,
    h.model_revision,
    f.first_eval,
    h.pass1 AS sampled
FROM heldout_pass1 AS h
JOIN first_seen AS f USING (model_revision)
WHERE h.mode = 'sampled' AND h.latest
