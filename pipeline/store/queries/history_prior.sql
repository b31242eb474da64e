-- Per problem x revision: pooled samples and whether the group never disagreed, over sampled
-- (temperature > 0) runs, leaving out the runs of the curation being computed ($exclude), so a
-- re-run sees the same history as the first run. family and level (null for a problem not in
-- `problems`) let the same rows serve the per-cell candidate allocation.
SELECT
    r.problem_id,
    any_value(p.family) AS family,
    any_value(p.level) AS level,
    s.model_revision,
    count(r.reward) AS n,
    count(*) FILTER (WHERE r.correct) AS k,
    sieve_uninformative(max(r.reward), min(r.reward)) AS zero_variance,
    max(coalesce(s.finished_at, s.started_at)) AS last_seen
FROM rollouts AS r
JOIN sampling_runs AS s USING (run_id)
LEFT JOIN problems AS p USING (problem_id)
WHERE coalesce(s.temperature, 1.0) > 0
  AND NOT list_contains($exclude, s.run_id)
GROUP BY r.problem_id, s.model_revision
