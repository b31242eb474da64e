-- Stages of one curriculum: items, group sizes, weights and pass-rate range.
SELECT
    stage,
    count(*) AS items,
    count(*) FILTER (WHERE reason = 'replay') AS replay,
    min(group_size) AS min_g,
    max(group_size) AS max_g,
    sum(group_size) AS rollouts_per_pass,
    round(avg(p_mean), 3) AS mean_p,
    round(sum(weight), 2) AS total_weight
FROM curriculum_items
WHERE curriculum_id = $curriculum_id
GROUP BY stage
ORDER BY stage
