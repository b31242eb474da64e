-- Per family x level x revision: problems sampled at temperature > 0 and how many of their
-- groups disagreed (informative for GRPO), leaving out the runs of the curation being computed
-- ($exclude) so a re-run allocates its candidates exactly as the first run did.
WITH pooled AS (
    SELECT
        r.problem_id,
        s.model_revision,
        max(r.reward) - min(r.reward) > sieve_zero_var_tol() AS informative,
        max(coalesce(s.finished_at, s.started_at)) AS last_seen
    FROM rollouts AS r
    JOIN sampling_runs AS s USING (run_id)
    WHERE coalesce(s.temperature, 1.0) > 0
      AND r.reward IS NOT NULL
      AND NOT list_contains($exclude, s.run_id)
    GROUP BY r.problem_id, s.model_revision
)
SELECT
    p.family,
    p.level,
    pooled.model_revision,
    count(*) AS seen,
    count(*) FILTER (WHERE pooled.informative) AS informative,
    max(pooled.last_seen) AS last_seen
FROM pooled
JOIN problems AS p USING (problem_id)
GROUP BY p.family, p.level, pooled.model_revision
