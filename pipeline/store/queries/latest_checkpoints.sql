-- Registered checkpoints, newest first (the next curation samples from the first that exists).
SELECT path
FROM checkpoints
ORDER BY created_at DESC, step DESC
