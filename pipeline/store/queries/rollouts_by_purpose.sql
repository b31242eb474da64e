-- Rollouts stored per run purpose (the run id's prefix) for the given runs: what they cost.
SELECT split_part(run_id, '-', 1) AS purpose, count(*) AS n
FROM rollouts
WHERE list_contains($runs, run_id)
GROUP BY 1
