-- One row per problem x run of the given runs ($runs): whether that group was zero-variance,
-- oldest run first (the visits a curation adds to a prompt's zero-variance streak).
SELECT
    r.problem_id,
    r.run_id,
    coalesce(sieve_uninformative(max(r.reward), min(r.reward)), false) AS flat
FROM rollouts AS r
JOIN sampling_runs AS s USING (run_id)
WHERE list_contains($runs, r.run_id)
GROUP BY r.problem_id, r.run_id
ORDER BY min(s.started_at), r.run_id, r.problem_id
