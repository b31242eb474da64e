-- Held-out pass@1 by family x level of the eval runs in $runs (at most one greedy and one
-- sampled run), side by side. pass@1, the mode and verifier errors (counted as wrong, and in
-- `errors`) are defined once, in the heldout_pass1 view (migration 0005).
SELECT
    family,
    level,
    max(problems)                                    AS problems,
    max(pass1) FILTER (WHERE mode = 'greedy')        AS greedy,
    max(pass1) FILTER (WHERE mode = 'sampled')       AS sampled,
    sum(errors)::BIGINT                              AS errors
FROM heldout_pass1
WHERE list_contains($runs::VARCHAR[], run_id)
GROUP BY family, level
ORDER BY family, level
