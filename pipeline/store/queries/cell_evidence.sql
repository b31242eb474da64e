-- Per family x level: what curation (screen/refine groups, sampled at temperature > 0) and what
-- training (train_group_stats: every step's group of a problem) have seen, side by side, so the
-- next night's allocation can be read against both (`sieve stats`). A group is informative by
-- the one rule (sieve_uninformative on its reward range, as in both views). `training_skips`:
-- groups the trainer's zero-variance skip did not sample (train_group_stats rows with skipped).
WITH groups AS (
    SELECT 'curation' AS source, g.problem_id, g.n, g.k, NOT g.zero_variance AS informative,
        false AS skipped
    FROM group_stats AS g
    JOIN sampling_runs AS s USING (run_id)
    WHERE g.purpose IN ('screen', 'refine') AND coalesce(s.temperature, 1.0) > 0
    UNION ALL
    SELECT 'training', t.problem_id, t.n, t.k, t.informative, t.skipped
    FROM train_group_stats AS t
),
cells AS (
    SELECT
        g.source,
        p.family,
        p.level,
        count(DISTINCT g.problem_id) FILTER (WHERE NOT g.skipped) AS prompts,
        sum(g.n) AS samples,
        round(sum(g.k) / nullif(sum(g.n), 0), 3) AS pass,
        round(avg(CASE WHEN g.informative THEN 1.0 ELSE 0.0 END) FILTER (WHERE NOT g.skipped), 3)
            AS informative,
        count(*) FILTER (WHERE g.skipped) AS skips
    FROM groups AS g
    JOIN problems AS p USING (problem_id)
    GROUP BY g.source, p.family, p.level
)
SELECT
    family,
    level,
    any_value(prompts) FILTER (WHERE source = 'curation') AS curation_prompts,
    any_value(samples) FILTER (WHERE source = 'curation') AS curation_samples,
    any_value(pass) FILTER (WHERE source = 'curation') AS curation_pass,
    any_value(informative) FILTER (WHERE source = 'curation') AS curation_informative,
    any_value(prompts) FILTER (WHERE source = 'training') AS training_prompts,
    any_value(samples) FILTER (WHERE source = 'training') AS training_samples,
    any_value(pass) FILTER (WHERE source = 'training') AS training_pass,
    any_value(informative) FILTER (WHERE source = 'training') AS training_informative,
    any_value(skips) FILTER (WHERE source = 'training') AS training_skips
FROM cells
GROUP BY family, level
ORDER BY family, level
