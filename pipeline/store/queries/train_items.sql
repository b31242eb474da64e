-- The items of one curriculum with their problems, in training order (stage, then position).
SELECT
    i.problem_id, i.stage, i.position, i.group_size, i.weight, i.p_mean, i.reason,
    p.question, p.answer, p.verifier, p.family, p.level, CAST(p.params AS VARCHAR) AS params
FROM curriculum_items i
JOIN problems p USING (problem_id)
WHERE i.curriculum_id = $curriculum_id
ORDER BY i.stage, i.position
