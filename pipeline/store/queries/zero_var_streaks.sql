-- Per problem: how many of its most recent groups in a row were zero-variance (sampled curation
-- runs and training steps, oldest to newest), the history of the GRESO-style skip
-- (grpo_core.history.ZeroVarSkip). A group with no judged reward counts as not zero-variance.
-- Each flat group counts by its size (`grpo_core.history.visit_weight`): one
-- whole visit from $full_group samples up (drawn, judged or not), size / $full_group below, so a
-- G = 4 screen is half a visit; `streak` is a DOUBLE (whole numbers when every group was full).
WITH visits AS (
    SELECT
        r.problem_id,
        coalesce(s.finished_at, s.started_at) AS seen_at,
        -1 AS step,
        coalesce(sieve_uninformative(max(r.reward), min(r.reward)), false) AS flat,
        count(*) AS size
    FROM rollouts AS r
    JOIN sampling_runs AS s USING (run_id)
    WHERE s.purpose IN ('screen', 'refine') AND coalesce(s.temperature, 1.0) > 0
    GROUP BY r.problem_id, s.run_id, seen_at
    UNION ALL
    SELECT
        g.problem_id,
        t.started_at AS seen_at,
        g.step,
        NOT coalesce(g.informative, true) AS flat,
        g.n_samples AS size
    FROM train_group_stats AS g
    JOIN train_runs AS t USING (train_id)
    WHERE NOT g.skipped  -- a skipped prompt was not observed
),
ordered AS (
    SELECT
        problem_id,
        flat,
        least(size, $full_group) / $full_group AS weight,
        row_number() OVER (PARTITION BY problem_id ORDER BY seen_at, step) AS i
    FROM visits
),
last_informative AS (
    SELECT problem_id, coalesce(max(i) FILTER (WHERE NOT flat), 0) AS last_i
    FROM ordered
    GROUP BY problem_id
)
SELECT
    o.problem_id,
    coalesce(sum(o.weight) FILTER (WHERE o.i > l.last_i), 0.0)::DOUBLE AS streak
FROM ordered AS o
JOIN last_informative AS l USING (problem_id)
GROUP BY o.problem_id
