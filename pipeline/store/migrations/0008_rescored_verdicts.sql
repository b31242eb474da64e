-- 0008: stored completions judged again by the current verifier (pipeline/rescore.py,
-- `sieve rescore`), kept beside the verdicts they were first given. A rollout's reward and
-- verdict are written once, under the verifier version its run row records, and never rewritten.
-- Forward-only: never edit this file once released; add 0009_*.sql instead.

-- One row per rollout re-judged under one verifier version: a rescore under a newer version adds
-- a second set of rows, and the older sets stay.
CREATE TABLE rescored_verdicts (
    run_id            VARCHAR NOT NULL,
    problem_id        VARCHAR NOT NULL,
    sample_idx        INTEGER NOT NULL,
    verifier_version  VARCHAR NOT NULL,       -- the version that judged the completion again
    reward            DOUBLE,                 -- NULL: the verifier failed (never silently 0)
    correct           BOOLEAN,
    reason            VARCHAR NOT NULL,       -- correct | wrong | no_answer | verifier_error
    detail            VARCHAR,                -- how the verifier decided (fast_path, ...)
    rescored_at       TIMESTAMPTZ NOT NULL
    -- natural key (run_id, problem_id, sample_idx, verifier_version), kept by the write path
    -- like rollouts' key: no index, for bulk ingest speed.
);

INSERT INTO sieve_natural_keys VALUES
    ('rescored_verdicts', ['run_id', 'problem_id', 'sample_idx', 'verifier_version']);

-- Every rescored rollout whose new verdict (`correct`, NULL for a verifier error) differs from
-- the stored one, with what it was judged on and both versions.
CREATE VIEW verdict_changes AS
SELECT
    v.run_id,
    p.family,
    p.level,
    p.answer                                         AS gold_answer,
    left(r.completion, 200)                          AS completion_excerpt,
    s.verifier_version                               AS old_version,
    r.correct                                        AS old_correct,
    r.reward                                         AS old_reward,
    v.verifier_version                               AS new_version,
    v.correct                                        AS new_correct,
    v.reward                                         AS new_reward,
    v.reason                                         AS new_reason,
    v.detail                                         AS new_detail,
    v.problem_id,
    v.sample_idx,
    v.rescored_at
FROM rescored_verdicts AS v
JOIN rollouts AS r USING (run_id, problem_id, sample_idx)
JOIN problems AS p USING (problem_id)
LEFT JOIN sampling_runs AS s USING (run_id)
WHERE r.correct IS DISTINCT FROM v.correct;
