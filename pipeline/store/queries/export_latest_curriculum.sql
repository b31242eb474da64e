-- The newest curriculum (ties broken by id, so `latest` is deterministic).
SELECT curriculum_id
FROM curricula
ORDER BY created_at DESC, curriculum_id DESC
LIMIT 1
