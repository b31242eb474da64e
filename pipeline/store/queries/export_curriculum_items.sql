-- Every item of one curriculum with its problem and the evidence it was kept on, in training
-- order (the export's rows). $runs are the curation's own screen and refine runs: n_samples and
-- n_correct count their rollouts of the problem (0 for an item replayed from an earlier
-- curriculum), verifier_version is what judged them, model_revision the weights they came from.
WITH runs AS (
    SELECT run_id, verifier_version
    FROM sampling_runs
    WHERE list_contains($runs, run_id)
),
samples AS (
    SELECT
        r.problem_id,
        count(*) AS n_samples,
        count(*) FILTER (WHERE r.correct) AS n_correct
    FROM rollouts AS r
    JOIN runs USING (run_id)
    GROUP BY r.problem_id
),
judged_by AS (
    SELECT string_agg(DISTINCT verifier_version, ' | ' ORDER BY verifier_version) AS version
    FROM runs
)
SELECT
    i.problem_id,
    i.position,
    i.stage,
    i.group_size,
    i.weight,
    i.p_mean,
    i.p_low,
    i.p_high,
    i.reason,
    p.family,
    p.level,
    p.question,
    p.answer,
    p.verifier,
    p.split,
    p.source,
    p.params,
    coalesce(s.n_samples, 0)::INTEGER AS n_samples,
    coalesce(s.n_correct, 0)::INTEGER AS n_correct,
    c.model_revision,
    (SELECT version FROM judged_by) AS verifier_version,
    i.curriculum_id
FROM curriculum_items AS i
JOIN problems AS p USING (problem_id)
JOIN curricula AS c USING (curriculum_id)
LEFT JOIN samples AS s USING (problem_id)
WHERE i.curriculum_id = $curriculum_id
ORDER BY i.position
