-- Held-out pass rate by family x level, before (earliest evaluated revision) and after (latest),
-- separately for greedy (temperature 0) and sampled eval runs.
WITH eval_runs AS (
    SELECT
        run_id,
        model_revision,
        CASE WHEN coalesce(temperature, 1.0) > 0 THEN 'sampled' ELSE 'greedy' END AS mode,
        coalesce(started_at, finished_at) AS seen_at
    FROM sampling_runs
    WHERE purpose = 'eval'
), revisions AS (
    SELECT model_revision, min(seen_at) AS first_at, max(seen_at) AS last_at
    FROM eval_runs
    GROUP BY model_revision
), ends AS (
    SELECT
        arg_min(model_revision, first_at) AS before_rev,
        arg_max(model_revision, last_at) AS after_rev
    FROM revisions
), rates AS (
    SELECT
        p.family,
        p.level,
        e.mode,
        e.model_revision,
        count(r.reward) AS n,
        count(*) FILTER (WHERE r.correct) / nullif(count(r.reward), 0) AS pass_rate
    FROM rollouts AS r
    JOIN eval_runs AS e USING (run_id)
    JOIN problems AS p USING (problem_id)
    GROUP BY p.family, p.level, e.mode, e.model_revision
)
SELECT
    r.family,
    r.level,
    r.mode,
    any_value(x.before_rev) AS before_revision,
    any_value(x.after_rev) AS after_revision,
    max(r.pass_rate) FILTER (WHERE r.model_revision = x.before_rev) AS before,
    max(r.pass_rate) FILTER (WHERE r.model_revision = x.after_rev) AS after,
    max(r.n) FILTER (WHERE r.model_revision = x.after_rev) AS after_samples
FROM rates AS r
CROSS JOIN ends AS x
GROUP BY r.family, r.level, r.mode
ORDER BY r.family, r.level, r.mode
