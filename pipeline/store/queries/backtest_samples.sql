-- The screen and refine samples of one model revision, as one pool per problem: sample_idx
-- renumbered 0.. in draw order (runs by start time, then each run's own sample order), so a
-- prompt's screen samples come first and its refine samples after them. $runs: only these
-- runs (one curation's screen and refine), or every run of the revision when it is empty.
WITH runs AS (
    SELECT run_id, started_at
    FROM sampling_runs
    WHERE model_revision = $revision
      AND purpose IN ('screen', 'refine')
      AND coalesce(temperature, 1.0) > 0
      AND (len($runs) = 0 OR list_contains($runs, run_id))
)
SELECT
    r.problem_id,
    (row_number() OVER (
        PARTITION BY r.problem_id ORDER BY runs.started_at, r.run_id, r.sample_idx
    ) - 1)::INTEGER AS sample_idx,
    r.reward,
    r.correct,
    p.family,
    p.level
FROM rollouts AS r
JOIN runs USING (run_id)
LEFT JOIN problems AS p USING (problem_id)
ORDER BY r.problem_id, sample_idx
