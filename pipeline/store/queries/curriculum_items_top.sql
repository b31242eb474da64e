-- The first items of one curriculum, in training order, with their problems.
SELECT
    i.position, i.stage, i.group_size AS g, round(i.weight, 3) AS weight,
    round(i.p_mean, 3) AS p_mean, round(i.p_low, 3) AS p_low, round(i.p_high, 3) AS p_high,
    i.reason, p.family, p.level, p.question, p.answer
FROM curriculum_items AS i
JOIN problems AS p USING (problem_id)
WHERE i.curriculum_id = $curriculum_id
ORDER BY i.position
LIMIT $limit
