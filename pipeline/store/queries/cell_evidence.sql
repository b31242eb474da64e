-- Per family x level: what curation (screen/refine groups, sampled at temperature > 0) and what
-- training (train_group_stats: every step's group of a problem) have seen, side by side, so the
-- next night's allocation can be read against both (`sieve stats`). A group is informative by
-- the one rule (sieve_uninformative on its reward range, as in both views).
WITH curation AS (
    SELECT
        p.family,
        p.level,
        count(DISTINCT g.problem_id) AS prompts,
        count(*) AS groups,
        sum(g.n) AS samples,
        sum(g.k) / nullif(sum(g.n), 0) AS pass_rate,
        avg(CASE WHEN g.zero_variance THEN 0.0 ELSE 1.0 END) AS informative
    FROM group_stats AS g
    JOIN sampling_runs AS s USING (run_id)
    JOIN problems AS p USING (problem_id)
    WHERE g.purpose IN ('screen', 'refine') AND coalesce(s.temperature, 1.0) > 0
    GROUP BY p.family, p.level
),
training AS (
    SELECT
        p.family,
        p.level,
        count(DISTINCT t.problem_id) AS prompts,
        count(*) AS groups,
        sum(t.n) AS samples,
        sum(t.k) / nullif(sum(t.n), 0) AS pass_rate,
        avg(CASE WHEN t.informative THEN 1.0 ELSE 0.0 END) AS informative
    FROM train_group_stats AS t
    JOIN problems AS p USING (problem_id)
    GROUP BY p.family, p.level
)
SELECT
    coalesce(c.family, t.family) AS family,
    coalesce(c.level, t.level) AS level,
    c.prompts AS curation_prompts,
    c.samples AS curation_samples,
    round(c.pass_rate, 3) AS curation_pass,
    round(c.informative, 3) AS curation_informative,
    t.prompts AS training_prompts,
    t.samples AS training_samples,
    round(t.pass_rate, 3) AS training_pass,
    round(t.informative, 3) AS training_informative
FROM curation AS c
FULL OUTER JOIN training AS t USING (family, level)
ORDER BY family, level
