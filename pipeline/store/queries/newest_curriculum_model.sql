-- The model the newest curriculum was curated with (where a nightly loop continues from).
SELECT curriculum_id, model, model_revision
FROM curricula
ORDER BY created_at DESC, curriculum_id DESC
LIMIT 1
