-- Checkpoints descended from one model revision, newest first: the checkpoints of train runs
-- whose base is $revision or a checkpoint descended from it (recursively), of finished runs only
-- (a crashed night's checkpoints are resumed by its re-run, not trained from as a new base).
-- `path` is relative to the home for rows written since names became home-relative (older rows
-- hold absolute ones; pipeline.core.home.from_home).
WITH RECURSIVE lineage(revision) AS (
    SELECT CAST($revision AS VARCHAR)
    UNION
    SELECT c.model_revision
    FROM lineage AS l
    JOIN train_runs AS t ON t.base_revision = l.revision
    JOIN checkpoints AS c ON c.train_id = t.train_id
)
SELECT c.path, c.model_revision, c.train_id, c.step
FROM checkpoints AS c
JOIN train_runs AS t ON t.train_id = c.train_id
WHERE t.base_revision IN (SELECT revision FROM lineage)
  AND t.status = 'finished'
ORDER BY c.created_at DESC, c.step DESC
