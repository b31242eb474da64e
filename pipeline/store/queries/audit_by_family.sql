-- The verifier audit of the given runs by family: audited rollouts, guessed verdicts among them,
-- rollouts with both verdicts, disagreements and their rate (over `compared`), worst first.
SELECT
    family,
    sum(audited)::BIGINT                             AS audited,
    sum(guesses)::BIGINT                             AS guesses,
    sum(compared)::BIGINT                            AS compared,
    sum(disagreements)::BIGINT                       AS disagreements,
    sum(second_failed)::BIGINT                       AS second_failed,
    sum(disagreements) / nullif(sum(compared), 0)    AS disagreement_rate
FROM verifier_audit_rates
WHERE list_contains($runs, run_id)
GROUP BY family
ORDER BY disagreement_rate DESC NULLS LAST, family
