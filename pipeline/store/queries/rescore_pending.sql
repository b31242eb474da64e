-- The stored rollouts of the given runs not yet rescored under $version, with what judging them
-- again needs: the problem's gold answer, verifier and step context, and the run's prompt format.
WITH done AS (
    SELECT run_id, problem_id, sample_idx
    FROM rescored_verdicts
    WHERE verifier_version = $version AND list_contains($runs, run_id)
)
SELECT
    r.run_id,
    r.problem_id,
    r.sample_idx,
    coalesce(r.completion, '')                       AS completion,
    r.finish_reason,
    p.answer,
    p.verifier,
    p.question,
    p.family,
    p.params::VARCHAR                                AS params,
    s.prompt_format
FROM rollouts AS r
ANTI JOIN done USING (run_id, problem_id, sample_idx)
JOIN problems AS p USING (problem_id)
JOIN sampling_runs AS s USING (run_id)
WHERE list_contains($runs, r.run_id)
ORDER BY r.run_id, r.problem_id, r.sample_idx
