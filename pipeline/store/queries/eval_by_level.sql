-- Held-out pass@1 of one model revision by family x level, from its eval runs:
-- greedy = runs with one sample per problem, sampled = runs with several.
SELECT
    p.family,
    p.level,
    count(DISTINCT p.problem_id) AS problems,
    avg(coalesce(r.correct, false)::DOUBLE) FILTER (WHERE s.group_size = 1) AS greedy,
    avg(coalesce(r.correct, false)::DOUBLE) FILTER (WHERE s.group_size > 1) AS sampled
FROM rollouts r
JOIN sampling_runs s USING (run_id)
JOIN problems p USING (problem_id)
WHERE s.purpose = 'eval' AND s.model_revision = $revision
GROUP BY p.family, p.level
ORDER BY p.family, p.level
