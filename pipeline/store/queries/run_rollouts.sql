-- The scored rollouts of the given sampling runs.
SELECT run_id, problem_id, sample_idx, reward, correct, n_tokens, finish_reason
FROM rollouts
WHERE list_contains($runs, run_id)
