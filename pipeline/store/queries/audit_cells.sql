-- The family x level cells of the given runs' verifier audit that hold a disagreement, highest
-- rate first (then most disagreements); at most $limit rows.
SELECT
    family,
    level,
    sum(audited)::BIGINT                             AS audited,
    sum(compared)::BIGINT                            AS compared,
    sum(disagreements)::BIGINT                       AS disagreements,
    sum(disagreements) / nullif(sum(compared), 0)    AS disagreement_rate
FROM verifier_audit_rates
WHERE list_contains($runs, run_id)
GROUP BY family, level
HAVING sum(disagreements) > 0
ORDER BY disagreement_rate DESC, disagreements DESC, family, level
LIMIT $limit
