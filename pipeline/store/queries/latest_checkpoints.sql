-- Registered checkpoints, newest first (the next curation samples from the first; a missing one
-- is an error, not a reason to take another). `path` is relative to the home for rows written
-- since names became home-relative (older rows hold absolute ones;
-- pipeline.core.home.from_home).
SELECT path, model_revision, train_id, step
FROM checkpoints
ORDER BY created_at DESC, step DESC
