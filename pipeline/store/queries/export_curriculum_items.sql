-- Every item of one curriculum with its problem, in training order (the export's rows).
SELECT
    i.problem_id,
    i.position,
    i.stage,
    i.group_size,
    i.weight,
    i.p_mean,
    i.p_low,
    i.p_high,
    i.reason,
    p.family,
    p.level,
    p.question,
    p.answer,
    p.verifier,
    p.split,
    p.source
FROM curriculum_items AS i
JOIN problems AS p USING (problem_id)
WHERE i.curriculum_id = $curriculum_id
ORDER BY i.position
