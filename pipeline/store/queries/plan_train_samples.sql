-- The training groups sampled by exactly the weights $revision (train_rollouts.policy: the
-- revision of the sampling weights when a checkpoint or a run's base holds them), as one pool
-- per problem for `sieve plan`: sample_idx renumbered 0.. in draw order (runs by start time,
-- then step, then each group's own sample order).
SELECT
    t.problem_id,
    (row_number() OVER (
        PARTITION BY t.problem_id ORDER BY r.started_at, t.train_id, t.step, t.sample_idx
    ) - 1)::INTEGER AS sample_idx,
    t.reward,
    t.correct,
    p.family,
    p.level
FROM train_rollouts AS t
LEFT JOIN train_runs AS r USING (train_id)
LEFT JOIN problems AS p USING (problem_id)
WHERE t.policy = $revision
ORDER BY t.problem_id, sample_idx
