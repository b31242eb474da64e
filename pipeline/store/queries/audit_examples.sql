-- A few disagreements of the given runs (guessed verdicts first, then by family, level, id), so
-- the same ledger always shows the same examples; at most $limit rows.
SELECT family, level, gold_answer, completion_excerpt, sieve_correct, sieve_reason, sieve_detail,
    second_correct, why, run_id
FROM verifier_disagreements
WHERE list_contains($runs, run_id)
ORDER BY why = 'guess' DESC, family, level, problem_id, sample_idx, run_id
LIMIT $limit
