-- 0012: the prompts a training step skipped (grpo_core.history.ZeroVarSkip, GRESO-style: a
-- prompt whose recent groups were all zero-variance is skipped with a probability that grows
-- with its streak), written by pipeline/train.py in the same transaction as the step's metrics.
-- train_group_stats gains them as rows with `skipped` true and no samples (n = 0, every reward
-- statistic NULL), so one view answers "what did step s do with problem p"; the stored queries
-- that read evidence from it (history_prior, zero_var_streaks, cell_evidence) leave them out: a
-- skip observes nothing. train_prompt_trajectory counts them apart (`steps_skipped`).
-- Forward-only: never edit this file once released; add a new numbered file instead.

CREATE TABLE train_skips (
    train_id    VARCHAR NOT NULL,
    step        INTEGER NOT NULL,     -- the optimiser step whose batch drew the problem
    problem_id  VARCHAR NOT NULL,
    streak      INTEGER NOT NULL,     -- zero-variance visits in a row before this step
    p_skip      DOUBLE NOT NULL       -- the skip probability that streak gave
    -- natural key (train_id, step, problem_id), kept by the write path (replace on a resumed
    -- step)
);

INSERT INTO sieve_natural_keys VALUES ('train_skips', ['train_id', 'step', 'problem_id']);

CREATE OR REPLACE VIEW train_group_stats AS
SELECT
    train_id,
    step,
    problem_id,
    any_value(policy)                                AS policy,
    count(*)                                         AS n_samples,
    count(reward)                                    AS n,
    count(*) FILTER (WHERE correct)                  AS k,
    count(*) FILTER (WHERE correct) / nullif(count(reward), 0) AS pass_rate,
    avg(reward)                                      AS reward_mean,
    stddev_pop(reward)                               AS reward_std,
    NOT sieve_uninformative(max(reward), min(reward)) AS informative,
    false                                            AS skipped
FROM train_rollouts
GROUP BY train_id, step, problem_id
UNION ALL BY NAME
SELECT
    train_id,
    step,
    problem_id,
    NULL::VARCHAR                                    AS policy,
    0::BIGINT                                        AS n_samples,
    0::BIGINT                                        AS n,
    0::BIGINT                                        AS k,
    NULL::DOUBLE                                     AS pass_rate,
    NULL::DOUBLE                                     AS reward_mean,
    NULL::DOUBLE                                     AS reward_std,
    NULL::BOOLEAN                                    AS informative,
    true                                             AS skipped
FROM train_skips;

CREATE OR REPLACE VIEW train_prompt_trajectory AS
SELECT
    train_id,
    problem_id,
    count(*) FILTER (WHERE NOT skipped)              AS steps_drawn,
    min(step) FILTER (WHERE NOT skipped)             AS first_step,
    max(step) FILTER (WHERE NOT skipped)             AS last_step,
    list(pass_rate ORDER BY step) FILTER (WHERE NOT skipped) AS pass_rate_by_step,
    list(step ORDER BY step) FILTER (WHERE NOT skipped) AS steps,
    arg_min(pass_rate, step) FILTER (WHERE NOT skipped) AS first_pass_rate,
    arg_max(pass_rate, step) FILTER (WHERE NOT skipped) AS last_pass_rate,
    min(step) FILTER (WHERE k > 0)                   AS first_step_solved,
    count(*) FILTER (WHERE NOT skipped AND NOT coalesce(informative, false)) AS steps_zero_variance,
    count(*) FILTER (WHERE skipped)                  AS steps_skipped
FROM train_group_stats
GROUP BY train_id, problem_id;
