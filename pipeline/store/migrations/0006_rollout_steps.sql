-- 0006: step verdicts per rollout (pipeline/scoring/steps.py) and two views over them.
-- Forward-only: never edit this file once released; add 0007_*.sql instead.

-- One row per checkable fragment of a rollout's completion, in text order: an `equation` step
-- (a line or sentence whose equations were checked) or, for a completion without one, a
-- `prefix` fragment (one character of the extracted answer, right iff the answer agrees with the
-- gold answer up to it). [char_start, char_end) indexes the completion's characters.
CREATE TABLE rollout_steps (
    run_id       VARCHAR NOT NULL,
    problem_id   VARCHAR NOT NULL,
    sample_idx   INTEGER NOT NULL,
    step_index   INTEGER NOT NULL,             -- 0, 1, ... within the rollout
    char_start   INTEGER NOT NULL,
    char_end     INTEGER NOT NULL,
    correct      BOOLEAN NOT NULL,
    kind         VARCHAR NOT NULL CHECK (kind IN ('equation', 'prefix'))
    -- natural key (run_id, problem_id, sample_idx, step_index), kept by the write path like
    -- rollouts' key: no index, for bulk ingest speed.
);

INSERT INTO sieve_natural_keys VALUES
    ('rollout_steps', ['run_id', 'problem_id', 'sample_idx', 'step_index']);

-- Share of correct fragments by family x level x fragment kind, per model revision.
CREATE VIEW step_accuracy_by_family AS
SELECT
    p.family,
    p.level,
    st.kind,
    s.model_revision,
    count(DISTINCT (st.run_id, st.problem_id, st.sample_idx)) AS rollouts,
    count(*)                                         AS steps,
    avg(st.correct::INTEGER)                         AS correct_share
FROM rollout_steps AS st
JOIN problems AS p USING (problem_id)
LEFT JOIN sampling_runs AS s USING (run_id)
GROUP BY p.family, p.level, st.kind, s.model_revision;

-- One row per rollout with fragments: where its first wrong one is (step_index, 0-based, and
-- its first character), NULL when every fragment is correct.
CREATE VIEW first_wrong_step AS
SELECT
    run_id,
    problem_id,
    sample_idx,
    count(*)                                         AS steps,
    count(*) FILTER (WHERE correct)                  AS correct_steps,
    min(step_index) FILTER (WHERE NOT correct)       AS first_wrong_step,
    arg_min(char_start, step_index) FILTER (WHERE NOT correct) AS first_wrong_char
FROM rollout_steps
GROUP BY run_id, problem_id, sample_idx;
