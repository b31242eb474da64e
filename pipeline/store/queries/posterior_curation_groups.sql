-- The curation groups the difficulty model counts as evidence (pipeline.selection.evidence):
-- every screen or refine group sampled at temperature > 0 of a train-split problem, with k
-- correct of n, its cell (family level) and the revision that sampled it. $revisions: only
-- those sampled by these revisions (NULL: every revision); $exclude: sampling runs left out.
SELECT
    g.problem_id,
    p.family || ' ' || p.level AS cell,
    g.k::DOUBLE AS k,
    g.n::DOUBLE AS n,
    s.model_revision AS revision
FROM group_stats AS g
JOIN sampling_runs AS s USING (run_id)
JOIN problems AS p USING (problem_id)
WHERE s.purpose IN ('screen', 'refine')
  AND coalesce(s.temperature, 1.0) > 0
  AND g.n > 0
  AND p.split = 'train'
  AND ($revisions IS NULL OR list_contains($revisions, s.model_revision))
  AND NOT list_contains($exclude, g.run_id)
