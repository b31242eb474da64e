-- The finished night $night of the lineage that holds $revision: a `nights` row whose final
-- weights are $revision or one of its ancestors (the weights it was trained from, and theirs,
-- through train_runs and checkpoints). Newest first; none when the night has not finished there.
WITH RECURSIVE ancestry(revision) AS (
    SELECT CAST($revision AS VARCHAR)
    UNION
    SELECT t.base_revision
    FROM ancestry AS a
    JOIN checkpoints AS c ON c.model_revision = a.revision
    JOIN train_runs AS t ON t.train_id = c.train_id
    WHERE t.base_revision IS NOT NULL
)
SELECT n.night, n.curriculum_id, n.train_id, n.start_revision, n.final_revision, n.finished_at
FROM nights AS n
WHERE n.night = CAST($night AS DATE)
  AND n.final_revision IN (SELECT revision FROM ancestry)
ORDER BY n.finished_at DESC
LIMIT 1
