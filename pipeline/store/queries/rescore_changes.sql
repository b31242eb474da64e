-- Per family, over the given runs: the rollouts rescored under $version, and how many of their
-- verdicts changed (from `verdict_changes`): right to wrong, wrong to right, and to or from a
-- verifier error (`other`).
WITH rescored AS (
    SELECT p.family, count(*) AS rescored
    FROM rescored_verdicts AS v
    JOIN problems AS p USING (problem_id)
    WHERE v.verifier_version = $version AND list_contains($runs, v.run_id)
    GROUP BY p.family
),
changed AS (
    SELECT
        family,
        count(*)                                                  AS changed,
        count(*) FILTER (WHERE old_correct AND NOT new_correct)   AS correct_to_wrong,
        count(*) FILTER (WHERE NOT old_correct AND new_correct)   AS wrong_to_correct,
        count(*) FILTER (WHERE old_correct IS NULL OR new_correct IS NULL) AS other
    FROM verdict_changes
    WHERE new_version = $version AND list_contains($runs, run_id)
    GROUP BY family
)
SELECT
    family,
    rescored::BIGINT                                 AS rescored,
    coalesce(changed, 0)::BIGINT                     AS changed,
    coalesce(correct_to_wrong, 0)::BIGINT            AS correct_to_wrong,
    coalesce(wrong_to_correct, 0)::BIGINT            AS wrong_to_correct,
    coalesce(other, 0)::BIGINT                       AS other
FROM rescored
LEFT JOIN changed USING (family)
ORDER BY family
