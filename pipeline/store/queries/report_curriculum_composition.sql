-- Items of one curriculum by stage x family x level.
SELECT
    i.stage,
    p.family,
    p.level,
    count(*) AS n_items,
    sum(i.group_size) AS rollouts_per_pass
FROM curriculum_items AS i
JOIN problems AS p USING (problem_id)
WHERE i.curriculum_id = $curriculum_id
GROUP BY i.stage, p.family, p.level
ORDER BY i.stage, p.family, p.level
