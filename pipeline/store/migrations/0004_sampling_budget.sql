-- 0004: each sampling run records its whole decoding budget (stop strings, prompt format) beside
-- max_new_tokens / temperature / top_p, and run_summary shows the budget and how many
-- completions it cut off (finish_reason = 'length'): a chat model whose answers are truncated
-- before their \boxed{} looks "wrong" to the verifier, so the truncation share is read with
-- every pass rate.
ALTER TABLE sampling_runs ADD COLUMN stop VARCHAR[];
ALTER TABLE sampling_runs ADD COLUMN prompt_format VARCHAR;

CREATE OR REPLACE VIEW run_summary AS
WITH binned AS (
    SELECT *, least(floor(pass_rate * 10), 9)::INTEGER AS bin FROM group_stats
),
lengths AS (
    SELECT
        run_id,
        count(*) FILTER (WHERE finish_reason = 'length') AS n_truncated,
        avg(n_tokens)                                    AS mean_tokens
    FROM rollouts
    GROUP BY run_id
),
groups AS (
    SELECT
        s.run_id,
        count(g.problem_id)                              AS n_problems,
        coalesce(sum(g.n_samples), 0)                    AS n_rollouts,
        coalesce(sum(g.n_errors), 0)                     AS n_verifier_errors,
        avg(g.pass_rate)                                 AS mean_pass_rate,
        avg(CASE WHEN g.k = g.n THEN 1.0 ELSE 0.0 END)   AS solve_all_share,
        avg(CASE WHEN g.k = 0 THEN 1.0 ELSE 0.0 END)     AS solve_none_share,
        avg(CASE WHEN g.zero_variance THEN 0.0 ELSE 1.0 END) AS informative_share,
        -- groups counted by pass rate in ten bins [0, 0.1), [0.1, 0.2), ..., [0.9, 1.0]
        [count(*) FILTER (WHERE g.bin = 0), count(*) FILTER (WHERE g.bin = 1),
         count(*) FILTER (WHERE g.bin = 2), count(*) FILTER (WHERE g.bin = 3),
         count(*) FILTER (WHERE g.bin = 4), count(*) FILTER (WHERE g.bin = 5),
         count(*) FILTER (WHERE g.bin = 6), count(*) FILTER (WHERE g.bin = 7),
         count(*) FILTER (WHERE g.bin = 8), count(*) FILTER (WHERE g.bin = 9)]
                                                         AS pass_rate_histogram
    FROM sampling_runs AS s
    LEFT JOIN binned AS g USING (run_id)
    GROUP BY s.run_id
)
SELECT
    s.run_id,
    s.purpose,
    s.model_revision,
    s.group_size,
    s.status,
    s.started_at,
    s.finished_at,
    g.n_problems,
    g.n_rollouts,
    g.n_verifier_errors,
    g.mean_pass_rate,
    g.solve_all_share,
    g.solve_none_share,
    g.informative_share,
    g.pass_rate_histogram,
    s.max_new_tokens,
    s.temperature,
    s.top_p,
    s.prompt_format,
    coalesce(l.n_truncated, 0)                           AS n_truncated,
    l.n_truncated / nullif(g.n_rollouts, 0)              AS truncated_share,
    l.mean_tokens
FROM sampling_runs AS s
JOIN groups AS g USING (run_id)
LEFT JOIN lengths AS l USING (run_id);
