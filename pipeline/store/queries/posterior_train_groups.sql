-- The training groups the difficulty model counts as evidence (pipeline.selection.evidence):
-- every group a training run trained (not skipped) of a train-split problem, with k correct of
-- n, its cell (family level), its run and step. $runs: only these training runs (NULL: all).
SELECT
    t.problem_id,
    p.family || ' ' || p.level AS cell,
    t.k::DOUBLE AS k,
    t.n::DOUBLE AS n,
    t.train_id,
    t.step
FROM train_group_stats AS t
JOIN problems AS p USING (problem_id)
WHERE t.n > 0
  AND NOT t.skipped
  AND p.split = 'train'
  AND ($runs IS NULL OR list_contains($runs, t.train_id))
