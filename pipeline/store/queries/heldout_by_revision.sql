-- Held-out sampled pass@1 (eval runs with several samples per problem) by family x level and
-- model revision, with the time each revision was first evaluated (for column order).
SELECT
    p.family,
    p.level,
    s.model_revision,
    min(s.started_at) AS first_eval,
    avg(coalesce(r.correct, false)::DOUBLE) AS sampled
FROM rollouts r
JOIN sampling_runs s USING (run_id)
JOIN problems p USING (problem_id)
WHERE s.purpose = 'eval' AND s.group_size > 1
GROUP BY p.family, p.level, s.model_revision
