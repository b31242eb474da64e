-- One row per problem x run of the given runs ($runs): whether that group was zero-variance,
-- and its size (samples drawn, judged or not: what a flat group adds to the streak depends on
-- it, `grpo_core.history.visit_weight`), oldest run first (the visits a curation adds to a
-- prompt's zero-variance streak).
SELECT
    r.problem_id,
    r.run_id,
    coalesce(sieve_uninformative(max(r.reward), min(r.reward)), false) AS flat,
    count(*) AS size
FROM rollouts AS r
JOIN sampling_runs AS s USING (run_id)
WHERE list_contains($runs, r.run_id)
GROUP BY r.problem_id, r.run_id
ORDER BY min(s.started_at), r.run_id, r.problem_id
