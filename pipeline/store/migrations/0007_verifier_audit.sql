-- 0007: the verifier audit (pipeline/audit.py): a second opinion (math-verify on the raw
-- completion) on a seeded sample of each curation's verdicts plus every verdict the fast path
-- guessed, and views of where the two disagree.
-- Forward-only: never edit this file once released; add 0008_*.sql instead.

-- One row per audited rollout of a screen or refine run, under the verifier version that judged
-- it. `disagree` is NULL when either verdict is missing (Sieve's verifier failed, or math-verify
-- failed or timed out): such a row is audited but not compared.
CREATE TABLE verifier_audit (
    run_id            VARCHAR NOT NULL,
    problem_id        VARCHAR NOT NULL,
    sample_idx        INTEGER NOT NULL,
    verifier_version  VARCHAR NOT NULL,
    sieve_correct     BOOLEAN,                -- NULL: reason verifier_error
    sieve_reason      VARCHAR NOT NULL,       -- correct | wrong | no_answer | verifier_error
    sieve_detail      VARCHAR,                -- how Sieve decided (fast_path, math_verify, ...)
    second_correct    BOOLEAN,                -- math-verify's verdict; NULL: failed or timed out
    disagree          BOOLEAN,                -- sieve_correct <> second_correct
    why               VARCHAR NOT NULL CHECK (why IN ('sample', 'guess'))
    -- natural key (run_id, problem_id, sample_idx, verifier_version), kept by the write path
    -- like rollouts' key: no index, for bulk ingest speed.
);

INSERT INTO sieve_natural_keys VALUES
    ('verifier_audit', ['run_id', 'problem_id', 'sample_idx', 'verifier_version']);

-- Every audited rollout on which the two verdicts differ, with what it was judged on.
CREATE VIEW verifier_disagreements AS
SELECT
    p.family,
    p.level,
    p.answer                                         AS gold_answer,
    left(r.completion, 200)                          AS completion_excerpt,
    a.sieve_correct,
    a.second_correct,
    a.sieve_reason,
    a.sieve_detail,
    a.why,
    a.run_id,
    a.verifier_version,
    a.problem_id,
    a.sample_idx
FROM verifier_audit AS a
JOIN problems AS p USING (problem_id)
LEFT JOIN rollouts AS r USING (run_id, problem_id, sample_idx)
WHERE a.disagree;

-- Disagreement rate per run x verifier version x family x level: disagreements over the audited
-- rollouts that have both verdicts (`compared`). Pool cells by summing the counts.
CREATE VIEW verifier_audit_rates AS
SELECT
    a.run_id,
    a.verifier_version,
    p.family,
    p.level,
    count(*)                                         AS audited,
    count(*) FILTER (WHERE a.why = 'guess')          AS guesses,
    count(a.disagree)                                AS compared,
    count(*) FILTER (WHERE a.disagree)               AS disagreements,
    count(*) FILTER (WHERE a.second_correct IS NULL) AS second_failed,
    count(*) FILTER (WHERE a.disagree) / nullif(count(a.disagree), 0) AS disagreement_rate
FROM verifier_audit AS a
JOIN problems AS p USING (problem_id)
GROUP BY a.run_id, a.verifier_version, p.family, p.level;
