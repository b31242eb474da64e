-- The scored rollouts of the given sampling runs, with each rollout's fragment verdicts in text
-- order (`step_correct`, from rollout_steps; NULL for a rollout without fragments).
WITH steps AS (
    SELECT run_id, problem_id, sample_idx, list(correct ORDER BY step_index) AS step_correct
    FROM rollout_steps
    WHERE list_contains($runs, run_id)
    GROUP BY run_id, problem_id, sample_idx
)
SELECT r.run_id, r.problem_id, r.sample_idx, r.reward, r.correct, r.n_tokens, r.finish_reason,
    s.step_correct
FROM rollouts AS r
LEFT JOIN steps AS s USING (run_id, problem_id, sample_idx)
WHERE list_contains($runs, r.run_id)
