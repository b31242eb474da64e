-- Rejected prompts of one curriculum, by reason.
SELECT reason, count(*) AS prompts
FROM rejections
WHERE curriculum_id = $curriculum_id
GROUP BY reason
ORDER BY prompts DESC
