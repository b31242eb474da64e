-- A few changed verdicts of the given runs under $version (by family, level, id), so the same
-- ledger always shows the same examples; at most $limit rows.
SELECT family, level, gold_answer, completion_excerpt, old_version, old_correct, new_correct,
    new_reason, new_detail, run_id
FROM verdict_changes
WHERE new_version = $version AND list_contains($runs, run_id)
ORDER BY family, level, problem_id, sample_idx, run_id
LIMIT $limit
